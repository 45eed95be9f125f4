//! A thread per request (the `thread-per-request` runtime of the model's stack): Python's
//! `ThreadingHTTPServer` (or a thread pool with `threads = N`) over a synchronous driver.
//!
//! One accept thread per process takes connections one by one (`accept_ms` each: the socket,
//! the thread's start); each request then runs on a thread of its own with a database
//! connection of its own, so its statements run beside other threads' and only SQLite's locks
//! order them. A thread reads its request once the bytes have arrived (the connect gap), then
//! runs its own code (`handler_ms`; the first request of a fresh process `first_handler_ms`)
//! before its first statement.
//!
//! With a GIL (`gil = true`), that code and the accept thread's run only while the thread holds
//! the process's one interpreter lock, taken first come first served and given back after every
//! switch interval when another thread waits (CPython's `sys.getswitchinterval()`, 5 ms). Every
//! call that blocks gives it up: a statement (the `sqlite3` module releases it around every
//! SQLite call, so statements, fsyncs and lock waits never hold it), the connection's open
//! (`connect_ms`), a read of the socket before the request's bytes have arrived; a thread back
//! from one waits in line to hold it again. A read whose bytes are there returns at once with
//! the lock still held (the waiter it signalled has not woken yet). The accept thread takes a
//! place in line for each thread it starts (`Thread.start()` waits for the thread to run) and
//! then queues behind it; the new thread runs its code up to its first read (`prelude_ms`) in
//! that place. Found in the real server's trace lines (stacks/python-sqlite-threads.toml): the
//! accept loop's `Thread.start()` returns 0.06 ms after the thread's setup when its bytes come
//! later, and only once the thread reaches `sqlite3.connect` when they were already there.
//!
//! Prefork (`kind = "prefork"`, `workers = N`: gunicorn's sync workers, a prefork PHP or Ruby
//! server) is the same machinery without a GIL: N worker processes share the server's socket,
//! each takes the next connection when it is idle and accepts it itself (`accept_ms`), serves it
//! alone, with a connection and memory of its own (a process-memory key store per worker), and
//! runs its own first request cold.

use std::collections::VecDeque;
use std::sync::Arc;
use std::task::{Poll, Waker};

use super::clock;
use super::net::{self, Envelope};
use super::shared::{World, draw};
use crate::history::{Actor, Node, What};
use crate::model::ThreadTimes;

/// A first-come-first-served semaphore: the GIL (one permit) or a pool's threads.
#[derive(Default)]
pub(crate) struct Fifo {
    /// Holders now.
    held: u32,
    /// Waiting, in arrival order: (ticket, waker).
    queue: VecDeque<(u64, Option<Waker>)>,
}

impl Fifo {
    /// Take a permit for `ticket` if one of `permits` is free and nobody queued before it
    /// (then also the waker of the next in line, when another permit is still free).
    fn try_take(
        &mut self,
        ticket: u64,
        permits: u32,
        cx: &std::task::Context<'_>,
    ) -> (bool, Option<Waker>) {
        let first = self.queue.front().is_none_or(|(t, _)| *t == ticket);
        if self.held < permits && first {
            if self.queue.front().is_some_and(|(t, _)| *t == ticket) {
                self.queue.pop_front();
            }
            self.held += 1;
            let next = if self.held < permits {
                self.queue.front_mut().and_then(|(_, w)| w.take())
            } else {
                None
            };
            return (true, next);
        }
        match self.queue.iter_mut().find(|(t, _)| *t == ticket) {
            Some(entry) => entry.1 = Some(cx.waker().clone()),
            None => self.queue.push_back((ticket, Some(cx.waker().clone()))),
        }
        (false, None)
    }

    /// Give a permit back; the waker of whoever is first in line.
    fn give(&mut self) -> Option<Waker> {
        self.held = self.held.saturating_sub(1);
        self.queue.front_mut().and_then(|(_, w)| w.take())
    }

    /// Leave the line (dropped while waiting); the next one's waker if it may go now.
    fn leave(&mut self, ticket: u64) -> Option<Waker> {
        let was_first = self.queue.front().is_some_and(|(t, _)| *t == ticket);
        self.queue.retain(|(t, _)| *t != ticket);
        if was_first { self.queue.front_mut().and_then(|(_, w)| w.take()) } else { None }
    }

    /// Does anyone wait?
    fn contended(&self) -> bool {
        !self.queue.is_empty()
    }
    /// Put `ticket` in line now for a thread that will take its place when it first runs.
    fn reserve(&mut self, ticket: u64) {
        self.queue.push_back((ticket, None));
    }
}

/// A process's threads: its interpreter lock and its pool (with prefork: its worker
/// processes, which are busy, and how many requests each has served).
#[derive(Default)]
pub(crate) struct ThreadState {
    pub gil: Fifo,
    pub pool: Fifo,
    busy: std::collections::BTreeSet<u32>,
    served: std::collections::BTreeMap<u32, u64>,
    /// Places in the GIL's line the accept thread took for the threads it started (a new
    /// thread waits for the lock from its start), in the order it started them.
    handed: VecDeque<u64>,
}

/// Which semaphore of the process.
#[derive(Clone, Copy)]
enum Which {
    Gil,
    Pool,
}

fn fifo(st: &mut ThreadState, which: Which) -> &mut Fifo {
    match which {
        Which::Gil => &mut st.gil,
        Which::Pool => &mut st.pool,
    }
}

/// A permit held: given back when dropped (a crash drops the task that holds it; a restart
/// starts with a fresh state anyway).
pub(crate) struct Permit {
    world: Arc<World>,
    idx: usize,
    which: Which,
    starts: u32,
    /// The worker process it is (prefork), else 0.
    pub worker: u32,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let w = {
            let mut st = self.world.lock();
            let p = &mut st.processes[self.idx];
            // A permit of a process's earlier life is void.
            if p.starts != self.starts {
                return;
            }
            if matches!(self.which, Which::Pool) {
                p.threads.busy.remove(&self.worker);
            }
            fifo(&mut p.threads, self.which).give()
        };
        if let Some(w) = w {
            w.wake();
        }
    }
}

/// Wait for a permit of `which` (`permits` of them) in line.
async fn take(world: &Arc<World>, idx: usize, which: Which, permits: u32) -> Permit {
    take_as(world, idx, which, permits, world.next_tag()).await
}

/// `take` with a ticket already in line (or kept at its head).
async fn take_as(
    world: &Arc<World>,
    idx: usize,
    which: Which,
    permits: u32,
    ticket: u64,
) -> Permit {
    struct InLine<'a>(&'a World, usize, Which, u64);
    impl Drop for InLine<'_> {
        fn drop(&mut self) {
            let w = fifo(&mut self.0.lock().processes[self.1].threads, self.2).leave(self.3);
            if let Some(w) = w {
                w.wake();
            }
        }
    }
    let line = InLine(world, idx, which, ticket);
    std::future::poll_fn(|cx| {
        let (took, next) =
            fifo(&mut world.lock().processes[idx].threads, which).try_take(ticket, permits, cx);
        if let Some(w) = next {
            w.wake();
        }
        if took { Poll::Ready(()) } else { Poll::Pending }
    })
    .await;
    std::mem::forget(line);
    let mut st = world.lock();
    let p = &mut st.processes[idx];
    // The lowest worker that is not busy (only a pool has workers; at most `permits` busy).
    let worker = match which {
        Which::Pool => (0..).find(|w| !p.threads.busy.contains(w)).unwrap_or(0),
        Which::Gil => 0,
    };
    if matches!(which, Which::Pool) {
        p.threads.busy.insert(worker);
    }
    Permit { world: world.clone(), idx, which, starts: p.starts, worker }
}

/// Run `us` of interpreted code: under the GIL when the runtime has one, in slices of its
/// switch interval when another thread waits for it. With `us = 0`: a thread back from a
/// call that ran without the lock (SQLite, a connect) waits in line to hold it again.
pub(crate) async fn code(world: &Arc<World>, idx: usize, t: &ThreadTimes, us: u64) {
    let Some(switch) = t.gil_switch_us else {
        return clock::sleep_us(us).await;
    };
    let gil = take(world, idx, Which::Gil, 1).await;
    drop(run_under(world, idx, switch, gil, us).await);
}

/// Run `us` of code holding `gil`, giving it up after a switch interval whenever another
/// thread waits and getting back in line; returns the lock, still held.
async fn run_under(
    world: &Arc<World>,
    idx: usize,
    switch: u64,
    mut gil: Permit,
    us: u64,
) -> Permit {
    let mut left = us;
    loop {
        let mut slice = left.min(switch);
        clock::sleep_us(slice).await;
        left -= slice;
        // Nobody waits: the thread keeps the lock and runs on.
        while left > 0 && !world.lock().processes[idx].threads.gil.contended() {
            slice = left.min(switch);
            clock::sleep_us(slice).await;
            left -= slice;
        }
        if left == 0 {
            return gil;
        }
        drop(gil);
        gil = take(world, idx, Which::Gil, 1).await;
    }
}

/// The accept thread of process `idx`: connections one by one, each handed to a thread. With
/// a GIL and a thread per request, `Thread.start()` returns only once the new thread has run and
/// the accept thread holds the lock again: it waits in line behind the thread it started.
pub(crate) async fn accept_main(
    world: Arc<World>,
    idx: usize,
    t: ThreadTimes,
    shared: std::rc::Rc<super::store::Pooled>,
) {
    loop {
        for env in net::accept(&world, idx).await {
            // Prefork: the connection waits in the shared socket's queue; an idle worker
            // accepts it itself (`start`).
            let handed = !t.prefork && accept_code(&world, idx, &t).await;
            super::server::spawn_handler(&world, idx, &shared, &None, env, false);
            if handed {
                // `Thread.start()` returns once the accept thread holds the lock again.
                code(&world, idx, &t, 0).await;
            }
        }
    }
}

/// The accept thread's code for one connection, until it starts the connection's thread. With
/// a GIL and a thread per request it runs under the lock and takes a place in line for the
/// thread it is about to start (returned true: the accept thread then queues behind it).
async fn accept_code(world: &Arc<World>, idx: usize, t: &ThreadTimes) -> bool {
    let first = {
        let mut st = world.lock();
        let ph = &mut st.processes[idx].phases;
        ph.accepts += 1;
        ph.accepts == 1 && !ph.warm
    };
    let us = draw(if first { t.first_accept_us } else { t.accept_us });
    let Some(switch) = t.gil_switch_us.filter(|_| t.threads == 0) else {
        code(world, idx, t, us).await;
        return false;
    };
    let gil = take(world, idx, Which::Gil, 1).await;
    let gil = run_under(world, idx, switch, gil, us).await;
    let ticket = world.next_tag();
    {
        let mut st = world.lock();
        let th = &mut st.processes[idx].threads;
        th.gil.reserve(ticket);
        th.handed.push_back(ticket);
    }
    drop(gil);
    true
}

/// A request's thread starts: a thread of the pool (waiting for one when all are busy), the
/// request's bytes read (once they have arrived), then its own code before its first
/// statement. The permit it returns is the thread, held until the request ends.
pub(crate) async fn start(
    world: &Arc<World>,
    idx: usize,
    env: &Envelope,
    who: Actor,
    t: &ThreadTimes,
) -> Option<Permit> {
    let thread = match t.threads {
        0 => None,
        n => Some(take(world, idx, Which::Pool, n).await),
    };
    let worker = thread.as_ref().map_or(0, |p| p.worker);
    if t.prefork {
        // The idle worker accepts the connection itself; a worker's first is cold.
        let first = {
            let mut st = world.lock();
            let p = &mut st.processes[idx];
            let accepted = p.threads.served.get(&worker).copied().unwrap_or(0) == 0;
            accepted && !p.phases.warm
        };
        code(world, idx, t, draw(if first { t.first_accept_us } else { t.accept_us })).await;
    }
    match t.gil_switch_us {
        Some(switch) if !t.prefork => gil_thread(world, idx, env, who, t, switch).await,
        _ => free_thread(world, idx, env, who, t, worker).await,
    }
    // The request's own database connection opened, the GIL released meanwhile.
    let connect = draw(t.connect_us);
    if connect > 0 {
        clock::sleep_us(connect).await;
        code(world, idx, t, 0).await;
    }
    thread
}

/// A request's thread under a GIL: its code until it first reads its socket (`prelude_us`) in
/// the place in line the accept thread took for it; a read whose bytes are there returns at
/// once and the thread runs on with the lock; one that blocks gives the lock up until they
/// arrive, then waits in line. Then the rest of its code until the connect.
async fn gil_thread(
    world: &Arc<World>,
    idx: usize,
    env: &Envelope,
    who: Actor,
    t: &ThreadTimes,
    switch: u64,
) {
    let handed = match t.threads {
        0 => world.lock().processes[idx].threads.handed.pop_front(),
        _ => None,
    };
    let us = handler_code(world, idx, who, t, None);
    let prelude = draw(t.prelude_us).min(us);
    let mut gil = match handed {
        Some(ticket) => take_as(world, idx, Which::Gil, 1, ticket).await,
        None => take(world, idx, Which::Gil, 1).await,
    };
    gil = run_under(world, idx, switch, gil, prelude).await;
    let readable = env.arrived_us.saturating_add(env.connect_gap_us);
    let now = world.now_us();
    if readable > now {
        drop(gil);
        clock::sleep_us(readable - now).await;
        gil = take(world, idx, Which::Gil, 1).await;
    }
    drop(run_under(world, idx, switch, gil, us - prelude).await);
}

/// A request's thread with no lock to share (no GIL, or a prefork worker): its request's
/// bytes read once they have arrived, then its own code.
async fn free_thread(
    world: &Arc<World>,
    idx: usize,
    env: &Envelope,
    who: Actor,
    t: &ThreadTimes,
    worker: u32,
) {
    let readable = env.arrived_us.saturating_add(env.connect_gap_us);
    let now = world.now_us();
    if readable > now {
        clock::sleep_us(readable - now).await;
    }
    let us = handler_code(world, idx, who, t, t.prefork.then_some(worker));
    code(world, idx, t, us).await;
}

/// How long a request's own code runs (drawn now, and traced): a cold process's first request
/// costs `first_handler_us`, and so does each prefork worker's (`worker`) first.
fn handler_code(
    world: &Arc<World>,
    idx: usize,
    who: Actor,
    t: &ThreadTimes,
    worker: Option<u32>,
) -> u64 {
    let first = {
        let mut st = world.lock();
        let p = &mut st.processes[idx];
        let n = match worker {
            Some(w) => p.threads.served.entry(w).or_default(),
            None => &mut p.phases.served,
        };
        *n += 1;
        *n == 1 && !p.phases.warm
    };
    let us = draw(if first { t.first_handler_us } else { t.handler_us });
    world.emit(Node::Server(idx as u32), Some(who), What::HandlerCode { us, cold: first });
    us
}
