//! Catalogue II: business keys on the rows table (`[rows]`), the answers a clash gives and
//! where they are stored, client restarts, and a stuck outbox.

use std::path::Path;
use std::sync::Arc;

use idemsim::history::What;
use idemsim::http::Reason;
use idemsim::model::Model;
use idemsim::report::{RunReport, ViolationKind as V};
use idemsim::run::{self, RunOptions};
use idemsim::sweep;

use super::{model, sim};

fn run_one(s: &str, m: &str, seed: u64) -> (RunReport, Vec<What>) {
    let out = run::run(&sim(s), &model(m), seed, RunOptions { keep_history: true }).unwrap();
    let events = out.history.unwrap().events.into_iter().map(|e| e.what).collect();
    (out.report, events)
}

fn named(r: &RunReport, v: V) -> bool {
    r.violations.iter().any(|x| x.name == v)
}

/// (seeds with the violation, seeds whose expectations failed) over `seeds`.
fn cell(s: &str, m: &str, seeds: std::ops::Range<u64>, v: V) -> (u64, u64) {
    let c = sweep::run_matrix(&[sim(s)], &[model(m)], Some(seeds), 2).unwrap().remove(0);
    (c.violations.get(v.name()).map_or(0, |x| x.seeds), c.failed_seeds)
}

#[test]
fn a_business_key_keeps_one_account_where_two_keys_make_two() {
    let s = "sims/business/signup-two-devices.toml";
    // Two keys for one signup: every keyed design creates two accounts.
    assert_eq!(cell(s, "transactional", 0..30, V::DuplicateRow), (30, 30));
    // UNIQUE(email): one account, the other device told "already exists" (a final answer).
    assert_eq!(cell(s, "signup-unique-email", 0..30, V::DuplicateRow), (0, 0));
    let (r, events) = run_one(s, "signup-unique-email", 0);
    assert_eq!(r.rows.len(), 1);
    assert!(events.iter().any(|w| matches!(w, What::RowClash { row: 1 })));
    let statuses: Vec<Option<u16>> =
        r.requests.iter().flat_map(|q| q.copies.iter().flatten()).map(|a| a.status).collect();
    assert!(statuses.contains(&Some(201)) && statuses.contains(&Some(409)), "{statuses:?}");
    assert!(!named(&r, V::UnfinishedIntent), "a 409 already-exists is a final answer");
}

#[test]
fn a_retry_told_its_own_account_is_taken_is_a_phantom_success() {
    let s = "sims/business/signup-reply-lost.toml";
    let (r, _) = run_one(s, "signup-unique-email", 3);
    assert!(named(&r, V::PhantomSuccess), "{:?}", r.violations);
    let retry = &r.requests[1].copies[0][0];
    assert_eq!((retry.status, retry.reason), (Some(409), Some(Reason::Taken)));
    // Answering with the existing row instead is right for the same person ...
    assert_eq!(cell(s, "signup-return-existing", 0..20, V::PhantomSuccess), (0, 0));
    // ... and hands the account to another person with the same email.
    let shared = "sims/business/shared-email.toml";
    assert_eq!(cell(shared, "signup-return-existing", 0..20, V::ForeignReply).0, 20);
    assert_eq!(cell(shared, "signup-unique-email", 0..20, V::ForeignReply), (0, 0));
}

#[test]
fn a_stored_refusal_is_replayed_with_its_meaning() {
    let s = "sims/business/booking-last-slot.toml";
    assert_eq!(cell(s, "booking-transactional", 0..40, V::DuplicateRow), (0, 0));
    for seed in 0..10 {
        let (r, _) = run_one(s, "booking-transactional", seed);
        assert_eq!(r.rows.len(), 1, "seed {seed}");
        // The loser's first answer was lost; its retry replays the stored 409.
        let loser = r
            .requests
            .iter()
            .find(|q| q.copies[0].iter().any(|a| a.status == Some(409)))
            .expect("one booking refused");
        let last = loser.copies[0].last().unwrap();
        assert_eq!(
            (last.status, last.replayed, last.reason),
            (Some(409), true, Some(Reason::Taken))
        );
        assert!(r.violations.is_empty(), "seed {seed}: {:?}", r.violations);
    }
}

#[test]
fn the_webhook_flow_that_answers_200_on_a_clash_loses_the_event() {
    let s = "sims/business/webhook-crash-after-insert.toml";
    let (r, events) = run_one(s, "webhook-unique-200", 0);
    assert!(named(&r, V::LostEffect), "{:?}", r.violations);
    assert!(events.iter().any(|w| matches!(w, What::RowClash { .. })));
    assert_eq!(r.effects.values().sum::<u64>(), 0, "a clashed redelivery runs no effect");
    // The outbox delivers it.
    assert_eq!(cell(s, "outbox", 0..20, V::LostEffect), (0, 0));
}

#[test]
fn a_client_that_loses_its_key_on_restart_orders_twice() {
    assert_eq!(
        cell("sims/clients/restart-keeps-key.toml", "transactional", 0..20, V::DuplicateRow),
        (0, 0)
    );
    assert_eq!(
        cell("sims/clients/restart-loses-key.toml", "transactional", 0..20, V::DuplicateRow).0,
        20
    );
    assert_eq!(
        cell(
            "sims/clients/restart-loses-key.toml",
            "signup-return-existing",
            0..20,
            V::DuplicateRow
        ),
        (0, 0)
    );
}

#[test]
fn an_outbox_that_never_delivers_is_named() {
    let s = "sims/dependencies/provider-outage.toml";
    let (r, _) = run_one(s, "outbox", 0);
    assert!(named(&r, V::StuckOutbox), "{:?}", r.violations);
    assert!(!r.bounds_hit.is_empty(), "the relay never went quiet");
    assert!(!named(&r, V::LostEffect), "one name per fact");
    // A provider that answers: nothing stuck.
    let (r, _) = run_one("sims/catalogue/relay-crash.toml", "outbox", 0);
    assert!(!named(&r, V::StuckOutbox), "{:?}", r.violations);
}

#[test]
fn rows_section_errors_name_the_place() {
    let bad = [
        ("[rows]\nunique = [\"email\"]\n", "2:11", "unknown rows.unique field `email`"),
        ("[rows]\nunique = []\n", "2:10", "expected at least one"),
        ("[rows]\nunique = [\"user\", \"user\"]\n", "2:19", "listed twice"),
        ("[rows]\nunique = [\"key\"]\n", "2:11", "needs a [key] section"),
        (
            "[rows]\nunique = [\"item\"]\non_clash = 418\n",
            "3:12",
            "expected 409, 200, \"existing\" or \"unprocessed\"",
        ),
        ("[rows]\non_clash = 409\n", "1:1", "unique"),
    ];
    for (rows, at, what) in bad {
        let src = format!("program = [\"begin\", \"insert-row\", \"commit\"]\n{rows}");
        let e = Model::parse(Path::new("m.toml"), &src).unwrap_err().to_string();
        let at = {
            let (l, c) = at.split_once(':').unwrap();
            format!("m.toml:{}:{c}", l.parse::<u32>().unwrap() + 1)
        };
        assert!(e.contains(&at) && e.contains(what), "{rows:?}: {e}");
    }
    let ok = Model::parse(
        Path::new("m.toml"),
        "program = [\"insert-row\"]\n[key]\n[rows]\nunique = [\"key\", \"item\"]\non_clash = \"existing\"\n",
    );
    assert!(ok.is_ok(), "{ok:?}");
    let _ = Arc::new(ok.unwrap());
}

fn inline(src: &str) -> Result<Model, String> {
    Model::parse(Path::new("m.toml"), src).map_err(|e| e.to_string())
}

#[test]
fn recovery_points_resume_instead_of_starting_again() {
    // The same phases; an error deletes the key (approx) or unlocks it (recovery points). A
    // COMMIT whose connection is lost is such an error (a failed charge is not: the source
    // stores its 503 and finishes the key, store_outcomes = "dependency").
    let s = "sims/dependencies/commit-lost.toml";
    let (dup_approx, _) = cell(s, "brandur-atomic-phases-approx", 0..60, V::DuplicateRow);
    let (dup_resume, _) = cell(s, "brandur-atomic-phases", 0..60, V::DuplicateRow);
    assert!(dup_approx > 10, "{dup_approx}");
    assert_eq!(dup_resume, 0);
    // A retry that resumes: it takes the unlocked claim over and continues after the phase
    // that inserted the ride, with that ride's id.
    let resumed = (0..60).find_map(|seed| {
        let (r, events) = run_one(s, "brandur-atomic-phases", seed);
        events
            .iter()
            .any(|w| matches!(w, What::Resumed { point, row: Some(_) } if point == "ride-created"))
            .then_some((r, events))
    });
    let (r, events) = resumed.expect("a seed whose retry resumes");
    assert!(events.iter().any(|w| matches!(w, What::ClaimUnlocked { n: 1 })));
    assert!(r.violations.is_empty(), "{:?}", r.violations);
}

#[test]
fn the_completer_finishes_abandoned_claims_within_its_horizon() {
    let s = "sims/faults/crash-between-steps.toml";
    let (r, events) = run_one(s, "brandur-atomic-phases", 1);
    assert!(events.iter().any(|w| matches!(w, What::CompleterTookOver { .. })));
    assert!(events.iter().any(|w| matches!(w, What::CompleterFinished { status: 201 })));
    // Every claim it could resume is finished: no stuck key, one effect per intent at most.
    assert!(!named(&r, V::StuckKey) && !named(&r, V::DuplicateEffect), "{:?}", r.violations);
    // With a horizon shorter than the lock, it leaves them alone and says so.
    let src = std::fs::read_to_string(super::root().join("models/brandur-atomic-phases.toml"))
        .unwrap()
        .replacen("[key]\n", "[key]\ncompleter_horizon_ms = 1000\n", 1);
    let m = Arc::new(Model::parse(Path::new("short-horizon.toml"), &src).unwrap());
    let out = run::run(&sim(s), &m, 1, RunOptions { keep_history: true }).unwrap();
    let events: Vec<What> = out.history.unwrap().events.into_iter().map(|e| e.what).collect();
    assert!(events.iter().any(|w| matches!(w, What::CompleterPastHorizon { .. })));
    assert!(!events.iter().any(|w| matches!(w, What::CompleterTookOver { .. })));
}

#[test]
fn resuming_needs_a_claim_a_lease_and_sqlite() {
    let key = "[key]\nlease_ms = 1000\n";
    let bad = [
        (
            "program = [\"recovery-point:a\", \"claim\", \"insert-row\"]\n[key]\nlease_ms = 1\n",
            "needs a `claim` before it",
        ),
        (
            "program = [\"claim\", \"insert-row\", \"recovery-point:a\"]\n[key]\n",
            "need [key] lease_ms",
        ),
        (
            "program = [\"claim\", \"insert-row\", \"recovery-point:a\", \"recovery-point:a\"]\n[key]\nlease_ms = 1\n",
            "twice",
        ),
        (
            "program = [\"claim\", \"insert-row\"]\non_error = [\"unlock\"]\n[key]\n",
            "needs [key] lease_ms",
        ),
        (
            "program = [\"claim\", \"insert-row\"]\non_error = [\"release-claim\", \"unlock\"]\n[key]\nlease_ms = 1\n",
            "choose one",
        ),
        (
            "program = [\"claim\", \"insert-row\"]\n[key]\nlease_ms = 1\ncompleter_every_ms = 10\n",
            "no `recovery-point:<name>` step",
        ),
        (
            "program = [\"claim\", \"insert-row\", \"recovery-point:A\"]\n[key]\nlease_ms = 1\n",
            "unknown step",
        ),
    ];
    for (src, what) in bad {
        let e = inline(src).unwrap_err();
        assert!(e.starts_with("m.toml:") && e.contains(what), "{src:?}: {e}");
    }
    let m = inline(&format!(
        "program = [\"claim\", \"begin\", \"insert-row\", \"recovery-point:row\", \"commit\", \"effect\", \"recovery-point:done\", \"save-response\"]\non_error = [\"unlock\"]\n{key}completer_every_ms = 100\n"
    ))
    .unwrap();
    // Inside a transaction the program resumes after its commit; outside, right after it.
    assert_eq!(m.resume_index("row"), Some(5));
    assert_eq!(m.resume_index("done"), Some(7));
    assert_eq!(m.resume_index("nowhere"), None);
}

#[test]
fn a_retry_loop_runs_the_effect_inside_it_again() {
    let s = "sims/catalogue/contention-two-processes.toml";
    // The retry loop: one row per order, the provider called once per run of the loop.
    let (dup, _) = cell(s, "retry-loop-effect-inside", 0..30, V::DuplicateEffect);
    assert_eq!(dup, 30);
    let (r, events) = run_one(s, "retry-loop-effect-inside", 0);
    assert_eq!(r.rows.len(), 2, "the database's work is undone and done once");
    let retries = events.iter().filter(|w| matches!(w, What::TransactionRetried { .. })).count();
    let effects: u64 = r.effects.values().sum();
    assert!(retries >= 1 && effects == 2 + retries as u64, "{retries} retries, {effects} effects");
    // Without the loop the loser answers 503 and its client's retry gets the order.
    assert_eq!(cell(s, "transactional-deferred", 0..30, V::UnfinishedIntent).0, 0);
    // The bound: transaction_retries caps the loop; only with retry-transaction.
    let e = Model::parse(
        Path::new("m.toml"),
        "program = [\"begin\", \"insert-row\", \"commit\"]\ntransaction_retries = 3\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("m.toml:2:23") && e.contains("needs on_error"), "{e}");
    let e = Model::parse(
        Path::new("m.toml"),
        "program = [\"begin\", \"insert-row\", \"commit\"]\non_error = [\"retry-transaction\"]\ntransaction_retries = 0\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("expected 1..=100"), "{e}");
}

#[test]
fn stock_sells_out_once_and_the_refusal_is_final() {
    let s = "sims/business/last-units.toml";
    let (r, events) = run_one(s, "stock-transactional", 0);
    assert!(r.violations.is_empty() && r.passed(), "{:?} {:?}", r.violations, r.checks);
    assert!(events.iter().any(|w| matches!(w, What::StockTaken { units: 2, .. })));
    assert!(events.iter().any(|w| matches!(w, What::SoldOut { .. })));
    // Without a key the retry takes nothing (sold out) and is told so about its own order.
    let (r, _) = run_one(s, "stock-no-key", 0);
    assert!(named(&r, V::PhantomSuccess), "{:?}", r.violations);
    assert_eq!(r.rows.len(), 1, "the CHECK never oversells");
    // Bad stock in a sim file: a located error.
    for (stock, what) in [
        ("stock = { \"gold\" = 1 }", "not a catalogue item"),
        ("stock = { \"test-item\" = -1 }", "expected 0..=1000000"),
    ] {
        let src = format!("[world]\n{stock}\n[[request]]\nid = \"a\"\n");
        let e = idemsim::scenario::Sim::parse(Path::new("s.toml"), &src).unwrap_err().to_string();
        assert!(e.starts_with("s.toml:2:") && e.contains(what), "{e}");
    }
}

#[test]
fn a_declined_charge_is_a_final_answer_that_exposes_where_the_charge_is() {
    let s = "sims/dependencies/card-declines.toml";
    // Charged inside the transaction: the decline rolls the order back.
    assert_eq!(cell(s, "retry-loop-effect-inside", 0..30, V::PhantomSuccess), (0, 0));
    // Charged after the commit: an unpaid order, its client told 402.
    assert!(cell(s, "transactional", 0..30, V::PhantomSuccess).0 > 5);
    // Charged by the outbox after the 201: confirmed, never paid.
    assert!(cell(s, "outbox", 0..30, V::LostEffect).0 > 5);
    let seed = (0..30)
        .find(|&seed| {
            run_one(s, "brandur-atomic-phases", seed)
                .1
                .iter()
                .any(|w| matches!(w, What::Declined { .. }))
        })
        .expect("a seed with a decline");
    let (r, _) = run_one(s, "brandur-atomic-phases", seed);
    // store_outcomes = "refusals": the 402 is the key's final answer, nothing left in progress.
    assert_eq!(r.keys_in_progress, 0, "{:?}", r.violations);
    assert!(
        r.requests.iter().flat_map(|q| q.copies.iter().flatten()).any(|a| a.status == Some(402))
    );
    assert!(!named(&r, V::UnfinishedIntent), "402 is final");
}

#[test]
fn a_key_scoped_without_the_tenant_serves_another_company() {
    let s = "sims/catalogue/tenants-share-user-ids.toml";
    assert_eq!(cell(s, "transactional", 0..20, V::ScopeLeak).0, 20);
    assert_eq!(cell(s, "transactional-tenant", 0..20, V::ScopeLeak), (0, 0));
    let (r, _) = run_one(s, "transactional-tenant", 0);
    let users: Vec<&str> = r.rows.iter().map(|x| x.user.as_str()).collect();
    assert_eq!(users, ["acme/u1", "globex/u1"], "rows record the tenant");
    let e = Model::parse(
        Path::new("m.toml"),
        "program = [\"lookup\", \"insert-row\"]\n[key]\nscope = [\"org\"]\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("m.toml:3:10") && e.contains("expected user, operation, tenant"), "{e}");
}

#[test]
fn status_events_applied_out_of_order_regress_the_resource() {
    let s = "sims/catalogue/webhook-status-events.toml";
    let (regressed, _) = cell(s, "webhook-status-last-write", 0..60, V::RegressedState);
    assert!(regressed > 10, "{regressed}");
    assert_eq!(cell(s, "webhook-status-monotonic", 0..60, V::RegressedState), (0, 0));
    let seed = (0..60)
        .find(|&seed| named(&run_one(s, "webhook-status-last-write", seed).0, V::RegressedState))
        .unwrap();
    let (r, events) = run_one(s, "webhook-status-last-write", seed);
    let v = r.violations.iter().find(|v| v.name == V::RegressedState).unwrap();
    assert!(v.detail.contains("`delivered` was acknowledged"), "{}", v.detail);
    // The same schedule under the guard: the late event is acknowledged and ignored.
    let (_, guarded) = run_one(s, "webhook-status-monotonic", seed);
    assert!(guarded.iter().any(|w| matches!(w, What::StatusApplied { applied: false, .. })));
    assert!(events.iter().all(|w| !matches!(w, What::StatusApplied { applied: false, .. })));
    // A model without apply-status: n/a, not a pass.
    assert!(
        run::not_applicable(&sim(s), &model("transactional")).unwrap().contains("apply-status")
    );
    // Bad event bodies are the front half's 400.
    for body in [r#"{"resource":"a b","status":"paid"}"#, r#"{"resource":"r","status":"lost"}"#] {
        let req = idemsim::http::Request {
            method: "POST".into(),
            path: "/api/events".into(),
            headers: vec![("X-User".into(), "u1".into())],
            body: body.as_bytes().to_vec(),
        };
        assert_eq!(idemsim::http::admit(&req).unwrap_err().status, 400, "{body}");
    }
}

#[test]
fn uniqueness_by_a_read_races_where_a_constraint_does_not() {
    let s = "sims/business/signup-two-devices.toml";
    let (dup, _) = cell(s, "signup-validate-uniqueness", 0..100, V::DuplicateRow);
    assert!((3..60).contains(&dup), "{dup}");
    assert_eq!(cell(s, "signup-unique-email", 0..100, V::DuplicateRow).0, 0);
    // A seed where both read before either wrote: both inserted, no clash seen by anyone.
    let seed = (0..100)
        .find(|&seed| named(&run_one(s, "signup-validate-uniqueness", seed).0, V::DuplicateRow))
        .unwrap();
    let (r, events) = run_one(s, "signup-validate-uniqueness", seed);
    assert_eq!(r.rows.len(), 2);
    assert_eq!(events.iter().filter(|w| matches!(w, What::RowAbsent)).count(), 2);
    // Sequential: the second finds the first and is refused with the business answer.
    let (r, events) = run_one("sims/business/shared-email.toml", "signup-validate-uniqueness", 0);
    assert_eq!(r.rows.len(), 1);
    assert!(events.iter().any(|w| matches!(w, What::RowFound { row: 1 })));
    let bad = [
        ("program = [\"check-row\", \"insert-row\"]\n", "1:12", "needs a [rows] section"),
        (
            "program = [\"insert-row\", \"check-row\"]\n[rows]\nunique = [\"user\"]\n",
            "1:26",
            "before `insert-row`",
        ),
        (
            "program = [\"insert-row\"]\n[rows]\nunique = [\"user\"]\nenforce = \"read\"\n",
            "4:11",
            "the program has none",
        ),
    ];
    for (src, at, what) in bad {
        let e = inline(src).unwrap_err();
        assert!(e.contains(&format!("m.toml:{at}")) && e.contains(what), "{src}\n{e}");
    }
}

#[test]
fn a_processed_mark_acts_on_a_crashed_event_and_repeats_a_concurrent_one() {
    let s = "sims/business/webhook-crash-after-insert.toml";
    assert_eq!(cell(s, "webhook-unique-200", 0..20, V::LostEffect).0, 20);
    assert_eq!(cell(s, "webhook-processed-at", 0..20, V::LostEffect), (0, 0));
    let (r, events) = run_one(s, "webhook-processed-at", 0);
    assert_eq!((r.rows.len(), r.effects_total), (1, 1));
    assert!(events.iter().any(|w| matches!(w, What::RowTaken { row: 1 })));
    assert!(events.iter().any(|w| matches!(w, What::RowProcessed { row: 1 })));
    // Two copies at once: the second finds the first's row unprocessed and acts too.
    let (dup, _) =
        cell("sims/faults/double-submit.toml", "webhook-processed-at", 0..40, V::DuplicateEffect);
    assert!(dup > 20, "{dup}");
    let e = inline("program = [\"insert-row\"]\n[key]\n[rows]\nunique = [\"key\"]\non_clash = \"unprocessed\"\n")
        .unwrap_err();
    assert!(e.contains("m.toml:5:12") && e.contains("mark-processed"), "{e}");
}
