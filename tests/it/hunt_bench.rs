//! The runs-to-first-violation benchmark's core (`examples/hunt/hunt_core.rs`, the table in
//! `docs/hunt-benchmark.md`) on the teaching race with a tiny budget: its figures agree with a
//! plain sweep's first violating seed (calibrated and explored), an exhaustive column with
//! `sweep --explore exhaustive`'s first violating schedule, and the table's cells are the same
//! for any number of jobs.

#[path = "../../examples/hunt/hunt_core.rs"]
#[allow(dead_code)]
mod hunt_core;

use std::path::Path;

use idemsim::explore::Strategy;
use idemsim::sweep::{self, SweepOptions};

use hunt_core::{CellSpec, Loaded};

fn race() -> Loaded {
    let spec = CellSpec {
        sim: "sims/teaching/check-first-race.toml".into(),
        model: "models/check-first.toml".into(),
        violation: "duplicate-row".into(),
        found: String::new(),
    };
    hunt_core::load(Path::new(env!("CARGO_MANIFEST_DIR")), &spec).unwrap()
}

/// The first seed of `seeds` showing duplicate-row in a plain sweep (with `explore`).
fn first_by_sweep(cell: &Loaded, seeds: std::ops::Range<u64>, explore: Option<Strategy>) -> u64 {
    let opts = SweepOptions { jobs: 2, explore, ..Default::default() };
    let cells = sweep::run_cells(
        std::slice::from_ref(&cell.sim),
        std::slice::from_ref(&cell.model),
        Some(seeds),
        &opts,
        |_, _| {},
    )
    .unwrap();
    cells[0].violations["duplicate-row"].first_seed
}

#[test]
fn runs_to_first_agree_with_a_plain_sweep() {
    let cell = race();
    for (start, explore) in [(0, None), (10_000, None), (0, Some(Strategy::Edges))] {
        let got = hunt_core::runs_to_first(&cell, explore.as_ref(), start, 60).unwrap();
        let first = first_by_sweep(&cell, start..start + 60, explore.clone());
        assert_eq!(got, Some(first - start + 1), "start {start}, {explore:?}");
    }
    // A budget below the first violation: not found, shown as `>budget`.
    let first = first_by_sweep(&race(), 0..60, None);
    assert!(first > 0, "seed 0 already violates: the check below means nothing");
    assert_eq!(hunt_core::runs_to_first(&cell, None, 0, first).unwrap(), None);
    assert_eq!(hunt_core::show(first + 1, first), format!(">{first}"));
}

#[test]
fn exhaustive_column_counts_schedules_like_the_sweep() {
    let cell = race();
    let ex = sweep::run_exhaustive(&cell.sim, &cell.model, 0, (64, 6), None).unwrap();
    let first = ex.cell.violations["duplicate-row"].first_seed;
    let s = Strategy::parse("exhaustive:depth=6").unwrap();
    let got = hunt_core::runs_to_first(&cell, Some(&s), 0, 64).unwrap();
    assert_eq!(got, Some(first + 1));
}

#[test]
fn table_is_the_same_for_any_jobs() {
    let cells = [race()];
    let cols: Vec<_> =
        ["calibrated", "pct:d=2"].iter().map(|c| hunt_core::column(c).unwrap()).collect();
    let starts = hunt_core::start_seeds(0..3, 10_000);
    let one = hunt_core::measure(&cells, &cols, &starts, 30, 1, &|_, _| false).unwrap();
    let two = hunt_core::measure(&cells, &cols, &starts, 30, 2, &|_, _| false).unwrap();
    assert_eq!(one, two);
    let f = one[0][0].as_ref().unwrap();
    assert_eq!(f.runs[0], hunt_core::runs_to_first(&cells[0], None, 0, 30).unwrap());
    assert!(f.median(30) <= f.worst(30));
    assert!(hunt_core::column("nonsense").is_err());
}
