//! The event history of one run: typed events in simulated time. `--trace` renders them as a
//! timeline, `--mermaid` as a sequence diagram; the determinism hash is computed from the typed
//! events themselves, so a sweep that only needs counts formats no text at all. Imports
//! nothing from the crate but [`crate::units`]: names (request ids, copies) come with the
//! [`Legend`]. Durations are microseconds of model time, shown as milliseconds.

use std::collections::BTreeMap;
use std::fmt::{self, Write};
use std::hash::{Hash, Hasher};

use crate::units::show_ms;

/// Where an event happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Node {
    /// The client node of request `i` (sim order).
    Client(u32),
    /// Server process `i` (0-based; shown as `server-{i+1}`).
    Server(u32),
    /// The external effect receiver.
    Receiver,
    /// The control node (actions, collector, partitions, restarts, quiescence).
    Control,
}

/// Who an event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Actor {
    /// Attempt `attempt` (1-based) of copy `copy` of request `req`.
    Attempt { req: u32, copy: u32, attempt: u32 },
    /// The outbox relay of a process, between messages.
    Relay,
    /// The outbox relay delivering outbox message `id`.
    RelayMessage(i64),
    /// A process's background completer finishing the abandoned claim of `intent`.
    Completer,
}

/// Which SQL statement a lock wait or an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stmt {
    Begin,
    Commit,
    /// The commit that ends a transaction after a lookup hit (nothing written).
    CommitReadOnly,
    Lookup,
    Claim,
    InsertRow,
    SaveResponse,
    Outbox,
    ReleaseClaim,
    /// The relay reading unsent outbox messages.
    Relay,
    /// The relay marking a message sent.
    RelayMark,
    /// `recovery-point:NAME`: the claim remembers the phase reached.
    RecoveryPoint,
    /// `on_error = ["unlock"]`: the claim's lock is released, the record kept.
    Unlock,
    TakeStock,
    ApplyStatus,
    UpdateDoc,
    /// `on_error = ["mark-failed"]`: the claim is kept as failed.
    MarkFailed,
    CheckRow,
    MarkProcessed,
}

impl Stmt {
    pub fn name(self) -> &'static str {
        match self {
            Stmt::Begin => "begin",
            Stmt::Commit => "commit",
            Stmt::CommitReadOnly => "COMMIT",
            Stmt::Lookup => "lookup",
            Stmt::Claim => "claim",
            Stmt::InsertRow => "insert-row",
            Stmt::SaveResponse => "save-response",
            Stmt::Outbox => "outbox",
            Stmt::ReleaseClaim => "release-claim",
            Stmt::Relay | Stmt::RelayMark => "relay",
            Stmt::RecoveryPoint => "recovery-point",
            Stmt::Unlock => "unlock",
            Stmt::TakeStock => "take-stock",
            Stmt::ApplyStatus => "apply-status",
            Stmt::UpdateDoc => "update-doc",
            Stmt::MarkFailed => "mark-failed",
            Stmt::CheckRow => "check-row",
            Stmt::MarkProcessed => "mark-processed",
        }
    }

    /// Does the statement write (so that, in autocommit mode, it also commits)?
    pub fn writes(self) -> bool {
        matches!(
            self,
            Stmt::Claim
                | Stmt::InsertRow
                | Stmt::SaveResponse
                | Stmt::Outbox
                | Stmt::ReleaseClaim
                | Stmt::RelayMark
        )
    }
}

/// Why a request was refused before any step ran.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The fixed front half (404, 401, 400) with its body.
    FrontHalf {
        status: u16,
        body: String,
    },
    MissingKey,
    KeyTooLong,
    /// Shorter than `[key] min_len`.
    KeyTooShort,
    /// Not in the `[key] format` (a UUID).
    KeyFormat,
}

/// Where a random crash fault struck.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CrashSite {
    /// Before a step of the program (its name).
    BeforeStep(String),
    /// The relay, before it sends a message.
    BeforeSend,
    /// The relay, between sending a message and marking it sent.
    BetweenSendAndMark,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum What {
    // -- clients
    /// A request sent to a server process (a message).
    Sent {
        to: u32,
        method: String,
        path: String,
        key: Option<String>,
    },
    /// A reply received.
    Received {
        status: u16,
        body: String,
        replayed: bool,
    },
    TransportFailure {
        timeout_us: u64,
    },
    GaveUp {
        horizon_us: u64,
    },
    // -- the network
    RequestDropped,
    /// A proxy or client library resends the request after a stall.
    RequestDuplicated {
        after_us: u64,
    },
    ReplyDropped {
        status: u16,
    },
    Delayed {
        us: u64,
    },
    /// A message cut by a partition (at the process on the cut side).
    LostInPartition,
    /// A message that reached a crashed process.
    LostToDownProcess,
    /// A request to a crashed process: the connection is refused.
    ConnectionRefused,
    /// The client's connection was reset (its server process died or dropped it).
    ConnectionReset,
    // -- server processes
    /// A request reached its server process (the end of a `Sent` arrow).
    Arrived,
    /// A reply sent to the client of request `to` (a message).
    Reply {
        to: u32,
        status: u16,
        body: String,
    },
    ReplyLostAfterCommit,
    ConnectionDropped {
        status: u16,
    },
    Rejected(Refusal),
    DriverAwait {
        us: u64,
    },
    LockWait {
        stmt: Stmt,
        budget_us: u64,
    },
    StillLocked {
        stmt: Stmt,
        waited_us: u64,
    },
    /// `SQLITE_BUSY` that SQLite does not wait out (it does not call its busy handler): a
    /// transaction that has read cannot take the write lock (`snapshot`: in WAL, its snapshot
    /// is stale).
    LockedAtOnce {
        stmt: Stmt,
        snapshot: bool,
    },
    /// Waiting for one of the process's pooled connections.
    PoolWait,
    PoolExhausted {
        waited_us: u64,
    },
    SqlError {
        stmt: Stmt,
        error: String,
    },
    /// `BEGIN DEFERRED | IMMEDIATE | EXCLUSIVE` (the SQL).
    Begin {
        sql: &'static str,
    },
    Commit,
    CommitNothingWritten,
    Rollback,
    LookupMiss,
    Mismatch {
        status: u16,
    },
    InFlight {
        status: u16,
    },
    WaitingForOriginal,
    HitCompleted {
        status: u16,
    },
    Replayed {
        status: u16,
    },
    Claimed,
    ClaimUniqueFailed,
    TookOver,
    AlreadyClaimed,
    ClaimGone,
    RowInserted {
        row: i64,
    },
    OutboxQueued {
        message: i64,
    },
    OutboxMarkedSent {
        message: i64,
    },
    /// `fencing`: the completion was refused by the owner token check.
    SaveRefused {
        fencing: bool,
    },
    ClaimCompleted {
        status: u16,
    },
    Stored {
        status: u16,
    },
    /// An effect call to the receiver (a message).
    EffectCall {
        intent: String,
    },
    EffectUnacknowledged,
    /// The provider answered an error (the server cannot know whether it performed it).
    ProviderError,
    /// The connection to the database was lost around COMMIT.
    CommitLost {
        committed: bool,
    },
    /// The cache refused the connection.
    CacheRefused,
    /// The cache cannot be reached from a partitioned process.
    CacheUnreachable,
    /// The cache restarted without persistence: every record is gone.
    CacheRestarted,
    /// The operation's key was evicted from the cache before its TTL.
    CacheEvicted,
    /// A cache operation was applied but its reply was lost.
    CacheReplyLost,
    Injected {
        point: String,
        action: &'static str,
    },
    CrashFault(CrashSite),
    Failed {
        why: String,
    },
    ClaimReleased {
        n: usize,
    },
    CannotBind {
        error: String,
    },
    CannotOpenDatabase {
        error: String,
    },
    ProcessCrashed,
    ProcessRestarted,
    /// The process's wall clock runs off the database's by this much (µs; drawn at start).
    ClockOffset {
        us: i64,
    },
    // -- the receiver (the external effect provider)
    /// The provider performed the effect but answers an error.
    ProviderErrorAfterSuccess,
    /// The provider performed the effect; its answer is lost.
    ProviderAnswerLost,
    /// An effect call never reached the provider.
    EffectCallLost,
    /// The provider receives the effect call twice.
    EffectCallDuplicated,
    EffectApplied {
        intent: String,
        from: Actor,
    },
    EffectDeduplicated {
        intent: String,
        from: Actor,
    },
    // -- the control node
    Partitioned {
        process: u32,
    },
    Reconnected {
        process: u32,
    },
    Quiescent,
    ActionNoDatabase {
        action: u32,
        error: String,
    },
    LockHeld {
        action: u32,
    },
    LockReleased {
        action: u32,
    },
    LockNotTaken {
        action: u32,
    },
    DeleteKeysFailed {
        action: u32,
        error: String,
    },
    KeysDeleted {
        action: u32,
        n: usize,
    },
    Collected {
        n: usize,
        retention_us: u64,
    },
    Probe {
        req: u32,
        rows: u64,
        keys: u64,
    },
    ProbeGaveUp {
        req: u32,
    },
    /// `insert-row` met the rows table's UNIQUE business key, held by row `row`.
    RowClash {
        row: i64,
    },
    /// `check-row`: a row with the business key exists (the first, `row`).
    RowFound {
        row: i64,
    },
    /// `check-row`: no row with the business key (yet).
    RowAbsent,
    /// `on_clash = "unprocessed"`: the row holding the key is not marked processed; this
    /// request takes it as its own and goes on.
    RowTaken {
        row: i64,
    },
    /// `mark-processed`: the row is marked handled.
    RowProcessed {
        row: i64,
    },
    /// The claim now remembers this recovery point (and the row, if any).
    RecoveryPointSaved {
        point: String,
    },
    /// A takeover found a recovery point: the program continues after it.
    Resumed {
        point: String,
        row: Option<i64>,
    },
    /// The error path released the claim's lock and kept the record (`n` records).
    ClaimUnlocked {
        n: usize,
    },
    /// The error path kept the claim as a `failed` record (`n` records).
    MarkedFailed {
        n: usize,
    },
    /// A lookup found a `failed` record with this payload: the request runs again.
    FoundFailed,
    /// `in_flight = "proceed"`: an in-progress record is ignored; the program runs.
    InFlightIgnored,
    /// `local_cache`: the record came from this process's memory, not the store.
    LocalCacheHit,
    /// `[driver] deadline_ms` passed: the execution is killed (no error path, no reply).
    DeadlineKilled,
    /// `rate-limit`: a token taken (`allowed`), or none left (→ 429).
    RateLimited {
        allowed: bool,
    },
    /// `on_error = ["release-key"]`: the key's record deleted by key alone (`n` records).
    KeyReleased {
        n: usize,
    },
    /// `expiry = "on-read"`: the record read had expired; deleted, it reads as absent.
    KeyExpired {
        intent: String,
    },
    /// `on_expired = 410`: the record read had expired; answered 410 Gone.
    ExpiredGone,
    /// A claim took a `failed` record back (compare-and-set on the state).
    RetookFailed,
    /// The completer took over an abandoned claim to finish it.
    CompleterTookOver {
        intent: String,
        key: String,
    },
    /// The completer finished a claim's program: its outcome is stored.
    CompleterFinished {
        status: u16,
    },
    /// The completer left a claim older than its horizon alone.
    CompleterPastHorizon {
        intent: String,
        key: String,
    },
    /// `retry-transaction`: the database was busy; rolled back, running the transaction again.
    TransactionRetried {
        attempt: u32,
        of: u32,
    },
    /// `take-stock`: `units` taken from `item`.
    StockTaken {
        item: String,
        units: i64,
    },
    /// `take-stock`: the CHECK refused it: sold out.
    SoldOut {
        item: String,
    },
    /// The provider declined the call (a business refusal; nothing done).
    Declined {
        intent: String,
    },
    /// `update-doc`: the document's value set; it is now at `version`.
    DocUpdated {
        doc: String,
        version: i64,
        value: i64,
    },
    /// `update-doc` on a DELETE: the document is gone (soft-deleted at `version`; 0: it was
    /// already gone and the model answers 204 anyway).
    DocDeleted {
        doc: String,
        version: i64,
    },
    /// `update-doc` under `check = "client-time"`: the client's stamp is not newer than the
    /// stored one; nothing written, answered 200 anyway.
    DocIgnored {
        doc: String,
        stamp: i64,
        current: i64,
    },
    /// `update-doc` refused: 412 (the `If-Match` is not the current version), 428 (no
    /// `If-Match` and one is required) or 404 (no such document: `current` is None).
    DocRefused {
        doc: String,
        status: u16,
        if_match: Option<i64>,
        current: Option<i64>,
    },
    /// `apply-status`: the resource's status set (or left, `applied = false`: not past it).
    StatusApplied {
        resource: String,
        status: &'static str,
        applied: bool,
    },
    // (Variants added after this line keep the discriminants, and so the trace hashes, of
    // runs that never emit them.)
    /// An injected `stall`: the whole process stops for `us` (none of its tasks runs).
    ProcessStalled {
        us: u64,
    },
    /// The stalled process runs again.
    ProcessResumed,
    /// `on_failed_save = "keep"`: the save of the outcome failed; the claim is left as it is.
    ClaimKept,
    /// `on_error = ["rollback-any"]`: the error path's ROLLBACK ended a transaction another
    /// request of the process began on the shared connection.
    RollbackOthers,
}

/// One event. `t_us` is simulated time since the run started, in microseconds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Event {
    pub t_us: u64,
    pub node: Node,
    pub who: Option<Actor>,
    pub what: What,
}

impl Event {
    /// The node a message goes to (requests, replies, effect calls), if the event is one.
    pub fn to(&self) -> Option<Node> {
        match &self.what {
            What::Sent { to, .. } => Some(Node::Server(*to)),
            What::Reply { to, .. } => Some(Node::Client(*to)),
            What::EffectCall { .. } => Some(Node::Receiver),
            _ => None,
        }
    }
}

/// The names events refer to by index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Legend {
    /// Per request (sim order): its id and how many concurrent copies it sends.
    pub requests: Vec<(String, u32)>,
    /// Action ids (sim order).
    pub actions: Vec<String>,
}

impl Legend {
    fn request(&self, i: u32) -> &str {
        self.requests.get(i as usize).map(|r| r.0.as_str()).unwrap_or("?")
    }

    fn action(&self, i: u32) -> &str {
        self.actions.get(i as usize).map(|a| a.as_str()).unwrap_or("?")
    }

    /// `client-first`, `server-2`, `receiver`, `control`.
    pub fn node(&self, n: Node) -> String {
        match n {
            Node::Client(i) => format!("client-{}", self.request(i)),
            Node::Server(i) => format!("server-{}", i + 1),
            Node::Receiver => "receiver".into(),
            Node::Control => "control".into(),
        }
    }

    /// `first`, `burst[3]` (a copy), `first/2` (attempt 2), `burst[3]/2`, `relay`, `relay#4`.
    pub fn actor(&self, a: Actor) -> String {
        match a {
            Actor::Attempt { req, copy, attempt } => {
                let copies = self.requests.get(req as usize).map(|r| r.1).unwrap_or(1);
                attempt_label(self.request(req), copies, copy, attempt)
            }
            Actor::Relay => "relay".into(),
            Actor::RelayMessage(id) => format!("relay#{id}"),
            Actor::Completer => "completer".into(),
        }
    }

    /// The event's text as the trace shows it (without time and node).
    pub fn text(&self, e: &Event) -> String {
        let mut s = String::new();
        if let Some(a) = e.who {
            s.push_str(&self.actor(a));
            s.push_str(": ");
        }
        let _ = self.write_what(&mut s, &e.what);
        s
    }

    fn write_what(&self, s: &mut String, what: &What) -> fmt::Result {
        match what {
            What::Sent { method, path, key, .. } => {
                write!(s, "{method} {path} key={}", key.as_deref().unwrap_or("-"))
            }
            What::Received { status, body, replayed } => {
                write!(s, "← {status} {body}{}", if *replayed { " (replayed)" } else { "" })
            }
            What::TransportFailure { timeout_us } => {
                write!(s, "transport failure (no reply within {} ms)", show_ms(*timeout_us))
            }
            What::GaveUp { horizon_us } => {
                write!(s, "retry horizon of {} ms reached, giving up", show_ms(*horizon_us))
            }
            What::RequestDropped => write!(s, "fault: request dropped in the network"),
            What::RequestDuplicated { after_us } => write!(
                s,
                "fault: request resent by a proxy after {} ms (the client gets the second reply)",
                show_ms(*after_us)
            ),
            What::ReplyDropped { status } => {
                write!(s, "fault: reply {status} dropped in the network")
            }
            What::Delayed { us } => write!(s, "fault: message delayed {} ms", show_ms(*us)),
            What::LostInPartition => write!(s, "fault: message lost in a partition"),
            What::LostToDownProcess => write!(s, "message lost: the process is down"),
            What::ConnectionRefused => write!(s, "connection refused: the process is down"),
            What::ConnectionReset => write!(s, "connection reset (no reply)"),
            What::Arrived => write!(s, "request arrives"),
            What::Reply { status, body, .. } => write!(s, "reply {status} {body}"),
            What::ReplyLostAfterCommit => write!(s, "fault: reply lost after commit"),
            What::ConnectionDropped { status } => {
                write!(s, "connection dropped, {status} never sent")
            }
            What::Rejected(Refusal::FrontHalf { status, body }) => {
                write!(s, "rejected {status}: {body}")
            }
            What::Rejected(Refusal::MissingKey) => {
                write!(s, "rejected 400: missing Idempotency-Key")
            }
            What::Rejected(Refusal::KeyTooLong) => {
                write!(s, "rejected 400: Idempotency-Key too long")
            }
            What::Rejected(Refusal::KeyTooShort) => {
                write!(s, "rejected 400: Idempotency-Key too short")
            }
            What::Rejected(Refusal::KeyFormat) => {
                write!(s, "rejected 400: Idempotency-Key is not a UUID")
            }
            What::DriverAwait { us: 0 } => write!(s, "await: one event-loop turn"),
            What::DriverAwait { us } => write!(s, "await {} ms (driver)", show_ms(*us)),
            What::LockWait { stmt, budget_us } => write!(
                s,
                "{}: database locked, waiting (budget {} ms)",
                stmt.name(),
                show_ms(*budget_us)
            ),
            What::StillLocked { stmt, waited_us } => {
                write!(s, "{}: still locked after {} ms", stmt.name(), show_ms(*waited_us))
            }
            What::LockedAtOnce { stmt, snapshot: false } => write!(
                s,
                "{}: database is locked, and SQLite does not wait: this transaction has read \
                 and another connection holds the write lock",
                stmt.name()
            ),
            What::LockedAtOnce { stmt, snapshot: true } => write!(
                s,
                "{}: database is locked (BUSY_SNAPSHOT): another connection committed since \
                 this transaction read",
                stmt.name()
            ),
            What::PoolWait => write!(s, "waiting for a pooled connection"),
            What::PoolExhausted { waited_us } => {
                write!(s, "no pooled connection after {} ms", show_ms(*waited_us))
            }
            What::SqlError { stmt, error } => write!(s, "{}: error: {error}", stmt.name()),
            What::Begin { sql } => write!(s, "{sql}"),
            What::Commit => write!(s, "COMMIT"),
            What::CommitNothingWritten => write!(s, "COMMIT (nothing written)"),
            What::Rollback => write!(s, "ROLLBACK"),
            What::LookupMiss => write!(s, "lookup: miss"),
            What::Mismatch { status } => {
                write!(s, "lookup: hit with a different fingerprint → {status}")
            }
            What::InFlight { status } => write!(s, "lookup: original still in progress → {status}"),
            What::WaitingForOriginal => write!(s, "lookup: original in progress, waiting for it"),
            What::HitCompleted { status } => {
                write!(s, "lookup: hit on a completed request → {status}")
            }
            What::Replayed { status } => write!(s, "lookup: hit → replay {status}"),
            What::Claimed => write!(s, "claim: key claimed (in-progress)"),
            What::ClaimUniqueFailed => write!(s, "claim: unique constraint failed"),
            What::TookOver => write!(s, "claim: took over a claim whose lease expired"),
            What::AlreadyClaimed => write!(s, "claim: key already claimed"),
            What::ClaimGone => write!(s, "claim: conflict, but the record is gone"),
            What::RowInserted { row } => write!(s, "insert-row: row {row}"),
            What::RecoveryPointSaved { point } => write!(s, "recovery point `{point}` saved"),
            What::Resumed { point, row } => match row {
                Some(r) => write!(s, "resumed after recovery point `{point}` (row {r})"),
                None => write!(s, "resumed after recovery point `{point}`"),
            },
            What::CompleterTookOver { intent, key } => write!(
                s,
                "took over the abandoned claim of intent {} (key {})",
                crate::text::printable(intent),
                crate::text::printable(key)
            ),
            What::CompleterFinished { status } => {
                write!(s, "finished the abandoned claim: outcome {status}")
            }
            What::CompleterPastHorizon { intent, key } => write!(
                s,
                "the abandoned claim of intent {} (key {}) is past the horizon; left alone",
                crate::text::printable(intent),
                crate::text::printable(key)
            ),
            What::DocUpdated { doc, version, value } => {
                write!(s, "update-doc: {doc} = {value}, now version {version}")
            }
            What::DocDeleted { doc, version: 0 } => {
                write!(s, "update-doc: {doc} was already gone → 204 (idempotent delete)")
            }
            What::DocDeleted { doc, version } => {
                write!(s, "update-doc: {doc} deleted, now version {version}")
            }
            What::DocRefused { doc, status: 428, .. } => {
                write!(s, "update-doc: no If-Match or X-Client-Time for {doc}, one required → 428")
            }
            What::DocIgnored { doc, stamp, current } => write!(
                s,
                "update-doc: client time {stamp} ms is not newer than {doc}'s stamp: ignored, \
                 still version {current} → 200"
            ),
            What::DocRefused { doc, status, if_match, current: Some(current) } => write!(
                s,
                "update-doc: If-Match \"{}\" but {doc} is at version {current} → {status}",
                if_match.unwrap_or(0)
            ),
            What::DocRefused { doc, status, .. } => {
                write!(s, "update-doc: no document {doc} → {status}")
            }
            What::StatusApplied { resource, status, applied: true } => {
                write!(s, "apply-status: {resource} is now {status}")
            }
            What::StatusApplied { resource, status, applied: false } => {
                write!(s, "apply-status: {resource} already past {status} (ignored)")
            }
            What::ProcessStalled { us } => {
                write!(s, "process stalls {} ms (none of its tasks runs)", show_ms(*us))
            }
            What::ProcessResumed => write!(s, "process runs again"),
            What::ClaimKept => write!(s, "the save failed: claim left in progress"),
            What::RollbackOthers => {
                write!(s, "ROLLBACK (of the transaction another request began on this connection)")
            }
            What::Declined { intent } => write!(
                s,
                "fault: the provider declines the call for intent {} (nothing done)",
                crate::text::printable(intent)
            ),
            What::StockTaken { item, units } => write!(s, "take-stock: {units} of {item}"),
            What::SoldOut { item } => {
                write!(s, "take-stock: {item} sold out (CHECK units >= 0) → 422")
            }
            What::TransactionRetried { attempt, of } => write!(
                s,
                "database busy: ROLLBACK, the transaction runs again (retry {attempt} of {of})"
            ),
            What::ClaimUnlocked { n } => write!(s, "unlock: {n} claim unlocked, kept for a retry"),
            What::MarkedFailed { n } => write!(s, "mark-failed: {n} claim kept as failed"),
            What::FoundFailed => write!(s, "lookup: a failed record, same payload: run again"),
            What::KeyReleased { n } => {
                write!(s, "release-key: {n} record deleted by key (whoever owned it)")
            }
            What::RateLimited { allowed: true } => write!(s, "rate-limit: token taken"),
            What::RateLimited { allowed: false } => write!(s, "rate-limit: no token left → 429"),
            What::DeadlineKilled => {
                write!(s, "deadline: the function timed out and is killed (no error path) → 502")
            }
            What::LocalCacheHit => write!(s, "lookup: found in the process's local cache"),
            What::InFlightIgnored => {
                write!(s, "lookup: in progress, ignored (in_flight = proceed)")
            }
            What::KeyExpired { intent } => write!(
                s,
                "lookup: the record (intent {}) expired; deleted, read as absent",
                crate::text::printable(intent)
            ),
            What::ExpiredGone => write!(s, "lookup: the record expired → 410 Gone"),
            What::RetookFailed => write!(s, "claim: took back the failed record"),
            What::RowClash { row } => {
                write!(s, "insert-row: the business key is taken (UNIQUE), by row {row}")
            }
            What::RowFound { row } => {
                write!(s, "check-row: the business key is taken, by row {row}")
            }
            What::RowAbsent => write!(s, "check-row: no row with the business key"),
            What::RowTaken { row } => {
                write!(
                    s,
                    "insert-row: row {row} holds the key, not yet processed: process it again"
                )
            }
            What::RowProcessed { row } => write!(s, "mark-processed: row {row}"),
            What::OutboxQueued { message } => write!(s, "outbox: message {message} queued"),
            What::OutboxMarkedSent { message } => {
                write!(s, "outbox: message {message} marked sent")
            }
            What::SaveRefused { fencing } => write!(s, "save-response: {}", save_refused(*fencing)),
            What::ClaimCompleted { status } => {
                write!(s, "save-response: claim completed with {status}")
            }
            What::Stored { status } => write!(s, "save-response: stored {status}"),
            What::EffectCall { intent } => write!(s, "effect for intent {intent}"),
            What::EffectUnacknowledged => write!(s, "effect: no acknowledgement"),
            What::ProviderError => write!(s, "effect: the provider answered an error"),
            What::CommitLost { committed } => write!(
                s,
                "fault: connection lost during COMMIT (it {}); the server cannot tell",
                if *committed { "committed" } else { "rolled back" }
            ),
            What::CacheRefused => write!(s, "fault: the cache refuses the connection"),
            What::CacheUnreachable => write!(s, "fault: the cache is cut off by the partition"),
            What::CacheRestarted => write!(s, "fault: the cache restarted empty"),
            What::CacheEvicted => {
                write!(s, "fault: the key was evicted from the cache before its TTL")
            }
            What::CacheReplyLost => {
                write!(s, "fault: the cache applied the operation, its reply is lost")
            }
            What::Injected { point, action } => write!(s, "@{point}: {action}"),
            What::CrashFault(site) => match site {
                CrashSite::BeforeStep(step) => write!(s, "fault: crash before {step}"),
                CrashSite::BeforeSend => write!(s, "fault: crash before send"),
                CrashSite::BetweenSendAndMark => write!(s, "fault: crash between send and mark"),
            },
            What::Failed { why } => write!(s, "failed: {why}"),
            What::ClaimReleased { n } => write!(s, "release-claim: {n} claim deleted"),
            What::CannotBind { error } => write!(s, "cannot bind: {error}"),
            What::CannotOpenDatabase { error } => write!(s, "cannot open the database: {error}"),
            What::ProcessCrashed => write!(s, "process crashed"),
            What::ProcessRestarted => write!(s, "process restarted"),
            What::ClockOffset { us } => write!(
                s,
                "clock runs {}{} ms off the database's",
                if *us < 0 { "-" } else { "+" },
                show_ms(us.unsigned_abs())
            ),
            What::ProviderErrorAfterSuccess => {
                write!(s, "fault: the provider answers an error, though it performed the effect")
            }
            What::ProviderAnswerLost => {
                write!(s, "fault: the provider's answer is lost (it performed the effect)")
            }
            What::EffectCallLost => write!(s, "fault: the effect call never reaches the provider"),
            What::EffectCallDuplicated => write!(s, "fault: the provider receives the call twice"),
            What::EffectApplied { intent, from } => {
                write!(s, "effect for intent {intent} (from {})", self.actor(*from))
            }
            What::EffectDeduplicated { intent, from } => write!(
                s,
                "duplicate delivery for intent {intent} ignored (from {})",
                self.actor(*from)
            ),
            What::Partitioned { process } => {
                write!(s, "fault: server-{} partitioned from the network", process + 1)
            }
            What::Reconnected { process } => write!(s, "server-{} reconnected", process + 1),
            What::Quiescent => write!(s, "quiescent"),
            What::ActionNoDatabase { action, error } => {
                write!(s, "{}: cannot open database: {error}", self.action(*action))
            }
            What::LockHeld { action } => write!(
                s,
                "{}: another connection holds the write lock (BEGIN IMMEDIATE)",
                self.action(*action)
            ),
            What::LockReleased { action } => {
                write!(s, "{}: write lock released", self.action(*action))
            }
            What::LockNotTaken { action } => {
                write!(s, "{}: could not take the write lock", self.action(*action))
            }
            What::DeleteKeysFailed { action, error } => {
                write!(s, "{}: cannot delete keys: {error}", self.action(*action))
            }
            What::KeysDeleted { action, n } => {
                write!(s, "{}: deleted {n} stored key(s)", self.action(*action))
            }
            What::Collected { n, retention_us } => {
                write!(s, "gc: deleted {n} key(s) older than {} ms", show_ms(*retention_us))
            }
            What::Probe { req, rows, keys } => {
                write!(s, "after {}: {rows} row(s), {keys} stored key(s)", self.request(*req))
            }
            What::ProbeGaveUp { req } => write!(
                s,
                "after {}: probe gave up (the database stayed locked)",
                self.request(*req)
            ),
        }
    }
}

/// Why a completion under a claim was refused.
pub fn save_refused(fencing: bool) -> &'static str {
    if fencing {
        "the claim is gone or no longer ours (fencing token)"
    } else {
        "the claim record is gone"
    }
}

/// `first`, `burst[3]`, `first/2` (attempt 2), `burst[3]/2`.
pub fn attempt_label(id: &str, copies: u32, copy: u32, attempt: u32) -> String {
    let mut s = id.to_string();
    if copies > 1 {
        let _ = write!(s, "[{copy}]");
    }
    if attempt > 1 {
        let _ = write!(s, "/{attempt}");
    }
    s
}

/// The rows and key records committed after each event, as the state column shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateTrack {
    /// After event i: (committed rows, key records done, key records in progress).
    pub after: Vec<(u64, u64, u64)>,
}

impl StateTrack {
    pub fn of(h: &History) -> StateTrack {
        #[derive(Default, Clone)]
        struct Pending {
            in_tx: bool,
            rows: u64,
            done: i64,
            claims: i64,
        }
        let (mut rows, mut done, mut claims) = (0u64, 0i64, 0i64);
        let mut pending: BTreeMap<(u32, Option<Actor>), Pending> = BTreeMap::new();
        let mut after = Vec::with_capacity(h.events.len());
        for e in &h.events {
            let node = match e.node {
                Node::Server(p) => p,
                _ => u32::MAX,
            };
            let key = (node, e.who);
            let p = pending.entry(key).or_default();
            match &e.what {
                What::Begin { .. } => *p = Pending { in_tx: true, ..Default::default() },
                What::Commit => {
                    rows += p.rows;
                    done += p.done;
                    claims += p.claims;
                    *p = Pending::default();
                }
                What::Rollback | What::CommitLost { committed: false } => *p = Pending::default(),
                What::CommitLost { committed: true } => {
                    rows += p.rows;
                    done += p.done;
                    claims += p.claims;
                    *p = Pending::default();
                }
                What::RowInserted { .. } if p.in_tx => p.rows += 1,
                What::RowInserted { .. } => rows += 1,
                What::Claimed | What::TookOver | What::RetookFailed if p.in_tx => p.claims += 1,
                What::Claimed | What::RetookFailed => claims += 1,
                What::Stored { .. } if p.in_tx => p.done += 1,
                What::Stored { .. } => done += 1,
                What::ClaimCompleted { .. } if p.in_tx => {
                    p.done += 1;
                    p.claims -= 1;
                }
                What::ClaimCompleted { .. } => {
                    done += 1;
                    claims -= 1;
                }
                What::ClaimReleased { n } | What::MarkedFailed { n } | What::KeyReleased { n } => {
                    claims -= *n as i64
                }
                What::KeysDeleted { .. } => {
                    done = 0;
                    claims = 0;
                }
                What::Collected { n, .. } => done -= *n as i64,
                What::KeyExpired { .. } => done -= 1,
                What::ProcessCrashed => {
                    pending.retain(|(n, _), _| *n != node);
                }
                _ => {}
            }
            after.push((rows, done.max(0) as u64, claims.max(0) as u64));
        }
        StateTrack { after }
    }

    /// `rows 1 · keys 1 done` for event i, if it changed the state.
    pub fn change(&self, i: usize) -> Option<String> {
        let now = self.after.get(i)?;
        let before = if i == 0 { &(0, 0, 0) } else { &self.after[i - 1] };
        (now != before).then(|| {
            let mut s = format!("rows {} · keys {} done", now.0, now.1);
            if now.2 > 0 {
                let _ = write!(s, ", {} in progress", now.2);
            }
            s
        })
    }
}

/// The typed events of one run, with the names they refer to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    pub events: Vec<Event>,
    pub legend: Legend,
}

impl History {
    /// The timeline, one line per event: `   12.345ms  server-1     first: lookup: miss`.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(self.events.len() * 64);
        for e in &self.events {
            let node = self.legend.node(e.node);
            // Keys and names come from files: escaped, they cannot forge a line.
            let text = crate::text::printable(&self.legend.text(e));
            let _ =
                write!(out, "{:>8}.{:03}ms  {:<12} {}", e.t_us / 1000, e.t_us % 1000, node, text);
            if let Some(to) = e.to() {
                let _ = write!(out, " → {}", self.legend.node(to));
            }
            out.push('\n');
        }
        out
    }

    /// The run as a Mermaid sequence diagram: messages as arrows, everything else as notes over
    /// the node it happened on. Client-side receipts are left out (the reply arrow shows them).
    pub fn mermaid(&self) -> String {
        let mut nodes: Vec<Node> = Vec::new();
        for e in &self.events {
            for n in std::iter::once(e.node).chain(e.to()) {
                if !nodes.contains(&n) {
                    nodes.push(n);
                }
            }
        }
        // Clients first, then servers, then the rest, each in order of appearance.
        let rank = |n: &Node| match n {
            Node::Client(_) => 0,
            Node::Server(_) => 1,
            _ => 2,
        };
        nodes.sort_by_key(rank);
        let id = |n: Node| format!("P{}", nodes.iter().position(|m| *m == n).unwrap_or(0));
        let clean = |t: &str| crate::text::printable(t).replace(';', ",").replace('#', "no.");
        let mut out = String::from("sequenceDiagram\n");
        for n in &nodes {
            let _ = writeln!(out, "    participant {} as {}", id(*n), self.legend.node(*n));
        }
        let state = StateTrack::of(self);
        let _ = writeln!(out, "    participant S as committed state");
        for (i, e) in self.events.iter().enumerate() {
            let t = format!("{}.{:03} ms", e.t_us / 1000, e.t_us % 1000);
            let text = clean(&self.legend.text(e));
            match e.to() {
                Some(to) => {
                    let _ = writeln!(out, "    {}->>{}: {text} ({t})", id(e.node), id(to));
                }
                // Receipts are the ends of arrows already drawn.
                None if matches!(e.what, What::Received { .. } | What::Arrived) => {}
                None => {
                    let _ = writeln!(out, "    Note over {}: {text} ({t})", id(e.node));
                }
            }
            if let Some(s) = state.change(i) {
                let _ = writeln!(out, "    Note over S: {s}");
            }
        }
        out
    }

    /// The hash of the typed events: equal histories give equal hashes.
    pub fn hash(&self) -> u64 {
        let mut h = TraceHasher::default();
        for e in &self.events {
            e.hash(&mut h);
        }
        h.finish()
    }
}

/// A 64-bit word-at-a-time hash (the FxHash mixing step over little-endian words, with the
/// length folded in): tiny, fast, and the same on every platform (integers are fed as
/// little-endian 64-bit words, whatever their width). It hashes the derived `Hash` of typed
/// events, so a trace hash reproduces on the same build. Not for adversarial input.
#[derive(Debug, Clone)]
pub struct TraceHasher(pub u64);

impl Default for TraceHasher {
    fn default() -> Self {
        TraceHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl TraceHasher {
    const K: u64 = 0x517c_c1b7_2722_0a95;

    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::K);
    }
}

impl Hasher for TraceHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.mix(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        self.mix(u64::from_le_bytes(last));
        self.mix(bytes.len() as u64);
    }

    fn write_u8(&mut self, i: u8) {
        self.mix(i as u64);
    }
    fn write_u16(&mut self, i: u16) {
        self.mix(i as u64);
    }
    fn write_u32(&mut self, i: u32) {
        self.mix(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        self.mix(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.mix(i as u64);
    }
    fn write_i64(&mut self, i: i64) {
        self.mix(i as u64);
    }
    fn write_isize(&mut self, i: isize) {
        self.mix(i as i64 as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn legend() -> Legend {
        Legend { requests: vec![("a".into(), 1), ("b".into(), 2)], actions: vec![] }
    }

    fn ev(t_us: u64, node: Node, what: What) -> Event {
        Event { t_us, node, who: None, what }
    }

    #[test]
    fn hash_sees_every_field() {
        let h = |events: Vec<Event>| History { events, legend: legend() }.hash();
        let a = h(vec![ev(1, Node::Server(0), What::LookupMiss)]);
        assert_ne!(a, h(vec![ev(2, Node::Server(0), What::LookupMiss)]));
        assert_ne!(a, h(vec![ev(1, Node::Server(1), What::LookupMiss)]));
        assert_ne!(a, h(vec![ev(1, Node::Server(0), What::Claimed)]));
        let who = Some(Actor::Attempt { req: 0, copy: 0, attempt: 1 });
        assert_ne!(a, h(vec![Event { who, ..ev(1, Node::Server(0), What::LookupMiss) }]));
        assert_ne!(
            h(vec![ev(1, Node::Server(0), What::RowInserted { row: 1 })]),
            h(vec![ev(1, Node::Server(0), What::RowInserted { row: 2 })])
        );
    }

    #[test]
    fn render_and_mermaid() {
        let sent = Event {
            t_us: 1,
            node: Node::Client(1),
            who: Some(Actor::Attempt { req: 1, copy: 1, attempt: 2 }),
            what: What::Sent {
                to: 0,
                method: "POST".into(),
                path: "/api/orders".into(),
                key: Some("k;1".into()),
            },
        };
        let h = History { events: vec![sent], legend: legend() };
        assert_eq!(
            h.render(),
            "       0.001ms  client-b     b[1]/2: POST /api/orders key=k;1 → server-1\n"
        );
        assert_eq!(
            h.mermaid(),
            "sequenceDiagram\n    participant P0 as client-b\n    participant P1 as server-1\n    \
             participant S as committed state\n    \
             P0->>P1: b[1]/2: POST /api/orders key=k,1 (0.001 ms)\n"
        );
    }
}
