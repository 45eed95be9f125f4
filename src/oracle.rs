//! The oracle: named violations of the idempotency invariants, counted per *intent* (the
//! client's logical operation), not per key, so a client that rotates keys is still caught.
//! A pure function of (sim, model, observation), one function per family of rules.
//!
//! Every name is stable kebab-case (see [`ViolationKind`]). Duplicates explained only by a key
//! that was collected (retention/GC) between the two executions are *policy-permitted*:
//! reported under their own `expired-*` names and kept apart from bugs.

use std::collections::BTreeMap;

use crate::model::Model;
use crate::report::{
    AttemptOutcome, Observation, RecordState, RowRecord, Scope, Violation, ViolationKind,
};
use crate::scenario::{InjectAction, RequestSpec, Sim};

use ViolationKind as V;

/// A final client-visible outcome: a success or a definitive client error.
fn is_final(a: &AttemptOutcome) -> bool {
    matches!(a.status, Some(s) if (200..300).contains(&s) || [400, 401, 403, 404, 412, 422].contains(&s))
}

/// Canonical JSON of a body (field order ignored), or the raw text if it is not JSON.
fn canonical(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| body.to_string())
}

/// Everything the rules need about one intent.
struct IntentView<'a> {
    intent: &'a str,
    /// Every attempt of every request of the intent, with its request.
    attempts: Vec<(&'a RequestSpec, &'a AttemptOutcome)>,
    /// The last attempt of every copy (the end of each attempt chain).
    finals: Vec<&'a AttemptOutcome>,
    /// Every request of the intent finished (its client did not stop at a bound).
    finished: bool,
    /// Some attempt got a 2xx.
    acknowledged: bool,
    /// Times (ms) of the intent's effects, in order.
    effects: Vec<u64>,
}

impl<'a> IntentView<'a> {
    fn new(sim: &'a Sim, obs: &'a Observation, intent: &'a str) -> IntentView<'a> {
        let mut v = IntentView {
            intent,
            attempts: vec![],
            finals: vec![],
            finished: true,
            acknowledged: false,
            effects: obs.effect_log.iter().filter(|(i, _)| i == intent).map(|(_, t)| *t).collect(),
        };
        for (qi, q) in sim.requests.iter().enumerate().filter(|(_, q)| q.intent == intent) {
            let rep = &obs.requests[qi];
            v.finished &= rep.finished;
            for c in &rep.copies {
                v.attempts.extend(c.iter().map(|a| (q, a)));
                v.finals.extend(c.last());
            }
        }
        v.acknowledged = v.attempts.iter().any(|(_, a)| a.is_success());
        v
    }

    fn violation(&self, name: ViolationKind, detail: String) -> Violation {
        Violation { name, intent: self.intent.to_string(), detail, permitted: false }
    }
}

/// Was a key of `intent` collected between `from` and `to` (µs, inclusive)?
fn collected_between(obs: &Observation, intent: &str, from: f64, to: f64) -> bool {
    obs.collected.iter().any(|(i, t)| i == intent && (*t as f64) >= from && (*t as f64) <= to)
}

/// Every violation of the run, grouped by kind in report order.
pub fn violations(sim: &Sim, model: &Model, obs: &Observation) -> Vec<Violation> {
    let mut out = Vec::new();
    let rows_by_id: BTreeMap<i64, &RowRecord> = obs.rows.iter().map(|x| (x.id, x)).collect();
    let expected = effects_expected(sim, model);
    let bounded = !obs.bounds_hit.is_empty();
    for intent in sim.intents() {
        let v = IntentView::new(sim, obs, intent);
        duplicates(obs, &v, &mut out);
        replies(&v, &rows_by_id, &mut out);
        effects_against_acks(&v, expected, bounded, &mut out);
        liveness(&v, bounded, &mut out);
    }
    key_consistency(sim, obs, &mut out);
    stuck_keys(model, obs, &mut out);
    out.sort_by_key(|v| v.name.order());
    out
}

/// At most one row and one effect per intent (unless the key was collected in between).
fn duplicates(obs: &Observation, v: &IntentView, out: &mut Vec<Violation>) {
    let rows: Vec<&RowRecord> = obs.rows.iter().filter(|x| x.intent == v.intent).collect();
    if rows.len() > 1 {
        let first = rows[0].created_us as f64;
        for extra in &rows[1..] {
            let permitted = collected_between(obs, v.intent, first, extra.created_us as f64);
            out.push(Violation {
                permitted,
                ..v.violation(
                    if permitted { V::ExpiredDuplicateRow } else { V::DuplicateRow },
                    format!("row {} duplicates row {} ({} rows)", extra.id, rows[0].id, rows.len()),
                )
            });
        }
    }
    if v.effects.len() > 1 {
        for t in &v.effects[1..] {
            let permitted = collected_between(obs, v.intent, v.effects[0] as f64, *t as f64);
            out.push(Violation {
                permitted,
                ..v.violation(
                    if permitted { V::ExpiredDuplicateEffect } else { V::DuplicateEffect },
                    format!("{} effects", v.effects.len()),
                )
            });
        }
    }
}

/// Every success names a row that exists, belongs to the intent and to the client's user.
fn replies(v: &IntentView, rows_by_id: &BTreeMap<i64, &RowRecord>, out: &mut Vec<Violation>) {
    for (q, a) in &v.attempts {
        if !a.is_success() {
            continue;
        }
        let Some(id) = a.id() else { continue };
        match rows_by_id.get(&id) {
            None => out.push(v.violation(
                V::LostSuccess,
                format!("client saw {} with id {id}; no such row", a.status.unwrap_or(0)),
            )),
            Some(row) if q.user.as_deref() != Some(row.user.as_str()) => out.push(v.violation(
                V::ScopeLeak,
                format!(
                    "user {} got row {id} of user {}",
                    q.user.as_deref().unwrap_or("-"),
                    row.user
                ),
            )),
            Some(row) if row.intent != v.intent => out.push(
                v.violation(V::ForeignReply, format!("got row {id} of intent {}", row.intent)),
            ),
            Some(_) => {}
        }
    }
}

/// An acknowledged intent has its effect (when effects are expected); an effect is eventually
/// acknowledged to its client.
fn effects_against_acks(v: &IntentView, expected: bool, bounded: bool, out: &mut Vec<Violation>) {
    if expected && v.effects.is_empty() && v.acknowledged && v.finished && !bounded {
        out.push(v.violation(
            V::LostEffect,
            "a success reached the client; no effect was delivered".into(),
        ));
    }
    if !v.effects.is_empty() && !v.acknowledged && v.finished {
        out.push(v.violation(
            V::UnacknowledgedEffect,
            format!("{} effect(s), no success seen by the client", v.effects.len()),
        ));
    }
}

/// Some attempt chain of the intent (a request's copy, after its retries) ended with a final
/// outcome: the client then knows what happened.
fn liveness(v: &IntentView, bounded: bool, out: &mut Vec<Violation>) {
    if v.finished
        && !bounded
        && !v.finals.is_empty()
        && !v.finals.iter().any(|a| is_final(a))
        && let Some(a) = v.finals.iter().max_by(|a, b| a.done_ms.total_cmp(&b.done_ms))
    {
        let last = a.status.map(|s| s.to_string()).unwrap_or_else(|| a.outcome.name().into());
        out.push(v.violation(V::UnfinishedIntent, format!("last attempt: {last}")));
    }
}

/// Per (user, path, key): every success is the same reply, and no second payload executed.
fn key_consistency(sim: &Sim, obs: &Observation, out: &mut Vec<Violation>) {
    // (intent, attempt, canonical body sent) of every success, per scope.
    let mut by_key: BTreeMap<Scope, Vec<(&str, &AttemptOutcome, String)>> = BTreeMap::new();
    for (qi, q) in sim.requests.iter().enumerate() {
        for c in &obs.requests[qi].copies {
            for (n, a) in c.iter().enumerate() {
                let (Some(k), true) = (&a.key, a.is_success()) else { continue };
                let scope = Scope {
                    user: q.user.clone().unwrap_or_default(),
                    operation: q.path.clone(),
                    key: k.clone(),
                };
                let sent = canonical(q.body_for(n as u32 + 1));
                by_key.entry(scope).or_default().push((&q.intent, a, sent));
            }
        }
    }
    for (s, list) in &by_key {
        let (user, path, key) = (&s.user, &s.operation, &s.key);
        let first = &list[0];
        if let Some(other) =
            list.iter().find(|x| x.1.status != first.1.status || x.1.body != first.1.body)
        {
            let intents: Vec<&str> = list.iter().map(|x| x.0).collect();
            // Attempt times are in ms, collection times in µs.
            let until = other.1.done_ms.max(first.1.done_ms) * 1000.0;
            let permitted = obs
                .collected
                .iter()
                .any(|(i, t)| intents.contains(&i.as_str()) && (*t as f64) <= until);
            out.push(Violation {
                name: if permitted { V::ExpiredReplayMismatch } else { V::ReplayMismatch },
                intent: other.0.to_string(),
                detail: format!(
                    "{user} {path} key {key}: {} vs {}",
                    first.1.body.as_deref().unwrap_or(""),
                    other.1.body.as_deref().unwrap_or("")
                ),
                permitted,
            });
        }
        let fresh: Vec<_> = list.iter().filter(|x| !x.1.replayed).collect();
        if let Some(f0) = fresh.first()
            && let Some(other) = fresh.iter().find(|x| x.2 != f0.2)
        {
            out.push(Violation {
                name: V::PayloadMismatchExecuted,
                intent: other.0.to_string(),
                detail: format!("{user} {path} key {key}: executed {} and {}", f0.2, other.2),
                permitted: false,
            });
        }
    }
}

/// A key left in progress at quiescence blocks its retries, unless a lease lets another
/// request take it over once it expires.
fn stuck_keys(model: &Model, obs: &Observation, out: &mut Vec<Violation>) {
    let leased = model.key.as_ref().is_some_and(|k| k.lease_us.is_some());
    if leased {
        return;
    }
    for (s, r) in obs.keys.iter().filter(|(_, r)| r.state != RecordState::Done) {
        out.push(Violation {
            name: V::StuckKey,
            intent: r.intent.clone(),
            detail: format!("key {} in progress at quiescence", s.key),
            permitted: false,
        });
    }
}

/// Should every acknowledged intent have an effect? Yes when the model performs effects, or
/// when the sim injects an unconditional effect at a point of the model for every request.
pub fn effects_expected(sim: &Sim, model: &Model) -> bool {
    model.has_effects()
        || sim.injects.iter().any(|i| {
            matches!(i.action, InjectAction::Effect)
                && i.request.is_none()
                && i.rate >= 1.0
                && i.times.is_none()
                && model.points().contains(&i.point.as_str())
        })
}

/// Intents whose client never saw a final outcome.
pub fn ambiguous_intents(violations: &[Violation]) -> u64 {
    violations.iter().filter(|v| v.name == V::UnfinishedIntent).count() as u64
}

/// Rows and effects per intent, in intent order (for histograms).
pub fn per_intent(sim: &Sim, obs: &Observation) -> Vec<(u64, u64)> {
    let effects = obs.effects_per_intent();
    sim.intents()
        .iter()
        .map(|i| {
            let rows = obs.rows.iter().filter(|x| x.intent == *i).count() as u64;
            (rows, effects.get(*i).copied().unwrap_or(0))
        })
        .collect()
}
