//! The idempotency packages people install, run for real (targets/README.md): the facts of
//! their sources that no schedule can change, checked on the real packages.
//! Needs `npm ci --prefix targets/node`, `bash targets/powertools/install.sh` and Debian's
//! `redis-server` (the Redis targets start their own); `.ci/run` installs them.

use std::sync::Once;

use serde_json::Value;

use super::idemsim;

fn installed() {
    static NODE: Once = Once::new();
    super::npm_install("targets/node", "express-idempotency", &NODE);
    static PY: Once = Once::new();
    PY.call_once(|| {
        let ok = std::process::Command::new("bash")
            .arg("targets/powertools/install.sh")
            .current_dir(super::root())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "bash targets/powertools/install.sh failed");
    });
}

fn real(sim: &str, target: &str, runs: &str, warm: &str) -> Value {
    installed();
    let args = ["real", sim, "--target", target, "--runs", runs, "--warm", warm, "--json"];
    let (code, out, err) = idemsim(&args);
    assert!(code == 0 || code == 1, "{target} × {sim}: exit {code}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"))
}

fn rounds_with(r: &Value, violation: &str) -> u64 {
    r["cell"]["violations"][violation]["seeds"].as_u64().unwrap_or(0)
}

#[test]
fn atomic_claims_never_duplicate_and_get_then_set_does() {
    // SET NX (and Powertools' SET NX EX): one copy of a double click runs, the other is
    // answered 409 or replayed.
    for target in ["node-idempotency-redis", "powertools-redis"] {
        let r = real("double-submit", target, "4", "0");
        assert_eq!(rounds_with(&r, "duplicate-row"), 0, "{target}: {r:#}");
    }
    // express-idempotency's Redis adapter reads with GET and writes with SET (no NX): a warm
    // process lets most bursts through (a row per copy that read before the first SET; 8 of
    // 10 rounds when this test was written, so 10 rounds miss it with odds near 1 in 10^7).
    let r = real("11-twenty-concurrent-one-process", "express-idempotency-redis", "10", "5");
    assert!(rounds_with(&r, "duplicate-row") >= 1, "{r:#}");
}

#[test]
fn an_in_memory_store_is_one_per_process_and_a_thrown_handler_keeps_its_key() {
    // Behind two processes each keeps its own keys: a burst alternating between them writes
    // exactly one row per process.
    let r = real("12-twenty-concurrent-two-processes", "express-idempotency-memory", "3", "0");
    assert_eq!(r["cell"]["rows_per_intent"], serde_json::json!({"2": 3}), "{r:#}");
    // A handler that throws: Express's error page goes out through res.end, which the package
    // never sees; the key stays in progress and every retry is answered 409.
    let r = real("10-failure-before-commit", "express-idempotency-memory", "2", "0");
    assert_eq!(rounds_with(&r, "unfinished-intent"), 2, "{r:#}");
    let statuses = r["cell"]["statuses"].as_object().unwrap();
    assert!(statuses.contains_key("409") && !statuses.contains_key("201"), "{r:#}");
}
