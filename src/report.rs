//! Plain data about one run: what the simulated world observed ([`Observation`]), what the
//! judges made of it ([`Check`], [`Violation`]) and the one report type ([`RunReport`]),
//! serialised as it is. Imports only plain types ([`crate::http::Reason`]); reports carry no
//! wall-clock values.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::http::Reason;

/// How an attempt ended for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// A reply arrived (any status).
    Reply,
    /// No reply within the client's timeout (lost request or reply, crash, partition).
    TransportFailure,
}

impl Outcome {
    /// The outcome's name in reports and JSON (`reply`, `transport-failure`).
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Reply => "reply",
            Outcome::TransportFailure => "transport-failure",
        }
    }
}

/// What the client saw for one attempt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttemptOutcome {
    /// How the attempt ended: a reply, or none within the client's timeout.
    pub outcome: Outcome,
    /// The reply's HTTP status (None: no reply).
    pub status: Option<u16>,
    /// The reply was a stored outcome replayed (the server's replay marker), not a fresh execution.
    pub replayed: bool,
    /// The reply's body (None: no reply).
    pub body: Option<String>,
    /// The key sent, if any.
    pub key: Option<String>,
    /// Simulated time the attempt was sent and finished (ms since start).
    pub sent_ms: f64,
    /// Simulated time the attempt finished: its reply arrived or it failed (ms since start).
    pub done_ms: f64,
    /// What the server meant by the status (instrumentation), if anything beyond it.
    pub reason: Option<Reason>,
    /// The server execution that answered (instrumentation).
    #[serde(skip)]
    pub exec: Option<u64>,
    /// The created row's id where the answer keeps it elsewhere than a top-level `id` (a real
    /// target's `[[request]] id` pointer); None: read `id` from the body.
    #[serde(skip)]
    pub row: Option<i64>,
}

impl AttemptOutcome {
    /// The `id` field of the reply's JSON body, if any.
    pub fn id(&self) -> Option<i64> {
        self.row.or_else(|| body_id(self.body.as_deref()?))
    }

    /// A 2xx reply.
    /// A 2xx, except a 202 "still in progress" (`in_flight = 202`), which promises nothing.
    pub fn is_success(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
            && self.reason != Some(crate::http::Reason::InFlight)
    }
}

/// The `id` field of a JSON body, if any. The server's replies start `{"id":N,`: read that
/// directly; anything else is parsed as JSON.
pub fn body_id(body: &str) -> Option<i64> {
    if let Some(rest) = body.strip_prefix("{\"id\":") {
        let end = rest.find(|c: char| !c.is_ascii_digit() && c != '-').unwrap_or(rest.len());
        if end > 0 && rest[end..].starts_with([',', '}']) {
            return rest[..end].parse().ok();
        }
    }
    serde_json::from_str::<serde_json::Value>(body).ok()?.get("id")?.as_i64()
}

/// Everything the clients of one `[[request]]` saw.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestReport {
    /// The `[[request]]`'s id in the sim.
    pub id: String,
    /// The intent the request carries (`X-Intent`): what the oracle counts rows and effects by.
    pub intent: String,
    /// Attempts per copy, in order.
    pub copies: Vec<Vec<AttemptOutcome>>,
    /// Rows and stored keys right after the request finished (when the sim asks).
    pub rows_after: Option<u64>,
    /// Stored keys right after the request finished (when the sim asks).
    pub keys_after: Option<u64>,
    /// Key records holding a completed outcome right after the request finished (when the sim asks).
    pub responses_after: Option<u64>,
    /// Every copy reached a final attempt (none was cut off by the end of the run).
    pub finished: bool,
}

impl RequestReport {
    /// The final attempt of every copy.
    pub fn finals(&self) -> impl Iterator<Item = &AttemptOutcome> {
        self.copies.iter().filter_map(|c| c.last())
    }
}

/// The two verdicts of a run or a cell, computed in one place and rendered by every format
/// (text, Markdown, HTML, JSON, snapshots).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// No violation that is not policy-permitted, and no run cut short by a bound.
    pub safe: bool,
    /// The sim's expectations held (on every seed), and no run was cut short by a bound.
    pub as_specified: bool,
}

impl Verdict {
    /// "safe" / "NOT safe" and "as specified" / "NOT as specified", for text.
    pub fn words(self) -> (&'static str, &'static str) {
        (
            if self.safe { "safe" } else { "NOT safe" },
            if self.as_specified { "as specified" } else { "NOT as specified" },
        )
    }
}

/// A key record that disappeared: whose intent, under which client key, whether it held a
/// completed outcome (not a claim in progress), and when (µs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Collected {
    /// The intent of the request that made the record.
    pub intent: String,
    /// The client's idempotency key the record was stored under.
    pub key: String,
    /// The record held a completed outcome (`Done`), not a claim in progress.
    pub done: bool,
    /// Model time the record disappeared (µs).
    pub at_us: u64,
}

impl Collected {
    /// The record `r` under scope `s`, gone at `at_us`.
    pub fn of(s: &Scope, r: &KeyRecord, at_us: u64) -> Collected {
        Collected {
            intent: r.intent.clone(),
            key: s.key.clone(),
            done: r.state == RecordState::Done,
            at_us,
        }
    }
}

/// A business row as the judges see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RowRecord {
    /// The row's id (SQLite's rowid, never reused in a run).
    pub id: i64,
    /// The user the order came from (`X-User`).
    pub user: String,
    /// The operation (the route's name).
    pub operation: String,
    /// The ordered item.
    pub item: String,
    /// The ordered quantity.
    pub qty: i64,
    /// The intent of the request that inserted it (`X-Intent`, instrumentation).
    pub intent: String,
    /// The insert's timestamp as stored in the row (µs).
    pub created_us: i64,
    /// The server execution that inserted it (instrumentation).
    pub exec: i64,
    /// `mark-processed` ran for it (an inbox row whose event was handled). Only meaningful
    /// for a model with a `mark-processed` step; false otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub processed: bool,
}

/// Where a key record lives: (user, operation, key), unscoped fields stored as "".
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Scope {
    /// The user, when keys are scoped per user ("" otherwise).
    pub user: String,
    /// The operation, when keys are scoped per operation ("" otherwise).
    pub operation: String,
    /// The client's idempotency key.
    pub key: String,
}

/// The life of a key record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordState {
    /// Claimed, no outcome recorded yet.
    InProgress,
    /// An outcome (status and body) is recorded.
    Done,
    /// The request failed and its claim was kept as failed (`on_error = ["mark-failed"]`): a
    /// retry with the same payload may take it back and run again.
    Failed,
}

impl RecordState {
    /// The value stored in the `keys.state` column.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordState::InProgress => "in-progress",
            RecordState::Done => "done",
            RecordState::Failed => "failed",
        }
    }

    /// The state stored as `s` in the `keys.state` column (the inverse of [`RecordState::as_str`]); None for any other text.
    pub fn parse(s: &str) -> Option<RecordState> {
        match s {
            "in-progress" => Some(RecordState::InProgress),
            "done" => Some(RecordState::Done),
            "failed" => Some(RecordState::Failed),
            _ => None,
        }
    }
}

/// A key record, wherever it is stored (the `keys` table, a TTL cache, process memory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    /// The request's fingerprint under the model's `[key] fingerprint` policy (compared on a hit).
    pub fingerprint: String,
    /// The stored outcome's HTTP status (None while in progress).
    pub status: Option<i64>,
    /// The stored outcome's body, replayed on a hit (None while in progress).
    pub response: Option<String>,
    /// In progress, done or failed.
    pub state: RecordState,
    /// Model time (µs) of creation, and end of the claim's lease.
    pub created_us: u64,
    /// Model time (µs) the claim's lease ends, if it has one.
    pub lease_until_us: Option<u64>,
    /// The owner token of the execution that claimed it.
    pub token: Option<u64>,
    /// The intent of the request that claimed it (instrumentation).
    pub intent: String,
}

/// What one run of the simulated world observed: plain data, judged outside the world.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observation {
    /// What the clients saw, per `[[request]]` (in sim order).
    pub requests: Vec<RequestReport>,
    /// The business rows at the end, in id order.
    pub rows: Vec<RowRecord>,
    /// Every key record alive at the end: SQLite's, then the cache's, then process memories'.
    pub keys: Vec<(Scope, KeyRecord)>,
    /// Every effect the receiver counted (after deduplication), in order.
    pub effect_log: Vec<EffectRecord>,
    /// Deliveries the receiver got, before deduplication.
    pub deliveries: u64,
    /// Every key record deleted by the collector, an expiry, a cache's TTL, eviction or
    /// restart, or a delete-keys action.
    pub collected: Vec<Collected>,
    /// Limits hit (simulated time, steps).
    pub bounds_hit: Vec<String>,
    /// The intent of every outbox message still unsent at the end, in id order.
    pub unsent: Vec<String>,
    /// Every resource's final status rank (status events), by id.
    pub resources: Vec<(String, i64)>,
    /// Every document write (`update-doc`), by document and version.
    pub writes: Vec<DocWriteRecord>,
    /// Simulated time of the last event (µs).
    pub end_us: u64,
    /// Number of events in the history.
    pub events: usize,
    /// Hash of the typed event history (what determinism checks compare).
    pub trace_hash: u64,
    /// Faults that fired, by name (the sim's `[faults]` knob, or `@point:action` of an
    /// `[[inject]]`), and how often.
    pub faults: BTreeMap<String, u64>,
}

/// One write to a document: the version it made and the intent that made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DocWriteRecord {
    /// The document's id.
    pub doc: String,
    /// The version this write made.
    pub version: i64,
    /// The intent of the request that wrote it.
    pub intent: String,
}

/// One external effect the receiver counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectRecord {
    /// The intent the effect was performed for.
    pub intent: String,
    /// Model time it happened (µs).
    pub at_us: u64,
    /// The server execution that asked for it (instrumentation).
    pub exec: Option<u64>,
}

impl Observation {
    /// Effects per intent, from the receiver's log.
    pub fn effects_per_intent(&self) -> BTreeMap<String, u64> {
        let mut effects = BTreeMap::new();
        for e in &self.effect_log {
            *effects.entry(e.intent.clone()).or_insert(0) += 1;
        }
        effects
    }
}

/// One expectation of the sim and whether it held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    /// What the expectation is about, as printed.
    pub what: String,
    /// The actual value met the expectation.
    pub held: bool,
    /// The expected value, as printed.
    pub expected: String,
    /// The actual value, as printed.
    pub actual: String,
}

/// The invariants the oracle checks, in report order (the order of [`ViolationKind::ALL`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ViolationKind {
    /// `duplicate-row`: more than one row for one intent.
    DuplicateRow,
    /// `duplicate-effect`: more than one external effect for one intent.
    DuplicateEffect,
    /// `lost-success`: the client saw a success whose row does not exist.
    LostSuccess,
    /// `phantom-success`: the intent was applied, but its client ended on a failure answer and believes it failed.
    PhantomSuccess,
    /// `false-safe-retry`: a 503 "safe to retry" answered by an execution whose row or effect had already been committed.
    FalseSafeRetry,
    /// `foreign-reply`: a success naming a row of another intent of the same user.
    ForeignReply,
    /// `scope-leak`: a success naming another user's row (a stored reply crossed users).
    ScopeLeak,
    /// `replay-mismatch`: successes for one (user, operation, key) with different status or body.
    ReplayMismatch,
    /// `payload-mismatch-executed`: a different payload executed under a used key.
    PayloadMismatchExecuted,
    /// `lost-effect`: the client saw a success but the intent's external effect never happened.
    LostEffect,
    /// `unacknowledged-effect`: an effect happened but the client never saw a success and stopped trying.
    UnacknowledgedEffect,
    /// `stuck-key`: a key still in progress at quiescence.
    StuckKey,
    /// `stuck-outbox`: an outbox message never delivered by the end of the run.
    StuckOutbox,
    /// `regressed-state`: a resource's final status is behind a status its sender was told was applied.
    RegressedState,
    /// `lost-update`: an acknowledged update was never written, or was overwritten by a write whose client had not seen it.
    LostUpdate,
    /// `unfinished-intent`: no attempt chain of the intent ended with a final outcome within its retry budget.
    UnfinishedIntent,
    /// `out-of-retries` (not the design's): the client's attempts ran out while every one met a
    /// fault, no answer at all.
    OutOfRetries,
    /// `expired-duplicate-row` (policy-permitted): a second row once the key had expired after the documented retention.
    ExpiredDuplicateRow,
    /// `expired-duplicate-effect` (policy-permitted): a second effect once the key had expired after the documented retention.
    ExpiredDuplicateEffect,
    /// `expired-replay-mismatch` (policy-permitted): a different reply once the key had expired after the documented retention.
    ExpiredReplayMismatch,
}

impl ViolationKind {
    /// Every kind, in report order.
    pub const ALL: [ViolationKind; 20] = [
        ViolationKind::DuplicateRow,
        ViolationKind::DuplicateEffect,
        ViolationKind::LostSuccess,
        ViolationKind::PhantomSuccess,
        ViolationKind::FalseSafeRetry,
        ViolationKind::ForeignReply,
        ViolationKind::ScopeLeak,
        ViolationKind::ReplayMismatch,
        ViolationKind::PayloadMismatchExecuted,
        ViolationKind::LostEffect,
        ViolationKind::UnacknowledgedEffect,
        ViolationKind::StuckKey,
        ViolationKind::StuckOutbox,
        ViolationKind::RegressedState,
        ViolationKind::LostUpdate,
        ViolationKind::UnfinishedIntent,
        ViolationKind::OutOfRetries,
        ViolationKind::ExpiredDuplicateRow,
        ViolationKind::ExpiredDuplicateEffect,
        ViolationKind::ExpiredReplayMismatch,
    ];

    /// The stable kebab-case name used in reports, tables and docs.
    pub fn name(self) -> &'static str {
        match self {
            ViolationKind::DuplicateRow => "duplicate-row",
            ViolationKind::DuplicateEffect => "duplicate-effect",
            ViolationKind::LostSuccess => "lost-success",
            ViolationKind::PhantomSuccess => "phantom-success",
            ViolationKind::FalseSafeRetry => "false-safe-retry",
            ViolationKind::ForeignReply => "foreign-reply",
            ViolationKind::ScopeLeak => "scope-leak",
            ViolationKind::ReplayMismatch => "replay-mismatch",
            ViolationKind::PayloadMismatchExecuted => "payload-mismatch-executed",
            ViolationKind::LostEffect => "lost-effect",
            ViolationKind::UnacknowledgedEffect => "unacknowledged-effect",
            ViolationKind::StuckKey => "stuck-key",
            ViolationKind::StuckOutbox => "stuck-outbox",
            ViolationKind::RegressedState => "regressed-state",
            ViolationKind::LostUpdate => "lost-update",
            ViolationKind::UnfinishedIntent => "unfinished-intent",
            ViolationKind::OutOfRetries => "out-of-retries",
            ViolationKind::ExpiredDuplicateRow => "expired-duplicate-row",
            ViolationKind::ExpiredDuplicateEffect => "expired-duplicate-effect",
            ViolationKind::ExpiredReplayMismatch => "expired-replay-mismatch",
        }
    }

    /// What the violation means, in one line.
    pub fn meaning(self) -> &'static str {
        match self {
            ViolationKind::DuplicateRow => "more than one row for one intent",
            ViolationKind::DuplicateEffect => "more than one external effect for one intent",
            ViolationKind::LostSuccess => "the client saw a success whose row does not exist",
            ViolationKind::PhantomSuccess => {
                "the intent was applied (a row or an effect exists), but its client ended on a \
                 failure answer (4xx/5xx) and believes it failed"
            }
            ViolationKind::FalseSafeRetry => {
                "a 503 \"safe to retry\" answered by an execution whose row or effect had \
                 already been committed"
            }
            ViolationKind::ForeignReply => {
                "a success naming a row of another intent of the same user"
            }
            ViolationKind::ScopeLeak => {
                "a success naming another user's row (a stored reply crossed users)"
            }
            ViolationKind::ReplayMismatch => {
                "successes for one (user, operation, key) with different status or body"
            }
            ViolationKind::PayloadMismatchExecuted => {
                "a different payload executed under a used key"
            }
            ViolationKind::LostEffect => {
                "the client saw a success but the intent's external effect never happened"
            }
            ViolationKind::UnacknowledgedEffect => {
                "an effect happened but the client never saw a success and stopped trying"
            }
            ViolationKind::StuckKey => "a key still in progress at quiescence",
            ViolationKind::RegressedState => {
                "a resource's final status is behind a status its sender was told was applied \
                 (status events applied out of order)"
            }
            ViolationKind::LostUpdate => {
                "an acknowledged update was never written, or overwritten by a write whose \
                 client had not seen it (its If-Match named an older version)"
            }
            ViolationKind::StuckOutbox => {
                "an outbox message never delivered by the end of the run (the relay's budget or \
                 the run's time limit ran out first)"
            }
            ViolationKind::UnfinishedIntent => {
                "no attempt chain of the intent ended with a final outcome (2xx; \
                 400/401/402/403/404/410/412/422/428; a 409 for a reused key's other payload; an \
                 \"already processed\") within its retry budget"
            }
            ViolationKind::OutOfRetries => {
                "not the design's: the client's attempts ran out with no answer at all, in a run \
                 whose faults fired (every attempt of the intent a transport failure, each of \
                 its chains at its max_attempts): the client's retry budget, not the design, \
                 left it unfinished"
            }
            ViolationKind::ExpiredDuplicateRow => {
                "policy-permitted: a second row, once the key had expired after the model's \
                 documented retention"
            }
            ViolationKind::ExpiredDuplicateEffect => {
                "policy-permitted: a second effect, once the key had expired after the model's \
                 documented retention"
            }
            ViolationKind::ExpiredReplayMismatch => {
                "policy-permitted: a different reply, once the key had expired after the \
                 model's documented retention"
            }
        }
    }

    /// Position in report order.
    pub fn order(self) -> usize {
        self as usize
    }

    /// The kind with this name.
    pub fn from_name(name: &str) -> Option<ViolationKind> {
        ViolationKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// One violation found in a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// Which invariant was broken.
    pub name: ViolationKind,
    /// The intent it is about.
    pub intent: String,
    /// What happened, in words (seeds, rows, statuses).
    pub detail: String,
    /// Caused only by documented expiry (a retry after the key was collected).
    pub permitted: bool,
}

/// The report of one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// The seed of the run (a real round's number).
    pub seed: u64,
    /// The sim's name.
    pub sim: String,
    /// The model's name.
    pub model: String,
    /// What the clients saw, per `[[request]]` in sim order.
    pub requests: Vec<RequestReport>,
    /// The business rows at the end, in id order.
    pub rows: Vec<RowRecord>,
    /// Document writes (`update-doc`), by document and version; absent for other models.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<DocWriteRecord>,
    /// Key records alive at the end (every store).
    pub keys: u64,
    /// Of those, records still in progress.
    pub keys_in_progress: u64,
    /// External effects delivered to the receiver, per intent.
    pub effects: BTreeMap<String, u64>,
    /// External effects counted in all (after deduplication).
    pub effects_total: u64,
    /// Deliveries the receiver got, before deduplication.
    pub deliveries: u64,
    /// The sim's expectations, each with whether it held.
    pub checks: Vec<Check>,
    /// Invariant violations found by the oracle (bugs and policy-permitted ones).
    pub violations: Vec<Violation>,
    /// Rows and effects per intent, in intent order.
    pub per_intent: Vec<(u64, u64)>,
    /// Intents whose client never saw a final outcome (the `unfinished-intent` violations).
    pub ambiguous_intents: u64,
    /// Things in the sim that cannot take effect with this model (e.g. an injection at a point
    /// the model's program lacks).
    pub warnings: Vec<String>,
    /// Limits hit (simulated time, steps): reported, never a hang.
    pub bounds_hit: Vec<String>,
    /// Simulated time of the last event (ms).
    pub end_ms: f64,
    /// Number of events in the history.
    pub events: usize,
    /// The trace hash, 16 hex digits (what determinism checks compare).
    pub trace_hash: String,
    /// Faults that fired in the run, by name, and how often (absent when none fired).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub faults: BTreeMap<String, u64>,
}

impl RunReport {
    /// Violation kinds found (bugs only, not policy-permitted), deduplicated, in order.
    pub fn violation_names(&self) -> Vec<ViolationKind> {
        let mut v: Vec<ViolationKind> =
            self.violations.iter().filter(|x| !x.permitted).map(|x| x.name).collect();
        v.dedup();
        v
    }

    /// Every expectation of the sim held and no bound was hit (the "as specified" verdict).
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.held) && self.bounds_hit.is_empty()
    }

    /// Safe (no violation that is not policy-permitted, no bound hit) and as specified.
    pub fn verdict(&self) -> Verdict {
        Verdict {
            safe: self.bounds_hit.is_empty() && self.violations.iter().all(|v| v.permitted),
            as_specified: self.passed(),
        }
    }

    /// Count of final statuses (`transport-failure` for no reply), over all attempts.
    pub fn status_histogram(&self) -> BTreeMap<String, u64> {
        let mut h = BTreeMap::new();
        for r in &self.requests {
            for c in &r.copies {
                for a in c {
                    let k = match a.status {
                        Some(s) => s.to_string(),
                        None => a.outcome.name().to_string(),
                    };
                    *h.entry(k).or_insert(0) += 1;
                }
            }
        }
        h
    }
}
