//! Outcome classes over many mutants of the shipped sims and models (release build):
//!   cargo run --release --example fuzz -- 10000
//! Prints how many mutants were refused (by message class), ran (passed, failed, with
//! violations, bounded) and how many were defects (panic, unlocated refusal, slow, run error).
//!
//! Shard files and `merge` (issue 23), with the release binary (`cargo build --release` first,
//! or IDEMSIM_BIN=path):
//!   cargo run --release --example fuzz -- shards 5000 [campaign seed [class]]
//! Prints, per mutant class, what merge made of its mutants (refused, the honest report,
//! another report, an impossible one, a panic, a hang) and the defects, each with a mutant to
//! look at (saved under /tmp/idemsim-shard-mutants/). With a class, each of its mutants and
//! its judgement instead.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use idemsim::fuzz::{self, Outcome};

fn main() {
    if std::env::args().nth(1).as_deref() == Some("shards") {
        return shards();
    }
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let files = fuzz::shipped_files().expect("shipped files");
    let partners = fuzz::partners().expect("shipped partners");
    let threads = std::thread::available_parallelism().map(|t| t.get() as u64).unwrap_or(1);
    let started = std::time::Instant::now();
    let outcomes = fuzz::campaign(&files, &partners, n, threads, Duration::from_secs(10));
    for (i, o, mutant) in &outcomes {
        if o.is_defect() {
            let _ = std::fs::write(Path::new(&format!("/tmp/idemsim-mutant-{i}.toml")), mutant);
        }
    }
    let mut top: BTreeMap<&str, u64> = BTreeMap::new();
    let mut refusals: BTreeMap<String, u64> = BTreeMap::new();
    let mut ran: BTreeMap<String, u64> = BTreeMap::new();
    for (_, o, _) in &outcomes {
        match o {
            Outcome::Refused { class } => {
                *top.entry("refused with file:line:col").or_default() += 1;
                *refusals.entry(class.clone()).or_default() += 1;
            }
            Outcome::Ran { passed, violations, bounded } => {
                *top.entry("ran to a report").or_default() += 1;
                let k = format!(
                    "expectations {}, {}{}",
                    if *passed { "held" } else { "failed" },
                    if *violations { "violations named" } else { "no violation" },
                    if *bounded { ", a bound hit" } else { "" }
                );
                *ran.entry(k).or_default() += 1;
            }
            Outcome::RefusedUnlocated { .. } => {
                *top.entry("DEFECT refused without location").or_default() += 1
            }
            Outcome::RunError { .. } => *top.entry("DEFECT run error").or_default() += 1,
            Outcome::Panicked { .. } => *top.entry("DEFECT panic").or_default() += 1,
            Outcome::Slow { .. } => *top.entry("DEFECT slow run").or_default() += 1,
        }
    }
    println!(
        "{n} mutants of {} shipped files in {:.1} s on {threads} thread(s)\n",
        files.len(),
        started.elapsed().as_secs_f64()
    );
    for (k, v) in &top {
        println!("{v:>7}  {k}");
    }
    println!("\nran to a report:");
    for (k, v) in &ran {
        println!("{v:>7}  {k}");
    }
    println!("\nrefusals by message (quoted values and numbers blanked), most frequent first:");
    let mut by: Vec<(&String, &u64)> = refusals.iter().collect();
    by.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for (k, v) in by.iter().take(40) {
        println!("{v:>7}  {k}");
    }
    if by.len() > 40 {
        println!("    ... {} more classes", by.len() - 40);
    }
    for (i, o, _) in outcomes.iter().filter(|(_, o, _)| o.is_defect()) {
        println!("defect: mutant {i}: {o:?} (/tmp/idemsim-mutant-{i}.toml)");
    }
}

/// The shard-mutant campaign: outcome classes per mutant class, defects first.
fn shards() {
    use idemsim::fuzz::shard;
    let arg = |i: usize, default: u64| {
        std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(default)
    };
    let (n, seed) = (arg(2, 5_000), arg(3, 2026));
    let bin = std::env::var_os("IDEMSIM_BIN").map(std::path::PathBuf::from).unwrap_or_else(|| {
        // target/release/examples/fuzz → target/release/idemsim
        let exe = std::env::current_exe().expect("this example's path");
        exe.parent().and_then(Path::parent).expect("target/<profile>").join("idemsim")
    });
    if !bin.is_file() {
        eprintln!("{}: no idemsim binary; cargo build --release first", bin.display());
        std::process::exit(2);
    }
    let work = std::env::temp_dir().join(format!("idemsim-shard-fuzz-{}", std::process::id()));
    let honest = shard::honest(&bin, &work).expect("the honest shards");
    let threads = std::thread::available_parallelism().map(|t| t.get() as u64).unwrap_or(1);
    let started = std::time::Instant::now();
    let results = shard::campaign(&bin, &honest, seed, n, threads, &work, Duration::from_secs(5));
    let _ = std::fs::remove_dir_all(&work);
    println!(
        "{n} shard mutants (campaign {seed}) merged by {} in {:.1} s on {threads} thread(s)\n",
        bin.display(),
        started.elapsed().as_secs_f64()
    );
    if let Some(class) = std::env::args().nth(4) {
        for j in results.iter().filter(|j| j.mutant.class == class) {
            println!("mutant {}: {}\n    {:?}", j.index, j.mutant.what, j.judgement);
        }
        return;
    }
    let expect: BTreeMap<&str, shard::Expect> = shard::classes().into_iter().collect();
    let saved = std::env::temp_dir().join("idemsim-shard-mutants");
    let tally = shard::tally(&results);
    for defects in [true, false] {
        println!("{}", if defects { "DEFECTS:" } else { "\nas required:" });
        for ((class, kind, defect), (count, index)) in &tally {
            if defect.is_empty() == defects {
                continue;
            }
            let e = expect.get(class).map_or("by its edits".into(), |e| format!("{e:?}"));
            let mut line = format!("{count:>6}  {class} ({e}): {kind}");
            if defects {
                let j = &results[*index as usize];
                let at = shard::save(j, &saved).map(|p| p.display().to_string());
                line += &format!(
                    " — {defect}; e.g. mutant {index}: {} ({})",
                    j.mutant.what,
                    at.unwrap_or_default()
                );
            }
            println!("{line}");
        }
    }
}
