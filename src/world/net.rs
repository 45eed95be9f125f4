//! The simulated network: our own delivery path over madsim's clock and RNG.
//!
//! madsim's datagram endpoints cost at least a millisecond per send and per receive and hand
//! queued messages out one per millisecond, which serialised admission at a server. Here a
//! message is a [`Packet`] with an arrival time (now + a latency drawn from the seed + any
//! injected delay); one task, the *wire*, sleeps until the earliest arrival and delivers every
//! packet that is due at once, in (arrival, send order). A server process takes everything in
//! its inbox in one go, so requests that arrive in the same instant are admitted in the same
//! instant and run in an order drawn from the seed. Network faults (drops, duplicates, delays,
//! partitions) and crashed processes are decided here and recorded as events.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::task::{Poll, Waker};

use super::clock;
use super::shared::{World, chance, draw};
use crate::history::{Actor, Node, What};
use crate::http::{Request, Response};
use crate::scenario::CrashSignal;

/// A request in flight: the HTTP request plus the harness's routing data.
#[derive(Debug, Clone)]
pub(crate) struct Envelope {
    /// Tag the reply must carry (unique per attempt).
    pub reply_tag: u64,
    /// Which attempt this is (request index, copy, attempt): for injections and labels.
    pub who: Actor,
    pub http: Request,
    /// The client's gap between its connection being established and its request's bytes
    /// arriving (µs; the sim's `[world] connect_gap_ms`).
    pub connect_gap_us: u64,
    /// When it reached the server process (µs; set on delivery).
    pub arrived_us: u64,
    /// Whether the loop its connection woke preempted its client.
    pub held: Held,
}

/// A client preempted by the server process its connection woke (the stack's
/// `wake_preempts`): its connect returns, and its gap and write begin, only when the loop's
/// iteration ends or the loop goes idle again (docs/reality.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Held {
    /// Not preempted.
    #[default]
    No,
    /// Preempted: its bytes are not on their way yet.
    Waiting,
    /// Given its core back at this time (µs).
    Since(u64),
}

impl Envelope {
    /// When its bytes are readable at the server (µs); None while its client is preempted.
    /// Its connection had reached the server when its client was preempted, so once given its
    /// core back its `connect` returns and its bytes are readable one gap later, as they are one
    /// gap after an unpreempted connection arrives: its travel, and any delay injected on it,
    /// counted once.
    pub fn readable_us(&self) -> Option<u64> {
        let connected = match self.held {
            Held::No => self.arrived_us,
            Held::Waiting => return None,
            Held::Since(t) => t,
        };
        Some(connected.saturating_add(self.connect_gap_us))
    }

    /// Index of the request in the sim.
    pub fn req(&self) -> usize {
        match self.who {
            Actor::Attempt { req, .. } => req as usize,
            _ => unreachable!("requests are sent by attempts"),
        }
    }
}

/// An external effect sent to the receiver.
#[derive(Debug, Clone)]
pub(crate) struct EffectMsg {
    pub reply_tag: u64,
    /// The process that waits for the acknowledgement.
    pub process: usize,
    pub intent: String,
    /// Who performs the effect (an attempt, or the relay delivering a message).
    pub from: Actor,
    /// The server execution that asks for it (instrumentation).
    pub exec: u64,
    /// The receiver ignores a second delivery with the same key (None: never deduplicated).
    pub dedupe: Option<String>,
}

/// What travels.
#[derive(Debug)]
pub(crate) enum Msg {
    Request(Envelope),
    Reply(Response),
    Effect(EffectMsg),
    /// The provider's answer to an effect call: done, an error, or declined (a business
    /// refusal: nothing was done).
    Ack {
        ok: bool,
        declined: bool,
    },
    /// The connection was reset (the server process died or dropped it) or refused.
    Reset,
}

/// Where a packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dest {
    /// A server process's inbox.
    Server(usize),
    /// The effect receiver's inbox.
    Receiver,
    /// A mailbox waiting for one reply, owned by a server process (None: a client).
    Tag { tag: u64, process: Option<usize> },
}

impl Dest {
    fn process(self) -> Option<usize> {
        match self {
            Dest::Server(p) => Some(p),
            Dest::Tag { process, .. } => process,
            Dest::Receiver => None,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Packet {
    to: Dest,
    /// Who sent it, for the trace of losses.
    who: Option<Actor>,
    msg: Msg,
}

/// An inbox of a server process or of the receiver.
pub(crate) struct Inbox<T> {
    pub queue: VecDeque<T>,
    pub waker: Option<Waker>,
}

impl<T> Default for Inbox<T> {
    fn default() -> Self {
        Inbox { queue: VecDeque::new(), waker: None }
    }
}

impl<T> Inbox<T> {
    fn push(&mut self, t: T) -> Option<Waker> {
        self.queue.push_back(t);
        self.waker.take()
    }
}

/// A mailbox waiting for one message.
#[derive(Default)]
pub(crate) struct Slot {
    msg: Option<Msg>,
    waker: Option<Waker>,
}

/// The network's state: packets in flight and the wire task's wake-up.
#[derive(Default)]
pub(crate) struct Wire {
    /// (arrival µs, send order) → packet.
    in_flight: BTreeMap<(u64, u64), Packet>,
    sent: u64,
    /// The arrival the wire task sleeps until (None: it waits for a packet).
    armed: Option<u64>,
    waker: Option<Waker>,
    kicked: bool,
    pub receiver: Inbox<EffectMsg>,
    pub slots: BTreeMap<u64, Slot>,
    /// Packets on the wire bound for a server process or the receiver: work still to come.
    pub work_in_flight: u64,
}

impl World {
    /// A latency drawn from the world's range (µs).
    pub fn latency_us(&self) -> u64 {
        draw(self.sim.world.latency_us)
    }

    /// A latency drawn from the effect provider's range (µs).
    pub fn effect_latency_us(&self) -> u64 {
        draw(self.sim.world.effect_latency_us)
    }

    /// Put a packet on the wire: it arrives after `after_us`, unless a partition cuts its
    /// sender or destination now.
    pub fn send(&self, from: Option<usize>, to: Dest, who: Option<Actor>, msg: Msg, after_us: u64) {
        let cut = from.is_some_and(|p| self.partitioned(p))
            || to.process().is_some_and(|p| self.partitioned(p));
        if cut {
            self.lost_in_partition(from, to, who);
            return;
        }
        let at = self.now_us() + after_us;
        let waker = {
            let mut st = self.lock();
            let w = &mut st.wire;
            w.sent += 1;
            if matches!(to, Dest::Server(_) | Dest::Receiver) {
                w.work_in_flight += 1;
            }
            w.in_flight.insert((at, w.sent), Packet { to, who, msg });
            if w.armed.is_none_or(|a| at < a) {
                w.kicked = true;
                w.waker.take()
            } else {
                None
            }
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Is process `p` cut off by a partition now?
    pub fn is_partitioned(&self, p: usize) -> bool {
        self.partitioned(p)
    }

    fn partitioned(&self, p: usize) -> bool {
        self.lock().processes[p].partitioned
    }

    fn lost_in_partition(&self, from: Option<usize>, to: Dest, who: Option<Actor>) {
        let p = from.filter(|p| self.partitioned(*p)).or(to.process()).unwrap_or(0);
        self.emit(Node::Server(p as u32), who, What::LostInPartition);
    }

    /// A request reaches server process `p` at `now`. A connection that wakes an idle loop
    /// may have its client preempted by the woken process (the stack's `wake_preempts`): the
    /// first to arrive wakes it; later ones find it awake. Returns the inbox's waker and
    /// whether the client was preempted.
    fn arrive(
        &self,
        p: &mut super::shared::ProcessState,
        mut env: Envelope,
        now: u64,
    ) -> (Option<Waker>, bool) {
        env.arrived_us = now;
        if std::mem::take(&mut p.phases.idle)
            && let crate::model::Runtime::EventLoop(t) = &self.model.runtime
            && chance(t.wake_preempts())
        {
            env.held = Held::Waiting;
        }
        let held = env.held == Held::Waiting;
        (p.inbox.push(env), held)
    }

    /// Deliver every packet due now; returns the next arrival time, if any.
    fn deliver_due(&self) -> Option<u64> {
        let now = self.now_us();
        loop {
            let mut st = self.lock();
            let entry = st.wire.in_flight.first_entry()?;
            if entry.key().0 > now {
                return Some(entry.key().0);
            }
            let Packet { to, who, msg } = entry.remove();
            if matches!(to, Dest::Server(_) | Dest::Receiver) {
                st.wire.work_in_flight -= 1;
            }
            if let (Dest::Server(p), Msg::Request(env)) = (to, &msg)
                && !st.processes[p].up
                && self.sim.faults.crash_signal == CrashSignal::Reset
            {
                // Nothing listens on the port: the client's connection is refused at once.
                let tag = env.reply_tag;
                drop(st);
                self.emit(Node::Server(p as u32), who, What::ConnectionRefused);
                self.send(
                    None,
                    Dest::Tag { tag, process: None },
                    None,
                    Msg::Reset,
                    self.latency_us(),
                );
                continue;
            }
            let lost = match to {
                Dest::Server(p) if !st.processes[p].up => Some(What::LostToDownProcess),
                _ if to.process().is_some_and(|p| st.processes[p].partitioned) => {
                    Some(What::LostInPartition)
                }
                _ => None,
            };
            if let Some(what) = lost {
                drop(st);
                self.emit(Node::Server(to.process().unwrap_or(0) as u32), who, what);
                continue;
            }
            let mut held = None;
            let waker = match (to, msg) {
                (Dest::Server(p), Msg::Request(env)) => {
                    let (waker, h) = self.arrive(&mut st.processes[p], env, now);
                    held = h.then_some(p);
                    waker
                }
                (Dest::Receiver, Msg::Effect(e)) => st.wire.receiver.push(e),
                (Dest::Tag { tag, .. }, msg) => match st.wire.slots.get_mut(&tag) {
                    Some(slot) if slot.msg.is_none() => {
                        slot.msg = Some(msg);
                        slot.waker.take()
                    }
                    _ => None, // nobody waits any more (timed out, crashed, a duplicate)
                },
                _ => None,
            };
            drop(st);
            if let Some(p) = held {
                self.emit(Node::Server(p as u32), who, What::CoreTaken);
            }
            if let Some(w) = waker {
                w.wake();
            }
        }
    }
}

/// The wire: delivers packets when they are due.
pub(crate) async fn wire_main(world: Arc<World>) {
    loop {
        let before = world.lock().wire.work_in_flight;
        let next = world.deliver_due();
        if world.lock().wire.work_in_flight != before {
            world.work_changed();
        }
        let mut sleep = next.map(|at| clock::sleep_future(world.start, at));
        std::future::poll_fn(|cx| {
            if let Some(s) = sleep.as_mut()
                && s.as_mut().poll(cx).is_ready()
            {
                return Poll::Ready(());
            }
            let mut st = world.lock();
            if std::mem::take(&mut st.wire.kicked) {
                return Poll::Ready(());
            }
            st.wire.armed = next;
            st.wire.waker = Some(cx.waker().clone());
            Poll::Pending
        })
        .await;
        world.lock().wire.armed = None;
    }
}

/// Every request in process `p`'s inbox, once there is at least one.
pub(crate) async fn accept(world: &World, p: usize) -> Vec<Envelope> {
    std::future::poll_fn(|cx| {
        let mut st = world.lock();
        let inbox = &mut st.processes[p].inbox;
        if inbox.queue.is_empty() {
            inbox.waker = Some(cx.waker().clone());
            Poll::Pending
        } else {
            Poll::Ready(inbox.queue.drain(..).collect())
        }
    })
    .await
}

/// Every effect in the receiver's inbox, once there is at least one.
pub(crate) async fn accept_effects(world: &World) -> Vec<EffectMsg> {
    std::future::poll_fn(|cx| {
        let mut st = world.lock();
        let inbox = &mut st.wire.receiver;
        if inbox.queue.is_empty() {
            inbox.waker = Some(cx.waker().clone());
            Poll::Pending
        } else {
            Poll::Ready(inbox.queue.drain(..).collect())
        }
    })
    .await
}

/// A mailbox for one reply; closed (and late replies dropped) when it goes out of scope.
pub(crate) struct Mailbox {
    world: Arc<World>,
    pub tag: u64,
}

impl Mailbox {
    pub fn open(world: &Arc<World>) -> Mailbox {
        let tag = world.next_tag();
        world.lock().wire.slots.insert(tag, Slot::default());
        Mailbox { world: world.clone(), tag }
    }

    /// The first message to arrive.
    pub async fn recv(&self) -> Msg {
        std::future::poll_fn(|cx| {
            let mut st = self.world.lock();
            let slot = st.wire.slots.get_mut(&self.tag).expect("open until dropped");
            match slot.msg.take() {
                Some(m) => Poll::Ready(m),
                None => {
                    slot.waker = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await
    }
}

impl Drop for Mailbox {
    fn drop(&mut self) {
        self.world.lock().wire.slots.remove(&self.tag);
    }
}

/// Send a request to a server process, through the sim's network faults. A duplicated
/// request is what duplicates requests in practice: a proxy or a client library that resends
/// it after a stall; the first copy's reply is dropped by the resender, the client gets the
/// resent copy's.
pub(crate) fn send_request(world: &World, node: Node, process: usize, env: Envelope) {
    let f = &world.sim.faults;
    if chance(f.request_drop) {
        world.emit(node, Some(env.who), What::RequestDropped);
        return;
    }
    let mut stall = 0;
    if chance(f.duplicate) {
        stall = draw(f.duplicate_after_us);
        world.emit(node, Some(env.who), What::RequestDuplicated { after_us: stall });
        // The first copy: its reply goes to a tag nobody waits on.
        let first = Envelope { reply_tag: world.next_tag(), ..env.clone() };
        let after = world.latency_us() + delay(world, node, env.who);
        world.send(None, Dest::Server(process), Some(env.who), Msg::Request(first), after);
    }
    let after = stall + world.latency_us() + delay(world, node, env.who);
    let who = env.who;
    world.send(None, Dest::Server(process), Some(who), Msg::Request(env), after);
}

/// Send a reply back to a client, through the sim's network faults.
pub(crate) fn send_reply(world: &World, process: usize, who: Actor, tag: u64, resp: Response) {
    let f = &world.sim.faults;
    let node = Node::Server(process as u32);
    if chance(f.reply_drop) {
        world.emit(node, Some(who), What::ReplyDropped { status: resp.status });
        return;
    }
    let after = world.latency_us() + delay(world, node, who);
    world.send(Some(process), Dest::Tag { tag, process: None }, Some(who), Msg::Reply(resp), after);
}

/// An extra delay drawn for one message (0 when the fault does not strike).
fn delay(world: &World, node: Node, who: Actor) -> u64 {
    let f = &world.sim.faults;
    if !chance(f.delay) {
        return 0;
    }
    let us = draw(f.delay_us);
    world.emit(node, Some(who), What::Delayed { us });
    us
}
