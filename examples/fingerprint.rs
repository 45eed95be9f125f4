//! Byte-identity check for speed work and refactors: every shipped sim × model over the first
//! seeds of its range, one line per cell with a digest of each run's trace hash and full report
//! (its `Debug` text, which names every field). Two builds that print the same lines ran the
//! same schedules and judged them the same way.
//!
//! `cargo run --release --example fingerprint [SEEDS_PER_CELL] > before.txt`, change, run
//! again, `diff before.txt after.txt` (README "Speed").

use std::path::Path;
use std::sync::Arc;

use idemsim::catalog::files_under;
use idemsim::model::Model;
use idemsim::run::{self, RunOptions};
use idemsim::scenario::Sim;

fn main() {
    let per_cell: u64 = std::env::args().nth(1).map_or(8, |s| s.parse().expect("a number"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (sims, models) = (files_under(&root.join("sims")), files_under(&root.join("models")));
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
