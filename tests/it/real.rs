//! Real runs (`idemsim real`, `validate`): targets that misbehave get a clear error naming the
//! target and the round, with every process ended; the reference Node.js targets behave as
//! their designs say on the facts that cannot flake (no-key duplicates when a reply is lost,
//! transactional never does, check-first races in a burst across two processes), and
//! `validate` agrees on a cell whose two sides are certain.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Once;

use serde_json::json;

use super::idemsim;

/// The reference targets' npm packages, installed once when they are missing.
fn node_targets() {
    static INSTALL: Once = Once::new();
    super::npm_install("targets/node", "express-idempotency", &INSTALL);
}

/// A target file in a fresh folder; returns its path.
fn target_file(name: &str, command: &str, extra: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("idemsim-test-target-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.toml"));
    let text = format!(
        "name = \"{name}\"\nmodel = \"check-first\"\ncommand = {command}\n{extra}\n[database]\n\
         rows = \"SELECT id, user, operation, item, qty, intent FROM rows\"\n\
         keys = \"SELECT user, operation, key, status FROM keys\"\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn still_running(marker: &str) -> bool {
    let out = Command::new("pgrep").args(["-f", marker]).output().unwrap();
    !String::from_utf8_lossy(&out.stdout).trim().is_empty()
}

#[test]
fn a_target_that_exits_or_never_listens_is_named_and_ended() {
    let t = target_file("exits", r#"["sh", "-c", "echo starting; echo boom >&2; exit 3"]"#, "");
    let (code, out, err) = idemsim(&[
        "real",
        "01-same-key-same-content",
        "--target",
        t.to_str().unwrap(),
        "--runs",
        "2",
    ]);
    assert_eq!(code, 5, "{out}{err}");
    assert!(err.contains("target `exits`") && err.contains("round 0"), "{err}");
    assert!(err.contains("exited before it printed its port") && err.contains("boom"), "{err}");

    let marker = format!("idemsim-never-listens-{}", std::process::id());
    let cmd = format!(r#"["sh", "-c", "sleep 30; echo {marker}"]"#);
    let t = target_file("silent", &cmd, "start_timeout_ms = 300");
    let (code, _, err) =
        idemsim(&["real", "01-same-key-same-content", "--target", t.to_str().unwrap()]);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("printed no `IDEMSIM_LISTENING <port>` within 300ms"), "{err}");
    assert!(!still_running(&marker), "the silent target was left running");
}

#[test]
fn a_target_that_answers_garbage_is_refused() {
    let script = "import socket,sys\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen(64)\n\
                  print('IDEMSIM_LISTENING',s.getsockname()[1],flush=True)\nwhile True:\n  \
                  c,_=s.accept()\n  c.recv(65536)\n  c.sendall(b'garbage\\r\\n\\r\\n')\n  c.close()\n";
    let dir = std::env::temp_dir().join(format!("idemsim-test-garbage-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("garbage.py"), script).unwrap();
    let t = target_file(
        "garbage",
        &format!(r#"["python3", "{}"]"#, dir.join("garbage.py").display()),
        "",
    );
    let (code, _, err) =
        idemsim(&["real", "01-same-key-same-content", "--target", t.to_str().unwrap()]);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("target `garbage`") && err.contains("not HTTP"), "{err}");
}

/// `real --json` of a sim against a reference target: (exit code, the report).
fn real_json(sim: &str, target: &str, runs: u32) -> (i32, serde_json::Value) {
    node_targets();
    let runs = runs.to_string();
    let (code, out, err) = idemsim(&["real", sim, "--target", target, "--runs", &runs, "--json"]);
    assert!(code == 0 || code == 1, "exit {code}: {err}");
    (code, serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}")))
}

fn rounds_with(report: &serde_json::Value, violation: &str) -> u64 {
    report["cell"]["violations"][violation]["seeds"].as_u64().unwrap_or(0)
}

#[test]
fn real_no_key_duplicates_when_a_reply_is_lost_and_transactional_never_does() {
    // The faults are drawn per round from the round's number: both targets see the same drops.
    let (_, no_key) = real_json("dropped-replies", "no-key", 4);
    assert_eq!(no_key["kind"], "real");
    assert!(rounds_with(&no_key, "duplicate-row") >= 1, "{no_key:#}");
    let (code, tx) = real_json("dropped-replies", "transactional", 4);
    assert_eq!((code, rounds_with(&tx, "duplicate-row")), (0, 0), "{tx:#}");
}

#[test]
fn real_check_first_races_in_a_burst_across_two_processes_and_transactional_does_not() {
    let (code, cf) = real_json("12-twenty-concurrent-two-processes", "check-first", 30);
    assert_eq!(code, 1, "{cf:#}");
    let racing: u64 = cf["cell"]["rows"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(rows, _)| rows.parse::<u64>().unwrap() >= 2)
        .map(|(_, n)| n.as_u64().unwrap())
        .sum();
    assert!(racing >= 1, "check-first never raced in 30 two-process bursts: {cf:#}");
    let (code, tx) = real_json("12-twenty-concurrent-two-processes", "transactional", 10);
    assert_eq!(code, 0, "{tx:#}");
    assert_eq!(tx["cell"]["rows"], serde_json::json!({"1": 10}), "{tx:#}");
}

#[test]
fn validate_agrees_where_both_worlds_are_certain_and_says_how_much_it_can_see() {
    node_targets();
    let (code, out, err) = idemsim(&[
        "validate",
        "11-twenty-concurrent-one-process",
        "--target",
        "transactional",
        "--runs",
        "30",
        "--tolerance",
        "0.2",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("verdict: AGREE"), "{out}");
    assert!(out.contains("0/30 0.0% [0.0%–11.4%]"), "{out}");
    // Too few rounds to see a 5-point difference: inconclusive (exit 4), not "agree".
    let (code, out, _) = idemsim(&[
        "validate",
        "11-twenty-concurrent-one-process",
        "--target",
        "transactional",
        "--runs",
        "5",
        "--tolerance",
        "0.05",
    ]);
    assert_eq!(code, 4, "{out}");
    assert!(out.contains("verdict: INCONCLUSIVE"), "{out}");
}

#[test]
fn calibrate_writes_a_stack_that_a_model_names() {
    node_targets();
    let dir = std::env::temp_dir().join(format!("idemsim-test-calibrate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let profile = dir.join("mine.toml");
    let (code, _, err) = idemsim(&[
        "calibrate",
        "--target",
        "check-first",
        "--rounds",
        "3",
        "-o",
        profile.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&profile).unwrap();
    assert!(text.contains("[runtime]") && text.contains("first_handler_ms = { p0 = "), "{text}");
    assert!(
        text.contains("idemsim calibrate --target check-first"),
        "the profile says where it comes from: {text}"
    );
    // A model names it as its stack; its own [driver] fields override the stack's.
    let model = "stack = \"mine.toml\"\nprogram = [\"begin\", \"insert-row\", \"commit\"]\n\
                 [driver]\nstatement_ms = [0.5, 0.5]\n";
    let m = idemsim::model::Model::parse(&dir.join("m.toml"), model).unwrap();
    assert_eq!(m.driver.statement_us, (500, 500).into());
    let l = m.loop_times().unwrap();
    assert!(l.first_handler_us.min() > 0 && l.first_handler_us.min() <= l.first_handler_us.max());
    // A sim can no longer choose the runtime: refused, located, saying where it went.
    let sim = "seeds = \"0..2\"\n[world.event_loop]\nprofile = \"mine.toml\"\n\
               [[request]]\nid = \"a\"\nkey = \"k1\"\n";
    let e = idemsim::scenario::Sim::parse(&dir.join("s.toml"), sim).unwrap_err().to_string();
    assert!(e.contains("s.toml:") && e.contains("runtime of the model's stack"), "{e}");
    // Never written through a symlink.
    let link = dir.join("link.toml");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink("/dev/null", &link).unwrap();
    let (code, _, err) =
        idemsim(&["calibrate", "--target", "check-first", "-o", link.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a regular file"), "{err}");
}

/// A thread-per-request target has no event loop for calibrate to measure: refused, saying
/// where its stack is measured instead, and nothing written.
#[test]
fn calibrate_refuses_a_target_that_is_not_an_event_loop() {
    let dir =
        std::env::temp_dir().join(format!("idemsim-test-calibrate-py-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("py.toml");
    let (code, _, err) =
        idemsim(&["calibrate", "--target", "py-check-first", "-o", out.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("python-sqlite-threads") && err.contains("trace_stats.py"), "{err}");
    assert!(!out.exists(), "no profile written for a stack calibrate cannot measure");
}

/// `validate --calibrate` measures the target's stack on this machine and simulates on it;
/// a sim written for a data centre is simulated on loopback, as its rounds are played; both
/// said in the header and in --json.
#[test]
fn validate_simulates_on_the_stack_it_measured_and_on_loopback() {
    node_targets();
    let args = ["validate", "dropped-replies", "--target", "no-key", "--runs", "4"];
    let (code, out, err) =
        idemsim(&[&args[..], &["--calibrate", "--calibrate-rounds", "3", "--json"]].concat());
    assert!(matches!(code, 0 | 1 | 4), "exit {code}: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["model"], "no-key@calibrated");
    let p = &v["as_played"];
    let profile = p["calibrated_stack"].as_str().unwrap();
    assert!(profile.contains("idemsim calibrate --target no-key --sim"), "{profile}");
    assert!(profile.contains("first_accept_ms = { p0 = "), "{profile}");
    assert_eq!(
        (&p["sim_latency_ms"], &p["latency_ms"]),
        (&json!([0.05, 0.25]), &json!([0.03, 0.055]))
    );
    let (_, text, err) =
        idemsim(&[&args[..], &["--calibrate", "--calibrate-rounds", "2"]].concat());
    assert!(
        // A fresh process's first accept is in every round (accept-only iterations need a
        // burst that outruns the loop, which two rounds may not have).
        text.contains("simulated on the stack measured just now: ")
            && text.contains("first_accept_ms p50 "),
        "{text}{err}"
    );
    assert!(text.contains("network latency 0.03–0.055 ms (the sim's 0.05–0.25 ms)"), "{text}");
    // Without --calibrate: the stack the target names, and no profile.
    let (_, out, _) = idemsim(&[&args[..], &["--json"]].concat());
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["as_played"]["calibrated_stack"], serde_json::Value::Null);
}

/// The sim's `delay` holds every message, the reply as well as the request: a real round
/// holds both too (a reply held past the client's timeout is one the client never got), so
/// the two worlds count it alike.
#[test]
fn a_delay_holds_the_reply_as_well_as_the_request() {
    node_targets();
    let dir = std::env::temp_dir().join(format!("idemsim-test-delay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sim = dir.join("held.toml");
    std::fs::write(
        &sim,
        "seeds = \"0..2\"\n[world]\nlatency_ms = [0.03, 0.055]\n[faults]\ndelay = 1.0\n\
         delay_ms = [1, 2]\n[[request]]\nid = \"a\"\nkey = \"k\"\nintents = 2\n",
    )
    .unwrap();
    let sim = sim.to_str().unwrap();
    let (code, out, err) =
        idemsim(&["real", sim, "--target", "transactional", "--runs", "2", "--json"]);
    assert_eq!(code, 0, "{err}");
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    // 2 rounds × 2 intents × one attempt each, every message held: request and reply.
    assert_eq!(r["cell"]["fired"]["delay"], json!({"runs": 2, "times": 8}), "{out}");
    let (_, out, _) = idemsim(&["sweep", "--model", "transactional", sim, "--json"]);
    let s: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(s["fired"]["delay"], json!({"runs": 2, "times": 8}), "{out}");
}

/// `--instrument --keep`: each round's folder holds the target's trace lines and the client's
/// own, one per attempt with the same attempt ids, on the same clock: every request the target
/// read was written by the client before it was read, and after its connect began.
#[test]
fn an_instrumented_round_keeps_the_clients_half_of_the_trace() {
    node_targets();
    let (code, out, err) = idemsim(&[
        "real",
        "double-submit",
        "--target",
        "check-first",
        "--runs",
        "2",
        "--instrument",
        "--keep",
        "--json",
    ]);
    assert!(code == 0 || code == 1, "exit {code}: {err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    for round in report["rounds"].as_array().unwrap() {
        let dir = std::path::PathBuf::from(round["dir"].as_str().unwrap());
        let lines = |f: &str| -> Vec<serde_json::Value> {
            std::fs::read_to_string(dir.join(f))
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        };
        let (client, target) = (lines("client.jsonl"), lines("trace.jsonl"));
        assert!(client.len() >= 6, "three intents of two copies: {client:?}");
        for read in target.iter().filter(|e| e["ev"] == "read") {
            let sent = client
                .iter()
                .find(|c| c["attempt"] == read["attempt"])
                .unwrap_or_else(|| panic!("no client line for {read}"));
            let t = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap();
            assert!(t(sent, "tid") > 0, "{sent}");
            assert!(t(sent, "connect_us") <= t(sent, "connected_us"), "{sent}");
            assert!(t(sent, "connected_us") <= t(sent, "write_us"), "{sent}");
            assert!(t(sent, "write_us") <= t(read, "t_us"), "read before written: {sent} {read}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_warmed_round_leaves_its_warm_up_out_and_says_so_and_validate_simulates_warm() {
    node_targets();
    let (code, out, err) = idemsim(&[
        "real",
        "01-same-key-same-content",
        "--target",
        "transactional",
        "--runs",
        "2",
        "--warm",
        "3",
        "--json",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    // Three warm-up orders went into each round's database; the round's own one is all
    // that is judged.
    assert_eq!((r["warm"].as_u64(), &r["cell"]["rows"]), (Some(3), &serde_json::json!({"1": 2})));
    let (code, out, err) = idemsim(&[
        "validate",
        "01-same-key-same-content",
        "--target",
        "transactional",
        "--runs",
        "2",
        "--warm",
        "1",
    ]);
    assert!(code == 0 || code == 4, "{out}{err}");
    assert!(out.contains("(processes start warm)"), "{out}");
    assert!(out.contains("each on processes warmed by 1 throw-away request(s) each"), "{out}");
    let (code, _, err) = idemsim(&[
        "real",
        "01-same-key-same-content",
        "--target",
        "transactional",
        "--warm",
        "5000",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--warm 5000: expected 0 to 1000"), "{err}");
}
