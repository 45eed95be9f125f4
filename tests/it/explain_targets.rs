//! What `shrink` and `explain` follow: a violation or a failed expectation (`--target`), the
//! shrinker keeping the same failure, bad targets refused, and `explain --json` against its
//! schema (`schemas/explain.v1.schema.json`).

use std::sync::Arc;

use idemsim::explain::{self, ExplainOptions};
use idemsim::model::Model;
use idemsim::report::{Check, ViolationKind};
use idemsim::run::{self, RunOptions};
use idemsim::shrink::{self, CheckKind, Hit, ShrinkOptions, Target};
use serde_json::Value;

use super::{idemsim, model, root, sim};

/// Case 3 (the same key with changed content) under stripe-v1: 400 where the sim expects 422,
/// and no violation.
const CASE_03: &str = "sims/article/03-same-key-changed-content.toml";
/// Two users book the last slot; check-first keeps both (`rows: expected 1, got 2`), and no
/// violation.
const BOOKING: &str = "sims/business/booking-last-slot.toml";

fn small() -> ShrinkOptions {
    ShrinkOptions { window: 16, budget_runs: 5_000, ..Default::default() }
}

fn shrink_with(rel: &str, m: &str, opts: &ShrinkOptions) -> Result<shrink::Shrunk, String> {
    let path = root().join(rel);
    let src = std::fs::read_to_string(&path).unwrap();
    shrink::shrink(&path, &src, &model(m), None, opts).map_err(|e| e.to_string())
}

/// The shrunk sim, run again on the seed it names, fails the same way: the same kind, the
/// same expected and actual values.
fn still_fails(s: &shrink::Shrunk, m: &str) -> Check {
    let out = run::run(&s.sim, &model(m), s.seed, RunOptions::default()).unwrap();
    match s.first.again(&out.report) {
        Some(Hit::Expectation(_, c)) => c,
        other => panic!("the shrunk sim fails otherwise: {other:?}\n{}", s.text),
    }
}

fn others(names: &[&str]) -> Option<Vec<Arc<Model>>> {
    Some(names.iter().map(|n| model(n)).collect())
}

/// A status expectation that fails with no violation is shrunk and explained: the shrunk sim
/// still answers 400 where 422 is expected (not another status: the request is not left
/// alone to get a 201), and `explain` names what it follows.
#[test]
fn a_failed_status_is_shrunk_and_explained() {
    let first = run::run(&sim(CASE_03), &model("stripe-v1"), 0, RunOptions::default()).unwrap();
    assert!(first.report.violations.iter().all(|v| v.permitted), "an expectation only");
    let s = shrink_with(CASE_03, "stripe-v1", &small()).unwrap();
    assert_eq!(s.target, Target::Expectation(CheckKind::Status));
    let c = still_fails(&s, "stripe-v1");
    assert_eq!(
        (c.what.as_str(), c.expected.as_str(), c.actual.as_str()),
        ("second.status", "422", "400")
    );
    assert!(s.sim.requests.len() == 2, "both requests are needed for the 400:\n{}", s.text);
    assert!(
        s.text.contains("# the failed expectation status (`second.status`: expected 422, got 400)")
    );

    let opts = ExplainOptions {
        target: None,
        others: others(&["transactional", "no-key"]),
        ..Default::default()
    };
    let e = explain::explain_with(&model("stripe-v1"), Some(&sim(CASE_03)), None, &opts).unwrap();
    assert!(e.failed);
    assert!(
        e.text.contains(
            "following: the failed expectation status (`second.status`: expected 422, got 400)"
        ),
        "{}",
        e.text
    );
    assert!(e.text.contains("(the same failed expectation, fewer moving parts)"), "{}", e.text);
    assert!(e.text.contains("--target expect:status"), "the keep command: {}", e.text);
    // transactional answers 422: it survives, and the schedule is shown under it.
    assert!(e.text.contains("survive:    transactional"), "{}", e.text);
    assert!(e.text.contains("no-key (expectation status 16/16)"), "{}", e.text);
    assert_eq!(e.json["target"]["kind"], "expectation");
    assert_eq!(e.json["target"]["spec"], "expect:status");
    assert_eq!(e.json["target"]["check"]["actual"], "400");
}

/// An expectation on the end state (`[expect] rows`) is followed too: the story tells every
/// request, and the shrunk sim still ends with 2 rows where 1 is expected.
#[test]
fn a_failed_end_state_is_shrunk_and_explained() {
    let s = shrink_with(BOOKING, "check-first", &small()).unwrap();
    assert_eq!(s.target, Target::Expectation(CheckKind::Rows));
    let c = still_fails(&s, "check-first");
    assert_eq!((c.what.as_str(), c.expected.as_str(), c.actual.as_str()), ("rows", "1", "2"));

    let opts = ExplainOptions { target: None, others: others(&["no-key"]), ..Default::default() };
    let e = explain::explain_with(&model("check-first"), Some(&sim(BOOKING)), None, &opts).unwrap();
    assert!(e.text.contains("following: the failed expectation rows (`rows`: expected 1, got 2)"));
    assert!(e.text.contains("The attempts of every request:"), "{}", e.text);
    assert!(e.text.contains("every event):"), "{}", e.text);
    assert_eq!(e.json["target"]["intent"], Value::Null);
}

/// A violation comes first by default; `--target` picks a failed expectation of the same run
/// instead, and the shrinker keeps that one.
#[test]
fn a_violation_comes_first_and_a_target_picks_an_expectation() {
    let race = "sims/teaching/check-first-race.toml";
    let out = run::run(&sim(race), &model("check-first"), 13, RunOptions::default()).unwrap();
    let Some(Hit::Violation(v)) = Hit::first(&out.report, None) else { panic!("a violation") };
    assert_eq!(v.name, ViolationKind::DuplicateRow);
    let Some(Hit::Expectation(kind, _)) = Hit::first_expectation(&out.report) else {
        panic!("seed 13 fails an expectation too")
    };
    let s = shrink_with(race, "check-first", &small()).unwrap();
    assert_eq!(s.target, Target::Violation(ViolationKind::DuplicateRow));
    let opts = ShrinkOptions { target: Some(Target::Expectation(kind)), ..small() };
    let s = shrink_with(race, "check-first", &opts).unwrap();
    assert_eq!(s.target, Target::Expectation(kind));
    still_fails(&s, "check-first");
    let opts = ExplainOptions {
        target: Some(Target::Expectation(kind)),
        others: others(&["transactional"]),
        ..Default::default()
    };
    let e =
        explain::explain_with(&model("check-first"), Some(&sim(race)), Some(13), &opts).unwrap();
    assert!(e.text.contains(&format!("following: the failed expectation {}", kind.name())));
}

/// A bad target is refused, listing every valid one (exit 2, no panic); a target the sim
/// never fails is nothing to shrink or explain (exit 0).
#[test]
fn bad_targets_are_refused_with_the_valid_ones() {
    let e = Target::parse("expect:nope").unwrap_err();
    assert!(e.contains("row-qty") && e.contains("duplicate-row"), "{e}");
    assert_eq!(
        Target::parse("violation:lost-update"),
        Ok(Target::Violation(ViolationKind::LostUpdate))
    );
    assert_eq!(Target::parse("expect:same-id"), Ok(Target::Expectation(CheckKind::SameId)));
    for args in [
        &["shrink", BOOKING, "--model", "check-first", "--target", "expect:nope"][..],
        &["shrink", BOOKING, "--model", "check-first", "--target", "rows"],
        &["shrink", BOOKING, "--model", "check-first", "--violation", "nope"],
        &["explain", "check-first", "--target", "violation:nope"],
    ] {
        let (code, out, err) = idemsim(args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains("duplicate-row") && err.contains("expired-replay-mismatch"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let (code, out, err) = idemsim(&[
        "shrink",
        "check-first-race",
        "--model",
        "transactional",
        "--target",
        "expect:effects",
        "--budget",
        "100",
        "--window",
        "4",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("shows a failed expectation effects"), "{out}");
}

/// Every check `expect::check` writes has its kind, and the request it is about.
#[test]
fn check_names_give_their_kind_and_request() {
    let s = sim("sims/article/10-failure-before-commit.toml");
    let check = |what: &str| Check {
        what: what.into(),
        held: false,
        expected: String::new(),
        actual: String::new(),
    };
    let first = s.requests[0].id.clone();
    for (what, kind, about) in [
        (format!("{first}[1].status"), CheckKind::Status, true),
        (format!("{first}.outcome"), CheckKind::Outcome, true),
        (format!("{first}.replayed"), CheckKind::Replayed, true),
        (format!("{first}.id"), CheckKind::Id, true),
        (format!("{first}.id = other.id"), CheckKind::SameIdAs, true),
        (format!("{first}.id ≠ other.id"), CheckKind::IdDiffersFrom, true),
        (format!("{first}: every copy got the same id"), CheckKind::SameId, true),
        (format!("{first}[0] finished"), CheckKind::Finished, true),
        (format!("rows after {first}"), CheckKind::RowsAfter, true),
        (format!("stored keys after {first}"), CheckKind::KeysAfter, true),
        (format!("stored responses after {first}"), CheckKind::ResponsesAfter, true),
        ("rows".into(), CheckKind::Rows, false),
        ("stored keys".into(), CheckKind::Keys, false),
        ("effects".into(), CheckKind::Effects, false),
        ("row qty".into(), CheckKind::RowQty, false),
    ] {
        let c = check(&what);
        assert_eq!(CheckKind::of(&c), kind, "{what}");
        assert_eq!(shrink::request_of(&s, &c).is_some(), about, "{what}");
    }
    assert_eq!(CheckKind::ALL.len(), 15);
}

/// `explain --json` validates against its schema, names the format, the version and what it
/// follows; so does the answer when there is nothing to explain.
#[test]
fn explain_json_validates_against_its_schema() {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("schemas/explain.v1.schema.json")).unwrap(),
    )
    .unwrap();
    let (code, out, err) = idemsim(&[
        "explain",
        "stripe-v1",
        "--sim",
        CASE_03,
        "--others",
        "transactional,no-key",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    validate(&schema, &schema, &v, "$").unwrap();
    assert_eq!((v["format"].as_str(), v["version"].as_u64()), (Some("idemsim-explain"), Some(1)));
    assert_eq!(v["target"]["spec"], "expect:status");
    assert_eq!(v["contrast"]["model"], "transactional");
    assert!(v["minimal"]["others"].as_array().unwrap().len() == 2);

    let race = sim("sims/teaching/check-first-race.toml");
    let opts = ExplainOptions {
        target: None,
        others: others(&["transactional", "no-key"]),
        ..Default::default()
    };
    let e = explain::explain_with(&model("check-first"), Some(&race), Some(13), &opts).unwrap();
    validate(&schema, &schema, &e.json, "$").unwrap();
    assert_eq!(e.json["target"]["kind"], "violation");
    assert_eq!(e.json["target"]["name"], "duplicate-row");
    assert_eq!(e.json["following"], "violation duplicate-row");

    let (code, out, _) = idemsim(&[
        "explain",
        "transactional",
        "--sim",
        "check-first-race",
        "--seed",
        "13",
        "--json",
    ]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    validate(&schema, &schema, &v, "$").unwrap();
    assert_eq!(v["found"], false);
    // A value the schema refuses is refused: the check below is not vacuous.
    let mut bad = v.clone();
    bad["version"] = 2.into();
    assert!(validate(&schema, &schema, &bad, "$").is_err());
}

/// The JSON Schema keywords the schema uses (draft 2020-12): `$ref` into `$defs`, `oneOf`,
/// `type`, `const`, `enum`, `required`, `properties`, `additionalProperties: false`, `items`,
/// `minimum`. Any other keyword fails the test, so the schema cannot outgrow the check.
fn validate(root: &Value, s: &Value, v: &Value, at: &str) -> Result<(), String> {
    let known = [
        "$schema",
        "$defs",
        "$ref",
        "title",
        "description",
        "oneOf",
        "type",
        "const",
        "enum",
        "required",
        "properties",
        "additionalProperties",
        "items",
        "minimum",
    ];
    let s = s.as_object().ok_or(format!("{at}: schema not an object"))?;
    if let Some(k) = s.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(format!("{at}: keyword {k} not checked"));
    }
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = r.strip_prefix("#/$defs/").ok_or(format!("{at}: $ref {r}"))?;
        return validate(root, &root["$defs"][name], v, at);
    }
    if let Some(all) = s.get("oneOf").and_then(Value::as_array) {
        let ok = all.iter().filter(|x| validate(root, x, v, at).is_ok()).count();
        return if ok == 1 { Ok(()) } else { Err(format!("{at}: {ok} of oneOf match")) };
    }
    if let Some(t) = s.get("type")
        && !type_ok(t, v)
    {
        return Err(format!("{at}: {v} is not {t}"));
    }
    if s.get("const").is_some_and(|c| c != v) {
        return Err(format!("{at}: {v} is not {}", s["const"]));
    }
    if s.get("enum").and_then(Value::as_array).is_some_and(|e| !e.contains(v)) {
        return Err(format!("{at}: {v} not in the enum"));
    }
    if let Some(m) = s.get("minimum").and_then(Value::as_u64)
        && v.as_u64().is_some_and(|x| x < m)
    {
        return Err(format!("{at}: {v} below {m}"));
    }
    if let Some(items) = s.get("items") {
        for (i, x) in v.as_array().into_iter().flatten().enumerate() {
            validate(root, items, x, &format!("{at}[{i}]"))?;
        }
    }
    let Some(o) = v.as_object() else { return Ok(()) };
    for r in s.get("required").and_then(Value::as_array).into_iter().flatten() {
        let r = r.as_str().unwrap_or("?");
        if !o.contains_key(r) {
            return Err(format!("{at}: {r} missing"));
        }
    }
    let props = s.get("properties").and_then(Value::as_object);
    for (k, x) in o {
        match props.and_then(|p| p.get(k)) {
            Some(p) => validate(root, p, x, &format!("{at}.{k}"))?,
            None if s.get("additionalProperties") == Some(&Value::Bool(false)) => {
                return Err(format!("{at}: {k} not allowed"));
            }
            None => {}
        }
    }
    Ok(())
}

/// `type`: one type's name or a list of them.
fn type_ok(t: &Value, v: &Value) -> bool {
    let types: Vec<&str> = match t {
        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
        t => vec![t.as_str().unwrap_or("?")],
    };
    types.iter().any(|t| match *t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_u64() || v.is_i64(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => false,
    })
}
