//! The model's types: `Model` and its parts (key policy, driver, error path, rows), the closed
//! choices a model file names, and the questions asked of a loaded model.

use std::path::PathBuf;

use super::Step;
pub use super::dist::Dist;

/// `[updates] check`: what an `update-doc` step does with `If-Match`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VersionCheck {
    /// Last write wins: `If-Match` is ignored.
    #[default]
    None,
    /// A sent `If-Match` must name the current version (else 412); a blind write goes through.
    IfMatch,
    /// `If-Match` is required (428 without it) and must name the current version (412).
    Required,
    /// Versions stamped with the client's clock (`X-Client-Time`, 428 without it): a write
    /// whose stamp is not newer than the stored one is ignored and still answered 200 (a
    /// last-writer-wins register).
    ClientTime,
}

/// Where key records live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyStore {
    /// The `keys` table of the shared SQLite database (inside transactions).
    Sqlite,
    /// A separate TTL cache (Redis-like) shared by all processes: every operation is a network
    /// round trip, records expire after `retention_ms`, nothing is transactional.
    Cache,
    /// Each process's own memory: lost when the process restarts.
    Memory,
}

/// What a hit on a completed record answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// The stored status and body, with the replay marker.
    Stored,
    /// This status (e.g. 409): the client must look the result up elsewhere.
    Status(u16),
}

/// What a losing `claim` (unique-insert conflict) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimConflict {
    /// Treat the existing record like a lookup hit: replay, mismatch, in flight.
    Lookup,
    /// An error → 500 (the naive mapping).
    Error,
    /// No conflict: the claim overwrites whatever record is there (a cache `SET` without
    /// `NX`, SQLite's `INSERT OR REPLACE`): every claim succeeds.
    Overwrite,
}

/// How the external effect receiver deduplicates deliveries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EffectDedupe {
    /// Every delivery is an effect.
    None,
    /// By the request's scoped Idempotency-Key (sent as the effect's own key).
    Key,
    /// By a hash of (user, operation, validated payload): merges equal intents.
    Payload,
    /// By the row id the effect belongs to.
    Row,
}

/// What the stored fingerprint is computed from (`[key] fingerprint`): a hit whose fingerprint differs is a mismatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fingerprint {
    /// SHA-256 of the validated input in canonical field order.
    Validated,
    /// SHA-256 of the raw body bytes.
    Raw,
    /// No fingerprint: a different payload under a used key replays.
    None,
    /// SHA-256 of the body parsed and serialized again in its own field order (JavaScript's
    /// `JSON.stringify(JSON.parse(body))`): field order counts, whitespace does not.
    Parsed,
}

/// What a lookup answers when it finds the key's record still in progress (`[key] in_flight`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InFlight {
    /// Answer with this status while the original is in progress.
    Status(u16),
    /// Wait (in simulated time, up to the wait budget) for the original to finish, then replay.
    Wait,
    /// Ignore the in-progress record and run the program (seed 002's Redis code only
    /// short-circuits on a stored success).
    Proceed,
}

/// Which outcomes are recorded under the key and replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreOutcomes {
    /// Only the 201 of a fresh execution is recorded (`save-response` runs only on success).
    Success,
    /// Errors (5xx) after a claim are recorded too and replayed (Stripe v1).
    All,
    /// A business refusal from a dependency (a charge declined: 402) is recorded as the key's
    /// final answer; other failures are not.
    Refusals,
    /// Any failure of the dependency call is recorded as the key's final answer: a decline as
    /// 402, a provider error or a call never answered as 503 (not a promise that a retry is
    /// safe); other failures are not (Brandur's atomic phases, rocket-rides-atomic api.rb).
    Dependency,
}

/// How a claim is leased (`[key] lease_ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lease {
    /// No lease: a claim in progress stays until it is completed or cleaned up.
    None,
    /// A claim written now is leased for this long (µs) on the claiming process's clock.
    For(u64),
    /// `lease_ms = "deadline"`: to its execution's deadline (`[driver] deadline_ms`, µs, after
    /// the request was admitted): the remaining time, as Powertools sets its in-progress
    /// expiry from the Lambda's remaining time.
    ToDeadline(u64),
}

impl Lease {
    /// The lease's length (µs), if the claim has one.
    pub fn duration_us(self) -> Option<u64> {
        match self {
            Lease::None => None,
            Lease::For(us) | Lease::ToDeadline(us) => Some(us),
        }
    }

    /// A claim can be taken over once its lease ends.
    pub fn is_some(self) -> bool {
        self != Lease::None
    }
}

/// How a SQLite record's retention is enforced (`[key] expiry`, `on_expired`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// `expiry = "collector"`: only a key collector (a sim's `gc_every_ms`) deletes it.
    Collector,
    /// `expiry = "on-read"`: each record expires `retention_us` after its creation, checked
    /// when it is read (a per-record `expires_at`), and reads as absent.
    OnRead,
    /// `on_expired = 410` too: an expired record found on read stays as a tombstone and is
    /// answered 410 Gone instead of being replaced by a new execution.
    OnReadGone,
}

impl Expiry {
    /// Checked when the record is read.
    pub fn on_read(self) -> bool {
        self != Expiry::Collector
    }
}

/// The longest key a model may accept (`key.max_len`).
pub const MAX_KEY_LEN: usize = 4096;

/// The `[key]` section: how the key is read, scoped, stored, claimed and replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPolicy {
    /// Missing key → 400.
    pub required: bool,
    /// Longer key → 400.
    pub max_len: usize,
    /// Scope fields besides the key itself: user and/or operation.
    pub scope_user: bool,
    /// The key's scope includes the tenant (`X-Tenant`).
    pub scope_tenant: bool,
    /// The key's scope includes the operation (the route).
    pub scope_operation: bool,
    /// What the fingerprint covers.
    pub fingerprint: Fingerprint,
    /// `fingerprint_fields`: the validated fingerprint covers only these input fields
    /// (Powertools' `payload_validation_jmespath`). None: all of them.
    pub fingerprint_fields: Option<Vec<String>>,
    /// `key_from`: the key is derived from these input fields (SHA-256 of them), not read from
    /// the header (Powertools' `event_key_jmespath`). None: the `Idempotency-Key` header.
    pub key_from: Option<Vec<String>>,
    /// A header key shorter than this (characters) is refused with 400.
    pub min_len: usize,
    /// `format = "uuid"`: a header key that is not a UUID is refused with 400.
    pub uuid: bool,
    /// `local_cache = true`: each process keeps the completed records it wrote or read in its
    /// own memory, in front of the store (Powertools' `use_local_cache`); lost on restart.
    pub local_cache: bool,
    /// Status for the same key with a different payload.
    pub on_mismatch: u16,
    /// What a lookup answers while the original is in progress.
    pub in_flight: InFlight,
    /// Header added to a replayed response (`Idempotent-Replayed: true`).
    pub replay_marker: String,
    /// Keys older than this (µs) are expired; a collector deletes them (None: kept forever).
    pub retention_us: Option<u64>,
    /// How `retention_us` is enforced on SQLite records (`expiry`, `on_expired`).
    pub expiry: Expiry,
    /// Where key records live (SQLite, a TTL cache, process memory).
    pub store: KeyStore,
    /// Latency of one cache operation (µs: a range drawn uniformly, or measured quantiles),
    /// for `store = "cache"`.
    pub store_latency_us: Dist,
    /// How long the server waits for a cache reply before it gives up (µs).
    pub store_timeout_us: u64,
    /// How long an in-progress claim is leased before another request may take it over.
    pub lease: Lease,
    /// A background completer in each process: every so often it takes over abandoned claims
    /// (in progress, lease expired, a recovery point with a row) and finishes their program.
    pub completer_every_us: Option<u64>,
    /// The completer leaves claims older than this alone (the provider's idempotency window:
    /// past it, finishing could charge again). None: no horizon.
    pub completer_horizon_us: Option<u64>,
    /// `completer_min_age_ms`: the completer leaves claims younger than this alone
    /// (rocket-rides-atomic's completer: created over 300 s ago).
    pub completer_min_age_us: Option<u64>,
    /// `on_store_error`: what the design answers when its key store (a cache) fails or cannot
    /// be reached. 500 (the default): an unhandled error, nothing promised; 503: the design
    /// deliberately fails closed and tells the client it is safe to retry.
    pub on_store_error: u16,
    /// `on_failed_save = "keep"`: a save of the outcome that fails leaves the claim as it is
    /// (Powertools raises and deletes nothing); `"clean-up"` (the default): the `on_error`
    /// clean-up runs as for any error after the claim.
    pub keep_on_failed_save: bool,
    /// Completion checks the claim's owner token: a stale owner's save is rejected.
    pub fencing: bool,
    /// What a hit on a completed record answers.
    pub replay: Replay,
    /// What a losing `claim` (unique-insert conflict) does.
    pub claim_conflict: ClaimConflict,
}

/// Where a request's execution yields to the process's other requests (`[driver] awaits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Awaits {
    /// Requests interleave only at `await` steps (and at network I/O).
    Explicit,
    /// An asynchronous driver: an await before every SQL statement.
    EveryStatement,
}

/// How a transaction starts (SQLite's `BEGIN DEFERRED | IMMEDIATE | EXCLUSIVE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeginMode {
    /// Locks are taken by the first read and the first write. A transaction that has read and
    /// then meets another writer gets `SQLITE_BUSY` at once (SQLite does not wait: deadlock).
    Deferred,
    /// The write lock is taken at `BEGIN` (waited for with the busy handler).
    Immediate,
    /// As immediate; in rollback-journal mode readers are kept out too.
    Exclusive,
}

impl BeginMode {
    /// The statement that begins a transaction in this mode.
    pub fn sql(self) -> &'static str {
        match self {
            BeginMode::Deferred => "BEGIN DEFERRED",
            BeginMode::Immediate => "BEGIN IMMEDIATE",
            BeginMode::Exclusive => "BEGIN EXCLUSIVE",
        }
    }
}

/// SQLite's journal mode for the run's database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Journal {
    /// The rollback journal (SQLite's default, `journal_mode = DELETE`): readers share the
    /// database with one writer until it commits, when it needs them all gone.
    Rollback,
    /// Write-ahead log: readers read a snapshot and never wait; one writer at a time; a read
    /// transaction that tries to write after another commit gets `SQLITE_BUSY_SNAPSHOT`.
    Wal,
}

impl Journal {
    /// The mode's name as written in model files and shown in output (`rollback`, `wal`).
    pub fn name(self) -> &'static str {
        match self {
            Journal::Rollback => "rollback",
            Journal::Wal => "wal",
        }
    }
}

/// Most pooled connections a process may have.
pub const MAX_POOL: u32 = 64;

/// How a server process takes in work and runs its requests' own code: the runtime of the
/// model's stack (`[runtime]` of its stack profile). One mechanism for every sim.
// Both variants are tables of measured quantiles (about 1 KiB): boxing one would make the
// runtime no longer `Copy` for no gain, a model holds one.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// Node.js's libuv event loop in phases (`kind = "event-loop"`), one per process.
    EventLoop(LoopTimes),
    /// A thread per request (`kind = "thread-per-request"`): Python's `ThreadingHTTPServer`,
    /// a thread pool; each request on its own OS thread with its own connection.
    Threads(ThreadTimes),
}

impl Runtime {
    /// The runtime in words, for report headers.
    pub fn describe(&self) -> String {
        match self {
            Runtime::EventLoop(_) => "Node.js's event loop in phases".to_string(),
            Runtime::Threads(t) if t.prefork => format!(
                "{} prefork worker process(es) sharing the socket, each one request at a time with a connection and memory of its own",
                t.threads
            ),
            Runtime::Threads(t) => {
                let pool = match t.threads {
                    0 => "a thread per request".to_string(),
                    n => format!("a pool of {n} thread(s) per process"),
                };
                match t.gil_switch_us {
                    Some(s) => format!(
                        "{pool}, a connection each, one GIL (switch interval {} ms)",
                        crate::units::show_ms(s)
                    ),
                    None => format!("{pool}, a connection each"),
                }
            }
        }
    }
}

/// A thread per request: one accept thread takes connections one by one (`accept_us` each,
/// the socket and the thread's start), each request then runs on its own thread with its own
/// database connection, its statements in parallel with other threads' (SQLite's locks decide).
/// With a GIL, a request's own code (and the accept thread's) runs only while it holds the
/// process's one interpreter lock, given up at every SQLite call and, when another thread
/// waits, every switch interval. Times in µs, `[low, high]` drawn per use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadTimes {
    /// The accept thread's work per connection (accept, parse start, start a thread).
    pub accept_us: Dist,
    /// The same for the first connection a process accepts after it started (cold code).
    pub first_accept_us: Dist,
    /// A request's own code before its first statement (read, parse, validate, connect).
    pub handler_us: Dist,
    /// The same for the first request a process serves after it started (cold code).
    pub first_handler_us: Dist,
    /// The request's database connection opened after its own code, the interpreter lock
    /// released meanwhile (Python's `sqlite3.connect`); 0 when `handler_us` includes it.
    pub connect_us: Dist,
    /// With a GIL: the part of `handler_us` before the thread first reads its socket (a read
    /// that must wait for the request's bytes gives the lock up there).
    pub prelude_us: Dist,
    /// Threads that serve requests at once per process; 0: a new thread for each request.
    pub threads: u32,
    /// The interpreter lock's switch interval (µs), if the runtime has one (CPython: 5 ms).
    pub gil_switch_us: Option<u64>,
    /// Prefork (`kind = "prefork"`): the `threads` are worker processes sharing the server's
    /// listening socket, each accepting for itself when idle, with memory of its own (a
    /// process-memory key store per worker) and its own cold start.
    pub prefork: bool,
}

/// Node.js's event loop in phases, for a synchronous driver: per iteration, the I/O callbacks
/// that are ready (continuations after an await other than `setImmediate`), then every
/// connection accepted in an earlier iteration whose request bytes have arrived is read and
/// runs to its first await, then **one** pending connection is accepted, then the check phase
/// runs every `setImmediate` continuation queued before it. Times in µs, `[low, high]` drawn
/// per use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopTimes {
    /// One iteration of the loop with nothing to do but look.
    pub turn_us: Dist,
    /// Accepting one connection (the socket, the HTTP parser).
    pub accept_us: Dist,
    /// The same for the first connection a process accepts after it started (cold code).
    pub first_accept_us: Dist,
    /// A request's own code before its first statement (body, JSON, validation, hash).
    pub handler_us: Dist,
    /// The same for the first request a process serves after it started (cold code).
    pub first_handler_us: Dist,
    /// Of the connections that wake an idle loop, the share (parts per million) whose client
    /// the woken process preempts inside `connect`: the kernel runs it on the client's core,
    /// and the client's `connect` returns (its gap and write begin) only when the loop's
    /// iteration ends or the loop goes idle again. Measured by `idemsim calibrate` from the
    /// client's and the server's trace lines (docs/reality.md).
    pub wake_preempts_ppm: u32,
    /// The extra CPU time of the first run of each kind of statement (the lookup, the
    /// insert, …) in a fresh process's life: the code around it runs for the first time (V8
    /// compiles a function on its first call and fills its inline caches), measured by
    /// `idemsim calibrate` as a fresh process's first request's statements against its later
    /// ones. [0, 0] (the default): no cold statements.
    pub first_statement_us: Dist,
}

impl LoopTimes {
    /// [`LoopTimes::wake_preempts_ppm`] as a probability.
    pub fn wake_preempts(&self) -> f64 {
        f64::from(self.wake_preempts_ppm) / 1e6
    }
}

/// The `[driver]` section: how the server process runs its requests' code and SQL (awaits, statement and commit times, transaction mode, journal, pool, deadline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Driver {
    /// Where requests interleave.
    pub awaits: Awaits,
    /// Driver latency of one await (µs, inclusive range drawn uniformly); [0, 0] is one
    /// event-loop turn: a scheduling point that takes no time.
    pub latency_us: Dist,
    /// Simulated time one SQL statement takes (µs, inclusive range; [0, 0] = instant). With a
    /// synchronous driver (`awaits = "explicit"`) the process is blocked meanwhile, and for the
    /// whole of an open transaction: other processes run, its own requests wait.
    pub statement_us: Dist,
    /// Extra time (µs, inclusive range) of a statement that makes writes durable: the
    /// `COMMIT` of a transaction that wrote, or a write run in autocommit mode (the journal
    /// sync: an fsync with `synchronous = FULL`).
    pub commit_us: Dist,
    /// How transactions begin.
    pub begin: BeginMode,
    /// The database's journal mode.
    pub journal: Journal,
    /// Connections per process that requests check out for their whole execution (0: every
    /// request of a process shares its one connection).
    pub pool: u32,
    /// An execution still running this long (µs) after it was admitted is killed at its next
    /// step (a function's timeout: no error path runs, no reply is sent by it).
    pub deadline_us: Option<u64>,
}

/// Which transaction the error path rolls back (`on_error`: one of `rollback`,
/// `rollback-any`, or neither).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rollback {
    /// Nothing is rolled back: an open transaction stays open.
    None,
    /// `rollback`: the transaction this request began, if it is still open.
    Own,
    /// `rollback-any`: whatever transaction the connection has open (a `catch { ROLLBACK }`
    /// that does not check it began one): on a shared connection it ends another request's.
    Any,
}

/// What the error path does with this request's claim, if it holds one it has not completed
/// (`on_error`: at most one of these).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimCleanup {
    /// Leave it as it is (in progress).
    Keep,
    /// `release-claim`: delete this request's own in-progress claim, so a retry can run again.
    Release,
    /// `release-key`: delete the key's record by key alone, whoever owns it and whatever its
    /// state (Powertools: `delete_item` by key; the TypeScript bug #5675): a request whose
    /// claim was taken over deletes the new owner's record.
    ReleaseKey,
    /// `unlock`: end the claim's lease now and keep the record and its recovery point, so a
    /// retry takes it over and resumes.
    Unlock,
    /// `mark-failed`: mark the claim `failed` and keep it (seed 002's key table): a retry with
    /// the same payload takes it back and runs again; another payload is still a mismatch.
    MarkFailed,
}

/// The `on_error` list: what the error path does after a step fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnError {
    /// Which transaction it rolls back.
    pub rollback: Rollback,
    /// What it does with the request's claim.
    pub claim: ClaimCleanup,
    /// A busy database inside a transaction: roll back and run the transaction again from its
    /// `begin`, up to `transaction_retries` times (Firestore's and ORMs' retry loops).
    pub retry_transaction: bool,
    /// `clean_up_on`: the kinds of failure after which the claim clean-up runs; after any
    /// other the claim is left as it is. None: after every failure.
    pub clean_up_on: Option<Vec<FailureKind>>,
}

impl OnError {
    /// Does the claim clean-up run after a failure of this kind?
    pub fn cleans_up_after(&self, kind: FailureKind) -> bool {
        self.clean_up_on.as_ref().is_none_or(|kinds| kinds.contains(&kind))
    }
}

/// The kinds of failure the error path tells apart (`clean_up_on`), as a design's code does:
/// what its own `catch` answers, and what it lets escape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// `busy`: the database stayed locked past the wait budget (503, safe to retry).
    Busy,
    /// `sql-error`: an SQL statement failed (500), a `claim` clash with
    /// `claim_conflict = "error"` included.
    SqlError,
    /// `commit-lost`: the connection was lost at a `COMMIT` (500, outcome unknown).
    CommitLost,
    /// `injected`: a sim's injected `fail` at a point: an exception the code throws.
    Injected,
    /// `effect`: the effect provider answered an error, or no answer came in time (500).
    Effect,
    /// `declined`: the provider declined the call (402).
    Declined,
    /// `rate-limited`: the rate limiter had no token (429).
    RateLimited,
    /// `store`: the key store failed or could not be reached (`on_store_error`).
    Store,
    /// `save-refused`: `save-response` found its claim gone or no longer its own (500).
    SaveRefused,
    /// `internal`: a run bound was hit, or the program ended without a response (500).
    Internal,
}

impl FailureKind {
    /// Every kind with its name in a model file, in the order an error lists them.
    pub const NAMES: &[(&str, FailureKind)] = &[
        ("busy", FailureKind::Busy),
        ("sql-error", FailureKind::SqlError),
        ("commit-lost", FailureKind::CommitLost),
        ("injected", FailureKind::Injected),
        ("effect", FailureKind::Effect),
        ("declined", FailureKind::Declined),
        ("rate-limited", FailureKind::RateLimited),
        ("store", FailureKind::Store),
        ("save-refused", FailureKind::SaveRefused),
        ("internal", FailureKind::Internal),
    ];

    /// The kind's name in a model file (`busy`, `sql-error`, …).
    pub fn name(self) -> &'static str {
        Self::NAMES.iter().find(|(_, k)| *k == self).map_or("?", |(n, _)| n)
    }
}

/// A field of an order that a business key is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowField {
    /// The order's user (`X-User`).
    User,
    /// The order's operation (the route).
    Operation,
    /// The ordered item.
    Item,
    /// The request's `Idempotency-Key` as sent (a webhook's event id).
    Key,
}

/// What `insert-row` answers when the rows table's UNIQUE business key is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnClash {
    /// 409 `{"error":"already exists"}`: a business refusal (a signup whose email is taken).
    Conflict,
    /// 200 `{"status":"already exists"}`, whatever state the holder is in (a webhook
    /// receiver that acknowledges a redelivery).
    Acknowledge,
    /// 200 with the row that holds the key, as if this request had created it.
    Existing,
    /// The Danish article's webhook table: a row already marked processed (`mark-processed`)
    /// is answered 200 `{"status":"already processed"}`; one not yet marked is taken as this
    /// request's row and the program goes on (its effect runs again).
    Unprocessed,
}

/// `[rows]`: a UNIQUE business key on the rows table, the last barrier against a duplicate
/// even without a transaction or an idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowsPolicy {
    /// The fields the business key is made of, in order.
    pub unique: Vec<RowField>,
    /// What `insert-row` answers when the key is taken.
    pub on_clash: OnClash,
    /// `enforce = "constraint"` (true): a partial UNIQUE index on the business key refuses a
    /// second row. `"read"` (false): no index; only a `check-row` read guards it.
    pub constraint: bool,
}

impl RowsPolicy {
    /// The business key of an order (fields joined by U+001F); None when it includes the
    /// key and none was sent (the row is then not unique).
    pub fn natural(
        &self,
        user: &str,
        operation: &str,
        item: &str,
        key: Option<&str>,
    ) -> Option<String> {
        let mut parts: Vec<&str> = Vec::new();
        for f in &self.unique {
            parts.push(match f {
                RowField::User => user,
                RowField::Operation => operation,
                RowField::Item => item,
                RowField::Key => key?,
            });
        }
        Some(parts.join("\u{1f}"))
    }
}

/// A server variant, loaded and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    /// The model's name (its `name`, else its file's name without `.toml`), as in tables and replay commands.
    pub name: String,
    /// One line on what the design is.
    pub summary: String,
    /// The file it was loaded from.
    pub path: PathBuf,
    /// The step program each request's execution runs, in order.
    pub program: Vec<Step>,
    /// What the error path does.
    pub on_error: OnError,
    /// None: the variant never reads the key.
    pub key: Option<KeyPolicy>,
    /// Which outcomes are recorded under the key and replayed.
    pub store_outcomes: StoreOutcomes,
    /// The stack given in place of the model's own (`MODEL@STACK`, a target's `stack`), as
    /// written; None: the stack the model names.
    pub on_stack: Option<String>,
    /// The stack profile the driver's defaults come from (a shipped stack's name or a stack
    /// file's path, as the model wrote it; `node-sqlite-sync` when it names none).
    pub stack: String,
    /// How each server process takes in work (the stack's runtime).
    pub runtime: Runtime,
    /// How the process runs its requests' code and SQL: the stack's driver, with the model's
    /// own `[driver]` fields over it.
    pub driver: Driver,
    /// How long a statement waits for a locked database before 503 (the sim may override).
    pub wait_budget_us: u64,
    /// How the effect receiver deduplicates deliveries.
    pub effect_dedupe: EffectDedupe,
    /// Period of the outbox relay (µs), when the program has an `outbox` step.
    pub relay_every_us: u64,
    /// How long an `effect` step waits for the provider's answer (µs); None: a second plus
    /// two of the provider's worst latencies.
    pub effect_timeout_us: Option<u64>,
    /// A UNIQUE business key on the rows table (None: rows are never unique).
    pub rows: Option<RowsPolicy>,
    /// How many times `on_error = ["retry-transaction"]` runs a transaction again.
    pub transaction_retries: u32,
    /// `[events] guard = "monotonic"`: `apply-status` never moves a status backwards.
    pub events_monotonic: bool,
    /// `[updates] check`: whether `update-doc` honours `If-Match`.
    pub version_check: VersionCheck,
    /// `[limits]`: the rate limiter of a `rate-limit` step, per process: (requests per second,
    /// burst).
    pub rate_limit: Option<(u64, u64)>,
    /// `[updates] delete_missing = 204`: a DELETE of a document that is gone answers 204 (the
    /// delete is idempotent) instead of 404.
    pub delete_missing_ok: bool,
    /// `[notes]`: per sim name, the note every table shows beside this model's cell there.
    pub notes: std::collections::BTreeMap<String, String>,
}

impl Model {
    /// The event loop's times of the model's runtime, if it runs on an event loop.
    pub fn loop_times(&self) -> Option<&LoopTimes> {
        match &self.runtime {
            Runtime::EventLoop(t) => Some(t),
            Runtime::Threads(_) => None,
        }
    }

    /// The threads' times of the model's runtime, if it runs a thread per request.
    pub fn thread_times(&self) -> Option<&ThreadTimes> {
        match &self.runtime {
            Runtime::Threads(t) => Some(t),
            Runtime::EventLoop(_) => None,
        }
    }

    /// Does this model perform external effects itself (effect or outbox steps)?
    pub fn has_effects(&self) -> bool {
        self.program.iter().any(|s| matches!(s, Step::Effect | Step::Outbox))
    }

    /// Named points (`@name`) of the program.
    pub fn points(&self) -> Vec<&str> {
        self.program
            .iter()
            .filter_map(|s| if let Step::Point(p) = s { Some(p.as_str()) } else { None })
            .collect()
    }

    /// Where a takeover that found recovery point `point` continues: after the point, or, if
    /// the point is inside a transaction, after that transaction's `commit`.
    pub fn resume_index(&self, point: &str) -> Option<usize> {
        let at = self.program.iter().position(|s| *s == Step::RecoveryPoint(point.to_string()))?;
        let open = self.program[..at].iter().fold(false, |open, s| match s {
            Step::Begin => true,
            Step::Commit => false,
            _ => open,
        });
        if !open {
            return Some(at + 1);
        }
        let commit = self.program[at..].iter().position(|s| *s == Step::Commit)?;
        Some(at + commit + 1)
    }

    /// How often the background completer runs, if the model has one.
    pub fn completer_every_us(&self) -> Option<u64> {
        self.key.as_ref().and_then(|k| k.completer_every_us)
    }

    /// Does the program have recovery points?
    pub fn has_recovery_points(&self) -> bool {
        self.program.iter().any(|s| matches!(s, Step::RecoveryPoint(_)))
    }

    /// The program as written, its steps joined by arrows.
    pub fn program_text(&self) -> String {
        self.program.iter().map(Step::name).collect::<Vec<_>>().join(" → ")
    }
}
