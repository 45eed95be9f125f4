//! Measuring a target's stack on the machine at hand: the `calibrate` command, and the
//! profile `validate --calibrate` simulates on (docs/reality.md, "Your own machine").

use std::sync::Arc;

use clap::Args;

use super::cmd::Ending;
use super::{RealOptions, RoundOptions, Target};
use crate::catalog;
use crate::model::{Model, Runtime, Stack};
use crate::scenario::Sim;

/// `idemsim calibrate --target T`.
#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// Target name (under targets/) or file path; it must write instrumentation lines.
    #[arg(long)]
    pub target: String,
    /// The burst to measure with (a sim name or path).
    #[arg(long, default_value = CALIBRATE_SIM)]
    pub sim: String,
    /// Rounds to play (2 to 10 000).
    #[arg(long, default_value_t = 30)]
    pub rounds: u64,
    /// Write the profile to this file (a link is followed; a FIFO, device or folder is refused;
    /// `-` or none: stdout).
    #[arg(short, long)]
    pub out: Option<std::path::PathBuf>,
}

/// A date and time in UTC from seconds since the Unix epoch (`2026-12-01 17:01 UTC`).
pub fn utc(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02} UTC", rem / 3600, rem % 3600 / 60)
}

/// The CPU's model name, from /proc/cpuinfo.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "an unknown CPU".into())
}

/// `n` instrumented rounds of `sim` against `target`, each process warmed up by `warm`
/// requests (`label` on the progress line): the report (its machine and load), and what `read`
/// takes from each round's folder, which is removed once read.
fn kept_rounds<T>(
    (sim, model, target): (&Arc<Sim>, &Arc<Model>, &Target),
    (n, warm, label): (u64, u32, &str),
    mut read: impl FnMut(&std::path::Path) -> Result<T, String>,
) -> anyhow::Result<(super::RealReport, Vec<T>)> {
    let round = RoundOptions::plain(60_000_000, true, warm);
    let report = super::real(sim, model, target, &RealOptions::plain(n, round), |line| {
        eprint!("\r{label}: round {} of {n}   ", line.round + 1);
    })
    .map_err(|e| anyhow::anyhow!("target `{}`: {e}", target.name))?;
    eprintln!();
    let mut out = Vec::new();
    for r in &report.rounds {
        let Some(dir) = &r.dir else { continue };
        let got = read(std::path::Path::new(dir));
        let _ = std::fs::remove_dir_all(dir);
        out.push(got.map_err(|e| anyhow::anyhow!("target `{}`: {e}", target.name))?);
    }
    Ok((report, out))
}

/// The cold code's rounds of `calibrate`: a fifth as many as its measuring rounds (10 to
/// 200), each warming its fresh processes up with [`super::calibrate::WARMUPS`] requests, whose
/// steps are what is measured.
fn cold_steps(
    sim: &Arc<Sim>,
    model: &Arc<Model>,
    target: &Target,
    rounds: u64,
) -> anyhow::Result<super::calibrate::ColdSteps> {
    let n = (rounds / 5).clamp(10, 200);
    let mut cold = super::calibrate::ColdSteps::default();
    let warm = super::calibrate::WARMUPS;
    kept_rounds((sim, model, target), (n, warm, "cold code"), |dir| {
        cold.add(&dir.join("trace.jsonl"))
    })?;
    Ok(cold)
}

/// The wake rounds of `calibrate`: as many as its measuring rounds (20 to 400) of
/// [`WAKE_SIM`] (two clients connecting at once to a fresh process), each process's first two
/// clients' [`super::calibrate::whom_woken`].
fn wakes(
    model: &Arc<Model>,
    target: &Target,
    rounds: u64,
) -> anyhow::Result<Vec<super::calibrate::Woken>> {
    let sim = catalog::sim(WAKE_SIM)?;
    let n = rounds.clamp(20, 400);
    let (_, per_round) = kept_rounds((&sim, model, target), (n, 0, "wakes"), |dir| {
        super::calibrate::whom_woken(dir)
    })?;
    Ok(per_round.into_iter().flatten().collect())
}

/// The sim whose rounds measure whom a woken server preempts: two copies of one request,
/// connecting at once.
pub const WAKE_SIM: &str = "check-first-race";

/// Run the `calibrate` command.
pub fn calibrate_cmd(a: CalibrateArgs) -> anyhow::Result<Ending> {
    let target = super::target::find(&a.target)?;
    // Checked before the servers start: a FIFO, device or folder is refused, `-` is stdout.
    if let Some(out) = &a.out {
        crate::outfile::destination(out)?;
    }
    super::procs::end_servers_on_interrupt();
    let text = measure(&target, None, &a.sim, a.rounds)?;
    match &a.out {
        Some(out) => {
            crate::outfile::write_file(out, &text)?;
            if out.as_os_str() != "-" {
                eprintln!("wrote {}", crate::text::printable(&out.display().to_string()));
            }
        }
        None => print!("{text}"),
    }
    Ok(Ending::Held)
}

/// The model `target` is simulated as (`model`, else its own, on its stack), and the stack it
/// runs on, which what calibrate cannot measure is taken from; an error unless that runtime is
/// an event loop (what calibrate's lines measure).
pub fn base_stack(target: &Target, model: Option<&str>) -> anyhow::Result<(Arc<Model>, Stack)> {
    // A target that names no model is measured as check-first (the rounds are only judged).
    let fallback = match (&target.model, &target.stack) {
        (Some(_), _) => None,
        (None, Some(stack)) => Some(format!("check-first@{stack}")),
        (None, None) => Some("check-first".to_string()),
    };
    let model = super::cmd::target_model(target, model.or(fallback.as_deref()))?;
    let stack = Stack {
        name: model.on_stack.clone().unwrap_or_else(|| model.stack.clone()),
        runtime: model.runtime,
        driver: model.driver.clone(),
    };
    if !matches!(stack.runtime, Runtime::EventLoop(_)) {
        anyhow::bail!(
            "target `{}` runs on stack `{}` ({}): calibrate measures an event loop's times \
             (accept-only iterations, a read to its lookup), which a thread per request does \
             not have; that stack is measured from its trace lines by hand \
             (targets/python/trace_stats.py, the stack file's header)",
            target.name,
            stack.name,
            stack.runtime.describe()
        );
    }
    Ok((model, stack))
}

/// Measure `target`'s stack on this machine: `rounds` rounds of `sim` (a burst) with its
/// instrumentation, and a fifth as many warmed up for its cold code; the profile's text, with
/// its provenance, what the lines do not measure taken from the target's own stack.
pub fn measure(
    target: &Target,
    model: Option<&str>,
    sim: &str,
    rounds: u64,
) -> anyhow::Result<String> {
    let (model, base) = base_stack(target, model)?;
    let Runtime::EventLoop(times) = &base.runtime else { unreachable!("base_stack checks it") };
    let sim = catalog::sim(sim)?;
    let rounds = rounds.clamp(2, super::MAX_RUNS);
    let (report, times_of) =
        kept_rounds((&sim, &model, target), (rounds, 0, "calibrate"), |dir| {
            super::calibrate::round_times(dir)
        })?;
    let cold = cold_steps(&sim, &model, target, rounds)?;
    let wakes = wakes(&model, target, rounds)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let provenance = format!(
        "Measured by `idemsim calibrate --target {} --sim {} --rounds {rounds}` on {} ({} CPUs),\n\
         load {:.2} before and {:.2} after, {}. Name it from a model:\n\
         stack = \"<path of this file, relative to the model file>\"",
        target.name,
        sim.name,
        cpu_model(),
        report.cpus,
        report.load_before[0],
        report.load_after[0],
        utc(now)
    );
    Ok(super::calibrate::profile((&times_of, &wakes), &cold, (&base, times), &provenance))
}

/// `validate --calibrate`: with `rounds`, `model` (validate's, and as the command line named
/// it) on the stack measured now on this machine against `target` ([`measure`], `rounds`
/// rounds of calibrate's default burst), and the profile's text; without, `model` as it is.
pub fn calibrated(
    target: &Target,
    (model, named): (Arc<Model>, Option<&str>),
    rounds: Option<u64>,
) -> anyhow::Result<(Arc<Model>, Option<String>)> {
    let Some(rounds) = rounds else { return Ok((model, None)) };
    let text = measure(target, named, CALIBRATE_SIM, rounds)?;
    let stack = crate::model::stack_from_text(CALIBRATED, &text)?;
    Ok((Arc::new(model.on_stack(CALIBRATED, stack)?), Some(text)))
}

/// The burst calibrate measures with unless told (`--sim`).
pub const CALIBRATE_SIM: &str = "11-twenty-concurrent-one-process";

/// The stack's name in a model validated on the stack measured now (`check-first@calibrated`).
pub const CALIBRATED: &str = "calibrated";
