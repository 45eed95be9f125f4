//! The oracle: named violations of the idempotency invariants, counted per *intent* (the
//! client's logical operation), not per key, so a client that rotates keys is still caught.
//!
//! Every name is stable kebab-case (see [`NAMES`]). Duplicates explained only by a key that
//! was collected (retention/GC) between the two executions are *policy-permitted*: reported
//! under their own `expired-*` names and kept apart from bugs.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::report::{AttemptOutcome, RunReport};
use crate::scenario::Sim;

/// One violation found in a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub name: &'static str,
    pub intent: String,
    pub detail: String,
    /// Caused only by documented expiry (a retry after the key was collected).
    pub permitted: bool,
}

/// Every violation name with what it means, in report order.
pub const NAMES: &[(&str, &str)] = &[
    ("duplicate-row", "more than one row for one intent"),
    ("duplicate-effect", "more than one external effect for one intent"),
    ("lost-success", "the client saw a success whose row does not exist"),
    ("foreign-reply", "a success naming a row of another intent of the same user"),
    ("scope-leak", "a success naming another user's row (a stored reply crossed users)"),
    ("replay-mismatch", "successes for one (user, operation, key) with different status or body"),
    ("payload-mismatch-executed", "a different payload executed under a used key"),
    ("lost-effect", "the client saw a success but the intent's external effect never happened"),
    (
        "unacknowledged-effect",
        "an effect happened but the client never saw a success and stopped trying",
    ),
    ("stuck-key", "a key still in progress at quiescence"),
    (
        "unfinished-intent",
        "no attempt chain of the intent ended with a final outcome (2xx, or 400/401/403/404/412/422) within its retry budget",
    ),
    (
        "expired-duplicate-row",
        "policy-permitted: a second row after the intent's key was collected",
    ),
    (
        "expired-duplicate-effect",
        "policy-permitted: a second effect after the intent's key was collected",
    ),
    ("expired-replay-mismatch", "policy-permitted: a different reply after the key was collected"),
];

/// Inputs the oracle needs beyond the report: collection and effect times.
pub struct Evidence<'a> {
    /// (intent, ms) of every collected key.
    pub collected: &'a [(String, u64)],
    /// (intent, ms) of every effect delivery.
    pub effect_log: &'a [(String, u64)],
    /// Intents of keys still in progress at the end.
    pub stuck: &'a [(String, String)],
    /// Every acknowledged intent should have produced an effect (the model performs one, or
    /// the sim injects one at a point of the model for every request).
    pub effects_expected: bool,
}

fn is_success(a: &AttemptOutcome) -> bool {
    a.status.is_some_and(|s| (200..300).contains(&s))
}

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

/// Every violation of the run, grouped by name in [`NAMES`] order.
pub fn violations(sim: &Sim, r: &RunReport, ev: &Evidence) -> Vec<Violation> {
    let mut out = Vec::new();
    let collected_between = |intent: &str, from: f64, to: f64| {
        ev.collected.iter().any(|(i, t)| i == intent && (*t as f64) >= from && (*t as f64) <= to)
    };
    let any_collected_before = |intents: &[&str], to: f64| {
        ev.collected.iter().any(|(i, t)| intents.contains(&i.as_str()) && (*t as f64) <= to)
    };

    let intents = sim.intents();
    let rows_by_id: BTreeMap<i64, &crate::store::RowRecord> =
        r.rows.iter().map(|x| (x.id, x)).collect();

    for intent in &intents {
        // Rows.
        let rows: Vec<_> = r.rows.iter().filter(|x| x.intent == *intent).collect();
        if rows.len() > 1 {
            let first = rows[0].created_ms as f64;
            for extra in &rows[1..] {
                let permitted = collected_between(intent, first, extra.created_ms as f64);
                out.push(Violation {
                    name: if permitted { "expired-duplicate-row" } else { "duplicate-row" },
                    intent: intent.to_string(),
                    detail: format!(
                        "row {} duplicates row {} ({} rows)",
                        extra.id,
                        rows[0].id,
                        rows.len()
                    ),
                    permitted,
                });
            }
        }
        // Effects.
        let effects: Vec<u64> =
            ev.effect_log.iter().filter(|(i, _)| i == intent).map(|(_, t)| *t).collect();
        if effects.len() > 1 {
            for t in &effects[1..] {
                let permitted = collected_between(intent, effects[0] as f64, *t as f64);
                out.push(Violation {
                    name: if permitted { "expired-duplicate-effect" } else { "duplicate-effect" },
                    intent: intent.to_string(),
                    detail: format!("{} effects", effects.len()),
                    permitted,
                });
            }
        }
        // What the client saw for this intent.
        let mut attempts: Vec<(&crate::scenario::RequestSpec, &AttemptOutcome)> = Vec::new();
        let mut finals: Vec<&AttemptOutcome> = Vec::new();
        let mut finished = true;
        for (qi, q) in sim.requests.iter().enumerate().filter(|(_, q)| q.intent == *intent) {
            let rep = &r.requests[qi];
            finished &= rep.finished;
            for c in &rep.copies {
                attempts.extend(c.iter().map(|a| (q, a)));
                finals.extend(c.last());
            }
        }
        let acknowledged = attempts.iter().any(|(_, a)| is_success(a));
        for (q, a) in &attempts {
            if !is_success(a) {
                continue;
            }
            let Some(id) = a.id() else { continue };
            match rows_by_id.get(&id) {
                None => out.push(Violation {
                    name: "lost-success",
                    intent: intent.to_string(),
                    detail: format!(
                        "client saw {} with id {id}; no such row",
                        a.status.unwrap_or(0)
                    ),
                    permitted: false,
                }),
                Some(row) if q.user.as_deref() != Some(row.user.as_str()) => out.push(Violation {
                    name: "scope-leak",
                    intent: intent.to_string(),
                    detail: format!(
                        "user {} got row {id} of user {}",
                        q.user.as_deref().unwrap_or("-"),
                        row.user
                    ),
                    permitted: false,
                }),
                Some(row) if row.intent != *intent => out.push(Violation {
                    name: "foreign-reply",
                    intent: intent.to_string(),
                    detail: format!("got row {id} of intent {}", row.intent),
                    permitted: false,
                }),
                Some(_) => {}
            }
        }
        if ev.effects_expected
            && effects.is_empty()
            && acknowledged
            && finished
            && r.bounds_hit.is_empty()
        {
            out.push(Violation {
                name: "lost-effect",
                intent: intent.to_string(),
                detail: "a success reached the client; no effect was delivered".into(),
                permitted: false,
            });
        }
        if !effects.is_empty() && !acknowledged && finished {
            out.push(Violation {
                name: "unacknowledged-effect",
                intent: intent.to_string(),
                detail: format!("{} effect(s), no success seen by the client", effects.len()),
                permitted: false,
            });
        }
        // Finished when some attempt chain of the intent (a request's copy, after its retries)
        // ended with a final outcome: the client then knows what happened.
        if finished
            && r.bounds_hit.is_empty()
            && !finals.is_empty()
            && !finals.iter().any(|a| is_final(a))
            && let Some(a) = finals.iter().max_by(|a, b| a.done_ms.total_cmp(&b.done_ms))
        {
            out.push(Violation {
                name: "unfinished-intent",
                intent: intent.to_string(),
                detail: format!(
                    "last attempt: {}",
                    a.status.map(|s| s.to_string()).unwrap_or_else(|| a.outcome.to_string())
                ),
                permitted: false,
            });
        }
    }

    // Per (user, path, key): replay equality and fingerprint enforcement.
    let mut by_key: BTreeMap<crate::store::Scope, Vec<(&str, &AttemptOutcome, String)>> =
        BTreeMap::new();
    for (qi, q) in sim.requests.iter().enumerate() {
        for c in &r.requests[qi].copies {
            for (n, a) in c.iter().enumerate() {
                let (Some(k), true) = (&a.key, is_success(a)) else { continue };
                let scope = (q.user.clone().unwrap_or_default(), q.path.clone(), k.clone());
                by_key.entry(scope).or_default().push((
                    &q.intent,
                    a,
                    canonical(q.body_for(n as u32 + 1)),
                ));
            }
        }
    }
    for ((user, path, key), list) in &by_key {
        let first = &list[0];
        if let Some(other) =
            list.iter().find(|x| x.1.status != first.1.status || x.1.body != first.1.body)
        {
            let intents: Vec<&str> = list.iter().map(|x| x.0).collect();
            let permitted = any_collected_before(&intents, other.1.done_ms.max(first.1.done_ms));
            out.push(Violation {
                name: if permitted { "expired-replay-mismatch" } else { "replay-mismatch" },
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
                name: "payload-mismatch-executed",
                intent: other.0.to_string(),
                detail: format!("{user} {path} key {key}: executed {} and {}", f0.2, other.2),
                permitted: false,
            });
        }
    }

    for (intent, key) in ev.stuck {
        out.push(Violation {
            name: "stuck-key",
            intent: intent.clone(),
            detail: format!("key {key} in progress at quiescence"),
            permitted: false,
        });
    }

    out.sort_by_key(|v| NAMES.iter().position(|(n, _)| *n == v.name).unwrap_or(usize::MAX));
    out
}

/// Rows and effects per intent, for histograms.
pub fn per_intent(sim: &Sim, r: &RunReport) -> Vec<(u64, u64)> {
    sim.intents()
        .iter()
        .map(|i| {
            (
                r.rows.iter().filter(|x| x.intent == *i).count() as u64,
                r.effects.get(*i).copied().unwrap_or(0),
            )
        })
        .collect()
}
