//! Hunting with `--explore` beyond `run` and `sweep` (docs/hunt.md): `matrix --explore` finds
//! what a sweep of the same cell finds, after the same number of runs, for any `--jobs`;
//! `--fail-on-violation` gates a hunt (and `--baseline` is refused: a hunt has no rates);
//! `shrink --explore` and `explain --explore` keep the strategy in every run and every
//! command they print; per-seed lines name the strategy.

use serde_json::Value;

use super::{idemsim, root};

const RACE: &str = "check-first-race";

fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// A printed command's arguments, without its invocation (`idemsim`, a path, or `cargo run
/// --release --`).
fn args_of(cmd: &str) -> Vec<&str> {
    match cmd.split_once(" -- ") {
        Some((_, rest)) => rest.split_whitespace().collect(),
        None => cmd.split_whitespace().skip(1).collect(),
    }
}

/// The runs to first violation of `name` in a JSON cell (sweep or matrix).
fn runs_to_first(cell: &Value, name: &str) -> Option<u64> {
    cell["runs_to_first"][name].as_u64()
}

/// A matrix hunt finds, per cell, what the sweep of that cell finds after the same runs;
/// `--jobs` changes nothing; a clean cell says so.
#[test]
fn matrix_hunt_agrees_with_sweeps() {
    for strategy in ["edges", "pct", "exhaustive:depth=8"] {
        let args = |jobs: &str| {
            let mut a = vec!["matrix", "--sims", RACE, "--models", "check-first,transactional"];
            a.extend(["--seeds", "0..60", "--explore", strategy, "--json", "--jobs", jobs]);
            a.into_iter().map(String::from).collect::<Vec<_>>()
        };
        let run = |jobs| {
            let a = args(jobs);
            let (code, out, err) = idemsim(&a.iter().map(String::as_str).collect::<Vec<_>>());
            assert_eq!(code, 1, "{strategy}: a violation fails the cell: {err}");
            out
        };
        let one = run("1");
        assert_eq!(one, run("2"), "{strategy}: --jobs changed the hunt");
        let m = json(&one);
        assert_eq!(m["explore"], strategy);
        let (cf, tx) = (&m["cells"][0], &m["cells"][1]);
        assert_eq!(
            (cf["model"].as_str(), tx["model"].as_str()),
            (Some("check-first"), Some("transactional"))
        );
        assert_eq!(
            tx["runs_to_first"],
            serde_json::json!({}),
            "{strategy}: transactional is clean"
        );
        let sweep = idemsim(&[
            "sweep",
            RACE,
            "--model",
            "check-first",
            "--seeds",
            "0..60",
            "--explore",
            strategy,
            "--json",
        ]);
        let s = json(&sweep.1);
        let found = runs_to_first(cf, "duplicate-row");
        assert!(found.is_some(), "{strategy}: the race is found");
        assert_eq!(found, runs_to_first(&s, "duplicate-row"), "{strategy}: matrix = sweep");
        assert_eq!(cf["violating_seeds"], s["violating_seeds"]);
        if strategy.starts_with("exhaustive") {
            assert_eq!(cf["exploration"]["schedules"], 256);
            assert_eq!(cf["exploration"]["exhausted"], true);
        }
    }
}

/// The text of a hunt names its strategy, the runs to each cell's first violation, the clean
/// cells, and replays that reproduce what they name.
#[test]
fn matrix_hunt_text_replays_its_findings() {
    let (code, out, _) = idemsim(&[
        "matrix",
        "--sims",
        RACE,
        "--models",
        "check-first,transactional",
        "--explore",
        "edges",
        "--seeds",
        "0..20",
    ]);
    assert_eq!(code, 1);
    assert!(out.starts_with("idemsim matrix: 1 sim(s) × 2 model(s) · seeds 0..20"), "{out}");
    assert!(out.lines().next().unwrap().ends_with("· explore edges"), "{out}");
    assert!(out.contains("its counts are not rates"), "{out}");
    let row = |m: &str| {
        out.lines()
            .find(|l| l.starts_with(RACE) && l.split_whitespace().nth(1) == Some(m))
            .unwrap()
            .to_string()
    };
    assert!(row("transactional").ends_with("clean"), "{out}");
    assert!(row("check-first").contains("duplicate-row ("), "{out}");
    let replay = out.lines().find(|l| l.contains("× check-first duplicate-row:")).expect(&out);
    let cmd = replay.split(": ").nth(1).unwrap();
    assert!(cmd.contains("--explore edges --trace"), "{cmd}");
    let argv = args_of(cmd);
    let (_, trace, err) = idemsim(&argv);
    assert!(
        trace.contains("duplicate-row"),
        "the replay {argv:?} shows the violation:\n{trace}{err}"
    );
}

/// `--fail-on-violation` gates a hunt: exit 1 on a violation, 0 on a clean hunt; a baseline
/// is refused before anything runs.
#[test]
fn a_hunt_gates_ci_and_refuses_baselines() {
    let hunt = |m: &str| {
        idemsim(&[
            "matrix",
            "--sims",
            RACE,
            "--models",
            m,
            "--explore",
            "pct",
            "--seeds",
            "0..30",
            "--fail-on-violation",
            "-q",
        ])
        .0
    };
    assert_eq!(hunt("check-first"), 1);
    assert_eq!(hunt("transactional"), 0);
    for cmd in [&["matrix", "--sims", RACE][..], &["sweep", RACE, "--model", "check-first"][..]] {
        let mut a = cmd.to_vec();
        a.extend(["--explore", "edges", "--baseline", "ci/none.json"]);
        let (code, _, err) = idemsim(&a);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("an explored run's counts are not rates"), "{err}");
    }
}

/// `shrink --explore`: every run explored; the minimal sim's header and the replay name the
/// strategy; the replay, run, shows the violation (and without the strategy it need not).
#[test]
fn shrink_keeps_the_strategy() {
    let dir = std::env::temp_dir().join(format!("idemsim-hunt-shrink-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("min.toml");
    let (code, text, err) = idemsim(&[
        "shrink",
        "pause-past-lease",
        "--model",
        "outbox",
        "--explore",
        "pct:d=2",
        "--budget",
        "3000",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("under outbox (explore pct:d=2)"), "{text}");
    let file = std::fs::read_to_string(&out).unwrap();
    assert!(file.contains("· explore pct:d=2 ·"), "{file}");
    let replay = text.lines().find_map(|l| l.split("replay: ").nth(1)).expect(&text);
    assert!(replay.contains("--explore pct:d=2 --trace"), "{replay}");
    let argv = args_of(replay);
    let (_, trace, _) = idemsim(&argv);
    assert!(trace.contains("duplicate-effect"), "{trace}");
    let (code, _, err) =
        idemsim(&["shrink", RACE, "--model", "check-first", "--explore", "exhaustive"]);
    assert_eq!(code, 2);
    assert!(err.contains("exhaustive@CHOICES"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `explain --explore`: the verdict says the run was explored, the replay and the keep
/// command carry the strategy, and the replay reproduces the failure.
#[test]
fn explain_follows_an_explored_run() {
    let (code, text, err) = idemsim(&[
        "explain",
        "outbox",
        "--sim",
        "pause-past-lease",
        "--explore",
        "pct:d=2",
        "--others",
        "transactional",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("explored with pct:d=2: duplicate-effect"), "{text}");
    let replay = text.lines().find_map(|l| l.strip_prefix("replay: ")).expect(&text);
    assert!(replay.ends_with("--explore pct:d=2 --trace"), "{replay}");
    let keep = text.lines().find(|l| l.starts_with("keep the minimal scenario")).expect(&text);
    assert!(keep.contains("--explore pct:d=2 -o"), "{keep}");
    let argv = args_of(replay);
    let (_, trace, _) = idemsim(&argv);
    assert!(trace.contains("duplicate-effect"), "{trace}");
}

/// An explored sweep's per-seed lines name the strategy; a calibrated sweep's do not.
#[test]
fn per_seed_lines_name_the_strategy() {
    let lines = |extra: &[&str]| {
        let mut a =
            vec!["sweep", RACE, "--model", "check-first", "--seeds", "0..3", "--per-seed", "-"];
        a.extend(extra);
        idemsim(&a).1
    };
    for l in lines(&["--explore", "pct"]).lines() {
        assert_eq!(json(l)["explore"], "pct", "{l}");
    }
    for l in lines(&[]).lines() {
        assert!(json(l).get("explore").is_none(), "{l}");
    }
    let _ = root();
}

/// Snapshots of explored runs (CI regression): the teaching race under PCT (the run, its
/// change points and bound, its trace) and a rare cell hunted with `edges` (clock-skew ×
/// transactional-async: lost-effect on about 1 calibrated seed in 200 to 500).
#[test]
fn explored_runs_are_snapshotted() {
    let (_, race, err) = idemsim(&[
        "run",
        RACE,
        "--model",
        "check-first",
        "--seed",
        "0",
        "--explore",
        "pct",
        "--trace",
    ]);
    assert!(race.contains("explore pct:"), "{race}{err}");
    super::snapshot("explore__check-first-race__check-first__pct__0", &race);
    let (_, rare, err) = idemsim(&[
        "sweep",
        "clock-skew",
        "--model",
        "transactional-async",
        "--seeds",
        "0..200",
        "--jobs",
        "2",
        "--explore",
        "edges",
        "-q",
    ]);
    assert!(rare.contains("lost-effect"), "{rare}{err}");
    super::snapshot("explore__clock-skew__transactional-async__edges", &rare);
}

/// `faults`: exactly n fault draws of the fault-free run fire (the first is always reached),
/// named in the JSON; the same (strategy, seed) gives the same trace; parse and display agree.
#[test]
fn faults_fire_exactly_their_points() {
    for (name, n) in [("faults", 1usize), ("faults:n=2", 2)] {
        let st = idemsim::explore::Strategy::parse(name).unwrap();
        assert_eq!(st.to_string(), name);
        for seed in 0..6u64 {
            let s = seed.to_string();
            let args = ["run", "dropped-replies", "--model", "transactional", "--seed", &s];
            let mut a = args.to_vec();
            a.extend(["--explore", name, "--json"]);
            let (_, out, err) = idemsim(&a);
            let v = json(&out);
            let x = &v["report"]["exploration"];
            let x = if x.is_null() { &v["exploration"] } else { x };
            let fired = x["fired"].as_array().unwrap_or_else(|| panic!("{out}{err}"));
            let k = x["fault_draws"].as_u64().unwrap();
            assert!(k >= 2, "dropped-replies draws faults: {k}");
            assert!(!fired.is_empty() && fired.len() <= n, "{name} seed {seed}: {fired:?}");
            assert_eq!(idemsim(&a).1, out, "{name} seed {seed} replays");
        }
    }
    let (code, _, err) =
        idemsim(&["run", RACE, "--model", "check-first", "--explore", "faults:n=9"]);
    assert_eq!(code, 2, "{err}");
}

/// Swarm's top edge: a kind on at rate 1.0 fires on every draw (every reply of
/// dropped-replies is dropped when `reply_drop` is at the top); the JSON names it.
#[test]
fn swarm_top_edge_fires_every_draw() {
    let mut seen_top = false;
    for seed in 0..16u64 {
        let s = seed.to_string();
        let a = ["run", "dropped-replies", "--model", "transactional", "--seed", &s];
        let (_, out, _) = idemsim(&[&a[..], &["--explore", "swarm", "--json"]].concat());
        let v = json(&out);
        let x = &v["report"]["exploration"];
        let x = if x.is_null() { &v["exploration"] } else { x };
        let top: Vec<&str> =
            x["faults_at_top"].as_array().unwrap().iter().filter_map(|t| t.as_str()).collect();
        if !top.contains(&"reply_drop") {
            continue;
        }
        seen_top = true;
        let (_, trace, _) = idemsim(&[&a[..], &["--explore", "swarm", "--trace"]].concat());
        let replies =
            trace.lines().filter(|l| l.contains(": reply ") && l.contains(" → client")).count();
        let dropped = trace.lines().filter(|l| l.contains("dropped in the network")).count();
        assert!(replies > 0 && dropped >= replies, "seed {seed}: {dropped} of {replies}\n{trace}");
    }
    assert!(seen_top, "some seed of 0..16 pushes reply_drop to 1.0");
}

/// Outputs never replace the command's inputs or each other; a sweep or matrix refuses one
/// exhaustive schedule; explain refuses a whole exhaustive space.
#[test]
fn outputs_and_strategies_that_cannot_work_are_refused() {
    let dir = std::env::temp_dir().join(format!("idemsim-hunt-out-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sim = dir.join("v.toml");
    std::fs::copy(root().join("sims/teaching/check-first-race.toml"), &sim).unwrap();
    let before = std::fs::read(&sim).unwrap();
    let sim_s = sim.to_str().unwrap();
    let svg = dir.join("a.svg");
    let svg_s = svg.to_str().unwrap();
    for a in [
        vec!["lesson", "check-first", "--sim", sim_s, "-o", sim_s],
        vec!["run", sim_s, "--model", "check-first", "--svg", sim_s],
        vec!["run", sim_s, "--model", "check-first", "--svg", svg_s, "--html", svg_s],
        vec!["shrink", sim_s, "--model", "check-first", "-o", sim_s],
        vec!["explain", "check-first", "--sim", sim_s, "--html", sim_s],
        vec!["sweep", RACE, "--model", "check-first", "--explore", "exhaustive@01"],
        vec!["matrix", "--sims", RACE, "--explore", "exhaustive@01"],
        vec!["explain", "check-first", "--sim", RACE, "--explore", "exhaustive:5"],
    ] {
        let (code, out, err) = idemsim(&a);
        assert_eq!(code, 2, "{a:?}: {out}{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    assert_eq!(std::fs::read(&sim).unwrap(), before, "the sim file is untouched");
    assert!(!svg.exists());
    let _ = std::fs::remove_dir_all(&dir);
}
