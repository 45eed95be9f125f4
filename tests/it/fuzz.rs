//! The fuzz test: seeded structured mutations of every shipped sim and model. Each mutant is
//! refused with file:line:col and what was expected, or runs to a report within a wall bound;
//! nothing panics. `cargo run --release --example fuzz -- 10000` reports the outcome classes
//! of a longer run.

use std::time::Duration;

use idemsim::fuzz::{self, Outcome};

/// Mutants in `cargo test` (IDEMSIM_FUZZ_MUTANTS overrides).
const MUTANTS: u64 = 2000;

#[test]
fn mutated_files_are_refused_with_a_location_or_run_to_a_report() {
    let n: u64 =
        std::env::var("IDEMSIM_FUZZ_MUTANTS").ok().and_then(|v| v.parse().ok()).unwrap_or(MUTANTS);
    let files = fuzz::shipped_files().unwrap();
    assert!(files.len() > 50);
    let outcomes =
        fuzz::campaign(&files, &fuzz::partners().unwrap(), n, 2, Duration::from_secs(20));
    assert_eq!(outcomes.len() as u64, n);
    let defects: Vec<&(u64, Outcome, String)> =
        outcomes.iter().filter(|(_, o, _)| o.is_defect()).collect();
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
