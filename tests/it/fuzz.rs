//! The fuzz test: seeded structured mutations of every shipped sim and model. Each mutant is
//! refused with file:line:col and what was expected, or runs to a report within a wall bound;
//! nothing panics. `cargo run --release --example fuzz -- 10000` reports the outcome classes
//! of a longer run.

use std::time::Duration;

use idemsim::catalog;
use idemsim::fuzz::{self, Outcome};
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::{model, root, sim};

/// Mutants in `cargo test` (IDEMSIM_FUZZ_MUTANTS overrides).
const MUTANTS: u64 = 2000;

#[test]
fn mutated_files_are_refused_with_a_location_or_run_to_a_report() {
    let n: u64 =
        std::env::var("IDEMSIM_FUZZ_MUTANTS").ok().and_then(|v| v.parse().ok()).unwrap_or(MUTANTS);
    let mut files: Vec<(String, bool)> = Vec::new();
    for p in catalog::files_under(&root().join("sims")) {
        files.push((std::fs::read_to_string(p).unwrap(), true));
    }
    for p in catalog::all_model_paths() {
        files.push((std::fs::read_to_string(p).unwrap(), false));
    }
    assert!(files.len() > 50);
    // Partners: a model for sim mutants, a sim for model mutants, in turn.
    let partners = [
        (sim("sims/article/01-same-key-same-content.toml"), model("transactional")),
        (sim("sims/faults/crash-between-steps.toml"), model("check-first")),
        (sim("sims/dependencies/payment-provider.toml"), model("lease")),
        (sim("sims/dependencies/cache-faults.toml"), model("ttl-cache-set-nx")),
    ];
    let wall = Duration::from_secs(20);
    let threads = 2u64;
    let outcomes: Vec<(u64, Outcome, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (files, partners) = (&files, &partners);
                s.spawn(move || {
                    let mut out = Vec::new();
                    for i in (t..n).step_by(threads as usize) {
                        // One RNG per mutant: the same mutants whatever the thread count.
                        let mut rng = StdRng::seed_from_u64(2026 ^ i.wrapping_mul(0x9e37_79b9));
                        let (text, is_sim) = &files[(i as usize) % files.len()];
                        let mutant = fuzz::mutate(text, &mut rng);
                        let (ps, pm) = &partners[(i as usize / files.len()) % partners.len()];
                        let o = fuzz::judge(&mutant, *is_sim, ps, pm, wall);
                        out.push((i, o, mutant));
                    }
                    out
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(outcomes.len() as u64, n);
    let defects: Vec<&(u64, Outcome, String)> = outcomes
        .iter()
        .filter(|(_, o, _)| {
            matches!(
                o,
                Outcome::Panicked { .. }
                    | Outcome::Slow { .. }
                    | Outcome::RefusedUnlocated { .. }
                    | Outcome::RunError { .. }
            )
        })
        .collect();
    let ran = outcomes.iter().filter(|(_, o, _)| matches!(o, Outcome::Ran { .. })).count();
    let refused = outcomes.iter().filter(|(_, o, _)| matches!(o, Outcome::Refused { .. })).count();
    assert!(
        ran > 200 && refused > 200,
        "{ran} ran, {refused} refused: the mutants test both paths"
    );
    if let Some((i, o, text)) = defects.first() {
        let dir = std::env::temp_dir().join("idemsim-fuzz");
        let _ = std::fs::create_dir_all(&dir);
        let f = dir.join(format!("mutant-{i}.toml"));
        let _ = std::fs::write(&f, text);
        panic!("{} defect(s); first: mutant {i}: {o:?} (saved to {})", defects.len(), f.display());
    }
}
