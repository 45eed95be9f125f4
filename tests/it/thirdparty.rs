//! The mechanisms that third-party idempotency packages need (`docs/models.md`):
//! `on_mismatch = 417`, `fingerprint = "parsed"`, a `reply` step before the save, and
//! `clean_up_on` (release a claim after an answered error, not after a thrown one).

use std::path::Path;
use std::sync::Arc;

use idemsim::history::What;
use idemsim::model::Model;
use idemsim::report::RunReport;
use idemsim::run::{self, RunOptions};
use idemsim::scenario::Sim;

use super::model;

fn sim(src: &str) -> Arc<Sim> {
    Arc::new(Sim::parse(Path::new("inline.toml"), src).unwrap())
}

fn inline_model(src: &str) -> Result<Arc<Model>, String> {
    Model::parse(Path::new("m.toml"), src).map(Arc::new).map_err(|e| e.to_string())
}

fn run_one(s: &Arc<Sim>, m: &Arc<Model>, seed: u64) -> (RunReport, Vec<What>) {
    let out = run::run(s, m, seed, RunOptions { keep_history: true }).unwrap();
    let events = out.history.unwrap().events.into_iter().map(|e| e.what).collect();
    (out.report, events)
}

/// The status and replay flag of each request's last attempt.
fn answers(r: &RunReport) -> Vec<(Option<u16>, bool)> {
    r.requests
        .iter()
        .map(|q| q.copies[0].last().map_or((None, false), |a| (a.status, a.replayed)))
        .collect()
}

/// Two requests under key k1, one after the other, with these bodies.
fn two(first: &str, second: &str) -> Arc<Sim> {
    sim(&format!(
        "[world]\nlatency_ms = [0.05, 0.05]\n\
         [[request]]\nid = \"first\"\nkey = \"k1\"\nbody = '{first}'\n\
         [[request]]\nid = \"second\"\nafter = \"first\"\nkey = \"k1\"\nbody = '{second}'\n"
    ))
}

#[test]
fn a_key_reused_with_another_body_is_refused_417_by_express_idempotency() {
    let s = two(r#"{"item":"test-item","qty":2}"#, r#"{"item":"test-item","qty":3}"#);
    let (r, _) = run_one(&s, &model("express-idempotency-memory"), 0);
    assert_eq!(answers(&r), [(Some(201), false), (Some(417), false)]);
    assert_eq!(r.rows.len(), 1);
    let e = inline_model("program = [\"lookup\", \"insert-row\"]\n[key]\non_mismatch = 418\n");
    assert_eq!(
        e.unwrap_err(),
        "m.toml:3:15: on_mismatch 418 not allowed; expected 400, 409, 417 or 422"
    );
}

#[test]
fn the_parsed_fingerprint_counts_field_order_but_not_whitespace() {
    let m = model("node-idempotency-memory");
    let spaced = two(r#"{"item":"test-item","qty":2}"#, r#"{ "item" : "test-item", "qty" : 2 }"#);
    let (r, _) = run_one(&spaced, &m, 0);
    assert_eq!(answers(&r), [(Some(201), false), (Some(201), true)]);
    let reordered = two(r#"{"item":"test-item","qty":2}"#, r#"{"qty":2,"item":"test-item"}"#);
    let (r, events) = run_one(&reordered, &m, 0);
    assert_eq!(answers(&r), [(Some(201), false), (Some(422), false)]);
    assert!(events.iter().any(|e| matches!(e, What::Mismatch { .. })));
    // express-idempotency's deep-equal ignores the order (validated), and marks no replay.
    let (r, _) = run_one(&reordered, &model("express-idempotency-memory"), 0);
    assert_eq!(answers(&r), [(Some(201), false), (Some(201), false)]);
    assert_eq!(r.rows.len(), 1);
}

/// A claim-first design on SQLite that replies before it saves, with a point in between.
const REPLY_FIRST: &str = "program = [\"lookup\", \"claim\", \"insert-row\", \"@before-commit\", \
    \"reply\", \"@after-reply\", \"save-response\"]\non_error = [\"release-claim\"]\n\
    clean_up_on = [\"busy\", \"sql-error\"]\n[key]\nin_flight = 409\n";

/// One request, then its retry 50 ms later, with `action` injected at `point` once.
fn injected(point: &str, action: &str) -> Arc<Sim> {
    sim(&format!(
        "[world]\nlatency_ms = [0.05, 0.05]\n\
         [[inject]]\npoint = \"{point}\"\naction = \"{action}\"\ntimes = 1\n\
         [[request]]\nid = \"first\"\nkey = \"k1\"\n\
         [[request]]\nid = \"retry\"\nafter = \"first\"\nintent = \"first\"\nkey = \"k1\"\ndelay_ms = 500\n"
    ))
}

#[test]
fn a_reply_step_answers_first_and_what_follows_cannot_change_it() {
    let m = inline_model(REPLY_FIRST).unwrap();
    // A crash between the reply and the save: the client has its 201, the key stays in
    // progress, and the retry finds it so.
    let (r, events) = run_one(&injected("after-reply", "crash"), &m, 0);
    assert_eq!(answers(&r), [(Some(201), false), (Some(409), false)]);
    assert_eq!((r.rows.len(), r.keys_in_progress), (1, 1));
    let replies = events.iter().filter(|e| matches!(e, What::Reply { .. })).count();
    assert_eq!(replies, 2, "one reply per request");
    // A thrown failure after the reply: the client still has its 201; the failure is not
    // one the design cleans up after, so the claim stays in progress.
    let (r, events) = run_one(&injected("after-reply", "fail"), &m, 0);
    assert_eq!(answers(&r), [(Some(201), false), (Some(409), false)]);
    assert!(events.contains(&What::ClaimLeftAfter { failure: "injected" }));
    assert_eq!(r.keys_in_progress, 1);
    // Without the failure the response is saved after the reply, and the retry replays it.
    let plain =
        sim("[world]\nlatency_ms = [0.05, 0.05]\n[[request]]\nid = \"first\"\nkey = \"k1\"\n\
         [[request]]\nid = \"retry\"\nafter = \"first\"\nintent = \"first\"\nkey = \"k1\"\n");
    let (r, _) = run_one(&plain, &m, 0);
    assert_eq!(answers(&r), [(Some(201), false), (Some(201), true)]);
    assert_eq!((r.rows.len(), r.keys, r.keys_in_progress), (1, 1, 0));
}

#[test]
fn an_answered_error_releases_the_claim_and_a_thrown_one_does_not() {
    let m = model("express-idempotency-redis");
    // Thrown (an injected fail before the reply): 500, the key stays in progress: 409.
    let (r, events) = run_one(&injected("before-commit", "fail"), &m, 0);
    assert_eq!(answers(&r), [(Some(500), false), (Some(409), false)]);
    assert!(events.contains(&What::ClaimLeftAfter { failure: "injected" }));
    assert_eq!(r.keys_in_progress, 1);
    // Answered (the busy database's 503, which the route catches): the claim is deleted,
    // the retry runs clean.
    let busy =
        Arc::new(Sim::load(&super::root().join("sims/article/13-busy-database-503.toml")).unwrap());
    let (r, events) = run_one(&busy, &model("express-idempotency-memory"), 0);
    assert_eq!(answers(&r), [(Some(503), false), (Some(201), false)]);
    assert!(events.iter().any(|e| matches!(e, What::ClaimReleased { n: 1 })));
    assert!(!events.iter().any(|e| matches!(e, What::ClaimLeftAfter { .. })));
    assert_eq!((r.rows.len(), r.keys_in_progress), (1, 0));
}

#[test]
fn the_new_fields_are_checked_at_load_with_their_place() {
    let base = "program = [\"claim\", \"insert-row\", \"save-response\"]\n";
    let e = |extra: &str| inline_model(&format!("{base}{extra}[key]\n")).unwrap_err();
    assert!(e("clean_up_on = [\"busy\"]\n").starts_with(
        "m.toml:2:15: clean_up_on says after which failures on_error's claim clean-up runs"
    ));
    assert_eq!(
        e("on_error = [\"release-claim\"]\nclean_up_on = [\"busy\", \"oops\"]\n"),
        "m.toml:3:24: unknown clean_up_on failure `oops`; expected busy, sql-error, commit-lost, \
         injected, effect, declined, rate-limited, store, save-refused, internal"
    );
    assert_eq!(
        e("on_error = [\"release-claim\"]\nclean_up_on = [\"busy\", \"busy\"]\n"),
        "m.toml:3:24: clean_up_on: `busy` listed twice"
    );
    let p = |program: &str| inline_model(&format!("program = {program}\n[key]\n")).unwrap_err();
    assert_eq!(
        p("[\"claim\", \"reply\", \"insert-row\"]"),
        "m.toml:1:21: `reply` before `insert-row`: there is no answer to send yet"
    );
    assert_eq!(
        p("[\"begin\", \"insert-row\", \"reply\", \"commit\"]"),
        "m.toml:1:35: `reply` inside a transaction: the answer would be sent before its writes \
         commit; expected it after `commit`"
    );
    assert_eq!(
        p("[\"insert-row\", \"reply\", \"reply\"]"),
        "m.toml:1:35: a second `reply`: the answer is sent once"
    );
    assert_eq!(
        p("[\"insert-row\", \"reply\", \"lookup\"]"),
        "m.toml:1:35: `lookup` after `reply`: the request is already answered"
    );
    assert!(
        p("[\"insert-row\", \"save-response\", \"reply\", \"@after-commit\"]")
            .starts_with("m.toml:1:52: @after-commit is where")
    );
    assert_eq!(
        inline_model(&format!("{base}[key]\nfingerprint = \"sorted\"\n")).unwrap_err(),
        "m.toml:3:15: unknown fingerprint `sorted`; expected validated, raw, none or parsed"
    );
    let ok = inline_model(&format!(
        "{base}[key]\nreplay_marker = \"\"\nstore = \"cache\"\nretention_ms = 1000\nstore_latency_ms = {{ p0 = 0.066, p50 = 0.095, p100 = 0.671 }}\n"
    ));
    assert_eq!(ok.unwrap().key.as_ref().unwrap().replay_marker, "");
}
