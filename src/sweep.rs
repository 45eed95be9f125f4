//! Running many seeds: the matrix (models × sims × seeds) on worker threads, aggregated while
//! streaming (no per-seed reports are kept), with the same result for any number of workers.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::catalog;
use crate::model::Model;
use crate::report::{Check, RunReport, Verdict, ViolationKind};

use crate::run::{self, RunError, RunOptions};
use crate::scenario::Sim;

/// The aggregate of one cell: one sim × one model over a seed range.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Cell {
    /// The model's name.
    pub model: String,
    /// The sim's name.
    pub sim: String,
    /// The seed range swept, `A..B`.
    pub seeds: String,
    /// Seeds run (fewer than the range when interrupted, none when n/a).
    pub runs: u64,
    /// Expectations held on every seed tried.
    pub passed: bool,
    /// Seeds on which an expectation failed.
    pub failed_seeds: u64,
    /// The lowest seed on which an expectation failed, if any.
    pub first_failed_seed: Option<u64>,
    /// The checks that failed on the first failing seed.
    pub first_failure: Vec<Check>,
    /// Rows at the end of a run → number of runs.
    pub rows: BTreeMap<u64, u64>,
    /// External effects at the end of a run → number of runs.
    pub effects: BTreeMap<u64, u64>,
    /// Status of every attempt (or `transport-failure`) → count over all runs.
    pub statuses: BTreeMap<String, u64>,
    /// Runs that hit a bound (time, steps).
    pub bounded_runs: u64,
    /// Per violation name: on how many seeds, how often in all, first seed.
    pub violations: BTreeMap<String, ViolationStat>,
    /// Rows per intent → number of intents (over all runs).
    pub rows_per_intent: BTreeMap<u64, u64>,
    /// Effects per intent → number of intents (over all runs).
    pub effects_per_intent: BTreeMap<u64, u64>,
    /// Seeds with at least one violation that is not policy-permitted.
    pub violating_seeds: u64,
    /// Intents without a final client-visible outcome, over all runs.
    pub ambiguous_intents: u64,
    /// Seeds whose second run gave a different trace (only with determinism checking).
    pub nondeterministic_seeds: Vec<u64>,
    /// The sweep was interrupted: the cell holds only the seeds that finished (`runs`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// False when the sim does not apply to the model (`n/a`: it injects at a point the
    /// model lacks); no seed is run.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub applicable: bool,
    /// Why the cell is `n/a`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Coverage of dangerous moments (`--coverage`): per moment, possible for the cell and
    /// the seeds that reached it. None (and absent from shard files and JSON) without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<crate::moments::Coverage>,
    /// The seeds this cell ran when a shard ran a slice of the work (`--shard`).
    #[serde(skip)]
    pub covered: Option<Range<u64>>,
}

impl Cell {
    pub(crate) fn new(sim: &Sim, model: &Model, seeds: &Range<u64>) -> Cell {
        let reason = run::not_applicable(sim, model);
        Cell {
            model: model.name.clone(),
            sim: sim.name.clone(),
            seeds: format!("{}..{}", seeds.start, seeds.end),
            runs: 0,
            passed: true,
            failed_seeds: 0,
            first_failed_seed: None,
            first_failure: vec![],
            rows: BTreeMap::new(),
            effects: BTreeMap::new(),
            statuses: BTreeMap::new(),
            bounded_runs: 0,
            violations: BTreeMap::new(),
            rows_per_intent: BTreeMap::new(),
            effects_per_intent: BTreeMap::new(),
            ambiguous_intents: 0,
            violating_seeds: 0,
            nondeterministic_seeds: vec![],
            interrupted: false,
            applicable: reason.is_none(),
            reason,
            coverage: None,
            covered: None,
        }
    }

    pub(crate) fn add(&mut self, sr: &SeedResult) {
        let r = &sr.report;
        if sr.nondeterministic {
            let pos = self.nondeterministic_seeds.partition_point(|s| *s < sr.seed);
            self.nondeterministic_seeds.insert(pos, sr.seed);
        }
        for (i, v) in r.violations.iter().enumerate() {
            let name = v.name.name();
            let st = match self.violations.get_mut(name) {
                Some(st) => st,
                None => self.violations.entry(name.to_string()).or_insert(ViolationStat {
                    seeds: 0,
                    occurrences: 0,
                    first_seed: r.seed,
                    permitted: v.permitted,
                }),
            };
            st.occurrences += 1;
            // The first violation of its kind in this run.
            if !r.violations[..i].iter().any(|x| x.name == v.name) {
                st.seeds += 1;
                st.first_seed = st.first_seed.min(r.seed);
            }
        }
        for (rows, effects) in &r.per_intent {
            *self.rows_per_intent.entry(*rows).or_insert(0) += 1;
            *self.effects_per_intent.entry(*effects).or_insert(0) += 1;
        }
        self.ambiguous_intents += r.ambiguous_intents;
        if r.violations.iter().any(|v| !v.permitted) {
            self.violating_seeds += 1;
        }
        self.runs += 1;
        *self.rows.entry(r.rows.len() as u64).or_insert(0) += 1;
        *self.effects.entry(r.effects_total).or_insert(0) += 1;
        count_statuses(&mut self.statuses, r);
        if !r.bounds_hit.is_empty() {
            self.bounded_runs += 1;
        }
        if !r.passed() {
            self.passed = false;
            self.failed_seeds += 1;
            if self.first_failed_seed.is_none_or(|s| r.seed < s) {
                self.first_failed_seed = Some(r.seed);
                self.first_failure = r.checks.iter().filter(|c| !c.held).cloned().collect();
                for b in &r.bounds_hit {
                    self.first_failure.push(Check {
                        what: "bound".into(),
                        held: false,
                        expected: "no bound hit".into(),
                        actual: b.clone(),
                    });
                }
            }
        }
    }

    /// Count one seed's dangerous moments (`--coverage`; the seed itself is [`Cell::add`]ed).
    pub(crate) fn add_moments(&mut self, reached: &[crate::moments::Moment]) {
        if let Some(c) = self.coverage.as_mut() {
            crate::moments::add(c, reached);
        }
    }

    /// Fold another part of this cell (other seeds) into it: commutative and associative, the
    /// monoid that workers and shards merge with.
    pub fn merge(&mut self, o: Cell) {
        self.runs = self.runs.saturating_add(o.runs);
        self.passed &= o.passed;
        self.failed_seeds = self.failed_seeds.saturating_add(o.failed_seeds);
        if let Some(s) = o.first_failed_seed
            && self.first_failed_seed.is_none_or(|m| s < m)
        {
            self.first_failed_seed = Some(s);
            self.first_failure = o.first_failure;
        }
        sum_into(&mut self.rows, o.rows);
        sum_into(&mut self.effects, o.effects);
        sum_into(&mut self.rows_per_intent, o.rows_per_intent);
        sum_into(&mut self.effects_per_intent, o.effects_per_intent);
        sum_into(&mut self.statuses, o.statuses);
        for (k, v) in o.violations {
            let e = self.violations.entry(k).or_insert(ViolationStat {
                seeds: 0,
                occurrences: 0,
                first_seed: v.first_seed,
                permitted: v.permitted,
            });
            e.seeds = e.seeds.saturating_add(v.seeds);
            e.occurrences = e.occurrences.saturating_add(v.occurrences);
            e.first_seed = e.first_seed.min(v.first_seed);
        }
        self.bounded_runs = self.bounded_runs.saturating_add(o.bounded_runs);
        self.ambiguous_intents = self.ambiguous_intents.saturating_add(o.ambiguous_intents);
        self.violating_seeds = self.violating_seeds.saturating_add(o.violating_seeds);
        self.nondeterministic_seeds.extend(o.nondeterministic_seeds);
        self.interrupted |= o.interrupted;
        self.nondeterministic_seeds.sort_unstable();
        if let Some(oc) = o.coverage {
            crate::moments::merge(self.coverage.get_or_insert_with(Default::default), oc);
        }
    }

    /// The cell's two verdicts (None when the sim does not apply): safe on every seed (no
    /// violation that is not policy-permitted, no run cut short by a bound) and as specified
    /// (the sim's expectations held on every seed).
    pub fn verdict(&self) -> Option<Verdict> {
        self.applicable.then_some(Verdict {
            safe: self.violating_seeds == 0 && self.bounded_runs == 0,
            as_specified: self.passed,
        })
    }

    /// The command that replays the first failing seed of this cell of `sim` × `model`, if any
    /// seed failed.
    pub fn replay_command(&self, sim: &Sim, model: &Model) -> Option<String> {
        self.first_failed_seed.map(|s| catalog::replay_for(sim, model, s))
    }
}

/// Add `r`'s [`RunReport::status_histogram`] to `h`, without building it: a status's text is
/// made on the stack and allocated only for a status `h` has not counted yet.
fn count_statuses(h: &mut BTreeMap<String, u64>, r: &RunReport) {
    for a in r.requests.iter().flat_map(|q| q.copies.iter().flatten()) {
        let digits;
        let k = match a.status {
            Some(s) => {
                digits = crate::http::itoa_i64(i64::from(s));
                digits.as_str()
            }
            None => a.outcome.name(),
        };
        match h.get_mut(k) {
            Some(n) => *n += 1,
            None => {
                h.insert(k.to_string(), 1);
            }
        }
    }
}

/// Add the counts of `b` to those of `a`.
fn sum_into<K: Ord>(a: &mut BTreeMap<K, u64>, b: BTreeMap<K, u64>) {
    for (k, v) in b {
        let e = a.entry(k).or_insert(0);
        // Saturating: a merged shard's counts are untrusted input.
        *e = e.saturating_add(v);
    }
}

/// How often one violation occurred in a cell.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ViolationStat {
    /// Seeds on which it occurred at least once.
    pub seeds: u64,
    /// Occurrences over all seeds.
    pub occurrences: u64,
    /// The lowest seed on which it occurred.
    pub first_seed: u64,
    /// Policy-permitted (caused only by documented expiry).
    pub permitted: bool,
}

impl Cell {
    /// The violations found, in report order ([`ViolationKind::ALL`]).
    pub fn violations_in_order(&self) -> Vec<(&String, &ViolationStat)> {
        let mut v: Vec<(&String, &ViolationStat)> = self.violations.iter().collect();
        v.sort_by_key(|(n, _)| {
            ViolationKind::from_name(n).map_or(usize::MAX, ViolationKind::order)
        });
        v
    }

    /// Seeds with at least one violation that is not policy-permitted.
    pub fn violating(&self) -> impl Iterator<Item = (&String, &ViolationStat)> {
        self.violations.iter().filter(|(_, v)| !v.permitted)
    }

    /// The sweep's verdict on the cell (`sweep`, and `merge` of one cell, exit 1): a violation
    /// that is not policy-permitted, a nondeterministic seed, a run cut short by a bound, or an
    /// expectation that failed.
    pub fn sweep_failed(&self) -> bool {
        self.violating().next().is_some()
            || !self.nondeterministic_seeds.is_empty()
            || self.bounded_runs > 0
            || !self.passed
    }
}

/// The cell of sim `si` × model `mi` in the sim-major order [`run_cells`] returns.
pub fn cell(cells: &[Cell], models: usize, si: usize, mi: usize) -> &Cell {
    &cells[si * models + mi]
}

/// Per-model totals: cells passed out of cells.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Total {
    /// The model's name.
    pub model: String,
    /// Applicable cells whose expectations held on every seed.
    pub passed: u64,
    /// Applicable cells (n/a ones are not counted).
    pub total: u64,
    /// Cells that do not apply to the model (`n/a`).
    #[serde(skip_serializing_if = "is_zero")]
    pub not_applicable: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_true(b: &bool) -> bool {
    *b
}

fn yes() -> bool {
    true
}

/// Shard `k` of `n` of `0..total`: `[⌊k·total/n⌋, ⌊(k+1)·total/n⌋)`, contiguous and balanced
/// to one item (computed in u128, so any u64 range works).
pub fn shard_slice(total: u64, k: u64, n: u64) -> Range<u64> {
    let s = flat_slice(u128::from(total), k, n);
    // Both ends are at most `total`.
    s.start as u64..s.end as u64
}

/// [`shard_slice`] of a flat order of `total` positions, in u128: a matrix's flat order is the
/// sum of its cells' ranges, which passes `u64::MAX` with two cells of near 2^64 seeds. `k` and
/// `k + 1` are taken at most `n` (and `n` at least 1), so the ends never pass `total`.
/// `⌊i·total/n⌋` is computed as `q·i + ⌊r·i/n⌋` (`total = q·n + r`): neither product passes
/// u128 (`q·i ≤ total`, `r·i < 2^128`), where `i·total` would with a total past 2^64.
fn flat_slice(total: u128, k: u64, n: u64) -> Range<u128> {
    let n = u128::from(n.max(1));
    let (q, r) = (total / n, total % n);
    let at = |i: u64| {
        let i = u128::from(i).min(n);
        q * i + r * i / n
    };
    at(k)..at(k.saturating_add(1))
}

/// Per-model totals over `cells`, in `models`' order.
pub fn totals(models: &[Arc<Model>], cells: &[Cell]) -> Vec<Total> {
    models
        .iter()
        .map(|m| {
            let mine: Vec<&Cell> =
                cells.iter().filter(|c| c.model == m.name && c.applicable).collect();
            Total {
                model: m.name.clone(),
                passed: mine.iter().filter(|c| c.passed).count() as u64,
                total: mine.len() as u64,
                not_applicable: cells.iter().filter(|c| c.model == m.name && !c.applicable).count()
                    as u64,
            }
        })
        .collect()
}

/// Number of worker threads to use by default: every core.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(MAX_JOBS)
}

/// The most worker threads a sweep or matrix starts (`--jobs`).
pub const MAX_JOBS: usize = 256;

/// Set when the user asks a sweep to stop (SIGINT): workers take no new seed, and the cells
/// hold what finished, marked interrupted.
pub static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// What one seed contributes to a cell (compact: no traces are kept).
#[derive(Debug, Clone)]
pub struct SeedResult {
    /// The index of the cell it belongs to.
    pub cell: usize,
    /// The seed.
    pub seed: u64,
    /// The run's report: [`run::judge`]'s, or (a sweep's workers) [`run::judge_lean`]'s,
    /// which leaves empty what [`Cell::add`] and [`per_seed_line`] do not read.
    pub report: RunReport,
    /// Set by `check_determinism`: the second run's trace hash differed.
    pub nondeterministic: bool,
}

/// Options of a matrix or sweep.
#[derive(Debug, Clone, Default)]
pub struct SweepOptions {
    /// Worker threads (at most [`MAX_JOBS`]).
    pub jobs: usize,
    /// Run each seed twice and compare trace hashes.
    pub check_determinism: bool,
    /// Counters the workers bump as seeds and cells finish, for a progress display to read
    /// (none: nothing is counted). Written only, never read by the sweep: they cannot change
    /// a result.
    pub progress: Option<Arc<Progress>>,
    /// Produce one JSON line per seed (see [`per_seed_line`]) for the `each` callback.
    pub per_seed: bool,
    /// Run only shard `k` of `n` of the flat (cell, seed) order (`--shard K/N`).
    pub shard: Option<(u64, u64)>,
    /// Explore every seed with this strategy (`--explore`; not `exhaustive`, which
    /// [`run_exhaustive`] enumerates). None: the calibrated runs.
    pub explore: Option<crate::explore::Strategy>,
    /// Count the dangerous moments each seed reached (`--coverage`).
    pub coverage: bool,
}

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

/// One cell's share of the work: its index, its sim and model, the seeds it runs.
struct Work {
    cell: usize,
    sim: Arc<Sim>,
    model: Arc<Model>,
    seeds: Range<u64>,
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

/// The empty cells, sim-major, and each one's work: its seeds (`seeds`, or the sim's own
/// range; none for an n/a cell).
fn plan(
    sims: &[Arc<Sim>],
    models: &[Arc<Model>],
    seeds: Option<Range<u64>>,
) -> (Vec<Cell>, Vec<Work>) {
    let mut cells = Vec::new();
    let mut work: Vec<Work> = Vec::new();
    for sim in sims {
        let range = seeds.clone().unwrap_or_else(|| sim.seeds.clone());
        for model in models {
            let cell = Cell::new(sim, model, &range);
            // An n/a cell runs no seed.
            let seeds = if cell.applicable { range.clone() } else { range.start..range.start };
            work.push(Work { cell: cells.len(), sim: sim.clone(), model: model.clone(), seeds });
            cells.push(cell);
        }
    }
    (cells, work)
}

/// `--coverage`: every applicable cell counts its dangerous moments, from an empty coverage
/// that knows which are possible for its (sim, model).
fn count_coverage(work: &[Work], cells: &mut [Cell]) {
    for w in work {
        let c = &mut cells[w.cell];
        if c.applicable {
            c.coverage = Some(crate::moments::empty(&w.sim, &w.model));
        }
    }
}

/// A shard runs its slice of the flat (cell, seed) order: each cell keeps the part of its
/// range that falls in shard `k` of `n`, and says so (`covered`).
/// Positions in the flat order are u128: the cells' ranges may sum past `u64::MAX`.
fn keep_shard(work: &mut [Work], cells: &mut [Cell], k: u64, n: u64) {
    let all: u128 = work.iter().map(|w| u128::from(w.seeds.end - w.seeds.start)).sum();
    let mine = flat_slice(all, k, n);
    let mut at = 0u128;
    for w in work {
        let len = u128::from(w.seeds.end - w.seeds.start);
        let end = at + len;
        // The part of this cell's positions [at, end) in the shard's, as offsets into the
        // cell's range (at most `len`, so they fit in u64 and the seeds do not pass its end).
        let lo = mine.start.clamp(at, end) - at;
        let hi = mine.end.clamp(at, end) - at;
        at = end;
        let (lo, hi) = (lo as u64, hi as u64);
        w.seeds = w.seeds.start + lo..w.seeds.start + hi;
        cells[w.cell].covered = Some(w.seeds.clone());
    }
}

/// Job `i` of the flat (cell, seed) order: (cell index, sim, model, seed). Jobs are handed
/// out in this fixed order by an atomic counter.
fn job(work: &[Work], i: u64) -> Option<(usize, &Arc<Sim>, &Arc<Model>, u64)> {
    let mut i = i;
    for w in work {
        let n = w.seeds.end - w.seeds.start;
        if i < n {
            return Some((w.cell, &w.sim, &w.model, w.seeds.start + i));
        }
        i -= n;
    }
    None
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
    let (report, moments) = if opts.coverage {
        let (report, m) = crate::moments::run_with_moments(sim, model, seed, ex)?;
        (report, Some(m))
    } else {
        (run::run_lean(sim, model, seed, ex)?, None)
    };
    let mut nondeterministic = false;
    if opts.check_determinism {
        nondeterministic = run::run_lean(sim, model, seed, ex)?.trace_hash != report.trace_hash;
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

/// The matrix without per-seed output.
pub fn run_matrix(
    sims: &[Arc<Sim>],
    models: &[Arc<Model>],
    seeds: Option<Range<u64>>,
    jobs: usize,
) -> Result<Vec<Cell>, RunError> {
    run_cells(sims, models, seeds, &SweepOptions { jobs, ..Default::default() }, |_, _| {})
}

/// Install `handler` for the first SIGINT; `SA_RESETHAND` restores the default action, so a
/// second SIGINT terminates. The handler must be async-signal-safe (atomics, `kill`).
pub fn on_first_sigint(handler: extern "C" fn(libc::c_int)) {
    // SAFETY: sigaction with a zeroed struct, an empty mask and a handler the caller
    // guarantees async-signal-safe.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESETHAND;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
    }
}

/// The Wilson score interval for k successes in n trials at 95 % confidence.
pub fn wilson(k: u64, n: u64) -> (f64, f64) {
    // A merged shard may claim more seeds than runs: clamp rather than panic.
    crate::agree::wilson(k.min(n), n, crate::agree::Z_95)
}

/// One JSON line per seed, for researchers' own analysis.
pub fn per_seed_line(r: &SeedResult, sim: &str, model: &str) -> String {
    let rep = &r.report;
    let mut permitted: Vec<ViolationKind> =
        rep.violations.iter().filter(|v| v.permitted).map(|v| v.name).collect();
    permitted.dedup();
    serde_json::json!({
        "sim": sim,
        "model": model,
        "seed": r.seed,
        "passed": rep.passed(),
        "violations": rep.violation_names(),
        "permitted": permitted,
        "rows": rep.rows.len(),
        "effects": rep.effects_total,
        "keys": rep.keys,
        "statuses": rep.status_histogram(),
        "ambiguous_intents": rep.ambiguous_intents,
        "bounds_hit": rep.bounds_hit,
        "trace_hash": rep.trace_hash,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one Wilson interval every report prints, at known values (computed independently:
    /// centre ± half with z = 1.959964), exact at 0 and n, and clamped when a merged shard
    /// claims more seeds than runs.
    #[test]
    fn wilson_at_known_values() {
        for (k, n, lo, hi) in [
            (0, 200, 0.0, 0.018_845_326),
            (200, 200, 0.981_154_674, 1.0),
            (46, 200, 0.177_093_433, 0.293_083_044),
            (1, 1, 0.206_549_314, 1.0),
        ] {
            let (l, h) = wilson(k, n);
            assert!((l - lo).abs() < 1e-8 && (h - hi).abs() < 1e-8, "{k}/{n}: {l} {h}");
        }
        assert_eq!(wilson(0, 200).0, 0.0);
        assert_eq!(wilson(200, 200).1, 1.0);
        assert_eq!(wilson(0, 0), (0.0, 1.0));
        assert_eq!(wilson(5, 3), wilson(3, 3));
    }

    /// The flat order of cells whose ranges sum past `u64::MAX` (and whose `k·total` passes
    /// u128) is sliced without overflow: contiguous, balanced to one, ending at the total.
    #[test]
    fn flat_slices_past_u64_neither_overflow_nor_leave_gaps() {
        let big = u128::from(u64::MAX);
        for (total, n) in
            [(2 * big, 3), (3 * big, u64::MAX), (1000 * big + 7, u64::MAX - 1), (5, 1)]
        {
            let (lo, hi) = (total / u128::from(n), total.div_ceil(u128::from(n)));
            let mut at = 0;
            for k in [0, 1, n / 2, n.saturating_sub(2), n - 1].into_iter().filter(|k| *k < n) {
                let s = flat_slice(total, k, n);
                assert!(s.start <= s.end && s.end <= total, "{total}/{n} at {k}: {s:?}");
                assert!((lo..=hi).contains(&(s.end - s.start)), "{total}/{n} at {k}: {s:?}");
                if k + 1 < n {
                    assert_eq!(s.end, flat_slice(total, k + 1, n).start);
                }
                at = at.max(s.end);
            }
            assert_eq!(flat_slice(total, 0, n).start, 0);
            assert_eq!(at, total);
        }
        // Out-of-range shards are empty at the end, never past it.
        assert_eq!(flat_slice(10, 5, 3), 10..10);
        assert_eq!(flat_slice(10, u64::MAX, 0), 10..10);
    }
}
