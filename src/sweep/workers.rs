//! Running the work on worker threads (`run_cells`, `worker`, `run_seed`), an exhaustive
//! sweep's schedules one after the other (`run_exhaustive`), and the `Progress` counters the
//! workers bump.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::plan::{Work, count_coverage, job, keep_shard, plan};
use super::{Cell, INTERRUPTED, SeedResult, SweepOptions, per_seed_line};
use crate::model::Model;
use crate::report::RunReport;
use crate::run::{self, RunError, RunOptions};
use crate::scenario::Sim;

/// How far a sweep or matrix is: runs and cells done out of their totals. The workers bump
/// it as they finish seeds; a display (the CLI's progress bar) polls it. Nothing in the sweep
/// reads it back, so it cannot change a result, its order or its determinism.
#[derive(Debug, Default)]
pub struct Progress {
    runs_done: AtomicU64,
    runs_total: AtomicU64,
    cells_done: AtomicU64,
    cells_total: AtomicU64,
}

/// A [`Progress`] read at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProgressSnapshot {
    /// Runs finished.
    pub runs_done: u64,
    /// Runs to do in all.
    pub runs_total: u64,
    /// Cells whose every seed finished (n/a cells count as done from the start).
    pub cells_done: u64,
    /// Cells in all.
    pub cells_total: u64,
}

impl Progress {
    /// Start counting anew: `runs` runs over `cells` cells, `cells_done` of them done already.
    pub fn start(&self, runs: u64, cells: u64, cells_done: u64) {
        self.runs_done.store(0, Ordering::Relaxed);
        self.cells_done.store(cells_done, Ordering::Relaxed);
        self.runs_total.store(runs, Ordering::Relaxed);
        self.cells_total.store(cells, Ordering::Relaxed);
    }

    /// One run finished (for counters kept outside a sweep: a shrink's runs).
    pub fn run_done(&self) {
        self.runs_done.fetch_add(1, Ordering::Relaxed);
    }

    /// One cell finished.
    pub fn cell_done(&self) {
        self.cells_done.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> ProgressSnapshot {
        ProgressSnapshot {
            runs_done: self.runs_done.load(Ordering::Relaxed),
            runs_total: self.runs_total.load(Ordering::Relaxed),
            cells_done: self.cells_done.load(Ordering::Relaxed),
            cells_total: self.cells_total.load(Ordering::Relaxed),
        }
    }
}

/// What a worker sends the collecting thread.
enum Msg {
    /// The per-seed lines of the seeds finished since the last message (when asked for).
    Lines(Vec<(u64, String)>),
    /// The worker's aggregates, when it has no more work.
    Done(Vec<Option<Cell>>),
}

/// Seeds a worker runs between two messages of per-seed lines.
const BATCH: u64 = 32;

/// Run every (sim, model) cell over its seeds (`seeds`, or the sim's own range) on
/// `opts.jobs` threads. Each worker aggregates its own seeds (reports are freed on the thread
/// that made them) and the aggregates are merged at the end: the merge is commutative, so any
/// number of workers gives the same cells. With `opts.per_seed`, `each` receives every seed's
/// JSON line on the calling thread, in completion order. Cells come back sim-major.
pub fn run_cells(
    sims: &[Arc<Sim>],
    models: &[Arc<Model>],
    seeds: Option<Range<u64>>,
    opts: &SweepOptions,
    mut each: impl FnMut(u64, &str),
) -> Result<Vec<Cell>, RunError> {
    let (mut cells, mut work) = plan(sims, models, seeds);
    if let Some((k, n)) = opts.shard {
        keep_shard(&mut work, &mut cells, k, n);
    }
    if opts.coverage {
        count_coverage(&work, &mut cells);
    }
    // Saturating: two cells of near 2^64 seeds pass u64::MAX (a count nobody finishes).
    let total = work.iter().fold(0u64, |t, w| t.saturating_add(w.seeds.end - w.seeds.start));
    // Seeds left per cell, for the cells-done count (an n/a or empty cell is done already).
    let left: Vec<AtomicU64> =
        work.iter().map(|w| AtomicU64::new(w.seeds.end - w.seeds.start)).collect();
    if let Some(p) = &opts.progress {
        let empty = left.iter().filter(|n| n.load(Ordering::Relaxed) == 0).count() as u64;
        p.start(total, work.len() as u64, empty);
    }
    let next = AtomicU64::new(0);
    let jobs = opts.jobs.max(1).min(total.max(1) as usize);
    let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Msg, RunError>>(64);
    let template = cells.clone();
    std::thread::scope(|s| {
        for w in 0..jobs {
            let wtx = tx.clone();
            let shared = Shared { work: &work, next: &next, left: &left, template: &template };
            let spawned = std::thread::Builder::new()
                .name(format!("sweep-{w}"))
                .spawn_scoped(s, move || worker(shared, opts, wtx));
            if let Err(e) = spawned {
                // The workers already started stop after their current seed.
                INTERRUPTED.store(true, Ordering::Relaxed);
                drop(tx);
                for _ in rx.iter() {}
                INTERRUPTED.store(false, Ordering::Relaxed);
                return Err(RunError::Threads(e.to_string()));
            }
        }
        drop(tx);
        for msg in rx {
            match msg? {
                Msg::Lines(lines) => {
                    for (seed, line) in &lines {
                        each(*seed, line);
                    }
                }
                Msg::Done(partial) => {
                    for (i, c) in partial.into_iter().enumerate() {
                        if let Some(c) = c {
                            cells[i].merge(c);
                        }
                    }
                }
            }
        }
        Ok::<(), RunError>(())
    })?;
    if INTERRUPTED.load(Ordering::Relaxed) {
        for c in &mut cells {
            c.interrupted = true;
        }
    }
    Ok(cells)
}

/// One seed of one cell (twice with `check_determinism`, comparing trace hashes), and with
/// `opts.coverage` the dangerous moments it reached.
fn run_seed(
    cell: usize,
    sim: &Arc<Sim>,
    model: &Arc<Model>,
    seed: u64,
    opts: &SweepOptions,
) -> Result<(SeedResult, Option<Vec<crate::moments::Moment>>), RunError> {
    let ex = opts.explore.as_ref();
    let (mut report, moments) = if opts.coverage {
        let (report, m) = crate::moments::run_with_moments(sim, model, seed, ex)?;
        (report, Some(m))
    } else {
        (run::run_lean(sim, model, seed, ex)?, None)
    };
    let mut nondeterministic = false;
    if opts.check_determinism {
        nondeterministic = run::run_lean(sim, model, seed, ex)?.trace_hash != report.trace_hash;
    }
    if opts.judging == super::Judging::AsReal {
        crate::oracle::unanswered_as_real(&mut report.violations, &Default::default());
    }
    Ok((SeedResult { cell, seed, report, nondeterministic }, moments))
}

/// What every worker shares: the work, the next job's index, the seeds left per cell (for
/// the progress count) and the empty cells.
#[derive(Clone, Copy)]
struct Shared<'a> {
    work: &'a [Work],
    next: &'a AtomicU64,
    left: &'a [AtomicU64],
    template: &'a [Cell],
}

/// A worker thread: takes jobs until there are none (or an interrupt), aggregates its own
/// seeds, bumps the progress counters (if any) after each, sends its per-seed lines every
/// [`BATCH`] seeds, and its aggregates when done.
fn worker(
    sh: Shared<'_>,
    opts: &SweepOptions,
    wtx: std::sync::mpsc::SyncSender<Result<Msg, RunError>>,
) {
    let mut mine: Vec<Option<Cell>> = vec![None; sh.template.len()];
    let mut lines = Vec::new();
    loop {
        if INTERRUPTED.load(Ordering::Relaxed) {
            break;
        }
        let i = sh.next.fetch_add(1, Ordering::Relaxed);
        let Some((cell, sim, model, seed)) = job(sh.work, i) else { break };
        let (r, moments) = match run_seed(cell, sim, model, seed, opts) {
            Ok(r) => r,
            Err(e) => {
                let _ = wtx.send(Err(e));
                return;
            }
        };
        if opts.per_seed {
            lines.push((seed, per_seed_line(&r, &sim.name, &model.name)));
        }
        let c = mine[cell].get_or_insert_with(|| sh.template[cell].clone());
        c.add(&r);
        if let Some(m) = &moments {
            c.add_moments(m);
        }
        if let Some(p) = &opts.progress {
            p.run_done();
            // `cell` is the work item's index too (`plan` makes one of each, in one order).
            if sh.left[cell].fetch_sub(1, Ordering::Relaxed) == 1 {
                p.cell_done();
            }
        }
        if lines.len() as u64 == BATCH
            && wtx.send(Ok(Msg::Lines(std::mem::take(&mut lines)))).is_err()
        {
            return;
        }
    }
    if !lines.is_empty() {
        let _ = wtx.send(Ok(Msg::Lines(lines)));
    }
    let _ = wtx.send(Ok(Msg::Done(mine)));
}

/// An exhaustive sweep (`--explore exhaustive`): its schedules aggregated as a cell whose
/// seeds are the schedules' indexes, each schedule's choices, and whether the space was
/// exhausted (else the bound, or an interrupt, stopped it).
pub struct Exhaustive {
    /// The aggregate: schedule `i` is the cell's seed `i`.
    pub cell: Cell,
    /// The choices of schedule `i` (`show_choices`: `exhaustive@…` replays it).
    pub schedules: Vec<String>,
    /// Every schedule was explored.
    pub exhausted: bool,
    /// The seed every schedule ran with (madsim's task order and the fault draws held by it).
    pub seed: u64,
}

/// Enumerate the first `depth` decisions of the world on `seed` depth first, up to `bound`
/// schedules, one after the other (each schedule is the previous one's next: no worker threads).
pub fn run_exhaustive(
    sim: &Arc<Sim>,
    model: &Arc<Model>,
    seed: u64,
    (bound, depth): (u64, u32),
    progress: Option<&Progress>,
) -> Result<Exhaustive, RunError> {
    use crate::explore::{Strategy, show_choices};
    let mut cell = Cell::new(sim, model, &(0..bound));
    let mut schedules: Vec<String> = Vec::new();
    let mut next = Some(vec![]);
    if let Some(p) = progress {
        p.start(bound, 1, 0);
    }
    while (schedules.len() as u64) < bound && !INTERRUPTED.load(Ordering::Relaxed) {
        let Some(choices) = next.take() else { break };
        let strategy = Strategy::Exhaustive { bound, depth, schedule: Some(choices) };
        let (out, note) =
            run::run_explored(sim, model, seed, RunOptions::default(), Some(&strategy))?;
        let explored = note.map(|n| n.explored).unwrap_or_default();
        let i = schedules.len() as u64;
        let report = RunReport { seed: i, ..out.report };
        cell.add(&SeedResult { cell: 0, seed: i, report, nondeterministic: false });
        schedules.push(show_choices(&explored.choices()));
        next = explored.next_schedule(depth);
        if let Some(p) = progress {
            p.run_done();
        }
    }
    cell.seeds = format!("0..{}", schedules.len());
    cell.interrupted = INTERRUPTED.load(Ordering::Relaxed) && next.is_some();
    Ok(Exhaustive { cell, schedules, exhausted: next.is_none(), seed })
}
