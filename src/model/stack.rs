//! Stack profiles: how the server's runtime and database driver behave, calibrated once
//! (`stacks/*.toml`, each with its source and the command that measured it) and named by a
//! model (`stack = "node-sqlite-sync"`). A model that names none runs on [`DEFAULT_STACK`],
//! never on instant SQL; its own `[driver]` fields override the stack's, one by one.

use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::file::DriverFile;
use super::parse::{DRIVER_BASE, parse_driver};
use super::types::{Driver, LoopTimes, Runtime};
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
    turn_ms: Option<Spanned<Vec<f64>>>,
    accept_ms: Option<Spanned<Vec<f64>>>,
    first_accept_ms: Option<Spanned<Vec<f64>>>,
    handler_ms: Option<Spanned<Vec<f64>>>,
    first_handler_ms: Option<Spanned<Vec<f64>>>,
}

/// A model's stack, resolved: its name, its runtime and its driver (the defaults of the
/// model's own `[driver]`).
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
    file.err(table, format!("{field}: a stack profile states it ([low, high] in ms)"))
}

/// A stack's `[runtime]`: `kind = "event-loop"` (Node.js's loop in phases) and its times.
fn parse_runtime(
    file: Source,
    r: &RuntimeFile,
    table: std::ops::Range<usize>,
) -> Result<Runtime, InputError> {
    file.choice(&Some(r.kind.clone()), "runtime.kind", &[("event-loop", ())])?;
    let range = |field: &str, v: &Option<Spanned<Vec<f64>>>| {
        if v.is_none() {
            return Err(missing(file, table.clone(), &format!("runtime.{field}")));
        }
        file.ms_range(
            &format!("runtime.{field}"),
            v,
            (0, 0),
            |lo, hi| lo <= hi && hi <= 60_000_000,
            "[low, high] with low <= high <= 60000",
        )
    };
    Ok(Runtime::EventLoop(LoopTimes {
        turn_us: range("turn_ms", &r.turn_ms)?,
        accept_us: range("accept_ms", &r.accept_ms)?,
        first_accept_us: range("first_accept_ms", &r.first_accept_ms)?,
        handler_us: range("handler_ms", &r.handler_ms)?,
        first_handler_us: range("first_handler_ms", &r.first_handler_ms)?,
    }))
}
