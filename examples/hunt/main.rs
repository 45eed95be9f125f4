//! Runs to first violation, calibrated versus each `--explore` strategy (issue 25, item 2):
//!   cargo run --release --example hunt -- [--cells FILE] [--starts R] [--budget B]
//!       [--spacing S] [--columns calibrated,edges,pct,pct:d=2,exhaustive,swarm,faults] [--jobs N]
//! For each cell of the cells file (default `examples/hunt/cells.toml`: sim × model ×
//! violation) and each column (`calibrated`, or any strategy as `--explore` spells it), the
//! runs to the first run showing the cell's violation from each of R starts (seeds s·S for s in
//! 0..R, default R = 21, S = 10,000: runs from a start are its seeds in order; an exhaustive
//! column enumerates the schedules of the start's seed instead), capped at B (default 1,000;
//! shown `>B`). Printed as a Markdown table: median / worst, and whether the median is within
//! 50 runs. Exhaustive runs only on sims of at most 3 request copies (`–` elsewhere).
//! Deterministic: the same table on every run and for any `--jobs`. `docs/hunt-benchmark.md`
//! holds a measured table.

mod hunt_core;

use std::path::PathBuf;

use crate::hunt_core::{Column, Figures, Loaded, show};

/// The command line.
struct Args {
    cells: PathBuf,
    starts: u64,
    budget: u64,
    spacing: u64,
    columns: Vec<String>,
    jobs: usize,
}

fn parse_args() -> Result<Args, String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut a = Args {
        cells: root.join("examples/hunt/cells.toml"),
        starts: 21,
        budget: 1000,
        spacing: 10_000,
        columns: "calibrated,edges,pct,pct:d=2,exhaustive,swarm,faults"
            .split(',')
            .map(String::from)
            .collect(),
        jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<u64>().map_err(|_| format!("{flag} {v}: not a number"));
        match flag.as_str() {
            "--cells" => a.cells = PathBuf::from(v),
            "--starts" => a.starts = num(&v)?.max(1),
            "--budget" => a.budget = num(&v)?.max(1),
            "--spacing" => a.spacing = num(&v)?.max(1),
            "--columns" => a.columns = v.split(',').map(String::from).collect(),
            "--jobs" => a.jobs = num(&v)?.clamp(1, 256) as usize,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(a)
}

/// Exhaustive enumeration is for small sims: at most 3 request copies.
fn small(cell: &Loaded) -> bool {
    cell.sim.requests.iter().map(|r| u64::from(r.copies)).sum::<u64>() <= 3
}

fn main() {
    if let Err(e) = go() {
        eprintln!("hunt: {e}");
        std::process::exit(2);
    }
}

fn go() -> Result<(), String> {
    let a = parse_args()?;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let specs = hunt_core::load_cells(&a.cells)?;
    let cells: Vec<Loaded> =
        specs.iter().map(|c| hunt_core::load(&root, c)).collect::<Result<_, _>>()?;
    let columns: Vec<Column> =
        a.columns.iter().map(|c| hunt_core::column(c)).collect::<Result<_, _>>()?;
    let starts = hunt_core::start_seeds(0..a.starts, a.spacing);
    let skip = |c: &Loaded, col: &Column| {
        matches!(col.strategy, Some(idemsim::explore::Strategy::Exhaustive { .. })) && !small(c)
    };
    let figs = hunt_core::measure(&cells, &columns, &starts, a.budget, a.jobs, &skip)
        .map_err(|e| e.to_string())?;
    print_table(&a, &specs, &columns, &figs);
    Ok(())
}

fn print_table(
    a: &Args,
    specs: &[hunt_core::CellSpec],
    columns: &[Column],
    figs: &[Vec<Option<Figures>>],
) {
    let b = a.budget;
    println!(
        "runs to first violation, median / worst over {} starts (seeds s·{} for s in 0..{}), \
         at most {b} runs each; `yes`: median within 50 runs\n",
        a.starts, a.spacing, a.starts
    );
    let head: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
    println!("| cell | violation | {} |", head.join(" | "));
    println!("|---|---|{}", "---|".repeat(columns.len()));
    let (mut found50, mut median5) = (0, 0);
    for (spec, row) in specs.iter().zip(figs) {
        let mut shown = Vec::new();
        let mut best = u64::MAX;
        for f in row {
            let Some(f) = f else {
                shown.push("–".to_string());
                continue;
            };
            let (m, w) = (f.median(b), f.worst(b));
            best = best.min(m);
            let yes = if m <= 50 { "yes" } else { "no" };
            shown.push(format!("{} / {} {yes}", show(m, b), show(w, b)));
        }
        found50 += u32::from(best <= 50);
        median5 += u32::from(best <= 5);
        let name = |p: &str| {
            std::path::Path::new(p)
                .file_stem()
                .map_or(p.to_string(), |s| s.to_string_lossy().into())
        };
        println!(
            "| {} × {} | {} | {} |",
            name(&spec.sim),
            name(&spec.model),
            spec.violation,
            shown.join(" | ")
        );
    }
    let n = specs.len();
    println!(
        "\ncells found by some strategy within 50 runs: {found50}/{n}; median ≤ 5: {median5}/{n}"
    );
}
