//! One floor piece or one kind of whole run, done N times, and nothing else: what
//! `tools/speed.py` counts instructions of under valgrind (`--tool=cachegrind`), where the
//! criterion bench (`benches/runs.rs`) times the same pieces. An instruction count does not
//! move with the machine's load, so its ratio of a whole run to its floor is the stable one.
//! The count of one iteration is `(count of 2N − count of N) ÷ N`: the process's start, the
//! loading of sims and models and the first runtime drop out.
//!
//! `cargo run --release --example floor -- PIECE N`, PIECE one of `sql-race`, `sql-case-11`
//! (each with the database reset before it, as a run does; subtract `reset`), `reset`,
//! `runtime`, `message`, `wait` (in batches of 1,000 on one runtime, as the bench),
//! `composed-race`, `composed-case-11` (the floor's pieces composed into one run, seeds 1..=N), or
//! `race/MODEL`, `case-11/MODEL` (a whole `run::run`, seeds 1..=N, as the bench).

use std::process::ExitCode;
use std::sync::Arc;

use idemsim::catalog;
use idemsim::model::{Journal, Model};
use idemsim::run::{self, RunOptions};
use idemsim::scenario::Sim;
use idemsim::world::bench;

// The binary's allocator, so the counts are those of `idemsim`.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const RACE: &str = "check-first-race";
const CASE_11: &str = "11-twenty-concurrent-one-process";

fn sim(name: &str) -> Result<Arc<Sim>, String> {
    catalog::sim(name).map_err(|e| e.to_string())
}

fn model(name: &str) -> Result<Arc<Model>, String> {
    catalog::model(name).map_err(|e| e.to_string())
}

fn piece(name: &str, n: u64) -> Result<(), String> {
    let sql = |copies: u32| -> Result<(), String> {
        let mut floor =
            bench::SqlFloor::new(bench::FloorVfs::Idemsim).map_err(|e| e.to_string())?;
        for _ in 0..n {
            floor.reset().map_err(|e| e.to_string())?;
            assert_eq!(floor.run(copies).map_err(|e| e.to_string())?, (1, 1));
        }
        Ok(())
    };
    match name {
        "sql-race" => sql(bench::RACE_RUN.copies)?,
        "sql-case-11" => sql(bench::CASE_11_RUN.copies)?,
        "reset" => {
            for _ in 0..n {
                bench::database_reset(Journal::Rollback).map_err(|e| e.to_string())?;
            }
        }
        "runtime" => (1..=n).for_each(bench::runtime_setup),
        "wait" => bench::in_batches(n, bench::statement_waits),
        "composed-race" | "composed-case-11" => {
            let (s, m) = (sim(RACE)?, model("transactional")?);
            let run = if name == "composed-race" { bench::RACE_RUN } else { bench::CASE_11_RUN };
            let mut floor =
                bench::SqlFloor::new(bench::FloorVfs::Idemsim).map_err(|e| e.to_string())?;
            for seed in 1..=n {
                let done = bench::composed_floor(&s, &m, &mut floor, seed, run.copies)
                    .map_err(|e| e.to_string())?;
                assert_eq!(done, ((1, 1), run.waits));
            }
        }
        "message" => {
            let (s, m) = (sim(RACE)?, model("transactional")?);
            bench::in_batches(n, |seed, k| bench::messages(&s, &m, seed, k).expect("messages"));
        }
        _ => {
            let (group, m) = name.split_once('/').ok_or(format!("no such piece: {name}"))?;
            let s = sim(match group {
                "race" => RACE,
                "case-11" => CASE_11,
                _ => return Err(format!("no such piece: {name}")),
            })?;
            let m = model(m)?;
            for seed in 1..=n {
                run::run(&s, &m, seed, RunOptions::default()).map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n = args.get(1).and_then(|s| s.parse::<u64>().ok());
    let (Some(name), Some(n)) = (args.first(), n) else {
        eprintln!("usage: floor PIECE N (see the head of examples/floor.rs)");
        return ExitCode::from(2);
    };
    match piece(name, n) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("floor: {e}");
            ExitCode::from(2)
        }
    }
}
