//! `idemsim sweep`: one sim × one model over many seeds, with per-seed lines in seed order
//! (`--per-seed -`: on stdout, and the report on stderr), or one shard of it.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::Path;

use super::out::{
    emit_report, interrupted, not_applicable_as, report_speed, stdout_taken, stop_on_interrupt,
    write_shard,
};
use super::{EXIT_INTERRUPTED, EXIT_OK, SweepArgs, seed_arg, shard_spec};
use crate::explore::Strategy;
use crate::input::InputError;
use crate::model::Model;
use crate::scenario::Sim;
use crate::{catalog, render, sweep};
use std::sync::Arc;

pub(super) fn sweep_cmd(args: SweepArgs) -> anyhow::Result<i32> {
    let seeds = seed_arg(args.seeds.clone())?;
    let sim = catalog::sim(&args.sim)?;
    let model = catalog::model(&args.model)?;
    let to_stderr = args.per_seed.as_deref().is_some_and(|p| p.as_os_str() == "-");
    // `--out` (the report, or with --shard the shard file, stdout by default) and
    // `--per-seed -` cannot both have stdout. A per-seed file is a stream (a FIFO is fine).
    let out = args.shard.out.as_deref();
    let out = match (args.shard.shard.is_some(), args.shard.out_dir.is_some()) {
        (true, true) => None,
        (true, false) => out.or(Some(Path::new("-"))),
        (false, _) => out,
    };
    stdout_taken(&[
        ("--per-seed", args.per_seed.as_deref().filter(|_| to_stderr)),
        ("--out", out),
    ])?;
    check_explore(args.explore.as_ref(), "sweep", &args.gate)?;
    args.gate.preflight()?;
    if let Some(code) = not_applicable_as(args.json.then_some("sweep"), to_stderr, &sim, &model) {
        return Ok(code);
    }
    let range = seeds.unwrap_or_else(|| sim.seeds.clone());
    let jobs = args.jobs.unwrap_or_else(sweep::default_jobs);
    if let Some(Strategy::Exhaustive { bound, depth, .. }) = &args.explore {
        if args.per_seed.is_some() || args.check_determinism || args.coverage {
            anyhow::bail!(
                "--explore exhaustive takes neither --per-seed, --check-determinism nor --coverage"
            );
        }
        return exhaustive(&args, &sim, &model, range.start, (*bound, *depth));
    }
    let mut per_seed = PerSeed::create(args.per_seed.as_deref(), range.start)?;
    per_seed.explore = args.explore.as_ref().map(|s| serde_json::json!(s.to_string()).to_string());
    let spec = shard_spec(&args.shard)?;
    let bar = super::progress::Bar::start("sweep");
    let opts = sweep::SweepOptions {
        jobs,
        check_determinism: args.check_determinism,
        progress: Some(bar.counters()),
        per_seed: args.per_seed.is_some(),
        shard: spec.as_ref().map(|s| (s.k, s.n)),
        explore: args.explore.clone(),
        coverage: args.coverage,
        judging: sweep::Judging::Simulated,
    };
    let started = std::time::Instant::now();
    stop_on_interrupt();
    let (sims, models) = (std::slice::from_ref(&sim), std::slice::from_ref(&model));
    let cells = sweep::run_cells(sims, models, Some(range.clone()), &opts, |seed, line| {
        per_seed.line(seed, line)
    })?;
    drop(bar);
    per_seed.finish()?;
    let cell = &cells[0];
    if let Some(spec) = spec {
        let timing = crate::shard::Timing { wall_s: started.elapsed().as_secs_f64(), jobs };
        let f = crate::shard::shard_file(sims, models, &cells, Some(spec), timing);
        write_shard(&args.shard, &f)?;
        return Ok(if interrupted() { EXIT_INTERRUPTED } else { EXIT_OK });
    }
    let speed = report_speed(&cells, started, jobs);
    let text = report(&args, (&sim, &model), cell, (range.start, jobs), &speed)?;
    emit_report(args.shard.out.as_deref(), to_stderr, &text)?;
    if interrupted() {
        return Ok(EXIT_INTERRUPTED);
    }
    args.gate.exit(&cells, cell.sweep_failed(), args.json || to_stderr)
}

/// A sweep's report over seeds (explored or not), as text or JSON.
fn report(
    args: &SweepArgs,
    (sim, model): (&Sim, &Model),
    cell: &sweep::Cell,
    (start, jobs): (u64, usize),
    speed: &super::out::Speed,
) -> anyhow::Result<String> {
    Ok(if args.json {
        let mut v = render::cell_json(cell);
        v["speed"] = serde_json::to_value(speed)?;
        if let Some(s) = &args.explore {
            v["explore"] = s.to_string().into();
            v["runs_to_first"] = runs_to_first(cell, start);
        }
        let v = render::versioned("sweep", v);
        format!("{}\n", serde_json::to_string_pretty(&v)?)
    } else if args.coverage {
        let text = text_report(args, (sim, model), cell, (start, jobs))?;
        format!("{text}{}", coverage_text(cell))
    } else {
        text_report(args, (sim, model), cell, (start, jobs))?
    })
}

/// A sweep's text report (explored or not), without coverage.
fn text_report(
    args: &SweepArgs,
    (sim, model): (&Sim, &Model),
    cell: &sweep::Cell,
    (start, jobs): (u64, usize),
) -> anyhow::Result<String> {
    Ok(if let Some(s) = &args.explore {
        let name = s.to_string();
        let (sim_path, model_name) = (catalog::display_path(&sim.path), catalog::cli_name(model));
        let replay = |seed| catalog::replay_explored(&sim_path, &model_name, seed, Some(&name));
        let ex = render::ExploredSweep {
            header: format!(
                "idemsim sweep: sim {} · model {} · seeds {} · {jobs} job(s) · explore {name}",
                sim.name, model.name, cell.seeds
            ),
            summary: explored_summary(s),
            first: start,
            replay: &replay,
        };
        render::sweep_text_explored(sim, model, cell, jobs, Some(&ex))
    } else {
        render::sweep_text(sim, model, cell, jobs)
    })
}

/// `--coverage`: each dangerous moment the model and the sim make possible, with the seeds
/// that reached it, and the possible ones never reached called out.
pub(super) fn coverage_text(cell: &sweep::Cell) -> String {
    use crate::moments;
    use std::fmt::Write as _;
    let Some(cov) = &cell.coverage else { return String::new() };
    let mut t = String::from("\ncoverage of dangerous moments (seeds that reached each):\n");
    let all = moments::in_order(cov);
    let width = all.iter().map(|(m, _)| m.name().len()).max().unwrap_or(0);
    for (m, s) in all.iter().filter(|(_, s)| s.possible) {
        let share = if cell.runs == 0 { 0.0 } else { 100.0 * s.seeds as f64 / cell.runs as f64 };
        let (name, n, runs) = (m.name(), s.seeds, cell.runs);
        let _ = writeln!(t, "  {name:<width$}  {n:>5} of {runs} ({share:.1} %)");
        let _ = writeln!(t, "      {}", m.meaning());
    }
    let impossible: Vec<&str> =
        all.iter().filter(|(_, s)| !s.possible).map(|(m, _)| m.name()).collect();
    if !impossible.is_empty() {
        t.push_str("  not possible for this sim and model:\n");
        let names = format!("      {}", impossible.join(", "));
        let _ = writeln!(t, "{}", crate::text::wrap(&names, 96, "      ").trim_end());
    }
    let unreached: Vec<&str> = moments::unreached(cov).iter().map(|m| m.name()).collect();
    if unreached.is_empty() {
        t.push_str("every possible moment was reached on at least one seed\n");
    } else {
        let _ = writeln!(
            t,
            "this sweep never reached: {} (possible for this model)",
            unreached.join(", ")
        );
    }
    t
}

/// What an explored sweep of seeds did, one line.
pub(super) fn explored_summary(s: &Strategy) -> String {
    match s {
        Strategy::Edges => "explore edges: every timing draw at an end of its range (or within \
                            1 % of one) with probability 0.8, else uniform; each seed explored once"
            .into(),
        Strategy::Faults { n } => format!(
            "explore {s}: on every seed, exactly {n} of the fault draws of its calibrated run \
             fire (chosen from the seed), no other; timing as calibrated"
        ),
        Strategy::Swarm => "explore swarm: per seed, each fault kind the sim configures on or off \
                             (even odds, from the seed; rates as configured), timing draws as edges"
            .into(),
        Strategy::Pct { depth } => format!(
            "explore {s}: PCT of depth {depth} on every seed (client copies as tasks, k from each \
             seed's calibrated run; `run --explore {s} --json` prints a seed's bound)"
        ),
        Strategy::Exhaustive { .. } => String::new(),
    }
}

/// `--explore` on a command that sweeps (`cmd`): one exhaustive schedule is refused (it
/// enumerates them), and so is a baseline, which holds calibrated rates: an explored run is
/// not compared with one (nor written as one). `--fail-on-violation` gates a hunt.
pub(super) fn check_explore(
    explore: Option<&Strategy>,
    cmd: &str,
    gate: &super::gate::GateArgs,
) -> anyhow::Result<()> {
    let Some(s) = explore else { return Ok(()) };
    s.check_many_runs(cmd).map_err(anyhow::Error::msg)?;
    if gate.baseline.is_some() {
        anyhow::bail!(
            "--baseline compares calibrated rates, and an explored run's counts are not rates: \
             gate a hunt with --fail-on-violation (see docs/hunt.md)"
        );
    }
    Ok(())
}

/// Per violation, the runs until it was first seen (seeds run in order from `start`).
fn runs_to_first(cell: &sweep::Cell, start: u64) -> serde_json::Value {
    let m: BTreeMap<&String, u64> = cell
        .violations
        .iter()
        .map(|(n, v)| (n, render::runs_to_first(v.first_seed, start)))
        .collect();
    serde_json::to_value(m).unwrap_or_default()
}

/// `sweep --explore exhaustive`: the schedules of the range's first seed, depth first.
fn exhaustive(
    args: &SweepArgs,
    sim: &Arc<Sim>,
    model: &Arc<Model>,
    seed: u64,
    (bound, depth): (u64, u32),
) -> anyhow::Result<i32> {
    let bar = super::progress::Bar::start("sweep");
    let started = std::time::Instant::now();
    stop_on_interrupt();
    let e = sweep::run_exhaustive(sim, model, seed, (bound, depth), Some(&bar.counters()))?;
    drop(bar);
    let cell = &e.cell;
    let speed = report_speed(std::slice::from_ref(cell), started, 1);
    let name = |i: u64| format!("exhaustive@{}", e.schedules[i as usize]);
    let ending = if e.exhausted {
        format!("space exhausted: all {} schedule(s) explored", e.schedules.len())
    } else if e.cell.interrupted {
        format!("interrupted after {} schedule(s)", e.schedules.len())
    } else {
        format!("bound reached: {} schedule(s) explored, the space is larger", e.schedules.len())
    };
    let text = if args.json {
        let mut v = render::cell_json(cell);
        v["speed"] = serde_json::to_value(&speed)?;
        v["explore"] = Strategy::Exhaustive { bound, depth, schedule: None }.to_string().into();
        v["runs_to_first"] = runs_to_first(cell, 0);
        v["exploration"] = serde_json::json!({ "seed": seed, "bound": bound, "depth": depth,
            "schedules": e.schedules.len(), "exhausted": e.exhausted });
        for (n, stat) in &cell.violations {
            v["violations"][n]["schedule"] = name(stat.first_seed).into();
        }
        format!("{}\n", serde_json::to_string_pretty(&render::versioned("sweep", v))?)
    } else {
        exhaustive_text(sim, model, &e, (bound, depth), &ending)
    };
    emit_report(args.shard.out.as_deref(), false, &text)?;
    if interrupted() {
        return Ok(EXIT_INTERRUPTED);
    }
    args.gate.exit(std::slice::from_ref(cell), cell.sweep_failed(), args.json)
}

/// The text of an exhaustive sweep: schedule `i` replays as `--seed SEED --explore
/// exhaustive@CHOICES`.
fn exhaustive_text(
    sim: &Sim,
    model: &Model,
    e: &sweep::Exhaustive,
    (bound, depth): (u64, u32),
    ending: &str,
) -> String {
    let (sim_path, model_name) = (catalog::display_path(&sim.path), catalog::cli_name(model));
    let replay = |i: u64| {
        let name = format!("exhaustive@{}", e.schedules[i as usize]);
        catalog::replay_explored(&sim_path, &model_name, e.seed, Some(&name))
    };
    let strategy = Strategy::Exhaustive { bound, depth, schedule: None };
    let ex = render::ExploredSweep {
        header: format!(
            "idemsim sweep: sim {} · model {} · seed {} · explore {strategy} (at most {bound} \
             schedules of the first {depth} decisions)",
            sim.name, model.name, e.seed
        ),
        summary: format!(
            "explore {strategy}: {ending}; the first {depth} decisions of each run enumerated \
             depth first (every timing draw {{low, high}}, every random route), later ones \
             take the low end or the first process; madsim's own task order \
             and the fault draws held by the seed, not enumerated; the runs below are schedules"
        ),
        first: 0,
        replay: &replay,
    };
    render::sweep_text_explored(sim, model, &e.cell, 1, Some(&ex))
}

/// `--per-seed`: one JSON line per seed, written in seed order (results arriving early wait
/// in a small buffer) to a file opened as a stream (created or truncated in place, so a FIFO
/// receives the lines as they come) or, for `-`, to stdout. The first write error is kept
/// and reported at the end.
/// Open `--per-seed`'s file for writing (created or truncated). A FIFO is fine, as a stream,
/// but only with a reader already there: the open does not wait for one (`O_NONBLOCK`: a FIFO
/// nobody reads is refused at once instead of blocking the sweep), and the stream then blocks
/// as usual while its reader catches up.
fn open_stream(p: &Path) -> Result<std::fs::File, InputError> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(p)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) => InputError::file(
                p,
                "a FIFO (named pipe) that no process reads: start its reader first",
            ),
            _ => InputError::file(p, format!("cannot create: {e}")),
        })?;
    // SAFETY: F_GETFL/F_SETFL on a descriptor this function owns; no memory is passed.
    let ok = unsafe {
        let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
        fl >= 0 && libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK) >= 0
    };
    if !ok {
        return Err(InputError::file(
            p,
            format!("cannot create: {}", std::io::Error::last_os_error()),
        ));
    }
    Ok(f)
}

struct PerSeed {
    file: Option<BufWriter<Box<dyn Write>>>,
    pending: BTreeMap<u64, String>,
    next_seed: u64,
    io_err: Option<std::io::Error>,
    /// An explored sweep's strategy, as JSON: each line names it first.
    explore: Option<String>,
}

impl PerSeed {
    /// The writer to `path` (none: lines are dropped), expecting seed `first` first.
    fn create(path: Option<&Path>, first: u64) -> Result<PerSeed, InputError> {
        let file = match path {
            None => None,
            Some(p) if p.as_os_str() == "-" => {
                Some(BufWriter::new(Box::new(std::io::stdout()) as Box<dyn Write>))
            }
            Some(p) => Some(BufWriter::new(Box::new(open_stream(p)?) as Box<dyn Write>)),
        };
        Ok(PerSeed {
            file,
            pending: Default::default(),
            next_seed: first,
            io_err: None,
            explore: None,
        })
    }

    /// Seed `seed`'s line: written, with the lines it was holding up, once its turn comes.
    fn line(&mut self, seed: u64, line: &str) {
        let Some(f) = self.file.as_mut() else { return };
        let line = match (&self.explore, line.strip_prefix('{')) {
            (Some(s), Some(rest)) => format!("{{\"explore\":{s},{rest}"),
            _ => line.to_string(),
        };
        self.pending.insert(seed, line);
        while let Some(line) = self.pending.remove(&self.next_seed) {
            if let Err(e) = writeln!(f, "{line}") {
                self.io_err.get_or_insert(e);
            }
            self.next_seed += 1;
        }
    }

    /// Write what is left and flush; the first write error, if any.
    fn finish(mut self) -> anyhow::Result<()> {
        if let Some(mut f) = self.file.take() {
            // After an interrupt, the seeds that finished past a gap are still written, in order.
            for line in self.pending.values() {
                if let Err(e) = writeln!(f, "{line}") {
                    self.io_err.get_or_insert(e);
                }
            }
            if let Err(e) = f.flush() {
                self.io_err.get_or_insert(e);
            }
        }
        if let Some(e) = self.io_err {
            anyhow::bail!("writing --per-seed file: {e}");
        }
        Ok(())
    }
}
