//! The `real` command: arguments, progress and the report's text.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::Arc;

use clap::Args;

use super::{RealOptions, RealReport, RoundOptions, Target};
use crate::model::Model;
use crate::scenario::Sim;
use crate::{catalog, sweep};

/// `idemsim real SIM --target T`.
#[derive(Args, Debug)]
pub struct RealArgs {
    /// Sim name or file path.
    pub sim: String,
    /// Target name (under targets/) or file path (docs/targets.md).
    #[arg(long)]
    pub target: String,
    /// The model to judge the rounds as (default: the target's `model`).
    #[arg(long)]
    pub model: Option<String>,
    /// Rounds to play (1 to 10 000).
    #[arg(long, default_value_t = 20)]
    pub runs: u64,
    /// Each round's wall-clock bound in ms (the sim's own time limit applies when shorter).
    #[arg(long, default_value_t = 60_000)]
    pub round_limit_ms: u64,
    /// Keep each round's folder (database, server logs, instrumentation).
    #[arg(long)]
    pub keep: bool,
    /// Ask the target for instrumentation lines (`IDEMSIM_TRACE`; kept with `--keep`).
    #[arg(long)]
    pub instrument: bool,
    /// Warm each process up with N throw-away requests before a round's traffic (default: 5
    /// when the sim says `start = "warm"`, else 0: fresh, cold processes)
    #[arg(long, value_name = "N")]
    pub warm: Option<u32>,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// The first round's number, which seeds it: rounds are SEED..SEED+runs (a failing round
    /// replays with `--seed R --runs 1`).
    #[arg(long, value_name = "SEED", default_value_t = 0)]
    pub seed: u64,
    /// Controlled rounds (docs/controlled.md): idemsim releases every request and every hook
    /// call of the server one at a time, in an order chosen from the round's seed.
    #[arg(long)]
    pub controlled: bool,
    /// With --controlled: the strategy choosing the order (random, pct, pct:d=N).
    #[arg(long, value_name = "STRATEGY", requires = "controlled")]
    pub explore: Option<String>,
    /// With --controlled: how long a released request may show nothing before it has
    /// escaped control (ms).
    #[arg(long, value_name = "MS", requires = "controlled")]
    pub quiet_ms: Option<u64>,
    /// With --controlled: play every round N more times and count those that reproduce it
    /// exactly (0 to 100).
    #[arg(long, value_name = "N", default_value_t = 0, requires = "controlled")]
    pub replays: u32,
    /// With --controlled: play this schedule (one event per line, as `--keep`'s schedule.txt
    /// and `--shrink` write it): at every decision its next event when enabled, else the flow
    /// that moved last runs on.
    #[arg(long, value_name = "FILE", requires = "controlled", conflicts_with = "explore")]
    pub schedule: Option<std::path::PathBuf>,
    /// With --controlled: shrink the first violating round's schedule to the events that must
    /// be forced for its violation (every candidate a real round, at most 400), and write it
    /// here for --schedule. A link is followed, a FIFO, device or folder is refused, a file is
    /// replaced whole.
    #[arg(long, value_name = "FILE", requires = "controlled")]
    pub shrink: Option<std::path::PathBuf>,
    /// With --controlled: show the first violating round (else the first round) as it ran,
    /// the events idemsim released merged with the server's own trace lines (implies
    /// --instrument; `interleaving.txt` in the round's folder with --keep).
    #[arg(long, requires = "controlled")]
    pub trace: bool,
}

/// A controlled round's options from the command line (None: not controlled).
fn control_options(a: &RealArgs) -> anyhow::Result<Option<super::conduct::Control>> {
    use super::conduct::{Control, DEFAULT_QUIET_MS, Order};
    if !a.controlled {
        return Ok(None);
    }
    let order = match (&a.explore, &a.schedule) {
        (Some(s), _) => Order::parse(s).map_err(|e| anyhow::anyhow!(e))?,
        (None, Some(path)) => Order::Schedule(Arc::new(super::shrink::read_schedule(path)?)),
        (None, None) => Order::Random,
    };
    if let Some(out) = &a.shrink {
        crate::outfile::destination(out)?;
    }
    let quiet_ms = a.quiet_ms.unwrap_or(DEFAULT_QUIET_MS);
    if !(1..=60_000).contains(&quiet_ms) {
        anyhow::bail!("--quiet-ms {quiet_ms}: expected 1 to 60000");
    }
    if a.replays > 100 {
        anyhow::bail!("--replays {}: expected 0 to 100", a.replays);
    }
    Ok(Some(Control {
        order,
        quiet: std::time::Duration::from_millis(quiet_ms),
        schedule_file: a.schedule.as_ref().map(|p| p.display().to_string()),
    }))
}

/// The sim, the model and the target a real command names.
pub fn load(
    sim: &str,
    model: Option<&str>,
    target: &str,
) -> anyhow::Result<(Arc<Sim>, Arc<Model>, Target)> {
    let target = super::target::find(target)?;
    let sim = catalog::sim(sim)?;
    let model = target_model(&target, model)?;
    let unmapped = super::mapping::unmapped(&target, &sim);
    if !unmapped.is_empty() {
        anyhow::bail!(
            "target `{}` maps its own API, and has no [[request]] for the sim's {} (its \
             [[request]] tables map: {})",
            target.name,
            unmapped.join(", "),
            target
                .requests
                .iter()
                .map(|m| format!("{} {}", m.sim_method, m.sim_path))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok((sim, model, target))
}

/// Whether a real command shows its per-round progress line: on a terminal, and not `silent`
/// (`--quiet`, `--json`): progress is for a person watching, as the sweeps' bars are.
pub fn shows_progress(silent: bool) -> bool {
    use std::io::IsTerminal;
    !silent && std::io::stderr().is_terminal()
}

/// Warm-up requests per process for a real round: `--warm N` when given; else a sim that
/// says `start = "warm"` gets [`DEFAULT_WARM`]; else none (cold processes).
fn warm_count(flag: Option<u32>, sim: &Sim) -> anyhow::Result<u32> {
    match flag {
        Some(n) if n > super::round::MAX_WARM => {
            anyhow::bail!("--warm {n}: expected 0 to {}", super::round::MAX_WARM)
        }
        Some(n) => Ok(n),
        None if sim.world.start == crate::scenario::Start::Warm => Ok(DEFAULT_WARM),
        None => Ok(0),
    }
}

/// Warm-up requests per process when the sim says `start = "warm"` and `--warm` is not given.
pub const DEFAULT_WARM: u32 = 5;

/// How the processes of a real round started, for headers.
fn started(warm: u32) -> String {
    match warm {
        0 => "fresh (cold) processes".to_string(),
        n => format!("processes warmed by {n} throw-away request(s) each"),
    }
}

/// How a real command ended; the command line maps it to an exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Every round held (real), or the two worlds agree (validate).
    Held,
    /// A round failed or had a violation (real), or a statistic disagrees (validate).
    Failed,
    /// Too few rounds to tell (validate).
    Inconclusive,
    /// Stopped by SIGINT.
    Interrupted,
    /// The sim does not apply to the model (it injects at a point the model lacks).
    NotApplicable,
    /// The target failed (a server died, refused, answered something that is not HTTP, never
    /// called the hook a sim's faults need): said on stderr, never scored.
    TargetFault,
}

/// Say a target's fault on stderr (escaped) and end with [`Ending::TargetFault`].
fn target_fault(target: &Target, e: &super::RealError) -> Ending {
    let msg = format!("target `{}`: {e}", target.name);
    eprintln!("error: target fault: {}", crate::text::printable_lines(&msg));
    Ending::TargetFault
}

/// Before any round: a sim real rounds cannot play is bad input (an error); one that does not
/// apply to the model ends with [`Ending::NotApplicable`], as `run` does.
fn precheck(sim: &Sim, model: &Model) -> anyhow::Result<Option<Ending>> {
    if let Some(why) = crate::run::not_applicable(sim, model) {
        eprintln!(
            "sim `{}` does not apply to model `{}`: {}",
            sim.name,
            model.name,
            crate::text::printable(&why.to_string())
        );
        return Ok(Some(Ending::NotApplicable));
    }
    if let Some(why) = super::unsupported(sim) {
        anyhow::bail!("sim `{}`: {why}", sim.name);
    }
    Ok(None)
}

/// The model a target is judged and simulated as: `model` (the command line's), else the one
/// the target names, on the target's stack when it names one.
pub fn target_model(target: &Target, model: Option<&str>) -> anyhow::Result<Arc<Model>> {
    let model_name = match (model, &target.model, &target.stack) {
        (Some(m), _, _) => m.to_string(),
        (None, Some(m), Some(stack)) => format!("{m}@{stack}"),
        (None, Some(m), None) => m.clone(),
        (None, None, _) => {
            anyhow::bail!("target `{}` names no model: say which with --model", target.name)
        }
    };
    Ok(catalog::model(&model_name)?)
}

/// Run the `real` command.
/// `quiet`: the global `--quiet` (no progress line).
pub fn real_cmd(a: RealArgs, quiet: bool) -> anyhow::Result<Ending> {
    let (sim, model, target) = load(&a.sim, a.model.as_deref(), &a.target)?;
    super::procs::end_servers_on_interrupt();
    let opts = RealOptions {
        runs: a.runs,
        round: RoundOptions {
            limit_us: a.round_limit_ms.saturating_mul(1000),
            keep: a.keep,
            trace: a.instrument || a.trace,
            warm: warm_count(a.warm, &sim)?,
            control: control_options(&a)?,
        },
        first: a.seed,
        replays: a.replays,
        shrink: a.shrink.is_some(),
    };
    let progress = shows_progress(a.json || quiet);
    let runs = a.seed.saturating_add(a.runs);
    if let Some(end) = precheck(&sim, &model)? {
        return Ok(end);
    }
    if let Some(why) =
        opts.round.control.as_ref().and_then(|_| super::conduct::uncontrollable(&sim))
    {
        anyhow::bail!("sim `{}`: {why}", sim.name);
    }
    if let Some(super::conduct::Order::Schedule(events)) =
        opts.round.control.as_ref().map(|c| &c.order)
        && let Some(why) = super::shrink::unknown_flow(events, &sim)
    {
        anyhow::bail!("{why}");
    }
    let report = match super::real(&sim, &model, &target, &opts, |line| {
        if progress {
            eprint!(
                "\rround {} of {}..{runs} · {:.1} ms · rows {}   ",
                line.round, a.seed, line.wall_ms, line.rows
            );
        }
    }) {
        Ok(r) => r,
        Err(e) => return Ok(target_fault(&target, &e)),
    };
    if progress {
        eprintln!();
    }
    if let (Some(out), Some(s)) = (&a.shrink, &report.shrunk) {
        crate::outfile::write_file(out, &super::shrink::schedule_text(s, &sim.name, &target.name))?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", real_text(&sim, &model, &target, &report));
        let shrunk =
            super::controlled_text::shrunk_lines(&sim, &target, &report, a.shrink.as_deref());
        print!("{shrunk}{}", super::controlled_text::trace_lines(&report));
    }
    Ok(if report.cell.interrupted {
        Ending::Interrupted
    } else if report.cell.passed && report.cell.violating_seeds == 0 {
        Ending::Held
    } else {
        Ending::Failed
    })
}

pub(super) fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// A histogram as `k: n` pairs.
pub fn hist(h: &std::collections::BTreeMap<u64, u64>) -> String {
    h.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join("   ")
}

/// What kind of run the report is: controlled (how) or plain, with the machine's load.
fn run_kind(target: &Target, r: &RealReport) -> String {
    match &r.controlled {
        Some(c) => format!(
            "a CONTROLLED real run: idemsim released every request{} one at a time, \
             in an order its strategy ({}) chose from the round's seed, each after the last \
             one's next event or {} ms of quiet ({} CPUs, load {:.2} before, {:.2} after)",
            if target.proxied() { ", hook call and Redis reply" } else { " and hook call" },
            c.strategy,
            c.quiet_ms,
            r.cpus,
            r.load_before[0],
            r.load_after[0]
        ),
        None => format!(
            "a REAL run, not deterministic: each round's schedule is this machine's ({} CPUs, \
             load {:.2} before, {:.2} after)",
            r.cpus, r.load_before[0], r.load_after[0]
        ),
    }
}

/// The report of a real run as text.
pub fn real_text(sim: &Sim, model: &Model, target: &Target, r: &RealReport) -> String {
    let c = &r.cell;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "idemsim real: sim {} · target {} (`{}`) judged as model {} · {}",
        sim.name,
        target.name,
        crate::text::printable(&target.command.join(" ")),
        model.name,
        c.seeds
    );
    let whose = run_kind(target, r);
    let _ = writeln!(o, "  {whose}; each round starts fresh server processes: {}", started(r.warm));
    let _ = writeln!(o, "  faults: {}", sim.faults.describe());
    if let Some(line) = c.fired_line(sim, "rounds") {
        let _ = writeln!(o, "  {line}");
    }
    if r.successes_without_id > 0 {
        let _ = writeln!(
            o,
            "  note: {} 2xx answer(s) named no row (no top-level `id`, nothing at the target's \
             [[request]] `id` pointer): the oracle cannot check them against the stored rows",
            r.successes_without_id
        );
    }
    if c.interrupted {
        let _ = writeln!(o, "  INTERRUPTED: the {} round(s) that finished", c.runs);
    }
    let runs = c.runs;
    let pct = |k: u64| {
        let (lo, hi) = sweep::wilson(k, runs);
        (100.0 * k as f64 / runs.max(1) as f64, 100.0 * lo, 100.0 * hi)
    };
    let (p, lo, hi) = pct(c.violating_seeds);
    let _ = writeln!(
        o,
        "\n{runs} rounds · rounds with a violation: {} ({p:.1}%, 95% CI {lo:.1}%–{hi:.1}%) · bounds hit: {}",
        c.violating_seeds, c.bounded_runs
    );
    for (name, v) in c.violations_in_order() {
        let (p, lo, hi) = pct(v.seeds);
        let star = if v.permitted { "*" } else { "" };
        let label = format!("{name}{star}");
        let _ = writeln!(
            o,
            "  {label:<26} {:>6} rounds {p:>6.1}%  95% CI {lo:.1}%–{hi:.1}%  first round {}",
            v.seeds, v.first_seed
        );
    }
    o.push_str(&shape_lines(r));
    o.push_str(&super::controlled_text::controlled_lines(sim, target, r));
    o.push_str(&expectations_line(c));
    o
}

/// The histograms and the rounds' wall times.
fn shape_lines(r: &RealReport) -> String {
    let (c, mut o) = (&r.cell, String::new());
    let _ = writeln!(o, "\nrows at the end     {}", hist(&c.rows));
    let _ = writeln!(o, "rows per intent     {}", hist(&c.rows_per_intent));
    let _ = writeln!(o, "effects per intent  {}", hist(&c.effects_per_intent));
    let statuses = c.statuses.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>();
    let _ = writeln!(o, "attempt outcomes    {}", statuses.join("   "));
    let mut walls: Vec<f64> = r.rounds.iter().map(|x| x.wall_ms).collect();
    walls.sort_by(f64::total_cmp);
    let _ = writeln!(
        o,
        "round wall time     p50 {:.1} ms · p90 {:.1} ms · max {:.1} ms",
        percentile(&walls, 0.5),
        percentile(&walls, 0.9),
        walls.last().copied().unwrap_or(0.0)
    );
    o
}

/// Whether the expectations held, and on the first failing round why not.
fn expectations_line(c: &crate::sweep::Cell) -> String {
    let (runs, mut o) = (c.runs, String::new());
    match c.first_failed_seed {
        None => {
            let _ = writeln!(o, "\nexpectations held on every round");
        }
        Some(first) => {
            let why: Vec<String> = c
                .first_failure
                .iter()
                .map(|k| format!("{}: expected {}, got {}", k.what, k.expected, k.actual))
                .collect();
            let _ = writeln!(
                o,
                "\nexpectations failed on {}/{runs} rounds; first round {first}: {}",
                c.failed_seeds,
                why.join("; ")
            );
        }
    }
    o
}

/// `idemsim validate SIM --target T`.
#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// Sim name or file path.
    pub sim: String,
    /// Target name (under targets/) or file path.
    #[arg(long)]
    pub target: String,
    /// The model to simulate (default: the target's `model`).
    #[arg(long)]
    pub model: Option<String>,
    /// Seeds simulated and rounds played (each; 1 to 10 000).
    #[arg(long, default_value_t = 100)]
    pub runs: u64,
    /// The largest difference in a rate that "agree" may leave unseen (0.01 to 1).
    #[arg(long, default_value_t = 0.15)]
    pub tolerance: f64,
    /// Each round's wall-clock bound in ms.
    #[arg(long, default_value_t = 60_000)]
    pub round_limit_ms: u64,
    /// Warm each real process up with N throw-away requests, and simulate processes that
    /// start warm (default: 5 when the sim says `start = "warm"`, else 0: both cold)
    #[arg(long, value_name = "N")]
    pub warm: Option<u32>,
    /// Measure the target's stack on this machine first (`idemsim calibrate`'s rounds) and
    /// simulate the model on it, not on the stack it names (an event-loop stack only).
    #[arg(long)]
    pub calibrate: bool,
    /// With --calibrate: its measuring rounds (2 to 10 000; a fifth as many more, 10 to 200,
    /// measure the cold code).
    #[arg(long, value_name = "N", default_value_t = 30, requires = "calibrate")]
    pub calibrate_rounds: u64,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Run the `validate` command.
/// `quiet`: the global `--quiet` (no progress line).
pub fn validate_cmd(a: ValidateArgs, quiet: bool) -> anyhow::Result<Ending> {
    if !(0.01..=1.0).contains(&a.tolerance) {
        anyhow::bail!("--tolerance {}: expected a difference in rate from 0.01 to 1", a.tolerance);
    }
    let (sim, model, target) = load(&a.sim, a.model.as_deref(), &a.target)?;
    if let Some(end) = precheck(&sim, &model)? {
        return Ok(end);
    }
    super::procs::end_servers_on_interrupt();
    let calibrate = a.calibrate.then_some(a.calibrate_rounds);
    let (model, profile) =
        super::measure::calibrated(&target, (model, a.model.as_deref()), calibrate)?;
    let warm = warm_count(a.warm, &sim)?;
    // Both sides start the same way (real processes warmed up, simulated ones started warm;
    // `--warm 0` on a warm sim plays and simulates fresh processes), and every message goes
    // over loopback, as the real rounds' do.
    use crate::scenario::Start;
    let start = if warm > 0 { Start::Warm } else { Start::Cold };
    let (sim, played) = super::validate::as_played(sim, start);
    let runs = a.runs.clamp(1, super::MAX_RUNS);
    // The simulated side is judged by a real round's rule, so that an intent nobody answered
    // has one name on both sides.
    let sweep = sweep::SweepOptions {
        jobs: sweep::default_jobs(),
        judging: sweep::Judging::AsReal,
        ..Default::default()
    };
    let sims = std::slice::from_ref(&sim);
    let simulated =
        sweep::run_cells(sims, std::slice::from_ref(&model), Some(0..runs), &sweep, |_, _| {})?
            .remove(0);
    let round = RoundOptions::plain(a.round_limit_ms.saturating_mul(1000), false, warm);
    let opts = RealOptions::plain(runs, round);
    let progress = shows_progress(a.json || quiet);
    let real = match super::real(&sim, &model, &target, &opts, |line| {
        if progress {
            eprint!("\rround {} of 0..{runs} · rows {}   ", line.round, line.rows);
        }
    }) {
        Ok(r) => r,
        Err(e) => return Ok(target_fault(&target, &e)),
    };
    if progress {
        eprintln!();
    }
    let violated: Vec<bool> = real.rounds.iter().map(|r| !r.violations.is_empty()).collect();
    let v = super::validate::compare(&simulated, &real.cell, a.tolerance, unobserved(&target))
        .with_drift(super::validate::drift(&violated));
    let played = super::validate::AsPlayed { calibrated: profile, ..played };
    let sides = (&simulated, &real, runs);
    let out = match a.json {
        true => serde_json::to_string_pretty(&validate_json(
            (&sim, &model, &target),
            sides,
            (&played, &v),
        ))?,
        false => {
            validate_header((&sim, &model, &target), sides, &played)
                + "\n"
                + &super::validate::text(&v)
        }
    };
    let _ = writeln!(std::io::stdout(), "{}", out.trim_end());
    Ok(match v.verdict {
        _ if real.cell.interrupted => Ending::Interrupted,
        crate::agree::Verdict::Agree => Ending::Held,
        crate::agree::Verdict::Disagree => Ending::Failed,
        crate::agree::Verdict::Inconclusive => Ending::Inconclusive,
    })
}

/// `validate --json` (schemas/validate.v1.schema.json).
fn validate_json(
    (sim, model, target): (&Sim, &Model, &Target),
    (simulated, real, runs): (&crate::sweep::Cell, &RealReport, u64),
    (played, v): (&super::validate::AsPlayed, &super::validate::Validation),
) -> serde_json::Value {
    serde_json::json!({
        "format": "idemsim-validate",
        "version": 1,
        "kind": "validation",
        "sim": sim.name,
        "model": model.name,
        "target": target.name,
        "runs": runs,
        "simulated": simulated,
        "real": real,
        "validation": v,
        "as_played": played.json(),
    })
}

/// What `target` cannot show of a run: key records, without a keys query.
fn unobserved(target: &Target) -> &'static [&'static str] {
    if target.keys_sql.is_none() { super::validate::FROM_KEY_RECORDS } else { &[] }
}

fn validate_header(
    (sim, model, target): (&Sim, &Model, &Target),
    (simulated, real, runs): (&crate::sweep::Cell, &RealReport, u64),
    played: &super::validate::AsPlayed,
) -> String {
    let mut o = format!(
        "idemsim validate: sim {} · model {} simulated on seeds 0..{runs} (processes start {}) · target {} played for real, {} rounds, each on {} ({} CPUs, load {:.2} → {:.2})\n",
        sim.name,
        model.name,
        sim.world.start.name(),
        target.name,
        real.cell.runs,
        started(real.warm),
        real.cpus,
        real.load_before[0],
        real.load_after[0]
    );
    if let Some(line) = played.text() {
        o.push_str(&format!("  {line}\n"));
    }
    let unfinished = crate::report::ViolationKind::UnfinishedIntent.name();
    if [simulated, &real.cell].iter().any(|c| c.violations.contains_key(unfinished)) {
        o.push_str(&format!(
            "  both sides judged as a real round is: an intent none of whose attempts was answered is {unfinished} (a real round cannot tell the client's timeout from a server that never answers)\n"
        ));
    }
    for (world, c, unit) in [("simulated", simulated, "runs"), ("real", &real.cell, "rounds")] {
        if let Some(line) = c.fired_line(sim, unit) {
            o.push_str(&format!("  {world}: {line}\n"));
        }
    }
    o
}
