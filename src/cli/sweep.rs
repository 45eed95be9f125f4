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
use crate::input::InputError;
use crate::{catalog, render, sweep};

pub(super) fn sweep_cmd(args: SweepArgs) -> anyhow::Result<i32> {
    let seeds = seed_arg(args.seeds)?;
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
    args.gate.preflight()?;
    if let Some(code) = not_applicable_as(args.json.then_some("sweep"), to_stderr, &sim, &model) {
        return Ok(code);
    }
    let range = seeds.unwrap_or_else(|| sim.seeds.clone());
    let jobs = args.jobs.unwrap_or_else(sweep::default_jobs);
    let mut per_seed = PerSeed::create(args.per_seed.as_deref(), range.start)?;
    let spec = shard_spec(&args.shard)?;
    let bar = super::progress::Bar::start("sweep");
    let opts = sweep::SweepOptions {
        jobs,
        check_determinism: args.check_determinism,
        progress: Some(bar.counters()),
        per_seed: args.per_seed.is_some(),
        shard: spec.as_ref().map(|s| (s.k, s.n)),
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
    let text = if args.json {
        let mut v = render::cell_json(cell);
        v["speed"] = serde_json::to_value(&speed)?;
        let v = render::versioned("sweep", v);
        format!("{}\n", serde_json::to_string_pretty(&v)?)
    } else {
        render::sweep_text(&sim, &model, cell, jobs)
    };
    emit_report(args.shard.out.as_deref(), to_stderr, &text)?;
    if interrupted() {
        return Ok(EXIT_INTERRUPTED);
    }
    args.gate.exit(&cells, cell.sweep_failed(), args.json || to_stderr)
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
        Ok(PerSeed { file, pending: Default::default(), next_seed: first, io_err: None })
    }

    /// Seed `seed`'s line: written, with the lines it was holding up, once its turn comes.
    fn line(&mut self, seed: u64, line: &str) {
        let Some(f) = self.file.as_mut() else { return };
        self.pending.insert(seed, line.to_string());
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
