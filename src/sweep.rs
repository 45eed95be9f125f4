//! Running many seeds: the matrix (models × sims × seeds) on worker threads, aggregated while
//! streaming (no per-seed reports are kept), with the same result for any number of workers.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::Serialize;

use crate::model::Model;
use crate::report::{Check, RunReport};
use crate::scenario::Sim;
use crate::world::{self, RunError, RunOptions};

/// The aggregate of one cell: one sim × one model over a seed range.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Cell {
    pub model: String,
    pub sim: String,
    pub seeds: String,
    pub runs: u64,
    /// Expectations held on every seed tried.
    pub passed: bool,
    pub failed_seeds: u64,
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
    #[serde(skip)]
    pub sim_path: String,
}

impl Cell {
    fn new(sim: &Sim, model: &Model, seeds: &Range<u64>) -> Cell {
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
            sim_path: crate::catalog::display_path(&sim.path),
        }
    }

    fn add(&mut self, r: &RunReport) {
        self.runs += 1;
        *self.rows.entry(r.rows.len() as u64).or_insert(0) += 1;
        *self.effects.entry(r.effects_total).or_insert(0) += 1;
        for (k, v) in r.status_histogram() {
            *self.statuses.entry(k).or_insert(0) += v;
        }
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
                    self.first_failure.push(Check { what: "bound".into(), held: false, expected: "no bound hit".into(), actual: b.clone() });
                }
            }
        }
    }

    fn merge(&mut self, o: Cell) {
        self.runs += o.runs;
        self.passed &= o.passed;
        self.failed_seeds += o.failed_seeds;
        if let Some(s) = o.first_failed_seed {
            if self.first_failed_seed.is_none_or(|m| s < m) {
                self.first_failed_seed = Some(s);
                self.first_failure = o.first_failure;
            }
        }
        for (k, v) in o.rows {
            *self.rows.entry(k).or_insert(0) += v;
        }
        for (k, v) in o.effects {
            *self.effects.entry(k).or_insert(0) += v;
        }
        for (k, v) in o.statuses {
            *self.statuses.entry(k).or_insert(0) += v;
        }
        self.bounded_runs += o.bounded_runs;
    }

    /// The command that replays this cell's first failure.
    pub fn replay_command(&self) -> Option<String> {
        self.first_failed_seed.map(|s| replay_command(&self.sim_path, &self.model, s))
    }
}

pub fn replay_command(sim_path: &str, model: &str, seed: u64) -> String {
    format!("cargo run --release -- run {sim_path} --model {model} --seed {seed} --trace")
}

/// Per-model totals: cells passed out of cells.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Total {
    pub model: String,
    pub passed: u64,
    pub total: u64,
}

pub fn totals(models: &[Arc<Model>], cells: &[Cell]) -> Vec<Total> {
    models
        .iter()
        .map(|m| {
            let mine: Vec<&Cell> = cells.iter().filter(|c| c.model == m.name).collect();
            Total { model: m.name.clone(), passed: mine.iter().filter(|c| c.passed).count() as u64, total: mine.len() as u64 }
        })
        .collect()
}

/// Number of worker threads to use by default: every core.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Run every (sim, model) cell over its seeds (`seeds`, or the sim's own range) on `jobs`
/// threads. Cells come back sim-major, in the order given.
pub fn run_matrix(
    sims: &[Arc<Sim>],
    models: &[Arc<Model>],
    seeds: Option<Range<u64>>,
    jobs: usize,
) -> Result<Vec<Cell>, RunError> {
    let mut cells = Vec::new();
    let mut work: Vec<(usize, Arc<Sim>, Arc<Model>, u64)> = Vec::new();
    for sim in sims {
        let range = seeds.clone().unwrap_or_else(|| sim.seeds.clone());
        for model in models {
            let c = cells.len();
            cells.push(Cell::new(sim, model, &range));
            for seed in range.clone() {
                work.push((c, sim.clone(), model.clone(), seed));
            }
        }
    }
    let next = AtomicUsize::new(0);
    let jobs = jobs.max(1).min(work.len().max(1));
    let partials: Vec<Result<Vec<Option<Cell>>, RunError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..jobs)
            .map(|_| {
                s.spawn(|| {
                    let mut mine: Vec<Option<Cell>> = vec![None; cells.len()];
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some((c, sim, model, seed)) = work.get(i) else { break };
                        let out = world::run(sim, model, *seed, RunOptions::default())?;
                        mine[*c]
                            .get_or_insert_with(|| Cell { runs: 0, ..cells[*c].clone() })
                            .add(&out.report);
                    }
                    Ok(mine)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("worker panicked")).collect()
    });
    for p in partials {
        for (i, c) in p?.into_iter().enumerate() {
            if let Some(c) = c {
                cells[i].merge(c);
            }
        }
    }
    Ok(cells)
}
