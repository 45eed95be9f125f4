//! The core of the runs-to-first-violation benchmark (`examples/hunt/main.rs`), shared with
//! `tests/it/hunt_bench.rs`: the cells file, one start's runs to first violation for one
//! strategy, and the figures of a cell over its starts.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use idemsim::explore::Strategy;
use idemsim::model::Model;
use idemsim::run::{self, RunError, RunOptions};
use idemsim::scenario::Sim;

/// One benchmark cell as the cells file lists it.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CellSpec {
    /// The sim's file, relative to the crate's root.
    pub sim: String,
    /// The model's file, relative to the crate's root.
    pub model: String,
    /// The violation looked for (its report name, e.g. `duplicate-row`).
    pub violation: String,
    /// Where the cell came from and its calibrated rate: for the reader of the cells file
    /// (required, so every cell says it; the program does not use it).
    #[allow(dead_code)]
    pub found: String,
}

/// The cells file: `[[cell]]` tables.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CellsFile {
    /// The cells, in table order.
    pub cell: Vec<CellSpec>,
}

/// Read the cells file.
pub fn load_cells(path: &Path) -> Result<Vec<CellSpec>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let f: CellsFile = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(f.cell)
}

/// A loaded cell.
#[derive(Clone)]
pub struct Loaded {
    /// The sim.
    pub sim: Arc<Sim>,
    /// The model.
    pub model: Arc<Model>,
    /// The violation looked for.
    pub violation: String,
}

/// Load a cell's sim and model, relative to `root`.
pub fn load(root: &Path, c: &CellSpec) -> Result<Loaded, String> {
    let sim = Sim::load(&root.join(&c.sim)).map_err(|e| format!("{}: {e}", c.sim))?;
    let model = Model::load(&root.join(&c.model)).map_err(|e| format!("{}: {e}", c.model))?;
    Ok(Loaded { sim: Arc::new(sim), model: Arc::new(model), violation: c.violation.clone() })
}

/// A column of the table: the calibrated draw, or an `--explore` strategy by its spelling.
#[derive(Debug, Clone)]
pub struct Column {
    /// The spelling (`calibrated`, or what `--explore` takes).
    pub name: String,
    /// None: calibrated.
    pub strategy: Option<Strategy>,
}

/// Parse a column name: `calibrated` or anything [`Strategy::parse`] accepts.
pub fn column(name: &str) -> Result<Column, String> {
    let strategy = if name == "calibrated" { None } else { Some(Strategy::parse(name)?) };
    Ok(Column { name: name.to_string(), strategy })
}

/// Did this run show the violation (not policy-permitted)?
fn violates(report: &idemsim::report::RunReport, violation: &str) -> bool {
    report.violations.iter().any(|v| !v.permitted && v.name.name() == violation)
}

/// Runs to the first violation from `start`, at most `budget` runs: seeds `start`,
/// `start + 1`, … (an exhaustive strategy: the schedules of seed `start`, depth first). None:
/// not found within the budget (or, exhaustive, in the whole space).
pub fn runs_to_first(
    cell: &Loaded,
    strategy: Option<&Strategy>,
    start: u64,
    budget: u64,
) -> Result<Option<u64>, RunError> {
    if let Some(Strategy::Exhaustive { bound, depth, .. }) = strategy {
        return exhaustive_to_first(cell, (*bound, *depth), start, budget);
    }
    for i in 0..budget {
        let (out, _) =
            run::run_explored(&cell.sim, &cell.model, start + i, RunOptions::default(), strategy)?;
        if violates(&out.report, &cell.violation) {
            return Ok(Some(i + 1));
        }
    }
    Ok(None)
}

/// The exhaustive enumeration of seed `seed`'s schedules (as `sweep --explore exhaustive`),
/// stopped at the first violating schedule or after `budget` schedules.
fn exhaustive_to_first(
    cell: &Loaded,
    (bound, depth): (u64, u32),
    seed: u64,
    budget: u64,
) -> Result<Option<u64>, RunError> {
    let mut next = Some(vec![]);
    for i in 0..budget.min(bound) {
        let Some(choices) = next.take() else { return Ok(None) };
        let s = Strategy::Exhaustive { bound, depth, schedule: Some(choices) };
        let (out, note) =
            run::run_explored(&cell.sim, &cell.model, seed, RunOptions::default(), Some(&s))?;
        if violates(&out.report, &cell.violation) {
            return Ok(Some(i + 1));
        }
        next = note.and_then(|n| n.explored.next_schedule(depth));
    }
    Ok(None)
}

/// One cell × column's figures over its starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Figures {
    /// Runs to first violation from each start, in start order (None: not found).
    pub runs: Vec<Option<u64>>,
}

impl Figures {
    /// Sorted, not-found as `budget + 1`.
    fn sorted(&self, budget: u64) -> Vec<u64> {
        let mut v: Vec<u64> = self.runs.iter().map(|r| r.unwrap_or(budget + 1)).collect();
        v.sort_unstable();
        v
    }

    /// The median (the lower middle of an even count); `budget + 1`: not found.
    pub fn median(&self, budget: u64) -> u64 {
        let v = self.sorted(budget);
        v[(v.len() - 1) / 2]
    }

    /// The worst start; `budget + 1`: not found.
    pub fn worst(&self, budget: u64) -> u64 {
        self.sorted(budget).last().copied().unwrap_or(budget + 1)
    }
}

/// A figure as shown: `>BUDGET` when not found.
pub fn show(n: u64, budget: u64) -> String {
    if n > budget { format!(">{budget}") } else { n.to_string() }
}

/// The starts: `s · spacing` for s in `starts`.
pub fn start_seeds(starts: Range<u64>, spacing: u64) -> Vec<u64> {
    starts.map(|s| s * spacing).collect()
}

/// Every (cell, column, start) job on `jobs` threads (handed out in one fixed order; each
/// result lands in its own slot, so the output is the same for any `jobs`). `skip(cell,
/// column)`: a job not run (None). Result `[cell][column]`.
pub fn measure(
    cells: &[Loaded],
    columns: &[Column],
    starts: &[u64],
    budget: u64,
    jobs: usize,
    skip: &(dyn Fn(&Loaded, &Column) -> bool + Sync),
) -> Result<Vec<Vec<Option<Figures>>>, RunError> {
    let per_cell = columns.len() * starts.len();
    let total = cells.len() * per_cell;
    let slots: Vec<Mutex<Option<Option<u64>>>> = (0..total).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let error: Mutex<Option<RunError>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total || error.lock().map(|e| e.is_some()).unwrap_or(true) {
                        break;
                    }
                    let (c, rest) = (i / per_cell, i % per_cell);
                    let (col, st) = (&columns[rest / starts.len()], starts[rest % starts.len()]);
                    if skip(&cells[c], col) {
                        continue;
                    }
                    match runs_to_first(&cells[c], col.strategy.as_ref(), st, budget) {
                        Ok(r) => *slots[i].lock().expect("slot") = Some(r),
                        Err(e) => *error.lock().expect("error") = Some(e),
                    }
                }
            });
        }
    });
    if let Some(e) = error.into_inner().expect("error") {
        return Err(e);
    }
    let mut out = Vec::new();
    let mut slots = slots.into_iter().map(|m| m.into_inner().expect("slot"));
    for _ in cells {
        let mut row = Vec::new();
        for _ in columns {
            let runs: Vec<Option<Option<u64>>> = slots.by_ref().take(starts.len()).collect();
            let ran = runs.iter().all(Option::is_some);
            row.push(ran.then(|| Figures { runs: runs.into_iter().flatten().collect() }));
        }
        out.push(row);
    }
    Ok(out)
}
