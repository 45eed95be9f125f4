//! Node.js's event loop in phases (the `event-loop` runtime of the model's stack), for a process with a synchronous
//! driver: one loop task per process decides who runs, the way libuv does.
//!
//! Each iteration: one turn; the continuations whose I/O or timer finished (`ready`); then
//! every connection accepted in an **earlier** iteration whose request bytes have arrived is
//! read, and its handler runs to its first await, one after the other; then **one** pending
//! connection is accepted (Node 20 accepts one connection per iteration: measured, see
//! docs/reality.md); then the check phase runs every `setImmediate` continuation queued before
//! it. An execution runs only when the loop grants it the loop, and gives it back at its next
//! await: so everything read in one pass does its lookup before any of them resumes, which
//! is what lets a whole burst through check-first's window.

use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Poll, Waker};

use super::clock;
use super::conn::Pool;
use super::net::{Envelope, Held};
use super::shared::{World, draw};
use super::store::Pooled;
use crate::history::{Actor, Node, What};
use crate::model::LoopTimes;

/// The grant that the next handler read in the poll phase takes.
pub(crate) const NEW: u64 = u64::MAX;

/// A process's loop state.
#[derive(Default)]
pub(crate) struct Phases {
    /// Connections accepted: the envelope and the iteration.
    pub accepted: VecDeque<(Envelope, u64)>,
    /// The loop waits for work: the next connection delivered wakes it (and may preempt its
    /// client, the stack's `wake_preempts`).
    pub idle: bool,
    /// Executions queued for the check phase (`await` of `setImmediate`).
    pub immediates: VecDeque<u64>,
    /// Executions whose other await finished (I/O, timers), for the next iteration.
    pub ready: VecDeque<u64>,
    /// Who may run now: an execution, [`NEW`] (the handler just read), or nobody.
    pub grant: Option<u64>,
    /// Executions waiting for the loop, by id.
    pub waiting: BTreeMap<u64, Waker>,
    /// The loop task's waker.
    pub loop_waker: Option<Waker>,
    /// Requests that have run on this process since it started (the first runs cold code).
    pub served: u64,
    /// Connections accepted since the process started (the first runs cold code).
    pub accepts: u64,
    /// The kinds of statement (`Stmt as u32`, one bit each) that have run since the process
    /// started: the first of each kind runs cold code (`first_statement_ms`).
    pub ran: u64,
    /// The process started warm (`[world] start = "warm"`, first start only): its first
    /// accept and request cost a warm one's.
    pub warm: bool,
}

impl Phases {
    /// Work for iteration `iter`: a continuation, a connection to accept or to read.
    fn has_work(&self, inbox: usize, iter: u64, now: u64) -> bool {
        !self.ready.is_empty()
            || !self.immediates.is_empty()
            || inbox > 0
            || self.accepted.iter().any(|(e, i)| readable_at(e, *i, iter, now))
    }

    /// The earliest time a connection accepted becomes readable, if any waits.
    fn next_readable(&self) -> Option<u64> {
        self.accepted.iter().filter_map(|(e, _)| e.readable_us()).min()
    }

    /// The iteration of the loop has run its code, or the loop goes idle: every client it
    /// preempted gets its core back now. Returns those clients.
    fn give_cores_back(&mut self, queued: &mut VecDeque<Envelope>, now: u64) -> Vec<Actor> {
        let accepted = self.accepted.iter_mut().map(|(e, _)| e);
        let mut back = Vec::new();
        for e in accepted.chain(queued.iter_mut()) {
            if e.held == Held::Waiting {
                e.held = Held::Since(now);
                back.push(e.who);
            }
        }
        back
    }

    /// Give the loop up (the holder) and wake the loop task.
    pub fn release(&mut self, me: u64) -> Option<Waker> {
        if self.grant == Some(me) {
            self.grant = None;
            return self.loop_waker.take();
        }
        None
    }

    /// Forget an execution that is gone (dropped while it waited or held the loop).
    pub fn forget(&mut self, me: u64) -> Option<Waker> {
        self.waiting.remove(&me);
        self.ready.retain(|x| *x != me);
        self.immediates.retain(|x| *x != me);
        self.release(me)
    }
}

/// The loop task of process `idx`.
pub(crate) async fn loop_main(
    world: Arc<World>,
    idx: usize,
    times: LoopTimes,
    shared: Rc<Pooled>,
    pool: Option<Rc<Pool>>,
) {
    let mut iter = 0u64;
    loop {
        wait_for_work(&world, idx, iter + 1).await;
        iter += 1;
        clock::sleep_us(draw(times.turn_us)).await;
        let ready: Vec<u64> = world.lock().processes[idx].phases.ready.drain(..).collect();
        for id in ready {
            run(&world, idx, id).await;
        }
        for env in readable(&world, idx, iter) {
            super::server::spawn_handler(&world, idx, &shared, &pool, env, true);
            run(&world, idx, NEW).await;
        }
        let conn = {
            let mut st = world.lock();
            let p = &mut st.processes[idx];
            let conn = p.inbox.queue.pop_front();
            p.phases.accepts += u64::from(conn.is_some());
            conn.map(|c| (c, p.phases.accepts == 1 && !p.phases.warm))
        };
        if let Some((env, first)) = conn {
            clock::sleep_us(draw(if first { times.first_accept_us } else { times.accept_us }))
                .await;
            world.lock().processes[idx].phases.accepted.push_back((env, iter));
        }
        give_cores_back(&world, idx);
        let checks: Vec<u64> = world.lock().processes[idx].phases.immediates.drain(..).collect();
        for id in checks {
            run(&world, idx, id).await;
        }
    }
}

/// The loop's iteration has run its code: the clients it preempted get their cores back.
fn give_cores_back(world: &World, idx: usize) {
    let now = world.now_us();
    let back = {
        let mut st = world.lock();
        let p = &mut st.processes[idx];
        p.phases.give_cores_back(&mut p.inbox.queue, now)
    };
    announce_cores_back(world, idx, back);
}

/// The trace's line for each client given its core back.
fn announce_cores_back(world: &World, idx: usize, back: Vec<Actor>) {
    for who in back {
        world.emit(Node::Server(idx as u32), Some(who), What::CoreReturned);
    }
}

/// A connection accepted in iteration `accepted` is read in iteration `iter` (a later one)
/// once its bytes have arrived.
fn readable_at(e: &Envelope, accepted: u64, iter: u64, now: u64) -> bool {
    accepted < iter && e.readable_us().is_some_and(|at| at <= now)
}

/// The connections accepted before iteration `iter` whose bytes have arrived, in order.
fn readable(world: &World, idx: usize, iter: u64) -> Vec<Envelope> {
    let now = world.now_us();
    let mut st = world.lock();
    let ph = &mut st.processes[idx].phases;
    let (read, keep): (Vec<_>, Vec<_>) =
        ph.accepted.drain(..).partition(|(e, i)| readable_at(e, *i, iter, now));
    ph.accepted = keep.into();
    read.into_iter().map(|(e, _)| e).collect()
}

/// Wait until iteration `iter` has work: sleeping until a connection's bytes arrive, or until
/// woken (a delivery, a continuation queued).
async fn wait_for_work(world: &World, idx: usize, iter: u64) {
    loop {
        let (next, back) = {
            let now = world.now_us();
            let mut st = world.lock();
            let p = &mut st.processes[idx];
            if p.phases.has_work(p.inbox.queue.len(), iter, now) {
                p.phases.idle = false;
                return;
            }
            // Nothing to do: the loop sleeps in its poll, and the clients it held run again.
            let back = p.phases.give_cores_back(&mut p.inbox.queue, now);
            p.phases.idle = true;
            (p.phases.next_readable(), back)
        };
        announce_cores_back(world, idx, back);
        let woken = std::future::poll_fn(|cx| {
            let mut st = world.lock();
            let p = &mut st.processes[idx];
            if p.phases.has_work(p.inbox.queue.len(), iter, world.now_us()) {
                p.phases.idle = false;
                return Poll::Ready(());
            }
            p.inbox.waker = Some(cx.waker().clone());
            p.phases.loop_waker = Some(cx.waker().clone());
            Poll::Pending
        });
        match next {
            Some(at) => {
                let wait = at.saturating_sub(world.now_us()).max(1);
                let _ = clock::timeout_us(wait, woken).await;
            }
            None => woken.await,
        }
    }
}

/// Grant the loop to `id` (or to the next handler read, [`NEW`]) and wait until it gives it
/// back. An execution that is gone is skipped.
async fn run(world: &World, idx: usize, id: u64) {
    let waker = {
        let mut st = world.lock();
        let ph = &mut st.processes[idx].phases;
        if id != NEW && !ph.waiting.contains_key(&id) {
            return;
        }
        ph.grant = Some(id);
        ph.waiting.remove(&id)
    };
    if let Some(w) = waker {
        w.wake();
    }
    std::future::poll_fn(|cx| {
        let mut st = world.lock();
        let ph = &mut st.processes[idx].phases;
        if ph.grant.is_none() {
            return Poll::Ready(());
        }
        ph.loop_waker = Some(cx.waker().clone());
        Poll::Pending
    })
    .await
}

/// A handler read in the poll phase has ended: if it never took the loop (it answered
/// without a statement), the loop goes on.
pub(crate) fn handler_ended(world: &World, idx: usize) {
    let waker = {
        let mut st = world.lock();
        let ph = &mut st.processes[idx].phases;
        if ph.grant == Some(NEW) {
            ph.grant = None;
            ph.loop_waker.take()
        } else {
            None
        }
    };
    if let Some(w) = waker {
        w.wake();
    }
}
