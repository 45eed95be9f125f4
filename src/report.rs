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
    pub outcome: Outcome,
    pub status: Option<u16>,
    pub replayed: bool,
    pub body: Option<String>,
    /// The key sent, if any.
    pub key: Option<String>,
    /// Simulated time the attempt was sent and finished (ms since start).
    pub sent_ms: f64,
    pub done_ms: f64,
    /// What the server meant by the status (instrumentation), if anything beyond it.
    pub reason: Option<Reason>,
    /// The server execution that answered (instrumentation).
    #[serde(skip)]
    pub exec: Option<u64>,
}

impl AttemptOutcome {
    /// The `id` field of the reply's JSON body, if any.
    pub fn id(&self) -> Option<i64> {
        body_id(self.body.as_deref()?)
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
    pub id: String,
    pub intent: String,
    /// Attempts per copy, in order.
    pub copies: Vec<Vec<AttemptOutcome>>,
    /// Rows and stored keys right after the request finished (when the sim asks).
    pub rows_after: Option<u64>,
    pub keys_after: Option<u64>,
    pub responses_after: Option<u64>,
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
    pub intent: String,
    pub key: String,
    pub done: bool,
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
    pub id: i64,
    pub user: String,
    pub operation: String,
    pub item: String,
    pub qty: i64,
    pub intent: String,
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
    pub user: String,
    pub operation: String,
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
    pub fingerprint: String,
    pub status: Option<i64>,
    pub response: Option<String>,
    pub state: RecordState,
    /// Model time (µs) of creation, and end of the claim's lease.
    pub created_us: u64,
    pub lease_until_us: Option<u64>,
    /// The owner token of the execution that claimed it.
    pub token: Option<u64>,
    pub intent: String,
}

/// What one run of the simulated world observed: plain data, judged outside the world.
#[derive(Debug, Clone, PartialEq)]
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
}

/// One write to a document: the version it made and the intent that made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DocWriteRecord {
    pub doc: String,
    pub version: i64,
    pub intent: String,
}

/// One external effect the receiver counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectRecord {
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
pub struct Check {
    pub what: String,
    pub held: bool,
    pub expected: String,
    pub actual: String,
}

/// The invariants the oracle checks, in report order (the order of [`ViolationKind::ALL`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ViolationKind {
    DuplicateRow,
    DuplicateEffect,
    LostSuccess,
    PhantomSuccess,
    FalseSafeRetry,
    ForeignReply,
    ScopeLeak,
    ReplayMismatch,
    PayloadMismatchExecuted,
    LostEffect,
    UnacknowledgedEffect,
    StuckKey,
    StuckOutbox,
    RegressedState,
    LostUpdate,
    UnfinishedIntent,
    ExpiredDuplicateRow,
    ExpiredDuplicateEffect,
    ExpiredReplayMismatch,
}

impl ViolationKind {
    /// Every kind, in report order.
    pub const ALL: [ViolationKind; 19] = [
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
    pub name: ViolationKind,
    pub intent: String,
    pub detail: String,
    /// Caused only by documented expiry (a retry after the key was collected).
    pub permitted: bool,
}

/// The report of one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub seed: u64,
    pub sim: String,
    pub model: String,
    pub requests: Vec<RequestReport>,
    pub rows: Vec<RowRecord>,
    /// Document writes (`update-doc`), by document and version; absent for other models.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<DocWriteRecord>,
    pub keys: u64,
    pub keys_in_progress: u64,
    /// External effects delivered to the receiver, per intent.
    pub effects: BTreeMap<String, u64>,
    pub effects_total: u64,
    /// Deliveries the receiver got, before deduplication.
    pub deliveries: u64,
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
    pub end_ms: f64,
    pub events: usize,
    pub trace_hash: String,
}

impl RunReport {
    /// Violation kinds found (bugs only, not policy-permitted), deduplicated, in order.
    pub fn violation_names(&self) -> Vec<ViolationKind> {
        let mut v: Vec<ViolationKind> =
            self.violations.iter().filter(|x| !x.permitted).map(|x| x.name).collect();
        v.dedup();
        v
    }

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
