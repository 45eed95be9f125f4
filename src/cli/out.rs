//! What the commands share: output files ([`crate::outfile`]'s rules, and at most one on
//! stdout), the report written where `-o/--out` says, the `written to` line, `--quiet`, the
//! n/a answer, SIGINT, the speed line, shard files.

use std::path::Path;

use super::{EXIT_NOT_APPLICABLE, ShardArgs};
use crate::input::InputError;
use crate::model::Model;
pub(crate) use crate::outfile::{Dest, destination, write_file};
use crate::run;
use crate::scenario::Sim;
use crate::sweep::{self, Cell};

/// Check each output path given (refused ones end the command before any work) and say
/// whether one of them is stdout (`-`), so that the report goes to stderr. Two outputs on
/// stdout are refused: one stream cannot hold two documents.
pub(super) fn stdout_taken(outputs: &[(&str, Option<&Path>)]) -> Result<bool, InputError> {
    let mut taken: Option<&str> = None;
    for (flag, path) in outputs {
        let Some(path) = path else { continue };
        if destination(path)? != Dest::Stdout {
            continue;
        }
        if let Some(first) = taken {
            let msg = format!("{first} and {flag} cannot both write to stdout");
            return Err(InputError::file(Path::new(flag), msg));
        }
        taken = Some(flag);
    }
    Ok(taken.is_some())
}

/// Refuse, before any work, an output file that is one of the command's input files (a sim or
/// model would be replaced by the report) or another output of the same command (one would
/// silently replace the other). Paths are compared as the file system resolves them (links
/// followed; a file not yet there by its folder's real path). `-` (stdout) is left to
/// [`stdout_taken`].
pub(super) fn distinct_files(
    outputs: &[(&str, Option<&Path>)],
    inputs: &[&Path],
) -> Result<(), InputError> {
    let real = |p: &Path| -> Option<std::path::PathBuf> {
        if let Ok(c) = p.canonicalize() {
            return Some(c);
        }
        let parent = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.canonicalize().ok()?,
            _ => std::env::current_dir().ok()?,
        };
        Some(parent.join(p.file_name()?))
    };
    let mut seen: Vec<(&str, std::path::PathBuf)> = Vec::new();
    for (flag, path) in outputs {
        let Some(path) = path.filter(|p| p.as_os_str() != "-") else { continue };
        let Some(r) = real(path) else { continue };
        if inputs.iter().any(|i| real(i).as_ref() == Some(&r)) {
            let msg =
                format!("{flag} would replace an input of this command (a sim or model file)");
            return Err(InputError::file(path, msg));
        }
        if let Some((first, _)) = seen.iter().find(|(_, p)| *p == r) {
            let msg = format!("{first} and {flag} name the same file: one would replace the other");
            return Err(InputError::file(path, msg));
        }
        seen.push((flag, r));
    }
    Ok(())
}

/// `--quiet`: set once, before the command runs.
static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Set `--quiet` (the global flag): informational lines on stderr and progress are dropped.
pub(super) fn set_quiet(q: bool) {
    QUIET.store(q, std::sync::atomic::Ordering::Relaxed);
}

/// `--quiet` was given.
pub(super) fn quiet() -> bool {
    QUIET.load(std::sync::atomic::Ordering::Relaxed)
}

/// An informational line on stderr (the speed line, what was written where): dropped with
/// `--quiet`. Errors, warnings that qualify a result and the report never go through here.
pub(super) fn info(line: &str) {
    if !quiet() {
        eprintln!("{line}");
    }
}

/// The one form of the line that says a file was written: `written to FILE (N bytes)`, on
/// stderr (an informational line: dropped with `--quiet`).
pub(super) fn written(path: &Path, bytes: usize) {
    info(&format!(
        "written to {} ({bytes} bytes)",
        crate::text::printable(&path.display().to_string())
    ));
}

/// Write an output file by [`write_file`]'s rules and, when it went to a file (not stdout or
/// stderr), say so ([`written`]).
pub(super) fn write_output(path: &Path, text: &str) -> Result<(), InputError> {
    let to_file = matches!(destination(path)?, Dest::File(_));
    write_file(path, text)?;
    if to_file {
        written(path, text.len());
    }
    Ok(())
}

/// Emit a command's report: to the file `-o/--out` names (`-`: stdout), saying so, or else
/// printed ([`print_report`]).
pub(super) fn emit_report(
    out: Option<&Path>,
    to_stderr: bool,
    text: &str,
) -> Result<(), InputError> {
    match out {
        Some(p) => write_output(p, text),
        None => {
            print_report(to_stderr, text);
            Ok(())
        }
    }
}

/// Print a command's report: on stdout, or on stderr when an output file given as `-` has
/// stdout (`run --svg -`), so that stdout holds that file and nothing else.
pub(super) fn print_report(to_stderr: bool, text: &str) {
    if to_stderr {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
}

/// Say why a cell is n/a (it is the result, not an error): on stdout, or on stderr when
/// `to_stderr` (an output file given as `-` has stdout).
pub(super) fn not_applicable_to(to_stderr: bool, sim: &Sim, model: &Model) -> Option<i32> {
    let reason = run::not_applicable(sim, model)?;
    let text = format!("n/a: sim {} × model {}: {reason}; nothing ran\n", sim.name, model.name);
    print_report(to_stderr, &text);
    Some(EXIT_NOT_APPLICABLE)
}

/// Say why a cell is n/a, as the JSON of the command's format when `json` names it (`run`,
/// `sweep`: see [`not_applicable_to`]).
pub(super) fn not_applicable_as(
    json: Option<&str>,
    to_stderr: bool,
    sim: &Sim,
    model: &Model,
) -> Option<i32> {
    if let Some(kind) = json {
        not_applicable_json(kind, to_stderr, sim, model)
    } else {
        not_applicable_to(to_stderr, sim, model)
    }
}

/// The same, as JSON (for `--json`) in format `idemsim-<kind>`.
pub(super) fn not_applicable_json(
    kind: &str,
    to_stderr: bool,
    sim: &Sim,
    model: &Model,
) -> Option<i32> {
    let reason = run::not_applicable(sim, model)?;
    let v = serde_json::json!({
        "sim": sim.name, "model": model.name, "applicable": false, "reason": reason,
    });
    let v = crate::render::versioned(kind, v);
    let text = format!("{}\n", serde_json::to_string_pretty(&v).expect("serialisable"));
    print_report(to_stderr, &text);
    Some(EXIT_NOT_APPLICABLE)
}

/// On the first SIGINT a sweep or matrix stops taking seeds and prints what finished; a
/// second one kills the process as usual.
pub(super) fn stop_on_interrupt() {
    extern "C" fn on_sigint(_: libc::c_int) {
        sweep::INTERRUPTED.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    // The handler only stores to an atomic, which is async-signal-safe.
    sweep::on_first_sigint(on_sigint);
}

pub(super) fn interrupted() -> bool {
    sweep::INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed)
}

/// How fast a sweep or matrix ran (wall clock: printed to stderr and in `sweep --json`'s
/// `speed`, never in a report that is compared or snapshotted).
#[derive(Debug, Clone, serde::Serialize)]
pub(super) struct Speed {
    runs: u64,
    /// HTTP attempts the simulated clients sent (every status and transport failure).
    simulated_requests: u64,
    wall_s: f64,
    jobs: usize,
    runs_per_s: f64,
    simulated_requests_per_s: f64,
}

/// `N runs in S s on J thread(s): R runs/s, Q simulated requests/s` on stderr.
pub(super) fn report_speed(cells: &[Cell], started: std::time::Instant, jobs: usize) -> Speed {
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
    info(&format!(
        "{runs} runs in {wall_s:.2} s on {jobs} thread(s): {:.0} runs/s, {:.0} simulated requests/s",
        speed.runs_per_s, speed.simulated_requests_per_s
    ));
    speed
}

/// Write a shard file where `--out`/`--out-dir` say; say on stderr what was written.
pub(super) fn write_shard(a: &ShardArgs, f: &crate::shard::ShardFile) -> Result<(), InputError> {
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
    info(&format!(
        "shard {}/{} (from {}): {runs} runs{}",
        spec.k,
        spec.n,
        spec.source,
        target.map(|p| format!(", written to {}", p.display())).unwrap_or_default()
    ));
    Ok(())
}
