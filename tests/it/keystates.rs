//! Catalogue II: key-record states beyond in-progress and done: a `failed` record a retry takes
//! back (`on_error = ["mark-failed"]`), a per-record expiry checked on read (`expiry =
//! "on-read"`) and the 410 Gone of an expired key (`on_expired = 410`).

use std::path::Path;
use std::sync::Arc;

use idemsim::history::What;
use idemsim::http::Reason;
use idemsim::model::Model;
use idemsim::report::{RunReport, ViolationKind as V};
use idemsim::run::{self, RunOptions};
use idemsim::scenario::Sim;

use super::{model, sim};

fn run_with(s: &Arc<Sim>, m: &Arc<Model>, seed: u64) -> (RunReport, Vec<What>) {
    let out = run::run(s, m, seed, RunOptions { keep_history: true }).unwrap();
    (out.report, out.history.unwrap().events.into_iter().map(|e| e.what).collect())
}

fn inline_sim(src: &str) -> Arc<Sim> {
    Arc::new(Sim::parse(Path::new("s.toml"), src).unwrap())
}

fn statuses(r: &RunReport) -> Vec<Option<u16>> {
    r.requests.iter().flat_map(|q| q.copies.iter().flatten()).map(|a| a.status).collect()
}

const FAIL_THEN: &str = "[[inject]]\npoint = \"before-commit\"\naction = \"fail\"\ntimes = 1\n\n\
     [[request]]\nid = \"first\"\nkey = \"k1\"\n\n\
     [[request]]\nid = \"retry\"\nintent = \"first\"\nafter = \"first\"\nkey = \"k1\"\n";

#[test]
fn a_failed_record_is_kept_and_a_retry_with_the_same_payload_runs_again() {
    let m = model("seed002-sql");
    for seed in 0..10 {
        let (r, events) = run_with(&inline_sim(FAIL_THEN), &m, seed);
        assert_eq!(statuses(&r), vec![Some(500), Some(201)], "seed {seed}");
        assert_eq!(r.rows.len(), 1);
        assert!(r.violations.is_empty(), "{:?}", r.violations);
        let order: Vec<&What> = events
            .iter()
            .filter(|w| {
                matches!(w, What::MarkedFailed { n: 1 } | What::FoundFailed | What::RetookFailed)
            })
            .collect();
        assert_eq!(order.len(), 3, "{order:?}");
        assert!(matches!(order[0], What::MarkedFailed { .. }));
        assert!(matches!(order[2], What::RetookFailed));
    }
    // The first request's own record, as the observer reads it right after it: failed.
    let probe = FAIL_THEN
        .replace("id = \"first\"\nkey", "id = \"first\"\nexpect = { keys_after = 1 }\nkey");
    let (r, _) = run_with(&inline_sim(&probe), &m, 0);
    assert!(r.checks.iter().all(|c| c.held), "{:?}", r.checks);
    assert_eq!(r.keys_in_progress, 0);
    // Another payload under the failed key is still a mismatch (409 here), and runs nothing.
    let other = format!("{FAIL_THEN}body = '{{\"item\":\"other-item\",\"qty\":1}}'\n");
    let (r, _) = run_with(&inline_sim(&other), &m, 0);
    assert_eq!(statuses(&r), vec![Some(500), Some(409)]);
    assert!(r.rows.is_empty());
    // The whole transient-failure sim passes (it stored and replayed the 500 before).
    let (r, _) = run_with(&sim("sims/catalogue/transient-failure.toml"), &m, 0);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
}

#[test]
fn two_retries_of_a_failed_request_take_it_back_once() {
    let src = FAIL_THEN.replace(
        "after = \"first\"\nkey = \"k1\"\n",
        "after = \"first\"\nkey = \"k1\"\ncopies = 2\nprocess = \"alternate\"\n",
    );
    let src = format!("[world]\nprocesses = 2\n\n{src}");
    let m = model("seed002-sql");
    let mut both_found = 0;
    for seed in 0..40 {
        let (r, events) = run_with(&inline_sim(&src), &m, seed);
        let retook = events.iter().filter(|w| matches!(w, What::RetookFailed)).count();
        let found = events.iter().filter(|w| matches!(w, What::FoundFailed)).count();
        assert_eq!(retook, 1, "seed {seed}");
        assert_eq!(r.rows.len(), 1, "seed {seed}");
        if found == 2 {
            both_found += 1;
            let in_flight =
                r.requests[1].copies.iter().flatten().any(|a| a.reason == Some(Reason::InFlight));
            assert!(in_flight, "seed {seed}: the second retake lost the compare-and-set");
        }
    }
    assert!(both_found > 0, "no seed had both retries read the failed record");
}

#[test]
fn an_expiry_checked_on_read_holds_without_a_collector() {
    let s = sim("sims/faults/late-retry-no-collector.toml");
    // Enforced only by a collector: with none, the 2 s old key still replays.
    let (r, _) = run_with(&s, &model("transactional-ttl"), 0);
    assert!(r.violations.is_empty() && r.rows.len() == 1, "{:?}", r.violations);
    // Checked on read: the late retry runs as new; documented, so policy-permitted.
    let (r, events) = run_with(&s, &model("transactional-expires-at"), 0);
    assert_eq!(r.rows.len(), 2);
    let v: Vec<(V, bool)> = r.violations.iter().map(|v| (v.name, v.permitted)).collect();
    assert_eq!(v, vec![(V::ExpiredDuplicateRow, true)]);
    assert!(events.iter().any(|w| matches!(w, What::KeyExpired { intent } if intent == "order")));
    // 410: the tombstone answers; no second row. A 410 "key expired" is the design's final
    // answer (no retry will be told more), though it says nothing of the order: judged as
    // the design's answer, not as no answer (its cost is the 410 in the statuses).
    let (r, events) = run_with(&s, &model("transactional-expired-410"), 0);
    assert_eq!(r.rows.len(), 1);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    let last = r.requests[0].copies[0].last().unwrap();
    assert_eq!((last.status, last.reason), (Some(410), Some(Reason::Expired)));
    assert!(events.iter().any(|w| matches!(w, What::ExpiredGone)));
    // Within the retention nothing changes: case 09's retry replays under all three.
    let case09 = sim("sims/article/09-reply-lost-retry-same-order.toml");
    for m in ["transactional-expires-at", "transactional-expired-410"] {
        let (r, _) = run_with(&case09, &model(m), 0);
        assert!(r.checks.iter().all(|c| c.held), "{m}: {:?}", r.checks);
    }
}

#[test]
fn key_state_options_refuse_what_they_cannot_do() {
    let m = |src: &str| Model::parse(Path::new("m.toml"), src).map_err(|e| e.to_string());
    let bad = [
        (
            "program = [\"begin\", \"lookup\", \"insert-row\", \"save-response\", \"commit\"]\n\
             on_error = [\"mark-failed\"]\n[key]\n",
            "2:13",
            "needs a `claim` step",
        ),
        (
            "program = [\"claim\", \"insert-row\", \"save-response\"]\n\
             on_error = [\"mark-failed\", \"release-claim\"]\n[key]\n",
            "2:28",
            "choose one",
        ),
        (
            "program = [\"claim\", \"insert-row\", \"save-response\"]\n\
             on_error = [\"mark-failed\"]\nstore_outcomes = \"all\"\n[key]\n",
            "2:13",
            "store_outcomes",
        ),
        (
            "program = [\"claim\", \"insert-row\", \"save-response\"]\n[key]\nexpiry = \"on-read\"\n",
            "3:10",
            "needs both",
        ),
        (
            "program = [\"claim\", \"insert-row\", \"save-response\"]\n[key]\nretention_ms = 5\n\
             on_expired = 410\n",
            "4:14",
            "needs key.expiry",
        ),
        (
            "program = [\"claim\", \"insert-row\", \"save-response\"]\n[key]\nretention_ms = 5\n\
             expiry = \"on-read\"\non_expired = 404\n",
            "5:14",
            "expected \"new\" or 410",
        ),
    ];
    for (src, at, what) in bad {
        let e = m(src).unwrap_err();
        assert!(e.contains(&format!("m.toml:{at}")) && e.contains(what), "{src}\n{e}");
    }
}

#[test]
fn keys_from_the_payload_and_fingerprints_over_selected_fields() {
    // A derived key: two intents with equal orders share it, and the second is served the
    // first's order (no header is read: a request without one is not refused).
    let eq = sim("sims/catalogue/equal-payload-intents.toml");
    let (r, _) = run_with(&eq, &model("powertools-payload-key"), 0);
    assert_eq!(r.rows.len(), 1);
    assert!(r.violations.iter().any(|v| v.name == V::ForeignReply && v.intent == "second-order"));
    let (r, _) = run_with(&eq, &model("powertools-approx"), 0);
    assert_eq!(r.rows.len(), 2);
    let no_key = inline_sim("[[request]]\nid = \"a\"\n");
    let (r, _) = run_with(&no_key, &model("powertools-payload-key"), 0);
    assert_eq!(statuses(&r), vec![Some(201)]);
    // A fingerprint over the item only: another qty under the key replays the first order.
    let case03 = sim("sims/article/03-same-key-changed-content.toml");
    let (r, _) = run_with(&case03, &model("powertools-validate-item"), 0);
    let second = &r.requests[1].copies[0][0];
    assert_eq!((second.status, second.replayed), (Some(201), true));
    let (r, _) = run_with(&case03, &model("powertools-approx"), 0);
    assert_eq!(r.requests[1].copies[0][0].status, Some(400));
}

#[test]
fn key_format_checks_refuse_before_any_key_step() {
    let strict = Arc::new(
        Model::parse(
            Path::new("m.toml"),
            "program = [\"begin\", \"lookup\", \"insert-row\", \"save-response\", \"commit\"]\n\
             [key]\nmin_len = 8\nformat = \"uuid\"\n",
        )
        .unwrap(),
    );
    for (key, status) in [
        ("k1", Some(400)),
        ("3F2504E0-4F89-11D3-9A0C-0305E82C3301", Some(201)),
        ("3f2504e0-4f89-11d3-9a0c-0305e82c330", Some(400)),
        ("3f2504e0x4f89-11d3-9a0c-0305e82c3301", Some(400)),
    ] {
        let s = inline_sim(&format!("[[request]]\nid = \"a\"\nkey = \"{key}\"\n"));
        let (r, events) = run_with(&s, &strict, 0);
        assert_eq!(statuses(&r), vec![status], "{key}");
        if status == Some(400) {
            assert!(events.iter().all(|w| !matches!(w, What::LookupMiss)), "{key}");
        }
    }
    let m = |src: &str| Model::parse(Path::new("m.toml"), src).map_err(|e| e.to_string());
    let base = "program = [\"claim\", \"insert-row\", \"save-response\"]\n[key]\n";
    for (extra, at, what) in [
        ("key_from = [\"price\"]\n", "3:13", "unknown key.key_from field `price`"),
        ("key_from = []\n", "3:12", "at least one"),
        ("fingerprint_fields = [\"qty\", \"qty\"]\n", "3:30", "listed twice"),
        ("fingerprint = \"raw\"\nfingerprint_fields = [\"qty\"]\n", "4:22", "needs fingerprint"),
        ("min_len = 300\n", "3:11", "above max_len"),
        ("key_from = [\"item\"]\nformat = \"uuid\"\n", "4:10", "comes from the payload"),
        ("format = \"ulid\"\n", "3:10", "uuid"),
    ] {
        let e = m(&format!("{base}{extra}")).unwrap_err();
        assert!(e.contains(&format!("m.toml:{at}")) && e.contains(what), "{extra}\n{e}");
    }
}

#[test]
fn a_202_in_progress_is_no_success_and_a_proceeding_marker_blocks_nobody() {
    // 202 while the key is in progress: the stalled original's retry is told 202, which its
    // client does not poll; no success, no final answer.
    let slow = sim("sims/faults/slow-server-short-timeout.toml");
    let m = model("seed002-sql-202");
    let seed = (0..20)
        .find(|&s| {
            let (r, _) = run_with(&slow, &m, s);
            r.violations.iter().any(|v| v.name == V::UnfinishedIntent)
        })
        .expect("a seed where the retry meets the in-progress key");
    let (r, _) = run_with(&slow, &m, seed);
    let a202: Vec<_> = r
        .requests
        .iter()
        .flat_map(|q| q.copies.iter().flatten())
        .filter(|a| a.status == Some(202))
        .collect();
    assert!(!a202.is_empty());
    assert!(a202.iter().all(|a| a.reason == Some(Reason::InFlight) && !a.is_success()));
    // The Redis design: the second copy GETs the first's in_progress marker and runs anyway,
    // then overwrites the marker with its own (SET without NX).
    let case11 = sim("sims/article/11-twenty-concurrent-one-process.toml");
    let (r, events) = run_with(&case11, &model("seed002-redis-get-set"), 0);
    assert!(r.rows.len() > 1);
    assert!(events.iter().any(|w| matches!(w, What::InFlightIgnored)));
    assert!(r.violations.iter().all(|v| v.name != V::StuckKey));
    let bad = Model::parse(
        Path::new("m.toml"),
        "program = [\"claim\", \"insert-row\", \"save-response\"]\n[key]\nin_flight = 201\n",
    )
    .unwrap_err()
    .to_string();
    assert!(bad.contains("m.toml:3:13") && bad.contains("\"proceed\""), "{bad}");
}

#[test]
fn a_release_by_key_deletes_the_record_of_whoever_took_the_claim_over() {
    // The original claims, stalls 50 ms, then fails; its 10 ms lease lets the retry take the
    // claim over at 20 ms and finish. The original's error path then releases: by key alone
    // (Powertools TypeScript #5675) it deletes the retry's record, and a late request runs the
    // order again; by its own token it deletes nothing.
    let sim = inline_sim(
        "[[inject]]\npoint = \"work\"\naction = \"pause\"\npause_ms = 50\nrequest = \"order\"\n\n\
         [[inject]]\npoint = \"work\"\naction = \"fail\"\nrequest = \"order\"\n\n\
         [[request]]\nid = \"order\"\nkey = \"k1\"\n\n\
         [[request]]\nid = \"retry\"\nintent = \"order\"\nkey = \"k1\"\ndelay_ms = 20\n\n\
         [[request]]\nid = \"late\"\nintent = \"order\"\nkey = \"k1\"\ndelay_ms = 200\n",
    );
    let model = |release: &str| {
        Arc::new(
            Model::parse(
                Path::new("m.toml"),
                &format!(
                    "program = [\"claim\", \"@work\", \"begin\", \"insert-row\", \"commit\", \
                     \"save-response\"]\non_error = [\"rollback\", \"{release}\"]\n\
                     [key]\nlease_ms = 10\n"
                ),
            )
            .unwrap(),
        )
    };
    let (r, events) = run_with(&sim, &model("release-key"), 0);
    assert!(events.iter().any(|w| matches!(w, What::TookOver)));
    assert!(events.iter().any(|w| matches!(w, What::KeyReleased { n: 1 })), "{events:?}");
    assert_eq!(r.rows.len(), 2);
    assert!(r.violations.iter().any(|v| v.name == V::DuplicateRow));
    let (r, events) = run_with(&sim, &model("release-claim"), 0);
    assert!(events.iter().any(|w| matches!(w, What::ClaimReleased { n: 0 })));
    assert_eq!(r.rows.len(), 1);
    assert!(r.requests[2].copies[0][0].replayed);
}

#[test]
fn a_deadline_kills_the_stalled_handler_before_it_commits() {
    let s = sim("sims/catalogue/pause-past-deadline.toml");
    let (r, events) = run_with(&s, &model("powertools-deadline"), 0);
    assert_eq!(r.rows.len(), 1);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert!(events.iter().any(|w| matches!(w, What::DeadlineKilled)));
    // The stalled original left its claim in progress (no error path), leased to its deadline:
    // a retry took it over after 3 s.
    assert!(events.iter().any(|w| matches!(w, What::TookOver)));
    assert!(events.iter().all(|w| !matches!(w, What::ClaimReleased { .. })));
    // Without the kill, the stalled work commits after the takeover.
    let (r, _) = run_with(&s, &model("powertools-approx"), 0);
    assert_eq!(r.rows.len(), 2);
    let m = |src: &str| Model::parse(Path::new("m.toml"), src).map_err(|e| e.to_string());
    let e = m("program = [\"claim\", \"insert-row\", \"save-response\"]\n[key]\nlease_ms = \"deadline\"\n")
        .unwrap_err();
    assert!(e.contains("m.toml:3:12") && e.contains("deadline_ms"), "{e}");
    let e = m("program = [\"claim\", \"insert-row\", \"save-response\"]\n[key]\nlease_ms = true\n")
        .unwrap_err();
    assert!(e.contains("m.toml:3:12") && e.contains("\"deadline\""), "{e}");
}

#[test]
fn a_429_stored_under_the_key_pins_every_retry() {
    let s = sim("sims/catalogue/rate-limited-burst.toml");
    let (r, events) = run_with(&s, &model("stripe-v1-rate-limited"), 0);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert_eq!(r.rows.len(), 30);
    let limited =
        events.iter().filter(|w| matches!(w, What::RateLimited { allowed: false })).count();
    // A bucket of 25 lets 25 of the 30 through at once and the refill (25/s) one more while
    // the process works through them; the four refused get through on their retry.
    assert_eq!(limited, 4);
    let (r, _) = run_with(&s, &model("rate-limit-after-claim"), 0);
    assert_eq!(r.rows.len(), 26);
    let replayed_429 = r
        .requests
        .iter()
        .flat_map(|q| q.copies.iter().flatten())
        .filter(|a| a.status == Some(429) && a.replayed)
        .count();
    assert!(replayed_429 >= 4, "{replayed_429}");
    assert_eq!(r.violations.iter().filter(|v| v.name == V::UnfinishedIntent).count(), 4);
    let m = |src: &str| Model::parse(Path::new("m.toml"), src).map_err(|e| e.to_string());
    let e = m("program = [\"rate-limit\", \"insert-row\"]\n").unwrap_err();
    assert!(e.contains("m.toml:1:12") && e.contains("[limits]"), "{e}");
    let e = m("program = [\"insert-row\"]\n[limits]\nper_second = 5\n").unwrap_err();
    assert!(e.contains("m.toml:2:1") && e.contains("`rate-limit` step"), "{e}");
    let e =
        m("program = [\"rate-limit\", \"insert-row\"]\n[limits]\nper_second = 0\n").unwrap_err();
    assert!(e.contains("m.toml:3:14") && e.contains("1..=1000000"), "{e}");
}

#[test]
fn a_local_cache_answers_from_process_memory_until_a_restart() {
    // The second request replays from the first's process memory, without the store.
    let case09 = sim("sims/article/09-reply-lost-retry-same-order.toml");
    let (r, events) = run_with(&case09, &model("powertools-local-cache"), 0);
    assert!(r.checks.iter().all(|c| c.held), "{:?}", r.checks);
    assert!(events.iter().any(|w| matches!(w, What::LocalCacheHit)));
    let (_, events) = run_with(&case09, &model("powertools-approx"), 0);
    assert!(events.iter().all(|w| !matches!(w, What::LocalCacheHit)));
    let e = Model::parse(
        Path::new("m.toml"),
        "program = [\"claim\", \"insert-row\", \"save-response\"]\n[key]\nstore = \"memory\"\nlocal_cache = true\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("m.toml:3:9") && e.contains("local_cache"), "{e}");
}
