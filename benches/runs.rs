//! Criterion benchmarks (`cargo bench`): one seeded run end to end for each reference model
//! on the two-client race and on case 11 (twenty concurrent requests); a 1,000-seed sweep on
//! one thread; and the pieces a run is made of (runtime setup, database reset, one SQL
//! statement, one message over the simulated wire). README "Speed" quotes these.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use idemsim::model::{Journal, Model};
use idemsim::run::{self, RunOptions};
use idemsim::scenario::Sim;
use idemsim::sweep::{self, SweepOptions};
use idemsim::world::bench;

// The same allocator as the binary, so the numbers match what `idemsim` does.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const REFERENCE: [&str; 3] = ["no-key", "check-first", "transactional"];
const RACE: &str = "sims/teaching/check-first-race.toml";
const CASE_11: &str = "sims/article/11-twenty-concurrent-one-process.toml";

fn sim(rel: &str) -> Arc<Sim> {
    Arc::new(Sim::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap())
}

fn model(name: &str) -> Arc<Model> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("models").join(format!("{name}.toml"));
    Arc::new(Model::load(&p).unwrap())
}

/// One run per iteration, a new seed each time (as a sweep does).
fn one_run_per_model(c: &mut Criterion, group: &str, sim_path: &str) {
    let s = sim(sim_path);
    let requests: u64 = s.requests.iter().map(|r| r.copies as u64).sum();
    let mut g = c.benchmark_group(group);
    // Elements = simulated requests, so criterion prints requests/s beside the time per run.
    g.throughput(Throughput::Elements(requests));
    for name in REFERENCE {
        let m = model(name);
        let mut seed = 0u64;
        g.bench_function(name, |b| {
            b.iter(|| {
                seed += 1;
                run::run(&s, &m, seed, RunOptions::default()).unwrap()
            })
        });
    }
    g.finish();
}

fn race(c: &mut Criterion) {
    one_run_per_model(c, "race", RACE);
}

fn case_11(c: &mut Criterion) {
    one_run_per_model(c, "case-11", CASE_11);
}

/// A 1,000-seed sweep of the race under transactional on one worker thread: runs, the
/// aggregation and the worker's start and end.
fn sweep_1000(c: &mut Criterion) {
    let (s, m) = (sim(RACE), model("transactional"));
    let mut g = c.benchmark_group("sweep");
    g.sample_size(20).throughput(Throughput::Elements(1000));
    g.bench_function("race-transactional-1000-seeds", |b| {
        let opts = SweepOptions { jobs: 1, ..Default::default() };
        b.iter(|| {
            let cells = sweep::run_cells(
                std::slice::from_ref(&s),
                std::slice::from_ref(&m),
                Some(0..1000),
                &opts,
                |_, _| {},
            )
            .unwrap();
            assert_eq!(cells[0].runs, 1000);
            cells
        })
    });
    g.finish();
}

fn pieces(c: &mut Criterion) {
    let mut g = c.benchmark_group("piece");
    let mut seed = 0u64;
    g.bench_function("runtime-setup", |b| {
        b.iter(|| {
            seed += 1;
            bench::runtime_setup(seed)
        })
    });
    for journal in [Journal::Rollback, Journal::Wal] {
        g.bench_function(format!("database-reset-{}", journal.name()), |b| {
            b.iter(|| bench::database_reset(journal).unwrap())
        });
    }
    // The SQLite floor of a run: its statements alone, no executor, no model code.
    // The reset (before every run) is outside the timing; on SQLite's own memdb VFS too, as a
    // yardstick for idemsim's VFS.
    for (vfs, suffix) in [(bench::FloorVfs::Idemsim, ""), (bench::FloorVfs::Memdb, "-memdb")] {
        for (name, copies) in
            [("race", bench::RACE_RUN.copies), ("case-11", bench::CASE_11_RUN.copies)]
        {
            let mut floor = bench::SqlFloor::new(vfs).unwrap();
            g.bench_function(format!("sql-of-a-{name}-run-transactional{suffix}"), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        floor.reset().unwrap();
                        let t = Instant::now();
                        assert_eq!(floor.run(copies).unwrap(), (1, 1));
                        total += t.elapsed();
                    }
                    total
                })
            });
        }
    }
    let st = bench::Statement::new(Journal::Rollback).unwrap();
    g.bench_function("statement-key-lookup", |b| b.iter(|| st.lookup()));
    // Per wait and per message: one runtime per batch of 1,000, its cost spread over the batch.
    let (s, m) = (sim(RACE), model("transactional"));
    g.throughput(Throughput::Elements(1));
    g.bench_function("statement-wait", |b| {
        b.iter_custom(|iters| in_batches(iters, bench::statement_waits))
    });
    g.bench_function("message", |b| {
        b.iter_custom(|iters| {
            in_batches(iters, |seed, n| bench::messages(&s, &m, seed, n).unwrap())
        })
    });
    // The floor composed into one run: its pieces in a run's order, nothing added (not a piece
    // of the floor; what a run that did nothing above its floor would cost).
    for (name, run) in [("race", bench::RACE_RUN), ("case-11", bench::CASE_11_RUN)] {
        let mut floor = bench::SqlFloor::new(bench::FloorVfs::Idemsim).unwrap();
        g.bench_function(format!("floor-composed-{name}"), |b| {
            b.iter(|| {
                seed += 1;
                let done = bench::composed_floor(&s, &m, &mut floor, seed, run.copies).unwrap();
                assert_eq!(done, ((1, 1), run.waits));
            })
        });
    }
    g.finish();
}

/// The time of `bench::in_batches(iters, batch)`.
fn in_batches(iters: u64, batch: impl FnMut(u64, u64) -> u64) -> Duration {
    let t = Instant::now();
    bench::in_batches(iters, batch);
    t.elapsed()
}

criterion_group!(benches, race, case_11, sweep_1000, pieces);
criterion_main!(benches);
