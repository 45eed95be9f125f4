//! The run's explorer (`--explore`): one per run, on the run's thread (madsim runs a whole
//! run on one thread), installed by [`simulate`](super::simulate) when a strategy is given and
//! removed when the run ends. [`draw`](super::shared::draw) and the random route ask it
//! first (who runs next on a process is its event loop's, a function of the times drawn); with none installed they draw exactly as they always did (the same
//! calls to madsim's seeded rng in the same order). What it decides for each strategy:
//!
//! - `Edges`: a timing draw takes its low or high end (0.3 each), a point within 1 % of one
//!   (0.1 each), else a uniform point; routes stay calibrated.
//! - `Pct`: every client copy (and the executions serving its attempts) has a distinct random
//!   priority; a timing draw made on a copy's behalf lands at its rank in the range (the
//!   highest priority at the low end, the lowest at the high end, so priority orders who gets
//!   ahead); at d − 1 change points drawn
//!   among the first k decisions the task the decision is made for drops below every other.
//!   Draws made for no copy (the wire, the relay, control tasks) stay calibrated.
//! - `Choices`: exhaustive schedules; every timing draw is {low, high}, every random route one
//!   of the processes, as the schedule says.
//!
//! Randomness comes from madsim's seeded rng only. Fault draws (`chance`) and madsim's own
//! task order are not the explorer's: they stay drawn from the seed.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use madsim::rand::Rng;

use crate::explore::{Explored, MAX_ARITY, Mode};

struct Explorer {
    mode: Mode,
    seen: Explored,
    /// Per request: the index of its first copy (a task's index is its copy's).
    first_copy: Vec<u32>,
    /// PCT: each task's priority (higher runs first); empty until the first decision.
    priority: Vec<u64>,
    /// PCT: change points reached whose drop waits for a decision made for a task.
    drops: u64,
    /// PCT: the drops done.
    dropped: u64,
}

thread_local! {
    static EXPLORER: RefCell<Option<Explorer>> = const { RefCell::new(None) };
    /// The task the running future works for (set while a copy's or a handler's future is
    /// polled).
    static CURRENT: Cell<Option<u32>> = const { Cell::new(None) };
}

/// The installed explorer, removed (with what it saw) when dropped or [`Installed::finish`]ed.
pub(crate) struct Installed(bool);

impl Installed {
    /// Install `mode` for this thread's run (none: nothing is installed); `copies`: the
    /// copies of each request.
    pub fn new(mode: Option<Mode>, copies: &[u32]) -> Installed {
        let Some(mode) = mode else { return Installed(false) };
        let mut first_copy = Vec::with_capacity(copies.len());
        let mut n = 0u32;
        for c in copies {
            first_copy.push(n);
            n = n.saturating_add(*c);
        }
        let seen = Explored { tasks: n, ..Default::default() };
        let e = Explorer { mode, seen, first_copy, priority: vec![], drops: 0, dropped: 0 };
        EXPLORER.with_borrow_mut(|x| *x = Some(e));
        Installed(true)
    }

    /// Remove the explorer: what it saw.
    pub fn finish(mut self) -> Option<Explored> {
        self.0 = false;
        CURRENT.set(None);
        EXPLORER.with_borrow_mut(|x| x.take()).map(|e| e.seen)
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        if self.0 {
            CURRENT.set(None);
            EXPLORER.with_borrow_mut(|x| *x = None);
        }
    }
}

/// A future polled on behalf of a task (a client copy's, or a handler serving one): draws
/// made while it runs are that task's.
pub(crate) struct Owned<F> {
    task: Option<u32>,
    fut: Pin<Box<F>>,
}

/// `fut`, working for copy `copy` of request `req` (None: for no task).
pub(crate) fn owned<F: Future>(who: Option<(usize, u32)>, fut: Pin<Box<F>>) -> Owned<F> {
    let task = who.and_then(|(req, copy)| {
        EXPLORER.with_borrow(|e| e.as_ref().and_then(|e| e.task_of(req, copy)))
    });
    Owned { task, fut }
}

impl<F: Future> Future for Owned<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let before = CURRENT.replace(self.task);
        let out = self.fut.as_mut().poll(cx);
        CURRENT.set(before);
        out
    }
}

/// A timing draw in `lo..=hi` (`lo < hi`), if an explorer decides it.
pub(crate) fn draw(lo: u64, hi: u64) -> Option<u64> {
    EXPLORER.with_borrow_mut(|e| {
        let e = e.as_mut()?;
        e.seen.decisions += 1;
        match e.mode {
            Mode::Count | Mode::Faults(_) => None,
            Mode::Edges => Some(edge(lo, hi)),
            Mode::Pct { .. } => e.pct_draw(lo, hi),
            Mode::Choices(_) => Some(if e.choose(2) == 0 { lo } else { hi }),
        }
    })
}

/// A fault draw (a rate strictly between 0 and 1), if an explorer decides it: `faults` fires
/// exactly its points; every mode counts the draw.
pub(crate) fn chance() -> Option<bool> {
    EXPLORER.with_borrow_mut(|e| {
        let e = e.as_mut()?;
        e.seen.fault_draws += 1;
        let Mode::Faults(points) = &e.mode else { return None };
        let fire = points.binary_search(&e.seen.fault_draws).is_ok();
        if fire {
            e.seen.fired.push(e.seen.fault_draws);
        }
        Some(fire)
    })
}

/// Which of `n` processes a random route takes, if an explorer decides it.
pub(crate) fn route(n: usize) -> Option<usize> {
    EXPLORER.with_borrow_mut(|e| {
        let e = e.as_mut()?;
        if n < 2 {
            return Some(0);
        }
        e.seen.decisions += 1;
        match e.mode {
            Mode::Choices(_) => Some(usize::from(e.choose(n.min(usize::from(MAX_ARITY)) as u8))),
            _ => None,
        }
    })
}

/// Edges: an end (0.3 each), within 1 % of an end (0.1 each), else uniform.
fn edge(lo: u64, hi: u64) -> u64 {
    let mut rng = madsim::rand::thread_rng();
    let near = (hi - lo) / 100;
    match rng.gen_range(0..10u32) {
        0..=2 => lo,
        3..=5 => hi,
        6 => rng.gen_range(lo..=lo + near),
        7 => rng.gen_range(hi - near..=hi),
        _ => rng.gen_range(lo..=hi),
    }
}

impl Explorer {
    fn task_of(&self, req: usize, copy: u32) -> Option<u32> {
        self.first_copy.get(req).map(|f| f + copy)
    }

    /// The next decision of an exhaustive schedule among `n` options.
    fn choose(&mut self, n: u8) -> u8 {
        let Mode::Choices(c) = &self.mode else { return 0 };
        let at = self.seen.taken.len();
        let pick = c.get(at).copied().unwrap_or(0).min(n - 1);
        self.seen.taken.push((pick, n));
        pick
    }

    /// PCT's priorities (a random permutation, above every change point's) and its d − 1
    /// change points among the first k decisions, drawn at the first decision.
    fn pct_start(&mut self) {
        let Mode::Pct { depth, k } = self.mode else { return };
        if !self.priority.is_empty() || self.seen.tasks == 0 {
            return;
        }
        let mut rng = madsim::rand::thread_rng();
        let n = self.seen.tasks as u64;
        let mut p: Vec<u64> = (0..n).map(|i| u64::from(depth) + i).collect();
        for i in (1..p.len()).rev() {
            p.swap(i, rng.gen_range(0..=i));
        }
        self.priority = p;
        let mut points: Vec<u64> =
            (1..depth).map(|_| rng.gen_range(1..=k.max(1))).collect::<Vec<_>>();
        points.sort_unstable();
        self.seen.change_points = points;
    }

    /// Change points reached at this decision: each drops the next task a decision is made
    /// for.
    fn reach(&mut self) {
        let at = self.seen.decisions;
        self.drops += self.seen.change_points.iter().filter(|c| **c == at).count() as u64;
    }

    /// A timing draw for the running task at its rank (None: no task, calibrated).
    fn pct_draw(&mut self, lo: u64, hi: u64) -> Option<u64> {
        self.pct_start();
        self.reach();
        let Mode::Pct { depth, .. } = self.mode else { return None };
        let t = CURRENT.get()? as usize;
        let mine = self.priority.get(t).copied()?;
        let mine = if self.drops > 0 {
            // The j-th change point (1-based) drops the task to priority d − j, below every
            // task's first priority.
            self.drops -= 1;
            self.dropped += 1;
            let p = u64::from(depth).saturating_sub(self.dropped);
            self.priority[t] = p;
            p
        } else {
            mine
        };
        let rank = self.priority.iter().filter(|p| **p > mine).count() as u64;
        let others = (self.priority.len() as u64).saturating_sub(1).max(1);
        Some(lo + ((u128::from(hi - lo) * u128::from(rank)) / u128::from(others)) as u64)
    }
}
