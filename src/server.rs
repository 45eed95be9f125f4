//! Server processes: one madsim node each, with its own SQLite connection shared by all the
//! requests it serves. Each request runs the model's step program ([`Exec`]); every step kind
//! is implemented once here. Also the external effect receiver.
//!
//! Interleaving happens only at awaits: `await` steps, driver latency under
//! `awaits = "every-statement"`, statement time (`statement_ms`), waiting out a locked
//! database, cache round trips, effects and injected pauses. A synchronous rusqlite call runs
//! to completion within one poll.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use madsim::net::Endpoint;
use madsim::rand::Rng;
use madsim::runtime::Handle;
use madsim::time::{sleep, timeout};
use rusqlite::{Connection, params};

use crate::http::{self, Order, Response};
use crate::model::{
    Awaits, ClaimConflict, EffectDedupe, Fingerprint, InFlight, Replay, Step, StoreOutcomes,
};
use crate::net::{self, EffectMsg, Envelope};
use crate::scenario::InjectAction;
use crate::store::{self, Record};
use crate::world::{self, World};

/// The main task of server process `idx` (re-run on restart).
pub(crate) async fn process_main(world: Arc<World>, idx: usize) {
    let node = format!("server-{}", idx + 1);
    // A (re)started process has a fresh event loop and empty memory.
    {
        let mut st = world.lock();
        st.loops[idx] = (None, Vec::new());
        st.mem.memory[idx].clear();
    }
    let conn = match store::checkout(&world.db_uri) {
        Ok(c) => Rc::new(c),
        Err(e) => {
            world.event(&node, format!("cannot open the database: {e}"));
            return;
        }
    };
    let ep = match Endpoint::bind(world::server_addr(idx)).await {
        Ok(ep) => Arc::new(ep),
        Err(e) => {
            world.event(&node, format!("cannot bind: {e}"));
            return;
        }
    };
    if world.model.program.contains(&Step::Outbox) {
        madsim::task::spawn_local(crate::relay::relay_main(world.clone(), idx, conn.clone()));
    }
    loop {
        let Ok((payload, _from)) = ep.recv_from_raw(world::REQ_TAG).await else { return };
        let Ok(env) = payload.downcast::<Envelope>() else { continue };
        let g = InFlightGuard::new(world.clone());
        madsim::task::spawn_local(handle(world.clone(), idx, conn.clone(), ep.clone(), *env, g));
    }
}

/// Counts running handlers; decrements even when a crash drops the handler.
struct InFlightGuard(Arc<World>);
impl InFlightGuard {
    fn new(world: Arc<World>) -> Self {
        world.lock().handlers_in_flight += 1;
        InFlightGuard(world)
    }
}
impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.lock().handlers_in_flight -= 1;
    }
}

async fn handle(
    world: Arc<World>,
    idx: usize,
    conn: Rc<store::Pooled>,
    ep: Arc<Endpoint>,
    env: Envelope,
    _g: InFlightGuard,
) {
    let intent = env.http.header("X-Intent").unwrap_or("").to_string();
    let mut ex = Exec::new(world.clone(), idx, conn, env.label.clone(), Some(env.req), intent);
    let resp = ex.serve(&env).await;
    if !ex.drop_reply && ex.fresh_success(&resp) && net::drop_after_commit(&world) {
        world.event(&ex.node, format!("{}: fault: reply lost after commit", ex.label));
        ex.drop_reply = true;
    }
    if ex.drop_reply {
        world.event(
            &ex.node,
            format!("{}: connection dropped, {} never sent", ex.label, resp.status),
        );
        return;
    }
    world.message(
        &ex.node,
        &env.client_node,
        format!("{}: reply {} {}", ex.label, resp.status, resp.body),
    );
    net::send_reply(&world, &ex.node, &ex.label, &ep, env.reply_to, env.reply_tag, resp).await;
}

/// Why a request failed.
pub(crate) enum Failure {
    /// The database stayed locked past the wait budget → 503.
    Busy,
    /// Anything else → 500.
    Error(String),
    /// A run bound was hit → 500, and the bound is reported.
    Bound,
}

pub(crate) enum Flow {
    Next,
    Finish(Response),
}

/// The execution of one request by a step program (or of the outbox relay).
pub(crate) struct Exec {
    /// Unique per execution (a duplicated request gets two): the event loop's holder.
    pub(crate) id: u64,
    pub(crate) world: Arc<World>,
    pub(crate) node: String,
    pub(crate) idx: usize,
    pub(crate) conn: Rc<store::Pooled>,
    pub(crate) label: String,
    /// Index of the sim request this executes (None: the relay).
    pub(crate) req: Option<usize>,
    pub(crate) intent: String,
    pub(crate) order: Option<Order>,
    /// The request's key in its scope (None: no key, or the variant never reads it).
    pub(crate) key: Option<store::Scope>,
    pub(crate) fingerprint: String,
    pub(crate) row_id: Option<i64>,
    pub(crate) response: Option<Response>,
    pub(crate) claimed: bool,
    /// Dedupe key of the effect being delivered (set by the relay from the outbox row).
    pub(crate) effect_dedupe_key: Option<String>,
    /// This request recorded its outcome under its claim.
    pub(crate) completed: bool,
    pub(crate) drop_reply: bool,
}

impl Drop for Exec {
    fn drop(&mut self) {
        self.release_loop();
    }
}

impl Exec {
    /// A fresh execution on process `idx` (`req` None: the outbox relay).
    pub(crate) fn new(
        world: Arc<World>,
        idx: usize,
        conn: Rc<store::Pooled>,
        label: String,
        req: Option<usize>,
        intent: String,
    ) -> Exec {
        Exec {
            id: world.next_tag(),
            node: format!("server-{}", idx + 1),
            world,
            idx,
            conn,
            label,
            req,
            intent,
            order: None,
            key: None,
            fingerprint: String::new(),
            row_id: None,
            response: None,
            claimed: false,
            effect_dedupe_key: None,
            completed: false,
            drop_reply: false,
        }
    }

    /// Is this a synchronous driver whose statements take time (and so block the process)?
    fn blocking_driver(&self) -> bool {
        let d = &self.world.model.driver;
        d.awaits == Awaits::Explicit && d.statement_ms.1 > 0
    }

    /// Take the process's event loop (synchronous driver): other requests of this process
    /// wait until it is released; other processes run.
    pub(crate) async fn acquire_loop(&self) {
        let (idx, me) = (self.idx, self.id);
        std::future::poll_fn(|cx| {
            let mut st = self.world.lock();
            let l = &mut st.loops[idx];
            match l.0 {
                None => {
                    l.0 = Some(me);
                    std::task::Poll::Ready(())
                }
                Some(o) if o == me => std::task::Poll::Ready(()),
                Some(_) => {
                    l.1.push(cx.waker().clone());
                    std::task::Poll::Pending
                }
            }
        })
        .await
    }

    pub(crate) fn release_loop(&self) {
        let wakers = {
            let mut st = self.world.lock();
            let l = &mut st.loops[self.idx];
            if l.0 != Some(self.id) {
                return;
            }
            l.0 = None;
            std::mem::take(&mut l.1)
        };
        for w in wakers {
            w.wake();
        }
    }

    /// A 2xx this execution produced itself (not a replay).
    fn fresh_success(&self, resp: &Response) -> bool {
        self.row_id.is_some() && (200..300).contains(&resp.status)
    }

    pub(crate) fn event(&self, text: impl Into<String>) {
        self.world.event(&self.node, format!("{}: {}", self.label, text.into()));
    }

    async fn serve(&mut self, env: &Envelope) -> Response {
        // The fixed front half: route, authenticate, validate, then the key policy.
        let order = match http::admit(&env.http) {
            Ok(o) => o,
            Err(resp) => {
                self.event(format!("rejected {}: {}", resp.status, resp.body));
                return resp;
            }
        };
        if let Some(kp) = &self.world.model.key {
            match env.http.header(http::KEY_HEADER) {
                None | Some("") if kp.required => {
                    self.event("rejected 400: missing Idempotency-Key");
                    return Response::error(400, "missing Idempotency-Key");
                }
                None | Some("") => {}
                Some(k) if k.chars().count() > kp.max_len => {
                    self.event("rejected 400: Idempotency-Key too long");
                    return Response::error(400, "Idempotency-Key too long");
                }
                Some(k) => {
                    self.key = Some((
                        if kp.scope_user { order.user.clone() } else { String::new() },
                        if kp.scope_operation {
                            order.operation.to_string()
                        } else {
                            String::new()
                        },
                        k.to_string(),
                    ));
                    self.fingerprint = match kp.fingerprint {
                        Fingerprint::Validated => http::sha256_hex(order.canonical().as_bytes()),
                        Fingerprint::Raw => http::sha256_hex(&env.http.body),
                        Fingerprint::None => String::new(),
                    };
                }
            }
        }
        self.order = Some(order);

        let model = self.world.model.clone();
        for step in &model.program {
            let over = {
                let mut st = self.world.lock();
                st.steps += 1;
                st.steps > self.world.sim.world.max_steps
            };
            if over {
                self.world.bound_hit(format!(
                    "max-steps: more than {} server steps",
                    self.world.sim.world.max_steps
                ));
                return self.fail(Failure::Bound).await;
            }
            self.maybe_crash(&format!("before {}", step.name())).await;
            if model.driver.awaits == Awaits::EveryStatement && step.is_statement() {
                self.driver_latency().await;
            }
            match self.step(step).await {
                Ok(Flow::Next) => {}
                Ok(Flow::Finish(resp)) => {
                    if !self.conn.is_autocommit() {
                        // A lookup hit inside a transaction: commit the (read-only) transaction.
                        if let Err(f) =
                            self.sql("COMMIT", |c| store::exec_cached(c, "COMMIT")).await
                        {
                            return self.fail(f).await;
                        }
                        self.event("COMMIT (nothing written)");
                    }
                    return resp;
                }
                Err(f) => return self.fail(f).await,
            }
        }
        match self.response.take() {
            Some(r) => r,
            None => self.fail(Failure::Error("program ended without a response".into())).await,
        }
    }

    async fn driver_latency(&self) {
        let (lo, hi) = self.world.model.driver.latency_ms;
        let ms = madsim::rand::thread_rng().gen_range(lo..=hi);
        self.event(format!("await {ms} ms (driver)"));
        sleep(Duration::from_millis(ms)).await;
    }

    /// Run one SQL statement, waiting out a locked database in simulated time up to the budget.
    pub(crate) async fn sql<T>(
        &self,
        what: &str,
        f: impl Fn(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, Failure> {
        let blocking = self.blocking_driver();
        if blocking {
            self.acquire_loop().await;
        }
        let r = self.sql_inner(what, f).await;
        if blocking && self.conn.is_autocommit() {
            self.release_loop();
        }
        r
    }

    async fn sql_inner<T>(
        &self,
        what: &str,
        f: impl Fn(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, Failure> {
        let (lo, hi) = self.world.model.driver.statement_ms;
        if hi > 0 {
            let ms = madsim::rand::thread_rng().gen_range(lo..=hi);
            sleep(Duration::from_millis(ms.max(1))).await;
        }
        let budget = self.world.wait_budget_ms;
        let mut waited = 0u64;
        let mut backoff = 1u64;
        let mut said = false;
        loop {
            match f(&self.conn) {
                Ok(v) => return Ok(v),
                Err(e) if store::is_busy(&e) => {
                    if !said {
                        self.event(format!(
                            "{what}: database locked, waiting (budget {budget} ms)"
                        ));
                        said = true;
                    }
                    if waited >= budget {
                        self.event(format!("{what}: still locked after {waited} ms"));
                        return Err(Failure::Busy);
                    }
                    let d = backoff.min(budget - waited);
                    sleep(Duration::from_millis(d.max(1))).await;
                    waited += d.max(1);
                    backoff = (backoff * 2).min(16);
                }
                Err(e) => {
                    self.event(format!("{what}: error: {e}"));
                    return Err(Failure::Error(e.to_string()));
                }
            }
        }
    }

    async fn step(&mut self, step: &Step) -> Result<Flow, Failure> {
        match step {
            Step::Await => {
                // An await yields the event loop, even inside a transaction (the hazard).
                self.release_loop();
                self.driver_latency().await;
                Ok(Flow::Next)
            }
            Step::Begin => {
                self.sql("begin", |c| store::exec_cached(c, "BEGIN IMMEDIATE")).await?;
                self.event("BEGIN IMMEDIATE");
                Ok(Flow::Next)
            }
            Step::Commit => {
                self.sql("commit", |c| store::exec_cached(c, "COMMIT")).await?;
                self.event("COMMIT");
                Ok(Flow::Next)
            }
            Step::Lookup => {
                if self.key.is_none() {
                    return Ok(Flow::Next);
                }
                let rec = self.ks_lookup().await?;
                match rec {
                    None => {
                        self.event("lookup: miss");
                        Ok(Flow::Next)
                    }
                    Some(r) => self.on_hit(r).await,
                }
            }
            Step::Claim => {
                if self.key.is_none() {
                    return Ok(Flow::Next);
                }
                if self.ks_claim().await? {
                    self.claimed = true;
                    self.event("claim: key claimed (in-progress)");
                    return Ok(Flow::Next);
                }
                let kp = self.world.model.key.clone().expect("key policy");
                if kp.claim_conflict == ClaimConflict::Error {
                    self.event("claim: unique constraint failed");
                    return Err(Failure::Error("UNIQUE constraint failed: keys".into()));
                }
                match self.ks_lookup().await? {
                    Some(rec) => {
                        let now = self.world.now_us() / 1000;
                        let expired = rec.state == "in-progress"
                            && rec.lease_until_ms.is_some_and(|l| l <= now);
                        if expired
                            && rec.fingerprint == self.fingerprint
                            && self.ks_takeover(&rec).await?
                        {
                            self.claimed = true;
                            self.event("claim: took over a claim whose lease expired");
                            return Ok(Flow::Next);
                        }
                        self.event("claim: key already claimed");
                        self.on_hit(rec).await
                    }
                    None => {
                        self.event("claim: conflict, but the record is gone");
                        Ok(Flow::Finish(Response::error(409, "request in progress")))
                    }
                }
            }
            Step::InsertRow => {
                let o = self.order.clone().expect("admitted");
                let intent = self.intent.clone();
                let now = (self.world.now_us() / 1000) as i64;
                let id = self
                    .sql("insert-row", |c| {
                        c.prepare_cached("INSERT INTO rows(user, operation, item, qty, intent, created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")?
                            .execute(params![o.user, o.operation, o.item, o.qty, intent, now])?;
                        Ok(c.last_insert_rowid())
                    })
                    .await?;
                self.event(format!("insert-row: row {id}"));
                self.row_id = Some(id);
                self.response = Some(Response::new(201, o.created_body(id)));
                Ok(Flow::Next)
            }
            Step::SaveResponse => {
                let Some(resp) = self.response.clone() else {
                    return Err(Failure::Error("save-response before insert-row".into()));
                };
                self.save(resp.status, &resp.body).await?;
                Ok(Flow::Next)
            }
            Step::Effect => {
                self.effect().await?;
                Ok(Flow::Next)
            }
            Step::Outbox => {
                let (intent, dedupe, now) =
                    (self.intent.clone(), self.effect_key(), (self.world.now_us() / 1000) as i64);
                let id = self
                    .sql("outbox", |c| {
                        c.prepare_cached(
                            "INSERT INTO outbox(intent, dedupe, created_ms) VALUES (?1, ?2, ?3)",
                        )?
                        .execute(params![intent, dedupe, now])?;
                        Ok(c.last_insert_rowid())
                    })
                    .await?;
                self.event(format!("outbox: message {id} queued"));
                Ok(Flow::Next)
            }
            Step::Point(p) => self.point(p).await,
        }
    }

    /// The key the effect receiver deduplicates this request's effect by (model's choice).
    fn effect_key(&self) -> Option<String> {
        match self.world.model.effect_dedupe {
            EffectDedupe::None => None,
            EffectDedupe::Key => {
                self.key.as_ref().map(|(user, op, key)| format!("key:{user}/{op}/{key}"))
            }
            EffectDedupe::Payload => self.order.as_ref().map(|o| {
                format!(
                    "payload:{}",
                    http::sha256_hex(
                        format!("{}|{}|{}", o.user, o.operation, o.canonical()).as_bytes()
                    )
                )
            }),
            EffectDedupe::Row => self.row_id.map(|id| format!("row:{id}")),
        }
    }

    /// A stored record was found: replay, mismatch, or in flight.
    async fn on_hit(&mut self, mut rec: Record) -> Result<Flow, Failure> {
        let kp = self.world.model.key.clone().expect("key policy");
        if rec.fingerprint != self.fingerprint {
            self.event(format!("lookup: hit with a different fingerprint → {}", kp.on_mismatch));
            return Ok(Flow::Finish(Response::error(
                kp.on_mismatch,
                "Idempotency-Key reused with a different payload",
            )));
        }
        if rec.state != "done" {
            match kp.in_flight {
                InFlight::Status(s) => {
                    self.event(format!("lookup: original still in progress → {s}"));
                    return Ok(Flow::Finish(Response::error(
                        s,
                        "request with this Idempotency-Key in progress",
                    )));
                }
                InFlight::Wait => {
                    self.event("lookup: original in progress, waiting for it");
                    let mut waited = 0;
                    loop {
                        if waited >= self.world.wait_budget_ms {
                            return Ok(Flow::Finish(Response::error(
                                409,
                                "request with this Idempotency-Key in progress",
                            )));
                        }
                        sleep(Duration::from_millis(10)).await;
                        waited += 10;
                        match self.ks_lookup().await? {
                            Some(r) if r.state == "done" => {
                                rec = r;
                                break;
                            }
                            Some(_) => {}
                            None => {
                                return Ok(Flow::Finish(Response::error(
                                    409,
                                    "request with this Idempotency-Key in progress",
                                )));
                            }
                        }
                    }
                }
            }
        }
        if let Replay::Status(s) = kp.replay {
            self.event(format!("lookup: hit on a completed request → {s}"));
            return Ok(Flow::Finish(Response::error(
                s,
                "request with this Idempotency-Key already processed",
            )));
        }
        let status = rec.status.unwrap_or(500) as u16;
        self.event(format!("lookup: hit → replay {status}"));
        let mut resp = Response::new(status, rec.response.unwrap_or_default());
        resp.headers.push((kp.replay_marker.clone(), "true".into()));
        Ok(Flow::Finish(resp))
    }

    /// Record (status, body) under the key: complete our claim, or insert a new record.
    async fn save(&mut self, status: u16, body: &str) -> Result<(), Failure> {
        if self.key.is_none() {
            return Ok(());
        }
        if self.claimed {
            let n = self.ks_complete(status, body).await?;
            if n == 0 {
                let why = if self.world.model.key.as_ref().is_some_and(|k| k.fencing) {
                    "the claim is gone or no longer ours (fencing token)"
                } else {
                    "the claim record is gone"
                };
                self.event(format!("save-response: {why}"));
                return Err(Failure::Error(format!("save-response: {why}")));
            }
            self.event(format!("save-response: claim completed with {status}"));
            self.completed = true;
        } else {
            self.ks_insert_done(status, body).await?;
            self.event(format!("save-response: stored {status}"));
        }
        Ok(())
    }

    /// Call the effect receiver for this intent and wait for its acknowledgement.
    pub(crate) async fn effect(&self) -> Result<(), Failure> {
        self.release_loop(); // a network call yields the event loop
        let ep = Endpoint::bind(std::net::SocketAddr::new(world::server_addr(self.idx).ip(), 0))
            .await
            .map_err(|e| Failure::Error(format!("effect: {e}")))?;
        let tag = self.world.next_tag();
        self.world.message(
            &self.node,
            "receiver",
            format!("{}: effect for intent {}", self.label, self.intent),
        );
        let msg = EffectMsg {
            reply_tag: tag,
            reply_to: ep.local_addr().expect("bound"),
            intent: self.intent.clone(),
            label: self.label.clone(),
            dedupe: self.effect_dedupe_key.clone().or_else(|| self.effect_key()),
        };
        let _ = ep.send_to_raw(world::receiver_addr(), world::EFFECT_TAG, Box::new(msg)).await;
        // Long enough for a round trip at the world's worst latency.
        let wait = Duration::from_millis(1000 + 2 * self.world.sim.world.latency_ms.1);
        match timeout(wait, ep.recv_from_raw(tag)).await {
            Ok(Ok(_)) => Ok(()),
            _ => {
                self.event("effect: no acknowledgement");
                Err(Failure::Error("effect not acknowledged".into()))
            }
        }
    }

    /// A named point: run the sim's injections for it, in file order.
    pub(crate) async fn point(&mut self, point: &str) -> Result<Flow, Failure> {
        let sim = self.world.sim.clone();
        let req = self.req.map(|r| &sim.requests[r]);
        for (i, inj) in sim.injects.iter().enumerate() {
            // `request` names a request as written in the file: all its intents, copies, attempts.
            let mine = match (&inj.request, req) {
                (None, _) => true,
                (Some(r), Some(q)) => *r == q.group || *r == q.id,
                (Some(_), None) => false,
            };
            if inj.point != point || !mine {
                continue;
            }
            let spent = inj.times.is_some_and(|t| self.world.lock().inject_fired[i] >= t);
            if spent || !net::hit(inj.rate) {
                continue;
            }
            self.world.lock().inject_fired[i] += 1;
            self.event(format!("@{point}: {}", inj.action.name()));
            match &inj.action {
                InjectAction::Fail => {
                    return Err(Failure::Error(format!("injected failure at @{point}")));
                }
                InjectAction::Effect => self.effect().await?,
                InjectAction::DropReply => self.drop_reply = true,
                InjectAction::Pause { ms } => sleep(Duration::from_millis(*ms)).await,
                InjectAction::Crash { restart_ms } => self.crash(*restart_ms).await,
            }
        }
        Ok(Flow::Next)
    }

    /// The random crash fault at a step boundary: with `faults.crash`'s probability, crash here.
    pub(crate) async fn maybe_crash(&self, where_: &str) {
        if net::crash_now(&self.world) {
            self.event(format!("fault: crash {where_}"));
            self.crash(self.world.sim.faults.restart_ms).await;
        }
    }

    /// Kill this process now; the control node restarts it after `restart_ms`.
    pub(crate) async fn crash(&self, restart_ms: u64) {
        if std::mem::replace(&mut self.world.lock().crashing[self.idx], true) {
            // Another request of this process already crashed it; it is going down.
            std::future::pending::<()>().await;
        }
        let id = self.world.server_nodes.lock().unwrap()[self.idx];
        self.world.event(&self.node, "process crashed");
        let control = self.world.control.lock().unwrap().clone().expect("control node");
        let w = self.world.clone();
        let node = self.node.clone();
        let idx = self.idx;
        control.spawn(async move {
            sleep(Duration::from_millis(restart_ms)).await;
            w.lock().crashing[idx] = false;
            Handle::current().restart(id);
            w.event(&node, "process restarted");
        });
        Handle::current().kill(id);
        std::future::pending::<()>().await;
    }

    /// The error path: roll back if the model says so, record the error if the model stores
    /// all outcomes, answer 503 (busy) or 500.
    async fn fail(&mut self, f: Failure) -> Response {
        let model = self.world.model.clone();
        if model.on_error.rollback && !self.conn.is_autocommit() {
            let _ = store::exec_cached(&self.conn, "ROLLBACK");
            self.event("ROLLBACK");
        }
        let resp = match f {
            Failure::Busy => Response::error(503, "database busy, safe to retry"),
            Failure::Error(why) => {
                self.event(format!("failed: {why}"));
                Response::error(500, "internal error")
            }
            Failure::Bound => Response::error(500, "internal error"),
        };
        if model.store_outcomes == StoreOutcomes::All && self.claimed && !self.completed {
            let _ = self.save(resp.status, &resp.body.clone()).await;
        } else if model.on_error.release_claim
            && self.claimed
            && !self.completed
            && let Ok(n) = self.ks_release().await
        {
            self.event(format!("release-claim: {n} claim deleted"));
        }
        resp
    }
}

/// The external effect receiver (e-mail, payment): counts deliveries, and effects per intent
/// after deduplicating by the delivery's key when the model sends one.
pub(crate) async fn receiver_main(world: Arc<World>) {
    let Ok(ep) = Endpoint::bind(world::receiver_addr()).await else { return };
    loop {
        let Ok((payload, _)) = ep.recv_from_raw(world::EFFECT_TAG).await else { return };
        let Ok(msg) = payload.downcast::<EffectMsg>() else { continue };
        let fresh = {
            let t = world.now_us() / 1000;
            let mut st = world.lock();
            st.deliveries += 1;
            let fresh = match &msg.dedupe {
                Some(k) => st.dedupe_seen.insert(k.clone()),
                None => true,
            };
            if fresh {
                st.effect_log.push((msg.intent.clone(), t));
            }
            fresh
        };
        if fresh {
            world.event(
                "receiver",
                format!("effect for intent {} (from {})", msg.intent, msg.label),
            );
        } else {
            world.event(
                "receiver",
                format!(
                    "duplicate delivery for intent {} ignored (from {})",
                    msg.intent, msg.label
                ),
            );
        }
        let _ = ep.send_to_raw(msg.reply_to, msg.reply_tag, Box::new(())).await;
    }
}
