//! What every node of one run can reach: the [`World`] handle (the sim, the model, the clock,
//! the run's database) and its mutable [`State`], owned in named parts. Also the addresses
//! and message tags of the simulated network, and the one rule for drawing a fault decision.

use std::collections::BTreeMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};

use madsim::rand::Rng;
use madsim::runtime::NodeHandle;
use madsim::task::NodeId;

use super::clock;
use super::net::{Envelope, Inbox, Wire};
use super::provider::Provider;
use super::store::Db;
use crate::history::{Actor, Event, Node, TraceHasher, What};
use crate::model::Model;
use crate::report::{AttemptOutcome, KeyRecord, RequestReport, Scope};
use crate::scenario::{Route, Sim};

/// Draw one fault decision from the seed. Rates of 0 draw nothing, so adding a fault kind to
/// a sim does not perturb the schedules of sims without it.
pub(crate) fn chance(rate: f64) -> bool {
    rate > 0.0
        && (rate >= 1.0
            || super::explorer::chance()
                .unwrap_or_else(|| madsim::rand::thread_rng().gen_bool(rate)))
}

/// Draw one duration uniformly from an inclusive range (µs), the one rule for every drawn
/// latency, delay, clock offset, backoff jitter and relay phase: a fixed range (`lo == hi`)
/// draws nothing, so it does not perturb the schedule.
///
/// With an explorer (`--explore`) installed, it decides the draw instead (`lo < hi` only);
/// without one the draw is exactly the calibrated one.
pub(crate) fn draw(d: impl Into<crate::model::Dist>) -> u64 {
    let (lo, hi) = match d.into() {
        crate::model::Dist::Uniform(lo, hi) => (lo, hi),
        q => {
            // A measured distribution: a probability drawn as a uniform one would be, then
            // its quantile.
            let u = draw_uniform(0, 1_000_000);
            return q.at(u as u32);
        }
    };
    draw_uniform(lo, hi)
}

fn draw_uniform(lo: u64, hi: u64) -> u64 {
    if lo == hi {
        lo
    } else if let Some(us) = super::explorer::draw(lo.min(hi), hi.max(lo)) {
        us
    } else {
        madsim::rand::thread_rng().gen_range(lo..=hi)
    }
}

/// A server process as the rest of the world sees it.
#[derive(Default)]
pub(crate) struct ProcessState {
    /// Running (not crashed, not yet restarted).
    pub up: bool,
    /// Cut off from the network by a partition window.
    pub partitioned: bool,
    /// Requests delivered and not yet admitted.
    pub inbox: Inbox<Envelope>,
    /// Requests being served (reply tag → who): their clients' connections are open.
    pub serving: BTreeMap<u64, Actor>,
    /// How far the process's clock is off true time (µs; skew and jumps).
    pub clock_offset_us: i64,
    /// Times this process has started (1 at the run's start; a restart adds one).
    pub starts: u32,
    /// A crash is under way (the process is going down, restart pending).
    pub crashing: bool,
    /// The event loop in phases (the stack's runtime): who may run next, and when.
    pub phases: super::phases::Phases,
    /// A thread-per-request runtime's interpreter lock and thread pool.
    pub threads: super::threads::ThreadState,
    /// The process-memory key store (lost on restart).
    pub memory: BTreeMap<Scope, KeyRecord>,
    /// `[key] local_cache`: completed records this process wrote or read (lost on restart).
    pub local: BTreeMap<Scope, KeyRecord>,
    /// Prefork: the memory (`memory`, `local`) of workers 1, 2, … (worker 0's is above).
    pub workers_memory: BTreeMap<u32, (Records, Records)>,
    /// The rate limiter's bucket: (micro-tokens left, model time of the last refill); None:
    /// full.
    pub bucket: Option<(u64, u64)>,
    /// An event loop's one connection to the key store (a cache): the model times at which
    /// its last command reached the store and its last reply came back. Both ways are FIFO.
    pub store_conn: (u64, u64),
}

/// Key records by scope (a process's memory, its local cache).
pub(crate) type Records = BTreeMap<Scope, KeyRecord>;

impl ProcessState {
    /// The process-memory key store of `worker` (prefork; 0 for every other runtime).
    pub fn memory_of(&mut self, worker: u32) -> &mut BTreeMap<Scope, KeyRecord> {
        match worker {
            0 => &mut self.memory,
            w => &mut self.workers_memory.entry(w).or_default().0,
        }
    }

    /// The local cache of completed records of `worker`.
    pub fn local_of(&mut self, worker: u32) -> &mut BTreeMap<Scope, KeyRecord> {
        match worker {
            0 => &mut self.local,
            w => &mut self.workers_memory.entry(w).or_default().1,
        }
    }

    /// Every worker's process-memory key records, taken out (a wipe, the end of the run).
    pub fn take_memory(&mut self) -> Vec<(Scope, KeyRecord)> {
        let mut all: Vec<(Scope, KeyRecord)> =
            std::mem::take(&mut self.memory).into_iter().collect();
        for (m, _) in self.workers_memory.values_mut() {
            all.extend(std::mem::take(m));
        }
        all
    }

    /// The process is gone or fresh: every worker's memory and local cache are empty.
    pub fn forget_memory(&mut self) {
        self.memory.clear();
        self.local.clear();
        self.workers_memory.clear();
    }
}

/// A request or action that others may wait for (`after`, `until`).
#[derive(Default)]
pub(crate) struct Latch {
    pub done: bool,
    pub waiters: Vec<Waker>,
}

/// The history as it is being recorded: always hashed, kept only when asked for.
#[derive(Default)]
pub(crate) struct Recorder {
    pub keep: bool,
    pub events: Vec<Event>,
    pub hasher: TraceHasher,
    pub count: usize,
    pub last_t_us: u64,
    /// Faults that fired, by name ([`Event::fault`]), and how often.
    pub faults: std::collections::BTreeMap<String, u64>,
}

/// What the supervisor's quiescence counts of its own (the wire, the inboxes and the outbox
/// are counted where they are), and the generation it waits on.
#[derive(Default)]
pub(crate) struct Quiet {
    /// Bumped by every change quiescence depends on; the supervisor waits on it, and so do
    /// background pollers parked while the world is idle.
    pub generation: u64,
    /// Everyone waiting for the next change, woken in the order they began to wait.
    pub wakers: Vec<Waker>,
    /// Requests being served.
    pub handlers_in_flight: u32,
    /// Actions not yet finished.
    pub actions_running: u32,
}

impl Quiet {
    /// Handlers and actions running.
    pub fn running(&self) -> u64 {
        (self.handlers_in_flight + self.actions_running) as u64
    }
}

/// Mutable state of a run, shared by every node (one thread: the lock is never contended).
#[derive(Default)]
pub(crate) struct State {
    pub history: Recorder,
    /// Times each `[[inject]]` fired.
    pub inject_fired: Vec<u32>,
    /// What the clients saw, per request.
    pub outcomes: Vec<RequestReport>,
    /// Steps of work done (bounded by `max_steps`): program steps, lock retries, polls, passes.
    pub steps: u64,
    /// What the supervisor's quiescence counts, and the wake-up it waits on.
    pub quiet: Quiet,
    pub bounds_hit: Vec<String>,
    pub next_tag: u64,
    /// The last row id handed out: rows get the engine's ids, never reused (SQLite would
    /// reuse the rowid of a rolled-back insert, and the oracle would mistake one row for
    /// another).
    pub last_row_id: i64,
    /// (intent, µs) of every key deleted by the collector, expiry or a delete-keys action.
    pub collected: Vec<crate::report::Collected>,
    /// The TTL cache key store, shared by all processes.
    pub cache: BTreeMap<Scope, KeyRecord>,
    /// The effect provider's memory: deliveries, effects performed, dedupe keys, declines.
    pub provider: Provider,
    pub processes: Vec<ProcessState>,
    /// The network: packets in flight, the receiver's inbox, reply mailboxes.
    pub wire: Wire,
    /// Per request then action (the index into [`World::names`]).
    pub done: Vec<Latch>,
    /// The connection whose commit is syncing a rollback journal now: SQLite holds the
    /// database's EXCLUSIVE lock through that fsync, so every other connection's statement
    /// finds it locked (Runner::sync_journal).
    pub syncing: Option<u64>,
}

/// Everything a node of the run can reach.
pub(crate) struct World {
    pub sim: Arc<Sim>,
    pub model: Arc<Model>,
    pub db: Db,
    pub wait_budget_us: u64,
    pub start: clock::Instant,
    pub clock: clock::RunClock,
    pub state: Mutex<State>,
    /// The node that runs everything but the server processes (clients, the receiver, the
    /// wire, the control tasks); it spawns restarts.
    pub outside: Mutex<Option<NodeHandle>>,
    pub server_nodes: Mutex<Vec<NodeId>>,
    /// Ids of requests then actions (the index into `State::done`).
    pub names: Vec<String>,
}

/// Wall clocks count from an epoch 100 days before model time 0, so that a clock running
/// behind (by at most the 30 days any input allows) never reads below zero.
pub const WALL_EPOCH_US: u64 = 100 * 86_400_000_000;

impl World {
    /// A world for one run, its clock starting now (inside the runtime). The sim's wait budget
    /// overrides the model's.
    pub fn new(
        sim: Arc<Sim>,
        model: Arc<Model>,
        db: Db,
        state: State,
        names: Vec<String>,
    ) -> World {
        World {
            wait_budget_us: sim.world.wait_budget_us.unwrap_or(model.wait_budget_us),
            sim,
            model,
            db,
            start: clock::now(),
            clock: clock::RunClock::start(),
            state: Mutex::new(state),
            outside: Mutex::new(None),
            server_nodes: Mutex::new(vec![]),
            names,
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Model time since the run started (µs).
    pub fn now_us(&self) -> u64 {
        self.clock.elapsed_us()
    }

    /// The database host's wall clock (µs), taken as correct: what the key collector reads.
    pub fn db_clock_us(&self) -> u64 {
        WALL_EPOCH_US + self.now_us()
    }

    /// Process `p`'s wall clock (µs): the database's plus the process's skew and jumps.
    pub fn process_clock_us(&self, p: usize) -> u64 {
        let offset = self.lock().processes[p].clock_offset_us;
        self.db_clock_us().saturating_add_signed(offset)
    }

    /// Model time in fractional milliseconds (for attempt outcomes).
    pub fn now_ms_f(&self) -> f64 {
        self.now_us() as f64 / 1000.0
    }

    /// Record an event in the history at the current time.
    pub fn emit(&self, node: Node, who: Option<Actor>, what: What) {
        let t_us = self.now_us();
        let e = Event { t_us, node, who, what };
        let mut st = self.lock();
        let h = &mut st.history;
        e.hash(&mut h.hasher);
        h.count += 1;
        h.last_t_us = t_us;
        if let Some(f) = e.fault() {
            *h.faults.entry(f.into_owned()).or_insert(0) += 1;
        }
        if h.keep {
            h.events.push(e);
        }
    }

    /// Spend one step of the run's work budget (`world.max_steps`): a program step, a lock
    /// retry, a poll of a waiting request, a collector or relay pass. False once the budget is
    /// spent; the bound is then reported and the caller stops. This is what keeps a run's wall
    /// time proportional to its work whatever the numbers in its files.
    pub fn spend(&self) -> bool {
        let over = {
            let mut st = self.lock();
            st.steps += 1;
            st.steps > self.sim.world.max_steps
        };
        if over {
            let max = self.sim.world.max_steps;
            self.bound_hit(format!("max-steps: more than {max} steps of work"));
        }
        !over
    }

    /// Something the supervisor's quiescence depends on changed (a handler or an action ended,
    /// a packet reached a process, the relay marked a message): wake it.
    pub fn work_changed(&self) {
        let wakers = {
            let mut st = self.lock();
            st.quiet.generation += 1;
            std::mem::take(&mut st.quiet.wakers)
        };
        for w in wakers {
            w.wake();
        }
    }

    /// Wait for the next [`World::work_changed`].
    pub async fn next_work_change(&self) {
        let start = self.lock().quiet.generation;
        std::future::poll_fn(|cx| {
            let mut st = self.lock();
            if st.quiet.generation != start {
                Poll::Ready(())
            } else {
                if !st.quiet.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    st.quiet.wakers.push(cx.waker().clone());
                }
                Poll::Pending
            }
        })
        .await
    }

    pub fn bound_hit(&self, what: String) {
        let mut st = self.lock();
        if !st.bounds_hit.contains(&what) {
            st.bounds_hit.push(what);
        }
    }

    /// A row id no row of this run has had.
    pub fn next_row_id(&self) -> i64 {
        let mut st = self.lock();
        st.last_row_id += 1;
        st.last_row_id
    }

    pub fn next_tag(&self) -> u64 {
        let mut st = self.lock();
        st.next_tag += 1;
        st.next_tag
    }

    fn index_of(&self, name: &str) -> usize {
        self.names.iter().position(|n| n == name).expect("ids are checked at load")
    }

    /// Wait until every named request or action has finished.
    ///
    /// Hand-written rather than tokio's `watch`: tokio picks a notify shard with a thread-local
    /// RNG seeded from the OS, which made wake-up order (and so the schedule) vary between runs.
    pub async fn wait_for(&self, names: &[String]) {
        for n in names {
            let i = self.index_of(n);
            std::future::poll_fn(|cx| {
                let mut st = self.lock();
                if st.done[i].done {
                    Poll::Ready(())
                } else {
                    st.done[i].waiters.push(cx.waker().clone());
                    Poll::Pending
                }
            })
            .await;
        }
    }

    /// Mark a request or action finished and wake its waiters, in the order they waited.
    pub fn mark_done(&self, name: &str) {
        let i = self.index_of(name);
        let wakers = {
            let mut st = self.lock();
            st.done[i].done = true;
            std::mem::take(&mut st.done[i].waiters)
        };
        for w in wakers {
            w.wake();
        }
    }

    /// Which server process a copy's attempt goes to.
    pub fn route(&self, req: usize, copy: u32) -> usize {
        let n = self.sim.world.processes;
        match self.sim.requests[req].route {
            Route::Fixed(i) => i,
            Route::Alternate => copy as usize % n,
            Route::Random => super::explorer::route(n)
                .unwrap_or_else(|| madsim::rand::thread_rng().gen_range(0..n)),
        }
    }

    /// Record a finished attempt.
    pub fn record_attempt(&self, req: usize, copy: u32, a: AttemptOutcome) {
        self.lock().outcomes[req].copies[copy as usize].push(a);
    }
}
