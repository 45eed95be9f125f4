//! Expectations: the sim's `expect` tables turned into named [`Check`]s of one run's
//! observation. A pure function of (sim, observation).

use std::collections::BTreeSet;

use crate::report::{Check, Observation, Outcome};
use crate::scenario::Sim;

fn push(out: &mut Vec<Check>, what: String, expected: String, actual: String) {
    out.push(Check { held: expected == actual, what, expected, actual });
}

/// A value as a check shows it: `none` when absent.
fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "none".into())
}

/// Evaluate every expectation of `sim` against what one run observed.
pub fn check(sim: &Sim, report: &Observation) -> Vec<Check> {
    let mut out = Vec::new();
    for (i, spec) in sim.requests.iter().enumerate() {
        let r = &report.requests[i];
        let many = spec.copies > 1;
        for (c, a) in r.copies.iter().enumerate() {
            let who = if many { format!("{}[{c}]", spec.id) } else { spec.id.clone() };
            match a.last() {
                None => push(&mut out, format!("{who} finished"), "true".into(), "false".into()),
                Some(a) => copy_checks(sim, report, spec, &who, a, &mut out),
            }
        }
        if let Some(same) = spec.expect.same_id {
            out.push(same_id_check(spec, r, same));
        }
        // What the probe read right after the request finished.
        let e = &spec.expect;
        for (what, expected, actual) in [
            ("rows", e.rows_after, r.rows_after),
            ("stored keys", e.keys_after, r.keys_after),
            ("stored responses", e.responses_after, r.responses_after),
        ] {
            if let Some(n) = expected {
                push(&mut out, format!("{what} after {}", spec.id), n.to_string(), opt(actual));
            }
        }
    }
    end_state_checks(sim, report, &mut out);
    out
}

/// The expectations on one copy's final attempt: status, outcome, replay marker, id, and its
/// id against another request's.
fn copy_checks(
    sim: &Sim,
    report: &Observation,
    spec: &crate::scenario::RequestSpec,
    who: &str,
    a: &crate::report::AttemptOutcome,
    out: &mut Vec<Check>,
) {
    let e = &spec.expect;
    if let Some(s) = e.status {
        let actual =
            a.status.map_or_else(|| Outcome::TransportFailure.name().into(), |s| s.to_string());
        push(out, format!("{who}.status"), s.to_string(), actual);
    }
    if let Some(o) = &e.outcome {
        push(out, format!("{who}.outcome"), o.name().to_string(), a.outcome.name().to_string());
    }
    if let Some(rp) = e.replayed {
        push(out, format!("{who}.replayed"), rp.to_string(), a.replayed.to_string());
    }
    if let Some(id) = e.id {
        push(out, format!("{who}.id"), id.to_string(), opt(a.id()));
    }
    let theirs = |other: &str| {
        let j = sim.request_index(other).expect("checked at load");
        report.requests[j].finals().next().and_then(|x| x.id())
    };
    if let Some(other) = &e.same_id_as {
        let theirs = theirs(other);
        out.push(Check {
            what: format!("{who}.id = {other}.id"),
            held: theirs.is_some() && a.id() == theirs,
            expected: opt(theirs),
            actual: opt(a.id()),
        });
    }
    if let Some(other) = &e.id_differs_from {
        let theirs = theirs(other);
        out.push(Check {
            what: format!("{who}.id ≠ {other}.id"),
            held: a.id().is_some() && a.id() != theirs,
            expected: format!("an id other than {}", opt(theirs)),
            actual: opt(a.id()),
        });
    }
}

/// `same_id`: every copy got the same id (or, false: more than one distinct id).
fn same_id_check(
    spec: &crate::scenario::RequestSpec,
    r: &crate::report::RequestReport,
    same: bool,
) -> Check {
    let finals: Vec<_> = r.finals().collect();
    // Distinct ids in text order, and whether some copy got no id at all.
    let ids: BTreeSet<String> =
        finals.iter().filter_map(|a| a.id()).map(|i| i.to_string()).collect();
    let without = finals.iter().any(|a| a.id().is_none());
    let list: Vec<&str> = ids.iter().map(String::as_str).collect();
    let suffix = if without { " (and copies without an id)" } else { "" };
    Check {
        what: format!("{}: every copy got the same id", spec.id),
        held: if same { ids.len() == 1 && !without } else { ids.len() > 1 },
        expected: if same {
            "1 distinct id, on every copy".into()
        } else {
            "more than 1 distinct id".into()
        },
        actual: format!("{} distinct id(s): {}{suffix}", ids.len(), list.join(", ")),
    }
}

/// `[expect]`: rows, stored keys, effects and the rows' quantities at the end.
fn end_state_checks(sim: &Sim, report: &Observation, out: &mut Vec<Check>) {
    let x = &sim.expect;
    if let Some(n) = x.rows {
        push(out, "rows".into(), n.to_string(), report.rows.len().to_string());
    }
    if let Some(n) = x.keys {
        push(out, "stored keys".into(), n.to_string(), report.keys.len().to_string());
    }
    if let Some(n) = x.effects {
        push(out, "effects".into(), n.to_string(), report.effect_log.len().to_string());
    }
    if let Some(q) = &x.row_qty {
        let actual: Vec<i64> = report.rows.iter().map(|r| r.qty).collect();
        push(out, "row qty".into(), format!("{q:?}"), format!("{actual:?}"));
    }
}

/// Whether every expectation of `sim` holds on this run: exactly `check(..).iter().all(held)`,
/// each comparison made on the typed values instead of their text (a number's, a name's and a
/// list's text are equal exactly when the values are). A sweep keeps the checks of a run only
/// when one failed, so a passing run builds none ([`crate::run::judge_lean`]); debug builds
/// assert the two agree on every judged run.
pub fn holds(sim: &Sim, report: &Observation) -> bool {
    sim.requests.iter().enumerate().all(|(i, spec)| {
        let r = &report.requests[i];
        let e = &spec.expect;
        r.copies.iter().all(|c| c.last().is_some_and(|a| copy_holds(sim, report, spec, a)))
            && e.same_id.is_none_or(|same| same_id_holds(r, same))
            && e.rows_after.is_none_or(|n| r.rows_after == Some(n))
            && e.keys_after.is_none_or(|n| r.keys_after == Some(n))
            && e.responses_after.is_none_or(|n| r.responses_after == Some(n))
    }) && end_state_holds(sim, report)
}

/// [`copy_checks`]' verdicts, without their text.
fn copy_holds(
    sim: &Sim,
    report: &Observation,
    spec: &crate::scenario::RequestSpec,
    a: &crate::report::AttemptOutcome,
) -> bool {
    let e = &spec.expect;
    let theirs = |other: &str| {
        let j = sim.request_index(other).expect("checked at load");
        report.requests[j].finals().next().and_then(|x| x.id())
    };
    e.status.is_none_or(|s| a.status == Some(s))
        && e.outcome.is_none_or(|o| o == a.outcome)
        && e.replayed.is_none_or(|rp| rp == a.replayed)
        && e.id.is_none_or(|id| a.id() == Some(id))
        && e.same_id_as.as_deref().is_none_or(|o| {
            let theirs = theirs(o);
            theirs.is_some() && a.id() == theirs
        })
        && e.id_differs_from.as_deref().is_none_or(|o| {
            let id = a.id();
            id.is_some() && id != theirs(o)
        })
}

/// [`same_id_check`]'s verdict, without its text: one distinct id and every copy has one, or
/// (`same` false) more than one distinct id.
fn same_id_holds(r: &crate::report::RequestReport, same: bool) -> bool {
    let (mut first, mut many, mut without) = (None, false, false);
    for id in r.finals().map(|a| a.id()) {
        match (id, first) {
            (None, _) => without = true,
            (Some(i), None) => first = Some(i),
            (Some(i), Some(f)) => many |= i != f,
        }
    }
    if same { first.is_some() && !many && !without } else { many }
}

/// [`end_state_checks`]' verdicts, without their text.
fn end_state_holds(sim: &Sim, report: &Observation) -> bool {
    let x = &sim.expect;
    x.rows.is_none_or(|n| n == report.rows.len() as u64)
        && x.keys.is_none_or(|n| n == report.keys.len() as u64)
        && x.effects.is_none_or(|n| n == report.effect_log.len() as u64)
        && x.row_qty.as_ref().is_none_or(|q| q.iter().eq(report.rows.iter().map(|r| &r.qty)))
}
