//! The `idemsim` command line: parse → load and check inputs → run → print. Exit codes (the
//! one place they are defined): 0 all held (and the bare demo, once printed); 1 an expectation
//! failed (`run`, `matrix`, `sweep`), or, for `sweep` only, a violation that is not
//! policy-permitted, a nondeterministic seed or a bound was found; 2 bad input or usage.
//!
//! This file parses and dispatches; each command's body is in `cli/` (one file per command,
//! `out.rs` for what they share), and what `merge` accepts and fails is the shard code's
//! ([`crate::shard::policy`]).

use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};

use crate::input::{InputError, parse_seeds};

mod compare;
mod complete;
mod explain;
mod explored;
mod gate;
mod lesson;
mod list;
mod matrix;
mod merge;
mod out;
mod progress;
mod run;
mod shrink;
mod sweep;

/// Every expectation held.
pub const EXIT_OK: i32 = 0;
/// An expectation failed, a bound was hit, or (sweep) a violation was found.
pub const EXIT_FAILED: i32 = 1;
/// Bad input or usage.
pub const EXIT_INPUT: i32 = 2;
/// `run` or `sweep` of a sim that does not apply to the model (it injects at a point the
/// model lacks): nothing ran, nothing failed.
pub const EXIT_NOT_APPLICABLE: i32 = 3;
/// A sweep or matrix stopped by SIGINT, after printing what it had done (128 + SIGINT).
pub const EXIT_INTERRUPTED: i32 = 130;

/// `--jobs`: 1 to [`crate::sweep::MAX_JOBS`].
fn parse_jobs(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=crate::sweep::MAX_JOBS).contains(&n) => Ok(n),
        _ => Err(format!("expected a number of threads from 1 to {}", crate::sweep::MAX_JOBS)),
    }
}

/// `--explore`: a strategy ([`crate::explore::Strategy::parse`]; the error lists them).
fn parse_explore(s: &str) -> Result<crate::explore::Strategy, String> {
    crate::explore::Strategy::parse(s)
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
                  --sim: it injects at a point the model lacks); 130 interrupted.\nModels and sims are given as \
                  file paths or by name: looked up in the project's folders (idemsim.toml, or \
                  models/ and sims/ here), then in the models and sims shipped in the binary; \
                  --models-dir and --sims-dir add folders searched first."
)]
// clap turns a doc comment into help text: these types' help is their attributes'.
#[allow(missing_docs)]
pub struct Cli {
    /// Quiet: no progress bar and no informational lines on stderr (the speed line, `written
    /// to FILE (N bytes)`, a shard's summary). The report, errors, warnings that qualify a
    /// result (an interrupt, a partial merge) and the exit code stay.
    #[arg(short = 'q', long, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The project whose models and sims names refer to: a folder, or its idemsim.toml
    /// (default: the nearest idemsim.toml upward from here, else this folder if it has
    /// models/ and sims/; the shipped models and sims come after the project's).
    #[arg(long, global = true, value_name = "PATH")]
    pub project: Option<PathBuf>,
    /// A folder of model files to look names up in before the project's and the shipped ones
    /// (repeatable; no idemsim.toml needed). Not matrix's --models, which picks the models.
    #[arg(long = "models-dir", global = true, value_name = "DIR")]
    pub models_dir: Vec<PathBuf>,
    /// A folder of sim files to look names up in first, as --models-dir (repeatable).
    #[arg(long = "sims-dir", global = true, value_name = "DIR")]
    pub sims_dir: Vec<PathBuf>,
}

#[derive(Subcommand, Debug)]
// clap turns a doc comment into help text: these types' help is their attributes'.
#[allow(missing_docs)]
pub enum Command {
    /// List the models and sims found.
    List(list::ListArgs),
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
    /// A page a class steps through: the run on one time axis (a lane per client copy,
    /// process and dependency), the race window, the violating step, the tables after each
    /// step, explain's narrative, and the same schedule under the fix (default: the teaching
    /// race, its first violating seed, transactional beside it).
    Lesson(lesson::LessonArgs),
    /// Play a sim's client side for real against real server processes (a target in
    /// targets/, docs/targets.md), judged like a simulated run. Not deterministic.
    Real(crate::real::cmd::RealArgs),
    /// The sim simulated over N seeds and played for real against a target over N rounds,
    /// side by side: rates and histograms with intervals and a verdict per statistic
    /// (exit 0 agree, 1 disagree, 4 inconclusive).
    Validate(crate::real::cmd::ValidateArgs),
    /// Measure a real target's event loop and commits on this machine (from its
    /// instrumentation) and write a stack profile a model names (`stack = "FILE"`).
    Calibrate(crate::real::measure::CalibrateArgs),
    /// Two designs over the same sims and seeds: per sim, whether their unsafe and failed
    /// rates differ significantly (Fisher's exact test) and, if not, how many seeds would tell.
    Compare(compare::CompareArgs),
    /// Print shell completions (bash, zsh, fish, elvish, powershell) on stdout.
    Completions(complete::CompletionsArgs),
    /// Print the man page (or write one per command with --dir).
    Man(complete::ManArgs),
}

#[derive(Args, Debug)]
// clap turns a doc comment into help text: these types' help is their attributes'.
#[allow(missing_docs)]
pub struct ShrinkArgs {
    /// Sim name or file path.
    sim: String,
    /// Model name or file path.
    #[arg(long)]
    model: String,
    /// Start from this seed (default: the first failing seed of the sim's range).
    #[arg(long)]
    seed: Option<u64>,
    /// Write the minimal sim here (default: print it). An output file: `-` is stdout, a link
    /// is followed, a FIFO, device or folder is refused, a file is replaced whole.
    #[arg(short = 'o', long = "out")]
    out: Option<PathBuf>,
    /// Runs in all, never exceeded: the first search, every candidate and the final check of the window (at least window + 1; the result is the same on every machine).
    #[arg(long, default_value_t = 50_000)]
    budget: u64,
    /// Seeds searched per candidate (1 to 4096).
    #[arg(long, default_value_t = 32)]
    window: u64,
    /// Keep this violation (default: the first one found that is not policy-permitted, else
    /// the first failed expectation); the same as --target violation:NAME.
    #[arg(long, conflicts_with = "target")]
    violation: Option<String>,
    /// Keep failing this: `violation:NAME` (an oracle violation) or `expect:KIND` (a failed
    /// expectation of that kind: status, rows, same-id …). Default: the first violation found
    /// that is not policy-permitted, else the first failed expectation.
    #[arg(long)]
    target: Option<String>,
    /// Explore every run of the shrink with this strategy (`edges`, `pct`, `pct:d=N`, or one
    /// exhaustive schedule `exhaustive@CHOICES`), as the run to shrink was found; the minimal
    /// sim's replay command names it. See docs/hunt.md.
    #[arg(long, value_name = "STRATEGY", value_parser = parse_explore)]
    explore: Option<crate::explore::Strategy>,
}

#[derive(Args, Debug)]
// clap turns a doc comment into help text: these types' help is their attributes'.
#[allow(missing_docs)]
pub struct ExplainArgs {
    /// Model name or file path.
    model: String,
    /// Sim name or file path (default: search the shipped sims, teaching ones first).
    #[arg(long)]
    sim: Option<String>,
    #[arg(long)]
    seed: Option<u64>,
    /// Also write the explanation as a self-contained HTML page (`-`: stdout, and the text goes
    /// to stderr; a link is followed; a FIFO, device or folder is refused).
    #[arg(long)]
    html: Option<PathBuf>,
    /// Follow this: `violation:NAME` or `expect:KIND` (default: the first violation that is
    /// not policy-permitted, else the first failed expectation).
    #[arg(long)]
    target: Option<String>,
    /// Compare with only these models on the minimal scenario (default: every model).
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    others: Option<Vec<String>>,
    /// Print the explanation as JSON (`"format": "idemsim-explain"`, version 1) instead of
    /// text.
    #[arg(long)]
    json: bool,
    /// Write the explanation (text, or JSON with --json) to this file instead of stdout
    /// (`-`: stdout), then say `written to FILE (N bytes)` on stderr.
    #[arg(short = 'o', long, value_name = "FILE")]
    out: Option<std::path::PathBuf>,
    /// Explain an explored run (`edges`, `pct`, `pct:d=N`, `exhaustive@CHOICES`): the search,
    /// the shrink, the other models and the contrast all run under this strategy, and every
    /// command printed names it. See docs/hunt.md.
    #[arg(long, value_name = "STRATEGY", value_parser = parse_explore)]
    explore: Option<crate::explore::Strategy>,
}

#[derive(Args, Debug)]
// clap turns a doc comment into help text: these types' help is their attributes'.
#[allow(missing_docs)]
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
    /// Write the report (text, JSON or Mermaid) to this file instead of stdout (`-`: stdout),
    /// then say `written to FILE (N bytes)` on stderr. A link is followed; a FIFO, a device or
    /// a folder is refused (exit 2); a file is replaced whole.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    out: Option<PathBuf>,
    /// Write the run as a standalone SVG space-time diagram (the report stays as it is: the
    /// trace only with --trace). `-`: to stdout, and the report goes to stderr; only one of
    /// -o, --svg and --html can be `-`. Files as for -o.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Write the run as a self-contained HTML page (diagram, verdict, trace); `-` and files as
    /// for --svg.
    #[arg(long)]
    html: Option<PathBuf>,
    /// Exit 1 when the oracle names a violation that is not policy-permitted, even if every
    /// expectation held (for CI jobs that gate on violations); the report then ends with a
    /// `FAIL (--fail-on-violation)` line naming them.
    #[arg(long = "fail-on-violation")]
    fail_on_violation: bool,
    /// Explore instead of drawing the calibrated schedule (named in the report and its
    /// replay): `edges` (timing draws at their range's ends), `swarm` (edges with a random
    /// subset of the fault kinds on), `pct` or `pct:d=N`
    /// (probabilistic concurrency testing, depth N), `exhaustive@CHOICES` (one exhaustive
    /// schedule, as a sweep prints it). See docs/hunt.md.
    #[arg(long, value_name = "STRATEGY", value_parser = parse_explore)]
    explore: Option<crate::explore::Strategy>,
}

#[derive(Args, Debug)]
// clap turns a doc comment into help text: these types' help is their attributes'.
#[allow(missing_docs)]
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
    /// Write one JSON line per seed to this file (in seed order) as they finish; `-`: to
    /// stdout, and the report goes to stderr.
    #[arg(long = "per-seed")]
    per_seed: Option<PathBuf>,
    /// Run each seed twice and fail on any trace difference.
    #[arg(long = "check-determinism")]
    check_determinism: bool,
    /// Print the aggregate as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    gate: gate::GateArgs,
    #[command(flatten)]
    shard: ShardArgs,
    /// Explore to find a violation rather than measure its rate: `edges`, `swarm`, `pct`, `pct:d=N`
    /// (each seed of the range explored, with the runs until each violation was first seen),
    /// or `exhaustive`, `exhaustive:BOUND` (every combination of the world's decisions on the
    /// range's first seed, depth first, up to BOUND schedules, default 10000). Named in the
    /// report and in every replay command. See docs/hunt.md.
    #[arg(long, value_name = "STRATEGY", value_parser = parse_explore, conflicts_with = "shard")]
    explore: Option<crate::explore::Strategy>,
    /// Count, per seed, the dangerous moments the runs reached (a lookup missed in another
    /// execution's window, a retry while its original ran, a crash between an effect and its
    /// commit …) and print which moments the model and the sim make possible and were never
    /// reached (JSON: a `coverage` object per cell). See docs/coverage-moments.md.
    #[arg(long)]
    coverage: bool,
}

/// Running one shard of a sweep or matrix on a batch engine.
#[derive(Args, Debug)]
pub struct ShardArgs {
    /// Run shard K of N (K/N, 0-based), or `auto`/`auto/N`: the index from the engine's
    /// variables (JOB_COMPLETION_INDEX, SLURM_ARRAY_TASK_ID, AWS_BATCH_JOB_ARRAY_INDEX,
    /// CI_NODE_INDEX). Writes a shard file for `idemsim merge`; exits 0 once it is written, violations or not (2: bad input, 3: the sim does not apply to the model; neither is worth a retry).
    #[arg(long)]
    shard: Option<String>,
    /// Write the report to this file instead of stdout (`-`: stdout), then say `written to
    /// FILE (N bytes)` on stderr. With --shard the report is the shard file (default:
    /// stdout). A link is followed; a FIFO, a device or a folder is refused (exit 2).
    #[arg(short = 'o', long, value_name = "FILE", conflicts_with = "out_dir")]
    out: Option<PathBuf>,
    /// Write the shard file into this folder as shard-K-of-N.json.
    #[arg(long = "out-dir", requires = "shard")]
    out_dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
// clap turns a doc comment into help text: these types' help is their attributes'.
#[allow(missing_docs)]
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
    /// Also write the merged shard file (for merges of merges), once every check passed; `-`
    /// writes it to stdout and the report to stderr. As with `--shard --out`, in the shard
    /// workflow --out is the shard file; the report goes to stdout, or to --report FILE.
    #[arg(short = 'o', long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Write the report (text, JSON or Markdown) to this file instead of stdout (`-`: stdout),
    /// then say `written to FILE (N bytes)` on stderr; files as for --out.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Print the merged cell (one cell) or `cells` and `totals` (a matrix) as JSON.
    #[arg(long)]
    json: bool,
    /// Print the survival table as Markdown (a matrix).
    #[arg(long, conflicts_with = "json")]
    markdown: bool,
    #[command(flatten)]
    gate: gate::GateArgs,
}

#[derive(Args, Debug)]
// clap turns a doc comment into help text: these types' help is their attributes'.
#[allow(missing_docs)]
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
    #[command(flatten)]
    gate: gate::GateArgs,
    /// Also write the survival table as a self-contained HTML page, with the first failing
    /// seed's diagram of every failing cell (a link is followed; a FIFO, device or folder is
    /// refused).
    #[arg(long)]
    html: Option<PathBuf>,
    #[command(flatten)]
    shard: ShardArgs,
    /// Hunt instead of measuring rates: every cell explored with this strategy (`edges`,
    /// `pct`, `pct:d=N` on each seed of its range; `exhaustive`, `exhaustive:BOUND` on its
    /// first seed), reported as the violations found and the runs until each was first seen,
    /// with a replay per cell. With --fail-on-violation, a bounded hunt for CI. See
    /// docs/hunt.md.
    #[arg(long, value_name = "STRATEGY", value_parser = parse_explore,
          conflicts_with_all = ["shard", "markdown", "html"])]
    explore: Option<crate::explore::Strategy>,
    /// Count, per seed, the dangerous moments the runs reached (a lookup missed in another
    /// execution's window, a retry while its original ran, a crash between an effect and its
    /// commit …) and print which moments the model and the sim make possible and were never
    /// reached (JSON: a `coverage` object per cell). See docs/coverage-moments.md.
    #[arg(long)]
    coverage: bool,
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
    let argv0 = std::env::args_os().next().map(|a| a.to_string_lossy().into_owned());
    if let Some(prefix) = crate::catalog::invoked_as(argv0.as_deref(), &|v| std::env::var(v).ok()) {
        let _ = crate::catalog::INVOKED.set(prefix);
    }
    if let Some(p) = &cli.project {
        let _ = crate::catalog::PROJECT.set(p.clone());
    }
    let _ = crate::catalog::ROOTS.set((cli.models_dir.clone(), cli.sims_dir.clone()));
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            // Errors quote what users and servers wrote (file text, SQLite's messages, a
            // server's stderr): escaped, so none can drive the terminal.
            eprintln!("error: {}", crate::text::printable_lines(&format!("{e:#}")));
            EXIT_INPUT
        }
    }
}

fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    out::set_quiet(cli.quiet);
    match cli.command {
        None => matrix::demo(),
        Some(Command::List(args)) => list::list(args),
        Some(Command::Run(args)) => run::run_one(args),
        Some(Command::Sweep(args)) => sweep::sweep_cmd(args),
        Some(Command::Matrix(args)) => matrix::matrix_cmd(args),
        Some(Command::Shrink(args)) => shrink::shrink_cmd(args),
        Some(Command::Merge(args)) => merge::merge_cmd(args),
        Some(Command::Explain(args)) => explain::explain_cmd(args),
        Some(Command::Lesson(args)) => lesson::lesson_cmd(args),
        Some(Command::Compare(args)) => compare::compare_cmd(args),
        Some(Command::Completions(args)) => complete::completions(args),
        Some(Command::Man(args)) => complete::man(args),
        Some(Command::Real(args)) => crate::real::cmd::real_cmd(args, out::quiet()).map(real_exit),
        Some(Command::Validate(args)) => {
            crate::real::cmd::validate_cmd(args, out::quiet()).map(real_exit)
        }
        Some(Command::Calibrate(args)) => crate::real::measure::calibrate_cmd(args).map(real_exit),
    }
}

/// Exit code of `validate` when the rounds were too few to tell.
pub const EXIT_INCONCLUSIVE: i32 = 4;

/// Exit code of `real` and `validate` when the target failed (a server died or refused,
/// answered something that is not HTTP, never reached a point where the sim arms a fault): never
/// scored as a finding about the design.
pub const EXIT_TARGET_FAULT: i32 = 5;

fn real_exit(e: crate::real::cmd::Ending) -> i32 {
    use crate::real::cmd::Ending;
    match e {
        Ending::Held => EXIT_OK,
        Ending::Failed => EXIT_FAILED,
        Ending::Inconclusive => EXIT_INCONCLUSIVE,
        Ending::Interrupted => EXIT_INTERRUPTED,
        Ending::NotApplicable => EXIT_NOT_APPLICABLE,
        Ending::TargetFault => EXIT_TARGET_FAULT,
    }
}

fn seed_arg(seeds: Option<String>) -> Result<Option<std::ops::Range<u64>>, InputError> {
    seeds
        .map(|s| parse_seeds(&s).map_err(|m| InputError::file(Path::new("--seeds"), m)))
        .transpose()
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
