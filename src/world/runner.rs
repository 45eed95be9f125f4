//! Whatever runs on a server process (a request's execution, the outbox relay, the
//! completer): a [`Runner`] owns the process's event loop while it runs synchronously, runs SQL
//! statements waiting out a locked database in simulated time, calls the effect receiver, fires
//! the sim's injections at named points and crashes.
//!
//! Interleaving happens only at awaits: `await` steps, driver latency under
//! `awaits = "every-statement"`, statement time (`statement_ms`), waiting out a locked
//! database, cache round trips, effects and injected pauses. A synchronous rusqlite call runs
//! to completion within one poll.

use std::fmt;
use std::sync::Arc;
use std::task::Poll;

use rusqlite::Connection;

use crate::history::{Actor, CrashSite, Node, Stmt, What, save_refused};
use crate::model::Awaits;
use crate::scenario::InjectAction;
use crate::world::conn::Conn;
use crate::world::net::{Dest, EffectMsg, Mailbox, Msg};
use crate::world::shared::{World, chance, draw};
use crate::world::{clock, control, store};

/// Why a request failed.
pub(crate) enum Failure {
    /// The database stayed locked past the wait budget → 503.
    Busy,
    /// Anything else → 500.
    Error(Why),
    /// A run bound was hit → 500, and the bound is reported.
    Bound,
    /// The key store (a cache) could not be reached → 503.
    StoreUnavailable,
    /// The provider declined the call (a card declined) → 402, a business refusal.
    Declined,
    /// The rate limiter had no token → 429.
    RateLimited,
}

impl Failure {
    /// The kind of failure, as `clean_up_on` names it.
    pub fn kind(&self) -> crate::model::FailureKind {
        use crate::model::FailureKind as K;
        match self {
            Failure::Busy => K::Busy,
            Failure::Error(Why::Sql(_) | Why::ClaimUnique) => K::SqlError,
            Failure::Error(Why::CommitUnknown) => K::CommitLost,
            Failure::Error(Why::Injected(_)) => K::Injected,
            Failure::Error(Why::EffectUnacknowledged | Why::ProviderError) => K::Effect,
            Failure::Error(Why::SaveRefused { .. }) => K::SaveRefused,
            Failure::Error(Why::NoResponse | Why::SaveBeforeInsert) | Failure::Bound => K::Internal,
            Failure::StoreUnavailable => K::Store,
            Failure::Declined => K::Declined,
            Failure::RateLimited => K::RateLimited,
        }
    }
}

/// What went wrong, for the trace (`failed: …`).
pub(crate) enum Why {
    /// SQLite's own message.
    Sql(String),
    /// A `claim` lost with `claim_conflict = "error"`.
    ClaimUnique,
    Injected(String),
    EffectUnacknowledged,
    /// The effect provider answered an error.
    ProviderError,
    /// The connection was lost around COMMIT: the server cannot tell whether it committed.
    CommitUnknown,
    SaveRefused {
        fencing: bool,
    },
    NoResponse,
    SaveBeforeInsert,
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::Sql(e) => f.write_str(e),
            Why::ClaimUnique => f.write_str("UNIQUE constraint failed: keys"),
            Why::Injected(point) => write!(f, "injected failure at @{point}"),
            Why::EffectUnacknowledged => f.write_str("effect not acknowledged"),
            Why::ProviderError => f.write_str("the effect provider answered an error"),
            Why::CommitUnknown => f.write_str("connection lost during COMMIT: outcome unknown"),
            Why::SaveRefused { fencing } => write!(f, "save-response: {}", save_refused(*fencing)),
            Why::NoResponse => f.write_str("program ended without a response"),
            Why::SaveBeforeInsert => f.write_str("save-response before insert-row"),
        }
    }
}

/// Something running on server process `idx`: a request's execution or the outbox relay.
pub(crate) struct Runner {
    /// Unique per execution (a duplicated request gets two): the event loop's holder and the
    /// owner token of its claims.
    pub id: u64,
    pub world: Arc<World>,
    pub idx: usize,
    pub node: Node,
    pub conn: Conn,
    /// Who the trace names.
    pub who: Actor,
    /// The sim request this executes (None: the relay), for targeted injections.
    pub req: Option<usize>,
    /// A lost connection at `COMMIT` rolled the transaction back (ground truth the server does
    /// not see; its conditional SQL would).
    pub commit_rolled_back: std::cell::Cell<bool>,
    /// A request's execution that has not yet run on a loop in phases: it takes the grant of
    /// the handler just read, and runs its handler's own code first.
    fresh: std::cell::Cell<bool>,
    /// The worker process of a prefork server it runs on (its memory); 0 otherwise.
    pub worker: u32,
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.release_loop();
    }
}

impl Runner {
    pub fn new(
        world: Arc<World>,
        idx: usize,
        conn: Conn,
        who: Actor,
        req: Option<usize>,
    ) -> Runner {
        let id = world.next_tag();
        Runner {
            id,
            node: Node::Server(idx as u32),
            world,
            idx,
            conn,
            who,
            req,
            commit_rolled_back: std::cell::Cell::new(false),
            fresh: std::cell::Cell::new(req.is_some()),
            worker: 0,
        }
    }

    pub fn event(&self, what: What) {
        self.world.emit(self.node, Some(self.who), what);
    }

    /// A synchronous driver (`awaits = "explicit"`) on an event loop: code between awaits,
    /// statements and lock waits included, runs on the process's event loop and keeps its
    /// other requests out. (On a thread per request, each request blocks only its own thread.)
    fn sync_driver(&self) -> bool {
        self.world.model.driver.awaits == Awaits::Explicit
            && self.world.model.loop_times().is_some()
    }

    /// Run on the process's event loop (synchronous driver): taken when an execution starts
    /// and again after every await; other executions of the process wait for it.
    pub async fn hold(&self) {
        if self.sync_driver() {
            self.acquire_loop().await;
        }
    }

    /// An await: the event loop is free while `f` runs, and taken back after it.
    pub async fn wait<F: std::future::Future>(&self, f: F) -> F::Output {
        self.release_loop();
        let out = f.await;
        self.hold().await;
        out
    }

    /// Take the process's event loop (synchronous driver): other executions of this process
    /// wait until the loop grants it its turn; other processes run.
    async fn acquire_loop(&self) {
        if let Some(times) = self.world.model.loop_times() {
            self.acquire_phased(times).await
        }
    }

    /// Wait for the loop in phases to grant this execution its turn (a fresh request's
    /// execution takes the grant of the handler just read and runs its handler's own code
    /// first; any other queues for the next iteration unless it waits for the check phase).
    async fn acquire_phased(&self, times: &crate::model::LoopTimes) {
        use super::phases::NEW;
        let (idx, me) = (self.idx, self.id);
        struct Waiting<'a>(&'a World, usize, u64);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                let w = self.0.lock().processes[self.1].phases.forget(self.2);
                if let Some(w) = w {
                    w.wake();
                }
            }
        }
        let waiting = Waiting(&self.world, idx, me);
        let mut took_new = false;
        std::future::poll_fn(|cx| {
            let mut st = self.world.lock();
            let ph = &mut st.processes[idx].phases;
            match ph.grant {
                Some(g) if g == me => Poll::Ready(()),
                Some(NEW) if self.fresh.get() => {
                    ph.grant = Some(me);
                    ph.waiting.remove(&me);
                    took_new = true;
                    Poll::Ready(())
                }
                _ => {
                    let mut wake = None;
                    if !ph.waiting.contains_key(&me) && !ph.immediates.contains(&me) {
                        ph.ready.push_back(me);
                        wake = ph.loop_waker.take();
                    }
                    ph.waiting.insert(me, cx.waker().clone());
                    drop(st);
                    if let Some(w) = wake {
                        w.wake();
                    }
                    Poll::Pending
                }
            }
        })
        .await;
        std::mem::forget(waiting);
        if took_new {
            self.fresh.set(false);
            let first = {
                let mut st = self.world.lock();
                let ph = &mut st.processes[idx].phases;
                ph.served += 1;
                ph.served == 1 && !ph.warm
            };
            let cpu = draw(if first { times.first_handler_us } else { times.handler_us });
            self.event(What::HandlerCode { us: cpu, cold: first });
            clock::sleep_us(cpu).await;
        }
    }

    /// Give the event loop back (at an await): the loop task decides who runs next.
    pub fn release_loop(&self) {
        let w = self.world.lock().processes[self.idx].phases.release(self.id);
        if let Some(w) = w {
            w.wake();
        }
    }

    /// The driver's latency at an await: the event loop is free meanwhile. A latency of 0 is
    /// one event-loop turn (a scheduling point that takes no time).
    pub async fn driver_latency(&self) {
        if self.world.model.driver.awaits == Awaits::Explicit && !self.sync_driver() {
            // A synchronous driver on its own thread: an `await` step has nothing to wait
            // for (no event loop); other threads run meanwhile anyway.
            self.event(What::AwaitOnThread);
            return clock::yield_now().await;
        }
        if self.sync_driver() {
            // `await` of `setImmediate`: the rest runs in this iteration's check phase, after
            // everything read in its poll phase.
            self.event(What::DriverAwait { us: 0 });
            self.release_loop();
            let w = {
                let mut st = self.world.lock();
                let ph = &mut st.processes[self.idx].phases;
                ph.immediates.push_back(self.id);
                ph.loop_waker.take()
            };
            if let Some(w) = w {
                w.wake();
            }
            return self.hold().await;
        }
        let us = draw(self.world.model.driver.latency_us);
        self.event(What::DriverAwait { us });
        self.wait(clock::sleep_us(us)).await;
    }

    /// Run one SQL statement. With a synchronous driver the process's event loop is held.
    /// First a scheduling point: statements of other processes (other OS processes in the
    /// modelled system, running in parallel) may run before this one, even when every
    /// statement takes no time. Then the statement's own time, then the statement, waiting out
    /// a locked database in simulated time on SQLite's busy-handler schedule up to the budget.
    /// A commit that made writes durable also takes the journal's sync time, while the write
    /// lock is still held and before the writes are visible: the `COMMIT` of a transaction
    /// that wrote, or an autocommit write (run as a transaction of its own when the driver has
    /// a commit time, which is what SQLite does inside).
    pub async fn sql<T>(
        &self,
        stmt: Stmt,
        f: impl Fn(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, Failure> {
        let r = self.sql_call(stmt, f).await;
        self.back_from_c().await;
        r
    }

    /// Back from a call that ran without the interpreter lock (a thread runtime with a GIL):
    /// the thread runs on only once it holds the lock again, in line behind the threads
    /// that already wait for it.
    async fn back_from_c(&self) {
        if let Some(t) = self.world.model.thread_times().filter(|t| t.gil_switch_us.is_some()) {
            super::threads::code(&self.world, self.idx, t, 0).await;
        }
    }

    /// `sql` until the statement returned.
    async fn sql_call<T>(
        &self,
        stmt: Stmt,
        f: impl Fn(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, Failure> {
        self.hold().await;
        clock::yield_now().await;
        self.cold_statement(stmt).await;
        let driver = &self.world.model.driver;
        let took = draw(driver.statement_us);
        if took > 0 {
            clock::sleep_us(took).await;
        }
        let implicit = stmt.writes()
            && self.conn.is_autocommit()
            && (driver.commit_us.max() > 0 || self.world.sim.faults.commit_lost > 0.0);
        let commit_lost = self.world.sim.faults.commit_lost;
        if !implicit {
            // A COMMIT with no transaction open fails at once ("cannot commit - no transaction
            // is active"): no sync, and nothing for a lost connection to make ambiguous.
            let commit = matches!(stmt, Stmt::Commit | Stmt::CommitReadOnly)
                && !self.conn.is_autocommit()
                && self.conn.wrote_since_begin();
            if commit {
                self.sync_journal().await;
            }
            // Only a commit that wrote is ambiguous when its connection is lost.
            if commit && chance(commit_lost) {
                return Err(self.lose_connection_at_commit(stmt).await);
            }
            let r = self.run_waiting(stmt, &f).await;
            if stmt == Stmt::Begin && r.is_ok() {
                self.conn.mark_begin(self.id);
            }
            return r;
        }
        self.run_waiting(stmt, &|c| store::exec_cached(c, "BEGIN IMMEDIATE")).await?;
        self.conn.mark_begin(self.id);
        let r = self.run_waiting(stmt, &f).await;
        // An autocommit statement is one statement: if its implicit transaction was ended
        // meanwhile (a design's unconditional ROLLBACK on the shared connection), what it wrote
        // is gone and another transaction may be open now, which is not this one's to end.
        if !self.conn.tx_owned_by(self.id) {
            let error = "cannot commit - no transaction is active".to_string();
            self.event(What::SqlError { stmt, error: error.clone() });
            return Err(Failure::Error(Why::Sql(error)));
        }
        let committed = match r {
            Ok(_) => {
                if self.conn.wrote_since_begin() {
                    self.sync_journal().await;
                }
                if self.conn.wrote_since_begin() && chance(self.world.sim.faults.commit_lost) {
                    Err(self.lose_connection_at_commit(stmt).await)
                } else {
                    self.run_waiting(stmt, &|c| store::exec_cached(c, "COMMIT")).await
                }
            }
            Err(_) => Ok(()),
        };
        if self.conn.tx_owned_by(self.id) {
            let _ = store::exec_cached(&self.conn, "ROLLBACK");
        }
        committed.and(r)
    }

    /// The first statement of `stmt`'s kind in a fresh process's life runs its cold code first
    /// (an event loop's `first_statement_ms`; a warm-started process has run it all).
    async fn cold_statement(&self, stmt: Stmt) {
        let Some(times) = self.world.model.loop_times() else { return };
        if times.first_statement_us.max() == 0 {
            return;
        }
        let bit = 1u64 << (stmt as u32);
        let first = {
            let mut st = self.world.lock();
            let ph = &mut st.processes[self.idx].phases;
            let first = ph.ran & bit == 0 && !ph.warm;
            ph.ran |= bit;
            first
        };
        if first {
            let us = draw(times.first_statement_us);
            self.event(What::ColdStatement { stmt, us });
            clock::sleep_us(us).await;
        }
    }

    /// The `commit_lost` fault: the connection to the database is lost around COMMIT. The
    /// commit happened or not (even odds, drawn from the seed); the server only sees an error.
    async fn lose_connection_at_commit(&self, stmt: Stmt) -> Failure {
        let committed = chance(0.5);
        let end = if committed { "COMMIT" } else { "ROLLBACK" };
        let _ = self.run_waiting(stmt, &|c| store::exec_cached(c, end)).await;
        if self.conn.tx_owned_by(self.id) {
            let _ = store::exec_cached(&self.conn, "ROLLBACK");
        }
        self.event(What::CommitLost { committed });
        self.commit_rolled_back.set(!committed);
        Failure::Error(Why::CommitUnknown)
    }

    /// The syncs of a commit that made writes durable (`driver.commit_ms`). With a rollback
    /// journal SQLite takes the EXCLUSIVE lock before its first sync (`syncJournal` begins
    /// with `sqlite3PagerExclusiveLock`) and holds it through the journal's sync, the database
    /// pages' write and sync, until it deletes the journal: for the whole commit time every
    /// other connection's statement finds the database locked (`State::syncing`). A WAL commit
    /// appends to the log, and readers go on reading their snapshot.
    async fn sync_journal(&self) {
        let us = draw(self.world.model.driver.commit_us);
        if us == 0 {
            return;
        }
        if self.world.model.driver.journal != crate::model::Journal::Rollback {
            return clock::sleep_us(us).await;
        }
        struct Syncing<'a>(&'a World, u64);
        impl Drop for Syncing<'_> {
            fn drop(&mut self) {
                let mut st = self.0.lock();
                if st.syncing == Some(self.1) {
                    st.syncing = None;
                }
            }
        }
        let id = self.conn.id();
        self.world.lock().syncing = Some(id);
        let _held = Syncing(&self.world, id);
        clock::sleep_us(us).await;
    }

    /// Does another connection's commit hold the database's lock now (its journal sync)?
    fn locked_by_a_sync(&self) -> bool {
        self.world.lock().syncing.is_some_and(|c| c != self.conn.id())
    }

    /// Run `f`, waiting out a locked database where SQLite would wait.
    async fn run_waiting<T>(
        &self,
        stmt: Stmt,
        f: &impl Fn(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, Failure> {
        let budget = self.world.wait_budget_us;
        let mut waited = 0u64;
        let mut retries = 0u32;
        let mut said = false;
        loop {
            store::busy_reset();
            // Another connection's commit is syncing its journal under the EXCLUSIVE lock:
            // SQLite answers BUSY through the busy handler, as for any lock.
            let synced = self.locked_by_a_sync();
            let r = if synced { Err(store::busy_error()) } else { f(&self.conn) };
            match r {
                Ok(v) => return Ok(v),
                Err(e) if store::is_busy(&e) => {
                    if !synced && !store::busy_asked() {
                        // SQLite returns BUSY without calling its busy handler: no timeout
                        // helps (a transaction that has read cannot take the write lock).
                        let snapshot = store::is_busy_snapshot(&e);
                        self.event(What::LockedAtOnce { stmt, snapshot });
                        return Err(Failure::Busy);
                    }
                    if !said {
                        self.event(What::LockWait { stmt, budget_us: budget });
                        said = true;
                    }
                    let Some(d) = store::default_busy_delay_us(retries, budget) else {
                        self.event(What::StillLocked { stmt, waited_us: waited });
                        return Err(Failure::Busy);
                    };
                    if !self.world.spend() {
                        return Err(Failure::Bound);
                    }
                    clock::sleep_us(d).await;
                    waited += d;
                    retries += 1;
                }
                Err(e) => {
                    let error = e.to_string();
                    self.event(What::SqlError { stmt, error: error.clone() });
                    return Err(Failure::Error(Why::Sql(error)));
                }
            }
        }
    }

    /// Call the effect receiver for `intent` and wait for its acknowledgement.
    pub async fn effect(&self, intent: &str, dedupe: Option<String>) -> Result<(), Failure> {
        let mailbox = Mailbox::open(&self.world);
        self.event(What::EffectCall { intent: intent.to_string() });
        let msg = EffectMsg {
            reply_tag: mailbox.tag,
            process: self.idx,
            intent: intent.to_string(),
            from: self.who,
            exec: self.id,
            dedupe,
        };
        let faults = &self.world.sim.faults.effects;
        if chance(faults.drop) {
            self.event(What::EffectCallLost);
        } else {
            let duplicate = chance(faults.duplicate);
            let copy = duplicate.then(|| msg.clone());
            let after = self.world.effect_latency_us();
            self.world.send(
                Some(self.idx),
                Dest::Receiver,
                Some(self.who),
                Msg::Effect(msg),
                after,
            );
            if let Some(copy) = copy {
                self.event(What::EffectCallDuplicated);
                let after = self.world.effect_latency_us();
                self.world.send(
                    Some(self.idx),
                    Dest::Receiver,
                    Some(self.who),
                    Msg::Effect(copy),
                    after,
                );
            }
        }
        let wait = self.world.model.effect_timeout_us.unwrap_or(
            // Long enough for a round trip at the provider's worst latency.
            1_000_000 + 2 * self.world.sim.world.effect_latency_us.1,
        );
        match self.wait(clock::timeout_us(wait, mailbox.recv())).await {
            Some(Msg::Ack { ok: true, .. }) => Ok(()),
            Some(Msg::Ack { declined: true, .. }) => Err(Failure::Declined),
            Some(_) => {
                self.event(What::ProviderError);
                Err(Failure::Error(Why::ProviderError))
            }
            None => {
                self.event(What::EffectUnacknowledged);
                Err(Failure::Error(Why::EffectUnacknowledged))
            }
        }
    }

    /// A named point: run the sim's injections for it, in file order. An injected effect is
    /// for `intent`, deduplicated by `dedupe()`. A `fallback` effect (the operation's own call)
    /// does not run in a model with effect steps, nor for a request that created nothing
    /// (`created = false`: its row clashed with the business key). Returns whether the reply
    /// must be dropped.
    pub async fn point(
        &self,
        point: &str,
        intent: &str,
        created: bool,
        dedupe: impl Fn() -> Option<String>,
    ) -> Result<bool, Failure> {
        let sim = self.world.sim.clone();
        let req = self.req.map(|r| &sim.requests[r]);
        let mut drop_reply = false;
        for (i, inj) in sim.injects.iter().enumerate() {
            // `request` names a request as written in the file: all its intents, copies, attempts.
            let mine = match (&inj.request, req) {
                (None, _) => true,
                (Some(r), Some(q)) => *r == q.group || *r == q.id,
                (Some(_), None) => false,
            };
            let skip = matches!(inj.action, InjectAction::Effect { fallback: true })
                && (self.world.model.has_effects() || !created);
            if inj.point != point || !mine || skip {
                continue;
            }
            let spent = inj.times.is_some_and(|t| self.world.lock().inject_fired[i] >= t);
            if spent || !chance(inj.rate) {
                continue;
            }
            self.world.lock().inject_fired[i] += 1;
            self.event(What::Injected { point: point.to_string(), action: inj.action.name() });
            match &inj.action {
                InjectAction::Fail => {
                    return Err(Failure::Error(Why::Injected(point.to_string())));
                }
                InjectAction::Effect { .. } => self.effect(intent, dedupe()).await?,
                InjectAction::DropReply => drop_reply = true,
                InjectAction::Pause { us } => self.wait(clock::sleep_us(*us)).await,
                InjectAction::Stall { us } => {
                    control::stall_process(&self.world, self.idx, *us).await
                }
                InjectAction::ClockJump { us } => {
                    self.world.lock().processes[self.idx].clock_offset_us += us;
                }
                InjectAction::Crash { restart_us } => self.crash(*restart_us).await,
            }
        }
        Ok(drop_reply)
    }

    /// The random crash fault at a step boundary: with `faults.crash`'s probability, crash here.
    pub async fn maybe_crash(&self, site: impl FnOnce() -> CrashSite) {
        if chance(self.world.sim.faults.crash) {
            self.event(What::CrashFault(site()));
            self.crash(self.world.sim.faults.restart_us).await;
        }
    }

    /// Kill this process now; the control node restarts it after `restart_us`.
    pub async fn crash(&self, restart_us: u64) {
        control::crash_process(&self.world, self.idx, restart_us).await
    }
}
