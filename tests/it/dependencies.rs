//! Fidelity II: dependencies that fail (the effect provider, the key cache, the database
//! connection, clocks), clients as they are, and the oracle rules that name what the client
//! was told against what happened.

use std::path::Path;
use std::sync::Arc;

use idemsim::history::What;
use idemsim::http::Reason;
use idemsim::model::Model;
use idemsim::report::{RunReport, ViolationKind as V};
use idemsim::run::{self, RunOptions};
use idemsim::scenario::Sim;
use idemsim::sweep;

use super::{model, root};

fn sim(src: &str) -> Arc<Sim> {
    Arc::new(Sim::parse(Path::new("inline.toml"), src).unwrap())
}

fn inline_model(src: &str) -> Arc<Model> {
    Arc::new(Model::parse(Path::new("inline-model.toml"), src).unwrap())
}

fn run_one(s: &Arc<Sim>, m: &Arc<Model>, seed: u64) -> (RunReport, Vec<What>) {
    let out = run::run(s, m, seed, RunOptions { keep_history: true }).unwrap();
    let events = out.history.unwrap().events.into_iter().map(|e| e.what).collect();
    (out.report, events)
}

fn named(r: &RunReport, v: V) -> bool {
    r.violations.iter().any(|x| x.name == v)
}

fn seeds_with(s: &Arc<Sim>, m: &Arc<Model>, seeds: std::ops::Range<u64>, v: V) -> u64 {
    let cells = sweep::run_matrix(std::slice::from_ref(s), std::slice::from_ref(m), Some(seeds), 2)
        .unwrap();
    cells[0].violations.get(v.name()).map_or(0, |x| x.seeds)
}

/// One order that charges a card right after its commit (for designs without an effect step),
/// through the given provider faults and client retry policy.
fn charge(faults: &str, attempts: u32) -> Arc<Sim> {
    sim(&format!(
        "[world]\nlatency_ms = [0.05, 0.05]\neffect_latency_ms = [100, 100]\n\
         [faults.effects]\n{faults}\n\
         [[inject]]\npoint = \"after-commit\"\naction = \"effect\"\nfallback = true\n\
         [[request]]\nid = \"order\"\nkey = \"k1\"\n\
         retry = {{ max_attempts = {attempts}, on = [\"transport\", 409, \"5xx\"], backoff_ms = 500 }}\n"
    ))
}

/// The provider charged, its answer is lost: the server times out and answers 500. A client
/// that stops there believes its order failed (phantom-success); one that retries gets the
/// stored 201 and the charge happened once.
#[test]
fn a_lost_provider_answer_leaves_the_client_unsure_until_the_retry() {
    let m = model("transactional");
    let (r, events) = run_one(&charge("ack_drop = 1.0", 1), &m, 0);
    assert!(events.contains(&What::ProviderAnswerLost));
    assert!(events.contains(&What::EffectUnacknowledged));
    assert_eq!((r.rows.len(), r.effects_total), (1, 1));
    assert_eq!(r.requests[0].copies[0][0].status, Some(500));
    // A 500 is ambiguous, not a refusal: the client never learned its order was made and
    // charged (not a phantom success, which needs a definitive refusal).
    assert!(named(&r, V::UnfinishedIntent) && named(&r, V::UnacknowledgedEffect));
    assert!(!named(&r, V::PhantomSuccess), "{:?}", r.violations);

    let (r, _) = run_one(&charge("ack_drop = 1.0", 3), &m, 0);
    let last = r.requests[0].copies[0].last().unwrap();
    assert_eq!((last.status, last.replayed), (Some(201), true));
    assert!(r.violations.is_empty(), "{:?}", r.violations);
}

/// The provider charges and answers an error: the server sees a failure, the charge exists.
#[test]
fn a_provider_error_after_success_still_charged() {
    let (r, events) = run_one(&charge("error_after_success = 1.0", 1), &model("transactional"), 0);
    assert!(events.contains(&What::ProviderErrorAfterSuccess));
    assert!(events.contains(&What::ProviderError));
    assert_eq!(r.effects_total, 1);
    assert!(named(&r, V::UnacknowledgedEffect) && named(&r, V::UnfinishedIntent));
}

/// A charge request lost on its way: nothing happened; a design that replays its stored 201
/// acknowledges an order whose charge never happened.
#[test]
fn a_lost_charge_request_leaves_a_replayed_success_without_effect() {
    let (r, events) = run_one(&charge("drop = 1.0", 3), &model("transactional"), 0);
    assert!(events.contains(&What::EffectCallLost));
    assert_eq!((r.rows.len(), r.effects_total), (1, 0));
    assert!(named(&r, V::LostEffect), "{:?}", r.violations);
}

/// A client library that sends the charge twice: the provider charges twice unless the
/// server passes it a key, and forgets keys after its retention.
#[test]
fn a_duplicated_charge_is_deduplicated_only_with_a_key_the_provider_remembers() {
    let with = |dedupe: &str| {
        inline_model(&format!(
            "program = [\"begin\", \"insert-row\", \"commit\", \"effect\"]\n\
             [effects]\ndedupe = \"{dedupe}\"\n"
        ))
    };
    let s = charge("duplicate = 1.0", 1);
    let (r, events) = run_one(&s, &with("none"), 0);
    assert!(events.contains(&What::EffectCallDuplicated));
    assert!(named(&r, V::DuplicateEffect));
    assert_eq!(seeds_with(&s, &with("row"), 0..20, V::DuplicateEffect), 0);
    // A provider that keeps its keys 1 ms: copies whose deliveries are further apart than
    // that are charged twice.
    let short = sim(&format!(
        "{}\n[world]\nlatency_ms = [0.05, 0.05]\neffect_latency_ms = [1, 50]\n\
         effect_dedupe_retention_ms = 1\n",
        "[faults.effects]\nduplicate = 1.0\n\
         [[inject]]\npoint = \"after-commit\"\naction = \"effect\"\nfallback = true\n\
         [[request]]\nid = \"order\"\nkey = \"k1\""
    ));
    assert!(seeds_with(&short, &with("row"), 0..20, V::DuplicateEffect) > 0);
}

/// The connection lost at COMMIT: across seeds, the commit happened or did not, and the
/// server answered 500 either way. When it happened and the client stops, the order exists
/// although its client was told it failed.
#[test]
fn a_commit_lost_with_its_connection_goes_either_way() {
    let s = sim("[world]\nlatency_ms = [0.05, 0.05]\n[faults]\ncommit_lost = 1.0\n\
                 [[request]]\nid = \"order\"\nkey = \"k1\"\n");
    let m = model("transactional");
    let (mut committed, mut rolled_back) = (0, 0);
    for seed in 0..30 {
        let (r, events) = run_one(&s, &m, seed);
        assert_eq!(r.requests[0].copies[0][0].status, Some(500));
        match events.iter().find_map(|e| match e {
            What::CommitLost { committed } => Some(*committed),
            _ => None,
        }) {
            Some(true) => {
                committed += 1;
                assert_eq!(r.rows.len(), 1);
                // Committed, and the client only got an ambiguous 500.
                assert!(named(&r, V::UnfinishedIntent), "{:?}", r.violations);
            }
            Some(false) => {
                rolled_back += 1;
                // Nothing exists; the client that stops at the 500 does not know it.
                assert!(r.rows.is_empty(), "{:?}", r.violations);
            }
            None => panic!("seed {seed}: no lost commit"),
        }
    }
    assert!(committed > 5 && rolled_back > 5, "{committed} committed, {rolled_back} not");
}

/// Autocommitted statements are transactions too: check-first's INSERT can be lost at its
/// commit, and its retry (finding no key) writes the order again.
#[test]
fn check_first_writes_twice_after_a_lost_autocommit() {
    let s =
        sim(&std::fs::read_to_string(root().join("sims/dependencies/commit-lost.toml")).unwrap());
    assert!(seeds_with(&s, &model("check-first"), 0..60, V::DuplicateRow) > 0);
    assert_eq!(seeds_with(&s, &model("transactional"), 0..60, V::DuplicateRow), 0);
}

/// The key cache of a design that fails closed (`on_store_error = 503`): refused (503, safe to
/// retry, nothing stored), a reply lost after the operation was applied, and a 503 "safe to
/// retry" sent after the row was committed.
#[test]
fn cache_faults_answer_503_and_the_oracle_checks_the_promise() {
    let fail_closed = |name: &str| {
        let src = std::fs::read_to_string(root().join(format!("models/{name}.toml"))).unwrap();
        inline_model(&src.replacen("[key]\n", "[key]\non_store_error = 503\n", 1))
    };
    let one = |faults: &str| {
        sim(&format!(
            "[world]\nlatency_ms = [0.05, 0.05]\n[faults.cache]\n{faults}\n\
             [[request]]\nid = \"order\"\nkey = \"k1\"\n"
        ))
    };
    let nx = fail_closed("ttl-cache-set-nx");
    let (r, events) = run_one(&one("unavailable = 1.0"), &nx, 0);
    assert!(events.contains(&What::CacheRefused));
    let a = &r.requests[0].copies[0][0];
    assert_eq!((a.status, a.reason), (Some(503), Some(Reason::SafeToRetry)));
    assert!(r.rows.is_empty(), "nothing was written");
    assert!(!named(&r, V::FalseSafeRetry) && !named(&r, V::PhantomSuccess), "{:?}", r.violations);

    let (r, events) = run_one(&one("reply_drop = 1.0"), &nx, 0);
    assert!(events.contains(&What::CacheReplyLost));
    assert_eq!(r.requests[0].copies[0][0].status, Some(503));
    assert_eq!(r.keys, 1, "the SET NX was applied although its reply was lost");

    // GET, INSERT, SET: a SET refused after the INSERT committed answers "safe to retry".
    let s = one("unavailable = 0.5");
    assert!(seeds_with(&s, &fail_closed("ttl-cache-get-set"), 0..40, V::FalseSafeRetry) > 0);
    // The shipped design answers an unhandled 500: no promise, so no false promise.
    assert_eq!(seeds_with(&s, &model("ttl-cache-get-set"), 0..40, V::FalseSafeRetry), 0);
    assert_eq!(seeds_with(&s, &model("transactional"), 0..40, V::FalseSafeRetry), 0);
}

/// A cache that evicts or restarts loses keys before their TTL: the duplicate that follows is
/// not policy (the TTL is the documented retention).
#[test]
fn keys_lost_before_their_retention_are_not_permitted_duplicates() {
    let s = sim("[world]\nlatency_ms = [0.05, 0.05]\n[faults]\nreply_drop_after_commit = 1.0\n\
         [faults.cache]\nrestart = 0.5\n\
         [[request]]\nid = \"order\"\nkey = \"k1\"\ntimeout_ms = 100\n\
         retry = { max_attempts = 2, on = [\"transport\"], backoff_ms = 10 }\n");
    let m = model("ttl-cache-set-nx");
    assert!(seeds_with(&s, &m, 0..40, V::DuplicateRow) > 0);
    assert_eq!(seeds_with(&s, &m, 0..40, V::ExpiredDuplicateRow), 0);
    // An operator's wipe is no policy either, for a design without a retention.
    let case14 =
        sim(&std::fs::read_to_string(root().join("sims/article/14-collected-key-new-row.toml"))
            .unwrap());
    let (r, _) = run_one(&case14, &model("transactional"), 0);
    assert!(named(&r, V::DuplicateRow) && !named(&r, V::ExpiredDuplicateRow));
}

/// A partitioned process cannot reach its cache or its effect provider either.
#[test]
fn a_partition_cuts_the_cache() {
    let s = sim("[world]\nlatency_ms = [0.05, 0.05]\n\
                 [[partition]]\nprocess = 1\nfrom_ms = 0.06\nfor_ms = 2000\n\
                 [[request]]\nid = \"order\"\nkey = \"k1\"\ntimeout_ms = 5000\n");
    let (_, events) = run_one(&s, &model("ttl-cache-set-nx"), 0);
    assert!(events.contains(&What::CacheUnreachable), "{events:?}");
    // ... and from the effect provider: the charge is lost in the partition.
    let s = sim("[world]\nlatency_ms = [0.05, 0.05]\n\
                 [[partition]]\nprocess = 1\nfrom_ms = 0.06\nfor_ms = 2000\n\
                 [[inject]]\npoint = \"after-commit\"\naction = \"effect\"\nfallback = true\n\
                 [[request]]\nid = \"order\"\nkey = \"k1\"\ntimeout_ms = 5000\n");
    let (r, events) = run_one(&s, &model("transactional"), 0);
    assert!(events.contains(&What::LostInPartition), "{events:?}");
    assert_eq!(r.effects_total, 0);
}

/// A crashed process resets its clients' connections (they fail at once), unless the sim
/// says the machine went silent (they wait for their timeout).
#[test]
fn a_crash_resets_connections_or_goes_silent() {
    let crash = |signal: &str| {
        sim(&format!(
            "[world]\nlatency_ms = [0.05, 0.05]\n[faults]\ncrash_signal = \"{signal}\"\n\
             [[inject]]\npoint = \"before-commit\"\naction = \"crash\"\nrestart_ms = 100\n\
             [[request]]\nid = \"order\"\nkey = \"k1\"\ntimeout_ms = 3000\n"
        ))
    };
    let m = model("transactional");
    let (r, events) = run_one(&crash("reset"), &m, 0);
    assert!(events.contains(&What::ConnectionReset));
    // At once: within the request's own few milliseconds (a cold first handler and a commit),
    // never its 3 s timeout.
    assert!(r.requests[0].copies[0][0].done_ms < 20.0, "{:?}", r.requests[0].copies[0][0]);
    let (r, _) = run_one(&crash("silence"), &m, 0);
    assert!(r.requests[0].copies[0][0].done_ms >= 3000.0);
    // A process's memory dies with it, even when the run ends before it restarts.
    let (r, _) = run_one(&crash("reset"), &model("inbox-memory"), 0);
    assert_eq!((r.keys, r.keys_in_progress), (0, 0), "{:?}", r.violations);
}

/// A proxy resends after a stall and the client gets the resent copy's reply: on a keyed
/// design that is the replay of the first copy's work.
#[test]
fn a_proxy_resend_answers_with_the_second_copy() {
    let s = sim("[world]\nlatency_ms = [0.05, 0.05]\n\
                 [faults]\nduplicate = 1.0\nduplicate_after_ms = [10, 10]\n\
                 [[request]]\nid = \"order\"\nkey = \"k1\"\n");
    let (r, events) = run_one(&s, &model("transactional"), 0);
    assert!(events.contains(&What::RequestDuplicated { after_us: 10_000 }));
    let a = &r.requests[0].copies[0][0];
    assert_eq!((a.status, a.replayed, r.rows.len()), (Some(201), true, 1));
    let (r, _) = run_one(&s, &model("no-key"), 0);
    assert_eq!(r.rows.len(), 2);
}

/// A reply lost after commit, then a retry with another body refused as a mismatch: the
/// order exists and the client was told it failed. A 409 for a mismatch is final.
#[test]
fn a_refused_retry_of_a_committed_order_is_a_phantom_success() {
    let s = sim("[world]\nlatency_ms = [0.05, 0.05]\n[faults]\nreply_drop_after_commit = 1.0\n\
                 [[request]]\nid = \"order\"\nkey = \"k1\"\ntimeout_ms = 100\n\
                 retry = { max_attempts = 2, on = [\"transport\"], backoff_ms = 10, \
                 body = '{\"item\":\"other-item\",\"qty\":1}' }\n");
    let (r, _) = run_one(&s, &model("transactional"), 0);
    assert_eq!(r.requests[0].copies[0][1].status, Some(422));
    assert!(named(&r, V::PhantomSuccess), "{:?}", r.violations);
    let m409 = inline_model(
        "program = [\"begin\", \"lookup\", \"insert-row\", \"save-response\", \"commit\"]\n\
         [key]\nfingerprint = \"validated\"\non_mismatch = 409\n",
    );
    let (r, _) = run_one(&s, &m409, 0);
    let a = &r.requests[0].copies[0][1];
    assert_eq!((a.status, a.reason), (Some(409), Some(Reason::Mismatch)));
    assert!(named(&r, V::PhantomSuccess) && !named(&r, V::UnfinishedIntent), "{:?}", r.violations);
}

/// Clocks: the lease designs fail the clock sims because of the clocks. With the skew or the
/// jump taken out, the same schedules pass.
#[test]
fn leases_fail_on_clocks_and_pass_without_the_clock_fault() {
    let file = |rel: &str| std::fs::read_to_string(root().join(rel)).unwrap();
    let lease = model("lease");
    let skew = file("sims/dependencies/clock-skew.toml");
    assert!(seeds_with(&sim(&skew), &lease, 0..40, V::DuplicateEffect) > 0);
    let no_skew = skew.replace("clock_skew_ms = [-1000, 1000]", "clock_skew_ms = [0, 0]");
    assert_ne!(skew, no_skew);
    assert_eq!(seeds_with(&sim(&no_skew), &lease, 0..40, V::DuplicateEffect), 0);

    let jump = file("sims/dependencies/clock-jump.toml");
    assert!(seeds_with(&sim(&jump), &lease, 0..20, V::DuplicateEffect) > 10);
    let no_jump = jump.replace("jump_ms = 2000", "jump_ms = 0");
    assert_ne!(jump, no_jump);
    assert_eq!(seeds_with(&sim(&no_jump), &lease, 0..20, V::DuplicateEffect), 0);
    assert_eq!(seeds_with(&sim(&jump), &model("transactional"), 0..20, V::DuplicateEffect), 0);
}

/// The report sets the model's retention against the client's retry window.
#[test]
fn retention_is_reported_against_the_retry_window() {
    let s =
        sim(&std::fs::read_to_string(root().join("sims/faults/key-gc-late-retry.toml")).unwrap());
    let m = model("transactional-ttl");
    // One attempt of 300 ms, then a day and an hour of backoff.
    assert_eq!(s.retry_window_us(), 90_000_300_000);
    let line = run::retention_line(&s, &m).unwrap();
    assert!(line.contains("kept 24 h") && line.contains("until 25 h"), "{line}");
    assert!(run::warnings(&s, &m).iter().any(|w| w.contains("keeps keys 24 h")));
    assert!(run::retention_line(&s, &model("transactional")).is_none());
}

/// Every dependency fault is drawn from the seed: each seed's trace is the same on a second
/// run, across the dependency sims and the designs they separate.
#[test]
fn dependency_sims_are_deterministic() {
    let sims =
        idemsim::catalog::sims_at(root().join("sims/dependencies").to_str().unwrap()).unwrap();
    assert_eq!(sims.len(), 7);
    let models: Vec<_> =
        ["transactional", "lease", "ttl-cache-set-nx", "outbox", "stripe-v1"].map(model).into();
    let opts = sweep::SweepOptions { jobs: 2, check_determinism: true, ..Default::default() };
    let cells = sweep::run_cells(&sims, &models, Some(0..30), &opts, |_, _| {}).unwrap();
    assert_eq!(cells.len(), 35);
    for c in &cells {
        assert!(c.nondeterministic_seeds.is_empty(), "{} × {}", c.sim, c.model);
    }
}

/// The 409 of `replay = 409` ("already processed") is a final answer, not a failure: the
/// client of an applied order that ends on it is neither unfinished nor a phantom success.
#[test]
fn an_already_processed_409_is_final() {
    let s = sim("[world]\nlatency_ms = [0.05, 0.05]\n[faults]\nreply_drop_after_commit = 1.0\n\
                 [[request]]\nid = \"order\"\nkey = \"k1\"\ntimeout_ms = 100\n\
                 retry = { max_attempts = 2, on = [\"transport\"], backoff_ms = 10 }\n");
    let m = inline_model(
        "program = [\"begin\", \"lookup\", \"insert-row\", \"save-response\", \"commit\"]\n\
         [key]\nreplay = 409\n",
    );
    let (r, _) = run_one(&s, &m, 0);
    let a = &r.requests[0].copies[0][1];
    assert_eq!((a.status, a.reason), (Some(409), Some(Reason::AlreadyDone)));
    assert!(r.violations.is_empty(), "{:?}", r.violations);
}
