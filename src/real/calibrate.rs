//! `calibrate`: measure, against a real target on the machine at hand, the times a sim's
//! `[world.event_loop]` draws, from the target's instrumentation lines (`IDEMSIM_TRACE`,
//! `docs/targets.md`), and write them as a profile a sim can name (`profile = "…"`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;

use crate::model::Dist;

/// One instrumentation line of a target.
#[derive(Debug, Deserialize)]
struct Line {
    t_us: f64,
    #[serde(default)]
    attempt: Option<String>,
    ev: String,
    #[serde(default)]
    accepted_us: Option<f64>,
}

/// What one round's instrumentation shows (µs).
#[derive(Debug, Default)]
pub struct RoundTimes {
    /// The first connection: its accept to the next accept.
    pub first_accept: Option<f64>,
    /// Later accept-to-accept gaps.
    pub accepts: Vec<f64>,
    /// The first request: read to lookup.
    pub first_handler: Option<f64>,
    /// Later requests: read to lookup.
    pub handlers: Vec<f64>,
    /// An autocommitted INSERT (or a COMMIT) that wrote: the statement and its fsync.
    pub commits: Vec<f64>,
}

/// Read one round's instrumentation file.
pub fn round_times(trace: &Path) -> Result<RoundTimes, String> {
    let text = crate::input::read_file(trace, "instrumentation").map_err(|e| e.to_string())?;
    let mut by: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    let mut accepts = Vec::new();
    let mut others = Vec::new();
    for (i, l) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let line: Line = serde_json::from_str(l).map_err(|e| {
            format!("{}:{}: not an instrumentation line: {e}", trace.display(), i + 1)
        })?;
        let who = line.attempt.clone().unwrap_or_default();
        if line.ev == "read"
            && let Some(a) = line.accepted_us
        {
            accepts.push(a);
        }
        others.push(line.t_us);
        by.entry(who).or_default().entry(line.ev).or_insert(line.t_us);
    }
    accepts.sort_by(f64::total_cmp);
    let mut r = RoundTimes::default();
    let gaps: Vec<f64> = accepts.windows(2).map(|w| w[1] - w[0]).collect();
    r.first_accept = gaps.first().copied();
    // Accept-only iterations: consecutive accepts with no other event of the process between.
    r.accepts = accepts
        .windows(2)
        .skip(1)
        .filter(|w| !others.iter().any(|t| *t > w[0] && *t < w[1]))
        .map(|w| w[1] - w[0])
        .collect();
    let mut reqs: Vec<&BTreeMap<String, f64>> =
        by.values().filter(|e| e.contains_key("read")).collect();
    reqs.sort_by(|a, b| a["read"].total_cmp(&b["read"]));
    for (i, e) in reqs.iter().enumerate() {
        if let Some(l) = e.get("lookup") {
            let d = l - e["read"];
            if i == 0 { r.first_handler = Some(d) } else { r.handlers.push(d) }
        }
        let before = e.get("resume").or(e.get("lookup")).or(e.get("read"));
        if let (Some(b), Some(ins)) = (before, e.get("insert")) {
            r.commits.push(ins - b);
        }
    }
    Ok(r)
}

/// The measured values' quantiles (µs → a distribution), if any were measured.
fn measured(v: &[f64]) -> Option<(Dist, usize)> {
    let us: Vec<u64> =
        v.iter().filter(|x| x.is_finite() && **x >= 0.0).map(|x| x.round() as u64).collect();
    Dist::measured(&us).map(|d| (d, us.len()))
}

/// One line `name = …  # how`: the measured quantiles, else the default stack's value,
/// saying so.
fn line(o: &mut String, name: &str, values: &[f64], default: Dist, how: &str) {
    match measured(values) {
        Some((d, n)) => {
            let _ = writeln!(o, "{name} = {}  # {how}: {n} measured", d.toml());
        }
        None => {
            let _ = writeln!(
                o,
                "{name} = {}  # not measured ({how}: no such lines): {}'s",
                default.toml(),
                crate::model::DEFAULT_STACK
            );
        }
    }
}

/// The profile: a stack file (`[runtime]` and `[driver]`, each measured time as its
/// quantiles p0 … p100 in ms, `Dist::measured`) with its provenance, a model names by path
/// (`stack = "..."`). What the target's lines do not measure is the default stack's, each
/// such line says so.
pub fn profile(rounds: &[RoundTimes], provenance: &str) -> String {
    let all = |f: fn(&RoundTimes) -> Vec<f64>| rounds.iter().flat_map(f).collect::<Vec<f64>>();
    let first_accept = all(|r| r.first_accept.into_iter().collect());
    let first_handler = all(|r| r.first_handler.into_iter().collect());
    let base = crate::model::default_stack();
    let crate::model::Runtime::EventLoop(t) = base.runtime else {
        unreachable!("the default stack runs on an event loop")
    };
    let mut o = String::new();
    for l in provenance.lines() {
        let _ = writeln!(o, "# {l}");
    }
    let _ = writeln!(o, "description = \"measured on this machine by idemsim calibrate\"\n");
    let _ = writeln!(o, "[runtime]\nkind = \"event-loop\"");
    line(&mut o, "turn_ms", &[], t.turn_us, "an idle iteration");
    let how = "accept-only iterations (no other event between two accepts)";
    line(&mut o, "accept_ms", &all(|r| r.accepts.clone()), t.accept_us, how);
    let how = "a fresh process's first accept to its second";
    line(&mut o, "first_accept_ms", &first_accept, t.first_accept_us, how);
    let how = "read to lookup, after the first request";
    line(&mut o, "handler_ms", &all(|r| r.handlers.clone()), t.handler_us, how);
    let how = "the first request's read to lookup";
    line(&mut o, "first_handler_ms", &first_handler, t.first_handler_us, how);
    let d = &base.driver;
    let _ = writeln!(o, "\n[driver]\nawaits = \"explicit\"");
    line(&mut o, "statement_ms", &[], d.statement_us, "a statement that did not write");
    let how = "a statement that wrote, with its fsync";
    line(&mut o, "commit_ms", &all(|r| r.commits.clone()), d.commit_us, how);
    line(&mut o, "latency_ms", &[], d.latency_us, "an await of setImmediate");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_s_lines_give_its_times() {
        let dir = std::env::temp_dir().join(format!("idemsim-cal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("trace.jsonl");
        let lines = [
            r#"{"t_us":1000,"attempt":"0.0.1","ev":"read","accepted_us":0}"#,
            r#"{"t_us":2500,"attempt":"0.0.1","ev":"lookup"}"#,
            r#"{"t_us":2600,"attempt":"0.0.1","ev":"resume"}"#,
            r#"{"t_us":3400,"attempt":"0.0.1","ev":"insert"}"#,
            r#"{"t_us":3500,"attempt":"0.1.1","ev":"read","accepted_us":300}"#,
            r#"{"t_us":3620,"attempt":"0.1.1","ev":"lookup"}"#,
            r#"{"t_us":3700,"attempt":"0.2.1","ev":"read","accepted_us":3450}"#,
        ];
        std::fs::write(&f, lines.join("\n")).unwrap();
        let r = round_times(&f).unwrap();
        // The third accept follows other events of the process: not an accept-only gap.
        assert_eq!((r.first_accept, r.accepts.as_slice()), (Some(300.0), &[][..]));
        assert_eq!((r.first_handler, r.handlers.as_slice()), (Some(1500.0), &[120.0][..]));
        assert_eq!(r.commits, [800.0]);
        let p = profile(&[r], "measured here");
        assert!(p.starts_with("# measured here\ndescription = "), "{p}");
        assert!(p.contains("[runtime]\nkind = \"event-loop\"\n"), "{p}");
        assert!(
            p.contains(
                "first_handler_ms = { p0 = 1.5, p10 = 1.5, p25 = 1.5, p50 = 1.5, p75 = 1.5,"
            ),
            "{p}"
        );
        assert!(p.contains("commit_ms = { p0 = 0.8, p10 = 0.8,"), "{p}");
        // What the lines did not measure is the default stack's, and says so.
        assert!(p.contains("turn_ms = [0.001, 0.002]  # not measured"), "{p}");
        // A model names it: a complete stack.
        std::fs::write(dir.join("mine.toml"), &p).unwrap();
        let m = crate::model::Model::parse(
            &dir.join("m.toml"),
            "stack = \"mine.toml\"\nprogram = [\"begin\", \"insert-row\", \"commit\"]\n",
        )
        .unwrap();
        assert_eq!((m.driver.commit_us.min(), m.driver.commit_us.max()), (800, 800));
        let first = m.loop_times().unwrap().first_handler_us;
        assert_eq!((first.min(), first.max()), (1500, 1500));
        std::fs::write(&f, "garbage").unwrap();
        assert!(
            round_times(&f).unwrap_err().contains("trace.jsonl:1: not an instrumentation line")
        );
    }
}
