//! The `idemsim` command line: parse → load and check inputs → run → print. Exit codes (the
//! one place they are defined): 0 all held (and the bare demo, once printed); 1 an expectation
//! failed (`run`, `matrix`, `sweep`), or, for `sweep` only, a violation that is not
//! policy-permitted, a nondeterministic seed or a bound was found; 2 bad input or usage.

use std::fmt::Write as _;
use std::sync::Arc;

use clap::{Parser, Subcommand};

use crate::catalog;
use crate::error::InputError;
use crate::model::Model;
use crate::scenario::{Sim, parse_seeds};
use crate::sweep::{self, Cell};
use crate::world::{self, RunOptions};

pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILED: i32 = 1;
pub const EXIT_INPUT: i32 = 2;

#[derive(Parser, Debug)]
#[command(
    name = "idemsim",
    version,
    about = "Deterministic simulation testbed for idempotency protocols.\n\nWith no command: the reference experiment (every model × every sim in sims/article/).",
    after_help = "Exit codes: 0 all held; 1 an expectation failed (run, matrix, sweep) or, for sweep, a violation, a nondeterministic seed or a bound was found; 2 bad input or usage.\nModels and sims are looked up by name under models/ and sims/, or given as file paths."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List the models and sims found.
    List,
    /// Run one sim against one model on one seed.
    Run {
        /// Sim name or file path.
        sim: String,
        /// Model name or file path.
        #[arg(long)]
        model: String,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Print the event timeline.
        #[arg(long)]
        trace: bool,
        /// Print the run as a Mermaid sequence diagram (and nothing else).
        #[arg(long, conflicts_with_all = ["json", "trace"])]
        mermaid: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run one sim against one model over many seeds: violation rates, histograms, replays.
    Sweep {
        /// Sim name or file path.
        sim: String,
        /// Model name or file path.
        #[arg(long)]
        model: String,
        /// Seed range A..B (default: the sim's own range).
        #[arg(long)]
        seeds: Option<String>,
        /// Worker threads (default: all cores; the result is the same for any value).
        #[arg(long)]
        jobs: Option<usize>,
        /// Write one JSON line per seed to this file (in seed order).
        #[arg(long = "per-seed")]
        per_seed: Option<std::path::PathBuf>,
        /// Run each seed twice and fail on any trace difference.
        #[arg(long = "check-determinism")]
        check_determinism: bool,
        /// Print the aggregate as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run models × sims × seeds: pass/fail of expectations and the oracle's violations.
    Matrix {
        /// Sim files or folders (default: sims/article).
        #[arg(long = "sims")]
        sims: Vec<String>,
        /// Model names or files (default: every model in models/).
        #[arg(long = "models")]
        models: Vec<String>,
        /// Seed range A..B (default: each sim's own range).
        #[arg(long)]
        seeds: Option<String>,
        /// Worker threads (default: all cores; the result is the same for any value).
        #[arg(long)]
        jobs: Option<usize>,
        /// Print `cells` and `totals` as JSON.
        #[arg(long)]
        json: bool,
        /// Print the "which design survives which fault" table as Markdown: one row per model,
        /// one column per sim, each cell the violations found and on what share of seeds.
        #[arg(long, conflicts_with = "json")]
        markdown: bool,
    },
}

/// Run the CLI; returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_INPUT } else { EXIT_OK };
        }
    };
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            EXIT_INPUT
        }
    }
}

fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        None => demo(),
        Some(Command::List) => list(),
        Some(Command::Run { sim, model, seed, trace, mermaid, json }) => {
            run_one(&sim, &model, seed, trace, mermaid, json)
        }
        Some(Command::Sweep { sim, model, seeds, jobs, per_seed, check_determinism, json }) => {
            sweep_cmd(&sim, &model, seeds, jobs, per_seed, check_determinism, json)
        }
        Some(Command::Matrix { sims, models, seeds, jobs, json, markdown }) => {
            let seeds = seed_arg(seeds)?;
            let (sims, models) = load_matrix_inputs(&sims, &models)?;
            let jobs = jobs.unwrap_or_else(sweep::default_jobs);
            let started = std::time::Instant::now(); // wall clock: stderr only, never in a report
            let cells = sweep::run_matrix(&sims, &models, seeds, jobs)?;
            let runs: u64 = cells.iter().map(|c| c.runs).sum();
            let secs = started.elapsed().as_secs_f64();
            eprintln!(
                "{runs} runs in {secs:.2} s on {jobs} thread(s): {:.0} runs/s",
                runs as f64 / secs.max(1e-9)
            );
            if json {
                println!("{}", matrix_json(&models, &cells));
            } else if markdown {
                print!("{}", survival_markdown(&sims, &models, &cells));
            } else {
                print!("{}", matrix_table(&sims, &models, &cells));
            }
            Ok(if cells.iter().all(|c| c.passed) { EXIT_OK } else { EXIT_FAILED })
        }
    }
}

fn seed_arg(seeds: Option<String>) -> Result<Option<std::ops::Range<u64>>, InputError> {
    seeds
        .map(|s| parse_seeds(&s).map_err(|m| InputError::file(std::path::Path::new("--seeds"), m)))
        .transpose()
}

fn sweep_cmd(
    sim: &str,
    model: &str,
    seeds: Option<String>,
    jobs: Option<usize>,
    per_seed: Option<std::path::PathBuf>,
    check_determinism: bool,
    json: bool,
) -> anyhow::Result<i32> {
    use std::io::Write;
    let seeds = seed_arg(seeds)?;
    let sim = catalog::sim(sim)?;
    let model = catalog::model(model)?;
    let range = seeds.unwrap_or_else(|| sim.seeds.clone());
    let jobs = jobs.unwrap_or_else(sweep::default_jobs);
    let mut file = match &per_seed {
        None => None,
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p)
                .map_err(|e| InputError::file(p, format!("cannot create: {e}")))?,
        )),
    };
    // Per-seed lines are written in seed order: results arriving early wait in a small buffer.
    let mut pending: std::collections::BTreeMap<u64, String> = Default::default();
    let mut next_seed = range.start;
    let mut io_err: Option<std::io::Error> = None;
    let opts = sweep::SweepOptions {
        jobs,
        check_determinism,
        progress: true,
        per_seed: per_seed.is_some(),
    };
    let started = std::time::Instant::now(); // wall clock: stderr only, never in a report
    let cells = sweep::run_cells(
        std::slice::from_ref(&sim),
        std::slice::from_ref(&model),
        Some(range.clone()),
        &opts,
        |seed, line| {
            if let Some(f) = file.as_mut() {
                pending.insert(seed, line.to_string());
                while let Some(line) = pending.remove(&next_seed) {
                    if let Err(e) = writeln!(f, "{line}") {
                        io_err.get_or_insert(e);
                    }
                    next_seed += 1;
                }
            }
        },
    )?;
    if let Some(mut f) = file
        && let Err(e) = f.flush()
    {
        io_err.get_or_insert(e);
    }
    if let Some(e) = io_err {
        anyhow::bail!("writing --per-seed file: {e}");
    }
    let secs = started.elapsed().as_secs_f64();
    let cell = &cells[0];
    eprintln!(
        "{} runs in {secs:.2} s on {jobs} thread(s): {:.0} runs/s",
        cell.runs,
        cell.runs as f64 / secs.max(1e-9)
    );
    if json {
        println!("{}", serde_json::to_string_pretty(cell)?);
    } else {
        print!("{}", sweep_text(&sim, &model, cell, jobs));
    }
    let bad = cell.violating().next().is_some()
        || !cell.nondeterministic_seeds.is_empty()
        || cell.bounded_runs > 0
        || !cell.passed;
    Ok(if bad { EXIT_FAILED } else { EXIT_OK })
}

/// The text report of a sweep.
pub fn sweep_text(sim: &Sim, model: &Model, c: &Cell, jobs: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "idemsim sweep: sim {} · model {} · seeds {} · {jobs} job(s)",
        sim.name, model.name, c.seeds
    );
    let _ = writeln!(out, "  faults: {}", sim.faults.describe());
    let _ = writeln!(out, "  model: {}", model.program_text());
    for w in crate::world::warnings(sim, model) {
        let _ = writeln!(out, "  warning: {w}");
    }
    let runs = c.runs;
    // A share of seeds in percent, with its Wilson 95 % interval.
    let pct = |k: u64| {
        let (lo, hi) = sweep::wilson(k, runs);
        (100.0 * k as f64 / runs.max(1) as f64, 100.0 * lo, 100.0 * hi)
    };
    let (p, lo, hi) = pct(c.violating_seeds);
    let _ = writeln!(
        out,
        "\n{runs} runs · seeds with a violation: {} ({p:.1}%, 95% CI {lo:.1}%–{hi:.1}%) · bounds hit: {} · ambiguous intents: {}",
        c.violating_seeds, c.bounded_runs, c.ambiguous_intents
    );
    if c.violations.is_empty() {
        let _ = writeln!(out, "\nno violations on any seed");
    } else {
        let _ = writeln!(
            out,
            "\n{:<28} {:>6} {:>8}  {:<17} {:>10}",
            "violation", "seeds", "rate", "95% CI", "first seed"
        );
        for (name, v) in c.violations_in_order() {
            let (p, lo, hi) = pct(v.seeds);
            let label = if v.permitted { format!("{name}*") } else { name.to_string() };
            let _ = writeln!(
                out,
                "{label:<28} {:>6} {p:>7.1}%  {lo:>6.1}%–{hi:>6.1}%  {:>10}\n    replay: {}",
                v.seeds,
                v.first_seed,
                sweep::replay_command(&c.sim_path, &c.model_cli, v.first_seed)
            );
        }
    }
    if c.violations.values().any(|v| v.permitted) {
        let _ = writeln!(
            out,
            "  * policy-permitted: caused only by a retry after the key's documented retention"
        );
    }
    let hist = |h: &std::collections::BTreeMap<u64, u64>| {
        h.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join("   ")
    };
    let _ = writeln!(out, "\nrows per intent     {}", hist(&c.rows_per_intent));
    let _ = writeln!(out, "effects per intent  {}", hist(&c.effects_per_intent));
    let _ = writeln!(
        out,
        "attempt outcomes    {}",
        c.statuses.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join("   ")
    );
    if !c.nondeterministic_seeds.is_empty() {
        let _ = writeln!(
            out,
            "\nNONDETERMINISTIC seeds (trace differed on a second run): {:?}",
            c.nondeterministic_seeds
        );
    }
    if let Some(cmd) = c.replay_command() {
        let _ = writeln!(
            out,
            "\nexpectations failed first on seed {}; replay: {cmd}",
            c.first_failed_seed.unwrap_or_default()
        );
    }
    out
}

/// The sims and models a matrix runs over.
type MatrixInputs = (Vec<Arc<Sim>>, Vec<Arc<Model>>);

fn load_matrix_inputs(sims: &[String], models: &[String]) -> Result<MatrixInputs, InputError> {
    let sims = if sims.is_empty() { vec!["article".to_string()] } else { sims.to_vec() };
    let mut all_sims = Vec::new();
    for s in &sims {
        all_sims.extend(catalog::sims_at(s)?);
    }
    let models = if models.is_empty() {
        catalog::ordered_models(catalog::all_models()?)
    } else {
        models.iter().map(|m| catalog::model(m)).collect::<Result<_, _>>()?
    };
    Ok((all_sims, models))
}

fn demo() -> anyhow::Result<i32> {
    let (sims, models) = load_matrix_inputs(&[], &[])?;
    let cells = sweep::run_matrix(&sims, &models, None, sweep::default_jobs())?;
    // The article's three variants get the published table; the other models a compact one.
    let (reference, others): (Vec<usize>, Vec<usize>) = (0..models.len())
        .partition(|&i| catalog::REFERENCE_MODELS.contains(&models[i].name.as_str()));
    let pick = |idx: &[usize]| -> (Vec<Arc<Model>>, Vec<Cell>) {
        let ms: Vec<Arc<Model>> = idx.iter().map(|&i| models[i].clone()).collect();
        let cs = (0..sims.len())
            .flat_map(|si| idx.iter().map(move |&mi| (si, mi)))
            .map(|(si, mi)| sweep::cell(&cells, models.len(), si, mi).clone())
            .collect();
        (ms, cs)
    };
    println!(
        "idemsim: the reference experiment: every sim in sims/article/ × every model, over each sim's seed range."
    );
    println!("A case passes for a variant only when its expectations hold on every seed tried.\n");
    let (ref_models, ref_cells) = pick(&reference);
    if !ref_models.is_empty() {
        print!("{}", matrix_table(&sims, &ref_models, &ref_cells));
    }
    if !others.is_empty() {
        let (other_models, other_cells) = pick(&others);
        println!(
            "\nthe other models in models/ on the same cases (✓ held on every seed, ✗ failed on some):\n"
        );
        print!("{}", compact_table(&sims, &other_models, &other_cells));
        println!("details of one: cargo run --release -- matrix --models <name>");
    }
    Ok(EXIT_OK)
}

/// Models as rows, cases as columns (numbered by the sims' leading digits), ✓/✗ per cell.
pub fn compact_table(sims: &[Arc<Sim>], models: &[Arc<Model>], cells: &[Cell]) -> String {
    let mut out = String::new();
    let width = models.iter().map(|m| m.name.len()).max().unwrap_or(5) + 2;
    let _ = write!(out, "{:<width$}", "");
    for (i, s) in sims.iter().enumerate() {
        let num: String = s.name.chars().take_while(|c| c.is_ascii_digit()).collect();
        let num = if num.is_empty() { format!("{:02}", i + 1) } else { num };
        let _ = write!(out, "{num:>3}");
    }
    out.push_str("   passed\n");
    for (mi, m) in models.iter().enumerate() {
        let _ = write!(out, "{:<width$}", m.name);
        let mut passed = 0;
        for si in 0..sims.len() {
            let c = sweep::cell(cells, models.len(), si, mi);
            passed += c.passed as usize;
            let _ = write!(out, "{:>3}", if c.passed { "✓" } else { "✗" });
        }
        let _ = writeln!(out, "   {passed}/{}", sims.len());
    }
    out
}

fn list() -> anyhow::Result<i32> {
    println!("models ({}):", catalog::display_path(&catalog::root().join("models")));
    for m in catalog::ordered_models(catalog::all_models()?) {
        println!("  {:<24} {}", m.name, m.summary);
    }
    println!("\nsims ({}):", catalog::display_path(&catalog::root().join("sims")));
    for p in catalog::files_under(&catalog::root().join("sims")) {
        let s = Sim::load(&p)?;
        println!("  {:<52} {}", catalog::display_path(&p), s.description);
    }
    Ok(EXIT_OK)
}

fn run_one(
    sim: &str,
    model: &str,
    seed: u64,
    trace: bool,
    mermaid: bool,
    json: bool,
) -> anyhow::Result<i32> {
    let sim = catalog::sim(sim)?;
    let model = catalog::model(model)?;
    let out = world::run(&sim, &model, seed, RunOptions { keep_history: trace || mermaid })?;
    let r = &out.report;
    if mermaid {
        print!("{}", out.history.as_ref().map(|h| h.mermaid()).unwrap_or_default());
        return Ok(if r.passed() { EXIT_OK } else { EXIT_FAILED });
    }
    let replay = sweep::replay_command(&catalog::display_path(&sim.path), &model.cli_name(), seed);
    if json {
        println!("{}", serde_json::to_string_pretty(r)?);
    } else {
        let w = &sim.world;
        println!("idemsim run: sim {} · model {} · seed {seed}", sim.name, model.name);
        println!(
            "  world: {} process(es), wait budget {} ms, client timeout {} ms, network latency {}..{} ms",
            w.processes,
            w.wait_budget_ms.unwrap_or(model.wait_budget_ms),
            w.client_timeout_ms,
            w.latency_ms.0,
            w.latency_ms.1
        );
        println!("  model: {}", model.program_text());
        println!("  faults: {}", sim.faults.describe());
        for w in &r.warnings {
            println!("  warning: {w}");
        }
        if let Some(h) = &out.history {
            println!("\ntrace:");
            print!("{}", h.render());
        }
        println!("\nrequests:");
        for q in &r.requests {
            for (c, attempts) in q.copies.iter().enumerate() {
                for (n, a) in attempts.iter().enumerate() {
                    let mut name = q.id.clone();
                    if q.copies.len() > 1 {
                        let _ = write!(name, "[{c}]");
                    }
                    if n > 0 {
                        let _ = write!(name, "/{}", n + 1);
                    }
                    let what = match a.status {
                        Some(s) => format!(
                            "{s} {}{}",
                            a.body.as_deref().unwrap_or(""),
                            if a.replayed { " (replayed)" } else { "" }
                        ),
                        None => "transport failure".into(),
                    };
                    println!("  {name:<14} {what}");
                }
            }
        }
        println!(
            "\nrows: {}   stored keys: {}   effects: {}",
            r.rows.len(),
            r.keys,
            r.effects_total
        );
        println!("\nchecks:");
        for c in &r.checks {
            if c.held {
                println!("  ok    {}: {}", c.what, c.actual);
            } else {
                println!("  FAIL  {}: expected {}, got {}", c.what, c.expected, c.actual);
            }
        }
        for b in &r.bounds_hit {
            println!("  BOUND {b}");
        }
        if !r.violations.is_empty() {
            println!("\nviolations (oracle):");
            for v in &r.violations {
                let p = if v.permitted { " (policy-permitted)" } else { "" };
                println!("  {}{p}: intent {}: {}", v.name, v.intent, v.detail);
            }
        }
        println!(
            "\n{} events, trace hash {}, ended at {:.3} ms simulated",
            r.events, r.trace_hash, r.end_ms
        );
        if r.passed() {
            println!("PASS");
        } else {
            println!("FAIL: replay with: {replay}");
        }
    }
    Ok(if r.passed() { EXIT_OK } else { EXIT_FAILED })
}

/// Short names for table cells.
fn short(name: &str) -> &str {
    match name {
        "duplicate-row" => "dup-row",
        "duplicate-effect" => "dup-effect",
        "payload-mismatch-executed" => "payload-executed",
        "unacknowledged-effect" => "unacked-effect",
        "unfinished-intent" => "unfinished",
        "expired-duplicate-row" => "expired-row",
        "expired-duplicate-effect" => "expired-effect",
        "expired-replay-mismatch" => "expired-replay",
        other => other,
    }
}

/// Models × sims as Markdown: `✓` when no violation was found on any seed, else each
/// violation (short name) with the share of seeds it occurred on; policy-permitted ones in
/// italics.
pub fn survival_markdown(sims: &[Arc<Sim>], models: &[Arc<Model>], cells: &[Cell]) -> String {
    let mut out = String::new();
    out.push_str("| design |");
    for s in sims {
        let _ = write!(out, " {} |", s.name);
    }
    out.push_str("\n|---|");
    for _ in sims {
        out.push_str("---|");
    }
    out.push('\n');
    for (mi, m) in models.iter().enumerate() {
        let _ = write!(out, "| **{}** |", m.name);
        for si in 0..sims.len() {
            let c = sweep::cell(cells, models.len(), si, mi);
            let parts: Vec<String> = c
                .violations_in_order()
                .iter()
                .map(|(n, v)| {
                    let pct = (100.0 * v.seeds as f64 / c.runs.max(1) as f64).round();
                    if v.permitted {
                        format!("*{} {pct}%*", short(n))
                    } else {
                        format!("{} {pct}%", short(n))
                    }
                })
                .collect();
            let text = if parts.is_empty() { "✓".to_string() } else { parts.join("<br>") };
            let _ = write!(out, " {text} |");
        }
        out.push('\n');
    }
    out
}

/// The pass/fail table, like the published results table, with per-variant totals and then
/// one line per failing cell ending with its replay command.
pub fn matrix_table(sims: &[Arc<Sim>], models: &[Arc<Model>], cells: &[Cell]) -> String {
    let mut out = String::new();
    if !sims.iter().any(|s| s.has_expectations()) {
        out.push_str("(these sims state no expectations: the oracle's findings are the result)\n");
        return out + &violation_lines(cells);
    }
    let width = sims.iter().map(|s| s.name.len()).max().unwrap_or(4).max(5) + 2;
    let colw = models.iter().map(|m| m.name.len()).max().unwrap_or(8).max(12) + 2;
    let _ = write!(out, "{:<width$}", "case");
    for m in models {
        let _ = write!(out, "{:<colw$}", m.name);
    }
    out.push('\n');
    for (si, s) in sims.iter().enumerate() {
        let _ = write!(out, "{:<width$}", s.name);
        for (mi, _) in models.iter().enumerate() {
            let c = sweep::cell(cells, models.len(), si, mi);
            let text = if c.passed {
                "pass".to_string()
            } else if c.failed_seeds == c.runs {
                "FAIL".to_string()
            } else {
                format!("FAIL {}/{}", c.failed_seeds, c.runs)
            };
            let _ = write!(out, "{text:<colw$}");
        }
        out.push('\n');
    }
    let _ = write!(out, "{:<width$}", "passed");
    for t in sweep::totals(models, cells) {
        let _ = write!(out, "{:<colw$}", format!("{}/{}", t.passed, t.total));
    }
    out.push('\n');
    out.push_str(&violation_lines(cells));
    let failing: Vec<&Cell> = cells.iter().filter(|c| !c.passed).collect();
    if !failing.is_empty() {
        out.push_str("\nfailures (first failing seed of each cell):\n");
        for c in failing {
            let why = c
                .first_failure
                .first()
                .map(|k| format!("{}: expected {}, got {}", k.what, k.expected, k.actual))
                .unwrap_or_default();
            let more = if c.first_failure.len() > 1 {
                format!(" (+{} more)", c.first_failure.len() - 1)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "  {} × {}: failed on {}/{} seeds; seed {}: {why}{more}\n    replay: {}",
                c.model,
                c.sim,
                c.failed_seeds,
                c.runs,
                c.first_failed_seed.unwrap_or_default(),
                c.replay_command().unwrap_or_default()
            );
        }
    }
    out
}

/// One line per cell with violations: names, seeds with each, first seed's replay command.
fn violation_lines(cells: &[Cell]) -> String {
    let mut out = String::new();
    let violating: Vec<&Cell> = cells.iter().filter(|c| !c.violations.is_empty()).collect();
    if violating.is_empty() {
        out.push_str("\nno violations found by the oracle on any seed\n");
        return out;
    }
    out.push_str(
        "\nviolations found by the oracle (seeds with each / seeds run; * = policy-permitted):\n",
    );
    for c in violating {
        let list: Vec<String> = c
            .violations_in_order()
            .into_iter()
            .map(|(n, v)| {
                format!("{n}{} {}/{}", if v.permitted { "*" } else { "" }, v.seeds, c.runs)
            })
            .collect();
        let first = c.violations.values().filter(|v| !v.permitted).map(|v| v.first_seed).min();
        let _ = writeln!(out, "  {} × {}: {}", c.model, c.sim, list.join(", "));
        if let Some(seed) = first {
            let _ = writeln!(
                out,
                "    replay: {}",
                sweep::replay_command(&c.sim_path, &c.model_cli, seed)
            );
        }
    }
    out
}

pub fn matrix_json(models: &[Arc<Model>], cells: &[Cell]) -> String {
    let v = serde_json::json!({
        "cells": cells,
        "totals": sweep::totals(models, cells),
    });
    serde_json::to_string_pretty(&v).expect("serialisable")
}
