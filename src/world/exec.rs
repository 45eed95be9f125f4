//! The step interpreter. A [`Runner`] is anything that runs on a server process (a request's
//! execution, or the outbox relay): it owns the process's event loop while it runs
//! synchronously, runs SQL statements waiting out a locked database in simulated time, calls
//! the effect receiver, fires the sim's injections at named points and crashes. An [`Exec`]
//! is one request's execution of the model's step program: every step kind is implemented
//! once, in [`Exec::step`].
//!
//! Interleaving happens only at awaits: `await` steps, driver latency under
//! `awaits = "every-statement"`, statement time (`statement_ms`), waiting out a locked
//! database, cache round trips, effects and injected pauses. A synchronous rusqlite call runs
//! to completion within one poll.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::task::Poll;

use madsim::rand::Rng;
use rusqlite::Connection;

use super::conn::Conn;
use super::keystore::{self, Abandoned, Takeover};
use super::net::{Dest, EffectMsg, Envelope, Mailbox, Msg};
use super::shared::{World, chance};
use super::{clock, control, store};
use crate::history::{Actor, CrashSite, Node, Refusal, Stmt, What, save_refused};
use crate::http::{self, Order, Reason, Response};
use crate::model::{
    Awaits, ClaimCleanup, ClaimConflict, EffectDedupe, Fingerprint, InFlight, KeyPolicy, KeyStore,
    OnClash, Replay, Rollback, Step, StoreOutcomes, VersionCheck,
};
use crate::report::Collected;
use crate::report::{KeyRecord, RecordState, Scope};
use crate::scenario::InjectAction;

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

/// The answer to a duplicate while the key's original is still in progress (409, 425, 202).
fn in_flight(status: u16) -> Response {
    Response::error(status, "request with this Idempotency-Key in progress")
        .meaning(Reason::InFlight)
}

/// One waiter for a free event loop, drawn from the seed, taken out of the waiters.
fn pick_waiter(p: &mut super::shared::ProcessState) -> Option<std::task::Waker> {
    if p.loop_waiters.is_empty() {
        return None;
    }
    use madsim::rand::Rng;
    let i = madsim::rand::thread_rng().gen_range(0..p.loop_waiters.len());
    let id = *p.loop_waiters.keys().nth(i).expect("in range");
    p.loop_waiters.remove(&id)
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

/// How often a request waiting for the original (`in_flight = "wait"`) looks again (µs).
const WAIT_POLL_US: u64 = 10_000;

/// A duration drawn uniformly from an inclusive range (µs); a fixed one draws nothing.
fn draw((lo, hi): (u64, u64)) -> u64 {
    if lo == hi { lo } else { madsim::rand::thread_rng().gen_range(lo..=hi) }
}

/// What a step asks of the program.
pub(crate) enum Flow {
    Next,
    Finish(Response),
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
        Runner {
            id: world.next_tag(),
            node: Node::Server(idx as u32),
            world,
            idx,
            conn,
            who,
            req,
            commit_rolled_back: std::cell::Cell::new(false),
        }
    }

    pub fn event(&self, what: What) {
        self.world.emit(self.node, Some(self.who), what);
    }

    /// A synchronous driver (`awaits = "explicit"`): code between awaits, statements and lock
    /// waits included, runs on the process's event loop and keeps its other requests out.
    fn sync_driver(&self) -> bool {
        self.world.model.driver.awaits == Awaits::Explicit
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
    /// wait until it is released; other processes run.
    async fn acquire_loop(&self) {
        let (idx, me) = (self.idx, self.id);
        // Leaves the waiters when dropped while waiting (its process crashed), handing the
        // loop on if it had been woken to take it.
        struct Waiting<'a>(&'a World, usize, u64);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                let next = {
                    let mut st = self.0.lock();
                    let p = &mut st.processes[self.1];
                    p.loop_waiters.remove(&self.2);
                    if p.loop_holder.is_none() { pick_waiter(p) } else { None }
                };
                if let Some(w) = next {
                    w.wake();
                }
            }
        }
        let _waiting = Waiting(&self.world, idx, me);
        std::future::poll_fn(|cx| {
            let mut st = self.world.lock();
            let p = &mut st.processes[idx];
            match p.loop_holder {
                None => {
                    p.loop_holder = Some(me);
                    p.loop_waiters.remove(&me);
                    Poll::Ready(())
                }
                Some(o) if o == me => Poll::Ready(()),
                Some(_) => {
                    p.loop_waiters.insert(me, cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// Give the event loop back (at an await) and wake one execution waiting for it, drawn
    /// from the seed: which ready callback a loop runs next is not ours to know. Waking one,
    /// not all, keeps a process with thousands of waiting requests linear.
    pub fn release_loop(&self) {
        let next = {
            let mut st = self.world.lock();
            let p = &mut st.processes[self.idx];
            if p.loop_holder != Some(self.id) {
                return;
            }
            p.loop_holder = None;
            pick_waiter(p)
        };
        if let Some(w) = next {
            w.wake();
        }
    }

    /// The driver's latency at an await: the event loop is free meanwhile. A latency of 0 is
    /// one event-loop turn (a scheduling point that takes no time).
    async fn driver_latency(&self) {
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
        self.hold().await;
        clock::yield_now().await;
        let driver = &self.world.model.driver;
        let took = draw(driver.statement_us);
        if took > 0 {
            clock::sleep_us(took).await;
        }
        let implicit = stmt.writes()
            && self.conn.is_autocommit()
            && (driver.commit_us.1 > 0 || self.world.sim.faults.commit_lost > 0.0);
        let commit_lost = self.world.sim.faults.commit_lost;
        if !implicit {
            let commit = matches!(stmt, Stmt::Commit | Stmt::CommitReadOnly);
            if commit && self.conn.wrote_since_begin() {
                self.sync_journal().await;
            }
            // Only a commit that wrote is ambiguous when its connection is lost.
            if commit && self.conn.wrote_since_begin() && chance(commit_lost) {
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

    /// The journal's sync at a commit that made writes durable (`driver.commit_ms`).
    async fn sync_journal(&self) {
        let us = draw(self.world.model.driver.commit_us);
        if us > 0 {
            clock::sleep_us(us).await;
        }
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
            match f(&self.conn) {
                Ok(v) => return Ok(v),
                Err(e) if store::is_busy(&e) => {
                    if !store::busy_asked() {
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

/// One request's execution of the model's program.
pub(crate) struct Exec {
    pub run: Runner,
    /// The logical operation (from the harness's correlation header).
    pub intent: String,
    pub order: Option<Order>,
    /// The request's key in its scope (None: no key, or the variant never reads it).
    pub key: Option<Scope>,
    pub fingerprint: String,
    pub row_id: Option<i64>,
    pub response: Option<Response>,
    pub claimed: bool,
    /// This request recorded its outcome under its claim.
    pub completed: bool,
    /// The completion was written inside a transaction not yet committed.
    pub completed_in_tx: bool,
    pub drop_reply: bool,
    /// A business refusal (`insert-row` met the business key, `take-stock` found it sold out):
    /// no new resource, so no insert, stock, effect or outbox step runs after it.
    pub clashed: bool,
    /// A takeover found a recovery point: the program continues at this step.
    pub resume_at: Option<usize>,
    /// The step index of the `begin` of the transaction now open (for `retry-transaction`).
    pub tx_begin_at: Option<usize>,
    /// The save of this execution's outcome under its claim failed (the store did not answer).
    pub save_failed: bool,
    /// Transactions run again so far.
    pub tx_retries: u32,
    /// The record found on read had expired and the model answers 410 (`on_expired = 410`).
    pub expired: bool,
    /// When the request was admitted: model time, and this process's clock (µs).
    pub admitted_us: u64,
    pub admitted_app_us: u64,
}

impl Exec {
    pub fn new(run: Runner, intent: String) -> Exec {
        Exec {
            run,
            intent,
            order: None,
            key: None,
            fingerprint: String::new(),
            row_id: None,
            response: None,
            claimed: false,
            completed: false,
            completed_in_tx: false,
            drop_reply: false,
            clashed: false,
            resume_at: None,
            tx_begin_at: None,
            save_failed: false,
            tx_retries: 0,
            expired: false,
            admitted_us: 0,
            admitted_app_us: 0,
        }
    }

    fn event(&self, what: What) {
        self.run.event(what);
    }

    /// Is a transaction this execution began still open on its connection? Only the
    /// execution that began a transaction commits or rolls it back: on a connection shared by
    /// a process's requests another request's transaction is not this one's to end (its
    /// statements may still land inside it, which is the shared connection's hazard).
    fn in_tx(&self) -> bool {
        self.run.conn.tx_owned_by(self.run.id)
    }

    fn world(&self) -> &World {
        &self.run.world
    }

    fn key_policy(&self) -> &KeyPolicy {
        self.run.world.model.key.as_ref().expect("key steps need a key policy (checked at load)")
    }

    /// A 2xx this execution produced itself (not a replay).
    pub fn fresh_success(&self, resp: &Response) -> bool {
        self.row_id.is_some() && (200..300).contains(&resp.status)
    }

    /// Admit the request, read its key, then run the program to a response.
    pub async fn serve(&mut self, env: &Envelope) -> Response {
        // The handler is a callback on the process's event loop.
        self.run.hold().await;
        (self.admitted_us, self.admitted_app_us) = (self.world().now_us(), self.app_now());
        // The fixed front half: route, authenticate, validate, then the key policy.
        let order = match http::admit(&env.http) {
            Ok(o) => o,
            Err(resp) => {
                let (status, body) = (resp.status, resp.body.clone());
                self.event(What::Rejected(Refusal::FrontHalf { status, body }));
                return resp;
            }
        };
        if let Err(resp) = self.read_key(env, &order) {
            return resp;
        }
        self.order = Some(order);
        let resp = self.run_program(0).await;
        // The last step boundary: the work is done, the reply not yet written (a process
        // that dies here leaves a committed outcome its client never hears of).
        self.run.maybe_crash(|| CrashSite::BeforeStep("reply".into())).await;
        resp
    }

    /// Run the model's program from step `at` to its end (or an early finish, or a failure).
    pub async fn run_program(&mut self, mut at: usize) -> Response {
        let model = self.run.world.model.clone();
        while let Some(step) = model.program.get(at) {
            match step {
                Step::Begin => self.tx_begin_at = Some(at),
                Step::Commit => {}
                _ => {}
            }
            at += 1;
            if !self.world().spend() {
                return self.fail(Failure::Bound).await;
            }
            if let Some(d) = model.driver.deadline_us
                && self.world().now_us() >= self.admitted_us.saturating_add(d)
            {
                return self.killed_at_deadline();
            }
            // A named point is a place in the program, not a step: no crash site of its own.
            if !matches!(step, Step::Point(_)) {
                self.run.maybe_crash(|| CrashSite::BeforeStep(step.name())).await;
            }
            if model.driver.awaits == Awaits::EveryStatement && self.runs_sql(step) {
                self.run.driver_latency().await;
            }
            match self.step(step).await {
                Ok(Flow::Next) => {
                    // A takeover inside a transaction resumes once that transaction committed.
                    if self.resume_at.is_some() && !self.in_tx() {
                        at = self.resume_at.take().expect("checked");
                    }
                }
                Ok(Flow::Finish(resp)) => {
                    if self.in_tx() {
                        // A lookup hit inside its own transaction: commit the (read-only)
                        // transaction.
                        let commit =
                            self.run.sql(Stmt::CommitReadOnly, |c| store::exec_cached(c, "COMMIT"));
                        if let Err(f) = commit.await {
                            return self.fail(f).await;
                        }
                        self.event(What::CommitNothingWritten);
                    }
                    return resp;
                }
                Err(Failure::Busy) if self.may_retry_transaction() => {
                    at = self.retry_transaction(at);
                }
                Err(f) => return self.fail(f).await,
            }
            if *step == Step::Commit {
                self.tx_begin_at = None;
            }
        }
        match self.response.take() {
            Some(r) => r,
            None => self.fail(Failure::Error(Why::NoResponse)).await,
        }
    }

    /// `[driver] deadline_ms` passed: the runtime kills the execution (a function's timeout).
    /// No error path runs: its claim stays as it is; the database rolls back what the dead
    /// connection had open; the caller (an API gateway) answers 502.
    fn killed_at_deadline(&mut self) -> Response {
        if self.in_tx() {
            let _ = store::exec_cached(&self.run.conn, "ROLLBACK");
        }
        self.event(What::DeadlineKilled);
        Response::error(502, "function timed out")
    }

    /// When a claim written now is leased until (this process's clock): `lease_ms` from now,
    /// or, with `lease_ms = "deadline"`, the execution's deadline.
    fn lease_until(&self) -> Option<u64> {
        let kp = self.key_policy();
        let lease = kp.lease_us?;
        Some(if kp.lease_to_deadline {
            self.admitted_app_us.saturating_add(lease)
        } else {
            self.app_now().saturating_add(lease)
        })
    }

    /// The key policy's checks on the `Idempotency-Key` header; sets the key and fingerprint.
    fn read_key(&mut self, env: &Envelope, order: &Order) -> Result<(), Response> {
        let Some(kp) = &self.run.world.model.key else { return Ok(()) };
        // A key derived from the payload (the header is not read).
        let derived = kp
            .key_from
            .as_ref()
            .map(|f| format!("payload:{}", http::sha256_hex(order.selected(f).as_bytes())));
        let header = match &derived {
            Some(d) => Some(d.as_str()),
            None => env.http.header(http::KEY_HEADER),
        };
        match header {
            None | Some("") if kp.required => {
                self.event(What::Rejected(Refusal::MissingKey));
                Err(Response::error(400, "missing Idempotency-Key"))
            }
            None | Some("") => Ok(()),
            Some(k) if derived.is_none() && k.chars().count() > kp.max_len => {
                self.event(What::Rejected(Refusal::KeyTooLong));
                Err(Response::error(400, "Idempotency-Key too long"))
            }
            Some(k) if derived.is_none() && k.chars().count() < kp.min_len => {
                self.event(What::Rejected(Refusal::KeyTooShort));
                Err(Response::error(400, "Idempotency-Key too short"))
            }
            Some(k) if derived.is_none() && kp.uuid && !http::is_uuid(k) => {
                self.event(What::Rejected(Refusal::KeyFormat));
                Err(Response::error(400, "Idempotency-Key is not a UUID"))
            }
            Some(k) => {
                self.key = Some(Scope {
                    user: match (kp.scope_tenant, kp.scope_user) {
                        (false, true) => order.user.clone(),
                        (false, false) => String::new(),
                        (true, u) => format!(
                            "{}/{}",
                            order.tenant.as_deref().unwrap_or(""),
                            if u { order.user.as_str() } else { "" }
                        ),
                    },
                    operation: if kp.scope_operation {
                        order.operation.to_string()
                    } else {
                        String::new()
                    },
                    key: k.to_string(),
                });
                self.fingerprint = match kp.fingerprint {
                    Fingerprint::Validated => match &kp.fingerprint_fields {
                        None => http::sha256_hex(order.canonical().as_bytes()),
                        Some(f) => http::sha256_hex(order.selected(f).as_bytes()),
                    },
                    Fingerprint::Raw => http::sha256_hex(&env.http.body),
                    Fingerprint::None => String::new(),
                };
                Ok(())
            }
        }
    }

    async fn step(&mut self, step: &Step) -> Result<Flow, Failure> {
        match step {
            Step::Await => {
                // An await yields the event loop, even inside a transaction (the hazard).
                self.run.driver_latency().await;
                Ok(Flow::Next)
            }
            Step::Begin => {
                let sql = self.run.world.model.driver.begin.sql();
                self.run.sql(Stmt::Begin, |c| store::exec_cached(c, sql)).await?;
                self.event(What::Begin { sql });
                Ok(Flow::Next)
            }
            Step::Commit => {
                self.run.sql(Stmt::Commit, |c| store::exec_cached(c, "COMMIT")).await?;
                self.completed_in_tx = false;
                self.event(What::Commit);
                Ok(Flow::Next)
            }
            Step::Lookup => {
                if self.key.is_none() {
                    return Ok(Flow::Next);
                }
                match self.key_lookup_live().await? {
                    None => {
                        self.event(What::LookupMiss);
                        Ok(Flow::Next)
                    }
                    // A failed record with this payload: take it back and run again.
                    Some(r)
                        if r.state == RecordState::Failed && r.fingerprint == self.fingerprint =>
                    {
                        self.event(What::FoundFailed);
                        self.retake_failed().await
                    }
                    Some(r) => self.on_hit(r).await,
                }
            }
            Step::Claim => self.claim().await,
            // After a business refusal (a clash, sold out) the request creates nothing more.
            Step::Effect
            | Step::Outbox
            | Step::TakeStock
            | Step::InsertRow
            | Step::UpdateDoc
            | Step::CheckRow
                if self.clashed =>
            {
                Ok(Flow::Next)
            }
            Step::InsertRow => {
                let o = self.order.clone().expect("admitted");
                let intent = self.intent.clone();
                let (now, exec) = (self.world().now_us(), self.run.id);
                let rows = self.world().model.rows.clone();
                let key = self.key.as_ref().map(|s| s.key.as_str());
                let natural = rows
                    .as_ref()
                    .and_then(|r| r.natural(&o.principal(), o.operation, &o.item, key));
                let constraint = rows.as_ref().is_none_or(|r| r.constraint);
                let id = self.world().next_row_id();
                let new = store::NewRow { id, intent: &intent, now_us: now, exec };
                let done = self
                    .run
                    .sql(Stmt::InsertRow, |c| {
                        store::insert_row(c, &o, &new, natural.as_deref(), constraint)
                    })
                    .await?;
                match done {
                    store::RowInsert::Inserted(id) => {
                        self.event(What::RowInserted { row: id });
                        self.row_id = Some(id);
                        self.response = Some(Response::new(201, o.created_body(id)));
                    }
                    store::RowInsert::Clash(id, _, _, false)
                        if rows.as_ref().is_some_and(|r| r.on_clash == OnClash::Unprocessed) =>
                    {
                        self.event(What::RowTaken { row: id });
                        self.row_id = Some(id);
                        self.response = Some(Response::new(201, o.created_body(id)));
                    }
                    store::RowInsert::Clash(id, item, qty, _) => {
                        self.event(What::RowClash { row: id });
                        self.business_clash(id, &item, qty);
                    }
                }
                Ok(Flow::Next)
            }
            Step::RateLimit => {
                let Some((rate, burst)) = self.world().model.rate_limit else {
                    return Ok(Flow::Next);
                };
                let now = self.world().now_us();
                let took = {
                    let mut st = self.world().lock();
                    let p = &mut st.processes[self.run.idx];
                    // Micro-tokens: `rate` per second is `rate` micro-tokens per µs.
                    let cap = burst * 1_000_000;
                    let (left, at) = p.bucket.unwrap_or((cap, now));
                    let left =
                        cap.min(left.saturating_add(now.saturating_sub(at).saturating_mul(rate)));
                    let took = left >= 1_000_000;
                    p.bucket = Some((if took { left - 1_000_000 } else { left }, now));
                    took
                };
                self.event(What::RateLimited { allowed: took });
                if took { Ok(Flow::Next) } else { Err(Failure::RateLimited) }
            }
            Step::MarkProcessed => {
                let (Some(row), now) = (self.row_id, self.world().now_us()) else {
                    return Ok(Flow::Next);
                };
                self.run.sql(Stmt::MarkProcessed, |c| store::mark_processed(c, row, now)).await?;
                self.event(What::RowProcessed { row });
                Ok(Flow::Next)
            }
            Step::CheckRow => {
                let o = self.order.clone().expect("admitted");
                let key = self.key.as_ref().map(|s| s.key.as_str());
                let rows = self.world().model.rows.clone();
                let Some(natural) = rows
                    .as_ref()
                    .and_then(|r| r.natural(&o.principal(), o.operation, &o.item, key))
                else {
                    return Ok(Flow::Next);
                };
                match self.run.sql(Stmt::CheckRow, |c| store::find_row(c, &natural)).await? {
                    None => self.event(What::RowAbsent),
                    Some((id, item, qty)) => {
                        self.event(What::RowFound { row: id });
                        self.business_clash(id, &item, qty);
                    }
                }
                Ok(Flow::Next)
            }
            Step::SaveResponse => {
                let Some(resp) = self.response.clone() else {
                    return Err(Failure::Error(Why::SaveBeforeInsert));
                };
                self.save(resp.status, &resp.body).await?;
                Ok(Flow::Next)
            }
            Step::ApplyStatus => {
                let o = self.order.clone().expect("admitted");
                let (intent, monotonic) =
                    (self.intent.clone(), self.world().model.events_monotonic);
                let applied = self
                    .run
                    .sql(Stmt::ApplyStatus, |c| {
                        store::apply_status(c, &o.item, o.qty, &intent, monotonic)
                    })
                    .await?;
                let status = http::status_name(o.qty);
                self.event(What::StatusApplied { resource: o.item.clone(), status, applied });
                self.response = Some(Response::new(200, o.event_body()));
                Ok(Flow::Next)
            }
            Step::UpdateDoc => {
                let o = self.order.clone().expect("admitted");
                let check = self.world().model.version_check;
                let stamp = match (check, o.client_time) {
                    (VersionCheck::ClientTime, None) if o.operation == "doc.update" => {
                        self.refuse_update(&o, 428, None);
                        return Ok(Flow::Next);
                    }
                    (VersionCheck::ClientTime, t) => t,
                    _ => None,
                };
                let condition = match (check, o.if_match) {
                    (VersionCheck::None | VersionCheck::ClientTime, _)
                    | (VersionCheck::IfMatch, None) => None,
                    (_, Some(v)) => Some(v),
                    (VersionCheck::Required, None) => {
                        self.refuse_update(&o, 428, None);
                        return Ok(Flow::Next);
                    }
                };
                let intent = self.intent.clone();
                let delete = o.operation == "doc.delete";
                let w = self
                    .run
                    .sql(Stmt::UpdateDoc, |c| match (delete, stamp) {
                        (true, _) => store::delete_doc(c, &o.item, &intent, condition),
                        (false, Some(t)) => {
                            store::update_doc_stamped(c, &o.item, o.qty, &intent, t)
                        }
                        (false, None) => store::update_doc(c, &o.item, o.qty, &intent, condition),
                    })
                    .await?;
                match w {
                    store::DocWrite::Updated(version) if delete => {
                        self.event(What::DocDeleted { doc: o.item.clone(), version });
                        self.response = Some(Response::new(204, ""));
                    }
                    store::DocWrite::Missing if delete && self.world().model.delete_missing_ok => {
                        self.event(What::DocDeleted { doc: o.item.clone(), version: 0 });
                        self.response = Some(Response::new(204, ""));
                    }
                    store::DocWrite::Updated(version) => {
                        let (doc, value) = (o.item.clone(), o.qty);
                        self.event(What::DocUpdated { doc, version, value });
                        self.response = Some(o.updated(version));
                    }
                    // A stamp not newer than the stored one: ignored, and still 200.
                    store::DocWrite::Stale(current) if stamp.is_some() => {
                        let (doc, stamp) = (o.item.clone(), stamp.unwrap_or_default());
                        self.event(What::DocIgnored { doc, stamp, current });
                        self.response = Some(o.updated(current));
                    }
                    store::DocWrite::Stale(current) => self.refuse_update(&o, 412, Some(current)),
                    store::DocWrite::Missing => self.refuse_update(&o, 404, None),
                }
                Ok(Flow::Next)
            }
            Step::TakeStock => {
                let o = self.order.clone().expect("admitted");
                let took =
                    self.run.sql(Stmt::TakeStock, |c| store::take_stock(c, &o.item, o.qty)).await?;
                if took {
                    self.event(What::StockTaken { item: o.item.clone(), units: o.qty });
                } else {
                    // A business refusal: nothing more is created; the rest of the program
                    // stores the answer under the key and commits.
                    self.event(What::SoldOut { item: o.item.clone() });
                    self.clashed = true;
                    self.response = Some(Response::error(422, "sold out"));
                }
                Ok(Flow::Next)
            }
            Step::RecoveryPoint(point) => {
                if !self.claimed {
                    return Ok(Flow::Next);
                }
                let (s, me, row) = (self.scope(), self.run.id, self.row_id);
                self.run
                    .sql(Stmt::RecoveryPoint, |c| {
                        keystore::sql_save_recovery(c, &s, me, point, row)
                    })
                    .await?;
                self.event(What::RecoveryPointSaved { point: point.clone() });
                Ok(Flow::Next)
            }
            Step::Effect => {
                self.run.effect(&self.intent, self.effect_key()).await?;
                Ok(Flow::Next)
            }
            Step::Outbox => {
                let (intent, dedupe, now) =
                    (self.intent.clone(), self.effect_key(), self.world().now_us());
                let id = self
                    .run
                    .sql(Stmt::Outbox, |c| store::insert_outbox(c, &intent, dedupe.as_deref(), now))
                    .await?;
                self.event(What::OutboxQueued { message: id });
                Ok(Flow::Next)
            }
            Step::Point(p) => {
                if self.run.point(p, &self.intent, !self.clashed, || self.effect_key()).await? {
                    self.drop_reply = true;
                }
                Ok(Flow::Next)
            }
        }
    }

    /// `retry-transaction`: a busy database inside a transaction, with retries left.
    fn may_retry_transaction(&self) -> bool {
        let model = &self.run.world.model;
        model.on_error.retry_transaction
            && self.tx_begin_at.is_some()
            && self.tx_retries < model.transaction_retries
    }

    /// Roll the transaction back and forget what it did, as the retry loop of a driver or ORM
    /// does; what it did outside the database (an effect) stays done. The `begin` to run again.
    fn retry_transaction(&mut self, failed_before: usize) -> usize {
        if self.in_tx() {
            let _ = store::exec_cached(&self.run.conn, "ROLLBACK");
        }
        self.tx_retries += 1;
        let of = self.run.world.model.transaction_retries;
        self.event(What::TransactionRetried { attempt: self.tx_retries, of });
        if self.completed_in_tx {
            self.completed = false;
            self.completed_in_tx = false;
        }
        self.row_id = None;
        self.response = None;
        self.clashed = false;
        let begin = self.tx_begin_at.take().expect("checked");
        // A claim made inside the transaction was rolled back with it.
        let program = &self.run.world.model.program;
        if program[begin..failed_before].contains(&Step::Claim) {
            self.claimed = false;
        }
        begin
    }

    /// The completer: take the abandoned claim over and run its program on from its recovery
    /// point, as the request that was abandoned would have; the outcome is stored under the
    /// key like any request's, and the reply goes nowhere. The status, if it took the claim.
    pub async fn complete_abandoned(&mut self, a: Abandoned) -> Option<u16> {
        let next = self.world().model.resume_index(&a.point)?;
        let (s, now) = (a.scope.clone(), self.app_now());
        let lease = self.key_policy().lease_us.unwrap_or(0);
        let t = Takeover {
            me: self.run.id,
            until_us: now.saturating_add(lease),
            now_us: now,
            old_token: a.token,
        };
        let took = self.run.sql(Stmt::Claim, |c| keystore::sql_takeover(c, &s, t)).await.ok()?;
        if !took {
            return None;
        }
        self.event(What::CompleterTookOver { intent: a.intent.clone(), key: a.scope.key.clone() });
        (self.admitted_us, self.admitted_app_us) = (self.world().now_us(), now);
        self.key = Some(a.scope);
        self.fingerprint = a.fingerprint;
        self.claimed = true;
        self.row_id = Some(a.row);
        self.response = Some(Response::new(201, a.order.created_body(a.row)));
        self.order = Some(a.order);
        self.event(What::Resumed { point: a.point, row: Some(a.row) });
        let resp = self.run_program(next).await;
        self.event(What::CompleterFinished { status: resp.status });
        Some(resp.status)
    }

    /// After a takeover: continue after the recovery point the claim remembers (with its
    /// row and the reply it implies), if any.
    async fn resume(&mut self) -> Result<(), Failure> {
        let s = self.scope();
        let Some((point, row)) =
            self.run.sql(Stmt::RecoveryPoint, |c| keystore::sql_recovery(c, &s)).await?
        else {
            return Ok(());
        };
        let Some(next) = self.world().model.resume_index(&point) else { return Ok(()) };
        if let (Some(id), Some(o)) = (row, &self.order) {
            self.row_id = Some(id);
            self.response = Some(Response::new(201, o.created_body(id)));
        }
        self.event(What::Resumed { point, row });
        self.resume_at = Some(next);
        Ok(())
    }

    /// A `failed` record with this request's payload: take it back as this request's claim
    /// (`UPDATE … SET state = 'in-progress' WHERE state = 'failed'`) and run the program.
    /// Another retry that took it back first makes this one a duplicate in flight (409).
    async fn retake_failed(&mut self) -> Result<Flow, Failure> {
        let (s, me) = (self.scope(), self.run.id);
        let lease = self.lease_until();
        let took =
            self.run.sql(Stmt::Claim, |c| keystore::sql_retake_failed(c, &s, me, lease)).await?;
        if !took {
            self.event(What::AlreadyClaimed);
            return Ok(Flow::Finish(in_flight(409)));
        }
        self.claimed = true;
        self.event(What::RetookFailed);
        Ok(Flow::Next)
    }

    /// `claim`: insert an in-progress record if none exists; a conflict is answered like a
    /// lookup hit, unless the record's lease expired and this request can take it over.
    /// (A request that took a failed record back at its lookup has its claim already.)
    async fn claim(&mut self) -> Result<Flow, Failure> {
        if self.key.is_none() || self.claimed {
            return Ok(Flow::Next);
        }
        if self.key_claim().await? {
            self.claimed = true;
            self.event(What::Claimed);
            return Ok(Flow::Next);
        }
        if self.key_policy().claim_conflict == ClaimConflict::Error {
            self.event(What::ClaimUniqueFailed);
            return Err(Failure::Error(Why::ClaimUnique));
        }
        match self.key_lookup_live().await? {
            Some(rec)
                if rec.state == RecordState::Failed && rec.fingerprint == self.fingerprint =>
            {
                self.retake_failed().await
            }
            Some(rec) => {
                let now = self.app_now();
                let expired = rec.state == RecordState::InProgress
                    && rec.lease_until_us.is_some_and(|l| l <= now);
                if expired && rec.fingerprint == self.fingerprint && self.key_takeover(&rec).await?
                {
                    self.claimed = true;
                    self.event(What::TookOver);
                    if self.world().model.has_recovery_points() {
                        self.resume().await?;
                    }
                    return Ok(Flow::Next);
                }
                self.event(What::AlreadyClaimed);
                self.on_hit(rec).await
            }
            // The record had expired and was deleted on read: claim the key anew (once).
            None if self.key_policy().expire_on_read && self.key_claim().await? => {
                self.claimed = true;
                self.event(What::Claimed);
                Ok(Flow::Next)
            }
            None => {
                self.event(What::ClaimGone);
                Ok(Flow::Finish(
                    Response::error(409, "request in progress").meaning(Reason::InFlight),
                ))
            }
        }
    }

    /// The business key is taken by row `id`: the `[rows] on_clash` answer becomes the pending
    /// reply (`save-response` stores it under the key like a 201) and nothing more is created.
    fn business_clash(&mut self, id: i64, item: &str, qty: i64) {
        self.clashed = true;
        let on_clash = self.world().model.rows.as_ref().map_or(OnClash::Conflict, |r| r.on_clash);
        self.response = Some(match on_clash {
            OnClash::Conflict => Response::taken(),
            OnClash::Acknowledge => Response::new(200, r#"{"status":"already exists"}"#),
            OnClash::Unprocessed => Response::new(200, r#"{"status":"already processed"}"#),
            OnClash::Existing => {
                Response::new(200, format!("{{\"id\":{id},\"item\":\"{item}\",\"qty\":{qty}}}"))
            }
        });
    }

    /// A document update refused (412 stale, 428 no `If-Match`, 404 no document): a business
    /// refusal; nothing more is written, the rest of the program stores the answer.
    fn refuse_update(&mut self, o: &Order, status: u16, current: Option<i64>) {
        let (doc, if_match) = (o.item.clone(), o.if_match);
        self.event(What::DocRefused { doc, status, if_match, current });
        self.clashed = true;
        let resp = match status {
            412 => Response::error(412, "version mismatch").meaning(Reason::Precondition),
            428 => Response::error(428, "If-Match required").meaning(Reason::Precondition),
            _ => Response::error(status, "not found"),
        };
        self.response = Some(resp);
    }

    /// Does the step run an SQL statement? (A key step on a cache or in memory does not.)
    fn runs_sql(&self, step: &Step) -> bool {
        let key_step = matches!(step, Step::Lookup | Step::Claim | Step::SaveResponse);
        step.is_statement() && !(key_step && self.store_kind() != KeyStore::Sqlite)
    }

    /// The key the effect receiver deduplicates this request's effect by (model's choice).
    fn effect_key(&self) -> Option<String> {
        match self.run.world.model.effect_dedupe {
            EffectDedupe::None => None,
            EffectDedupe::Key => {
                self.key.as_ref().map(|s| format!("key:{}/{}/{}", s.user, s.operation, s.key))
            }
            EffectDedupe::Payload => self.order.as_ref().map(|o| {
                let input = format!("{}|{}|{}", o.user, o.operation, o.canonical());
                format!("payload:{}", http::sha256_hex(input.as_bytes()))
            }),
            EffectDedupe::Row => self.row_id.map(|id| format!("row:{id}")),
        }
    }

    /// A stored record was found: replay, mismatch, or in flight.
    async fn on_hit(&mut self, mut rec: KeyRecord) -> Result<Flow, Failure> {
        let kp = self.key_policy().clone();
        if self.expired {
            self.event(What::ExpiredGone);
            return Ok(Flow::Finish(
                Response::error(410, "Idempotency-Key expired").meaning(Reason::Expired),
            ));
        }
        if rec.fingerprint != self.fingerprint {
            self.event(What::Mismatch { status: kp.on_mismatch });
            return Ok(Flow::Finish(
                Response::error(kp.on_mismatch, "Idempotency-Key reused with a different payload")
                    .meaning(Reason::Mismatch),
            ));
        }
        if rec.state != RecordState::Done {
            match kp.in_flight {
                InFlight::Status(s) => {
                    self.event(What::InFlight { status: s });
                    return Ok(Flow::Finish(in_flight(s)));
                }
                InFlight::Proceed => {
                    self.event(What::InFlightIgnored);
                    return Ok(Flow::Next);
                }
                InFlight::Wait => match self.wait_for_original().await? {
                    Some(done) => rec = done,
                    None => {
                        return Ok(Flow::Finish(in_flight(409)));
                    }
                },
            }
        }
        if let Replay::Status(s) = kp.replay {
            self.event(What::HitCompleted { status: s });
            return Ok(Flow::Finish(
                Response::error(s, "request with this Idempotency-Key already processed")
                    .meaning(Reason::AlreadyDone),
            ));
        }
        let status = rec.status.unwrap_or(500) as u16;
        self.event(What::Replayed { status });
        let mut resp = Response::new(status, rec.response.unwrap_or_default());
        // A stored business refusal keeps its meaning when it is replayed.
        if status == 409 && resp.body == Response::taken().body {
            resp.meta.reason = Some(Reason::Taken);
        }
        resp.headers.push((kp.replay_marker.clone(), "true".into()));
        Ok(Flow::Finish(resp))
    }

    /// `in_flight = "wait"`: poll the record every 10 ms up to the wait budget; the completed
    /// record, or None (gone, or still in progress at the budget).
    async fn wait_for_original(&mut self) -> Result<Option<KeyRecord>, Failure> {
        self.event(What::WaitingForOriginal);
        let mut waited = 0;
        loop {
            if waited >= self.world().wait_budget_us {
                return Ok(None);
            }
            if !self.world().spend() {
                return Err(Failure::Bound);
            }
            self.run.wait(clock::sleep_us(WAIT_POLL_US)).await;
            waited += WAIT_POLL_US;
            match self.key_lookup().await? {
                Some(r) if r.state == RecordState::Done => return Ok(Some(r)),
                // The original failed: nothing to replay; the client may retry.
                Some(r) if r.state == RecordState::Failed => return Ok(None),
                Some(_) => {}
                None => return Ok(None),
            }
        }
    }

    /// Record (status, body) under the key: complete our claim, or insert a new record.
    async fn save(&mut self, status: u16, body: &str) -> Result<(), Failure> {
        if self.key.is_none() {
            return Ok(());
        }
        if self.claimed {
            let done = self.key_complete(status, body).await;
            self.save_failed = done.is_err();
            if done? == 0 {
                let fencing = self.key_policy().fencing;
                self.event(What::SaveRefused { fencing });
                return Err(Failure::Error(Why::SaveRefused { fencing }));
            }
            self.event(What::ClaimCompleted { status });
            self.completed = true;
            self.completed_in_tx = !self.run.conn.is_autocommit();
        } else {
            self.key_insert(Stmt::SaveResponse, self.new_record(Some((status, body))), false)
                .await?;
            self.event(What::Stored { status });
        }
        // `local_cache`: keep a copy once the record is durable (outside a transaction).
        if self.key_policy().local_cache
            && (self.store_kind() != KeyStore::Sqlite || self.run.conn.is_autocommit())
        {
            let s = self.scope();
            self.local_put(&s, self.new_record(Some((status, body))));
        }
        Ok(())
    }

    /// The error path: roll back if the model says so, record the error if the model stores
    /// all outcomes, answer 503 (busy) or 500.
    async fn fail(&mut self, f: Failure) -> Response {
        let model = self.run.world.model.clone();
        // A completion that was never committed is undone: by the rollback below or by the
        // end of the connection's transaction, or by a COMMIT lost and rolled back. The error
        // path then treats the claim as the database holds it (in progress), as its
        // conditional SQL (`WHERE state = 'in-progress' AND token = own`) would.
        if self.completed
            && self.completed_in_tx
            && (!self.run.conn.is_autocommit() || self.run.commit_rolled_back.get())
        {
            self.completed = false;
        }
        self.roll_back_on_error();
        let declined = matches!(f, Failure::Declined);
        let provider_failed =
            matches!(f, Failure::Error(Why::ProviderError | Why::EffectUnacknowledged));
        let resp = match f {
            Failure::Busy => {
                Response::error(503, "database busy, safe to retry").meaning(Reason::SafeToRetry)
            }
            // The design answers a failed dependency call with a final 503 of its own.
            Failure::Error(why)
                if provider_failed && model.store_outcomes == StoreOutcomes::Dependency =>
            {
                self.event(What::Failed { why: why.to_string() });
                Response::error(503, "error from payment processor")
            }
            Failure::Error(why) => {
                self.event(What::Failed { why: why.to_string() });
                Response::error(500, "internal error")
            }
            Failure::Bound => Response::error(500, "internal error"),
            Failure::Declined => {
                self.event(What::Failed { why: "the provider declined".into() });
                Response::error(402, "declined")
            }
            Failure::RateLimited => {
                let mut r = Response::error(429, "rate limited");
                r.headers.push(("Retry-After".into(), "1".into()));
                r
            }
            Failure::StoreUnavailable => match self.key.as_ref().map(|_| self.key_policy()) {
                // The design fails closed on purpose: nothing was done, retry.
                Some(kp) if kp.on_store_error == 503 => {
                    Response::error(503, "key store unavailable, safe to retry")
                        .meaning(Reason::SafeToRetry)
                }
                Some(kp) => {
                    self.event(What::Failed { why: "the key store failed".into() });
                    Response::error(kp.on_store_error, "internal error")
                }
                None => Response::error(500, "internal error"),
            },
        };
        // A save of the outcome that failed, in a design that then leaves its claim alone.
        let keep = self.save_failed && model.key.as_ref().is_some_and(|k| k.keep_on_failed_save);
        if keep {
            self.event(What::ClaimKept);
            return resp;
        }
        let store = match model.store_outcomes {
            StoreOutcomes::All => true,
            StoreOutcomes::Refusals => declined,
            StoreOutcomes::Dependency => declined || provider_failed,
            StoreOutcomes::Success => false,
        };
        self.clean_up_claim(store, &resp).await;
        resp
    }

    /// The error path's ROLLBACK, as the model says: of this request's own transaction, or of
    /// whatever transaction the connection has open (`rollback-any`).
    fn roll_back_on_error(&mut self) {
        let mine = self.in_tx();
        match self.run.world.model.on_error.rollback {
            Rollback::Own if mine => {
                let _ = store::exec_cached(&self.run.conn, "ROLLBACK");
                self.event(What::Rollback);
            }
            // The design's own unconditional ROLLBACK: whoever began the transaction.
            Rollback::Any if !self.run.conn.is_autocommit() => {
                let _ = store::exec_cached(&self.run.conn, "ROLLBACK");
                self.event(if mine { What::Rollback } else { What::RollbackOthers });
            }
            _ => {}
        }
    }

    /// The error path's work on this request's claim, if it holds one it has not completed:
    /// store the failure as the key's outcome (`store`), or the model's `on_error` clean-up
    /// (release it, mark it failed, or unlock it for a takeover).
    async fn clean_up_claim(&mut self, store: bool, resp: &Response) {
        if !self.claimed || self.completed {
            return;
        }
        if store {
            let _ = self.save(resp.status, &resp.body.clone()).await;
            return;
        }
        let (s, me) = (self.scope(), self.run.id);
        match self.run.world.model.on_error.claim {
            ClaimCleanup::Keep => {}
            ClaimCleanup::Release => {
                if let Ok(n) = self.key_release().await {
                    self.event(What::ClaimReleased { n });
                }
            }
            ClaimCleanup::ReleaseKey => {
                if let Ok(n) = self.key_release().await {
                    self.event(What::KeyReleased { n });
                }
            }
            ClaimCleanup::MarkFailed => {
                let marked =
                    self.run.sql(Stmt::MarkFailed, |c| keystore::sql_mark_failed(c, &s, me)).await;
                if let Ok(n) = marked {
                    self.event(What::MarkedFailed { n });
                }
            }
            ClaimCleanup::Unlock => {
                let unlocked =
                    self.run.sql(Stmt::Unlock, |c| keystore::sql_unlock(c, &s, me)).await;
                if let Ok(n) = unlocked {
                    self.event(What::ClaimUnlocked { n });
                }
            }
        }
    }

    // ---- key records, in the model's store ----

    fn scope(&self) -> Scope {
        self.key.clone().expect("key present")
    }

    fn store_kind(&self) -> KeyStore {
        self.run.world.model.key.as_ref().map(|k| k.store).unwrap_or(KeyStore::Sqlite)
    }

    /// Run `f` on the map that holds this request's records. Process memory answers at
    /// once. The cache is a network round trip (an await) through its faults: refused at
    /// once, unreachable from a partitioned process (the client times out), restarted empty or
    /// the key evicted before its TTL, the operation applied but its reply lost; expired
    /// records are dropped first. A record that disappears is recorded as collected.
    async fn on_map<T>(
        &self,
        scope: &Scope,
        f: impl FnOnce(&mut BTreeMap<Scope, KeyRecord>) -> T,
    ) -> Result<T, Failure> {
        let kp = self.key_policy();
        if kp.store != KeyStore::Cache {
            let mut st = self.world().lock();
            return Ok(f(&mut st.processes[self.run.idx].memory));
        }
        let faults = &self.world().sim.faults.cache;
        if chance(faults.unavailable) {
            self.event(What::CacheRefused);
            return Err(Failure::StoreUnavailable);
        }
        if self.world().is_partitioned(self.run.idx) {
            self.event(What::CacheUnreachable);
            self.run.wait(clock::sleep_us(kp.store_timeout_us)).await;
            return Err(Failure::StoreUnavailable);
        }
        self.run.wait(clock::sleep_us(draw(kp.store_latency_us))).await;
        let (restart, evict) = (chance(faults.restart), chance(faults.evict));
        let now = self.world().now_us();
        let (out, evicted) = {
            let mut st = self.world().lock();
            let st = &mut *st;
            if restart {
                st.collected.extend(st.cache.iter().map(|(s, r)| Collected::of(s, r, now)));
                st.cache.clear();
            }
            if let Some(ttl) = kp.retention_us {
                keystore::map_expire(&mut st.cache, ttl, now, &mut st.collected);
            }
            let evicted = if evict { st.cache.remove(scope) } else { None };
            if let Some(r) = &evicted {
                st.collected.push(Collected::of(scope, r, now));
            }
            (f(&mut st.cache), evicted.is_some())
        };
        if restart {
            self.event(What::CacheRestarted);
        }
        if evicted {
            self.event(What::CacheEvicted);
        }
        if chance(faults.reply_drop) {
            self.event(What::CacheReplyLost);
            let rest = kp.store_timeout_us.saturating_sub(kp.store_latency_us.1);
            self.run.wait(clock::sleep_us(rest)).await;
            return Err(Failure::StoreUnavailable);
        }
        Ok(out)
    }

    async fn key_lookup(&self) -> Result<Option<KeyRecord>, Failure> {
        let s = self.scope();
        let local = self.key_policy().local_cache;
        if local && let Some(r) = self.local_get(&s) {
            self.event(What::LocalCacheHit);
            return Ok(Some(r));
        }
        let found = if self.store_kind() != KeyStore::Sqlite {
            self.on_map(&s, |m| keystore::map_lookup(m, &s)).await?
        } else {
            self.run.sql(Stmt::Lookup, |c| keystore::sql_lookup(c, &s)).await?
        };
        if local && let Some(r) = found.as_ref().filter(|r| r.state == RecordState::Done) {
            self.local_put(&s, r.clone());
        }
        Ok(found)
    }

    /// `local_cache`: this process's copy of a completed record, unless it has expired.
    fn local_get(&self, s: &Scope) -> Option<KeyRecord> {
        let now = if self.store_kind() == KeyStore::Cache {
            self.world().now_us()
        } else {
            self.app_now()
        };
        let ttl = self.key_policy().retention_us;
        let mut st = self.world().lock();
        let local = &mut st.processes[self.run.idx].local;
        match local.get(s) {
            Some(r) if ttl.is_none_or(|t| r.created_us.saturating_add(t) > now) => Some(r.clone()),
            Some(_) => {
                local.remove(s);
                None
            }
            None => None,
        }
    }

    fn local_put(&self, s: &Scope, r: KeyRecord) {
        self.world().lock().processes[self.run.idx].local.insert(s.clone(), r);
    }

    /// A lookup that honours a per-record expiry (`expiry = "on-read"`): a record whose
    /// `created_us + retention` has passed on this process's clock is deleted (the deletion
    /// counts as a collection) and reads as absent; with `on_expired = 410` it stays, as a
    /// tombstone that `on_hit` answers 410 Gone.
    async fn key_lookup_live(&mut self) -> Result<Option<KeyRecord>, Failure> {
        let rec = self.key_lookup().await?;
        let kp = self.key_policy();
        let (Some(r), true, Some(retention)) = (&rec, kp.expire_on_read, kp.retention_us) else {
            return Ok(rec);
        };
        if r.created_us.saturating_add(retention) > self.app_now() {
            return Ok(rec);
        }
        if kp.expired_gone {
            self.expired = true;
            return Ok(rec);
        }
        let (s, created) = (self.scope(), r.created_us);
        let n =
            self.run.sql(Stmt::Lookup, |c| keystore::sql_delete_expired(c, &s, created)).await?;
        if n > 0 {
            let now = self.world().now_us();
            self.world().lock().collected.push(Collected::of(&s, r, now));
            self.event(What::KeyExpired { intent: r.intent.clone() });
        }
        Ok(None)
    }

    /// The time on this process's clock (µs): what the application computes leases with.
    fn app_now(&self) -> u64 {
        self.world().process_clock_us(self.run.idx)
    }

    /// A new record for this request, in progress (a claim) or done (a saved response). Its
    /// lease is on the process's clock; its creation time too, except in a cache, whose TTL
    /// runs on the cache's own clock (`SET … EX` is relative).
    fn new_record(&self, done: Option<(u16, &str)>) -> KeyRecord {
        let now = self.app_now();
        let created =
            if self.store_kind() == KeyStore::Cache { self.world().now_us() } else { now };
        let lease_until = self.lease_until();
        KeyRecord {
            fingerprint: self.fingerprint.clone(),
            status: done.map(|d| d.0 as i64),
            response: done.map(|d| d.1.to_string()),
            state: if done.is_some() { RecordState::Done } else { RecordState::InProgress },
            created_us: created,
            lease_until_us: if done.is_none() { lease_until } else { None },
            token: Some(self.run.id),
            intent: self.intent.clone(),
        }
    }

    async fn key_insert(&self, stmt: Stmt, rec: KeyRecord, claim: bool) -> Result<bool, Failure> {
        let s = self.scope();
        if self.store_kind() != KeyStore::Sqlite {
            return self.on_map(&s, |m| keystore::map_insert(m, &s, rec, claim)).await;
        }
        self.run.sql(stmt, |c| keystore::sql_insert(c, &s, &rec, claim)).await
    }

    /// Insert this request's in-progress claim if no record exists. `true`: claimed.
    async fn key_claim(&self) -> Result<bool, Failure> {
        if self.key_policy().claim_conflict == ClaimConflict::Overwrite {
            let (s, rec) = (self.scope(), self.new_record(None));
            if self.store_kind() != KeyStore::Sqlite {
                return self.on_map(&s, |m| keystore::map_insert(m, &s, rec, false)).await;
            }
            return self.run.sql(Stmt::Claim, |c| keystore::sql_replace(c, &s, &rec)).await;
        }
        self.key_insert(Stmt::Claim, self.new_record(None), true).await
    }

    /// Take over an in-progress claim whose lease has expired (compare-and-set on its token).
    async fn key_takeover(&self, old: &KeyRecord) -> Result<bool, Failure> {
        let now = self.app_now();
        let t = Takeover {
            me: self.run.id,
            until_us: self.lease_until().unwrap_or(now),
            now_us: now,
            old_token: old.token,
        };
        let s = self.scope();
        if self.store_kind() != KeyStore::Sqlite {
            return self.on_map(&s, |m| keystore::map_takeover(m, &s, t)).await;
        }
        self.run.sql(Stmt::Claim, |c| keystore::sql_takeover(c, &s, t)).await
    }

    /// Complete this request's claim with its outcome. With fencing, only while this request
    /// still owns the claim. Returns the number of records updated.
    async fn key_complete(&self, status: u16, body: &str) -> Result<usize, Failure> {
        let fencing = self.key_policy().fencing;
        let (me, s) = (self.run.id, self.scope());
        if self.store_kind() != KeyStore::Sqlite {
            let rec = self.new_record(Some((status, body)));
            return self.on_map(&s, |m| keystore::map_complete(m, &s, rec, fencing, me)).await;
        }
        self.run
            .sql(Stmt::SaveResponse, |c| keystore::sql_complete(c, &s, status, body, fencing, me))
            .await
    }

    /// Delete this request's own in-progress claim (on error, so a retry can run).
    async fn key_release(&self) -> Result<usize, Failure> {
        let (me, s) = (self.run.id, self.scope());
        let any = self.run.world.model.on_error.claim == ClaimCleanup::ReleaseKey;
        if self.store_kind() != KeyStore::Sqlite {
            return self
                .on_map(&s, |m| {
                    if any {
                        m.remove(&s).map_or(0, |_| 1)
                    } else {
                        keystore::map_release(m, &s, me)
                    }
                })
                .await;
        }
        if any {
            return self.run.sql(Stmt::ReleaseClaim, |c| keystore::sql_release_any(c, &s)).await;
        }
        self.run.sql(Stmt::ReleaseClaim, |c| keystore::sql_release(c, &s, me)).await
    }
}
