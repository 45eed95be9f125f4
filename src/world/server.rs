//! Server processes: one madsim node each, with its own SQLite connection shared by all the
//! requests it serves. Each request is an [`Exec`] of the model's program; a model with an
//! `outbox` step also runs a relay task in every process, and a model with a completer its
//! completer task. (The external effect provider is in `provider.rs`.)

use std::rc::Rc;
use std::sync::Arc;

use super::clock;
use super::conn::{Conn, Pool};
use super::exec::Exec;
use super::keystore;
use super::net::{self, Dest, Envelope, Msg};
use super::runner::{Failure, Runner};
use super::shared::{World, chance, draw};
use super::store::{self, Pooled};
use crate::history::{Actor, CrashSite, Node, Stmt, What};
use crate::http::{self, Reason, Response};
use crate::model::Step;

/// The main task of server process `idx` (re-run on restart).
pub(crate) async fn process_main(world: Arc<World>, idx: usize) {
    let node = Node::Server(idx as u32);
    // A (re)started process has a fresh event loop, an empty inbox and empty memory.
    {
        let mut st = world.lock();
        let p = &mut st.processes[idx];
        p.up = true;
        p.starts += 1;
        let warm = p.starts == 1 && world.sim.world.start == crate::scenario::Start::Warm;
        p.phases = super::phases::Phases { warm, ..Default::default() };
        p.threads = Default::default();
        p.inbox.queue.clear();
        p.forget_memory();
    }
    let shared = match store::checkout(&world.db) {
        Ok(c) => Rc::new(c),
        Err(e) => {
            world.emit(node, None, What::CannotOpenDatabase { error: e.to_string() });
            return;
        }
    };
    let pool = match world.model.driver.pool {
        0 => None,
        n => match Pool::new(&world.db, n) {
            Ok(p) => Some(p),
            Err(e) => {
                world.emit(node, None, What::CannotOpenDatabase { error: e.to_string() });
                return;
            }
        },
    };
    if world.model.program.contains(&Step::Outbox) {
        // The relay has a connection of its own: it reads committed rows only, never the
        // open transaction of a request on the process's connection.
        let relay = match store::checkout(&world.db) {
            Ok(c) => Rc::new(c),
            Err(e) => {
                world.emit(node, None, What::CannotOpenDatabase { error: e.to_string() });
                return;
            }
        };
        madsim::task::spawn_local(relay_main(world.clone(), idx, relay));
    }
    if let Some(every) = world.model.completer_every_us() {
        madsim::task::spawn_local(completer_main(world.clone(), idx, shared.clone(), every));
    }
    match world.model.runtime {
        crate::model::Runtime::Threads(t) => {
            return super::threads::accept_main(world.clone(), idx, t, shared).await;
        }
        crate::model::Runtime::EventLoop(times)
            if world.model.driver.awaits == crate::model::Awaits::Explicit =>
        {
            return super::phases::loop_main(world.clone(), idx, times, shared, pool).await;
        }
        crate::model::Runtime::EventLoop(_) => {}
    }
    loop {
        for env in net::accept(&world, idx).await {
            spawn_handler(&world, idx, &shared, &pool, env, false);
        }
    }
}

/// Serve one request on its own task; `phased`: read by the loop in phases, which is told
/// when the handler ends.
pub(crate) fn spawn_handler(
    world: &Arc<World>,
    idx: usize,
    shared: &Rc<Pooled>,
    pool: &Option<Rc<Pool>>,
    env: Envelope,
    phased: bool,
) {
    let g = InFlightGuard::new(world.clone(), idx, env.reply_tag, env.who);
    let (w, shared, pool) = (world.clone(), shared.clone(), pool.clone());
    let task = match env.who {
        Actor::Attempt { req, copy, .. } => Some((req as usize, copy)),
        _ => None,
    };
    // Boxed: the handler's state is large, and a spawn moves its future several times.
    let handler = Box::pin(async move {
        handle(w.clone(), idx, shared, pool, env, g).await;
        if phased {
            super::phases::handler_ended(&w, idx);
        }
    });
    madsim::task::spawn_local(super::explorer::owned(task, handler));
}

/// A request being served: counted for quiescence, and its client's connection registered
/// with the process (a crash resets it). Undone even when a crash drops the handler.
struct InFlightGuard {
    world: Arc<World>,
    process: usize,
    tag: u64,
}

impl InFlightGuard {
    fn new(world: Arc<World>, process: usize, tag: u64, who: Actor) -> Self {
        {
            let mut st = world.lock();
            st.quiet.handlers_in_flight += 1;
            st.processes[process].serving.insert(tag, who);
        }
        InFlightGuard { world, process, tag }
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        {
            let mut st = self.world.lock();
            st.quiet.handlers_in_flight -= 1;
            st.processes[self.process].serving.remove(&self.tag);
        }
        self.world.work_changed();
    }
}

/// Serve one request and send the reply (unless it is lost).
async fn handle(
    world: Arc<World>,
    idx: usize,
    shared: Rc<Pooled>,
    pool: Option<Rc<Pool>>,
    env: Envelope,
    _g: InFlightGuard,
) {
    let intent = env.http.header(http::INTENT_HEADER).unwrap_or("").to_string();
    let (node, who, to) = (Node::Server(idx as u32), env.who, env.req() as u32);
    world.emit(node, Some(who), What::Arrived);
    let threads = world.model.thread_times();
    // A thread of its own (the permit, held until the request ends), its own code run first.
    let thread = match &threads {
        Some(t) => super::threads::start(&world, idx, &env, who, t).await,
        None => None,
    };
    let Some(conn) = connection(&world, idx, shared, pool, &env, threads.is_some()).await else {
        return;
    };
    let mut run = Runner::new(world.clone(), idx, conn, who, Some(env.req()));
    // A prefork worker's memory is its own; threads of one process share theirs.
    if threads.is_some_and(|t| t.prefork) {
        run.worker = thread.as_ref().map_or(0, |p| p.worker);
    }
    let mut ex = Exec::new(run, intent);
    let mut resp = ex.serve(&env).await;
    if ex.replied {
        // A `reply` step sent the answer (`answer_now`); this is what came after it.
        return;
    }
    resp.meta.exec = Some(ex.run.id);
    if ex.drop_reply {
        // The server drops the connection: its client sees a reset.
        ex.run.event(What::ConnectionDropped { status: resp.status });
        drop(ex);
        let to = Dest::Tag { tag: env.reply_tag, process: None };
        world.send(Some(idx), to, Some(who), Msg::Reset, world.latency_us());
        return;
    }
    if ex.fresh_success(&resp) && chance(world.sim.faults.reply_drop_after_commit) {
        // The targeted network fault: the reply of a fresh success is lost on its way.
        ex.run.event(What::ReplyLostAfterCommit);
        return;
    }
    ex.run.event(What::Reply { to, status: resp.status, body: resp.body.clone() });
    // The execution (and its pooled connection, its hold on the event loop) ends here.
    drop(ex);
    net::send_reply(&world, idx, who, env.reply_tag, resp);
}

/// A `reply` step's answer, sent while the execution goes on: as `handle` sends one (the
/// connection dropped by an injection, the reply of a fresh success lost, or the reply), and
/// the client's connection is no longer the process's to reset when it crashes.
pub(crate) fn answer_now(run: &Runner, tag: u64, drop_reply: bool, fresh: bool, resp: Response) {
    let (world, idx, who) = (&run.world, run.idx, run.who);
    world.lock().processes[idx].serving.remove(&tag);
    if drop_reply {
        run.event(What::ConnectionDropped { status: resp.status });
        let to = Dest::Tag { tag, process: None };
        world.send(Some(idx), to, Some(who), Msg::Reset, world.latency_us());
        return;
    }
    if fresh && chance(world.sim.faults.reply_drop_after_commit) {
        run.event(What::ReplyLostAfterCommit);
        return;
    }
    let to = run.req.unwrap_or(0) as u32;
    run.event(What::Reply { to, status: resp.status, body: resp.body.clone() });
    net::send_reply(world, idx, who, tag, resp);
}

/// The outbox relay: a background task in every server process of a model with an `outbox`
/// step. Every `relay_every_ms` it delivers unsent outbox rows to the effect receiver, one by
/// one, and marks each sent after the receiver acknowledged it. A crash between the send and
/// the mark (random `faults.crash` at its step boundaries, or an injection at
/// `@relay-after-send`) makes the next relay pass deliver the row again: the receiver must
/// deduplicate (by the row: `effects.dedupe = "row"`).
///
/// Each relay starts at its own phase, drawn from the seed within its first period: the
/// processes' relays are started by their own processes' timers, not in lockstep.
async fn relay_main(world: Arc<World>, idx: usize, conn: Rc<Pooled>) {
    let every = world.model.relay_every_us;
    let mut wait = draw((every.min(1), every));
    loop {
        clock::sleep_us(wait).await;
        wait = every;
        if let Some(parked) = park_while_idle(&world, every, || true).await {
            wait = parked;
            continue;
        }
        if !world.spend() {
            return;
        }
        let mut run =
            Runner::new(world.clone(), idx, Conn::Shared(conn.clone()), Actor::Relay, None);
        let Ok(batch) = run.sql(Stmt::Relay, |c| store::unsent_outbox(c, 16)).await else {
            continue;
        };
        for (id, intent, dedupe) in batch {
            run.who = Actor::RelayMessage(id);
            run.maybe_crash(|| CrashSite::BeforeSend).await;
            match run.effect(&intent, dedupe.clone()).await {
                Ok(()) => {}
                // Declined: a final answer; the message is done (nothing to deliver again).
                Err(Failure::Declined) => {}
                Err(_) => break, // not acknowledged: try again next pass
            }
            if run.point("relay-after-send", &intent, true, || dedupe.clone()).await.is_err() {
                break;
            }
            run.maybe_crash(|| CrashSite::BetweenSendAndMark).await;
            if run.sql(Stmt::RelayMark, |c| store::mark_sent(c, id)).await.is_ok() {
                run.event(What::OutboxMarkedSent { message: id });
            }
        }
        // The outbox may have changed (a mark that failed may still have committed).
        world.work_changed();
    }
}

/// A background poller's pass (the relay's, the completer's) when the world is idle: nothing
/// quiescence counts (no request on the wire or in an inbox, no handler, effect or action
/// running, no outbox row or claim left to finish), so the pass could only find nothing. The
/// poller skips it and parks until something changes, then comes back on its own period:
/// `Some(wait)` until its next pass. `None`: not idle, make the pass. A real poller's empty
/// passes cost its process a statement each; skipping them is what lets a retry 25 hours later
/// cost a run nothing instead of 1.8 million passes (and its step budget).
async fn park_while_idle(
    world: &World,
    every: u64,
    nothing_new: impl FnOnce() -> bool,
) -> Option<u64> {
    if super::busy(world) > 0 || !nothing_new() {
        return None;
    }
    let parked = world.now_us();
    world.next_work_change().await;
    let gap = world.now_us().saturating_sub(parked);
    Some(every.max(1) - gap % every.max(1))
}

/// Claims in progress with a recovery point and a row, past the completer's horizon or not.
fn unfinished(world: &World) -> u64 {
    let now = world.db_clock_us();
    store::with_observer(&world.db, |c| keystore::sql_count_resumable(c, now, None)).unwrap_or(1)
}

/// The background completer of a process (`key.completer_every_ms`): every period it takes
/// over abandoned claims (in progress, lease ended, a recovery point with a row) and runs
/// their program on from the recovery point, as the abandoned request would have. Claims
/// older than `completer_horizon_ms` are left alone (named once). Each pass is a step of work.
async fn completer_main(world: Arc<World>, idx: usize, conn: Rc<Pooled>, every_us: u64) {
    let horizon = world.model.key.as_ref().and_then(|k| k.completer_horizon_us);
    let min_age = world.model.key.as_ref().and_then(|k| k.completer_min_age_us);
    let mut past_horizon: Vec<crate::report::Scope> = Vec::new();
    let mut wait = every_us;
    loop {
        clock::sleep_us(wait).await;
        wait = every_us;
        // Idle for the completer: every claim it could still see is one it already named.
        let named = past_horizon.len() as u64;
        if let Some(parked) =
            park_while_idle(&world, every_us, || unfinished(&world) <= named).await
        {
            wait = parked;
            continue;
        }
        if !world.spend() {
            return;
        }
        let run =
            Runner::new(world.clone(), idx, Conn::Shared(conn.clone()), Actor::Completer, None);
        let now = world.process_clock_us(idx);
        let Ok(batch) = run.sql(Stmt::Claim, |c| keystore::sql_abandoned(c, now, 16)).await else {
            continue;
        };
        drop(run);
        for a in batch {
            if horizon.is_some_and(|h| a.created_us.saturating_add(h) < now) {
                if !past_horizon.contains(&a.scope) {
                    world.emit(
                        Node::Server(idx as u32),
                        Some(Actor::Completer),
                        What::CompleterPastHorizon { intent: a.intent, key: a.scope.key.clone() },
                    );
                    past_horizon.push(a.scope);
                }
                continue;
            }
            // Too young: the completer waits until the claim is old enough to call abandoned.
            if min_age.is_some_and(|m| a.created_us.saturating_add(m) > now) {
                continue;
            }
            let run =
                Runner::new(world.clone(), idx, Conn::Shared(conn.clone()), Actor::Completer, None);
            let mut exec = Exec::new(run, a.intent.clone());
            exec.complete_abandoned(a).await;
        }
        world.work_changed();
    }
}

/// The connection a request runs on: the process's shared one, a connection of its own (a
/// thread per request), or one leased from the pool; None when none came (answered 500 or
/// 503 already).
async fn connection(
    world: &Arc<World>,
    idx: usize,
    shared: Rc<Pooled>,
    pool: Option<Rc<Pool>>,
    env: &Envelope,
    own: bool,
) -> Option<Conn> {
    let (node, who) = (Node::Server(idx as u32), env.who);
    Some(match pool {
        // A thread opens a connection of its own (given back to the spares at the end).
        None if own => match store::checkout(&world.db) {
            Ok(c) => Conn::Shared(Rc::new(c)),
            Err(e) => {
                world.emit(node, Some(who), What::CannotOpenDatabase { error: e.to_string() });
                answer(world, idx, env, Response::error(500, "internal error"));
                return None;
            }
        },
        None => Conn::Shared(shared),
        Some(pool) => {
            if !pool.has_free() {
                world.emit(node, Some(who), What::PoolWait);
            }
            match pool.lease(world.wait_budget_us).await {
                Some(lease) => Conn::Leased(lease),
                None => {
                    let waited_us = world.wait_budget_us;
                    world.emit(node, Some(who), What::PoolExhausted { waited_us });
                    let resp = Response::error(503, "no database connection available")
                        .meaning(Reason::SafeToRetry);
                    answer(world, idx, env, resp);
                    return None;
                }
            }
        }
    })
}

/// Answer a request that never ran its program (no connection for it): traced and sent.
fn answer(world: &Arc<World>, idx: usize, env: &Envelope, resp: Response) {
    let (to, status, body) = (env.req() as u32, resp.status, resp.body.clone());
    world.emit(Node::Server(idx as u32), Some(env.who), What::Reply { to, status, body });
    net::send_reply(world, idx, env.who, env.reply_tag, resp);
}
