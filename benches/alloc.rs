//! Allocations per run (`cargo bench --bench alloc`; `-- --json` for one JSON line per cell):
//! a counting global allocator around mimalloc (the binary's allocator) counts what one seeded
//! run does, on the race under each reference model and on case 11 under transactional, averaged
//! over 1,000 seeds after 100 of warm-up (per-thread caches filled). Counts, not time: no
//! criterion. `tools/speed.py` saves its output in docs/speed/measurements.json.
//!
//! Flags: `--json`, `--seeds N` (default 1000), `--warm-up N` (default 100).

use std::alloc::{GlobalAlloc, Layout};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use idemsim::model::Model;
use idemsim::run::{self, RunOptions};
use idemsim::scenario::Sim;

/// mimalloc, counting. Relaxed atomics: the runs are on this one thread, and a count read
/// between runs needs no order with anything else.
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static REALLOCS: AtomicU64 = AtomicU64::new(0);
static FREES: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static LIVE: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);

static INNER: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn grew(by: u64) {
    let live = LIVE.fetch_add(by, Relaxed) + by;
    PEAK.fetch_max(live, Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        BYTES.fetch_add(layout.size() as u64, Relaxed);
        grew(layout.size() as u64);
        unsafe { INNER.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        BYTES.fetch_add(layout.size() as u64, Relaxed);
        grew(layout.size() as u64);
        unsafe { INNER.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        FREES.fetch_add(1, Relaxed);
        LIVE.fetch_sub(layout.size() as u64, Relaxed);
        unsafe { INNER.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        REALLOCS.fetch_add(1, Relaxed);
        let (old, new) = (layout.size() as u64, new_size as u64);
        if new >= old {
            BYTES.fetch_add(new - old, Relaxed);
            grew(new - old);
        } else {
            LIVE.fetch_sub(old - new, Relaxed);
        }
        unsafe { INNER.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The counters at one moment.
#[derive(Clone, Copy)]
struct Counts {
    allocs: u64,
    reallocs: u64,
    frees: u64,
    bytes: u64,
}

fn now() -> Counts {
    Counts {
        allocs: ALLOCS.load(Relaxed),
        reallocs: REALLOCS.load(Relaxed),
        frees: FREES.load(Relaxed),
        bytes: BYTES.load(Relaxed),
    }
}

/// One cell's averages per run, and the largest growth of live bytes within one run.
struct Cell {
    sim: &'static str,
    model: &'static str,
    runs: u64,
    per_run: [f64; 4],
    peak_live: u64,
}

const RACE: &str = "sims/teaching/check-first-race.toml";
const CASE_11: &str = "sims/article/11-twenty-concurrent-one-process.toml";
const CELLS: [(&str, &str, &str); 4] = [
    ("race", RACE, "no-key"),
    ("race", RACE, "check-first"),
    ("race", RACE, "transactional"),
    ("case-11", CASE_11, "transactional"),
];

fn measure(name: &'static str, sim_path: &str, model: &'static str, warm: u64, n: u64) -> Cell {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sim = Arc::new(Sim::load(&root.join(sim_path)).expect("sim"));
    let m =
        Arc::new(Model::load(&root.join("models").join(format!("{model}.toml"))).expect("model"));
    for seed in 0..warm {
        drop(run::run(&sim, &m, seed, RunOptions::default()).expect("run"));
    }
    let mut peak_live = 0;
    let before = now();
    for seed in warm..warm + n {
        let live = LIVE.load(Relaxed);
        PEAK.store(live, Relaxed);
        drop(run::run(&sim, &m, seed, RunOptions::default()).expect("run"));
        peak_live = peak_live.max(PEAK.load(Relaxed) - live);
    }
    let after = now();
    let per = |a: u64, b: u64| (b - a) as f64 / n as f64;
    let per_run = [
        per(before.allocs, after.allocs),
        per(before.reallocs, after.reallocs),
        per(before.frees, after.frees),
        per(before.bytes, after.bytes),
    ];
    Cell { sim: name, model, runs: n, per_run, peak_live }
}

fn flag(args: &[String], name: &str, default: u64) -> u64 {
    match args.iter().position(|a| a == name) {
        Some(i) => args.get(i + 1).and_then(|v| v.parse().ok()).expect("a count after the flag"),
        None => default,
    }
}

fn main() {
    // `cargo bench` passes `--bench`; anything else unknown is ignored too.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    let (n, warm) = (flag(&args, "--seeds", 1000).max(1), flag(&args, "--warm-up", 100));
    if !json {
        println!(
            "allocations per run ({n} seeds after {warm} of warm-up; bytes: requested, reallocs' growth included)"
        );
        println!(
            "{:<8} {:<14} {:>10} {:>10} {:>10} {:>12} {:>14}",
            "sim", "model", "allocs", "reallocs", "frees", "bytes", "peak live B"
        );
    }
    for (name, path, model) in CELLS {
        let c = measure(name, path, model, warm, n);
        let [allocs, reallocs, frees, bytes] = c.per_run;
        if json {
            let v = serde_json::json!({
                "sim": c.sim, "model": c.model, "runs": c.runs, "warm_up": warm,
                "allocs_per_run": allocs, "reallocs_per_run": reallocs,
                "frees_per_run": frees, "bytes_per_run": bytes, "peak_live_bytes": c.peak_live,
            });
            println!("{v}");
        } else {
            println!(
                "{:<8} {:<14} {:>10.1} {:>10.1} {:>10.1} {:>12.0} {:>14}",
                c.sim, c.model, allocs, reallocs, frees, bytes, c.peak_live
            );
        }
    }
}
