//! Server processes: one madsim node each, with its own SQLite connection shared by all the
//! requests it serves. Each request is an [`Exec`] of the model's program; a model with an
//! `outbox` step also runs a relay task in every process. And the external effect receiver.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use madsim::net::Endpoint;
use madsim::time::sleep;

use super::exec::{Exec, Runner};
use super::net::{self, EffectMsg, Envelope};
use super::shared::{EFFECT_TAG, REQ_TAG, World, chance, receiver_addr, server_addr};
use super::store::{self, Pooled};
use crate::history::{Actor, CrashSite, Node, Stmt, What};
use crate::http;
use crate::model::Step;

/// The main task of server process `idx` (re-run on restart).
pub(crate) async fn process_main(world: Arc<World>, idx: usize) {
    let node = Node::Server(idx as u32);
    // A (re)started process has a fresh event loop and empty memory.
    {
        let mut st = world.lock();
        let p = &mut st.processes[idx];
        p.loop_holder = None;
        p.loop_waiters = Vec::new();
        p.memory.clear();
    }
    let conn = match store::checkout(&world.db_uri) {
        Ok(c) => Rc::new(c),
        Err(e) => {
            world.emit(node, None, What::CannotOpenDatabase { error: e.to_string() });
            return;
        }
    };
    let ep = match Endpoint::bind(server_addr(idx)).await {
        Ok(ep) => Arc::new(ep),
        Err(e) => {
            world.emit(node, None, What::CannotBind { error: e.to_string() });
            return;
        }
    };
    if world.model.program.contains(&Step::Outbox) {
        madsim::task::spawn_local(relay_main(world.clone(), idx, conn.clone()));
    }
    loop {
        let Ok((payload, _from)) = ep.recv_from_raw(REQ_TAG).await else { return };
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

/// Serve one request and send the reply (unless it is lost).
async fn handle(
    world: Arc<World>,
    idx: usize,
    conn: Rc<Pooled>,
    ep: Arc<Endpoint>,
    env: Envelope,
    _g: InFlightGuard,
) {
    let intent = env.http.header(http::INTENT_HEADER).unwrap_or("").to_string();
    let run = Runner::new(world.clone(), idx, conn, env.who, Some(env.req()));
    let mut ex = Exec::new(run, intent);
    let resp = ex.serve(&env).await;
    if !ex.drop_reply && ex.fresh_success(&resp) && chance(world.sim.faults.reply_drop_after_commit)
    {
        ex.run.event(What::ReplyLostAfterCommit);
        ex.drop_reply = true;
    }
    if ex.drop_reply {
        ex.run.event(What::ConnectionDropped { status: resp.status });
        return;
    }
    let to = env.req() as u32;
    ex.run.event(What::Reply { to, status: resp.status, body: resp.body.clone() });
    let (node, who) = (ex.run.node, ex.run.who);
    net::send_reply(&world, node, who, &ep, env.reply_to, env.reply_tag, resp).await;
}

/// The outbox relay: a background task in every server process of a model with an `outbox`
/// step. Every `relay_every_ms` it delivers unsent outbox rows to the effect receiver, one by
/// one, and marks each sent after the receiver acknowledged it. A crash between the send and
/// the mark (random `faults.crash` at its step boundaries, or an injection at
/// `@relay-after-send`) makes the next relay pass deliver the row again: the receiver must
/// deduplicate (by the row: `effects.dedupe = "row"`).
async fn relay_main(world: Arc<World>, idx: usize, conn: Rc<Pooled>) {
    let every = Duration::from_millis(world.model.relay_every_ms);
    loop {
        sleep(every).await;
        let mut run = Runner::new(world.clone(), idx, conn.clone(), Actor::Relay, None);
        let Ok(batch) = run.sql(Stmt::Relay, |c| store::unsent_outbox(c, 16)).await else {
            continue;
        };
        for (id, intent, dedupe) in batch {
            run.who = Actor::RelayMessage(id);
            run.maybe_crash(|| CrashSite::BeforeSend).await;
            if run.effect(&intent, dedupe.clone()).await.is_err() {
                break; // not acknowledged: try again next pass
            }
            if run.point("relay-after-send", &intent, || dedupe.clone()).await.is_err() {
                break;
            }
            run.maybe_crash(|| CrashSite::BetweenSendAndMark).await;
            if run.sql(Stmt::Relay, |c| store::mark_sent(c, id)).await.is_ok() {
                run.event(What::OutboxMarkedSent { message: id });
            }
        }
    }
}

/// The external effect receiver (e-mail, payment): counts deliveries, and effects per intent
/// after deduplicating by the delivery's key when the model sends one.
pub(crate) async fn receiver_main(world: Arc<World>) {
    let Ok(ep) = Endpoint::bind(receiver_addr()).await else { return };
    loop {
        let Ok((payload, _)) = ep.recv_from_raw(EFFECT_TAG).await else { return };
        let Ok(msg) = payload.downcast::<EffectMsg>() else { continue };
        let fresh = {
            let t = world.now_ms();
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
        let (intent, from) = (msg.intent.clone(), msg.from);
        if fresh {
            world.emit(Node::Receiver, None, What::EffectApplied { intent, from });
        } else {
            world.emit(Node::Receiver, None, What::EffectDeduplicated { intent, from });
        }
        let _ = ep.send_to_raw(msg.reply_to, msg.reply_tag, Box::new(())).await;
    }
}
