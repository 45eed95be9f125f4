//! What the commands share: output files (`-` is stdout; links followed; FIFOs, devices and
//! folders refused; files replaced whole), the n/a answer, SIGINT, the speed line, shard
//! files.

use std::path::{Path, PathBuf};

use super::{EXIT_NOT_APPLICABLE, ShardArgs};
use crate::input::InputError;
use crate::model::Model;
use crate::run;
use crate::scenario::Sim;
use crate::sweep::{self, Cell};

/// Where an output file given on the command line goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Dest {
    /// `-`, or a path naming the file stdout is open on (`/dev/stdout`, `/dev/fd/1`).
    Stdout,
    /// A path naming the file stderr is open on (`/dev/stderr`).
    Stderr,
    /// A regular file to replace whole, or to create: the path given or, when it is a
    /// symbolic link, the file the link resolves to.
    File(PathBuf),
}

/// Where an output path writes, or why it is refused (an error naming the path: exit 2).
/// The rules, shared by every option that writes a file (`--svg`, `--html`, `-o`, `--out`):
///
/// - `-` is stdout; so is any path naming the very file stdout is open on (same device and
///   inode: `/dev/stdout`, `/dev/fd/1`, `/proc/self/fd/1`, the terminal's own device); a
///   path naming stderr's file is stderr.
/// - A path that does not exist is created.
/// - A regular file is replaced whole (see [`write_file`]).
/// - A symbolic link is followed: the file it resolves to is replaced and the link stays a
///   link. A dangling link (its target does not exist) is refused rather than followed, so
///   that no file is created wherever a stale or planted link points (`echo > link` would
///   create it; here the target must exist, or give its path).
/// - A folder, a FIFO, a device, a socket (anything that exists and is not a regular file,
///   through links too) is refused: replacing it would break what it is, writing into it
///   could block.
pub(crate) fn destination(path: &Path) -> Result<Dest, InputError> {
    if path.as_os_str() == "-" {
        return Ok(Dest::Stdout);
    }
    let refuse = |msg: String| Err(InputError::file(path, msg));
    let cannot = |e: std::io::Error| InputError::file(path, format!("cannot write: {e}"));
    let entry = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Dest::File(path.to_path_buf()));
        }
        Err(e) => return Err(cannot(e)),
    };
    let link = entry.file_type().is_symlink();
    let meta = if link {
        match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return refuse(
                    "is a symbolic link to nothing: refused rather than creating a file where it \
                     points (create its target, or give the target's path)"
                        .into(),
                );
            }
            Err(e) => return Err(cannot(e)),
        }
    } else {
        entry
    };
    if let Some(std) = standard_stream(&meta) {
        return Ok(std);
    }
    let t = meta.file_type();
    if t.is_dir() {
        return refuse("is a folder; expected a file to write".into());
    }
    if !t.is_file() {
        return refuse(format!(
            "is {}, not a regular file: refused, as it would be replaced or could block (`-` \
             writes to stdout)",
            kind(&t)
        ));
    }
    if link {
        return Ok(Dest::File(std::fs::canonicalize(path).map_err(cannot)?));
    }
    Ok(Dest::File(path.to_path_buf()))
}

/// What a file that is not a regular file or a folder is, for a refusal.
fn kind(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Stdout or stderr, when `meta` is the file one of them is open on.
fn standard_stream(meta: &std::fs::Metadata) -> Option<Dest> {
    use std::os::unix::fs::MetadataExt;
    let same = |fd: libc::c_int| {
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: fstat writes a `stat` into the buffer it is given and reads nothing else.
        let ok = unsafe { libc::fstat(fd, st.as_mut_ptr()) } == 0;
        // SAFETY: fstat returned 0, so it filled the buffer.
        ok && {
            let st = unsafe { st.assume_init() };
            st.st_dev == meta.dev() && st.st_ino == meta.ino()
        }
    };
    if same(1) {
        Some(Dest::Stdout)
    } else if same(2) {
        Some(Dest::Stderr)
    } else {
        None
    }
}

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

/// Write a whole output file or nothing, where [`destination`] says (`-`: stdout).
///
/// A file is written as a temporary file in the target's own folder (created exclusively,
/// so never through a link planted under its name), flushed to disk and renamed onto the
/// target: a reader, or a shard killed mid-write on a shared volume, never sees a truncated
/// file, and a link given as the path stays a link to the new file. The replaced file's
/// permission bits are kept; its owner, extended attributes and other hard links are not (a
/// hard link keeps the old contents).
///
/// Limits (Linux): the target is checked when the command starts and again just before the
/// rename, but not atomically with it. `rename` never opens or follows what it replaces, so
/// no race can make a write block on a FIFO or go through a link; at worst a FIFO or link
/// created at the target between the last check and the rename is replaced, and a link
/// retargeted in between still has its old target written.
pub(crate) fn write_file(path: &Path, text: &str) -> Result<(), InputError> {
    use std::io::Write as _;
    let err = |e: std::io::Error| InputError::file(path, format!("cannot write: {e}"));
    match destination(path)? {
        Dest::Stdout => {
            let mut o = std::io::stdout().lock();
            o.write_all(text.as_bytes()).and_then(|()| o.flush()).map_err(err)
        }
        Dest::Stderr => {
            let mut o = std::io::stderr().lock();
            o.write_all(text.as_bytes()).and_then(|()| o.flush()).map_err(err)
        }
        Dest::File(target) => replace_file(path, &target, text),
    }
}

/// The temporary file beside `target`, written, then renamed onto it (see [`write_file`]).
fn replace_file(path: &Path, target: &Path, text: &str) -> Result<(), InputError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let err = |e: std::io::Error| InputError::file(path, format!("cannot write: {e}"));
    let old = std::fs::symlink_metadata(target).ok().filter(|m| m.is_file());
    let (mut file, tmp) = loop {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut tmp = target.as_os_str().to_owned();
        tmp.push(format!(".tmp-{}-{n}", std::process::id()));
        let tmp = PathBuf::from(tmp);
        // `create_new` is O_EXCL: it fails on anything already there, a link included.
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp);
        match opened {
            Ok(f) => break (f, tmp),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => continue,
            Err(e) => return Err(err(e)),
        }
    };
    let written = (|| {
        if let Some(m) = &old {
            file.set_permissions(m.permissions())?;
        }
        file.write_all(text.as_bytes())?;
        file.sync_all()
    })();
    let renamed = written.map_err(err).and_then(|()| {
        // Checked again: what appeared at the target since the start is refused, not replaced.
        match std::fs::symlink_metadata(target) {
            Ok(m) if !m.is_file() => Err(InputError::file(
                path,
                format!("{} changed while writing; nothing written", target.display()),
            )),
            _ => std::fs::rename(&tmp, target).map_err(err),
        }
    });
    if renamed.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    renamed
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

/// The same, as JSON (for `--json`).
pub(super) fn not_applicable_json(to_stderr: bool, sim: &Sim, model: &Model) -> Option<i32> {
    let reason = run::not_applicable(sim, model)?;
    let v = serde_json::json!({
        "sim": sim.name, "model": model.name, "applicable": false, "reason": reason,
    });
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
    eprintln!(
        "{runs} runs in {wall_s:.2} s on {jobs} thread(s): {:.0} runs/s, {:.0} simulated requests/s",
        speed.runs_per_s, speed.simulated_requests_per_s
    );
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
    eprintln!(
        "shard {}/{} (from {}): {runs} runs{}",
        spec.k,
        spec.n,
        spec.source,
        target.map(|p| format!(", written to {}", p.display())).unwrap_or_default()
    );
    Ok(())
}
