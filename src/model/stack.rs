//! Stack profiles: how the server's runtime and database driver behave, calibrated once
//! (`stacks/*.toml`, each with its source and the command that measured it) and named by a
//! model (`stack = "node-sqlite-sync"`). A model that names none runs on [`DEFAULT_STACK`],
//! never on instant SQL; its own `[driver]` fields override the stack's, one by one.

use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::file::DriverFile;
use super::parse::{DRIVER_BASE, parse_driver};
use super::types::{Dist, Driver, LoopTimes, Runtime, ThreadTimes};
use crate::input::{InputError, Source};

/// The stack of a model that names none: the article's (Node.js, a synchronous SQLite driver
/// on a file with SQLite's defaults).
pub const DEFAULT_STACK: &str = "node-sqlite-sync";

/// A stack profile file's shape.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StackFile {
    /// For the file's readers (and checked to be text); the model's report names the stack.
    #[allow(dead_code)]
    description: Option<String>,
    runtime: Spanned<RuntimeFile>,
    driver: Spanned<DriverFile>,
}

/// A stack's `[runtime]`: how a server process takes in work, every time stated.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuntimeFile {
    kind: Spanned<String>,
    turn_ms: Option<Spanned<toml::Value>>,
    accept_ms: Option<Spanned<toml::Value>>,
    first_accept_ms: Option<Spanned<toml::Value>>,
    handler_ms: Option<Spanned<toml::Value>>,
    first_handler_ms: Option<Spanned<toml::Value>>,
    /// thread-per-request: threads serving at once per process (absent: one per request).
    threads: Option<Spanned<i64>>,
    /// thread-per-request: the interpreter lock (`true`: CPython's GIL).
    gil: Option<Spanned<bool>>,
    /// thread-per-request with a GIL: its switch interval (CPython's default 5 ms).
    switch_interval_ms: Option<Spanned<f64>>,
    /// prefork: worker processes per server.
    workers: Option<Spanned<i64>>,
    /// event-loop: the share of connections waking an idle loop whose client it preempts
    /// inside `connect`.
    wake_preempts: Option<Spanned<f64>>,
    /// event-loop: the extra time of each kind of statement's first run in a fresh process
    /// (absent: none).
    first_statement_ms: Option<Spanned<toml::Value>>,
    /// thread-per-request and prefork: a request's database connection opened after its
    /// handler's code, an interpreter lock released meanwhile (absent: none).
    connect_ms: Option<Spanned<toml::Value>>,
    /// thread-per-request with a GIL: a request's thread's code before it first reads its
    /// socket, part of `handler_ms` (absent: none).
    prelude_ms: Option<Spanned<toml::Value>>,
}

/// Most threads a thread-per-request process may serve at once.
pub const MAX_THREADS: i64 = 1024;

/// A model's stack, resolved: its name, its runtime and its driver (the defaults of the
/// model's own `[driver]`).
#[derive(Debug)]
pub struct Stack {
    /// The name the model gave (or [`DEFAULT_STACK`]).
    pub name: String,
    /// How a server process takes in work.
    pub runtime: Runtime,
    /// The driver: statement, commit and await times, transactions, journal.
    pub driver: Driver,
}

/// A model's stack: the one it names (a shipped stack or a stack file), else
/// [`DEFAULT_STACK`].
pub(super) fn resolve(file: Source, stack: &Option<Spanned<String>>) -> Result<Stack, InputError> {
    let Some(named) = stack else { return Ok(default_stack()) };
    let name = named.get_ref();
    if crate::input::is_kebab(name) {
        let Some(src) = crate::library::shipped_stack(name) else {
            let known = crate::library::shipped_stack_names().join(", ");
            return Err(file.err(
                named.span(),
                format!(
                    "stack: unknown stack `{}`: expected one of {known}, or the path of a \
                     stack file (ending in .toml, relative to this model)",
                    crate::text::shown(name)
                ),
            ));
        };
        return parse_stack(name, &shipped_path(name), src);
    }
    if !name.ends_with(".toml") {
        return Err(file.err(
            named.span(),
            "stack: expected a shipped stack's name (lowercase words joined by `-`) or the path \
             of a stack file ending in .toml",
        ));
    }
    let path = file.path.parent().unwrap_or(Path::new(".")).join(name);
    let src = crate::input::read_file(&path, "stack profile")
        .map_err(|e| file.err(named.span(), format!("stack: {e}")))?;
    parse_stack(name, &path, &src)
}

/// A stack named on a command line or in a target file: a shipped stack's name, or the path
/// of a stack file (relative to `base`, the folder of the file that names it, or the working
/// directory).
pub fn named(spec: &str, base: &Path) -> Result<Stack, InputError> {
    if crate::input::is_kebab(spec) {
        let Some(src) = crate::library::shipped_stack(spec) else {
            let known = crate::library::shipped_stack_names().join(", ");
            return Err(InputError::file(
                Path::new(spec),
                format!(
                    "unknown stack `{}`: expected one of {known}, or the path of a stack file \
                     ending in .toml",
                    crate::text::shown(spec)
                ),
            ));
        };
        return parse_stack(spec, &shipped_path(spec), src);
    }
    if !spec.ends_with(".toml") {
        return Err(InputError::file(
            Path::new(spec),
            "expected a shipped stack's name (lowercase words joined by `-`) or the path of a \
             stack file ending in .toml",
        ));
    }
    let path = base.join(spec);
    let src = crate::input::read_file(&path, "stack profile")?;
    parse_stack(spec, &path, &src)
}

/// A stack profile held in memory (what `validate --calibrate` measured), named `name`; its
/// errors point at `name` as a file.
pub fn from_text(name: &str, src: &str) -> Result<Stack, InputError> {
    parse_stack(name, Path::new(name), src)
}

/// The default stack, as shipped (what `idemsim calibrate` writes beside what it measured).
pub fn default_stack() -> Stack {
    let src = crate::library::shipped_stack(DEFAULT_STACK).expect("the default stack ships");
    parse_stack(DEFAULT_STACK, &shipped_path(DEFAULT_STACK), src).expect("the default stack parses")
}

/// Where a shipped stack's errors point (the file it was built from).
fn shipped_path(name: &str) -> std::path::PathBuf {
    Path::new("stacks").join(format!("{name}.toml"))
}

/// A stack profile's text → its runtime and driver. A stack states its timings: every
/// runtime time and the driver's `statement_ms`, `commit_ms` and `latency_ms` are required, so
/// no stack is instant by omission.
fn parse_stack(name: &str, path: &Path, src: &str) -> Result<Stack, InputError> {
    let file = Source::new(path, src);
    let f: StackFile = file.toml()?;
    let runtime = parse_runtime(file, f.runtime.get_ref(), f.runtime.span())?;
    let d = f.driver.get_ref();
    for (field, v) in [
        ("statement_ms", &d.statement_ms),
        ("commit_ms", &d.commit_ms),
        ("latency_ms", &d.latency_ms),
    ] {
        if v.is_none() {
            return Err(missing(file, f.driver.span(), &format!("driver.{field}")));
        }
    }
    let driver = parse_driver(file, d, &DRIVER_BASE)?;
    Ok(Stack { name: name.to_string(), runtime, driver })
}

/// A stack file that leaves out a time it must state: located at its table.
fn missing(file: Source, table: std::ops::Range<usize>, field: &str) -> InputError {
    file.err(
        table,
        format!("{field}: a stack profile states it ([low, high] or quantiles {{ p0 = …, p100 = … }}, in ms)"),
    )
}

/// A stack's `[runtime]`: `kind = "event-loop"` (Node.js's loop in phases) or
/// `"thread-per-request"` (a thread and a connection per request, with or without a GIL), and
/// its times. A field of the other kind is refused at its location.
fn parse_runtime(
    file: Source,
    r: &RuntimeFile,
    table: std::ops::Range<usize>,
) -> Result<Runtime, InputError> {
    let kinds = [("event-loop", 0), ("thread-per-request", 1), ("prefork", 2)];
    let kind: u8 = file.choice(&Some(r.kind.clone()), "runtime.kind", &kinds)?.unwrap_or(0);
    let range = |field: &str, v: &Option<Spanned<toml::Value>>| {
        if v.is_none() {
            return Err(missing(file, table.clone(), &format!("runtime.{field}")));
        }
        file.ms_dist(&format!("runtime.{field}"), v, Dist::Uniform(0, 0))
    };
    refuse_other_kinds(file, r, kind)?;
    if kind > 0 {
        let (threads, gil_switch_us) = if kind == 2 {
            (prefork_fields(file, r, table.clone())?, None)
        } else {
            thread_fields(file, r)?
        };
        return Ok(Runtime::Threads(ThreadTimes {
            accept_us: range("accept_ms", &r.accept_ms)?,
            first_accept_us: range("first_accept_ms", &r.first_accept_ms)?,
            handler_us: range("handler_ms", &r.handler_ms)?,
            first_handler_us: range("first_handler_ms", &r.first_handler_ms)?,
            connect_us: file.ms_dist("runtime.connect_ms", &r.connect_ms, Dist::Uniform(0, 0))?,
            prelude_us: file.ms_dist("runtime.prelude_ms", &r.prelude_ms, Dist::Uniform(0, 0))?,
            threads,
            gil_switch_us,
            prefork: kind == 2,
        }));
    }
    Ok(Runtime::EventLoop(LoopTimes {
        turn_us: range("turn_ms", &r.turn_ms)?,
        accept_us: range("accept_ms", &r.accept_ms)?,
        first_accept_us: range("first_accept_ms", &r.first_accept_ms)?,
        handler_us: range("handler_ms", &r.handler_ms)?,
        first_handler_us: range("first_handler_ms", &r.first_handler_ms)?,
        wake_preempts_ppm: share(file, "wake_preempts", &r.wake_preempts)?,
        first_statement_us: file.ms_dist(
            "runtime.first_statement_ms",
            &r.first_statement_ms,
            Dist::Uniform(0, 0),
        )?,
    }))
}

/// A field of another kind of runtime than `kind` (0 event loop, 1 thread per request, 2
/// prefork), refused at its location. (Prefork's own refusals, with their reason, are
/// `prefork_fields`'.)
fn refuse_other_kinds(file: Source, r: &RuntimeFile, kind: u8) -> Result<(), InputError> {
    type Field<'a> = (&'a str, Option<std::ops::Range<usize>>, &'a [u8], &'a str);
    let fields: [Field; 9] = [
        ("turn_ms", r.turn_ms.as_ref().map(|v| v.span()), &[0], "event-loop"),
        ("wake_preempts", r.wake_preempts.as_ref().map(|v| v.span()), &[0], "event-loop"),
        ("first_statement_ms", r.first_statement_ms.as_ref().map(|v| v.span()), &[0], "event-loop"),
        ("workers", r.workers.as_ref().map(|v| v.span()), &[2], "prefork"),
        ("threads", r.threads.as_ref().map(|v| v.span()), &[1, 2], "thread-per-request"),
        ("gil", r.gil.as_ref().map(|v| v.span()), &[1, 2], "thread-per-request"),
        (
            "switch_interval_ms",
            r.switch_interval_ms.as_ref().map(|v| v.span()),
            &[1, 2],
            "thread-per-request",
        ),
        (
            "connect_ms",
            r.connect_ms.as_ref().map(|v| v.span()),
            &[1, 2],
            "thread-per-request` or `prefork",
        ),
        ("prelude_ms", r.prelude_ms.as_ref().map(|v| v.span()), &[1, 2], "thread-per-request"),
    ];
    for (field, at, kinds, owner) in fields {
        if let Some(at) = at.filter(|_| !kinds.contains(&kind)) {
            return Err(file.err(at, format!("runtime.{field}: only a `{owner}` runtime has it")));
        }
    }
    Ok(())
}

/// An event loop's `wake_preempts` (absent: 0, no client is preempted), a share in [0, 1]
/// kept in parts per million.
fn share(file: Source, field: &str, v: &Option<Spanned<f64>>) -> Result<u32, InputError> {
    let Some(v) = v else { return Ok(0) };
    let share = *v.get_ref();
    if !(0.0..=1.0).contains(&share) {
        return Err(file.err(
            v.span(),
            format!(
                "runtime.{field}: expected a share between 0 and 1, got {}",
                crate::input::shown_f64(share)
            ),
        ));
    }
    Ok((share * 1e6).round() as u32)
}

/// A prefork runtime's worker processes (required); it has no threads and no GIL.
fn prefork_fields(
    file: Source,
    r: &RuntimeFile,
    table: std::ops::Range<usize>,
) -> Result<u32, InputError> {
    for (field, span) in [
        ("threads", r.threads.as_ref().map(|t| t.span())),
        ("gil", r.gil.as_ref().map(|g| g.span())),
        ("switch_interval_ms", r.switch_interval_ms.as_ref().map(|s| s.span())),
        ("prelude_ms", r.prelude_ms.as_ref().map(|s| s.span())),
    ] {
        if let Some(span) = span {
            return Err(file.err(
                span,
                format!("runtime.{field}: a prefork runtime's workers are processes (no threads, no shared interpreter lock)"),
            ));
        }
    }
    match &r.workers {
        None => Err(file.err(
            table,
            "runtime.workers: a prefork runtime states its worker processes (1..=1024)",
        )),
        Some(w) if (1..=MAX_THREADS).contains(w.get_ref()) => Ok(*w.get_ref() as u32),
        Some(w) => Err(file.err(w.span(), format!("runtime.workers: expected 1..={MAX_THREADS}"))),
    }
}

/// A thread-per-request runtime's pool size (0: a thread per request) and GIL switch
/// interval (None: no GIL).
fn thread_fields(file: Source, r: &RuntimeFile) -> Result<(u32, Option<u64>), InputError> {
    let threads = match &r.threads {
        None => 0,
        Some(t) if (1..=MAX_THREADS).contains(t.get_ref()) => *t.get_ref() as u32,
        Some(t) => {
            return Err(file.err(
                t.span(),
                format!(
                    "runtime.threads: expected 1..={MAX_THREADS} (leave it out for a new thread \
                     per request)"
                ),
            ));
        }
    };
    let gil = r.gil.as_ref().is_some_and(|g| *g.get_ref());
    let switch = match (&r.switch_interval_ms, gil) {
        (Some(s), false) => {
            return Err(file.err(
                s.span(),
                "runtime.switch_interval_ms: only a runtime with `gil = true` has one",
            ));
        }
        (s, true) => Some(file.ms("runtime.switch_interval_ms", s, 5_000, 1)?),
        (None, false) => None,
    };
    if let (Some(p), false) = (&r.prelude_ms, gil) {
        return Err(
            file.err(p.span(), "runtime.prelude_ms: only a runtime with `gil = true` has one")
        );
    }
    Ok((threads, switch))
}
