//! Outcome classes over many mutants of the shipped sims and models (release build):
//!   cargo run --release --example fuzz -- 10000
//! Prints how many mutants were refused (by message class), ran (passed, failed, with
//! violations, bounded) and how many were defects (panic, unlocated refusal, slow, run error).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use idemsim::fuzz::{self, Outcome};

fn main() {
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
