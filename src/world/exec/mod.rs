//! One request's execution of the model's step program ([`Exec`]): every step kind is
//! implemented once, [`Exec::step`] being a short dispatch to it. The key protocol (claim, hit,
//! wait, save, clean-up on failure, the key store behind one helper) is in `keys.rs`; the
//! business steps (rows, stock, documents, status events, the outbox, points) in
//! `business.rs`. What runs on a process (event loop, SQL, effects, points, crashes) is the
//! [`Runner`](super::runner::Runner).

mod business;
mod keys;

use crate::history::{CrashSite, Refusal, Stmt, What};
use crate::http::{self, Order, Reason, Response};
use crate::model::{Awaits, KeyPolicy, KeyStore, Step};
use crate::report::Scope;
use crate::world::net::Envelope;
use crate::world::runner::{Failure, Runner, Why};
use crate::world::shared::World;
use crate::world::store;

/// The answer to a duplicate while the key's original is still in progress (409, 425, 202).
fn in_flight(status: u16) -> Response {
    Response::error(status, "request with this Idempotency-Key in progress")
        .meaning(Reason::InFlight)
}

/// How often a request waiting for the original (`in_flight = "wait"`) looks again (µs).
const WAIT_POLL_US: u64 = 10_000;

/// What a step asks of the program.
pub(crate) enum Flow {
    Next,
    Finish(Response),
}

/// What this execution holds under its key: no claim, a claim in progress, or a claim it
/// recorded its outcome under (durably, or inside a transaction not yet committed).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Claim {
    /// No claim of its own (no key, not claimed yet, or a claim rolled back with its
    /// transaction).
    Unclaimed,
    /// An in-progress record of its own, its outcome not recorded.
    Held,
    /// The outcome recorded under the claim inside a transaction not yet committed.
    CompletedInTx,
    /// The outcome recorded under the claim, outside a transaction or committed.
    Completed,
}

/// One request's execution of the model's program.
pub(crate) struct Exec {
    pub run: Runner,
    /// The logical operation (from the harness's correlation header).
    pub intent: String,
    pub order: Option<Order>,
    /// The request's key in its scope (None: no key, or the variant never reads it).
    pub key: Option<std::rc::Rc<Scope>>,
    pub fingerprint: String,
    pub row_id: Option<i64>,
    pub response: Option<Response>,
    /// Its claim under the key, and whether it recorded its outcome there.
    pub claim: Claim,
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
    /// The client connection's reply tag, until a `reply` step answers on it (None: no client,
    /// the completer's execution).
    pub reply_tag: Option<u64>,
    /// A `reply` step sent the answer: what the program does after it reaches no client.
    pub replied: bool,
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
            claim: Claim::Unclaimed,
            drop_reply: false,
            clashed: false,
            resume_at: None,
            tx_begin_at: None,
            save_failed: false,
            tx_retries: 0,
            expired: false,
            admitted_us: 0,
            admitted_app_us: 0,
            reply_tag: None,
            replied: false,
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

    /// A claim taken (claimed, taken over, taken back): held, unless it is already held.
    fn hold_claim(&mut self) {
        if self.claim == Claim::Unclaimed {
            self.claim = Claim::Held;
        }
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
        self.reply_tag = Some(env.reply_tag);
        let resp = self.run_program(0).await;
        if self.replied {
            // A `reply` step answered already, at its own crash site.
            return resp;
        }
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

    /// Run one step: the transaction steps here, every other kind in its own method (the key
    /// protocol in `keys.rs`, the business steps in `business.rs`).
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
                if self.claim == Claim::CompletedInTx {
                    self.claim = Claim::Completed;
                }
                self.event(What::Commit);
                Ok(Flow::Next)
            }
            Step::Lookup => self.step_lookup().await,
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
            Step::InsertRow => self.insert_row().await,
            Step::RateLimit => self.rate_limit().await,
            Step::MarkProcessed => self.mark_processed().await,
            Step::CheckRow => self.check_row().await,
            Step::SaveResponse => self.save_response().await,
            Step::ApplyStatus => self.apply_status().await,
            Step::UpdateDoc => self.update_doc().await,
            Step::TakeStock => self.take_stock().await,
            Step::RecoveryPoint(point) => self.recovery_point(point).await,
            Step::Effect => {
                self.run.effect(&self.intent, self.effect_key()).await?;
                Ok(Flow::Next)
            }
            Step::Outbox => self.outbox().await,
            Step::Point(p) => self.named_point(p).await,
            Step::Reply => self.reply_now(),
        }
    }

    /// `reply`: send the pending answer now, as the end of the request would; the steps after
    /// it run on, and what they do (a failure included) reaches no client.
    fn reply_now(&mut self) -> Result<Flow, Failure> {
        let Some(tag) = self.reply_tag.take() else { return Ok(Flow::Next) };
        let Some(mut resp) = self.response.clone() else {
            return Err(Failure::Error(Why::NoResponse));
        };
        resp.meta.exec = Some(self.run.id);
        self.replied = true;
        let fresh = self.fresh_success(&resp);
        crate::world::server::answer_now(&self.run, tag, self.drop_reply, fresh, resp);
        Ok(Flow::Next)
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
        // A completion inside the transaction was rolled back with it.
        if self.claim == Claim::CompletedInTx {
            self.claim = Claim::Held;
        }
        self.row_id = None;
        self.response = None;
        self.clashed = false;
        let begin = self.tx_begin_at.take().expect("checked");
        // A claim made inside the transaction was rolled back with it.
        let program = &self.run.world.model.program;
        if program[begin..failed_before].contains(&Step::Claim) {
            self.claim = Claim::Unclaimed;
        }
        begin
    }

    /// Does the step run an SQL statement? (A key step on a cache or in memory does not.)
    fn runs_sql(&self, step: &Step) -> bool {
        let key_step = matches!(step, Step::Lookup | Step::Claim | Step::SaveResponse);
        step.is_statement() && !(key_step && self.store_kind() != KeyStore::Sqlite)
    }
}
