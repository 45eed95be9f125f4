//! Outcome classes over many mutants of the shipped sims and models (release build):
//!   cargo run --release --example fuzz -- 10000
//! Prints how many mutants were refused (by message class), ran (passed, failed, with
//! violations, bounded) and how many were defects (panic, unlocated refusal, slow, run error).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use idemsim::fuzz::{self, Outcome};
use idemsim::{catalog, model::Model, scenario::Sim};
use rand::SeedableRng;
use rand::rngs::StdRng;

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let root = catalog::root();
    let mut files: Vec<(String, bool)> = Vec::new();
    for p in catalog::files_under(&root.join("sims")) {
        files.push((std::fs::read_to_string(p).expect("shipped sim"), true));
    }
    for p in catalog::all_model_paths() {
        files.push((std::fs::read_to_string(p).expect("shipped model"), false));
    }
    let load_sim = |rel: &str| Arc::new(Sim::load(&root.join(rel)).expect("shipped sim"));
    let load_model =
        |n: &str| Arc::new(Model::load(&root.join(format!("models/{n}.toml"))).expect("model"));
    let partners = [
        (load_sim("sims/article/01-same-key-same-content.toml"), load_model("transactional")),
        (load_sim("sims/faults/crash-between-steps.toml"), load_model("check-first")),
        (load_sim("sims/dependencies/payment-provider.toml"), load_model("lease")),
        (load_sim("sims/dependencies/cache-faults.toml"), load_model("ttl-cache-set-nx")),
    ];
    let threads = std::thread::available_parallelism().map(|t| t.get() as u64).unwrap_or(1);
    let started = std::time::Instant::now();
    let outcomes: Vec<(u64, Outcome)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (files, partners) = (&files, &partners);
                s.spawn(move || {
                    let mut out = Vec::new();
                    for i in (t..n).step_by(threads as usize) {
                        let mut rng = StdRng::seed_from_u64(2026 ^ i.wrapping_mul(0x9e37_79b9));
                        let (text, is_sim) = &files[(i as usize) % files.len()];
                        let mutant = fuzz::mutate(text, &mut rng);
                        let (ps, pm) = &partners[(i as usize / files.len()) % partners.len()];
                        let o = fuzz::judge(&mutant, *is_sim, ps, pm, Duration::from_secs(10));
                        if matches!(
                            o,
                            Outcome::Panicked { .. }
                                | Outcome::Slow { .. }
                                | Outcome::RefusedUnlocated { .. }
                                | Outcome::RunError { .. }
                        ) {
                            let _ = std::fs::write(
                                Path::new(&format!("/tmp/idemsim-mutant-{i}.toml")),
                                &mutant,
                            );
                        }
                        out.push((i, o));
                    }
                    out
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("worker")).collect()
    });
    let mut top: BTreeMap<&str, u64> = BTreeMap::new();
    let mut refusals: BTreeMap<String, u64> = BTreeMap::new();
    let mut ran: BTreeMap<String, u64> = BTreeMap::new();
    for (_, o) in &outcomes {
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
    for (i, o) in &outcomes {
        if matches!(
            o,
            Outcome::Panicked { .. }
                | Outcome::Slow { .. }
                | Outcome::RefusedUnlocated { .. }
                | Outcome::RunError { .. }
        ) {
            println!("defect: mutant {i}: {o:?} (/tmp/idemsim-mutant-{i}.toml)");
        }
    }
}
