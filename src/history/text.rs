//! The events as text: the [`Legend`] that names what events refer to by index, one event's
//! text (`write_what`), and the `--trace` timeline.

use std::fmt::{self, Write};

use super::{Actor, CrashSite, Event, History, Node, Refusal, What};
use crate::units::show_ms;

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

    #[rustfmt::skip] // one line per group of variants, packed: the map of what writes what
    fn write_what(&self, s: &mut String, what: &What) -> fmt::Result {
        match what {
            What::HandlerCode { .. }
                | What::ColdStatement { .. }
                | What::DriverAwait { .. }
                | What::AwaitOnThread
                => write_runtime(s, what),
            What::Sent { .. } | What::Received { .. } | What::TransportFailure { .. }
            | What::GaveUp { .. } | What::RequestDropped | What::RequestDuplicated { .. }
            | What::ReplyDropped { .. } | What::Delayed { .. } | What::LostInPartition
            | What::LostToDownProcess | What::ConnectionRefused | What::ConnectionReset
            | What::Arrived | What::Reply { .. } | What::ReplyLostAfterCommit
            | What::ConnectionDropped { .. } | What::CoreTaken | What::CoreReturned
                => self.write_wire(s, what),
            What::Rejected(..) | What::LockWait { .. } | What::StillLocked { .. }
            | What::LockedAtOnce { .. } | What::PoolWait | What::PoolExhausted { .. }
            | What::SqlError { .. } | What::Begin { .. } | What::Commit
            | What::CommitNothingWritten | What::Rollback
                => self.write_sql(s, what),
            What::LookupMiss | What::Mismatch { .. } | What::InFlight { .. }
            | What::WaitingForOriginal | What::HitCompleted { .. } | What::Replayed { .. }
            | What::Claimed | What::ClaimUniqueFailed | What::TookOver | What::AlreadyClaimed
            | What::ClaimGone | What::RowInserted { .. } | What::RecoveryPointSaved { .. }
            | What::Resumed { .. } | What::CompleterTookOver { .. }
            | What::CompleterFinished { .. } | What::CompleterPastHorizon { .. }
                => self.write_keys(s, what),
            What::DocUpdated { .. } | What::DocDeleted { .. } | What::DocRefused { .. }
            | What::DocIgnored { .. } | What::StatusApplied { .. } | What::ProcessStalled { .. }
            | What::ProcessResumed | What::ClaimKept | What::ClaimLeftAfter { .. }
            | What::RollbackOthers | What::Declined { .. }
            | What::StockTaken { .. } | What::SoldOut { .. } | What::TransactionRetried { .. }
                => self.write_business(s, what),
            What::ClaimUnlocked { .. } | What::MarkedFailed { .. } | What::FoundFailed
            | What::KeyReleased { .. } | What::RateLimited { .. } | What::DeadlineKilled
            | What::LocalCacheHit | What::InFlightIgnored | What::KeyExpired { .. }
            | What::ExpiredGone | What::RetookFailed | What::RowClash { .. }
            | What::RowFound { .. } | What::RowAbsent | What::RowTaken { .. }
            | What::RowProcessed { .. } | What::OutboxQueued { .. } | What::OutboxMarkedSent { .. }
            | What::SaveRefused { .. } | What::ClaimCompleted { .. } | What::Stored { .. }
            | What::EffectCall { .. } | What::EffectUnacknowledged | What::ProviderError
            | What::CommitLost { .. } | What::CacheRefused | What::CacheUnreachable
            | What::CacheRestarted | What::CacheEvicted | What::CacheReplyLost
                => self.write_records(s, what),
            What::Injected { .. } | What::CrashFault(..) | What::Failed { .. }
            | What::ClaimReleased { .. } | What::CannotBind { .. }
            | What::CannotOpenDatabase { .. } | What::ProcessCrashed | What::ProcessRestarted
            | What::ClockOffset { .. } | What::ProviderErrorAfterSuccess | What::ProviderAnswerLost
            | What::EffectCallLost | What::EffectCallDuplicated | What::EffectApplied { .. }
            | What::EffectDeduplicated { .. }
                => self.write_faults(s, what),
            What::Partitioned { .. } | What::Reconnected { .. } | What::Quiescent
            | What::ActionNoDatabase { .. } | What::LockHeld { .. } | What::LockReleased { .. }
            | What::LockNotTaken { .. } | What::DeleteKeysFailed { .. } | What::KeysDeleted { .. }
            | What::Collected { .. } | What::Probe { .. } | What::ProbeGaveUp { .. }
                => self.write_control(s, what),
        }
    }

    /// The clients and the network: requests, replies, what was lost or delayed.
    fn write_wire(&self, s: &mut String, what: &What) -> fmt::Result {
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
            What::CoreTaken => write!(
                s,
                "its connection wakes the idle loop, which takes the client's core inside \
                 connect: the client writes a gap after it gets it back"
            ),
            What::CoreReturned => {
                write!(s, "the client gets its core back (the loop's iteration ran); it writes")
            }
            What::Reply { status, body, .. } => write!(s, "reply {status} {body}"),
            What::ReplyLostAfterCommit => write!(s, "fault: reply lost after commit"),
            What::ConnectionDropped { status } => {
                write!(s, "connection dropped, {status} never sent")
            }
            _ => Ok(()),
        }
    }

    /// Refusals before any step, and the SQL statements: locks, pools, transactions.
    fn write_sql(&self, s: &mut String, what: &What) -> fmt::Result {
        match what {
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
            _ => Ok(()),
        }
    }

    /// Key lookups and claims, recovery points and the completer.
    fn write_keys(&self, s: &mut String, what: &What) -> fmt::Result {
        match what {
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
            _ => Ok(()),
        }
    }

    /// Business steps: documents, statuses, stock, rate limits and retries.
    fn write_business(&self, s: &mut String, what: &What) -> fmt::Result {
        match what {
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
            What::ClaimLeftAfter { failure } => {
                write!(s, "claim left in progress (no clean-up after a failure of kind {failure})")
            }
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
            _ => Ok(()),
        }
    }

    /// Claims released or failed, rows found or taken, the outbox, effects and the cache.
    fn write_records(&self, s: &mut String, what: &What) -> fmt::Result {
        match what {
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
            _ => Ok(()),
        }
    }

    /// Injections, crashes, restarts, clocks and the provider's faults.
    fn write_faults(&self, s: &mut String, what: &What) -> fmt::Result {
        match what {
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
            _ => Ok(()),
        }
    }

    /// Partitions, quiescence and the sims' actions (locks, deletes, collection, probes).
    fn write_control(&self, s: &mut String, what: &What) -> fmt::Result {
        match what {
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
            _ => Ok(()),
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
}

/// The runtime's own events: how a request's code and awaits run.
fn write_runtime(s: &mut String, what: &What) -> fmt::Result {
    match what {
        What::HandlerCode { us, cold } => {
            let cold = if *cold { " (cold: the process's first request)" } else { "" };
            write!(s, "handler code {} ms{cold}", show_ms(*us))
        }
        What::ColdStatement { stmt, us } => write!(
            s,
            "{}: cold code {} ms first (the process's first {})",
            stmt.name(),
            show_ms(*us),
            stmt.name()
        ),
        What::DriverAwait { us: 0 } => write!(s, "await: one event-loop turn"),
        What::DriverAwait { us } => write!(s, "await {} ms (driver)", show_ms(*us)),
        What::AwaitOnThread => write!(s, "await: nothing to wait for on its own thread"),
        _ => Ok(()),
    }
}
