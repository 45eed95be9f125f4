//! Hardening: numbers at their limits neither wrap nor hang, bad input is refused with a
//! location, nothing vacuous passes, output cannot be forged, and an interrupted sweep keeps
//! its work.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use idemsim::history::What;
use idemsim::model::Model;
use idemsim::run::{self, RunOptions};
use idemsim::scenario::Sim;

use super::{idemsim, root};

fn parse_sim(src: &str) -> Result<Sim, String> {
    Sim::parse(Path::new("s.toml"), src).map_err(|e| e.to_string())
}

fn parse_model(src: &str) -> Result<Model, String> {
    Model::parse(Path::new("m.toml"), src).map_err(|e| e.to_string())
}

fn temp_file(name: &str, text: &[u8]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("idemsim-hardening-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Every duration at its documented maximum (30 days): leases and retentions do not wrap into
/// the past, a lock held and a pause longer than the run end at the time limit, and the run
/// takes well under a second of wall time: waits are events, not polls.
#[test]
fn numbers_at_their_limits_neither_wrap_nor_hang() {
    let lease = Arc::new(
        parse_model(
            "program = [\"claim\", \"insert-row\", \"@before-commit\", \"effect\", \
             \"save-response\"]\n[key]\nlease_ms = 2592000000\nretention_ms = 2592000000\n",
        )
        .unwrap(),
    );
    let s = Arc::new(
        parse_sim(
            "[world]\ntime_limit_ms = 2592000000\nclient_timeout_ms = 2592000000\n\
             [faults]\ngc_every_ms = 2592000000\n\
             [[partition]]\nprocess = 1\nfrom_ms = 2592000000\nfor_ms = 2592000000\n\
             [[action]]\nid = \"lock\"\nkind = \"hold-lock\"\nfor_ms = 2592000000\n\
             [[inject]]\npoint = \"before-commit\"\naction = \"pause\"\npause_ms = 2592000000\n\
             [[request]]\nid = \"a\"\nkey = \"k\"\ncopies = 3\ndelay_ms = 1\n\
             retry = { max_attempts = 100, backoff_ms = 2592000000, backoff_cap_ms = 2592000000 }\n",
        )
        .unwrap(),
    );
    let started = Instant::now();
    let out = run::run(&s, &lease, 0, RunOptions { keep_history: true }).unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    let r = &out.report;
    // The run ended at its bound, reported; no claim was born expired (no takeover, no
    // duplicate).
    assert!(r.bounds_hit.iter().any(|b| b.starts_with("time-limit")), "{:?}", r.bounds_hit);
    let events = out.history.unwrap().events;
    assert!(!events.iter().any(|e| matches!(e.what, What::TookOver)), "a lease wrapped");
    assert!(r.rows.len() <= 1, "{:?}", r.violations);
}

/// A waiting request polls within the run's step budget: a lock held for days with a busy
/// timeout of days ends at `max_steps`, reported, not after millions of retries.
#[test]
fn long_lock_waits_end_at_the_step_budget() {
    let m = Arc::new(
        parse_model(
            "program = [\"begin\", \"insert-row\", \"commit\"]\nwait_budget_ms = 2592000000\n",
        )
        .unwrap(),
    );
    let s = Arc::new(
        parse_sim(
            "[world]\ntime_limit_ms = 2592000000\nmax_steps = 1000\n\
             [[action]]\nid = \"lock\"\nkind = \"hold-lock\"\nfor_ms = 2592000000\n\
             [[request]]\nid = \"a\"\ndelay_ms = 1\n",
        )
        .unwrap(),
    );
    let started = Instant::now();
    let r = run::run(&s, &m, 0, RunOptions::default()).unwrap().report;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(r.bounds_hit.iter().any(|b| b.starts_with("max-steps")), "{:?}", r.bounds_hit);
}

/// Loading is linear: ten chained requests of 1000 intents each load and run at once; a sim
/// past the copy bound is refused at the request that passes it, before anything is expanded.
#[test]
fn large_sims_load_in_linear_time_and_the_copy_bound_is_located() {
    let mut src = String::new();
    for i in 0..10 {
        src.push_str(&format!("[[request]]\nid = \"r{i}\"\nintents = 1000\nkey = \"k\"\n"));
        if i > 0 {
            src.push_str(&format!("after = \"r{}\"\n", i - 1));
        }
    }
    let started = Instant::now();
    let s = parse_sim(&src).unwrap();
    assert_eq!(s.requests.len(), 10_000);
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    let e = parse_sim("[[request]]\nid = \"r\"\nintents = 1000\ncopies = 1000\n").unwrap_err();
    assert!(e.starts_with("s.toml:2:6: 1000000 copies up to here"), "{e}");
}

/// Nothing vacuous passes: an empty or truncated sim is refused.
#[test]
fn a_sim_without_requests_is_refused() {
    for src in ["", "seeds = \"0..3\"\n", "[world]\nprocesses = 2\n"] {
        let e = parse_sim(src).unwrap_err();
        assert!(e.starts_with("s.toml:1:1: no [[request]]"), "{e}");
    }
}

/// Nonsense is refused where it is written: a replay marker every reply carries, a model name
/// that breaks tables, an impossible status, numbers out of range, fields of another action.
#[test]
fn nonsense_values_are_refused_with_their_location() {
    let m = |tail: &str| {
        parse_model(&format!("program = [\"lookup\", \"insert-row\", \"save-response\"]\n{tail}"))
    };
    let e = m("[key]\nreplay_marker = \"Content-Type\"\n").unwrap_err();
    assert!(e.starts_with("m.toml:3:17: key.replay_marker `Content-Type` is a header"), "{e}");
    let e = m("[key]\nreplay_marker = \"a b\"\n").unwrap_err();
    assert!(e.contains("expected a header name"), "{e}");
    let e = m("name = \"\"\n[key]\n").unwrap_err();
    assert!(e.starts_with("m.toml:2:8: name: ``: expected 1 to 64 characters"), "{e}");
    let e = m("name = \"a\\nb\"\n[key]\n").unwrap_err();
    assert!(e.contains("`a\\nb`"), "echoed escaped: {e}");
    let e = m("[key]\nmax_len = 0\n").unwrap_err();
    assert!(e.starts_with("m.toml:3:11: key.max_len: expected 1..=4096"), "{e}");
    let s = |tail: &str| parse_sim(&format!("[[request]]\nid = \"a\"\n{tail}"));
    let e = s("expect = { status = 0 }\n").unwrap_err();
    assert!(e.contains("expect.status 0: expected 100..=599"), "{e}");
    let e = s("[world]\nmax_steps = 0\n").unwrap_err();
    assert!(e.contains("world.max_steps: expected 1..=10000000"), "{e}");
    let e =
        s("[[inject]]\npoint = \"before-commit\"\naction = \"fail\"\npause_ms = 5\n").unwrap_err();
    assert!(e.contains("`pause_ms` is only for action = \"pause\", not \"fail\""), "{e}");
    let long = "x".repeat(5000);
    let e = s(&format!("key = \"{long}\"\n")).unwrap_err();
    assert!(e.starts_with("s.toml:3:7: a string of 5000 bytes; at most 4096"), "{e}");
}

/// Two models with one name would merge their columns: refused, naming both files.
#[test]
fn model_names_are_unique_among_the_loaded_models() {
    let copy = temp_file(
        "transactional.toml",
        &std::fs::read(root().join("models/transactional.toml")).unwrap(),
    );
    let (code, _, err) =
        idemsim(&["matrix", "--models", "transactional", "--models", copy.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("model name `transactional` is also the name of models/transactional.toml"),
        "{err}"
    );
}

/// Files that are not sim files say what they are: a folder, a device, invalid UTF-8 (with
/// its location).
#[test]
fn what_is_not_a_file_says_so() {
    let dir = temp_file("x", b"").parent().unwrap().to_path_buf();
    let (code, _, err) = idemsim(&["run", dir.to_str().unwrap(), "--model", "transactional"]);
    assert_eq!(code, 2);
    assert!(err.contains("is a folder; expected a sim file"), "{err}");
    let (_, _, err) = idemsim(&["run", "/dev/null", "--model", "transactional"]);
    assert!(err.contains("is not a regular file"), "{err}");
    let bad = temp_file("bad-utf8.toml", b"[[request]]\nid = \"a\xff\"\n");
    let (code, _, err) = idemsim(&["run", bad.to_str().unwrap(), "--model", "transactional"]);
    assert_eq!(code, 2);
    assert!(err.contains("bad-utf8.toml:2:8: invalid UTF-8"), "{err}");
}

/// A key with control characters cannot forge a line of a trace.
#[test]
fn control_characters_are_escaped_in_traces() {
    let f = temp_file(
        "forge.toml",
        b"[[request]]\nid = \"a\"\nkey = \"k\\n    9.999ms  server-1     forged\"\n",
    );
    let (_, out, _) = idemsim(&["run", f.to_str().unwrap(), "--model", "transactional", "--trace"]);
    assert!(!out.lines().any(|l| l.trim_start().starts_with("9.999ms")), "{out}");
    assert!(out.contains("key=k\\n    9.999ms"), "{out}");
}

/// `run` says how many violations it saw, and `--fail-on-violation` turns them into exit 1.
#[test]
fn pass_counts_violations_and_fail_on_violation_fails() {
    let args = ["run", "14-collected-key-new-row", "--model", "transactional"];
    let (code, out, _) = idemsim(&args);
    assert_eq!(code, 0);
    assert!(
        out.contains("PASS (as specified) · NOT safe: 2 violation(s) found by the oracle"),
        "{out}"
    );
    let (code, _, _) = idemsim(&[&args[..], &["--fail-on-violation"]].concat());
    assert_eq!(code, 1);
    let (code, out, _) = idemsim(&["run", "01-same-key-same-content", "--model", "transactional"]);
    assert_eq!(code, 0);
    assert!(out.contains("PASS (as specified) · safe: no violation"), "{out}");
    let (code, _, _) = idemsim(&[
        "matrix",
        "--sims",
        "sims/article/14-collected-key-new-row.toml",
        "--models",
        "transactional",
        "--fail-on-violation",
    ]);
    assert_eq!(code, 1);
}

/// `--jobs` takes 1 to 256.
#[test]
fn jobs_are_validated() {
    for bad in ["0", "257", "many"] {
        let (code, _, err) = idemsim(&[
            "sweep",
            "01-same-key-same-content",
            "--model",
            "transactional",
            "--jobs",
            bad,
        ]);
        assert_eq!(code, 2, "{bad}");
        assert!(err.contains("expected a number of threads from 1 to 256"), "{err}");
    }
}

/// SIGINT during a sweep: it stops within a second, prints the aggregate of the seeds that
/// finished (marked interrupted), writes their per-seed lines in order, and exits 130.
#[test]
fn an_interrupted_sweep_keeps_its_work() {
    let per_seed = temp_file("per-seed.jsonl", b"");
    let child = Command::new(env!("CARGO_BIN_EXE_idemsim"))
        .args([
            "sweep",
            "11-twenty-concurrent-one-process",
            "--model",
            "check-first",
            "--seeds",
            "0..100000000",
            "--jobs",
            "2",
            "--per-seed",
        ])
        .arg(&per_seed)
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until it has written some seeds.
    let t0 = Instant::now();
    while std::fs::metadata(&per_seed).map(|m| m.len()).unwrap_or(0) == 0
        && t0.elapsed() < Duration::from_secs(60)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let sent = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(sent.elapsed() < Duration::from_secs(2), "stopped after {:?}", sent.elapsed());
    assert_eq!(out.status.code(), Some(130));
    let text = String::from_utf8_lossy(&out.stdout);
    let runs: u64 = text
        .lines()
        .find_map(|l| {
            l.split(" runs · ")
                .next()
                .filter(|_| l.contains(" runs · "))
                .and_then(|n| n.parse().ok())
        })
        .expect("an aggregate");
    assert!(text.contains("INTERRUPTED: partial aggregate"), "{text}");
    let lines = std::fs::read_to_string(&per_seed).unwrap();
    let seeds: Vec<u64> = lines
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["seed"].as_u64().unwrap())
        .collect();
    assert_eq!(seeds.len() as u64, runs, "every finished seed has its line");
    assert!(seeds.windows(2).all(|w| w[0] < w[1]), "in seed order");
}

/// A model with the longest key retention (30 days), so that nothing is ever old enough to
/// collect.
fn thirty_day_retention() -> Arc<Model> {
    let src = std::fs::read_to_string(root().join("models/transactional-ttl.toml")).unwrap();
    let src = src.replace("retention_ms = 86400000 ", "retention_ms = 2592000000 ");
    assert!(src.contains("retention_ms = 2592000000"));
    Arc::new(parse_model(&src).unwrap())
}

/// A collector ticking every microsecond over thousands of young keys costs a step each tick
/// and no scan of the key table (an index range that finds nothing): 300,000 ticks over 5,000
/// keys ran in minutes when each pass scanned the table, and run in seconds. Each tick is a
/// step of `max_steps`, so a tiny `gc_every_ms` ends at the step bound, reported.
#[test]
fn a_collector_over_many_young_keys_costs_its_steps_only() {
    let m = thirty_day_retention();
    let mut src = String::from("[world]\nmax_steps = 300000\n[faults]\ngc_every_ms = 0.001\n");
    for i in 0..5000 {
        src.push_str(&format!("[[request]]\nid = \"r{i}\"\nkey = \"k{i}\"\n"));
    }
    let s = Arc::new(parse_sim(&src).unwrap());
    let started = Instant::now();
    let r = run::run(&s, &m, 0, RunOptions::default()).unwrap().report;
    // A hang guard, far above the seconds it takes in a debug build.
    assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
    assert!(r.bounds_hit.iter().any(|b| b.starts_with("max-steps")), "{:?}", r.bounds_hit);
    assert!(r.keys > 0 && r.violations.iter().all(|v| v.permitted), "{:?}", r.violations);
    // The collector alone spends the budget: one request, a tiny budget, the bound.
    let s = Arc::new(
        parse_sim(
            "[world]\nmax_steps = 1000\n[faults]\ngc_every_ms = 0.001\n\
             [[request]]\nid = \"a\"\nkey = \"k\"\ndelay_ms = 10\n",
        )
        .unwrap(),
    );
    let r = run::run(&s, &m, 0, RunOptions::default()).unwrap().report;
    assert!(r.bounds_hit.iter().any(|b| b.starts_with("max-steps")), "{:?}", r.bounds_hit);
}

/// A picture of a long run with thousands of clients and every message lost is built in one
/// pass and has a bounded size: it draws the first events and their lanes only, says what it
/// left out, and stays well-formed. (Pairing each lost message by a forward scan, and a lane
/// per client of the whole run, took minutes and megabytes.)
#[test]
fn pictures_of_long_runs_are_linear_and_bounded() {
    use idemsim::history::{Actor, Event, History, Legend, Node};
    let clients = 10_000u32;
    let events: Vec<Event> = (0..200_000u32)
        .map(|i| Event {
            t_us: u64::from(i),
            node: Node::Client(i % clients),
            who: Some(Actor::Attempt { req: i % clients, copy: 0, attempt: i / clients + 1 }),
            what: What::Sent {
                to: 0,
                method: "POST".into(),
                path: "/api/orders".into(),
                key: Some(format!("k{i}")),
            },
        })
        .collect();
    let requests = (0..clients).map(|i| (format!("r{i}"), 1)).collect();
    let h = History { events, legend: Legend { requests, actions: vec![] } };
    let s = parse_sim("[[request]]\nid = \"a\"\n").unwrap();
    let started = Instant::now();
    let svg = idemsim::picture::svg(&h, &s, "long", None);
    assert!(started.elapsed() < Duration::from_secs(30), "took {:?}", started.elapsed());
    assert!(svg.len() < 1_000_000, "{} bytes", svg.len());
    assert!(svg.contains("199600 more event(s) not drawn"));
    assert!(idemsim::picture::elided(&h).unwrap().contains("first 400 of 200000 events"));
    roxmltree::Document::parse(&svg).expect("well-formed SVG");
}

/// `shrink` is bounded in runs, exactly: a budget is never passed and, when spent, said so;
/// budgets and windows out of range are refused with the range (never clamped); a passing
/// `--seed` names a seed that fails; a newline in the sim's path stays inside a comment of the
/// written file's header.
#[test]
fn shrink_honours_its_budget_and_says_what_is_wrong() {
    let crash = "sims/faults/crash-between-steps.toml";
    let (code, out, err) = idemsim(&["shrink", crash, "--model", "check-first", "--budget", "50"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.starts_with("50 runs in "), "{err}");
    assert!(out.contains("the budget of 50 runs was spent before every candidate"), "{out}");
    assert!(out.contains("# 50 runs · the budget of 50 runs was spent"), "{out}");
    for (args, want) in [
        (["--budget", "0"], "--budget 0: expected at least 33 runs with --window 32"),
        (["--budget", "32"], "--budget 32: expected at least 33 runs"),
        (["--window", "100000"], "--window 100000: expected 1 to 4096 seeds"),
        (["--window", "0"], "--window 0: expected 1 to 4096 seeds"),
    ] {
        let (code, _, err) =
            idemsim(&[&["shrink", crash, "--model", "check-first"][..], &args[..]].concat());
        assert_eq!(code, 2, "{args:?}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let (code, out, _) = idemsim(&[
        "shrink",
        "11-twenty-concurrent-one-process",
        "--model",
        "check-first",
        "--seed",
        "1",
    ]);
    assert_eq!(code, 0);
    assert!(
        out.contains("seed 1 of 11-twenty-concurrent-one-process shows no violation that is not policy-permitted under check-first; seed 0 does"),
        "{out}"
    );
    let dir = temp_file("x", b"").parent().unwrap().join("evil\nseeds = \"0..1\"\n#");
    std::fs::create_dir_all(&dir).unwrap();
    let sim = dir.join("s.toml");
    std::fs::copy(root().join(crash), &sim).unwrap();
    let written = temp_file("shrunk.toml", b"");
    let (code, _, err) = idemsim(&[
        "shrink",
        sim.to_str().unwrap(),
        "--model",
        "check-first",
        "--budget",
        "100",
        "-o",
        written.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&written).unwrap();
    assert!(text.contains("evil\\nseeds = \"0..1\"\\n#/s.toml"), "{text}");
    assert!(text.lines().all(|l| l.starts_with('#') || !l.contains("0..1")), "{text}");
    let replay = format!("# replay: cargo run --release -- run {}", written.display());
    assert!(text.contains(&replay), "{text}");
    let again = parse_sim(&text).unwrap();
    assert_eq!(again.seeds, 0..32);
}

/// A matrix whose flat (cell, seed) order passes `u64::MAX` shards without overflow: two cells
/// of 0..2^64−1 seeds, cut in 2^64−1 shards, run their two seeds each, whichever shard,
/// including the one across the cells' boundary. (It panicked in `sweep.rs`: clamp min > max.)
#[test]
fn shards_of_an_order_past_u64_max_neither_panic_nor_hang() {
    for k in ["0", "9223372036854775807", "18446744073709551614"] {
        let started = Instant::now();
        let (code, _, err) = idemsim(&[
            "matrix",
            "--sims",
            "sims/article/01-same-key-same-content.toml",
            "--models",
            "transactional",
            "--models",
            "check-first",
            "--seeds",
            "0..18446744073709551615",
            "--shard",
            &format!("{k}/18446744073709551615"),
        ]);
        assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
        assert_eq!(code, 0, "shard {k}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(err.contains("(from --shard): 2 runs"), "shard {k}: {err}");
    }
}
