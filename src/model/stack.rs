//! Stack profiles: how the server's runtime and database driver behave, calibrated once
//! (`stacks/*.toml`, each with its source and the command that measured it) and named by a
//! model (`stack = "node-sqlite-sync"`). A model that names none runs on [`DEFAULT_STACK`],
//! never on instant SQL; its own `[driver]` fields override the stack's, one by one.

use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::file::DriverFile;
use super::parse::{DRIVER_BASE, parse_driver};
use super::types::Driver;
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
    driver: DriverFile,
}

/// A model's stack: the name it gave (or [`DEFAULT_STACK`]) and the stack's driver, the
/// defaults of the model's own `[driver]`.
pub(super) fn resolve(
    file: Source,
    stack: &Option<Spanned<String>>,
) -> Result<(String, Driver), InputError> {
    let Some(named) = stack else {
        let src = crate::library::shipped_stack(DEFAULT_STACK).expect("the default stack ships");
        return Ok((DEFAULT_STACK.to_string(), parse_stack(Path::new(DEFAULT_PATH), src)?));
    };
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
        let path = format!("stacks/{name}.toml");
        return Ok((name.clone(), parse_stack(Path::new(&path), src)?));
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
    Ok((name.clone(), parse_stack(&path, &src)?))
}

/// Where the default stack's errors point (it ships, so it has none).
const DEFAULT_PATH: &str = "stacks/node-sqlite-sync.toml";

/// A stack profile's text → its driver. A stack states its timings: `statement_ms`,
/// `commit_ms` and `latency_ms` are required, so no stack is instant by omission.
fn parse_stack(path: &Path, src: &str) -> Result<Driver, InputError> {
    let file = Source::new(path, src);
    let f: StackFile = file.toml()?;
    for (field, v) in [
        ("statement_ms", &f.driver.statement_ms),
        ("commit_ms", &f.driver.commit_ms),
        ("latency_ms", &f.driver.latency_ms),
    ] {
        if v.is_none() {
            return Err(InputError::span(
                path,
                src,
                0..0,
                format!("driver.{field}: a stack profile states it ([low, high] in ms)"),
            ));
        }
    }
    parse_driver(file, &f.driver, &DRIVER_BASE)
}
