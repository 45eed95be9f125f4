//! Byte-identity check for speed work and refactors: every shipped sim × model over the first
//! seeds of its range, one line per cell with a digest of each run's trace hash and full report
//! (its `Debug` text, which names every field). Two builds that print the same lines ran the
//! same schedules and judged them the same way.
//!
//! `cargo run --release --example fingerprint [SEEDS_PER_CELL] > before.txt`, change, run
//! again, `diff before.txt after.txt` (README "Speed").

use std::path::{Path, PathBuf};
use std::sync::Arc;

use idemsim::model::Model;
use idemsim::run::{self, RunOptions};
use idemsim::scenario::Sim;

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(dir).expect("read dir").map(|e| e.expect("entry").path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|e| e == "toml") {
            out.push(p);
        }
    }
}

fn main() {
    let per_cell: u64 = std::env::args().nth(1).map_or(8, |s| s.parse().expect("a number"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (mut sims, mut models) = (Vec::new(), Vec::new());
    files(&root.join("sims"), &mut sims);
    files(&root.join("models"), &mut models);
    let models: Vec<Arc<Model>> =
        models.iter().map(|p| Arc::new(Model::load(p).expect("model"))).collect();
    for path in &sims {
        let sim = Arc::new(Sim::load(path).expect("sim"));
        for model in &models {
            if run::not_applicable(&sim, model).is_some() {
                continue;
            }
            let start = sim.seeds.start;
            let mut text = String::new();
            for seed in start..start + per_cell {
                match run::run(&sim, model, seed, RunOptions::default()) {
                    Ok(r) => text.push_str(&format!("{} {:?}\n", r.report.trace_hash, r.report)),
                    Err(e) => text.push_str(&format!("error {e}\n")),
                }
            }
            let digest = idemsim::http::sha256_hex(text.as_bytes());
            println!("{} {} {}", sim.name, model.name, &digest[..16]);
        }
    }
}
