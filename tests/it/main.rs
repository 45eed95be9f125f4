//! Integration tests: one binary. Sims and models are the test data; `cell` runs one
//! (sim, model, seeds) cell and snapshots it into the top-level `snapshots/` folder.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

mod agreement;
mod business;
mod cli_conventions;
mod controlled;
mod conventions;
mod coverage;
mod dependencies;
mod escaping;
mod explain;
mod explain_targets;
mod explore;
mod fidelity;
mod fuzz;
mod hardening;
mod headers;
mod hunt;
mod hunt_bench;
mod keystates;
mod lesson;
mod oracle_rules;
mod packages;
mod real;
mod real_api;
mod real_hostile;
mod schemas;
mod shard;
mod sim_claims;
mod stacks;
mod thirdparty;
mod threads;
mod tidy;
mod updates;
mod verdicts;
mod verdicts3;

use idemsim::catalog;
use idemsim::model::Model;
use idemsim::run::{self, RunOptions};
use idemsim::scenario::Sim;
use idemsim::sweep::{self, Cell};

/// `npm ci --prefix PREFIX` once per `once`, when `node_modules/MARKER` is missing (the real
/// targets' packages).
fn npm_install(prefix: &str, marker: &str, once: &'static std::sync::Once) {
    once.call_once(|| {
        if root().join(prefix).join("node_modules").join(marker).exists() {
            return;
        }
        let out = Command::new("npm")
            .args(["ci", "--prefix", prefix, "--no-audit", "--no-fund"])
            .current_dir(root())
            .output()
            .expect("npm (Node.js ≥ 20) is needed for the real-target tests");
        assert!(
            out.status.success(),
            "npm ci --prefix {prefix} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn sim(rel: &str) -> Arc<Sim> {
    Arc::new(Sim::load(&root().join(rel)).unwrap())
}

fn model(name: &str) -> Arc<Model> {
    Arc::new(Model::load(&root().join("models").join(format!("{name}.toml"))).unwrap())
}

fn reference_models() -> Vec<Arc<Model>> {
    ["no-key", "check-first", "transactional"].iter().map(|m| model(m)).collect()
}

fn snapshot(name: &str, text: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(root().join("snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!(name, text));
}

fn cell_text(c: &Cell) -> String {
    serde_json::to_string_pretty(&idemsim::render::cell_json(c)).unwrap()
}

/// The reference experiment over a fixed seed range: every cell is a snapshot, and the table
/// of pass/fail is one more.
#[test]
fn article_matrix_snapshots() {
    let sims = catalog::sims_at(root().join("sims/article").to_str().unwrap()).unwrap();
    assert_eq!(sims.len(), 16);
    let models = reference_models();
    let cells = sweep::run_matrix(&sims, &models, Some(0..20), 2).unwrap();
    for c in &cells {
        snapshot(&format!("article__{}__{}", c.sim, c.model), &cell_text(c));
    }
    let totals = sweep::totals(&models, &cells);
    let summary: Vec<String> =
        totals.iter().map(|t| format!("{}: {}/{}", t.model, t.passed, t.total)).collect();
    snapshot("article__totals", &summary.join("\n"));
}

/// The transactional variant passes every reference case, on every seed: the article's result.
#[test]
fn transactional_passes_all_sixteen() {
    let sims = catalog::sims_at(root().join("sims/article").to_str().unwrap()).unwrap();
    let cells = sweep::run_matrix(&sims, &[model("transactional")], Some(0..30), 2).unwrap();
    for c in &cells {
        assert!(c.passed, "{}: {:?}", c.sim, c.first_failure);
    }
}

/// Check-first races: some seed of case 11 makes two attempts both miss the lookup.
#[test]
fn check_first_races_under_concurrency() {
    let cells = sweep::run_matrix(
        &[sim("sims/article/11-twenty-concurrent-one-process.toml")],
        &[model("check-first")],
        Some(0..60),
        1,
    )
    .unwrap();
    let c = &cells[0];
    assert!(!c.passed);
    assert!(c.rows.keys().any(|rows| *rows > 1), "{:?}", c.rows);
    assert!(c.statuses.get("500").is_some_and(|n| *n > 0), "{:?}", c.statuses);
}

/// Same seed, same build → byte-identical trace, including concurrent and two-process runs.
#[test]
fn same_seed_gives_identical_trace() {
    for rel in [
        "sims/article/11-twenty-concurrent-one-process.toml",
        "sims/article/12-twenty-concurrent-two-processes.toml",
        "sims/article/13-busy-database-503.toml",
        "sims/article/09-reply-lost-retry-same-order.toml",
    ] {
        let s = sim(rel);
        for m in reference_models() {
            for seed in 0..25 {
                let a = run::run(&s, &m, seed, RunOptions { keep_history: true }).unwrap();
                let b = run::run(&s, &m, seed, RunOptions { keep_history: true }).unwrap();
                let (ta, tb) = (a.history.unwrap().render(), b.history.unwrap().render());
                assert_eq!(ta, tb, "{rel} × {} seed {seed}", m.name);
                assert_eq!(a.report.trace_hash, b.report.trace_hash);
            }
        }
    }
}

/// A run on another thread gives the same trace as on this one.
#[test]
fn trace_does_not_depend_on_the_thread() {
    let s = sim("sims/article/12-twenty-concurrent-two-processes.toml");
    let m = model("check-first");
    let here: Vec<String> = (0..10)
        .map(|seed| run::run(&s, &m, seed, RunOptions::default()).unwrap().report.trace_hash)
        .collect();
    let there = std::thread::spawn(move || {
        (0..10)
            .map(|seed| run::run(&s, &m, seed, RunOptions::default()).unwrap().report.trace_hash)
            .collect::<Vec<_>>()
    })
    .join()
    .unwrap();
    assert_eq!(here, there);
}

/// Different seeds give different schedules (the seed reaches the simulation).
#[test]
fn seeds_change_the_schedule() {
    let s = sim("sims/article/11-twenty-concurrent-one-process.toml");
    let m = model("transactional");
    let hashes: std::collections::BTreeSet<String> = (0..10)
        .map(|seed| run::run(&s, &m, seed, RunOptions::default()).unwrap().report.trace_hash)
        .collect();
    assert!(hashes.len() > 5, "{hashes:?}");
}

/// The number of worker threads does not change any aggregate.
#[test]
fn jobs_do_not_change_the_matrix() {
    let sims = vec![
        sim("sims/article/11-twenty-concurrent-one-process.toml"),
        sim("sims/article/12-twenty-concurrent-two-processes.toml"),
    ];
    let models = reference_models();
    let one = sweep::run_matrix(&sims, &models, Some(0..40), 1).unwrap();
    let two = sweep::run_matrix(&sims, &models, Some(0..40), 2).unwrap();
    assert_eq!(one, two);
}

/// A crash at a named point kills the process: its open transaction rolls back, the client
/// sees a transport failure, the restarted process serves the retry.
#[test]
fn crash_rolls_back_and_restarts() {
    let src = r#"
[world]
client_timeout_ms = 500
[[request]]
id = "first"
key = "k1"
expect = { outcome = "transport-failure", rows_after = 0, keys_after = 0 }
[[request]]
id = "retry"
after = "first"
key = "k1"
delay_ms = 200
expect = { status = 201, replayed = false }
[[inject]]
point = "before-commit"
action = "crash"
request = "first"
restart_ms = 100
[expect]
rows = 1
"#;
    let s = Arc::new(Sim::parse(Path::new("crash.toml"), src).unwrap());
    let out = run::run(&s, &model("transactional"), 7, RunOptions { keep_history: true }).unwrap();
    let trace = out.history.unwrap().render();
    assert!(out.report.passed(), "{:?}\n{trace}", out.report.checks);
    assert!(trace.contains("process crashed") && trace.contains("process restarted"), "{trace}");
}

// ---- the command line ----

fn idemsim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_idemsim"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cli_run_passing_and_failing() {
    let (code, out, _) =
        idemsim(&["run", "01-same-key-same-content", "--model", "transactional", "--seed", "3"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.trim_end().ends_with("PASS (as specified) · safe: no violation"), "{out}");
    let (code, out, _) = idemsim(&[
        "run",
        "sims/article/01-same-key-same-content.toml",
        "--model",
        "models/no-key.toml",
    ]);
    assert_eq!(code, 1, "{out}");
    let last = out.trim_end().lines().last().unwrap();
    assert!(last.ends_with("cargo run --release -- run sims/article/01-same-key-same-content.toml --model no-key --seed 0 --trace"), "{last}");
}

/// The replay command printed for a failing cell reproduces that failure, trace for trace.
#[test]
fn printed_replay_command_reproduces_the_failure() {
    let (code, out, _) = idemsim(&[
        "matrix",
        "--sims",
        "sims/article/12-twenty-concurrent-two-processes.toml",
        "--models",
        "check-first",
        "--seeds",
        "0..10",
    ]);
    assert_eq!(code, 1, "{out}");
    let replay = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: "))
        .expect("a replay line")
        .to_string();
    let args: Vec<&str> =
        replay.strip_prefix("cargo run --release -- ").unwrap().split(' ').collect();
    let (code1, out1, _) = idemsim(&args);
    let (code2, out2, _) = idemsim(&args);
    assert_eq!((code1, code2), (1, 1), "{out1}");
    assert_eq!(out1, out2);
    assert!(out1.contains("FAIL  "), "{out1}");
}

#[test]
fn cli_matrix_json_shape() {
    let (code, out, _) = idemsim(&[
        "matrix",
        "--sims",
        "sims/article/04-new-key-new-order.toml",
        "--models",
        "no-key",
        "check-first",
        "transactional",
        "--seeds",
        "0..3",
        "--json",
    ]);
    assert_eq!(code, 0, "every reference variant passes case 4: {out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let cells = v["cells"].as_array().unwrap();
    assert!(!cells.is_empty());
    for c in cells {
        for f in [
            "model",
            "sim",
            "seeds",
            "failed_seeds",
            "first_failed_seed",
            "rows",
            "effects",
            "statuses",
        ] {
            assert!(c.get(f).is_some(), "missing {f} in {c}");
        }
    }
    for t in v["totals"].as_array().unwrap() {
        for f in ["model", "passed", "total"] {
            assert!(t.get(f).is_some());
        }
    }
}

#[test]
fn bad_sim_file_names_file_line_column_and_exits_2() {
    let dir = std::env::temp_dir().join(format!("idemsim-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("bad.toml");
    std::fs::write(&f, "[[request]]\nid = \"a\"\ncopies = 0\n").unwrap();
    let (code, _, err) = idemsim(&["run", f.to_str().unwrap(), "--model", "transactional"]);
    assert_eq!(code, 2);
    assert!(err.contains("bad.toml:3:10: copies: expected 1..=1000"), "{err}");
    std::fs::write(&f, "[[request]\nid = \"a\"\n").unwrap();
    let (code, _, err) = idemsim(&["run", f.to_str().unwrap(), "--model", "transactional"]);
    assert_eq!(code, 2);
    assert!(err.contains("bad.toml:1:"), "{err}");
    let (code, _, err) = idemsim(&["run", "01-same-key-same-content", "--model", "no-such-model"]);
    assert_eq!(code, 2);
    assert!(err.contains("no such model") && err.contains("idemsim list"), "{err}");
    let (code, _, err) = idemsim(&["run", "01-same-key-same-content", "--model", "transact"]);
    assert_eq!(code, 2);
    assert!(err.contains("did you mean transactional,"), "{err}");
    let (code, _, _) = idemsim(&["matrix", "--seeds", "5..1"]);
    assert_eq!(code, 2);
    let (code, _, _) = idemsim(&["frobnicate"]);
    assert_eq!(code, 2);
}

#[test]
fn every_shipped_file_loads() {
    for p in catalog::files_under(&root().join("models")) {
        Model::load(&p).unwrap_or_else(|e| panic!("{e}"));
    }
    for p in catalog::files_under(&root().join("sims")) {
        Sim::load(&p).unwrap_or_else(|e| panic!("{e}"));
    }
}

// ---- faults, the oracle and sweeps ----

fn all_models() -> Vec<Arc<Model>> {
    catalog::ordered_models(
        catalog::files_under(&root().join("models"))
            .iter()
            .map(|p| Arc::new(Model::load(p).unwrap()))
            .collect(),
    )
}

/// Sweep aggregates (violation counts, row and effect histograms) of every shipped model ×
/// every fault, catalogue and dependency sim over a fixed seed range.
#[test]
fn fault_and_catalogue_sims_sweep_snapshots() {
    for dir in ["faults", "catalogue", "dependencies", "business", "clients"] {
        let sims = catalog::sims_at(root().join("sims").join(dir).to_str().unwrap()).unwrap();
        assert!(sims.len() >= 2);
        let models = all_models();
        assert!(models.len() >= 15);
        let cells = sweep::run_matrix(&sims, &models, Some(0..20), 2).unwrap();
        for c in &cells {
            snapshot(&format!("{dir}__{}__{}", c.sim, c.model), &cell_text(c));
        }
    }
}

/// The catalogue's documented failures, found by simulation.
#[test]
fn catalogue_designs_fail_where_the_literature_says() {
    let run = |sim_rel: &str, m: &str| {
        sweep::run_matrix(&[sim(sim_rel)], &[model(m)], Some(0..30), 2).unwrap().remove(0)
    };
    let has = |c: &Cell, v: &str| c.violations.get(v).is_some_and(|x| x.seeds > 0);
    // claim-first without a lease: a failure leaves the key stuck in progress.
    let c = run("sims/catalogue/transient-failure.toml", "claim-first");
    assert!(has(&c, "stuck-key") && has(&c, "unfinished-intent"), "{:?}", c.violations);
    // Stripe v1 pins a transient 500 to the key.
    let c = run("sims/catalogue/transient-failure.toml", "stripe-v1");
    assert!(has(&c, "unfinished-intent") && !has(&c, "duplicate-row"), "{:?}", c.violations);
    // A lease taken over after a long pause executes twice; fencing keeps the record right.
    let lease = run("sims/catalogue/pause-past-lease.toml", "lease");
    let fenced = run("sims/catalogue/pause-past-lease.toml", "lease-fencing");
    assert!(
        has(&lease, "duplicate-row") && has(&lease, "replay-mismatch"),
        "{:?}",
        lease.violations
    );
    assert!(
        has(&fenced, "duplicate-row") && !has(&fenced, "replay-mismatch"),
        "{:?}",
        fenced.violations
    );
    // The outbox delivers twice after a relay crash unless the receiver deduplicates.
    assert!(has(&run("sims/catalogue/relay-crash.toml", "outbox"), "duplicate-effect"));
    assert!(run("sims/catalogue/relay-crash.toml", "outbox-dedupe").violations.is_empty());
    // An await inside a transaction on a shared connection: another request's unconditional
    // ROLLBACK (`rollback-any`) undoes the original's row while its stored reply survives.
    let cells = sweep::run_matrix(
        &[sim("sims/catalogue/pause-past-lease.toml")],
        &[model("transactional-async")],
        Some(0..20),
        2,
    )
    .unwrap();
    assert!(cells[0].violations.contains_key("lost-success"), "{:?}", cells[0].violations);
    // Payload-derived effect dedupe merges two real intents.
    assert!(has(
        &run("sims/catalogue/equal-payload-intents.toml", "no-key-dedupe-receiver"),
        "lost-effect"
    ));
    // In-memory inbox forgets across restarts; the database inbox does not.
    assert!(has(&run("sims/catalogue/webhook-redelivery.toml", "inbox-memory"), "duplicate-row"));
    assert!(run("sims/catalogue/webhook-redelivery.toml", "inbox").violations.is_empty());
}

/// A model written outside the repository runs as is, and its replay command names its path.
#[test]
fn model_outside_the_repository_runs_by_path() {
    let dir = std::env::temp_dir().join(format!("idemsim-ext-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("my-variant.toml");
    std::fs::write(
        &f,
        "name = \"my-variant\"\nprogram = [\"begin\", \"insert-row\", \"commit\"]\n",
    )
    .unwrap();
    let (code, out, err) =
        idemsim(&["run", "01-same-key-same-content", "--model", f.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.trim_end().ends_with(&format!("--model {} --seed 0 --trace", f.display())),
        "{out}"
    );
}

#[test]
fn bad_model_fields_name_what_is_allowed() {
    let parse = |src: &str| Model::parse(Path::new("m.toml"), src).unwrap_err().to_string();
    let e = parse("program = [\"claim\", \"insert-row\"]\n[key]\nstore = \"redis\"\n");
    assert_eq!(e, "m.toml:3:9: unknown key store `redis`; expected sqlite, cache or memory");
    let e = parse("program = [\"claim\", \"insert-row\"]\n[key]\nstore = \"cache\"\n");
    assert!(e.contains("needs key.retention_ms"), "{e}");
    let e = parse("program = [\"insert-row\"]\non_error = [\"retry\"]\n");
    assert_eq!(
        e,
        "m.toml:2:13: unknown on_error action `retry`; expected rollback, rollback-any, \
         release-claim, release-key, unlock, mark-failed or retry-transaction"
    );
    let e = parse("program = [\"insert-row\"]\n[effects]\ndedupe = \"magic\"\n");
    assert!(e.starts_with("m.toml:3:10: unknown effects.dedupe `magic`"), "{e}");
}

/// The oracle tells designs apart: the check-first race duplicates rows under a double
/// submit; transactional never does; rotating keys defeats every design, per intent.
#[test]
fn oracle_names_the_expected_violations() {
    let run = |sim_rel: &str, m: &str| {
        sweep::run_matrix(&[sim(sim_rel)], &[model(m)], Some(0..60), 2).unwrap().remove(0)
    };
    let c = run("sims/faults/double-submit.toml", "check-first");
    assert!(c.violations.get("duplicate-row").is_some_and(|v| v.seeds > 0), "{:?}", c.violations);
    let c = run("sims/faults/double-submit.toml", "transactional");
    assert!(!c.violations.contains_key("duplicate-row"), "{:?}", c.violations);
    let c = run("sims/faults/new-key-per-retry.toml", "transactional");
    assert!(c.violations.get("duplicate-row").is_some_and(|v| v.seeds > 0), "{:?}", c.violations);
    // A late retry after the key was collected: policy-permitted with a documented retention.
    let c = run("sims/faults/key-gc-late-retry.toml", "transactional-ttl");
    let v = c.violations.get("expired-duplicate-row").expect("permitted duplicate");
    assert!(v.permitted && v.seeds == c.runs, "{:?}", c.violations);
    assert!(!c.violations.contains_key("duplicate-row"));
    // Without retention the same schedule replays: no duplicate at all.
    let c = run("sims/faults/key-gc-late-retry.toml", "transactional");
    assert!(c.violations.is_empty(), "{:?}", c.violations);
}

/// Determinism over 200 seeds of schedules with crashes, restarts and network faults: each
/// seed's trace hash is the same on a second run.
#[test]
fn determinism_over_200_seeds_with_crashes() {
    for rel in ["sims/faults/crash-two-processes.toml", "sims/faults/crash-between-steps.toml"] {
        let s = sim(rel);
        let opts = sweep::SweepOptions { jobs: 2, check_determinism: true, ..Default::default() };
        let cells = sweep::run_cells(
            &[s],
            &[model("check-first"), model("transactional")],
            Some(0..200),
            &opts,
            |_, _| {},
        )
        .unwrap();
        for c in &cells {
            assert_eq!(c.runs, 200);
            assert!(
                c.nondeterministic_seeds.is_empty(),
                "{rel} × {}: {:?}",
                c.model,
                c.nondeterministic_seeds
            );
            assert!(
                c.statuses.contains_key("transport-failure"),
                "crashes happened: {:?}",
                c.statuses
            );
        }
    }
}

#[test]
fn jobs_do_not_change_sweep_aggregates() {
    let sims = catalog::sims_at(root().join("sims/faults").to_str().unwrap()).unwrap();
    let models = vec![model("check-first"), model("transactional-ttl")];
    let one = sweep::run_matrix(&sims, &models, Some(0..25), 1).unwrap();
    let two = sweep::run_matrix(&sims, &models, Some(0..25), 2).unwrap();
    assert_eq!(one, two);
}

/// A sweep's printed replay command reproduces the violation it names.
#[test]
fn sweep_replay_command_reproduces_the_violation() {
    let (code, out, _) = idemsim(&[
        "sweep",
        "double-submit",
        "--model",
        "check-first",
        "--seeds",
        "0..30",
        "--jobs",
        "2",
    ]);
    assert_eq!(code, 1, "{out}");
    let line =
        out.lines().position(|l| l.starts_with("duplicate-row")).expect("duplicate-row reported");
    let replay =
        out.lines().nth(line + 1).unwrap().trim().strip_prefix("replay: ").unwrap().to_string();
    let args: Vec<&str> =
        replay.strip_prefix("cargo run --release -- ").unwrap().split(' ').collect();
    let (_, run_out, _) = idemsim(&args);
    assert!(run_out.contains("duplicate-row: intent"), "{run_out}");
}

#[test]
fn sweep_per_seed_file_and_jobs_agree() {
    let dir = std::env::temp_dir().join(format!("idemsim-perseed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (f1, f2) = (dir.join("j1.jsonl"), dir.join("j2.jsonl"));
    let (c1, o1, _) = idemsim(&[
        "sweep",
        "dropped-replies",
        "--model",
        "no-key",
        "--seeds",
        "0..40",
        "--jobs",
        "1",
        "--per-seed",
        f1.to_str().unwrap(),
        "--json",
    ]);
    let (c2, o2, _) = idemsim(&[
        "sweep",
        "dropped-replies",
        "--model",
        "no-key",
        "--seeds",
        "0..40",
        "--jobs",
        "2",
        "--per-seed",
        f2.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!((c1, c2), (1, 1));
    // Everything but the wall-clock `speed` is the same for any number of threads.
    let strip = |o: &str| {
        let mut v: serde_json::Value = serde_json::from_str(o).unwrap();
        let speed = v.as_object_mut().unwrap().remove("speed").expect("sweep --json has speed");
        assert_eq!(speed["runs"], 40);
        assert_eq!(
            speed["simulated_requests"],
            v["statuses"].as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum::<u64>()
        );
        assert!(speed["runs_per_s"].as_f64().unwrap() > 0.0);
        v
    };
    assert_eq!(strip(&o1), strip(&o2), "aggregates differ between --jobs 1 and 2");
    let (l1, l2) = (std::fs::read_to_string(&f1).unwrap(), std::fs::read_to_string(&f2).unwrap());
    assert_eq!(l1, l2);
    let lines: Vec<serde_json::Value> =
        l1.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 40);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["seed"], i as u64);
        assert!(l["violations"].is_array() && l["rows"].is_u64());
    }
}

#[test]
fn bad_fault_rates_and_names_are_located() {
    let parse = |src: &str| Sim::parse(Path::new("f.toml"), src).unwrap_err().to_string();
    assert_eq!(
        parse("[faults]\nreply_drop = -0.1\n"),
        "f.toml:2:14: faults.reply_drop = -0.1: expected a probability in 0.0..=1.0"
    );
    assert_eq!(
        parse("[faults]\ncrash = 2\n"),
        "f.toml:2:9: faults.crash = 2: expected a probability in 0.0..=1.0"
    );
    let e = parse("[faults]\nreply_dorp = 0.1\n");
    assert!(e.starts_with("f.toml:2:1: unknown field `reply_dorp`, expected one of"), "{e}");
    let e = parse(
        "[[request]]\nid = \"a\"\n[[request]]\nid = \"b\"\nafter = \"a\"\n[[action]]\nid = \"l\"\nkind = \"hold-lock\"\nuntil = \"l\"\n",
    );
    assert!(e.contains("waits for itself"), "{e}");
}

/// A model whose key scope leaves out the user lets one user's stored reply reach another:
/// the oracle names it.
#[test]
fn scope_leak_is_named() {
    let m = Arc::new(
        Model::parse(
            Path::new("unscoped.toml"),
            "program = [\"begin\", \"lookup\", \"insert-row\", \"save-response\", \"commit\"]\n[key]\nscope = [\"operation\"]\n",
        )
        .unwrap(),
    );
    let s = Arc::new(
        Sim::parse(Path::new("two-users.toml"), "[[request]]\nid = \"alice\"\nuser = \"alice\"\nkey = \"k1\"\n[[request]]\nid = \"bob\"\nuser = \"bob\"\nkey = \"k1\"\nafter = \"alice\"\n")
            .unwrap(),
    );
    let out = run::run(&s, &m, 1, RunOptions::default()).unwrap();
    let names: Vec<&str> = out.report.violations.iter().map(|v| v.name.name()).collect();
    assert!(names.contains(&"scope-leak"), "{names:?}");
}

/// A run that cannot finish within its simulated-time bound reports the bound; it does not hang.
#[test]
fn hitting_a_bound_is_reported_not_a_hang() {
    let s = Arc::new(
        Sim::parse(
            Path::new("bounded.toml"),
            "[world]\ntime_limit_ms = 2000\nwait_budget_ms = 600000\n[[action]]\nid = \"lock\"\nkind = \"hold-lock\"\nfor_ms = 3600000\n[[request]]\nid = \"a\"\nkey = \"k1\"\ndelay_ms = 5\ntimeout_ms = 900000\n",
        )
        .unwrap(),
    );
    let out = run::run(&s, &model("transactional"), 0, RunOptions::default()).unwrap();
    assert!(!out.report.passed());
    assert!(
        out.report.bounds_hit.iter().any(|b| b.starts_with("time-limit")),
        "{:?}",
        out.report.bounds_hit
    );
    assert!(out.report.end_ms <= 2_100.0, "{}", out.report.end_ms);
}

/// A partitioned process: messages to it are lost, its clients time out, the retries reach
/// the other process.
#[test]
fn partition_cuts_a_process_off() {
    let mut lost = 0;
    for seed in 0..5 {
        let out = run::run(
            &sim("sims/faults/partition.toml"),
            &model("transactional"),
            seed,
            RunOptions { keep_history: true },
        )
        .unwrap();
        let trace = out.history.unwrap().render();
        assert!(trace.contains("server-1 partitioned"), "{trace}");
        lost += trace.matches("message lost in a partition").count();
        assert!(out.report.violations.is_empty(), "{:?}", out.report.violations);
    }
    assert!(lost > 0, "messages to the cut-off process are lost");
}

/// The teaching demo: the check-first race as a sequence diagram, held as a snapshot.
#[test]
fn check_first_race_sequence_diagram() {
    let out = run::run(
        &sim("sims/teaching/check-first-race.toml"),
        &model("check-first"),
        13,
        RunOptions { keep_history: true },
    )
    .unwrap();
    assert!(!out.report.passed());
    let names: Vec<&str> = out.report.violations.iter().map(|v| v.name.name()).collect();
    assert_eq!(names, ["duplicate-row"]);
    snapshot(
        "teaching__check-first-race__check-first__seed-13.mermaid",
        &out.history.unwrap().mermaid(),
    );
}

/// A fault kind with rate 0 draws nothing from the RNG: spelling out zero rates leaves every
/// schedule (trace hash) as it was.
#[test]
fn zero_rate_faults_draw_nothing() {
    let base = std::fs::read_to_string(root().join("sims/teaching/check-first-race.toml")).unwrap();
    let zeroed = format!(
        "{base}\n[faults]\nrequest_drop = 0.0\nreply_drop = 0.0\nreply_drop_after_commit = 0.0\n\
         duplicate = 0.0\ndelay = 0.0\ncrash = 0.0\ncommit_lost = 0.0\n\
         [faults.effects]\ndrop = 0.0\nack_drop = 0.0\nduplicate = 0.0\n\
         error_after_success = 0.0\ndelay = 0.0\n\
         [faults.cache]\nunavailable = 0.0\nevict = 0.0\nrestart = 0.0\nreply_drop = 0.0\n"
    );
    let a = Arc::new(Sim::parse(Path::new("a.toml"), &base).unwrap());
    let b = Arc::new(Sim::parse(Path::new("a.toml"), &zeroed).unwrap());
    let mut models = reference_models();
    models.extend(["ttl-cache-set-nx", "outbox"].map(model));
    for m in models {
        for seed in 0..10 {
            let ha = run::run(&a, &m, seed, RunOptions::default()).unwrap().report.trace_hash;
            let hb = run::run(&b, &m, seed, RunOptions::default()).unwrap().report.trace_hash;
            assert_eq!(ha, hb, "{} seed {seed}", m.name);
        }
    }
}
