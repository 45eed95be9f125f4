//! Running many seeds: the matrix (models × sims × seeds) on worker threads, aggregated while
//! streaming (no per-seed reports are kept), with the same result for any number of workers.

use std::ops::Range;
use std::sync::Arc;

use crate::model::Model;
use crate::run::RunError;
use crate::scenario::Sim;

mod cell;
mod plan;
mod workers;

pub use cell::{Cell, Fired, SeedResult, Total, ViolationStat, per_seed_line, totals, wilson};
pub use plan::shard_slice;
pub use workers::{Exhaustive, Progress, ProgressSnapshot, run_cells, run_exhaustive};

/// Number of worker threads to use by default: every core.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(MAX_JOBS)
}

/// The most worker threads a sweep or matrix starts (`--jobs`).
pub const MAX_JOBS: usize = 256;

/// Set when the user asks a sweep to stop (SIGINT): workers take no new seed, and the cells
/// hold what finished, marked interrupted.
pub static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

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
    /// Which world's rule judges an intent no attempt of which was answered.
    pub judging: Judging,
}

/// Which world's rule judges an intent no attempt of which was answered (every other
/// violation is judged alike in both).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Judging {
    /// The simulated world's: when faults fired and every chain ran out of attempts, the
    /// client's `out-of-retries` (permitted): the world knows nothing else failed.
    #[default]
    Simulated,
    /// A real round's (`validate`'s simulated side): a transport failure cannot be told from
    /// one the server caused, so the intent stays `unfinished-intent`.
    AsReal,
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

/// The cell of sim `si` × model `mi` in the sim-major order [`run_cells`] returns.
pub fn cell(cells: &[Cell], models: usize, si: usize, mi: usize) -> &Cell {
    &cells[si * models + mi]
}

/// Install `handler` for the first SIGINT; `SA_RESETHAND` restores the default action, so a
/// second SIGINT terminates. The handler must be async-signal-safe (atomics, `kill`).
pub fn on_first_sigint(handler: extern "C" fn(libc::c_int)) {
    on_first(libc::SIGINT, handler);
}

/// Install `handler` for the first `signal` (as [`on_first_sigint`] does for SIGINT).
pub fn on_first(signal: libc::c_int, handler: extern "C" fn(libc::c_int)) {
    // SAFETY: sigaction with a zeroed struct, an empty mask and a handler the caller
    // guarantees async-signal-safe.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESETHAND;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(signal, &sa, std::ptr::null_mut());
    }
}
