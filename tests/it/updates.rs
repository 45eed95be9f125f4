//! Catalogue II: document updates with versions (`update-doc`, `[updates] check`, `If-Match`,
//! 412/428), the lost-update rule, and why a version check is not idempotency.

use std::path::Path;
use std::sync::Arc;

use idemsim::history::What;
use idemsim::http::Reason;
use idemsim::model::Model;
use idemsim::report::{RunReport, ViolationKind as V};
use idemsim::run::{self, RunOptions};
use idemsim::scenario::Sim;
use idemsim::sweep;

use super::{model, sim};

const TWO_EDITORS: &str = "sims/updates/two-editors.toml";
const STALE_RETRY: &str = "sims/updates/stale-retry.toml";

fn run_with(s: &Arc<Sim>, m: &str, seed: u64) -> (RunReport, Vec<What>) {
    let out = run::run(s, &model(m), seed, RunOptions { keep_history: true }).unwrap();
    (out.report, out.history.unwrap().events.into_iter().map(|e| e.what).collect())
}

fn run_one(s: &str, m: &str, seed: u64) -> (RunReport, Vec<What>) {
    run_with(&sim(s), m, seed)
}

/// (seeds with the violation, seeds with any violation) over `seeds`.
fn cell(s: &str, m: &str, seeds: std::ops::Range<u64>, v: V) -> (u64, u64) {
    let c = sweep::run_matrix(&[sim(s)], &[model(m)], Some(seeds), 2).unwrap().remove(0);
    (c.violations.get(v.name()).map_or(0, |x| x.seeds), c.violating_seeds)
}

fn statuses(r: &RunReport) -> Vec<Option<u16>> {
    r.requests.iter().flat_map(|q| q.copies.iter().flatten()).map(|a| a.status).collect()
}

#[test]
fn two_editors_of_one_version_lose_an_update_unless_the_version_is_checked() {
    // Last write wins, with or without a key: one editor's acknowledged change is gone.
    assert_eq!(cell(TWO_EDITORS, "update-last-write", 0..40, V::LostUpdate), (40, 40));
    assert_eq!(cell(TWO_EDITORS, "update-keyed-last-write", 0..40, V::LostUpdate), (40, 40));
    let (r, events) = run_one(TWO_EDITORS, "update-last-write", 0);
    let lost = r.violations.iter().find(|v| v.name == V::LostUpdate).unwrap();
    assert!(lost.detail.contains("version 2 overwritten by intent"), "{}", lost.detail);
    assert!(lost.detail.contains("version 3") && lost.detail.contains("If-Match was \"1\""));
    assert_eq!(events.iter().filter(|w| matches!(w, What::DocUpdated { .. })).count(), 2);
    // With the check, one save wins and the other is told so: a final 412, no violation.
    for m in ["update-if-match", "update-if-match-keyed"] {
        assert_eq!(cell(TWO_EDITORS, m, 0..40, V::LostUpdate), (0, 0), "{m}");
        let (r, events) = run_one(TWO_EDITORS, m, 1);
        let mut st = statuses(&r);
        st.sort();
        assert_eq!(st, vec![Some(200), Some(412)], "{m}");
        let refused = r.requests.iter().flat_map(|q| q.copies.iter().flatten());
        let refused = refused.into_iter().find(|a| a.status == Some(412)).unwrap();
        assert_eq!(refused.reason, Some(Reason::Precondition));
        assert!(events.iter().any(|w| matches!(
            w,
            What::DocRefused { status: 412, if_match: Some(1), current: Some(2), .. }
        )));
    }
}

#[test]
fn a_stale_retry_overwrites_or_is_refused_unless_the_key_replays() {
    // No key, no check: Alice's retry (If-Match "1") overwrites Bob's version 3. Bob's change
    // is lost; Alice's own earlier write is superseded by her retry, not lost.
    let (r, _) = run_one(STALE_RETRY, "update-last-write", 0);
    let lost: Vec<&str> = r
        .violations
        .iter()
        .filter(|v| v.name == V::LostUpdate)
        .map(|v| v.intent.as_str())
        .collect();
    assert_eq!(lost, vec!["bob"], "{:?}", r.violations);
    // The version check alone: the retry finds its own write and is told 412.
    let (r, _) = run_one(STALE_RETRY, "update-if-match", 0);
    let phantom = r.violations.iter().find(|v| v.name == V::PhantomSuccess).unwrap();
    assert_eq!(phantom.intent, "alice");
    assert!(phantom.detail.contains("1 document write(s)"), "{}", phantom.detail);
    assert!(!r.violations.iter().any(|v| v.name == V::LostUpdate));
    // A key replays the stored 200 (version 2), with or without the check.
    for m in ["update-keyed-last-write", "update-if-match-keyed"] {
        assert_eq!(cell(STALE_RETRY, m, 0..10, V::LostUpdate), (0, 0), "{m}");
        let (r, _) = run_one(STALE_RETRY, m, 0);
        let retry = &r.requests[2].copies[0][0];
        assert_eq!(retry.status, Some(200), "{m}");
        let body = retry.body.as_deref().unwrap_or_default();
        assert!(body.contains("\"version\":2"), "{m}: {body}");
        assert!(retry.replayed, "{m}");
    }
}

fn inline_sim(src: &str) -> Result<Sim, String> {
    Sim::parse(Path::new("s.toml"), src).map_err(|e| e.to_string())
}

#[test]
fn a_required_if_match_refuses_a_blind_write_with_428() {
    let blind = Arc::new(
        inline_sim(
            "[[request]]\nid = \"blind\"\nmethod = \"PUT\"\npath = \"/api/docs/d\"\nkey = \"k\"\n\
             body = '{\"value\":3}'\n",
        )
        .unwrap(),
    );
    let (r, events) = run_with(&blind, "update-if-match-keyed", 0);
    assert_eq!(statuses(&r), vec![Some(428)]);
    assert!(r.violations.is_empty(), "a 428 is a final answer: {:?}", r.violations);
    assert!(events.iter().all(|w| !matches!(w, What::DocUpdated { .. })));
    // The same blind write goes through where If-Match is optional, and is no lost update.
    let (r, _) = run_with(&blind, "update-if-match", 0);
    assert_eq!(statuses(&r), vec![Some(200)]);
    assert!(r.violations.is_empty());
}

#[test]
fn update_sims_and_order_models_do_not_mix() {
    let why = run::not_applicable(&sim(TWO_EDITORS), &model("transactional")).unwrap();
    assert!(why.contains("no `update-doc` step"), "{why}");
    let why = run::not_applicable(
        &sim("sims/article/01-same-key-same-content.toml"),
        &model("update-last-write"),
    )
    .unwrap();
    assert!(why.contains("sim sends orders"), "{why}");
    assert!(run::not_applicable(&sim(STALE_RETRY), &model("update-if-match")).is_none());
}

#[test]
fn update_errors_name_the_place() {
    let m = |src: &str| Model::parse(Path::new("m.toml"), src).map_err(|e| e.to_string());
    let e = m("program = [\"begin\", \"insert-row\", \"commit\"]\n[updates]\ncheck = \"none\"\n")
        .unwrap_err();
    assert!(e.contains("m.toml:2:1") && e.contains("needs an `update-doc` step"), "{e}");
    let e = m("program = [\"update-doc\"]\n[updates]\ncheck = \"etag\"\n").unwrap_err();
    assert!(e.contains("m.toml:3:9") && e.contains("if-match"), "{e}");
    let e = m("program = [\"update-doc\", \"insert-row\"]\n").unwrap_err();
    assert!(e.contains("exactly one") && e.contains("update-doc"), "{e}");
    assert!(m("program = [\"update-doc\"]\n[updates]\ncheck = \"required\"\n").is_ok());
    for (bad, at) in
        [("if_match = 0", "2:12"), ("if_match = true", "2:12"), ("if_match = 1.5", "2:12")]
    {
        let e = inline_sim(&format!("[[request]]\n{bad}\nid = \"a\"\n")).unwrap_err();
        assert!(e.contains(&format!("s.toml:{at}")) && e.contains("if_match"), "{bad}: {e}");
    }
}

#[test]
fn update_runs_replay_byte_identically() {
    for m in ["update-last-write", "update-if-match-keyed"] {
        let a = run_one(TWO_EDITORS, m, 7).0;
        let b = run_one(TWO_EDITORS, m, 7).0;
        assert_eq!(a.trace_hash, b.trace_hash, "{m}");
    }
}

#[test]
fn a_retried_delete_told_404_is_a_phantom_success() {
    let s = "sims/updates/delete-reply-lost.toml";
    let (r, events) = run_one(s, "update-last-write", 0);
    assert_eq!(statuses(&r), vec![None, Some(404)]);
    let v = r.violations.iter().find(|v| v.name == V::PhantomSuccess).unwrap();
    assert!(v.detail.contains("1 document write(s)"), "{}", v.detail);
    assert!(events.iter().any(|w| matches!(w, What::DocDeleted { version: 2, .. })));
    // 204 for a document already gone, or a key that replays the 204: no violation.
    for m in ["docs-idempotent-delete", "update-keyed-last-write", "update-if-match-keyed"] {
        let (r, _) = run_one(s, m, 0);
        assert_eq!(statuses(&r), vec![None, Some(204)], "{m}");
        assert!(r.violations.is_empty(), "{m}: {:?}", r.violations);
    }
    // A deleted document cannot be updated: 404 (a business refusal, final).
    let sim = Arc::new(
        inline_sim(
            "[[request]]\nid = \"del\"\nmethod = \"DELETE\"\npath = \"/api/docs/d\"\n\n\
             [[request]]\nid = \"put\"\nafter = \"del\"\nmethod = \"PUT\"\npath = \"/api/docs/d\"\n\
             body = '{\"value\":1}'\n",
        )
        .unwrap(),
    );
    let (r, _) = run_with(&sim, "update-last-write", 0);
    assert_eq!(statuses(&r), vec![Some(204), Some(404)]);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    let e = Model::parse(
        Path::new("m.toml"),
        "program = [\"update-doc\"]\n[updates]\ndelete_missing = 200\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("m.toml:3:18") && e.contains("404 or 204"), "{e}");
}

#[test]
fn tables_leave_out_models_no_sim_applies_to_and_say_so() {
    let sims = vec![sim(TWO_EDITORS)];
    let models = vec![model("transactional"), model("update-last-write")];
    let cells = sweep::run_matrix(&sims, &models, Some(0..2), 1).unwrap();
    let md = idemsim::render::survival_markdown(&sims, &models, &cells);
    assert!(!md.contains("| **transactional** |"), "{md}");
    assert!(md.contains("| **update-last-write** |"), "{md}");
    assert!(md.contains("\n\n(n/a for every sim, not shown: transactional)\n"), "{md}");
    let table = idemsim::render::compact_table(&sims, &models, &cells);
    assert!(table.lines().any(|l| l.starts_with("update-last-write")), "{table}");
    assert!(table.contains("\n(n/a for every sim, not shown: transactional)\n"), "{table}");
}

#[test]
fn versions_stamped_with_a_slow_client_clock_drop_the_later_save() {
    let s = sim("sims/updates/client-clock-skew.toml");
    let m = model("update-client-clock");
    let (r, events) = run_with(&s, "update-client-clock", 0);
    assert_eq!(statuses(&r), vec![Some(200), Some(200)]);
    let v = r.violations.iter().find(|v| v.name == V::LostUpdate).unwrap();
    assert_eq!(
        (v.intent.as_str(), v.detail.as_str()),
        ("bob", "doc-1: acknowledged, never written")
    );
    assert!(events.iter().any(|w| matches!(w, What::DocIgnored { current: 2, .. })));
    // With the clocks agreeing, the later save wins.
    let src = std::fs::read_to_string(&s.path)
        .unwrap()
        .replace("clock_skew_ms = 800", "clock_skew_ms = 0");
    let fair = Arc::new(Sim::parse(&s.path, &src).unwrap());
    let (r, _) = run_with(&fair, "update-client-clock", 0);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    // Updates without a client clock: n/a for this model, not a pass.
    let why = run::not_applicable(&sim(TWO_EDITORS), &m).unwrap();
    assert!(why.contains("client's clock"), "{why}");
    let e = inline_sim("[[request]]\nid = \"a\"\nclock_skew_ms = 1e12\n").unwrap_err();
    assert!(e.contains("s.toml:3:17") && e.contains("clock_skew_ms"), "{e}");
}

#[test]
fn reports_and_explanations_speak_of_document_writes() {
    // `explain` searches sims/updates too, and counts the intent's document writes.
    let e = idemsim::explain::explain(&model("update-last-write"), None, None).unwrap();
    assert!(e.failed, "{}", e.text);
    assert!(e.text.contains("In the end: 1 document write(s)"), "{}", e.text);
    // `run` prints the writes in version order; `--json` carries them (and omits them for
    // models without documents).
    let s = sim(STALE_RETRY);
    let m = model("update-last-write");
    let out = run::run(&s, &m, 0, RunOptions { keep_history: true }).unwrap();
    let text = idemsim::render::run_text(&s, &m, &out, "replay");
    assert!(text.contains("document writes: doc-1 v2 (alice), v3 (bob), v4 (alice)"), "{text}");
    let json = serde_json::to_value(&out.report).unwrap();
    assert_eq!(json["writes"].as_array().map(Vec::len), Some(3));
    let orders = run::run(
        &sim("sims/article/01-same-key-same-content.toml"),
        &model("transactional"),
        0,
        RunOptions::default(),
    )
    .unwrap();
    assert!(serde_json::to_value(&orders.report).unwrap().get("writes").is_none());
}
