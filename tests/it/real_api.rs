//! Real targets with an API of their own (docs/targets.md, "A server with an API of its
//! own"): the sims' requests sent through a target's `[[request]]` map, a port given through
//! the environment and a readiness probe, chunked answers, rows counted by body in a schema
//! without users; and every way such a target can be wrong is named before or instead of a
//! verdict.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{idemsim, root};

/// A change to a target file's text.
type Edit<'a> = dyn Fn(String) -> String + 'a;

/// A copy of the worked example's target file in a fresh folder, with `edit` applied.
fn example(name: &str, edit: &Edit<'_>) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("idemsim-api-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(root().join("targets/example-own-api.toml")).unwrap();
    let server = root().join("targets/example/orders.py");
    let text = text
        .replace("name = \"example-own-api\"", &format!("name = \"{name}\""))
        .replace("\"example/orders.py\"", &format!("{:?}", server.display().to_string()));
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, edit(text)).unwrap();
    path
}

fn real(sim: &str, target: &Path, runs: &str) -> (i32, Value, String) {
    let t = target.to_str().unwrap();
    let (code, out, err) = idemsim(&["real", sim, "--target", t, "--runs", runs, "--json"]);
    let json = serde_json::from_str(&out).unwrap_or(Value::Null);
    (code, json, err)
}

#[test]
fn a_server_with_its_own_api_is_driven_through_its_map_and_judged() {
    // The transactional example: every copy answered, one row per intent, found by body.
    let (code, r, err) = real("double-submit", &root().join("targets/example-own-api.toml"), "3");
    assert_eq!(code, 0, "{err}{r:#}");
    assert_eq!((r["format"].as_str(), r["version"].as_u64()), (Some("idemsim-real"), Some(1)));
    assert_eq!(r["cell"]["rows_per_intent"], serde_json::json!({"1": 9}), "{r:#}");
    // The ids come from the map's pointer: pointed at another number, the replies name rows
    // that are not theirs.
    let wrong = example("wrong-id", &|t| t.replace("/data/order_id", "/data/count"));
    let (code, r, err) = real("double-submit", &wrong, "1");
    assert_eq!(code, 1, "{err}{r:#}");
    let v = r["cell"]["violations"].as_object().unwrap();
    assert!(v.contains_key("foreign-reply") || v.contains_key("lost-success"), "{r:#}");
    // Its broken twin (no idempotency): every double click is two rows of one intent, seen
    // through the body attribution.
    let broken = example("no-idempotency", &|t| {
        t.replace("command = [", "env = { MODE = \"no-key\" }\ncommand = [")
    });
    let (code, r, err) = real("double-submit", &broken, "2");
    assert_eq!(code, 1, "{err}{r:#}");
    assert_eq!(r["cell"]["rows_per_intent"], serde_json::json!({"2": 6}), "{r:#}");
    assert_eq!(r["cell"]["violations"]["duplicate-row"]["seeds"], 2, "{r:#}");
}

#[test]
fn a_target_that_cannot_be_driven_is_named_before_or_instead_of_a_verdict() {
    let cases: &[(&str, &str, &Edit<'static>, &str)] = &[
        (
            "unmapped",
            "06-key-is-per-operation",
            &|t| t,
            "has no [[request]] for the sim's POST /api/returns",
        ),
        (
            "no-user",
            "double-submit",
            &|t| t.replace("user = \"none\"", ""),
            "returns no `user` column",
        ),
        (
            "too-many-rows",
            "double-submit",
            &|t| t.replace("user = \"none\"", "user = \"none\"\nmax_rows = 2"),
            "more than 2 rows ([database] max_rows)",
        ),
        (
            "dies",
            "double-submit",
            &|t| t.replace("command = [", "command = [\"sh\", \"-c\", \"exit 7\", "),
            "exited (exit status: 7) before it was ready",
        ),
        (
            "bad-service",
            "double-submit",
            &|t| {
                t.replace("[listen]", "[[service]]\nname = \"cache\"\ncommand = [\"sh\", \"-c\", \"echo no cache >&2; exit 4\"]\n\n[listen]")
            },
            "service `cache`",
        ),
        (
            "bad-reset",
            "double-submit",
            &|t| {
                t.replace(
                    "[listen]",
                    "reset = [[\"sh\", \"-c\", \"echo cannot flush >&2; exit 5\"]]\n\n[listen]",
                )
            },
            "cannot flush",
        ),
    ];
    for (name, sim, edit, expected) in cases {
        let t = example(name, edit);
        let (code, _, err) = real(sim, &t, "1");
        // Before any round: bad input (2); in a round: the target's fault (5), never scored.
        let code_wanted = if *name == "unmapped" { 2 } else { 5 };
        assert_eq!(code, code_wanted, "{name}: {err}");
        assert!(err.contains(expected), "{name}: expected `{expected}` in:\n{err}");
    }
    // A bad map is refused when the file is read, with its place.
    let t = example("bad-map", &|t| t.replace("${body.qty}", "${quantity}"));
    let (code, _, err) = real("double-submit", &t, "1");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("bad-map.toml:") && err.contains("unknown placeholder `${quantity}`"),
        "{err}"
    );
}

#[test]
fn what_a_server_starts_in_a_session_of_its_own_is_ended_with_the_round() {
    let marker = format!("idemsim-escapee-{}", std::process::id());
    let server = root().join("targets/example/orders.py");
    let t = example("escapes", &|t| {
        let sh = format!(
            "setsid -f python3 -c 'import time; time.sleep(300)' {marker}; exec python3 {}",
            server.display()
        );
        let line = t.lines().find(|l| l.starts_with("command = ")).unwrap().to_string();
        t.replace(&line, &format!("command = [\"sh\", \"-c\", {sh:?}]"))
    });
    let (code, _, err) = real("double-submit", &t, "1");
    assert_eq!(code, 0, "{err}");
    let left = std::process::Command::new("pgrep").args(["-f", &marker]).output().unwrap();
    assert!(left.stdout.is_empty(), "a process outlived its round: {marker}");
}
