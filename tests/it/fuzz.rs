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

/// Shard mutants in `cargo test` (IDEMSIM_FUZZ_SHARD_MUTANTS overrides): every structured
/// class several times, and as many random edits.
const SHARD_MUTANTS: u64 = 400;

/// Shards are untrusted input (issue 23): honest shard files of a small matrix, forged in every
/// way the issue lists and edited at random, merged by the binary. Each mutant is refused with
/// a located error and nothing written to `--out`, or merged to the honest merge's report (a
/// mutant only a re-run could detect: to a report without an impossible number); never a
/// panic, a hang (wall bound) or a crash. The first defect is saved with a README.
#[test]
fn mutated_shards_are_refused_with_a_location_or_merge_to_the_honest_report() {
    use idemsim::fuzz::shard;
    let n: u64 = std::env::var("IDEMSIM_FUZZ_SHARD_MUTANTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(SHARD_MUTANTS);
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_idemsim"));
    let work = std::env::temp_dir().join(format!("idemsim-fuzz-shards-{}", std::process::id()));
    let started = std::time::Instant::now();
    let honest = shard::honest(bin, &work).unwrap();
    assert_eq!(honest.text.code, Some(1), "the honest matrix fails: {}", honest.text.stderr);
    let none = shard::impossible(&honest, &honest.text.stdout, &honest.json.stdout, 1);
    assert_eq!(none, None, "the honest report is possible");
    // Reproducible from (campaign seed, index) alone.
    let (a, b) = (shard::mutant(&honest, 2026, 7), shard::mutant(&honest, 2026, 7));
    assert_eq!((a.class, &a.what, a.given), (b.class, &b.what, b.given));
    let results = shard::campaign(bin, &honest, 2026, n, 2, &work, Duration::from_secs(5));
    let _ = std::fs::remove_dir_all(&work);
    assert_eq!(results.len() as u64, n);
    let refused = results.iter().filter(|j| j.judgement.kind() == "refused").count();
    let merged = results.len() - refused;
    if n >= 2 * shard::classes().len() as u64 {
        for (class, _) in shard::classes() {
            assert!(results.iter().any(|j| j.mutant.class == class), "class {class} never drawn");
        }
        assert!(refused > 50 && merged > 50, "{refused} refused, {merged} merged");
    }
    let defects: Vec<&shard::Judged> = results.iter().filter(|j| j.defect().is_some()).collect();
    let Some(first) = defects.first() else { return };
    let mut lines = Vec::new();
    for ((class, kind, defect), (count, index)) in shard::tally(&results) {
        if !defect.is_empty() {
            lines.push(format!("  {class}: {count} × {defect} ({kind}; e.g. mutant {index})"));
        }
    }
    let saved = shard::save(first, &std::env::temp_dir().join("idemsim-fuzz-shards"));
    panic!(
        "{} defect(s) in {n} shard mutants ({:.1} s), by class:\n{}\nfirst: mutant {}: {}: {:?} \
         (saved to {saved:?})",
        defects.len(),
        started.elapsed().as_secs_f64(),
        lines.join("\n"),
        first.index,
        first.mutant.what,
        first.judgement,
    );
}
