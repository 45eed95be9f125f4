//! The typed events of one run: where (`Node`), who (`Actor`), what (`What`) and when
//! (`Event`), with the small enums they carry (`Stmt`, `Refusal`, `CrashSite`).

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
    Attempt {
        /// The request (sim order).
        req: u32,
        /// The copy (0-based).
        copy: u32,
        /// The attempt (1-based).
        attempt: u32,
    },
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
    /// `BEGIN` (the `begin` step).
    Begin,
    /// `COMMIT` (the `commit` step).
    Commit,
    /// The commit that ends a transaction after a lookup hit (nothing written).
    CommitReadOnly,
    /// The key lookup.
    Lookup,
    /// The claim (insert of an in-progress record).
    Claim,
    /// `insert-row`.
    InsertRow,
    /// `save-response`.
    SaveResponse,
    /// `outbox`: queueing a message.
    Outbox,
    /// `release-claim`.
    ReleaseClaim,
    /// The relay reading unsent outbox messages.
    Relay,
    /// The relay marking a message sent.
    RelayMark,
    /// `recovery-point:NAME`: the claim remembers the phase reached.
    RecoveryPoint,
    /// `on_error = ["unlock"]`: the claim's lock is released, the record kept.
    Unlock,
    /// `take-stock`.
    TakeStock,
    /// `apply-status`.
    ApplyStatus,
    /// `update-doc`.
    UpdateDoc,
    /// `on_error = ["mark-failed"]`: the claim is kept as failed.
    MarkFailed,
    /// `check-row`.
    CheckRow,
    /// `mark-processed`.
    MarkProcessed,
}

impl Stmt {
    /// The statement's name in trace lines (the step's name; `COMMIT` after a lookup hit).
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
        /// The status (404, 401 or 400).
        status: u16,
        /// The error body sent.
        body: String,
    },
    /// No `Idempotency-Key` and the model requires one (400).
    MissingKey,
    /// The key is longer than `[key] max_len` (400).
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
        /// The server process it goes to (0-based).
        to: u32,
        /// The HTTP method.
        method: String,
        /// The path.
        path: String,
        /// The `Idempotency-Key` sent, if any.
        key: Option<String>,
    },
    /// A reply received.
    Received {
        /// The reply's status.
        status: u16,
        /// The reply's body.
        body: String,
        /// It carried the model's replay marker.
        replayed: bool,
    },
    /// No reply within the client's timeout.
    TransportFailure {
        /// The timeout that passed (µs).
        timeout_us: u64,
    },
    /// The request's retry horizon passed: no further attempt.
    GaveUp {
        /// The horizon (µs after the first attempt).
        horizon_us: u64,
    },
    // -- the network
    /// A request lost in the network (fault).
    RequestDropped,
    /// A proxy or client library resends the request after a stall.
    RequestDuplicated {
        /// The stall before the resend (µs).
        after_us: u64,
    },
    /// A reply lost in the network (fault).
    ReplyDropped {
        /// The lost reply's status.
        status: u16,
    },
    /// A message held back by an extra delay (fault).
    Delayed {
        /// The extra delay (µs).
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
    /// The attempt's connection woke its idle server process, which took the client's core
    /// inside `connect` (the stack's `wake_preempts`): the client writes only once it gets it
    /// back, after its gap.
    CoreTaken,
    /// The client of a preempted connection got its core back (the loop's iteration ran).
    CoreReturned,
    /// A request reached its server process (the end of a `Sent` arrow).
    Arrived,
    /// A reply sent to the client of request `to` (a message).
    Reply {
        /// The request's client (sim order).
        to: u32,
        /// The status.
        status: u16,
        /// The body.
        body: String,
    },
    /// A fresh success's reply lost after the server committed (fault).
    ReplyLostAfterCommit,
    /// The process dropped the connection: the reply is never sent.
    ConnectionDropped {
        /// The status that was never sent.
        status: u16,
    },
    /// The fixed front half or the key checks refused the request before any step ran.
    Rejected(Refusal),
    /// A request's own code before its first statement, on a loop in phases (`cold`: the
    /// process's first request).
    HandlerCode {
        /// The time the code takes (µs).
        us: u64,
        /// The process's first request (cold code).
        cold: bool,
    },
    /// The first run of a kind of statement in a fresh process: its code runs cold first (the
    /// stack's `first_statement_ms`).
    ColdStatement {
        /// The statement.
        stmt: Stmt,
        /// The extra time (µs).
        us: u64,
    },
    /// An await in the driver (0 µs: one event-loop turn).
    DriverAwait {
        /// The await's latency (µs).
        us: u64,
    },
    /// A statement found the database locked and waits (on SQLite's busy schedule).
    LockWait {
        /// The statement.
        stmt: Stmt,
        /// How long it may wait (µs).
        budget_us: u64,
    },
    /// The statement's wait budget ran out with the database still locked.
    StillLocked {
        /// The statement.
        stmt: Stmt,
        /// How long it waited (µs).
        waited_us: u64,
    },
    /// `SQLITE_BUSY` that SQLite does not wait out (it does not call its busy handler): a
    /// transaction that has read cannot take the write lock (`snapshot`: in WAL, its snapshot
    /// is stale).
    LockedAtOnce {
        /// The statement.
        stmt: Stmt,
        /// In WAL, the transaction's snapshot is stale (`SQLITE_BUSY_SNAPSHOT`).
        snapshot: bool,
    },
    /// Waiting for one of the process's pooled connections.
    PoolWait,
    /// No pooled connection came free within the wait budget.
    PoolExhausted {
        /// How long the request waited (µs).
        waited_us: u64,
    },
    /// A statement failed with an SQLite error.
    SqlError {
        /// The statement.
        stmt: Stmt,
        /// SQLite's message.
        error: String,
    },
    /// `BEGIN DEFERRED | IMMEDIATE | EXCLUSIVE` (the SQL).
    Begin {
        /// The statement as run.
        sql: &'static str,
    },
    /// `COMMIT` of a transaction.
    Commit,
    /// `COMMIT` of a transaction that wrote nothing.
    CommitNothingWritten,
    /// `ROLLBACK` of a transaction.
    Rollback,
    /// The lookup found no record for the key.
    LookupMiss,
    /// The lookup found the key with a different fingerprint.
    Mismatch {
        /// The status answered (the model's `on_mismatch`).
        status: u16,
    },
    /// The lookup found the original still in progress and answers at once.
    InFlight {
        /// The status answered (the model's `in_flight`).
        status: u16,
    },
    /// The lookup found the original in progress and waits for it to finish.
    WaitingForOriginal,
    /// The lookup found a completed record (a model that does not replay the stored reply).
    HitCompleted {
        /// The status answered.
        status: u16,
    },
    /// The lookup found a completed record and replays its stored reply.
    Replayed {
        /// The replayed status.
        status: u16,
    },
    /// The claim took the key (an in-progress record).
    Claimed,
    /// The claim's insert met the key's unique constraint.
    ClaimUniqueFailed,
    /// The claim took over a record whose lease had expired.
    TookOver,
    /// The key is already claimed by another execution.
    AlreadyClaimed,
    /// The claim conflicted, but the record was gone when read back.
    ClaimGone,
    /// `insert-row` inserted the business row.
    RowInserted {
        /// The row's id.
        row: i64,
    },
    /// `outbox` queued a message.
    OutboxQueued {
        /// The message's id.
        message: i64,
    },
    /// The relay marked a message sent.
    OutboxMarkedSent {
        /// The message's id.
        message: i64,
    },
    /// `fencing`: the completion was refused by the owner token check.
    SaveRefused {
        /// Refused by the owner-token check (else the claim was no longer there to complete).
        fencing: bool,
    },
    /// `save-response` completed the request's claim with its outcome.
    ClaimCompleted {
        /// The stored status.
        status: u16,
    },
    /// `save-response` stored the outcome (no claim held).
    Stored {
        /// The stored status.
        status: u16,
    },
    /// An effect call to the receiver (a message).
    EffectCall {
        /// The intent the effect is for.
        intent: String,
    },
    /// The effect call got no answer within its timeout.
    EffectUnacknowledged,
    /// The provider answered an error (the server cannot know whether it performed it).
    ProviderError,
    /// The connection to the database was lost around COMMIT.
    CommitLost {
        /// The COMMIT took effect (the server cannot tell).
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
    /// An `[[inject]]` fired at a point of the program.
    Injected {
        /// The point's name (without the `@`).
        point: String,
        /// The injected action's name (`fail`, `crash` …).
        action: &'static str,
    },
    /// A random crash fault struck the process.
    CrashFault(CrashSite),
    /// The execution failed; the error path runs.
    Failed {
        /// Why, in words.
        why: String,
    },
    /// `release-claim` deleted the request's claim.
    ClaimReleased {
        /// Records deleted.
        n: usize,
    },
    /// The process could not start serving.
    CannotBind {
        /// The error.
        error: String,
    },
    /// The process could not open its database connection.
    CannotOpenDatabase {
        /// The error.
        error: String,
    },
    /// The process crashed (a fault, an injection); its connections are reset.
    ProcessCrashed,
    /// The process restarted after a crash.
    ProcessRestarted,
    /// The process's wall clock runs off the database's by this much (µs; drawn at start).
    ClockOffset {
        /// The offset (µs; negative: behind).
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
    /// The receiver performed an effect.
    EffectApplied {
        /// The intent it is for.
        intent: String,
        /// Who called (an attempt, the relay, the completer).
        from: Actor,
    },
    /// The receiver ignored a delivery whose dedupe key it had seen.
    EffectDeduplicated {
        /// The intent it is for.
        intent: String,
        /// Who called.
        from: Actor,
    },
    // -- the control node
    /// A partition window began: the process is cut off.
    Partitioned {
        /// The process (0-based).
        process: u32,
    },
    /// The partition window ended.
    Reconnected {
        /// The process (0-based).
        process: u32,
    },
    /// Nothing is left to run: the run is over.
    Quiescent,
    /// An action could not open the database.
    ActionNoDatabase {
        /// The action (sim order).
        action: u32,
        /// The error.
        error: String,
    },
    /// A `hold-lock` action holds the write lock (`BEGIN IMMEDIATE`).
    LockHeld {
        /// The action (sim order).
        action: u32,
    },
    /// The `hold-lock` action released the write lock.
    LockReleased {
        /// The action (sim order).
        action: u32,
    },
    /// The `hold-lock` action could not take the write lock.
    LockNotTaken {
        /// The action (sim order).
        action: u32,
    },
    /// A `delete-keys` action failed.
    DeleteKeysFailed {
        /// The action (sim order).
        action: u32,
        /// The error.
        error: String,
    },
    /// A `delete-keys` action deleted every stored key.
    KeysDeleted {
        /// The action (sim order).
        action: u32,
        /// Records deleted.
        n: usize,
    },
    /// The key collector deleted expired keys.
    Collected {
        /// Records deleted.
        n: usize,
        /// The retention they were older than (µs).
        retention_us: u64,
    },
    /// The observer's counts right after a request finished (for `rows_after`, `keys_after`).
    Probe {
        /// The request (sim order).
        req: u32,
        /// Business rows.
        rows: u64,
        /// Stored key records.
        keys: u64,
    },
    /// The observer's probe gave up: the database stayed locked.
    ProbeGaveUp {
        /// The request (sim order).
        req: u32,
    },
    /// `insert-row` met the rows table's UNIQUE business key, held by row `row`.
    RowClash {
        /// The row holding the key.
        row: i64,
    },
    /// `check-row`: a row with the business key exists (the first, `row`).
    RowFound {
        /// The first row holding the key.
        row: i64,
    },
    /// `check-row`: no row with the business key (yet).
    RowAbsent,
    /// `on_clash = "unprocessed"`: the row holding the key is not marked processed; this
    /// request takes it as its own and goes on.
    RowTaken {
        /// The row holding the key.
        row: i64,
    },
    /// `mark-processed`: the row is marked handled.
    RowProcessed {
        /// The row.
        row: i64,
    },
    /// The claim now remembers this recovery point (and the row, if any).
    RecoveryPointSaved {
        /// The point's name.
        point: String,
    },
    /// A takeover found a recovery point: the program continues after it.
    Resumed {
        /// The recovery point's name.
        point: String,
        /// The row the claim remembered, if any.
        row: Option<i64>,
    },
    /// The error path released the claim's lock and kept the record (`n` records).
    ClaimUnlocked {
        /// Records unlocked.
        n: usize,
    },
    /// The error path kept the claim as a `failed` record (`n` records).
    MarkedFailed {
        /// Records marked.
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
        /// A token was taken (false: 429).
        allowed: bool,
    },
    /// `on_error = ["release-key"]`: the key's record deleted by key alone (`n` records).
    KeyReleased {
        /// Records deleted.
        n: usize,
    },
    /// `expiry = "on-read"`: the record read had expired; deleted, it reads as absent.
    KeyExpired {
        /// The intent of the request that made the record.
        intent: String,
    },
    /// `on_expired = 410`: the record read had expired; answered 410 Gone.
    ExpiredGone,
    /// A claim took a `failed` record back (compare-and-set on the state).
    RetookFailed,
    /// The completer took over an abandoned claim to finish it.
    CompleterTookOver {
        /// The intent of the claim's request.
        intent: String,
        /// The claim's key.
        key: String,
    },
    /// The completer finished a claim's program: its outcome is stored.
    CompleterFinished {
        /// The stored status.
        status: u16,
    },
    /// The completer left a claim older than its horizon alone.
    CompleterPastHorizon {
        /// The intent of the claim's request.
        intent: String,
        /// The claim's key.
        key: String,
    },
    /// `retry-transaction`: the database was busy; rolled back, running the transaction again.
    TransactionRetried {
        /// This retry's number (1-based).
        attempt: u32,
        /// The retries allowed (`transaction_retries`).
        of: u32,
    },
    /// `take-stock`: `units` taken from `item`.
    StockTaken {
        /// The item.
        item: String,
        /// Units taken.
        units: i64,
    },
    /// `take-stock`: the CHECK refused it: sold out.
    SoldOut {
        /// The item.
        item: String,
    },
    /// The provider declined the call (a business refusal; nothing done).
    Declined {
        /// The intent the call was for.
        intent: String,
    },
    /// `update-doc`: the document's value set; it is now at `version`.
    DocUpdated {
        /// The document's id.
        doc: String,
        /// Its version after the write.
        version: i64,
        /// The value written.
        value: i64,
    },
    /// `update-doc` on a DELETE: the document is gone (soft-deleted at `version`; 0: it was
    /// already gone and the model answers 204 anyway).
    DocDeleted {
        /// The document's id.
        doc: String,
        /// The version the delete made (0: already gone).
        version: i64,
    },
    /// `update-doc` under `check = "client-time"`: the client's stamp is not newer than the
    /// stored one; nothing written, answered 200 anyway.
    DocIgnored {
        /// The document's id.
        doc: String,
        /// The client's time stamp (ms).
        stamp: i64,
        /// The document's version, unchanged.
        current: i64,
    },
    /// `update-doc` refused: 412 (the `If-Match` is not the current version), 428 (no
    /// `If-Match` and one is required) or 404 (no such document: `current` is None).
    DocRefused {
        /// The document's id.
        doc: String,
        /// The status answered (412, 428 or 404).
        status: u16,
        /// The `If-Match` version sent, if any.
        if_match: Option<i64>,
        /// The document's current version (None: no such document).
        current: Option<i64>,
    },
    /// `apply-status`: the resource's status set (or left, `applied = false`: not past it).
    StatusApplied {
        /// The resource's id.
        resource: String,
        /// The status the event reports.
        status: &'static str,
        /// The status changed (false: the stored one is at or past it).
        applied: bool,
    },
    // (Variants added after this line keep the discriminants, and so the trace hashes, of
    // runs that never emit them.)
    /// An injected `stall`: the whole process stops for `us` (none of its tasks runs).
    ProcessStalled {
        /// The stall (µs).
        us: u64,
    },
    /// The stalled process runs again.
    ProcessResumed,
    /// `on_failed_save = "keep"`: the save of the outcome failed; the claim is left as it is.
    ClaimKept,
    /// `on_error = ["rollback-any"]`: the error path's ROLLBACK ended a transaction another
    /// request of the process began on the shared connection.
    RollbackOthers,
    /// An `await` step on a thread per request with a synchronous driver: there is no event
    /// loop to yield to; other threads run meanwhile anyway.
    AwaitOnThread,
    /// `clean_up_on`: a failure of a kind the design does not clean up after (an exception
    /// that escapes its code): the claim is left in progress. (Last: a variant's position is
    /// part of every trace hash.)
    ClaimLeftAfter {
        /// The kind of failure, as `clean_up_on` names it.
        failure: &'static str,
    },
}

/// One event. `t_us` is simulated time since the run started, in microseconds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Event {
    /// Simulated time since the run started (µs).
    pub t_us: u64,
    /// Where it happened.
    pub node: Node,
    /// Who it is about (None: the node itself).
    pub who: Option<Actor>,
    /// What happened.
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

impl Event {
    /// The fault this event is the firing of, named as the sim's `[faults]` knob it comes from
    /// (`reply_drop`, `crash`, `cache.evict` …) or as its `[[inject]]` (`@point:action`); None
    /// for an event that is not a fault. Reports count these per run ("fired"), so a rate is
    /// never read without knowing whether its fault happened at all.
    pub fn fault(&self) -> Option<std::borrow::Cow<'static, str>> {
        use std::borrow::Cow::Borrowed;
        Some(match &self.what {
            What::Delayed { .. } if self.node == Node::Receiver => Borrowed("effects.delay"),
            What::RequestDropped => Borrowed("request_drop"),
            What::ReplyDropped { .. } => Borrowed("reply_drop"),
            What::ReplyLostAfterCommit => Borrowed("reply_drop_after_commit"),
            What::RequestDuplicated { .. } => Borrowed("duplicate"),
            What::Delayed { .. } => Borrowed("delay"),
            What::CrashFault(_) => Borrowed("crash"),
            What::CommitLost { .. } => Borrowed("commit_lost"),
            What::EffectCallLost => Borrowed("effects.drop"),
            What::ProviderAnswerLost => Borrowed("effects.ack_drop"),
            What::EffectCallDuplicated => Borrowed("effects.duplicate"),
            What::ProviderErrorAfterSuccess => Borrowed("effects.error_after_success"),
            What::Declined { .. } => Borrowed("effects.decline"),
            What::CacheRefused => Borrowed("cache.unavailable"),
            What::CacheEvicted => Borrowed("cache.evict"),
            What::CacheRestarted => Borrowed("cache.restart"),
            What::CacheReplyLost => Borrowed("cache.reply_drop"),
            What::Partitioned { .. } => Borrowed("partition"),
            What::Injected { point, action } => {
                std::borrow::Cow::Owned(format!("@{point}:{action}"))
            }
            _ => return None,
        })
    }
}
