//! The oracle's rules on hand-built observations (issue 20): each rule judged on a world
//! written down by hand, so a rule is tested apart from the simulated world that usually
//! feeds it.

use std::path::Path;

use idemsim::http::Reason;
use idemsim::model::Model;
use idemsim::oracle;
use idemsim::report::{
    AttemptOutcome, Collected, KeyRecord, Observation, Outcome, RecordState, RequestReport,
    RowRecord, Scope, Violation, ViolationKind as V,
};
use idemsim::scenario::Sim;

fn sim(src: &str) -> Sim {
    Sim::parse(Path::new("hand.toml"), src).unwrap()
}

fn model(src: &str) -> Model {
    Model::parse(Path::new("hand-model.toml"), src).unwrap()
}

/// One request `order` of intent `order`, key k1, retried on transport failures and 5xx.
const ONE: &str = "[[request]]\nid = \"order\"\nkey = \"k1\"\n\
                   retry = { max_attempts = 4, on = [\"transport\", \"5xx\", 409] }\n";

fn keyed() -> Model {
    model(
        "program = [\"begin\", \"lookup\", \"insert-row\", \"save-response\", \"commit\"]\n[key]\n",
    )
}

fn reply(status: u16, body: &str, key: &str, sent_ms: f64) -> AttemptOutcome {
    AttemptOutcome {
        outcome: Outcome::Reply,
        status: Some(status),
        replayed: false,
        body: Some(body.into()),
        key: Some(key.into()),
        sent_ms,
        done_ms: sent_ms + 1.0,
        reason: None,
        exec: None,
        row: None,
    }
}

fn lost(key: &str, sent_ms: f64) -> AttemptOutcome {
    AttemptOutcome {
        outcome: Outcome::TransportFailure,
        status: None,
        body: None,
        ..reply(0, "", key, sent_ms)
    }
}

fn row(id: i64, intent: &str, created_us: i64) -> RowRecord {
    RowRecord {
        id,
        user: "u1".into(),
        operation: "order.create".into(),
        item: "test-item".into(),
        qty: 2,
        intent: intent.into(),
        created_us,
        exec: id,
        processed: false,
    }
}

fn observation(attempts: Vec<AttemptOutcome>, rows: Vec<RowRecord>) -> Observation {
    Observation {
        requests: vec![RequestReport {
            id: "order".into(),
            intent: "order".into(),
            copies: vec![attempts],
            rows_after: None,
            keys_after: None,
            responses_after: None,
            finished: true,
        }],
        rows,
        keys: vec![],
        effect_log: vec![],
        deliveries: 0,
        collected: vec![],
        bounds_hit: vec![],
        unsent: vec![],
        resources: vec![],
        writes: vec![],
        end_us: 0,
        events: 0,
        trace_hash: 0,
        faults: Default::default(),
    }
}

fn names(v: &[Violation]) -> Vec<V> {
    v.iter().map(|x| x.name).collect()
}

/// An acknowledged row that does not exist is a lost success, whatever other row exists.
#[test]
fn an_acknowledged_row_that_does_not_exist_is_lost() {
    let s = sim(ONE);
    let body = r#"{"id":1,"item":"test-item","qty":2}"#;
    let obs = observation(vec![reply(201, body, "k1", 0.0)], vec![row(2, "order", 10)]);
    assert_eq!(names(&oracle::violations(&s, &keyed(), &obs)), vec![V::LostSuccess]);
}

/// A chain that got a final answer is finished, even if a later attempt of it was lost.
#[test]
fn a_final_answer_earlier_in_the_chain_finishes_the_intent() {
    let s = sim(ONE);
    let mut taken = reply(409, r#"{"error":"already exists"}"#, "k1", 0.0);
    taken.reason = Some(Reason::Taken);
    let obs = observation(vec![taken.clone(), lost("k1", 5.0)], vec![]);
    assert!(!names(&oracle::violations(&s, &keyed(), &obs)).contains(&V::UnfinishedIntent));
    // Without the final answer it is unfinished.
    let obs = observation(vec![reply(500, "{}", "k1", 0.0), lost("k1", 5.0)], vec![]);
    assert!(names(&oracle::violations(&s, &keyed(), &obs)).contains(&V::UnfinishedIntent));
}

/// For a design that marks inbox rows processed, an unprocessed row is not applied: the
/// truthful refusal about it is no phantom success; a processed one is.
#[test]
fn an_unprocessed_inbox_row_is_not_applied() {
    let s = sim(ONE);
    let m = model("program = [\"insert-row\", \"effect\", \"mark-processed\"]\n");
    let failed = vec![reply(402, r#"{"error":"declined"}"#, "k1", 0.0)];
    let obs = observation(failed.clone(), vec![row(1, "order", 10)]);
    assert!(!names(&oracle::violations(&s, &m, &obs)).contains(&V::PhantomSuccess));
    let obs = observation(failed, vec![RowRecord { processed: true, ..row(1, "order", 10) }]);
    assert!(names(&oracle::violations(&s, &m, &obs)).contains(&V::PhantomSuccess));
}

/// A second row after the retention is permitted only when the retry sent the key that was
/// collected, and only when that record held a completed outcome.
#[test]
fn expiry_is_permitted_by_key_and_only_for_completed_records() {
    let s = sim(ONE);
    let m = model(
        "program = [\"begin\", \"lookup\", \"insert-row\", \"save-response\", \"commit\"]\n\
         [key]\nretention_ms = 1\n",
    );
    let b1 = r#"{"id":1,"item":"test-item","qty":2}"#;
    let b2 = r#"{"id":2,"item":"test-item","qty":2}"#;
    let gone = |key: &str, done: bool| Collected {
        intent: "order".into(),
        key: key.into(),
        done,
        at_us: 5_000,
    };
    let judge = |retry_key: &str, collected: Collected| {
        let mut obs = observation(
            vec![reply(201, b1, "k1", 0.0), reply(201, b2, retry_key, 6.0)],
            vec![row(1, "order", 100), row(2, "order", 6_100)],
        );
        obs.collected = vec![collected];
        names(&oracle::violations(&s, &m, &obs))
    };
    assert!(judge("k1", gone("k1", true)).contains(&V::ExpiredDuplicateRow));
    // A fresh key: no retention could have stopped it.
    assert!(judge("k2", gone("k1", true)).contains(&V::DuplicateRow));
    // A claim in progress whose TTL ran out held no outcome.
    assert!(judge("k1", gone("k1", false)).contains(&V::DuplicateRow));
}

/// A claim in a TTL cache frees itself: not a stuck key. One in SQLite without a lease is.
#[test]
fn a_ttl_claim_is_not_stuck() {
    let s = sim(ONE);
    let claim = KeyRecord {
        fingerprint: String::new(),
        status: None,
        response: None,
        state: RecordState::InProgress,
        created_us: 0,
        lease_until_us: None,
        token: Some(1),
        intent: "order".into(),
    };
    let scope = Scope { user: "u1".into(), operation: "order.create".into(), key: "k1".into() };
    let mut obs = observation(vec![reply(201, r#"{"id":1}"#, "k1", 0.0)], vec![row(1, "order", 1)]);
    obs.keys = vec![(scope, claim)];
    let sql = model("program = [\"claim\", \"insert-row\", \"save-response\"]\n[key]\n");
    let ttl = model(
        "program = [\"claim\", \"insert-row\", \"save-response\"]\n\
         [key]\nstore = \"cache\"\nretention_ms = 1000\n",
    );
    assert!(names(&oracle::violations(&s, &sql, &obs)).contains(&V::StuckKey));
    assert!(!names(&oracle::violations(&s, &ttl, &obs)).contains(&V::StuckKey));
}

/// A design that reads no key promises no replay: two answers about one row (201, then the
/// existing row's 200) are no replay mismatch for it.
#[test]
fn replay_rules_judge_only_designs_that_read_a_key() {
    let s = sim(ONE);
    let body = r#"{"id":1,"item":"test-item","qty":2}"#;
    let obs = observation(
        vec![reply(201, body, "k1", 0.0), reply(200, body, "k1", 5.0)],
        vec![row(1, "order", 10)],
    );
    let keyless = model("program = [\"insert-row\"]\n");
    assert!(!names(&oracle::violations(&s, &keyless, &obs)).contains(&V::ReplayMismatch));
    assert!(names(&oracle::violations(&s, &keyed(), &obs)).contains(&V::ReplayMismatch));
}

/// One verdict computation, rendered the same by every format, on every shipped cell (a few
/// seeds each): the JSON fields, the catalogue Markdown (✓ only when safe and as specified,
/// `spec ✗` exactly when not as specified, `bound` exactly when a run was cut short), the
/// reference table (`pass` exactly when as specified) and the sweep text's verdict line.
#[test]
fn every_format_renders_the_same_verdict() {
    use idemsim::{catalog, render, sweep};
    let root = super::root();
    let sims = catalog::sims_at(root.join("sims").to_str().unwrap()).unwrap();
    let models = catalog::all_models().unwrap();
    let cells = sweep::run_matrix(&sims, &models, Some(0..2), 2).unwrap();
    let (mut checked, mut unsafe_cells, mut unspecified) = (0, 0, 0);
    for (si, s) in sims.iter().enumerate() {
        for (mi, m) in models.iter().enumerate() {
            let c = sweep::cell(&cells, models.len(), si, mi);
            let json = render::cell_json(c);
            let md = render::survival_markdown(
                std::slice::from_ref(s),
                std::slice::from_ref(m),
                std::slice::from_ref(c),
            );
            let row = md.lines().find(|l| l.contains("| **")).unwrap_or("");
            let text = row.rsplit('|').nth(1).unwrap_or("").trim();
            // A model's note for the sim follows the marks; it changes no verdict.
            let text = text.split("<br>(note ").next().unwrap_or("").to_string();
            let Some(v) = c.verdict() else {
                assert!(json["safe"].is_null() && json["as_specified"].is_null());
                assert!(json["passed"].is_null());
                continue;
            };
            checked += 1;
            unsafe_cells += (!v.safe) as u32;
            unspecified += (!v.as_specified) as u32;
            let at = format!("{} × {}: {text}", m.name, s.name);
            assert_eq!(json["safe"], v.safe, "{at}");
            assert_eq!(json["as_specified"], v.as_specified, "{at}");
            // ✓ only when safe and as specified; a safe cell may still list policy-permitted
            // violations (in italics), and nothing else.
            let check = text.starts_with("✓ [");
            assert_eq!(check, v.safe && v.as_specified && c.violations.is_empty(), "{at}");
            if v.safe && v.as_specified {
                assert!(check || text.split("<br>").all(|p| p.starts_with('*')), "{at}");
            }
            assert_eq!(text.contains("spec ✗"), !v.as_specified, "{at}");
            assert_eq!(text.contains("bound "), c.bounded_runs > 0, "{at}");
            // Every rate with the same Wilson interval: in the table cell (whole percents,
            // rounded outward) and in the JSON (fractions).
            for (name, st) in &c.violations {
                assert!(text.contains(&render::share_mark(st.seeds, c.runs)), "{at}: {name}");
                let (lo, hi) = sweep::wilson(st.seeds, c.runs);
                assert_eq!(json["violations"][name]["ci95"], serde_json::json!([lo, hi]), "{at}");
            }
            let failed = &json["rates"]["failed"];
            assert_eq!(failed["seeds"], c.failed_seeds, "{at}");
            assert_eq!(failed["ci95"], render::share_json(c.failed_seeds, c.runs)["ci95"], "{at}");
            let table = render::matrix_table(
                std::slice::from_ref(s),
                std::slice::from_ref(m),
                std::slice::from_ref(c),
            );
            if s.has_expectations() {
                let line = table.lines().find(|l| l.starts_with(s.name.as_str())).unwrap();
                assert_eq!(line.contains("pass"), v.as_specified, "{at}: {line}");
            }
            let sweep_text = render::sweep_text(s, m, c, 1);
            let (safe, spec) = v.words();
            let verdict = sweep_text.lines().find(|l| l.starts_with("verdict: ")).unwrap();
            assert!(verdict.starts_with(&format!("verdict: {safe} (")), "{at}: {verdict}");
            assert!(verdict.contains(&format!(" · {spec} (")), "{at}: {verdict}");
        }
    }
    assert!(checked > 2000 && unsafe_cells > 100 && unspecified > 100, "{checked}");
}

/// One rule of final answers for liveness and phantom-success alike: a 5xx (ambiguous) and a
/// 429 (try again) are not final and tell the client nothing, so an applied intent that ends
/// on one is unfinished, not a phantom success; a 410 "key expired" is the design's final
/// answer but no refusal of the order (the server no longer knows): neither; a definitive
/// refusal (409 "already exists") is final and is a phantom success.
#[test]
fn only_a_definitive_refusal_is_a_failure_answer() {
    let s = sim(ONE);
    let applied = || vec![row(1, "order", 10)];
    let ends_on = |a: AttemptOutcome| {
        names(&oracle::violations(&s, &keyed(), &observation(vec![a], applied())))
    };
    let mut expired = reply(410, r#"{"error":"expired"}"#, "k1", 0.0);
    expired.reason = Some(Reason::Expired);
    for a in [reply(500, "{}", "k1", 0.0), reply(429, "{}", "k1", 0.0)] {
        let v = ends_on(a.clone());
        assert!(v.contains(&V::UnfinishedIntent) && !v.contains(&V::PhantomSuccess), "{a:?}");
    }
    let v = ends_on(expired);
    assert!(!v.contains(&V::UnfinishedIntent) && !v.contains(&V::PhantomSuccess), "{v:?}");
    let mut taken = reply(409, r#"{"error":"already exists"}"#, "k1", 0.0);
    taken.reason = Some(Reason::Taken);
    let v = ends_on(taken);
    assert!(v.contains(&V::PhantomSuccess) && !v.contains(&V::UnfinishedIntent), "{v:?}");
}

/// Two intents with one key and different payloads (case 03's shape), both answered 2xx
/// without a replay marker: two executions only when each inserted its own row. A
/// get-or-create reply (`on_clash = "existing"`: 200 with the row another execution inserted)
/// executed nothing, so it is no `payload-mismatch-executed` (issue 24).
#[test]
fn a_reply_handing_back_an_existing_row_executed_nothing() {
    let s = sim(
        "[[request]]\nid = \"first\"\nkey = \"k1\"\nbody = '{\"item\":\"test-item\",\"qty\":2}'\n\
         [[request]]\nid = \"second\"\nafter = \"first\"\nkey = \"k1\"\n\
         body = '{\"item\":\"test-item\",\"qty\":3}'\n",
    );
    let two = |second: AttemptOutcome, rows: Vec<RowRecord>| {
        let first = AttemptOutcome {
            exec: Some(1),
            ..reply(201, r#"{"id":1,"item":"test-item","qty":2}"#, "k1", 0.0)
        };
        let mut obs = observation(vec![first], rows);
        let mut other = obs.requests[0].clone();
        obs.requests[0].id = "first".into();
        obs.requests[0].intent = "first".into();
        other.id = "second".into();
        other.intent = "second".into();
        other.copies = vec![vec![second]];
        obs.requests.push(other);
        oracle::violations(&s, &keyed(), &obs)
    };
    let existing = AttemptOutcome {
        exec: Some(2),
        ..reply(200, r#"{"id":1,"item":"test-item","qty":2}"#, "k1", 5.0)
    };
    let v = two(existing, vec![row(1, "first", 10)]);
    assert!(!names(&v).contains(&V::PayloadMismatchExecuted), "{v:?}");
    let executed = AttemptOutcome {
        exec: Some(2),
        ..reply(201, r#"{"id":2,"item":"test-item","qty":3}"#, "k1", 5.0)
    };
    let v = two(executed, vec![row(1, "first", 10), row(2, "second", 20)]);
    assert!(names(&v).contains(&V::PayloadMismatchExecuted), "{v:?}");
}
