//! Criterion benchmarks: one seeded run, end to end (runtime, nodes, SQLite, checker).
//! `cargo bench` — the speed work starts from these numbers.

use std::path::Path;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use idemsim::model::Model;
use idemsim::run::{self, RunOptions};
use idemsim::scenario::Sim;

// The same allocator as the binary, so the numbers match what `idemsim` does.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn load(sim: &str, model: &str) -> (Arc<Sim>, Arc<Model>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    (
        Arc::new(Sim::load(&root.join("sims/article").join(sim)).unwrap()),
        Arc::new(Model::load(&root.join("models").join(model)).unwrap()),
    )
}

fn runs(c: &mut Criterion) {
    for (sim, model) in [
        ("01-same-key-same-content.toml", "transactional.toml"),
        ("11-twenty-concurrent-one-process.toml", "transactional.toml"),
        ("11-twenty-concurrent-one-process.toml", "check-first.toml"),
        ("12-twenty-concurrent-two-processes.toml", "transactional.toml"),
    ] {
        let (s, m) = load(sim, model);
        let mut seed = 0u64;
        c.bench_function(&format!("run/{}/{}", s.name, m.name), |b| {
            b.iter(|| {
                seed += 1;
                run::run(&s, &m, seed, RunOptions::default()).unwrap()
            })
        });
    }
}

criterion_group!(benches, runs);
criterion_main!(benches);
