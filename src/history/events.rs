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
    /// A request's own code before its first statement, on a loop in phases (`cold`: the
    /// process's first request).
    HandlerCode {
        us: u64,
        cold: bool,
    },
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
