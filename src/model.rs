//! Server variants as data: a model file is a step program plus a key policy and a driver.
//!
//! The engine (`world::exec`) implements each step kind once; a model only arranges them.
//! See `docs/models.md` for the format.

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::input::{InputError, Source, is_kebab};

/// One step of a server program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `BEGIN IMMEDIATE`: take the write lock (waited out in simulated time, then 503).
    Begin,
    /// `COMMIT`.
    Commit,
    /// Look the key up: a completed record replays (or answers `on_mismatch` when the
    /// fingerprint differs); an in-progress record answers `in_flight`; a miss goes on.
    Lookup,
    /// Claim the key with a unique insert of an in-progress record; a conflict is handled as a
    /// lookup hit.
    Claim,
    /// Insert the business row: the response becomes 201 `{id, item, qty}`.
    InsertRow,
    /// Record the response under the key: completes this request's claim, or inserts a new
    /// record (a primary-key clash is an error → 500).
    SaveResponse,
    /// The wait an asynchronous driver introduces: other requests run here.
    Await,
    /// Call the external effect receiver (e-mail, payment) for this intent.
    Effect,
    /// Insert an outbox row for this request's effect (in the current transaction); a relay
    /// in the process delivers it later and marks it sent.
    Outbox,
    /// A named point where a sim injects trouble (`@before-commit`, `@after-commit`, ...).
    Point(String),
    /// `recovery-point:NAME`: the claim records the phase reached (and the row inserted), so a
    /// retry that takes the claim over resumes after it instead of starting again.
    RecoveryPoint(String),
    /// `UPDATE stock SET units = units - qty WHERE item = ?` under a `CHECK (units >= 0)`:
    /// sold out is 422, a business refusal the rest of the program stores.
    TakeStock,
    /// A status event (`POST /api/events`): upsert the resource's status; the reply is 200
    /// with the event. `[events] guard = "monotonic"` ignores a status not past the stored one.
    ApplyStatus,
    /// A rate limiter (a token bucket per process, `[limits]`): out of tokens → 429, through
    /// the error path (so `store_outcomes = "all"` stores it under a claim taken before).
    RateLimit,
    /// `UPDATE rows SET processed_us = now WHERE id = <the request's row>`: the event is
    /// handled (`[rows] on_clash = "unprocessed"` then acknowledges its redeliveries).
    MarkProcessed,
    /// `SELECT … FROM rows WHERE <business key> = ?`: a row with the request's business key
    /// exists already → the `[rows] on_clash` answer (a business refusal), else go on. A read,
    /// not a constraint: two requests may both find nothing (`[rows] enforce = "read"`).
    CheckRow,
    /// A document update (`PUT /api/docs/<id>`): `UPDATE docs SET value = ?, version =
    /// version + 1 WHERE id = ?`, with `AND version = ?` (the `If-Match`) when `[updates]
    /// check` asks for it; 0 rows is 412, a business refusal the rest of the program stores.
    UpdateDoc,
}

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

impl Step {
    pub fn name(&self) -> String {
        match self {
            Step::Begin => "begin".into(),
            Step::Commit => "commit".into(),
            Step::Lookup => "lookup".into(),
            Step::Claim => "claim".into(),
            Step::InsertRow => "insert-row".into(),
            Step::SaveResponse => "save-response".into(),
            Step::Await => "await".into(),
            Step::Effect => "effect".into(),
            Step::Outbox => "outbox".into(),
            Step::Point(p) => format!("@{p}"),
            Step::RecoveryPoint(p) => format!("recovery-point:{p}"),
            Step::TakeStock => "take-stock".into(),
            Step::ApplyStatus => "apply-status".into(),
            Step::UpdateDoc => "update-doc".into(),
            Step::CheckRow => "check-row".into(),
            Step::MarkProcessed => "mark-processed".into(),
            Step::RateLimit => "rate-limit".into(),
        }
    }

    /// Does the step run an SQL statement (and so await under `awaits = "every-statement"`)?
    /// The step that writes the request's business state (exactly one per program).
    pub fn is_write(&self) -> bool {
        matches!(self, Step::InsertRow | Step::ApplyStatus | Step::UpdateDoc)
    }

    pub fn is_statement(&self) -> bool {
        matches!(
            self,
            Step::Begin
                | Step::Commit
                | Step::Lookup
                | Step::Claim
                | Step::InsertRow
                | Step::SaveResponse
                | Step::Outbox
                | Step::RecoveryPoint(_)
                | Step::TakeStock
                | Step::ApplyStatus
                | Step::UpdateDoc
                | Step::CheckRow
                | Step::MarkProcessed
        )
    }
}

pub const STEP_NAMES: &str = "begin, commit, lookup, claim, insert-row, save-response, await, effect, outbox, \
     take-stock, check-row, mark-processed, rate-limit, apply-status, update-doc, recovery-point:<name>, @<point-name>";

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fingerprint {
    /// SHA-256 of the validated input in canonical field order.
    Validated,
    /// SHA-256 of the raw body bytes.
    Raw,
    /// No fingerprint: a different payload under a used key replays.
    None,
}

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
    pub scope_operation: bool,
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
    pub in_flight: InFlight,
    /// Header added to a replayed response (`Idempotent-Replayed: true`).
    pub replay_marker: String,
    /// Keys older than this (µs) are expired; a collector deletes them (None: kept forever).
    pub retention_us: Option<u64>,
    /// How `retention_us` is enforced on SQLite records (`expiry`, `on_expired`).
    pub expiry: Expiry,
    pub store: KeyStore,
    /// Latency of one cache operation (µs, inclusive), for `store = "cache"`.
    pub store_latency_us: (u64, u64),
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
    pub replay: Replay,
    pub claim_conflict: ClaimConflict,
}

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
    pub fn name(self) -> &'static str {
        match self {
            Journal::Rollback => "rollback",
            Journal::Wal => "wal",
        }
    }
}

/// Most pooled connections a process may have.
pub const MAX_POOL: u32 = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Driver {
    pub awaits: Awaits,
    /// Driver latency of one await (µs, inclusive range drawn uniformly); [0, 0] is one
    /// event-loop turn: a scheduling point that takes no time.
    pub latency_us: (u64, u64),
    /// Simulated time one SQL statement takes (µs, inclusive range; [0, 0] = instant). With a
    /// synchronous driver (`awaits = "explicit"`) the process is blocked meanwhile, and for the
    /// whole of an open transaction: other processes run, its own requests wait.
    pub statement_us: (u64, u64),
    /// Extra time (µs, inclusive range) of a statement that makes writes durable: the
    /// `COMMIT` of a transaction that wrote, or a write run in autocommit mode (the journal
    /// sync: an fsync with `synchronous = FULL`).
    pub commit_us: (u64, u64),
    pub begin: BeginMode,
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnError {
    pub rollback: Rollback,
    pub claim: ClaimCleanup,
    /// A busy database inside a transaction: roll back and run the transaction again from its
    /// `begin`, up to `transaction_retries` times (Firestore's and ORMs' retry loops).
    pub retry_transaction: bool,
}

/// A field of an order that a business key is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowField {
    User,
    Operation,
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
    pub unique: Vec<RowField>,
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
    pub name: String,
    pub summary: String,
    pub path: PathBuf,
    pub program: Vec<Step>,
    pub on_error: OnError,
    /// None: the variant never reads the key.
    pub key: Option<KeyPolicy>,
    pub store_outcomes: StoreOutcomes,
    pub driver: Driver,
    /// How long a statement waits for a locked database before 503 (the sim may override).
    pub wait_budget_us: u64,
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
}

impl Model {
    /// Does this model perform external effects itself (effect or outbox steps)?
    pub fn has_effects(&self) -> bool {
        self.program.iter().any(|s| matches!(s, Step::Effect | Step::Outbox))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFile {
    name: Option<Spanned<String>>,
    summary: Option<String>,
    program: Spanned<Vec<Spanned<String>>>,
    #[serde(default)]
    on_error: Vec<Spanned<String>>,
    key: Option<KeyFile>,
    #[serde(default)]
    driver: DriverFile,
    wait_budget_ms: Option<Spanned<f64>>,
    transaction_retries: Option<Spanned<u32>>,
    store_outcomes: Option<Spanned<String>>,
    #[serde(default)]
    effects: EffectsFile,
    #[serde(default)]
    outbox: OutboxFile,
    rows: Option<RowsFile>,
    events: Option<EventsFile>,
    updates: Option<Spanned<UpdatesFile>>,
    limits: Option<Spanned<LimitsFile>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsFile {
    per_second: Spanned<u64>,
    burst: Option<Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdatesFile {
    check: Option<Spanned<String>>,
    delete_missing: Option<Spanned<u16>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EventsFile {
    guard: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RowsFile {
    unique: Spanned<Vec<Spanned<String>>>,
    on_clash: Option<Spanned<toml::Value>>,
    enforce: Option<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct EffectsFile {
    dedupe: Option<Spanned<String>>,
    timeout_ms: Option<Spanned<f64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct OutboxFile {
    relay_every_ms: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    #[serde(default = "yes")]
    required: bool,
    max_len: Option<Spanned<usize>>,
    scope: Option<Vec<Spanned<String>>>,
    fingerprint: Option<Spanned<String>>,
    on_mismatch: Option<Spanned<u16>>,
    in_flight: Option<Spanned<toml::Value>>,
    replay_marker: Option<Spanned<String>>,
    #[serde(default)]
    local_cache: bool,
    retention_ms: Option<Spanned<f64>>,
    store: Option<Spanned<String>>,
    store_latency_ms: Option<Spanned<Vec<f64>>>,
    store_timeout_ms: Option<Spanned<f64>>,
    lease_ms: Option<Spanned<toml::Value>>,
    completer_every_ms: Option<Spanned<f64>>,
    completer_horizon_ms: Option<Spanned<f64>>,
    completer_min_age_ms: Option<Spanned<f64>>,
    on_store_error: Option<Spanned<u16>>,
    on_failed_save: Option<Spanned<String>>,
    #[serde(default)]
    fencing: bool,
    replay: Option<Spanned<toml::Value>>,
    claim_conflict: Option<Spanned<String>>,
    expiry: Option<Spanned<String>>,
    on_expired: Option<Spanned<toml::Value>>,
    fingerprint_fields: Option<Spanned<Vec<Spanned<String>>>>,
    key_from: Option<Spanned<Vec<Spanned<String>>>>,
    min_len: Option<Spanned<usize>>,
    format: Option<Spanned<String>>,
}

/// A list of input fields (`fingerprint_fields`, `key_from`): known, at least one, no repeats.
fn parse_fields(
    file: Source,
    what: &str,
    list: &Option<Spanned<Vec<Spanned<String>>>>,
) -> Result<Option<Vec<String>>, InputError> {
    let Some(list) = list else { return Ok(None) };
    if list.get_ref().is_empty() {
        return Err(file.err(list.span(), format!("key.{what}: expected at least one field")));
    }
    let mut out: Vec<String> = Vec::new();
    for f in list.get_ref() {
        let name = f.get_ref();
        if !crate::http::INPUT_FIELDS.contains(&name.as_str()) {
            return Err(file.err(
                f.span(),
                format!(
                    "unknown key.{what} field `{name}`; expected {}",
                    crate::http::INPUT_FIELDS.join(", ")
                ),
            ));
        }
        if out.contains(name) {
            return Err(file.err(f.span(), format!("key.{what}: `{name}` listed twice")));
        }
        out.push(name.clone());
    }
    Ok(Some(out))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct DriverFile {
    awaits: Option<Spanned<String>>,
    latency_ms: Option<Spanned<Vec<f64>>>,
    statement_ms: Option<Spanned<Vec<f64>>>,
    commit_ms: Option<Spanned<Vec<f64>>>,
    begin: Option<Spanned<String>>,
    journal: Option<Spanned<String>>,
    pool: Option<Spanned<u32>>,
    deadline_ms: Option<Spanned<f64>>,
}

/// A model's name names a column of every table: 1 to 64 characters, no spaces or control
/// characters.
fn check_model_name(n: &str) -> Result<(), String> {
    let bad = |c: char| c.is_whitespace() || c.is_control() || "|`<>&*".contains(c);
    if n.is_empty() || n.chars().count() > 64 || n.chars().any(bad) {
        return Err(format!(
            "`{}`: expected 1 to 64 characters without spaces, control characters or |`<>&*",
            crate::input::shown(n)
        ));
    }
    Ok(())
}

/// The longest key a model may accept (`key.max_len`).
pub const MAX_KEY_LEN: usize = 4096;
/// Headers the harness's requests and replies carry: not usable as a replay marker.
const RESERVED_HEADERS: &[&str] = &[
    "Content-Type",
    "Content-Length",
    "Idempotency-Key",
    "X-Intent",
    "X-User",
    "X-Tenant",
    "Host",
];

fn yes() -> bool {
    true
}

impl Model {
    /// Load a model file.
    pub fn load(path: &Path) -> Result<Model, InputError> {
        let src = crate::input::read_file(path, "model")?;
        Self::parse(path, &src)
    }

    /// Parse model text; `path` names it in errors and gives the default name.
    pub fn parse(path: &Path, src: &str) -> Result<Model, InputError> {
        let file = Source::new(path, src);
        let f: ModelFile = file.toml()?;
        let program = parse_program(file, &f.program)?;
        let updates_doc = program.iter().any(|(s, _)| *s == Step::UpdateDoc);
        let rate_limit_step = program.iter().find(|(s, _)| *s == Step::RateLimit).cloned();
        let check_row = program.iter().find(|(s, _)| *s == Step::CheckRow);
        let insert_at = program.iter().position(|(s, _)| *s == Step::InsertRow);
        match (check_row, &f.rows) {
            (Some((_, span)), None) => {
                return Err(file.err(
                    span.clone(),
                    "`check-row` reads rows by their business key: it needs a [rows] section",
                ));
            }
            (Some((_, span)), Some(_))
                if insert_at
                    .is_none_or(|i| program[..i].iter().all(|(s, _)| *s != Step::CheckRow)) =>
            {
                return Err(file.err(span.clone(), "`check-row` must come before `insert-row`"));
            }
            (_, Some(RowsFile { on_clash: Some(c), .. }))
                if c.get_ref().as_str() == Some("unprocessed")
                    && !program.iter().any(|(s, _)| *s == Step::MarkProcessed) =>
            {
                return Err(file.err(
                    c.span(),
                    "rows.on_clash = \"unprocessed\" re-runs events not yet marked processed: \
                     the program needs a `mark-processed` step",
                ));
            }
            (None, Some(RowsFile { enforce: Some(e), .. })) if e.get_ref() == "read" => {
                return Err(file.err(
                    e.span(),
                    "rows.enforce = \"read\" guards the business key by a `check-row` step: \
                     the program has none",
                ));
            }
            _ => {}
        }
        check_structure(file, &program, f.program.span(), f.key.is_some())?;
        check_points(file, &program)?;
        let on_error = parse_on_error(file, &f.on_error)?;
        let retry_tx = on_error.retry_transaction;
        let mut key = f.key.as_ref().map(|k| parse_key(file, k)).transpose()?;
        let driver_deadline = match f.driver.deadline_ms.as_ref() {
            None => None,
            Some(_) => Some(file.ms("driver.deadline_ms", &f.driver.deadline_ms, 0, 1)?),
        };
        if let Some(k) = key.as_mut()
            && matches!(k.lease, Lease::ToDeadline(_))
        {
            match driver_deadline {
                Some(d) => k.lease = Lease::ToDeadline(d),
                None => {
                    let span = f.key.as_ref().and_then(|k| k.lease_ms.as_ref()).map(|l| l.span());
                    return Err(file.err(
                        span.unwrap_or(0..0),
                        "key.lease_ms = \"deadline\" needs [driver] deadline_ms (the \
                         execution's time limit)",
                    ));
                }
            }
        }
        // Resuming (recovery points) and unlocking go through a takeover of an expired lease
        // on a SQLite record.
        let resumable =
            key.as_ref().is_some_and(|k| k.lease.is_some() && k.store == KeyStore::Sqlite);
        let has_points = program.iter().any(|(s, _)| matches!(s, Step::RecoveryPoint(_)));
        if has_points && !resumable {
            return Err(file.err(
                f.program.span(),
                "recovery points resume through a takeover of the claim: they need [key] \
                 lease_ms and store = \"sqlite\"",
            ));
        }
        if let Some(k) = &key
            && k.completer_every_us.is_some()
            && !has_points
        {
            return Err(file.err(
                f.program.span(),
                "key.completer_every_ms: a completer resumes abandoned claims at their recovery \
                 point; the program has no `recovery-point:<name>` step",
            ));
        }
        if on_error.claim == ClaimCleanup::MarkFailed {
            let span = f.on_error.iter().find(|e| e.get_ref() == "mark-failed").map(|e| e.span());
            let span = span.unwrap_or(f.program.span());
            let claims = program.iter().any(|(s, _)| *s == Step::Claim);
            if !claims || key.as_ref().is_none_or(|k| k.store != KeyStore::Sqlite) {
                return Err(file.err(
                    span,
                    "on_error `mark-failed` marks the request's own claim failed: it needs a \
                     `claim` step and the SQLite key store",
                ));
            }
            if f.store_outcomes.as_ref().is_some_and(|s| s.get_ref() != "success") {
                return Err(file.err(
                    span,
                    "on_error `mark-failed` keeps a failure as a `failed` record; \
                     store_outcomes would store it as done: choose one",
                ));
            }
        }
        if on_error.claim == ClaimCleanup::Unlock && !resumable {
            let span = f.on_error.iter().find(|e| e.get_ref() == "unlock").map(|e| e.span());
            return Err(file.err(
                span.unwrap_or(f.program.span()),
                "on_error `unlock` ends the claim's lease so a retry can take it over: it needs \
                 [key] lease_ms and store = \"sqlite\"",
            ));
        }
        let store_outcomes = file
            .choice(
                &f.store_outcomes,
                "store_outcomes",
                &[
                    ("success", StoreOutcomes::Success),
                    ("all", StoreOutcomes::All),
                    ("refusals", StoreOutcomes::Refusals),
                    ("dependency", StoreOutcomes::Dependency),
                ],
            )?
            .unwrap_or(StoreOutcomes::Success);
        let driver = parse_driver(file, &f.driver)?;
        let effect_dedupe = file
            .choice(
                &f.effects.dedupe,
                "effects.dedupe",
                &[
                    ("none", EffectDedupe::None),
                    ("key", EffectDedupe::Key),
                    ("payload", EffectDedupe::Payload),
                    ("row", EffectDedupe::Row),
                ],
            )?
            .unwrap_or(EffectDedupe::None);
        let relay_every_us =
            file.ms("outbox.relay_every_ms", &f.outbox.relay_every_ms, 50_000, 1)?;
        let wait_budget_us = file.ms("wait_budget_ms", &f.wait_budget_ms, 5_000_000, 0)?;
        let name = match &f.name {
            Some(n) => {
                check_model_name(n.get_ref())
                    .map_err(|m| file.err(n.span(), format!("name: {m}")))?;
                n.get_ref().clone()
            }
            None => {
                let stem =
                    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                check_model_name(&stem).map_err(|m| {
                    InputError::file(
                        path,
                        format!(
                            "the file name gives the model's name: {m}; \
                                                    set `name`"
                        ),
                    )
                })?;
                stem
            }
        };
        Ok(Model {
            name,
            summary: crate::text::printable(&f.summary.unwrap_or_default()),
            path: path.to_path_buf(),
            program: program.into_iter().map(|(s, _)| s).collect(),
            on_error,
            key,
            store_outcomes,
            driver,
            wait_budget_us,
            effect_dedupe,
            relay_every_us,
            effect_timeout_us: f
                .effects
                .timeout_ms
                .is_some()
                .then(|| file.ms("effects.timeout_ms", &f.effects.timeout_ms, 0, 1))
                .transpose()?,
            rows: f.rows.as_ref().map(|r| parse_rows(file, r, f.key.is_some())).transpose()?,
            events_monotonic: file
                .choice(
                    &f.events.as_ref().and_then(|e| e.guard.clone()),
                    "events.guard",
                    &[("none", false), ("monotonic", true)],
                )?
                .unwrap_or(false),
            version_check: match &f.updates {
                None => VersionCheck::None,
                Some(u) if !updates_doc => {
                    return Err(file.err(u.span(), "[updates] needs an `update-doc` step"));
                }
                Some(u) => file
                    .choice(
                        &u.get_ref().check,
                        "updates.check",
                        &[
                            ("none", VersionCheck::None),
                            ("if-match", VersionCheck::IfMatch),
                            ("required", VersionCheck::Required),
                            ("client-time", VersionCheck::ClientTime),
                        ],
                    )?
                    .unwrap_or_default(),
            },
            rate_limit: match (&f.limits, rate_limit_step) {
                (None, None) => None,
                (None, Some((_, span))) => {
                    return Err(
                        file.err(span, "`rate-limit` needs a [limits] section (per_second, burst)")
                    );
                }
                (Some(l), None) => {
                    return Err(file.err(l.span(), "[limits] needs a `rate-limit` step"));
                }
                (Some(l), Some(_)) => {
                    let l = l.get_ref();
                    let rate = *l.per_second.get_ref();
                    if !(1..=1_000_000).contains(&rate) {
                        return Err(file
                            .err(l.per_second.span(), "limits.per_second: expected 1..=1000000"));
                    }
                    let burst = l.burst.as_ref().map_or(rate, |b| *b.get_ref());
                    if !(1..=1_000_000).contains(&burst) {
                        let span = l.burst.as_ref().map(|b| b.span()).unwrap_or(0..0);
                        return Err(file.err(span, "limits.burst: expected 1..=1000000"));
                    }
                    Some((rate, burst))
                }
            },
            delete_missing_ok: match f
                .updates
                .as_ref()
                .and_then(|u| u.get_ref().delete_missing.as_ref())
            {
                None => false,
                Some(v) if *v.get_ref() == 404 => false,
                Some(v) if *v.get_ref() == 204 => true,
                Some(v) => {
                    return Err(file.err(v.span(), "updates.delete_missing: expected 404 or 204"));
                }
            },
            transaction_retries: match &f.transaction_retries {
                None => 5,
                Some(n) if (1..=100).contains(n.get_ref()) && retry_tx => *n.get_ref(),
                Some(n) if !retry_tx => {
                    return Err(file.err(
                        n.span(),
                        "transaction_retries needs on_error = [\"retry-transaction\", …]",
                    ));
                }
                Some(n) => {
                    return Err(file.err(n.span(), "transaction_retries: expected 1..=100"));
                }
            },
        })
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

    pub fn program_text(&self) -> String {
        self.program.iter().map(Step::name).collect::<Vec<_>>().join(" → ")
    }
}

/// `[rows]`: `unique` a non-empty set of order fields, `on_clash` 409, 200 or "existing".
fn parse_rows(file: Source, r: &RowsFile, has_key: bool) -> Result<RowsPolicy, InputError> {
    let mut unique = Vec::new();
    for f in r.unique.get_ref() {
        let field = match f.get_ref().as_str() {
            "user" => RowField::User,
            "operation" => RowField::Operation,
            "item" => RowField::Item,
            "key" if !has_key => {
                return Err(file.err(f.span(), "rows.unique: `key` needs a [key] section"));
            }
            "key" => RowField::Key,
            other => {
                return Err(file.err(
                    f.span(),
                    format!(
                        "unknown rows.unique field `{}`; expected one of `user`, `operation`, \
                         `item`, `key`",
                        crate::input::shown(other)
                    ),
                ));
            }
        };
        if unique.contains(&field) {
            return Err(file.err(f.span(), "rows.unique: this field is listed twice"));
        }
        unique.push(field);
    }
    if unique.is_empty() {
        return Err(file.err(
            r.unique.span(),
            "rows.unique: expected at least one of `user`, `operation`, `item`, `key`",
        ));
    }
    let on_clash = match &r.on_clash {
        None => OnClash::Conflict,
        Some(v) => match v.get_ref() {
            toml::Value::Integer(409) => OnClash::Conflict,
            toml::Value::Integer(200) => OnClash::Acknowledge,
            toml::Value::String(s) if s == "existing" => OnClash::Existing,
            toml::Value::String(s) if s == "unprocessed" => OnClash::Unprocessed,
            _ => {
                return Err(file.err(
                    v.span(),
                    "rows.on_clash: expected 409, 200, \"existing\" or \"unprocessed\"",
                ));
            }
        },
    };
    let constraint = file
        .choice(&r.enforce, "rows.enforce", &[("constraint", true), ("read", false)])?
        .unwrap_or(true);
    Ok(RowsPolicy { unique, on_clash, constraint })
}

/// A step with the span it was written at.
type SpannedStep = (Step, Range<usize>);

/// The step names of `program`.
fn parse_program(
    file: Source,
    program: &Spanned<Vec<Spanned<String>>>,
) -> Result<Vec<SpannedStep>, InputError> {
    let mut steps = Vec::new();
    for s in program.get_ref() {
        let step = match s.get_ref().as_str() {
            "begin" => Step::Begin,
            "commit" => Step::Commit,
            "lookup" => Step::Lookup,
            "claim" => Step::Claim,
            "insert-row" => Step::InsertRow,
            "save-response" => Step::SaveResponse,
            "await" => Step::Await,
            "effect" => Step::Effect,
            "outbox" => Step::Outbox,
            "take-stock" => Step::TakeStock,
            "apply-status" => Step::ApplyStatus,
            "update-doc" => Step::UpdateDoc,
            "check-row" => Step::CheckRow,
            "mark-processed" => Step::MarkProcessed,
            "rate-limit" => Step::RateLimit,
            p if p.starts_with('@') && p.len() > 1 && is_kebab(&p[1..]) => {
                Step::Point(p[1..].to_string())
            }
            p if p.strip_prefix("recovery-point:").is_some_and(is_kebab) => {
                Step::RecoveryPoint(p["recovery-point:".len()..].to_string())
            }
            other => {
                return Err(file.err(
                    s.span(),
                    format!("unknown step `{other}`; expected one of: {STEP_NAMES}"),
                ));
            }
        };
        steps.push((step, s.span()));
    }
    Ok(steps)
}

/// Structural checks: one insert-row, begin/commit paired, key steps need a key policy.
fn check_structure(
    file: Source,
    program: &[SpannedStep],
    program_span: Range<usize>,
    has_key: bool,
) -> Result<(), InputError> {
    let inserts = program.iter().filter(|(s, _)| s.is_write()).count();
    if inserts != 1 {
        return Err(file.err(
            program_span,
            format!(
                "a program needs exactly one `insert-row` (or, for status events, one \
                 `apply-status`; for document updates, one `update-doc`) step (found {inserts})"
            ),
        ));
    }
    let mut open = false;
    let mut inserted = false;
    let mut claimed = false;
    let mut points: Vec<&str> = Vec::new();
    for (step, span) in program {
        if let Step::RecoveryPoint(p) = step {
            if !claimed {
                return Err(file.err(
                    span.clone(),
                    "a recovery point needs a `claim` before it: the claim is what remembers it",
                ));
            }
            if points.contains(&p.as_str()) {
                return Err(file.err(span.clone(), format!("recovery point `{p}` twice")));
            }
            points.push(p);
        }
        if *step == Step::Claim {
            claimed = true;
        }
        if step.is_write() {
            inserted = true;
        }
        if *step == Step::SaveResponse && !inserted {
            return Err(file.err(
                span.clone(),
                "`save-response` before `insert-row`: there is no response to save yet",
            ));
        }
        match step {
            Step::Begin if open => {
                return Err(file.err(
                    span.clone(),
                    "`begin` inside an open transaction; expected `commit` first",
                ));
            }
            Step::Begin => open = true,
            Step::Commit if !open => {
                return Err(file.err(span.clone(), "`commit` without a `begin` before it"));
            }
            Step::Commit => open = false,
            Step::Lookup | Step::Claim | Step::SaveResponse if !has_key => {
                return Err(
                    file.err(span.clone(), format!("step `{}` needs a [key] section", step.name()))
                );
            }
            _ => {}
        }
    }
    if open {
        return Err(
            file.err(program_span, "program ends inside a transaction; expected a `commit`")
        );
    }
    Ok(())
}

/// The named points a sim can inject at, each defined by what has happened when it fires.
/// A model places each where its program makes the definition true; the loader checks it.
pub const POINTS: &[(&str, &str)] = &[
    (
        "before-commit",
        "the business write is done; the transaction that holds it (if any) has not committed \
         and the outcome is not saved",
    ),
    (
        "before-effect",
        "the business write is committed; no effect step has run yet (in a design without one, \
         the sim's fallback effect at @after-commit is still to come)",
    ),
    (
        "after-effect",
        "every effect step has run and the business write is done; the outcome is not saved \
         yet (only in a design with an effect step)",
    ),
    (
        "after-commit",
        "the business write, the saved outcome and every effect are done and committed; only \
         the reply is left",
    ),
];

/// Where the facts the points are defined by become true in a program: the index of the
/// step after which each holds (None: never).
struct PointFacts {
    write: Option<usize>,
    /// The write is committed (its own index for an autocommit write).
    write_committed: Option<usize>,
    save: Option<usize>,
    save_committed: Option<usize>,
    effects: Vec<usize>,
}

impl PointFacts {
    fn of(program: &[SpannedStep]) -> PointFacts {
        let mut f = PointFacts {
            write: None,
            write_committed: None,
            save: None,
            save_committed: None,
            effects: Vec::new(),
        };
        let (mut open, mut pending_write, mut pending_save) = (false, false, false);
        for (i, (step, _)) in program.iter().enumerate() {
            match step {
                Step::Begin => open = true,
                Step::Commit => {
                    open = false;
                    if std::mem::take(&mut pending_write) {
                        f.write_committed = Some(i);
                    }
                    if std::mem::take(&mut pending_save) {
                        f.save_committed = Some(i);
                    }
                }
                s if s.is_write() => {
                    f.write = Some(i);
                    if open { pending_write = true } else { f.write_committed = Some(i) }
                }
                Step::SaveResponse => {
                    f.save = Some(i);
                    if open { pending_save = true } else { f.save_committed = Some(i) }
                }
                Step::Effect => f.effects.push(i),
                _ => {}
            }
        }
        f
    }

    /// Does point `p`'s definition hold at step index `i` (`open`: inside a transaction)?
    fn hold(&self, p: &str, i: usize, open: bool) -> bool {
        let after = |fact: Option<usize>| fact.is_none_or(|f| f < i);
        let before = |fact: Option<usize>| fact.is_none_or(|f| f > i);
        let wrote = self.write.is_some_and(|w| w < i);
        let effects_after = self.effects.iter().all(|&e| e > i);
        let effects_before = self.effects.iter().all(|&e| e < i);
        match p {
            // An autocommit write commits by itself: only the save is still to come.
            "before-commit" => {
                wrote
                    && (self.write_committed == self.write || before(self.write_committed))
                    && before(self.save)
            }
            "before-effect" => wrote && after(self.write_committed) && effects_after,
            "after-effect" => {
                !self.effects.is_empty() && wrote && effects_before && before(self.save)
            }
            "after-commit" => {
                wrote
                    && !open
                    && after(self.write_committed)
                    && after(self.save_committed)
                    && self.save_committed.is_some() == self.save.is_some()
                    && effects_before
            }
            _ => true,
        }
    }
}

/// Each defined point (`POINTS`) sits where its definition holds.
fn check_points(file: Source, program: &[SpannedStep]) -> Result<(), InputError> {
    let facts = PointFacts::of(program);
    let mut open = false;
    for (i, (step, span)) in program.iter().enumerate() {
        match step {
            Step::Begin => open = true,
            Step::Commit => open = false,
            _ => {}
        }
        let Step::Point(p) = step else { continue };
        let Some((_, meaning)) = POINTS.iter().find(|(n, _)| n == p) else { continue };
        if !facts.hold(p, i, open) {
            return Err(file.err(
                span.clone(),
                format!("@{p} is where {meaning}; it does not hold at this place in the program"),
            ));
        }
    }
    Ok(())
}

fn parse_on_error(file: Source, list: &[Spanned<String>]) -> Result<OnError, InputError> {
    let mut on_error =
        OnError { rollback: Rollback::None, claim: ClaimCleanup::Keep, retry_transaction: false };
    for e in list {
        let (rollback, claim) = match e.get_ref().as_str() {
            "rollback" => (Some(Rollback::Own), None),
            "rollback-any" => (Some(Rollback::Any), None),
            "release-claim" => (None, Some(ClaimCleanup::Release)),
            "release-key" => (None, Some(ClaimCleanup::ReleaseKey)),
            "unlock" => (None, Some(ClaimCleanup::Unlock)),
            "mark-failed" => (None, Some(ClaimCleanup::MarkFailed)),
            "retry-transaction" => {
                on_error.retry_transaction = true;
                (None, None)
            }
            other => {
                return Err(file.err(
                    e.span(),
                    format!(
                        "unknown on_error action `{other}`; expected rollback, rollback-any, \
                         release-claim, release-key, unlock, mark-failed or retry-transaction"
                    ),
                ));
            }
        };
        if let Some(r) = rollback {
            if on_error.rollback != Rollback::None {
                return Err(file.err(
                    e.span(),
                    "on_error: `rollback` ends the request's own transaction, `rollback-any` \
                     whatever is open; choose one",
                ));
            }
            on_error.rollback = r;
        }
        if let Some(c) = claim {
            if on_error.claim != ClaimCleanup::Keep {
                return Err(file.err(
                    e.span(),
                    "on_error: `release-claim` deletes the claim, `release-key` the key's record, \
                     `unlock` keeps it for a takeover, `mark-failed` keeps it as failed; choose one",
                ));
            }
            on_error.claim = c;
        }
    }
    Ok(on_error)
}

fn parse_scope(
    file: Source,
    scope: &Option<Vec<Spanned<String>>>,
) -> Result<(bool, bool, bool), InputError> {
    let Some(scope) = scope else { return Ok((true, true, false)) };
    let (mut user, mut operation, mut tenant) = (false, false, false);
    for s in scope {
        match s.get_ref().as_str() {
            "user" => user = true,
            "operation" => operation = true,
            "tenant" => tenant = true,
            other => {
                return Err(file.err(
                    s.span(),
                    format!(
                        "unknown scope field `{}`; expected user, operation, tenant",
                        crate::input::shown(other)
                    ),
                ));
            }
        }
    }
    Ok((user, operation, tenant))
}

/// The `[key]` section.
fn parse_key(file: Source, k: &KeyFile) -> Result<KeyPolicy, InputError> {
    let (scope_user, scope_operation, scope_tenant) = parse_scope(file, &k.scope)?;
    let fingerprint = file
        .choice(
            &k.fingerprint,
            "fingerprint",
            &[
                ("validated", Fingerprint::Validated),
                ("raw", Fingerprint::Raw),
                ("none", Fingerprint::None),
            ],
        )?
        .unwrap_or(Fingerprint::Validated);
    let fingerprint_fields = parse_fields(file, "fingerprint_fields", &k.fingerprint_fields)?;
    if let (Some(ff), false) = (&k.fingerprint_fields, fingerprint == Fingerprint::Validated) {
        return Err(file.err(
            ff.span(),
            "key.fingerprint_fields selects fields of the validated input: it needs \
             fingerprint = \"validated\"",
        ));
    }
    let key_from = parse_fields(file, "key_from", &k.key_from)?;
    let min_len = match &k.min_len {
        None => 1,
        Some(m) if (1..=MAX_KEY_LEN).contains(m.get_ref()) => *m.get_ref(),
        Some(m) => {
            return Err(file.err(m.span(), format!("key.min_len: expected 1..={MAX_KEY_LEN}")));
        }
    };
    let uuid =
        file.choice(&k.format, "key.format", &[("any", false), ("uuid", true)])?.unwrap_or(false);
    if key_from.is_some() && (k.min_len.is_some() || uuid) {
        let span = k.format.as_ref().map(|f| f.span());
        let span = span.or(k.min_len.as_ref().map(|m| m.span())).unwrap_or(0..0);
        return Err(file.err(
            span,
            "key.min_len and key.format check the Idempotency-Key header; with key_from the key \
             comes from the payload",
        ));
    }
    let on_mismatch = match &k.on_mismatch {
        None => 422,
        Some(s) if [400, 409, 422].contains(s.get_ref()) => *s.get_ref(),
        Some(s) => {
            return Err(file.err(
                s.span(),
                format!("on_mismatch {} not allowed; expected 400, 409 or 422", s.get_ref()),
            ));
        }
    };
    let in_flight = match &k.in_flight {
        None => InFlight::Status(409),
        Some(v) => match v.get_ref() {
            toml::Value::String(s) if s == "wait" => InFlight::Wait,
            toml::Value::String(s) if s == "proceed" => InFlight::Proceed,
            toml::Value::Integer(409) => InFlight::Status(409),
            toml::Value::Integer(425) => InFlight::Status(425),
            toml::Value::Integer(202) => InFlight::Status(202),
            _ => {
                return Err(file
                    .err(v.span(), "in_flight: expected 409, 425, 202, \"wait\" or \"proceed\""));
            }
        },
    };
    let store = file
        .choice(
            &k.store,
            "key store",
            &[
                ("sqlite", KeyStore::Sqlite),
                ("cache", KeyStore::Cache),
                ("memory", KeyStore::Memory),
            ],
        )?
        .unwrap_or(KeyStore::Sqlite);
    let store_latency_us = file.ms_range(
        "key.store_latency_ms",
        &k.store_latency_ms,
        (1_000, 3_000),
        |lo, hi| lo <= hi && hi <= 60_000_000,
        "[low, high] with low <= high <= 60000",
    )?;
    // `lease_ms = "deadline"`: the lease is the execution's remaining time (Model::parse
    // checks the driver has a deadline and fills it in).
    let lease = match &k.lease_ms {
        None => Lease::None,
        Some(v) => match v.get_ref() {
            toml::Value::String(s) if s == "deadline" => Lease::ToDeadline(0),
            toml::Value::Integer(_) | toml::Value::Float(_) => {
                let ms = v.get_ref().as_float().or(v.get_ref().as_integer().map(|i| i as f64));
                let ms = Some(Spanned::new(v.span(), ms.unwrap_or(0.0)));
                Lease::For(file.ms("key.lease_ms", &ms, 0, 1)?)
            }
            _ => {
                return Err(file.err(
                    v.span(),
                    "key.lease_ms: expected milliseconds or \"deadline\" (the execution's \
                     remaining time, [driver] deadline_ms)",
                ));
            }
        },
    };
    let retention_us = k
        .retention_ms
        .is_some()
        .then(|| file.ms("key.retention_ms", &k.retention_ms, 0, 1))
        .transpose()?;
    let replay = match &k.replay {
        None => Replay::Stored,
        Some(v) => match v.get_ref() {
            toml::Value::String(s) if s == "stored" => Replay::Stored,
            toml::Value::Integer(409) => Replay::Status(409),
            _ => return Err(file.err(v.span(), "key.replay: expected \"stored\" or 409")),
        },
    };
    let claim_conflict = file
        .choice(
            &k.claim_conflict,
            "claim_conflict",
            &[
                ("lookup", ClaimConflict::Lookup),
                ("error", ClaimConflict::Error),
                ("overwrite", ClaimConflict::Overwrite),
            ],
        )?
        .unwrap_or(ClaimConflict::Lookup);
    let expiry = parse_expiry(file, k, retention_us, store)?;
    if k.local_cache && store == KeyStore::Memory {
        return Err(file.err(
            k.store.as_ref().map(|s| s.span()).unwrap_or(0..0),
            "key.local_cache keeps records in process memory in front of the store: the store \
             must be \"sqlite\" or \"cache\"",
        ));
    }
    if store == KeyStore::Cache && k.retention_ms.is_none() {
        return Err(file.err(
            k.store.as_ref().map(|s| s.span()).unwrap_or(0..0),
            "key.store = \"cache\" needs key.retention_ms (the cache's TTL)",
        ));
    }
    let max_len = match &k.max_len {
        None => 255,
        Some(m) if (1..=MAX_KEY_LEN).contains(m.get_ref()) => *m.get_ref(),
        Some(m) => {
            return Err(file.err(m.span(), format!("key.max_len: expected 1..={MAX_KEY_LEN}")));
        }
    };
    if let Some(m) = &k.min_len
        && min_len > max_len
    {
        return Err(file.err(m.span(), format!("key.min_len {min_len} is above max_len {max_len}")));
    }
    let replay_marker = match &k.replay_marker {
        None => "Idempotent-Replayed".to_string(),
        Some(m) => {
            let v = m.get_ref();
            let token = !v.is_empty()
                && v.len() <= 64
                && v.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !token {
                return Err(file.err(
                    m.span(),
                    format!(
                        "key.replay_marker `{}`: expected a header name (1 to 64 letters, digits \
                         or !#$%&'*+-.^_`|~)",
                        crate::input::shown(v)
                    ),
                ));
            }
            if RESERVED_HEADERS.iter().any(|h| h.eq_ignore_ascii_case(v)) {
                return Err(file.err(
                    m.span(),
                    format!(
                        "key.replay_marker `{v}` is a header every reply or request carries; \
                         expected a header of its own, e.g. Idempotent-Replayed"
                    ),
                ));
            }
            v.clone()
        }
    };
    let on_store_error = match &k.on_store_error {
        None => 500,
        Some(v) if [500, 502, 503].contains(v.get_ref()) => *v.get_ref(),
        Some(v) => {
            return Err(file.err(
                v.span(),
                "key.on_store_error: expected 500 (an unhandled error), 502 or 503 (fail closed, \
                 safe to retry)",
            ));
        }
    };
    let keep_on_failed_save = match &k.on_failed_save {
        None => false,
        Some(v) => match v.get_ref().as_str() {
            "clean-up" => false,
            "keep" => true,
            _ => {
                return Err(file.err(
                    v.span(),
                    "key.on_failed_save: expected \"clean-up\" (run on_error) or \"keep\" (leave \
                     the claim as it is)",
                ));
            }
        },
    };
    if (k.on_store_error.is_some() || k.on_failed_save.is_some()) && store == KeyStore::Memory {
        let span = k.on_store_error.as_ref().map(|v| v.span());
        return Err(file.err(
            span.or(k.on_failed_save.as_ref().map(|v| v.span())).unwrap_or(0..0),
            "key.on_store_error and key.on_failed_save are for a store that can fail (\"sqlite\" \
             or \"cache\"); process memory cannot",
        ));
    }
    Ok(KeyPolicy {
        on_store_error,
        keep_on_failed_save,
        store,
        store_latency_us,
        store_timeout_us: file.ms("key.store_timeout_ms", &k.store_timeout_ms, 1_000_000, 1)?,
        lease,
        completer_every_us: k
            .completer_every_ms
            .is_some()
            .then(|| file.ms("key.completer_every_ms", &k.completer_every_ms, 0, 1))
            .transpose()?,
        completer_min_age_us: k
            .completer_min_age_ms
            .is_some()
            .then(|| file.ms("key.completer_min_age_ms", &k.completer_min_age_ms, 0, 1))
            .transpose()?,
        completer_horizon_us: k
            .completer_horizon_ms
            .is_some()
            .then(|| file.ms("key.completer_horizon_ms", &k.completer_horizon_ms, 0, 1))
            .transpose()?,
        fencing: k.fencing,
        replay,
        claim_conflict,
        required: k.required,
        max_len,
        scope_user,
        scope_tenant,
        scope_operation,
        fingerprint,
        fingerprint_fields,
        key_from,
        min_len,
        uuid,
        local_cache: k.local_cache,
        on_mismatch,
        in_flight,
        replay_marker,
        retention_us,
        expiry,
    })
}

/// `[key] expiry` and `on_expired`: how a SQLite record's retention is enforced.
fn parse_expiry(
    file: Source,
    k: &KeyFile,
    retention_us: Option<u64>,
    store: KeyStore,
) -> Result<Expiry, InputError> {
    let expire_on_read = file
        .choice(&k.expiry, "key.expiry", &[("collector", false), ("on-read", true)])?
        .unwrap_or(false);
    if expire_on_read && (retention_us.is_none() || store != KeyStore::Sqlite) {
        return Err(file.err(
            k.expiry.as_ref().map(|s| s.span()).unwrap_or(0..0),
            "key.expiry = \"on-read\" checks each SQLite record's age against \
             key.retention_ms: it needs both (a cache's records expire by their TTL already)",
        ));
    }
    let expired_gone = match &k.on_expired {
        None => false,
        Some(v) => match v.get_ref() {
            toml::Value::String(s) if s == "new" => false,
            toml::Value::Integer(410) if expire_on_read => true,
            toml::Value::Integer(410) => {
                return Err(file.err(
                    v.span(),
                    "key.on_expired = 410 answers from the expired record (a tombstone): it \
                     needs key.expiry = \"on-read\"",
                ));
            }
            _ => return Err(file.err(v.span(), "key.on_expired: expected \"new\" or 410")),
        },
    };
    Ok(match (expire_on_read, expired_gone) {
        (false, _) => Expiry::Collector,
        (true, false) => Expiry::OnRead,
        (true, true) => Expiry::OnReadGone,
    })
}

/// The `[driver]` section.
fn parse_driver(file: Source, d: &DriverFile) -> Result<Driver, InputError> {
    let awaits = file
        .choice(
            &d.awaits,
            "driver.awaits",
            &[("explicit", Awaits::Explicit), ("every-statement", Awaits::EveryStatement)],
        )?
        .unwrap_or(Awaits::Explicit);
    let range = |field, value, default| {
        file.ms_range(
            field,
            value,
            default,
            |lo, hi| lo <= hi && hi <= 60_000_000,
            "[low, high] with low <= high <= 60000",
        )
    };
    let latency_us = range("driver.latency_ms", &d.latency_ms, (1_000, 5_000))?;
    let statement_us = range("driver.statement_ms", &d.statement_ms, (0, 0))?;
    let commit_us = range("driver.commit_ms", &d.commit_ms, (0, 0))?;
    let begin = file
        .choice(
            &d.begin,
            "driver.begin",
            &[
                ("deferred", BeginMode::Deferred),
                ("immediate", BeginMode::Immediate),
                ("exclusive", BeginMode::Exclusive),
            ],
        )?
        .unwrap_or(BeginMode::Immediate);
    let journal = file
        .choice(
            &d.journal,
            "driver.journal",
            &[("rollback", Journal::Rollback), ("wal", Journal::Wal)],
        )?
        .unwrap_or(Journal::Rollback);
    let pool = match &d.pool {
        None => 0,
        Some(p) if *p.get_ref() <= MAX_POOL => *p.get_ref(),
        Some(p) => {
            return Err(file.err(p.span(), format!("driver.pool: expected 0..={MAX_POOL}")));
        }
    };
    let deadline_us = d
        .deadline_ms
        .is_some()
        .then(|| file.ms("driver.deadline_ms", &d.deadline_ms, 0, 1))
        .transpose()?;
    Ok(Driver { awaits, latency_us, statement_us, commit_us, begin, journal, pool, deadline_us })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> Result<Model, InputError> {
        Model::parse(Path::new("m.toml"), src)
    }

    #[test]
    fn unknown_step_is_located() {
        let e = parse("program = [\"begin\", \"insert-row\", \"comit\"]").unwrap_err().to_string();
        assert!(e.starts_with("m.toml:1:35: unknown step `comit`"), "{e}");
    }

    #[test]
    fn key_steps_need_a_key_section() {
        let e = parse("program = [\"lookup\", \"insert-row\"]").unwrap_err().to_string();
        assert!(e.contains("m.toml:1:12: step `lookup` needs a [key] section"), "{e}");
    }

    #[test]
    fn unknown_field_is_located() {
        let e =
            parse("program = [\"insert-row\"]\n[key]\nrequird = true\n").unwrap_err().to_string();
        assert!(e.starts_with("m.toml:3:1: unknown field `requird`"), "{e}");
    }

    #[test]
    fn unbalanced_transaction() {
        let e = parse("program = [\"begin\", \"insert-row\"]").unwrap_err().to_string();
        assert!(e.contains("ends inside a transaction"), "{e}");
    }
}
