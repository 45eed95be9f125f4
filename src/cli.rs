//! The `idemsim` command line: parse → load and check inputs → run → print. Exit codes (the
//! one place they are defined): 0 all held (and the bare demo, once printed); 1 an expectation
//! failed (`run`, `matrix`, `sweep`), or, for `sweep` only, a violation that is not
//! policy-permitted, a nondeterministic seed or a bound was found; 2 bad input or usage.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};

use crate::catalog;
use crate::input::{InputError, parse_seeds};
use crate::model::Model;
use crate::render;
use crate::run::{self, RunOptions};
use crate::scenario::Sim;
use crate::sweep::{self, Cell};

pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILED: i32 = 1;
pub const EXIT_INPUT: i32 = 2;
/// `run` or `sweep` of a sim that does not apply to the model (it injects at a point the
/// model lacks): nothing ran, nothing failed.
pub const EXIT_NOT_APPLICABLE: i32 = 3;
/// A sweep or matrix stopped by SIGINT, after printing what it had done (128 + SIGINT).
pub const EXIT_INTERRUPTED: i32 = 130;

/// `--jobs`: 1 to [`sweep::MAX_JOBS`].
fn parse_jobs(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=sweep::MAX_JOBS).contains(&n) => Ok(n),
        _ => Err(format!("expected a number of threads from 1 to {}", sweep::MAX_JOBS)),
    }
}

/// On the first SIGINT a sweep or matrix stops taking seeds and prints what finished; a
/// second one kills the process as usual.
fn stop_on_interrupt() {
    extern "C" fn on_sigint(_: libc::c_int) {
        sweep::INTERRUPTED.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe; SA_RESETHAND
    // restores the default action, so a second SIGINT terminates.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigint as *const () as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESETHAND;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
    }
}

fn interrupted() -> bool {
    sweep::INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed)
}

#[derive(Parser, Debug)]
#[command(
    name = "idemsim",
    version,
    about = "Deterministic simulation testbed for idempotency protocols.\n\nWith no command: the \
             reference experiment (every model × every sim in sims/article/).",
    after_help = "Exit codes: 0 all held; 1 an expectation failed (run, matrix, sweep) or, for \
                  sweep, a violation, a nondeterministic seed or a bound was found; 2 bad input \
                  or usage; 3 the sim does not apply to the model (run, sweep, shrink, explain \
                  --sim: it injects at a point the model lacks); 130 interrupted.\nModels and sims are looked up by name under models/ and sims/, or \
                  given as file paths."
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
    Run(RunArgs),
    /// Run one sim against one model over many seeds: violation rates, histograms, replays.
    Sweep(SweepArgs),
    /// Run models × sims × seeds: pass/fail of expectations and the oracle's violations.
    Matrix(MatrixArgs),
    /// Shrink a failing sim to a minimal sim file that shows the same violation.
    Shrink(ShrinkArgs),
    /// Merge shard files (`--shard`) into the report one run over the whole range gives.
    Merge(MergeArgs),
    /// Explain a model's failure in plain words (with only a model: its smallest failure
    /// among the shipped sims; `explain check-first` is the teaching demo).
    Explain(ExplainArgs),
    /// Play a sim's client side for real against real server processes (a target in
    /// targets/, docs/targets.md), judged like a simulated run. Not deterministic.
    Real(crate::real::cmd::RealArgs),
    /// The sim simulated over N seeds and played for real against a target over N rounds,
    /// side by side: rates and histograms with intervals and a verdict per statistic
    /// (exit 0 agree, 1 disagree, 4 inconclusive).
    Validate(crate::real::cmd::ValidateArgs),
}

#[derive(Args, Debug)]
pub struct ShrinkArgs {
    /// Sim name or file path.
    sim: String,
    /// Model name or file path.
    #[arg(long)]
    model: String,
    /// Start from this seed (default: the first failing seed of the sim's range).
    #[arg(long)]
    seed: Option<u64>,
    /// Write the minimal sim here (default: print it).
    #[arg(short = 'o', long = "out")]
    out: Option<PathBuf>,
    /// Runs in all (the result is the same on every machine for a given budget).
    #[arg(long, default_value_t = 50_000)]
    budget: u64,
    /// Seeds searched per candidate.
    #[arg(long, default_value_t = 32)]
    window: u64,
    /// Keep this violation (default: the first one found that is not policy-permitted).
    #[arg(long)]
    violation: Option<String>,
}

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// Model name or file path.
    model: String,
    /// Sim name or file path (default: search the shipped sims, teaching ones first).
    #[arg(long)]
    sim: Option<String>,
    #[arg(long)]
    seed: Option<u64>,
    /// Also write the explanation as a self-contained HTML page.
    #[arg(long)]
    html: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct RunArgs {
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
    /// Write the run as a standalone SVG space-time diagram.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Write the run as a self-contained HTML page (diagram, verdict, trace).
    #[arg(long)]
    html: Option<PathBuf>,
    /// Exit 1 when the oracle names a violation that is not policy-permitted, even if every
    /// expectation held (for CI jobs that gate on violations).
    #[arg(long = "fail-on-violation")]
    fail_on_violation: bool,
}

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// Sim name or file path.
    sim: String,
    /// Model name or file path.
    #[arg(long)]
    model: String,
    /// Seed range A..B (default: the sim's own range).
    #[arg(long)]
    seeds: Option<String>,
    /// Worker threads, 1 to 256 (default: all cores; the result is the same for any value).
    #[arg(long, value_parser = parse_jobs)]
    jobs: Option<usize>,
    /// Write one JSON line per seed to this file (in seed order).
    #[arg(long = "per-seed")]
    per_seed: Option<PathBuf>,
    /// Run each seed twice and fail on any trace difference.
    #[arg(long = "check-determinism")]
    check_determinism: bool,
    /// Print the aggregate as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    shard: ShardArgs,
}

/// Running one shard of a sweep or matrix on a batch engine.
#[derive(Args, Debug)]
pub struct ShardArgs {
    /// Run shard K of N (K/N, 0-based), or `auto`/`auto/N`: the index from the engine's
    /// variables (JOB_COMPLETION_INDEX, SLURM_ARRAY_TASK_ID, AWS_BATCH_JOB_ARRAY_INDEX,
    /// CI_NODE_INDEX). Writes a shard file for `idemsim merge`; exits 0 once it is written, violations or not (2: bad input, 3: the sim does not apply to the model; neither is worth a retry).
    #[arg(long)]
    shard: Option<String>,
    /// Write the shard file here (`-`: stdout, the default).
    #[arg(long, requires = "shard", conflicts_with = "out_dir")]
    out: Option<PathBuf>,
    /// Write the shard file into this folder as shard-K-of-N.json.
    #[arg(long = "out-dir", requires = "shard")]
    out_dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// Shard files (from `--shard`) or earlier merges, or folders of them (every `*.json`).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Fail unless every cell's range is exactly A..B (a shard of another run is refused).
    #[arg(long = "expect-seeds")]
    expect_seeds: Option<String>,
    /// Print the report of what the shards cover even if seeds are missing or a shard was
    /// interrupted (otherwise: exit 2).
    #[arg(long)]
    allow_partial: bool,
    /// Also write the merged shard file (for merges of merges).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the merged cell (one cell) or `cells` and `totals` (a matrix) as JSON.
    #[arg(long)]
    json: bool,
    /// Print the survival table as Markdown (a matrix).
    #[arg(long, conflicts_with = "json")]
    markdown: bool,
}

#[derive(Args, Debug)]
pub struct MatrixArgs {
    /// Sim files or folders, several after one flag or comma-separated (default: sims/article).
    #[arg(long = "sims", num_args = 1.., value_delimiter = ',')]
    sims: Vec<String>,
    /// Model names or files, several after one flag or comma-separated (default: every model).
    #[arg(long = "models", num_args = 1.., value_delimiter = ',')]
    models: Vec<String>,
    /// Seed range A..B (default: each sim's own range).
    #[arg(long)]
    seeds: Option<String>,
    /// Worker threads, 1 to 256 (default: all cores; the result is the same for any value).
    #[arg(long, value_parser = parse_jobs)]
    jobs: Option<usize>,
    /// Print `cells` and `totals` as JSON.
    #[arg(long)]
    json: bool,
    /// Print the "which design survives which fault" table as Markdown: one row per model,
    /// one column per sim, each cell the violations found and on what share of seeds.
    #[arg(long, conflicts_with = "json")]
    markdown: bool,
    /// Exit 1 when any cell has a violation that is not policy-permitted, even if every
    /// expectation held.
    #[arg(long = "fail-on-violation")]
    fail_on_violation: bool,
    /// Also write the survival table as a self-contained HTML page, with the first failing
    /// seed's diagram of every failing cell.
    #[arg(long)]
    html: Option<PathBuf>,
    #[command(flatten)]
    shard: ShardArgs,
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
        Some(Command::Run(args)) => run_one(args),
        Some(Command::Sweep(args)) => sweep_cmd(args),
        Some(Command::Matrix(args)) => matrix_cmd(args),
        Some(Command::Shrink(args)) => shrink_cmd(args),
        Some(Command::Merge(args)) => merge_cmd(args),
        Some(Command::Explain(args)) => explain_cmd(args),
        Some(Command::Real(args)) => crate::real::cmd::real_cmd(args).map(real_exit),
        Some(Command::Validate(args)) => crate::real::cmd::validate_cmd(args).map(real_exit),
    }
}

/// Exit code of `validate` when the rounds were too few to tell.
pub const EXIT_INCONCLUSIVE: i32 = 4;

fn real_exit(e: crate::real::cmd::Ending) -> i32 {
    use crate::real::cmd::Ending;
    match e {
        Ending::Held => EXIT_OK,
        Ending::Failed => EXIT_FAILED,
        Ending::Inconclusive => EXIT_INCONCLUSIVE,
        Ending::Interrupted => EXIT_INTERRUPTED,
    }
}

fn seed_arg(seeds: Option<String>) -> Result<Option<std::ops::Range<u64>>, InputError> {
    seeds
        .map(|s| parse_seeds(&s).map_err(|m| InputError::file(Path::new("--seeds"), m)))
        .transpose()
}

/// How fast a sweep or matrix ran (wall clock: printed to stderr and in `sweep --json`'s
/// `speed`, never in a report that is compared or snapshotted).
#[derive(Debug, Clone, serde::Serialize)]
struct Speed {
    runs: u64,
    /// HTTP attempts the simulated clients sent (every status and transport failure).
    simulated_requests: u64,
    wall_s: f64,
    jobs: usize,
    runs_per_s: f64,
    simulated_requests_per_s: f64,
}

/// `N runs in S s on J thread(s): R runs/s, Q simulated requests/s` on stderr.
fn report_speed(cells: &[Cell], started: std::time::Instant, jobs: usize) -> Speed {
    let wall_s = started.elapsed().as_secs_f64();
    let runs: u64 = cells.iter().map(|c| c.runs).sum();
    let simulated_requests: u64 = cells.iter().flat_map(|c| c.statuses.values()).sum();
    let per_s = |n: u64| (n as f64 / wall_s.max(1e-9)).round();
    let speed = Speed {
        runs,
        simulated_requests,
        wall_s,
        jobs,
        runs_per_s: per_s(runs),
        simulated_requests_per_s: per_s(simulated_requests),
    };
    eprintln!(
        "{runs} runs in {wall_s:.2} s on {jobs} thread(s): {:.0} runs/s, {:.0} simulated requests/s",
        speed.runs_per_s, speed.simulated_requests_per_s
    );
    speed
}

/// The shard this process runs, if `--shard` was given.
fn shard_spec(a: &ShardArgs) -> Result<Option<crate::shard::ShardSpec>, InputError> {
    a.shard
        .as_deref()
        .map(|s| {
            crate::shard::parse_spec(s, &|v| std::env::var(v).ok())
                .map_err(|m| InputError::file(Path::new("--shard"), m))
        })
        .transpose()
}

/// Write a shard file where `--out`/`--out-dir` say; say on stderr what was written.
fn write_shard(a: &ShardArgs, f: &crate::shard::ShardFile) -> Result<(), InputError> {
    let spec = f.shard.as_ref().expect("a shard");
    let json = serde_json::to_string_pretty(f).expect("serialisable");
    let runs: u64 = f.cells.iter().map(|c| c.aggregate.runs).sum();
    let target = match (&a.out, &a.out_dir) {
        (_, Some(dir)) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| InputError::file(dir, format!("cannot create: {e}")))?;
            Some(dir.join(format!("shard-{}-of-{}.json", spec.k, spec.n)))
        }
        (Some(p), None) if p.as_os_str() != "-" => Some(p.clone()),
        _ => None,
    };
    match &target {
        Some(p) => write_file(p, &json)?,
        None => println!("{json}"),
    }
    eprintln!(
        "shard {}/{} (from {}): {runs} runs{}",
        spec.k,
        spec.n,
        spec.source,
        target.map(|p| format!(", written to {}", p.display())).unwrap_or_default()
    );
    Ok(())
}

/// Load a cell's sim or model as a merge found it, checking it is still the same file.
fn reload<T>(
    id: &crate::shard::FileId,
    load: impl Fn(&str) -> Result<Arc<T>, InputError>,
) -> Result<Arc<T>, InputError> {
    let p = Path::new(&id.path);
    let path =
        if p.is_absolute() || p.exists() { p.to_path_buf() } else { catalog::root().join(p) };
    let now = std::fs::read(&path).map(|b| {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(&b))
    });
    if now.as_deref().ok() != Some(id.sha256.as_str()) {
        return Err(InputError::file(
            &path,
            "changed (or missing) since the shards ran: the merged report names this file",
        ));
    }
    load(path.to_str().unwrap_or(&id.path))
}

fn merge_cmd(args: MergeArgs) -> anyhow::Result<i32> {
    let mut paths: Vec<PathBuf> = Vec::new();
    for p in &args.files {
        if p.is_dir() {
            let mut inside: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| InputError::file(p, format!("cannot read: {e}")))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "json"))
                .collect();
            inside.sort();
            if inside.is_empty() {
                return Err(InputError::file(p, "no *.json shard file in this folder").into());
            }
            paths.extend(inside);
        } else {
            paths.push(p.clone());
        }
    }
    let mut files = Vec::new();
    for p in &paths {
        files.push(crate::shard::read(p).map_err(|m| InputError::file(p, m))?);
    }
    let merged = crate::shard::merge(files).map_err(|m| InputError::file(Path::new("merge"), m))?;
    let expect = seed_arg(args.expect_seeds.clone())?;
    let mut incomplete = Vec::new();
    for c in &merged.cells {
        if let Some(want) = &expect
            && c.seeds != format!("{}..{}", want.start, want.end)
        {
            return Err(InputError::file(
                Path::new("--expect-seeds"),
                format!("{} × {} ran seeds {}", c.model.name, c.sim.name, c.seeds),
            )
            .into());
        }
        for g in crate::shard::gaps(c) {
            incomplete.push(format!(
                "{} × {}: seeds {}..{} missing",
                c.model.name, c.sim.name, g.start, g.end
            ));
        }
        if c.aggregate.interrupted {
            incomplete.push(format!("{} × {}: a shard was interrupted", c.model.name, c.sim.name));
        }
    }
    if !incomplete.is_empty() {
        let msg = format!("incomplete: {}", incomplete.join("; "));
        if !args.allow_partial {
            return Err(InputError::file(
                Path::new("merge"),
                format!("{msg} (--allow-partial prints what is there)"),
            )
            .into());
        }
        eprintln!("{msg}");
    }
    if let Some(p) = &args.out {
        write_file(p, &serde_json::to_string_pretty(&merged).expect("serialisable"))?;
    }
    // The report of one run over the whole range, from the files the shards ran.
    let mut sims: Vec<Arc<Sim>> = Vec::new();
    let mut models: Vec<Arc<Model>> = Vec::new();
    for c in &merged.cells {
        if !sims.iter().any(|s| s.name == c.sim.name) {
            sims.push(reload(&c.sim, catalog::sim)?);
        }
        if !models.iter().any(|m| m.name == c.model.name) {
            models.push(reload(&c.model, catalog::model)?);
        }
    }
    let mut cells = Vec::new();
    for s in &sims {
        for m in &models {
            let c = merged
                .cells
                .iter()
                .find(|c| c.sim.name == s.name && c.model.name == m.name)
                .ok_or_else(|| {
                    InputError::file(Path::new("merge"), format!("no cell {} × {}", m.name, s.name))
                })?;
            let mut a = c.aggregate.clone();
            a.sim_path = catalog::display_path(&s.path);
            a.model_cli = catalog::cli_name(m);
            cells.push(a);
        }
    }
    let jobs = merged.timing.jobs.max(1);
    if let ([sim], [model], [cell]) = (sims.as_slice(), models.as_slice(), cells.as_slice()) {
        if args.json {
            println!("{}", serde_json::to_string_pretty(&render::cell_json(cell))?);
        } else {
            print!("{}", render::sweep_text(sim, model, cell, jobs));
        }
        let bad = cell.violating().next().is_some()
            || !cell.nondeterministic_seeds.is_empty()
            || cell.bounded_runs > 0
            || !cell.passed;
        return Ok(if bad { EXIT_FAILED } else { EXIT_OK });
    }
    print!("{}", matrix_output(args.json, args.markdown, &sims, &models, &cells));
    Ok(if cells.iter().all(|c| c.passed) { EXIT_OK } else { EXIT_FAILED })
}

/// A matrix as `--json`, `--markdown` or the table.
fn matrix_output(
    json: bool,
    markdown: bool,
    sims: &[Arc<Sim>],
    models: &[Arc<Model>],
    cells: &[Cell],
) -> String {
    if json {
        format!("{}\n", render::matrix_json(models, cells))
    } else if markdown {
        render::survival_markdown(sims, models, cells)
    } else {
        render::matrix_table(sims, models, cells)
    }
}

/// Write a whole file or nothing: a temporary file beside it, then renamed over it (a shard
/// killed mid-write on a shared volume leaves no truncated file).
fn write_file(path: &Path, text: &str) -> Result<(), InputError> {
    let err = |e: std::io::Error| InputError::file(path, format!("cannot write: {e}"));
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        err(e)
    })
}

fn shrink_cmd(args: ShrinkArgs) -> anyhow::Result<i32> {
    let sim = catalog::sim(&args.sim)?;
    let model = catalog::model(&args.model)?;
    if let Some(code) = not_applicable(&sim, &model) {
        return Ok(code);
    }
    let violation = match &args.violation {
        None => None,
        Some(v) => {
            Some(crate::report::ViolationKind::ALL.into_iter().find(|k| k.name() == v).ok_or_else(
                || InputError::file(Path::new("--violation"), format!("unknown violation `{v}`")),
            )?)
        }
    };
    let src = crate::input::read_file(&sim.path, "sim")?;
    let opts = crate::shrink::ShrinkOptions {
        window: args.window.clamp(1, 4096),
        budget_runs: args.budget.max(1),
        violation,
        ..Default::default()
    };
    let started = std::time::Instant::now();
    let s = match crate::shrink::shrink(&sim.path, &src, &model, args.seed, &opts) {
        Ok(s) => s,
        Err(crate::shrink::ShrinkError::NoFailure(name)) => {
            println!(
                "no seed of {name} shows a violation that is not policy-permitted under {}: nothing to shrink",
                model.name
            );
            return Ok(EXIT_OK);
        }
        Err(e) => return Err(e.into()),
    };
    eprintln!("{} runs in {:.2} s", s.runs, started.elapsed().as_secs_f64());
    println!(
        "shrunk {} under {} to a sim that shows {} on {}/{} seeds (first: seed {}):",
        sim.name,
        model.name,
        s.violation.name(),
        s.failing_in_window,
        s.window,
        s.seed
    );
    for r in &s.removed {
        println!("  - {r}");
    }
    if s.budget_spent {
        println!(
            "  (the budget of {} runs was spent before every candidate was tried)",
            opts.budget_runs
        );
    } else if s.removed.is_empty() {
        println!("  (nothing could be removed: it was minimal)");
    }
    if s.capped {
        println!("  STOPPED BY THE TIME CAP: the result may differ on another machine");
    }
    match &args.out {
        Some(p) => {
            write_file(p, &s.text)?;
            println!(
                "written to {}; replay: cargo run --release -- run {} --model {} --seed {} --trace",
                p.display(),
                p.display(),
                catalog::cli_name(&model),
                s.seed
            );
        }
        None => print!("\n{}", s.text),
    }
    Ok(EXIT_OK)
}

fn explain_cmd(args: ExplainArgs) -> anyhow::Result<i32> {
    let model = catalog::model(&args.model)?;
    let sim = args.sim.as_deref().map(catalog::sim).transpose()?;
    if let Some(s) = &sim
        && let Some(code) = not_applicable(s, &model)
    {
        return Ok(code);
    }
    let e = crate::explain::explain(&model, sim.as_ref(), args.seed)?;
    print!("{}", e.text);
    if let Some(p) = &args.html {
        write_file(p, &e.html)?;
    }
    Ok(EXIT_OK)
}

fn matrix_cmd(args: MatrixArgs) -> anyhow::Result<i32> {
    let seeds = seed_arg(args.seeds)?;
    let spec = shard_spec(&args.shard)?;
    let (sims, models) = load_matrix_inputs(&args.sims, &args.models)?;
    let jobs = args.jobs.unwrap_or_else(sweep::default_jobs);
    let started = std::time::Instant::now();
    stop_on_interrupt();
    if let Some(spec) = spec {
        let opts =
            sweep::SweepOptions { jobs, shard: Some((spec.k, spec.n)), ..Default::default() };
        let cells = sweep::run_cells(&sims, &models, seeds, &opts, |_, _| {})?;
        let timing = crate::shard::Timing { wall_s: started.elapsed().as_secs_f64(), jobs };
        let f = crate::shard::shard_file(&sims, &models, &cells, Some(spec), timing);
        write_shard(&args.shard, &f)?;
        // In shard mode a violation is a result: the engine must not retry the shard.
        return Ok(if interrupted() { EXIT_INTERRUPTED } else { EXIT_OK });
    }
    let cells = sweep::run_matrix(&sims, &models, seeds, jobs)?;
    report_speed(&cells, started, jobs);
    if interrupted() {
        eprintln!("interrupted: the tables cover only the seeds that finished");
    }
    print!("{}", matrix_output(args.json, args.markdown, &sims, &models, &cells));
    if let Some(p) = &args.html {
        write_file(p, &render::matrix_html(&sims, &models, &cells))?;
    }
    let violated = args.fail_on_violation && cells.iter().any(|c| c.violating().next().is_some());
    Ok(if interrupted() {
        EXIT_INTERRUPTED
    } else if cells.iter().all(|c| c.passed) && !violated {
        EXIT_OK
    } else {
        EXIT_FAILED
    })
}

fn sweep_cmd(args: SweepArgs) -> anyhow::Result<i32> {
    use std::io::Write;
    let seeds = seed_arg(args.seeds)?;
    let sim = catalog::sim(&args.sim)?;
    let model = catalog::model(&args.model)?;
    let na =
        if args.json { not_applicable_json(&sim, &model) } else { not_applicable(&sim, &model) };
    if let Some(code) = na {
        return Ok(code);
    }
    let range = seeds.unwrap_or_else(|| sim.seeds.clone());
    let jobs = args.jobs.unwrap_or_else(sweep::default_jobs);
    let mut file = match &args.per_seed {
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
    let spec = shard_spec(&args.shard)?;
    let opts = sweep::SweepOptions {
        jobs,
        check_determinism: args.check_determinism,
        progress: spec.is_none(),
        per_seed: args.per_seed.is_some(),
        shard: spec.as_ref().map(|s| (s.k, s.n)),
    };
    let started = std::time::Instant::now();
    stop_on_interrupt();
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
    if let Some(mut f) = file {
        // After an interrupt, the seeds that finished past a gap are still written, in order.
        for line in pending.values() {
            if let Err(e) = writeln!(f, "{line}") {
                io_err.get_or_insert(e);
            }
        }
        if let Err(e) = f.flush() {
            io_err.get_or_insert(e);
        }
    }
    if let Some(e) = io_err {
        anyhow::bail!("writing --per-seed file: {e}");
    }
    let cell = &cells[0];
    if let Some(spec) = spec {
        let timing = crate::shard::Timing { wall_s: started.elapsed().as_secs_f64(), jobs };
        let f = crate::shard::shard_file(
            std::slice::from_ref(&sim),
            std::slice::from_ref(&model),
            &cells,
            Some(spec),
            timing,
        );
        write_shard(&args.shard, &f)?;
        return Ok(if interrupted() { EXIT_INTERRUPTED } else { EXIT_OK });
    }
    let speed = report_speed(&cells, started, jobs);
    if args.json {
        let mut v = render::cell_json(cell);
        v["speed"] = serde_json::to_value(&speed)?;
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", render::sweep_text(&sim, &model, cell, jobs));
    }
    let bad = cell.violating().next().is_some()
        || !cell.nondeterministic_seeds.is_empty()
        || cell.bounded_runs > 0
        || !cell.passed;
    Ok(if interrupted() {
        EXIT_INTERRUPTED
    } else if bad {
        EXIT_FAILED
    } else {
        EXIT_OK
    })
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
        catalog::unique_names(models.iter().map(|m| catalog::model(m)).collect::<Result<_, _>>()?)?
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
        print!("{}", render::matrix_table(&sims, &ref_models, &ref_cells));
    }
    if !others.is_empty() {
        let (other_models, other_cells) = pick(&others);
        println!(
            "\nthe other models in models/ on the same cases (✓ held on every seed, ✗ failed on some):\n"
        );
        print!("{}", render::compact_table(&sims, &other_models, &other_cells));
        println!("details of one: cargo run --release -- matrix --models <name>");
    }
    Ok(EXIT_OK)
}

fn list() -> anyhow::Result<i32> {
    println!("models ({}):", catalog::display_path(&catalog::root().join("models")));
    let models = catalog::ordered_models(catalog::all_models()?);
    let width = models.iter().map(|m| m.name.chars().count()).max().unwrap_or(0);
    for m in models {
        println!("  {:<width$}  {}", m.name, m.summary);
    }
    println!("\nsims ({}):", catalog::display_path(&catalog::root().join("sims")));
    let sims = catalog::files_under(&catalog::root().join("sims"));
    let width = sims.iter().map(|p| catalog::display_path(p).chars().count()).max().unwrap_or(0);
    for p in sims {
        let s = Sim::load(&p)?;
        let mut points: Vec<String> = s.injects.iter().map(|i| format!("@{}", i.point)).collect();
        points.sort();
        points.dedup();
        let points = if points.is_empty() {
            String::new()
        } else {
            format!("  [injects at {}]", points.join(", "))
        };
        println!("  {:<width$}  {}{points}", catalog::display_path(&p), s.description);
    }
    println!(
        "\na sim that injects at a point a model lacks is n/a for that model (run and sweep exit {EXIT_NOT_APPLICABLE})"
    );
    Ok(EXIT_OK)
}

/// Say why a cell is n/a, on stdout (it is the result, not an error).
fn not_applicable(sim: &Sim, model: &Model) -> Option<i32> {
    let reason = run::not_applicable(sim, model)?;
    println!("n/a: sim {} × model {}: {reason}; nothing ran", sim.name, model.name);
    Some(EXIT_NOT_APPLICABLE)
}

/// The same, as JSON (for `--json`).
fn not_applicable_json(sim: &Sim, model: &Model) -> Option<i32> {
    let reason = run::not_applicable(sim, model)?;
    let v = serde_json::json!({
        "sim": sim.name, "model": model.name, "applicable": false, "reason": reason,
    });
    println!("{}", serde_json::to_string_pretty(&v).expect("serialisable"));
    Some(EXIT_NOT_APPLICABLE)
}

fn run_one(args: RunArgs) -> anyhow::Result<i32> {
    let sim = catalog::sim(&args.sim)?;
    let model = catalog::model(&args.model)?;
    let na =
        if args.json { not_applicable_json(&sim, &model) } else { not_applicable(&sim, &model) };
    if let Some(code) = na {
        return Ok(code);
    }
    let keep_history = args.trace || args.mermaid || args.svg.is_some() || args.html.is_some();
    let out = run::run(&sim, &model, args.seed, RunOptions { keep_history })?;
    let r = &out.report;
    if args.mermaid {
        print!("{}", out.history.as_ref().map(|h| h.mermaid()).unwrap_or_default());
    } else if args.json {
        let mut v = serde_json::to_value(r)?;
        let verdict = r.verdict();
        (v["safe"], v["as_specified"]) = (verdict.safe.into(), verdict.as_specified.into());
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let sim_path = catalog::display_path(&sim.path);
        let replay = catalog::replay_command(&sim_path, &catalog::cli_name(&model), args.seed);
        print!("{}", render::run_text(&sim, &model, &out, &replay));
    }
    if let (Some(h), Some(path)) = (&out.history, &args.svg) {
        let focus = r.violations.iter().find(|v| !v.permitted).map(|v| v.intent.as_str());
        let title = format!("{} × {} · seed {}", model.name, sim.name, args.seed);
        write_file(path, &crate::picture::svg(h, &sim, &title, focus))?;
    }
    if let (Some(h), Some(path)) = (&out.history, &args.html) {
        let sim_path = catalog::display_path(&sim.path);
        let replay = catalog::replay_command(&sim_path, &catalog::cli_name(&model), args.seed);
        write_file(path, &render::run_html(&sim, &model, &out, h, &replay))?;
    }
    let violated = args.fail_on_violation && r.violations.iter().any(|v| !v.permitted);
    Ok(if r.passed() && !violated { EXIT_OK } else { EXIT_FAILED })
}
