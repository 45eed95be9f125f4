//! Whole runs against their floor, timed in interleaved rounds (`cargo bench --bench ratio`;
//! `-- --json` for one JSON line; `--rounds N`, default 61).
//!
//! Criterion (`benches/runs.rs`) times each bench for seconds before the next, and this VM's
//! speed drifts by tens of percent over minutes, so a ratio of two of its medians carries the
//! drift between them. Here every round times each item once, back to back (about 15 ms each,
//! the order rotated every round), and the ratios are taken within a round: the floor's pieces
//! summed as `tools/speed.py`'s FLOOR sums them, the floor composed into one run
//! (`bench::composed_floor`) and a whole run (`run::run`, as `benches/runs.rs`). The median of
//! the rounds' ratios is reported with a 95 % interval (order statistics of the median).

use std::sync::Arc;
use std::time::Instant;

use idemsim::catalog;
use idemsim::model::Model;
use idemsim::run::{self, RunOptions};
use idemsim::scenario::Sim;
use idemsim::world::bench;

// The binary's allocator, so the figures are those of `idemsim`.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// One thing timed: `iter(seed)` does one iteration (a batch item counts as `per` of them).
struct Item {
    name: &'static str,
    per: u64,
    iter: Box<dyn FnMut(u64)>,
}

/// The items: the floor's pieces (SQL with its reset, runtime, message, statement wait), the
/// floor composed and a whole run, for the race and case 11, all transactional.
fn items(race: &Arc<Sim>, case_11: &Arc<Sim>, tx: &Arc<Model>) -> Vec<Item> {
    let sql = |copies: u32| {
        let mut floor = bench::SqlFloor::new(bench::FloorVfs::Idemsim).unwrap();
        move |_| {
            floor.reset().unwrap();
            assert_eq!(floor.run(copies).unwrap(), (1, 1));
        }
    };
    let composed = |run: bench::FloorRun| {
        let (s, m) = (race.clone(), tx.clone());
        let mut floor = bench::SqlFloor::new(bench::FloorVfs::Idemsim).unwrap();
        move |seed| {
            let done = bench::composed_floor(&s, &m, &mut floor, seed, run.copies).unwrap();
            assert_eq!(done, ((1, 1), run.waits));
        }
    };
    let whole = |sim: &Arc<Sim>| {
        let (s, m) = (sim.clone(), tx.clone());
        move |seed| {
            run::run(&s, &m, seed, RunOptions::default()).unwrap();
        }
    };
    let (s, m) = (race.clone(), tx.clone());
    vec![
        Item { name: "sql-race", per: 1, iter: Box::new(sql(bench::RACE_RUN.copies)) },
        Item { name: "sql-case-11", per: 1, iter: Box::new(sql(bench::CASE_11_RUN.copies)) },
        Item { name: "runtime", per: 1, iter: Box::new(bench::runtime_setup) },
        Item {
            name: "message",
            per: 1000,
            iter: Box::new(move |seed| {
                assert_eq!(bench::messages(&s, &m, seed, 1000).unwrap(), 1000);
            }),
        },
        Item {
            name: "wait",
            per: 1000,
            iter: Box::new(|seed| assert_eq!(bench::statement_waits(seed, 1000), 1000)),
        },
        Item { name: "composed-race", per: 1, iter: Box::new(composed(bench::RACE_RUN)) },
        Item { name: "composed-case-11", per: 1, iter: Box::new(composed(bench::CASE_11_RUN)) },
        Item { name: "race/transactional", per: 1, iter: Box::new(whole(race)) },
        Item { name: "case-11/transactional", per: 1, iter: Box::new(whole(case_11)) },
    ]
}

/// The floor of a run from one round's times: its SQL with the reset, the runtime, and its
/// messages and waits.
fn floor(ns: &dyn Fn(&str) -> f64, sql: &str, run: bench::FloorRun) -> f64 {
    ns(sql) + ns("runtime") + run.messages as f64 * ns("message") + run.waits as f64 * ns("wait")
}

fn median_with_interval(mut xs: Vec<f64>) -> (f64, f64, f64) {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    // The ranks around the median that hold it with 95 % confidence (normal approximation
    // of the binomial): n/2 ± 0.98·√n.
    let half = (0.98 * (n as f64).sqrt()).ceil() as usize;
    let lo = (n / 2).saturating_sub(half);
    let hi = (n / 2 + half).min(n - 1);
    (xs[n / 2], xs[lo], xs[hi])
}

/// Nanoseconds per iteration of each item in each round: calibrated first (iterations per
/// item so that each takes about 15 ms, which warms each up), then `rounds` rounds, each
/// timing every item once, starting one item later each round.
fn interleaved(items: &mut [Item], rounds: usize) -> Vec<Vec<f64>> {
    let mut seed = 0u64;
    let mut reps = vec![];
    for it in items.iter_mut() {
        let t = Instant::now();
        let mut k = 0;
        while t.elapsed().as_millis() < 15 {
            seed += 1;
            (it.iter)(seed);
            k += 1;
        }
        reps.push(k);
    }
    let mut times: Vec<Vec<f64>> = vec![vec![]; items.len()];
    for round in 0..rounds {
        for j in 0..items.len() {
            let i = (j + round) % items.len();
            let t = Instant::now();
            for _ in 0..reps[i] {
                seed += 1;
                (items[i].iter)(seed);
            }
            times[i].push(t.elapsed().as_nanos() as f64 / (reps[i] * items[i].per) as f64);
        }
    }
    times
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let json = args.iter().any(|a| a == "--json");
    let rounds = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1)?.parse::<usize>().ok())
        .unwrap_or(61)
        .max(3);
    let race = catalog::sim("check-first-race").unwrap();
    let case_11 = catalog::sim("11-twenty-concurrent-one-process").unwrap();
    let tx = catalog::model("transactional").unwrap();
    let mut items = items(&race, &case_11, &tx);
    let times = interleaved(&mut items, rounds);
    let idx = |name: &str| items.iter().position(|it| it.name == name).unwrap();
    let mut out = vec![];
    for (group, sql, run) in
        [("race", "sql-race", bench::RACE_RUN), ("case-11", "sql-case-11", bench::CASE_11_RUN)]
    {
        let (comp, whole) =
            (idx(&format!("composed-{group}")), idx(&format!("{group}/transactional")));
        let fl: Vec<f64> =
            (0..rounds).map(|r| floor(&|n: &str| times[idx(n)][r], sql, run)).collect();
        let within = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x / y).collect::<Vec<_>>();
        let ratios = [
            within(&times[comp], &fl),
            within(&times[whole], &fl),
            within(&times[whole], &times[comp]),
        ];
        let med = |v: &[f64]| median_with_interval(v.to_vec());
        out.push((group, med(&fl), med(&times[comp]), med(&times[whole]), ratios.map(|v| med(&v))));
    }
    if json {
        let triple = |(m, lo, hi): (f64, f64, f64)| format!("[{m:.4},{lo:.4},{hi:.4}]");
        let cells: Vec<String> = out
            .iter()
            .map(|(g, fl, comp, whole, [cf, wf, wc])| {
                format!(
                    "\"{g}\":{{\"floor_ns\":{},\"composed_ns\":{},\"whole_ns\":{},\"composed_over_floor\":{},\"whole_over_floor\":{},\"whole_over_composed\":{}}}",
                    triple(*fl), triple(*comp), triple(*whole), triple(*cf), triple(*wf), triple(*wc)
                )
            })
            .collect();
        println!("{{\"rounds\":{rounds},{}}}", cells.join(","));
    } else {
        println!("{rounds} interleaved rounds; medians (95 % interval)");
        for (g, fl, comp, whole, [cf, wf, wc]) in &out {
            let us = |(m, lo, hi): (f64, f64, f64)| {
                format!("{:.1} µs ({:.1}–{:.1})", m / 1e3, lo / 1e3, hi / 1e3)
            };
            let x = |(m, lo, hi): (f64, f64, f64)| format!("{m:.2}× ({lo:.2}–{hi:.2})");
            println!("{g}: floor {}, composed {}, whole {}", us(*fl), us(*comp), us(*whole));
            println!(
                "  composed ÷ floor {}, whole ÷ floor {}, whole ÷ composed {}",
                x(*cf),
                x(*wf),
                x(*wc)
            );
        }
    }
}
