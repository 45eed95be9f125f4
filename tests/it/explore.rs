//! Exploration (`--explore`, `docs/hunt.md`): without it every run is the calibrated one (trace
//! hashes recorded before the explorer existed); an explored run replays from (strategy, seed)
//! byte for byte, for any `--jobs`; the teaching race is found sooner than calibrated;
//! exhaustive enumeration of the teaching race ends, finds the duplicate row under
//! check-first and nothing under transactional; bad strategies are refused with the list.

use idemsim::explore::Strategy;
use idemsim::run::{self, RunOptions};
use idemsim::sweep::{self, SweepOptions};

use super::{idemsim, model, sim};

const RACE: &str = "sims/teaching/check-first-race.toml";

/// (sim, model, seed, trace hash, events) of the calibrated world (`run … --json`; recorded
/// before `--explore` existed at commit 1d9c068, and again when the world's stack changed:
/// `wake_preempts` and the measured loop times, 2026-12-06; a rollback commit locked for its
/// whole sync and the first run of each statement cold, 2026-12-06 night; a held client's
/// travel counted once, 2026-12-07).
const CALIBRATED: &[(&str, &str, u64, &str, usize)] = &[
    (RACE, "check-first", 13, "59c28b80876cfd62", 20),
    (RACE, "check-first", 0, "810f6f2a49047945", 16),
    (RACE, "transactional", 5, "74a93e55efde6ad4", 19),
    (
        "sims/article/11-twenty-concurrent-one-process.toml",
        "check-first",
        3,
        "71f46d80dfbaf957",
        127,
    ),
    (
        "sims/article/12-twenty-concurrent-two-processes.toml",
        "transactional",
        7,
        "9b749d4ee9f8f46d",
        174,
    ),
    ("sims/faults/crash-two-processes.toml", "transactional", 2, "6054837352364db6", 141),
    ("sims/faults/proxy-resend.toml", "check-first", 4, "ead8e4149119717b", 59),
];

/// (a) With no strategy, runs are exactly the calibrated ones: the same trace hashes as
/// before the explorer, through the library and through `run_explored(…, None)`.
#[test]
fn without_explore_traces_are_unchanged() {
    for (s, m, seed, hash, events) in CALIBRATED {
        let (s, m) = (sim(s), model(m));
        let r = run::run(&s, &m, *seed, RunOptions::default()).unwrap().report;
        assert_eq!((r.trace_hash.as_str(), r.events), (*hash, *events), "{} seed {seed}", s.name);
        let (o, note) = run::run_explored(&s, &m, *seed, RunOptions::default(), None).unwrap();
        assert!(note.is_none());
        assert_eq!(o.report.trace_hash, *hash);
    }
}

/// (b) The same (strategy, seed) gives the same trace twice; explored sweeps give the same
/// aggregate and per-seed lines for `--jobs 1` and `--jobs 2`; and an explored run differs
/// from the calibrated one (the explorer decides something).
#[test]
fn explored_runs_replay_byte_for_byte() {
    let (s, m) = (sim(RACE), model("check-first"));
    for name in ["edges", "pct", "pct:d=2", "exhaustive@01100101"] {
        let st = Strategy::parse(name).unwrap();
        let mut differs = false;
        for seed in 0..5 {
            let opts = RunOptions { keep_history: true };
            let (a, _) = run::run_explored(&s, &m, seed, opts, Some(&st)).unwrap();
            let (b, _) = run::run_explored(&s, &m, seed, opts, Some(&st)).unwrap();
            let (ha, hb) = (a.history.unwrap().render(), b.history.unwrap().render());
            assert_eq!(ha, hb, "{name} seed {seed}");
            assert_eq!(a.report.trace_hash, b.report.trace_hash);
            let calibrated = run::run(&s, &m, seed, RunOptions::default()).unwrap().report;
            differs |= calibrated.trace_hash != a.report.trace_hash;
        }
        assert!(differs, "{name} changed nothing on seeds 0..5");
    }
    for name in ["edges", "pct"] {
        let per_jobs: Vec<(String, String)> = ["1", "2"]
            .iter()
            .map(|j| {
                let args = [
                    "sweep",
                    RACE,
                    "--model",
                    "check-first",
                    "--seeds",
                    "0..60",
                    "--explore",
                    name,
                    "--jobs",
                    j,
                    "--per-seed",
                    "-",
                    "-q",
                ];
                let (code, out, err) = idemsim(&args);
                assert_eq!(code, 1, "{err}");
                // The report (stderr here) without its speed line.
                let report: Vec<&str> = err.lines().filter(|l| !l.contains("job(s)")).collect();
                (out, report.join("\n"))
            })
            .collect();
        assert_eq!(per_jobs[0], per_jobs[1], "{name}");
    }
}

/// The runs until the first duplicate row on the teaching race, seeds from 0 (None: not
/// within 200).
fn runs_to_race(explore: Option<&str>) -> Option<u64> {
    let (s, m) = (sim(RACE), model("check-first"));
    let opts = SweepOptions {
        jobs: 2,
        explore: explore.map(|e| Strategy::parse(e).unwrap()),
        ..Default::default()
    };
    let cells = sweep::run_cells(&[s], &[m], Some(0..200), &opts, |_, _| {}).unwrap();
    cells[0].violations.get("duplicate-row").map(|v| v.first_seed + 1)
}

/// (c) The teaching race is found in fewer runs by an exploring strategy than by the
/// calibrated schedule (measured, not timed); the sweep says so in text and JSON.
#[test]
fn teaching_race_is_found_sooner_when_explored() {
    let calibrated = runs_to_race(None).unwrap();
    assert_eq!(calibrated, 9, "the calibrated race shows first on seed 8");
    let explored: Vec<(&str, Option<u64>)> =
        ["edges", "pct"].iter().map(|e| (*e, runs_to_race(Some(e)))).collect();
    assert!(
        explored.iter().any(|(_, r)| r.is_some_and(|r| r < calibrated)),
        "calibrated {calibrated}, explored {explored:?}"
    );
    let (code, out, _) = idemsim(&[
        "sweep",
        RACE,
        "--model",
        "check-first",
        "--seeds",
        "0..50",
        "--explore",
        "edges",
        "-q",
    ]);
    assert_eq!(code, 1);
    assert!(
        out.starts_with("idemsim sweep: sim check-first-race · model check-first · seeds 0..50")
    );
    assert!(out.lines().next().unwrap().ends_with("· explore edges"), "{out}");
    assert!(out.contains("runs to first violation: "), "{out}");
    assert!(out.contains("--seed 0 --explore edges --trace"), "{out}");
    let (_, json, _) = idemsim(&[
        "sweep",
        RACE,
        "--model",
        "check-first",
        "--seeds",
        "0..50",
        "--explore",
        "pct",
        "--json",
        "-q",
    ]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["explore"], "pct");
    assert!(v["runs_to_first"]["duplicate-row"].as_u64().is_some(), "{json}");
    // A calibrated sweep's report has neither.
    let (_, json, _) =
        idemsim(&["sweep", RACE, "--model", "check-first", "--seeds", "0..20", "--json", "-q"]);
    assert!(!json.contains("\"explore\"") && !json.contains("runs_to_first"));
}

/// (d) Exhaustive enumeration of the teaching race ends (the space of its first decisions
/// is exhausted), finds the duplicate row under check-first, and none under transactional;
/// the schedule it names replays the violation.
#[test]
fn exhaustive_teaching_race() {
    let (s, st) = (sim(RACE), (10_000, 12));
    let e = sweep::run_exhaustive(&s, &model("check-first"), 0, st, None).unwrap();
    assert!(e.exhausted && e.schedules.len() < 10_000, "{} schedules", e.schedules.len());
    assert_eq!(e.cell.runs, e.schedules.len() as u64);
    let dup = &e.cell.violations["duplicate-row"];
    let schedule = format!("exhaustive@{}", e.schedules[dup.first_seed as usize]);
    let strategy = Strategy::parse(&schedule).unwrap();
    let (again, _) =
        run::run_explored(&s, &model("check-first"), 0, RunOptions::default(), Some(&strategy))
            .unwrap();
    assert!(again.report.violation_names().iter().any(|v| v.name() == "duplicate-row"));
    let t = sweep::run_exhaustive(&s, &model("transactional"), 0, st, None).unwrap();
    assert!(t.exhausted && t.cell.violations.is_empty() && t.cell.runs > 1);
    let (code, out, _) =
        idemsim(&["sweep", RACE, "--model", "check-first", "--explore", "exhaustive", "-q"]);
    assert_eq!(code, 1);
    assert!(out.contains("space exhausted: all "), "{out}");
    assert!(out.contains(&format!("--seed 0 --explore {schedule} --trace")), "{out}");
    let (code, out, _) =
        idemsim(&["sweep", RACE, "--model", "check-first", "--explore", "exhaustive:5", "-q"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("bound reached: 5 schedule(s) explored"), "{out}");
}

/// (e) A bad strategy is refused with exit 2, naming the valid ones; no panic.
#[test]
fn bad_strategies_are_refused() {
    for bad in
        ["", "edge", "pct:d=0", "pct:x", "exhaustive:0", "exhaustive@!", "edges@1", "swarm:1"]
    {
        for cmd in ["run", "sweep"] {
            let (code, out, err) =
                idemsim(&[cmd, RACE, "--model", "check-first", "--explore", bad]);
            assert_eq!(code, 2, "{cmd} --explore {bad:?}: {out}{err}");
            assert!(err.contains("valid strategies: edges, swarm, faults"), "{err}");
            assert!(!err.contains("panicked"), "{err}");
        }
    }
    let (code, _, err) =
        idemsim(&["sweep", RACE, "--model", "check-first", "--explore", "edges", "--shard", "0/2"]);
    assert_eq!(code, 2, "{err}");
}

/// `run --explore` names its strategy in the header, the JSON and the replay command, and
/// PCT prints its bound; a calibrated run's report has none of it.
#[test]
fn explored_run_names_its_strategy() {
    let (code, out, _) =
        idemsim(&["run", RACE, "--model", "check-first", "--seed", "0", "--explore", "pct"]);
    assert_eq!(code, 1, "{out}");
    let first = out.lines().next().unwrap();
    assert_eq!(
        first,
        "idemsim run: sim check-first-race · model check-first · seed 0 · explore pct"
    );
    assert!(out.contains("PCT bound 1/(n·k^(d−1)) = "), "{out}");
    assert!(out.contains("--seed 0 --explore pct --trace"), "{out}");
    let (_, json, _) = idemsim(&[
        "run",
        RACE,
        "--model",
        "check-first",
        "--seed",
        "0",
        "--explore",
        "exhaustive",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["explore"], "exhaustive@0");
    assert!(v["exploration"]["decisions"].as_u64().unwrap() > 0);
    let (_, plain, _) = idemsim(&["run", RACE, "--model", "check-first", "--seed", "0", "--json"]);
    assert!(!plain.contains("\"explore\"") && !plain.contains("exploration"));
}

const WEBHOOKS: &str = "sims/catalogue/webhook-redelivery.toml";

/// The trace line that shows each of the webhook sim's fault kinds firing.
const FIRES: &[(&str, &str)] = &[
    ("duplicate", "fault: request resent by a proxy"),
    ("delay", "fault: message delayed"),
    ("crash", "fault: crash "),
];

/// (f) Swarm: `swarm` parses and prints back; the seed alone fixes the subset and the trace
/// (twice the same); over seeds 0..64 every fault kind of a sim with three is both on and
/// off, a kind off never fires in the trace and a kind on fires on some seed; the report's
/// explore line and JSON name the kinds on and off.
#[test]
fn swarm_turns_fault_kinds_on_and_off_by_seed() {
    let st = Strategy::parse("swarm").unwrap();
    assert_eq!(st.to_string(), "swarm");
    let (s, m) = (sim(WEBHOOKS), model("transactional"));
    assert_eq!(s.faults.kinds(), ["duplicate", "delay", "crash"]);
    let mut seen: Vec<(bool, bool, bool)> = vec![(false, false, false); FIRES.len()];
    for seed in 0..64 {
        let opts = RunOptions { keep_history: true };
        let (a, note) = run::run_explored(&s, &m, seed, opts, Some(&st)).unwrap();
        let (b, again) = run::run_explored(&s, &m, seed, opts, Some(&st)).unwrap();
        let (note, again) = (note.unwrap(), again.unwrap());
        assert_eq!(note.swarm, again.swarm, "seed {seed}");
        let trace = a.history.unwrap().render();
        assert_eq!(trace, b.history.unwrap().render(), "seed {seed}");
        assert_eq!(a.report.trace_hash, b.report.trace_hash);
        for (i, (kind, line)) in FIRES.iter().enumerate() {
            let on = note.swarm.iter().find(|(k, _)| k == kind).unwrap().1;
            let fired = trace.contains(line);
            assert!(on || !fired, "seed {seed}: {kind} is off and fired");
            let (was_on, was_off, did_fire) = seen[i];
            seen[i] = (was_on || on, was_off || !on, did_fire || fired);
        }
    }
    for ((kind, _), &(on, off, fired)) in FIRES.iter().zip(&seen) {
        assert!(on && off && fired, "{kind}: on {on}, off {off}, fired {fired} over 0..64");
    }
    let (_, json, _) = idemsim(&[
        "run",
        WEBHOOKS,
        "--model",
        "transactional",
        "--seed",
        "1",
        "--explore",
        "swarm",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["explore"], "swarm");
    assert_eq!(v["exploration"]["faults_on"], serde_json::json!(["duplicate"]));
    assert_eq!(v["exploration"]["faults_off"], serde_json::json!(["delay", "crash"]));
    let (_, out, _) = idemsim(&[
        "run",
        WEBHOOKS,
        "--model",
        "transactional",
        "--seed",
        "1",
        "--explore",
        "swarm",
    ]);
    assert!(out.contains("explore swarm: fault kinds on: duplicate · off: delay crash"), "{out}");
    assert!(out.lines().next().unwrap().ends_with("seed 1 · explore swarm"), "{out}");
}

/// (g) Swarm on a sim with no fault kind is edges, and says so: the same trace as `edges`.
#[test]
fn swarm_without_fault_kinds_is_edges() {
    let (s, m) = (sim(RACE), model("check-first"));
    assert!(s.faults.kinds().is_empty());
    for seed in 0..3 {
        let run = |name: &str| {
            let st = Strategy::parse(name).unwrap();
            run::run_explored(&s, &m, seed, RunOptions::default(), Some(&st)).unwrap()
        };
        let ((w, note), (e, _)) = (run("swarm"), run("edges"));
        assert_eq!(w.report.trace_hash, e.report.trace_hash, "seed {seed}");
        assert!(note.unwrap().line().contains("no random fault kind: edges only"));
    }
}
