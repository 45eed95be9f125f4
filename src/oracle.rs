//! The oracle: named violations of the idempotency invariants, counted per *intent* (the
//! client's logical operation), not per key, so a client that rotates keys is still caught.
//! A pure function of (sim, model, observation), one function per family of rules.
//!
//! Every name is stable kebab-case (see [`ViolationKind`]). Duplicates explained only by a key
//! that was collected (retention/GC) between the two executions are *policy-permitted*:
//! reported under their own `expired-*` names and kept apart from bugs.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::http::Reason;
use crate::model::Model;
use crate::report::{
    AttemptOutcome, Collected, EffectRecord, Observation, RecordState, RowRecord, Violation,
    ViolationKind,
};
use crate::scenario::{InjectAction, RequestSpec, Sim};

use ViolationKind as V;

/// A final client-visible outcome: a success or a definitive answer (a 409 for a key reused
/// with another payload is one; a 409 "in progress" is not). The one rule both liveness
/// (`unfinished-intent`) and `phantom-success` read: a 5xx is ambiguous (the write may have
/// committed) and a 429 or a 503 "safe to retry" says "try again": neither is final. A 410
/// "key expired" is the design's final answer (no retry will ever be told more), though it
/// says nothing of the first execution: final, and not a failure answer.
fn is_final(a: &AttemptOutcome) -> bool {
    match a.status {
        Some(_) if a.is_success() => true,
        Some(s) if [400, 401, 402, 403, 404, 410, 412, 422, 428].contains(&s) => true,
        Some(_) if a.reason == Some(Reason::AlreadyDone) => true,
        Some(409) => matches!(a.reason, Some(Reason::Mismatch | Reason::Taken)),
        _ => false,
    }
}

/// A reply that tells the client its request failed: a final answer that is not a success (a
/// definitive refusal: 409 "already exists", 402 declined, 422, 400 …). An "already
/// processed" says it was done and a 410 "key expired" that the server no longer knows;
/// everything that is not final (`is_final`) says nothing either way.
fn is_failure_answer(a: &AttemptOutcome) -> bool {
    is_final(a)
        && !a.is_success()
        && !matches!(a.reason, Some(Reason::AlreadyDone | Reason::Expired))
}

/// Canonical JSON of a body (field order ignored), or the raw text if it is not JSON.
/// Bodies are the sims' few strings and every run of a sweep judges the same ones: each is
/// parsed once per worker thread (a pure memo, cleared when it grows past a bound).
fn canonical(body: &str) -> String {
    thread_local! {
        static MEMO: std::cell::RefCell<BTreeMap<String, String>> =
            const { std::cell::RefCell::new(BTreeMap::new()) };
    }
    MEMO.with(|m| {
        let mut m = m.borrow_mut();
        if let Some(c) = m.get(body) {
            return c.clone();
        }
        let c = serde_json::from_str::<serde_json::Value>(body)
            .map(|v| v.to_string())
            .unwrap_or_else(|_| body.to_string());
        if m.len() >= 256 {
            m.clear();
        }
        m.insert(body.to_string(), c.clone());
        c
    })
}

/// The sim's intents in first-request order ([`Sim::intents`]), without building the list.
fn intents(sim: &Sim) -> impl Iterator<Item = &str> {
    let qs = &sim.requests;
    qs.iter()
        .enumerate()
        .filter(|(i, q)| !qs[..*i].iter().any(|p| p.intent == q.intent))
        .map(|(_, q)| q.intent.as_str())
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
    /// Every attempt chain of the intent ran to its request's `max_attempts`.
    chains_spent: bool,
    /// The intent's effects, in order.
    effects: Vec<&'a EffectRecord>,
}

impl<'a> IntentView<'a> {
    /// An empty view, whose buffers [`IntentView::fill`] reuses for every intent of a run.
    fn empty() -> IntentView<'a> {
        IntentView {
            intent: "",
            attempts: vec![],
            finals: vec![],
            finished: true,
            acknowledged: false,
            chains_spent: true,
            effects: vec![],
        }
    }

    /// The view of `intent` (its buffers cleared and refilled).
    fn fill(&mut self, sim: &'a Sim, obs: &'a Observation, intent: &'a str) {
        self.intent = intent;
        self.attempts.clear();
        self.finals.clear();
        self.effects.clear();
        self.finished = true;
        self.chains_spent = true;
        self.effects.extend(obs.effect_log.iter().filter(|e| e.intent == intent));
        for (qi, q) in sim.requests.iter().enumerate().filter(|(_, q)| q.intent == intent) {
            let rep = &obs.requests[qi];
            self.finished &= rep.finished;
            // One allocation for the request's attempts (the buffers grow once per run).
            self.attempts.reserve(rep.copies.iter().map(Vec::len).sum());
            self.finals.reserve(rep.copies.len());
            for c in &rep.copies {
                self.chains_spent &= c.len() as u64 >= u64::from(q.policy.max_attempts);
                self.attempts.extend(c.iter().map(|a| (q, a)));
                self.finals.extend(c.last());
            }
        }
        self.acknowledged = self.attempts.iter().any(|(_, a)| a.is_success());
    }

    fn violation(&self, name: ViolationKind, detail: String) -> Violation {
        Violation { name, intent: self.intent.to_string(), detail, permitted: false }
    }
}

/// Is a second execution at `to_us` of an intent first executed at `from_us` explained by
/// documented expiry: did the key expire after the model's documented retention? Only when
/// the model has a retention; a *completed* record of the intent was collected in between
/// (a claim in progress whose TTL ran out held no outcome to keep); a retry (an attempt sent
/// after the first execution) sent that same key (any retry, for a key derived from the payload) (a fresh key is no expiry: no retention could
/// have stopped it); and the second execution came at least one retention after the first.
/// A key that vanished earlier (wiped by an operator, evicted from a cache before its TTL,
/// lost in a cache restart) is no policy.
fn expired_by_policy(
    obs: &Observation,
    model: &Model,
    sent: &[(&str, f64)],
    intent: &str,
    (from_us, to_us): (f64, f64),
) -> bool {
    let Some(retention) = model.key.as_ref().and_then(|k| k.retention_us) else { return false };
    // A key derived from the payload (`key_from`) is the record's whatever header was sent: a
    // retry of the intent sent it.
    let derived = model.key.as_ref().is_some_and(|k| k.key_from.is_some());
    let by_policy = |c: &Collected| {
        let at = c.at_us as f64;
        c.intent == intent
            && c.done
            && at >= from_us
            && at <= to_us
            && sent.iter().any(|(k, t)| (derived || *k == c.key) && *t > from_us)
    };
    to_us - from_us >= retention as f64 && obs.collected.iter().any(by_policy)
}

/// The (key, µs sent) of every attempt of an intent that sent a key.
fn keys_sent<'a>(sim: &Sim, obs: &'a Observation, intent: &str) -> Vec<(&'a str, f64)> {
    let mut out = Vec::new();
    for (qi, _) in sim.requests.iter().enumerate().filter(|(_, q)| q.intent == intent) {
        for a in obs.requests[qi].copies.iter().flatten() {
            if let Some(k) = &a.key {
                out.push((k.as_str(), a.sent_ms * 1000.0));
            }
        }
    }
    out
}

/// Every violation of the run, grouped by kind in report order.
pub fn violations(sim: &Sim, model: &Model, obs: &Observation) -> Vec<Violation> {
    let mut out = Vec::new();
    let rows = Rows::of(obs);
    let expected = effects_expected(sim, model);
    let bounded = !obs.bounds_hit.is_empty();
    let mut v = IntentView::empty();
    for intent in intents(sim) {
        v.fill(sim, obs, intent);
        let v = &v;
        duplicates(sim, obs, model, v, &mut out);
        replies(v, rows, &mut out);
        // One name per fact: a client told its applied intent failed is a phantom success,
        // not also an unacknowledged effect or an unfinished intent.
        let phantom = answers_against_state(obs, model, v, bounded, &mut out);
        effects_against_acks(v, expected, bounded, phantom, &mut out);
        if !phantom {
            liveness(v, bounded, !obs.faults.is_empty(), &mut out);
        }
    }
    // Replay equality and the fingerprint are promises of a design that reads the key; one
    // that reads none (a business key alone) makes neither.
    if model.key.is_some() {
        key_consistency(sim, model, obs, &mut out);
    }
    stuck_keys(model, obs, &mut out);
    stuck_outbox(obs, &mut out);
    if model.program.contains(&crate::model::Step::ApplyStatus) {
        regressed_states(sim, obs, &mut out);
    }
    if model.program.contains(&crate::model::Step::UpdateDoc) {
        lost_updates(sim, obs, &mut out);
    }
    out.sort_by_key(|v| v.name.order());
    out
}

/// At most one row and one effect per intent (unless the key was collected in between).
fn duplicates(
    sim: &Sim,
    obs: &Observation,
    model: &Model,
    v: &IntentView,
    out: &mut Vec<Violation>,
) {
    let n_rows = obs.rows.iter().filter(|x| x.intent == v.intent).count();
    if n_rows < 2 && v.effects.len() < 2 {
        return;
    }
    let sent = keys_sent(sim, obs, v.intent);
    let permitted = |from: f64, to: f64| expired_by_policy(obs, model, &sent, v.intent, (from, to));
    if n_rows > 1 {
        let rows: Vec<&RowRecord> = obs.rows.iter().filter(|x| x.intent == v.intent).collect();
        let first = rows[0].created_us as f64;
        for extra in &rows[1..] {
            let permitted = permitted(first, extra.created_us as f64);
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
        let first = v.effects[0].at_us as f64;
        for e in &v.effects[1..] {
            let permitted = permitted(first, e.at_us as f64);
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
fn replies(v: &IntentView, rows: Rows, out: &mut Vec<Violation>) {
    for (q, a) in &v.attempts {
        if !a.is_success() {
            continue;
        }
        let Some(id) = a.id() else { continue };
        match rows.get(id) {
            None => out.push(v.violation(
                V::LostSuccess,
                format!("client saw {} with id {id}; no such row", a.status.unwrap_or(0)),
            )),
            Some(row) if !is_principal(q, &row.user) => out.push(v.violation(
                V::ScopeLeak,
                format!(
                    "user {} got row {id} of user {}",
                    q.principal().as_deref().unwrap_or("-"),
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

/// The business rows by id: a binary search when they are in id order (as the world reports
/// them), else a scan (ids are unique: either finds the one row).
#[derive(Clone, Copy)]
struct Rows<'a> {
    rows: &'a [RowRecord],
    sorted: bool,
}

impl<'a> Rows<'a> {
    fn of(obs: &'a Observation) -> Rows<'a> {
        Rows { rows: &obs.rows, sorted: obs.rows.is_sorted_by_key(|r| r.id) }
    }

    fn get(self, id: i64) -> Option<&'a RowRecord> {
        if self.sorted {
            self.rows.binary_search_by_key(&id, |r| r.id).ok().map(|i| &self.rows[i])
        } else {
            self.rows.iter().find(|r| r.id == id)
        }
    }
}

/// `q.principal() == Some(user)` without building the principal (`tenant/user` or `user`).
fn is_principal(q: &RequestSpec, user: &str) -> bool {
    match (&q.tenant, &q.user) {
        (_, None) => false,
        (None, Some(u)) => user == u,
        (Some(t), Some(u)) => {
            user.strip_prefix(t.as_str()).and_then(|r| r.strip_prefix('/')) == Some(u.as_str())
        }
    }
}

/// What the client was told matches what happened: a client that ended on a failure answer
/// was not in fact served (phantom-success), and a 503 "safe to retry" came from an execution
/// that had committed nothing (false-safe-retry). Returns whether the intent is a phantom
/// success.
fn answers_against_state(
    obs: &Observation,
    model: &Model,
    v: &IntentView,
    bounded: bool,
    out: &mut Vec<Violation>,
) -> bool {
    // A row counts as applied once its work is done: for a design that marks an inbox row
    // processed (`mark-processed`), only a processed row; an unprocessed one is an event
    // received and not acted on, and a 500 about it is the truth.
    let marks = model.program.contains(&crate::model::Step::MarkProcessed);
    // The answers the client got at the end of its attempt chains; a chain that ended with no
    // answer (a transport failure) told it nothing either way.
    let mut answered = v.finals.iter().filter(|a| a.status.is_some());
    let told_failed = v.finished
        && !bounded
        && !v.acknowledged
        && answered.clone().next().is_some()
        && answered.all(|a| is_failure_answer(a));
    // What was applied, counted only for a client told it failed (the rest never reads it).
    let (applied_rows, writes) = if told_failed {
        (
            obs.rows.iter().filter(|r| r.intent == v.intent && (!marks || r.processed)).count(),
            obs.writes.iter().filter(|w| w.intent == v.intent).count(),
        )
    } else {
        (0, 0)
    };
    let applied = applied_rows > 0 || writes > 0 || !v.effects.is_empty();
    let phantom = told_failed && applied;
    if phantom {
        let answered = v.finals.iter().filter(|a| a.status.is_some());
        let last = answered.map(|a| a.status.unwrap_or(0).to_string()).collect::<Vec<_>>();
        let what = if writes > 0 {
            format!("{writes} document write(s)")
        } else {
            format!("{applied_rows} row(s)")
        };
        out.push(v.violation(
            V::PhantomSuccess,
            format!(
                "{what}, {} effect(s); the client ended on {}",
                v.effects.len(),
                last.join(", ")
            ),
        ));
    }
    for (_, a) in &v.attempts {
        if a.status != Some(503) || a.reason != Some(Reason::SafeToRetry) {
            continue;
        }
        let Some(exec) = a.exec else { continue };
        let row = obs.rows.iter().find(|r| r.exec == exec as i64);
        let effect = v.effects.iter().find(|e| e.exec == Some(exec));
        let what = match (row, effect) {
            (Some(r), _) => format!("its row {} was committed", r.id),
            (None, Some(_)) => "its effect had happened".to_string(),
            (None, None) => continue,
        };
        out.push(v.violation(V::FalseSafeRetry, format!("503 \"safe to retry\", but {what}")));
    }
    phantom
}

/// An acknowledged intent has its effect (when effects are expected); an effect is eventually
/// acknowledged to its client.
fn effects_against_acks(
    v: &IntentView,
    expected: bool,
    bounded: bool,
    phantom: bool,
    out: &mut Vec<Violation>,
) {
    if expected && v.effects.is_empty() && v.acknowledged && v.finished && !bounded {
        out.push(v.violation(
            V::LostEffect,
            "a success reached the client; no effect was delivered".into(),
        ));
    }
    if !v.effects.is_empty() && !v.acknowledged && v.finished && !phantom {
        out.push(v.violation(
            V::UnacknowledgedEffect,
            format!("{} effect(s), no success seen by the client", v.effects.len()),
        ));
    }
}

/// Some attempt of the intent (in any request's copy, after its retries) got a final outcome:
/// the client then knows what happened, whatever a later attempt of that chain met (a
/// transport failure after a final 409 "already exists" takes nothing back).
///
/// When every attempt met no answer at all, each chain ran to its `max_attempts` and faults
/// fired in the run, the client's retry budget ran out under the faults: `out-of-retries`,
/// shown apart and not held against the design (more attempts would have been answered).
fn liveness(v: &IntentView, bounded: bool, faulted: bool, out: &mut Vec<Violation>) {
    if v.finished
        && !bounded
        && !v.finals.is_empty()
        && !v.attempts.iter().any(|(_, a)| is_final(a))
        && let Some(a) = v.finals.iter().max_by(|a, b| a.done_ms.total_cmp(&b.done_ms))
    {
        let no_answer =
            v.attempts.iter().all(|(_, a)| a.outcome == crate::report::Outcome::TransportFailure);
        if faulted && no_answer && v.chains_spent {
            let mut x = v.violation(
                V::OutOfRetries,
                format!(
                    "{} attempt(s), none answered, in a run whose faults fired",
                    v.attempts.len()
                ),
            );
            x.permitted = true;
            out.push(x);
            return;
        }
        let last = a.status.map(|s| s.to_string()).unwrap_or_else(|| a.outcome.name().into());
        out.push(v.violation(V::UnfinishedIntent, format!("last attempt: {last}")));
    }
}

/// Per (user, path, key): every success is the same reply, and no second payload executed.
fn key_consistency(sim: &Sim, model: &Model, obs: &Observation, out: &mut Vec<Violation>) {
    // (scope, intent, attempt, body sent) of every success that sent a key, in request, copy
    // and attempt order, then grouped by scope in scope order (a stable sort: each group in
    // that order), as a map from scope to list would iterate.
    let attempts = obs.requests.iter().flat_map(|r| &r.copies).map(Vec::len).sum();
    let mut successes: Vec<(ScopeRef, &str, &AttemptOutcome, &str)> = Vec::with_capacity(attempts);
    for (qi, q) in sim.requests.iter().enumerate() {
        for c in &obs.requests[qi].copies {
            for (n, a) in c.iter().enumerate() {
                let (Some(k), true) = (&a.key, a.is_success()) else { continue };
                let user = match (&q.tenant, &q.user) {
                    (Some(_), Some(_)) => Cow::Owned(q.principal().unwrap_or_default()),
                    (_, u) => Cow::Borrowed(u.as_deref().unwrap_or_default()),
                };
                let scope = (user, q.path.as_str(), k.as_str());
                successes.push((scope, &q.intent, a, q.body_for(n as u32 + 1)));
            }
        }
    }
    // Stable: a sorted list (one scope, the common case) is already grouped.
    if !successes.is_sorted_by(|a, b| a.0 <= b.0) {
        successes.sort_by(|a, b| a.0.cmp(&b.0));
    }
    for list in successes.chunk_by(|a, b| a.0 == b.0) {
        scope_consistency(sim, model, obs, list, out);
    }
}

/// A success's scope, borrowed where it can be: (user, path, key), ordered as [`Scope`] is.
type ScopeRef<'a> = (Cow<'a, str>, &'a str, &'a str);

/// [`key_consistency`] of one scope's successes (at least one), in order.
fn scope_consistency(
    sim: &Sim,
    model: &Model,
    obs: &Observation,
    list: &[(ScopeRef, &str, &AttemptOutcome, &str)],
    out: &mut Vec<Violation>,
) {
    let (user, path, key) = &list[0].0;
    let first = &list[0];
    if let Some(other) =
        list.iter().find(|x| x.2.status != first.2.status || x.2.body != first.2.body)
    {
        // When each reply's order was created: its row's time, else when it was asked for
        // (attempt times are in ms, the rest in µs).
        let made = |a: &AttemptOutcome| {
            a.id()
                .and_then(|id| obs.rows.iter().find(|r| r.id == id))
                .map_or(a.sent_ms * 1000.0, |r| r.created_us as f64)
        };
        let (a, b) = (made(first.2), made(other.2));
        let window = (a.min(b), a.max(b));
        let permitted = [first.1, other.1]
            .iter()
            .any(|i| expired_by_policy(obs, model, &keys_sent(sim, obs, i), i, window));
        out.push(Violation {
            name: if permitted { V::ExpiredReplayMismatch } else { V::ReplayMismatch },
            intent: other.1.to_string(),
            detail: format!(
                "{user} {path} key {key}: {} vs {}",
                first.2.body.as_deref().unwrap_or(""),
                other.2.body.as_deref().unwrap_or("")
            ),
            permitted,
        });
    }
    // Executed: not a replay, and not a reply handing back a row another execution
    // inserted (get-or-create, `[rows] on_clash = "existing"`: a 200 with the existing
    // row and no replay marker runs nothing of its own payload).
    let handed_back = |a: &AttemptOutcome| {
        let row = a.id().and_then(|id| obs.rows.iter().find(|r| r.id == id));
        matches!((row, a.exec), (Some(r), Some(e)) if i64::try_from(e).ok() != Some(r.exec))
    };
    let mut fresh = list.iter().filter(|x| !x.2.replayed && !handed_back(x.2));
    let Some(f0) = fresh.next() else { return };
    // The canonical body each executed (field order ignored; memoised per thread): made only
    // when a second execution is there to compare.
    let mut rest = fresh.peekable();
    if rest.peek().is_none() {
        return;
    }
    let c0 = canonical(f0.3);
    for other in rest {
        let c = canonical(other.3);
        if c != c0 {
            out.push(Violation {
                name: V::PayloadMismatchExecuted,
                intent: other.1.to_string(),
                detail: format!("{user} {path} key {key}: executed {c0} and {c}"),
                permitted: false,
            });
            return;
        }
    }
}

/// A key left in progress at quiescence blocks its retries, unless a lease lets another
/// request take it over once it expires.
fn stuck_keys(model: &Model, obs: &Observation, out: &mut Vec<Violation>) {
    // An expired lease can be taken over, a claim in a TTL cache frees itself when its TTL
    // runs out (as a lease does), and a model that proceeds past an in-progress record is
    // never blocked by one.
    let harmless = model.key.as_ref().is_some_and(|k| {
        k.lease.is_some()
            || (k.store == crate::model::KeyStore::Cache && k.retention_us.is_some())
            || k.in_flight == crate::model::InFlight::Proceed
    });
    if harmless {
        return;
    }
    for (s, r) in obs.keys.iter().filter(|(_, r)| r.state == RecordState::InProgress) {
        out.push(Violation {
            name: V::StuckKey,
            intent: r.intent.clone(),
            detail: format!("key {} in progress at quiescence", s.key),
            permitted: false,
        });
    }
}

/// Every message the outbox took is delivered within the run: one violation per intent with
/// messages still unsent at the end. (The run then also ended at a bound, which keeps the
/// lost-effect rule from judging the intent: this names why.)
fn stuck_outbox(obs: &Observation, out: &mut Vec<Violation>) {
    let mut per_intent: BTreeMap<&str, usize> = BTreeMap::new();
    for i in &obs.unsent {
        *per_intent.entry(i.as_str()).or_insert(0) += 1;
    }
    let end_ms = obs.end_us as f64 / 1000.0;
    for (intent, n) in per_intent {
        out.push(Violation {
            name: V::StuckOutbox,
            intent: intent.to_string(),
            detail: format!("{n} message(s) still unsent when the run ended at {end_ms:.3} ms"),
            permitted: false,
        });
    }
}

/// Status events: every resource ends at least at the latest status whose event was
/// acknowledged (2xx) to its sender. Earlier statuses applied after later ones leave it behind.
fn regressed_states(sim: &Sim, obs: &Observation, out: &mut Vec<Violation>) {
    // resource → (the highest acknowledged rank, the intent of that event)
    let mut acked: BTreeMap<String, (i64, &str)> = BTreeMap::new();
    for (qi, q) in sim.requests.iter().enumerate() {
        if q.path != "/api/events" {
            continue;
        }
        let Some((resource, rank)) = event_of(q.body.as_bytes()) else { continue };
        let ok = obs.requests[qi].copies.iter().flatten().any(|a| a.is_success());
        let e = acked.entry(resource).or_insert((0, q.intent.as_str()));
        if ok && rank > e.0 {
            *e = (rank, q.intent.as_str());
        }
    }
    for (resource, (rank, intent)) in acked {
        let end = obs.resources.iter().find(|(r, _)| *r == resource).map_or(0, |r| r.1);
        if rank > 0 && end < rank {
            let now =
                if end == 0 { "absent".to_string() } else { crate::http::status_name(end).into() };
            out.push(Violation {
                name: V::RegressedState,
                intent: intent.to_string(),
                detail: format!(
                    "{resource} ends {now}; `{}` was acknowledged",
                    crate::http::status_name(rank)
                ),
                permitted: false,
            });
        }
    }
}

/// Document updates: the last write of an acknowledged intent is lost when a later write of
/// another intent overwrote it although that write's client had not seen it: its `If-Match`
/// named a version before the one the lost write made. (A write without `If-Match` is blind:
/// it claims to have seen every version.) A later write of the same intent supersedes its own.
fn lost_updates(sim: &Sim, obs: &Observation, out: &mut Vec<Violation>) {
    // intent → the version its client based its writes on, from the If-Match it sent.
    let mut base: BTreeMap<&str, i64> = BTreeMap::new();
    let mut acked: BTreeMap<&str, bool> = BTreeMap::new();
    // PUT intents whose client got a 2xx: each must have written.
    let mut acked_puts: BTreeMap<&str, &str> = BTreeMap::new();
    for (qi, q) in sim.requests.iter().enumerate() {
        if let Some(v) = q.if_match.as_deref().and_then(crate::http::parse_etag) {
            base.insert(q.intent.as_str(), v);
        }
        let ok = obs.requests[qi].copies.iter().flatten().any(|a| a.is_success());
        *acked.entry(q.intent.as_str()).or_default() |= ok;
        if let (true, "PUT", Some(doc)) =
            (ok, q.method.as_str(), q.path.strip_prefix(crate::http::DOCS_PREFIX))
        {
            acked_puts.insert(q.intent.as_str(), doc);
        }
    }
    let mut lost: BTreeMap<&str, String> = BTreeMap::new();
    for (intent, doc) in acked_puts {
        if !obs.writes.iter().any(|w| w.intent == intent) {
            lost.insert(intent, format!("{doc}: acknowledged, never written"));
        }
    }
    for (i, w) in obs.writes.iter().enumerate() {
        let later = obs.writes[i + 1..].iter().filter(|x| x.doc == w.doc);
        if later.clone().any(|x| x.intent == w.intent)
            || !acked.get(w.intent.as_str()).copied().unwrap_or(false)
        {
            continue;
        }
        let Some(x) =
            later.into_iter().find(|x| base.get(x.intent.as_str()).is_some_and(|b| *b < w.version))
        else {
            continue;
        };
        lost.entry(w.intent.as_str()).or_insert_with(|| {
            format!(
                "{} version {} overwritten by intent {} (version {}), whose If-Match was \"{}\"",
                w.doc,
                w.version,
                x.intent,
                x.version,
                base[x.intent.as_str()]
            )
        });
    }
    for (intent, detail) in lost {
        out.push(Violation {
            name: V::LostUpdate,
            intent: intent.to_string(),
            detail,
            permitted: false,
        });
    }
}

/// The (resource, status rank) a status event's body names.
fn event_of(body: &[u8]) -> Option<(String, i64)> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let resource = v.get("resource")?.as_str()?.to_string();
    let status = v.get("status")?.as_str()?;
    let rank = crate::http::STATUSES.iter().position(|s| *s == status)? as i64 + 1;
    Some((resource, rank))
}

/// Should every acknowledged intent have an effect? Yes when the model performs effects, or
/// when the sim injects an unconditional effect at a point of the model for every request.
pub fn effects_expected(sim: &Sim, model: &Model) -> bool {
    model.has_effects()
        || sim.injects.iter().any(|i| {
            matches!(i.action, InjectAction::Effect { .. })
                && i.request.is_none()
                && i.rate >= 1.0
                && i.times.is_none()
                && model.points().contains(&i.point.as_str())
        })
}

/// Intents whose client never saw a final outcome.
pub fn ambiguous_intents(violations: &[Violation]) -> u64 {
    violations.iter().filter(|v| matches!(v.name, V::UnfinishedIntent | V::OutOfRetries)).count()
        as u64
}

/// Rows and effects per intent, in intent order (for histograms).
pub fn per_intent(sim: &Sim, obs: &Observation) -> Vec<(u64, u64)> {
    intents(sim)
        .map(|i| {
            let rows = obs.rows.iter().filter(|x| x.intent == i).count() as u64;
            let effects = obs.effect_log.iter().filter(|e| e.intent == i).count() as u64;
            (rows, effects)
        })
        .collect()
}

/// A real round cannot tell a transport failure that an injected fault caused from one the
/// server caused (a reset, a hang): an intent left without an answer is never excused as the
/// client's `out-of-retries` there; it stays `unfinished-intent` (but for the `timed_out`
/// intents of a controlled round). `validate` judges its simulated side by this rule too
/// ([`crate::sweep::Judging::AsReal`]), so both sides name an unanswered intent alike.
pub fn unanswered_as_real(
    violations: &mut [Violation],
    timed_out: &std::collections::BTreeSet<String>,
) {
    use crate::report::ViolationKind as V;
    let unexcused = |v: &&mut Violation| !timed_out.contains(&v.intent);
    for v in violations.iter_mut().filter(|v| v.name == V::OutOfRetries).filter(unexcused) {
        v.name = V::UnfinishedIntent;
        v.permitted = false;
    }
}
