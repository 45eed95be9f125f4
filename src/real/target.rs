//! The target file (`targets/*.toml`, contract in `docs/targets.md`): how to start one real
//! server process and how to read what it stored.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::template::Template;
use crate::input::{InputError, Source, is_kebab, read_file};

/// A real server to run a sim's client side against.
#[derive(Debug, Clone)]
pub struct Target {
    /// Kebab-case name.
    pub name: String,
    /// The model this server implements (what `validate` compares it with by default).
    pub model: Option<String>,
    /// The stack the server runs on (a shipped stack's name, or a stack file's path as seen
    /// from the working directory): `validate` simulates the model on it. None: the model's
    /// own.
    pub stack: Option<String>,
    /// One line on what it is.
    pub description: String,
    /// The target file.
    pub path: PathBuf,
    /// The program and its arguments; a relative program path (containing `/`) resolves
    /// against the target file's folder, as does the working directory.
    pub command: Vec<String>,
    /// Extra environment for every process.
    pub env: Vec<(String, String)>,
    /// How long a process may take to print `IDEMSIM_LISTENING <port>` (µs).
    pub start_timeout_us: u64,
    /// The query that lists the business rows.
    pub rows_sql: String,
    /// Whose rows are: the query's `user` column, or nobody's (the schema keeps no user).
    pub row_user: RowUser,
    /// How a row is tied to the intent that wrote it.
    pub attribute: Attribute,
    /// The query that lists the key records (None: the key store is not in the database;
    /// key records are not observed).
    pub keys_sql: Option<String>,
    /// The statement that deletes every key record (the sims' delete-keys action).
    pub delete_keys_sql: Option<String>,
    /// The most rows (and key records) a query may return; more refuses the round.
    pub max_rows: u64,
    /// How idemsim finds a started process's port.
    pub listen: Listen,
    /// Helper processes every round starts before the servers (a Redis, say).
    pub services: Vec<Service>,
    /// Commands run before every round, after the services started (resetting external
    /// state); each a program and its arguments, templates over the launch names.
    pub reset: Vec<Vec<String>>,
    /// How a sim's requests are sent (empty: the reference article's API, as the sim says).
    pub requests: Vec<super::mapping::RequestMap>,
}

/// Whose a stored row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowUser {
    /// The rows query returns a `user` column (the principal, as the sim's requests carry it).
    Column,
    /// The schema keeps no user (`user = "none"`): a row belongs to the user of the request
    /// it is attributed to, and a reply that leaks another user's row cannot be observed.
    None,
}

/// How a stored row is tied to the intent that wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attribute {
    /// The query's `intent` column (the server stores `X-Intent`); rows where it is NULL are
    /// attributed by body.
    Intent,
    /// By body (`attribute = "body"`): the row's columns named after fields of a sim
    /// request's body (and its user, with a user column) equal that request's; a row that
    /// matches requests of more than one intent belongs to none.
    Body,
}

/// How idemsim learns a started server process's port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// The process prints `IDEMSIM_LISTENING <port>` on stdout.
    Line,
    /// idemsim picks a free loopback port, passes it in the environment variable `env` (and
    /// as `${port}` in the command and env), and waits until the process is ready: `probe`
    /// (a path) answers a GET with any HTTP status, or without one, the port accepts a TCP
    /// connection.
    Port {
        /// The environment variable that carries the port.
        env: Option<String>,
        /// A path to GET until it answers.
        probe: Option<String>,
    },
}

/// A helper process started for every round (a Redis server, say), on a free port of its
/// own (`${port}` in its command), ready once that port accepts a TCP connection; servers
/// see the port as `${service.NAME.port}`. Ended with the round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// Kebab-case name.
    pub name: String,
    /// The program and its arguments (templates: `${port}`).
    pub command: Vec<String>,
    /// How long it may take to accept connections (µs).
    pub start_timeout_us: u64,
    /// The wire protocol a controlled round's proxy speaks between the servers and it
    /// (`resp`: Redis), so that its replies become scheduling points; None: not proxied.
    pub proxy: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetFile {
    name: Spanned<String>,
    model: Option<String>,
    stack: Option<Spanned<String>>,
    #[serde(default)]
    description: String,
    command: Spanned<Vec<String>>,
    #[serde(default)]
    env: std::collections::BTreeMap<String, String>,
    start_timeout_ms: Option<Spanned<f64>>,
    database: DatabaseFile,
    listen: Option<ListenFile>,
    #[serde(default)]
    service: Vec<ServiceFile>,
    reset: Option<Spanned<Vec<Vec<String>>>>,
    #[serde(default)]
    request: Vec<super::mapping::RequestFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DatabaseFile {
    rows: Spanned<String>,
    keys: Option<Spanned<String>>,
    delete_keys: Option<String>,
    user: Option<Spanned<String>>,
    attribute: Option<Spanned<String>>,
    max_rows: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListenFile {
    env: Option<Spanned<String>>,
    probe: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ServiceFile {
    name: Spanned<String>,
    command: Spanned<Vec<String>>,
    start_timeout_ms: Option<Spanned<f64>>,
    proxy: Option<Spanned<String>>,
}

/// Reserved environment names: idemsim sets them for every process.
const RESERVED: &[&str] = &[
    "IDEMSIM_DB",
    "IDEMSIM_PROCESS",
    "IDEMSIM_BUSY_TIMEOUT_MS",
    "IDEMSIM_HOOK",
    "IDEMSIM_POINTS",
    "IDEMSIM_PROVIDER",
    "IDEMSIM_TRACE",
    "IDEMSIM_OWNER",
];

impl Target {
    /// Whether a controlled round puts a proxy between the servers and a service.
    pub fn proxied(&self) -> bool {
        self.services.iter().any(|s| s.proxy.is_some())
    }

    /// Load a target file.
    pub fn load(path: &Path) -> Result<Target, InputError> {
        let src = read_file(path, "target")?;
        Self::parse(path, &src)
    }

    /// Parse target text; `path` names it in errors and anchors relative paths.
    pub fn parse(path: &Path, src: &str) -> Result<Target, InputError> {
        let file = Source::new(path, src);
        let f: TargetFile = file.toml()?;
        if !is_kebab(f.name.get_ref()) {
            return Err(file.err(f.name.span(), "expected a kebab-case name (a-z, 0-9, -)"));
        }
        if f.command.get_ref().is_empty() || f.command.get_ref()[0].is_empty() {
            return Err(file.err(f.command.span(), "expected a program and its arguments"));
        }
        for q in std::iter::once(&f.database.rows).chain(f.database.keys.as_ref()) {
            if !q.get_ref().trim_start().to_ascii_lowercase().starts_with("select") {
                return Err(file.err(q.span(), "expected a SELECT query"));
            }
        }
        if let Some(name) = f.env.keys().find(|k| RESERVED.contains(&k.as_str())) {
            return Err(InputError::file(path, format!("env sets `{name}`, which idemsim sets")));
        }
        let services = services(&file, &f.service)?;
        let listen = listen(&file, f.listen.as_ref())?;
        let picks_port = matches!(listen, Listen::Port { .. });
        let known = |n: &str| launch_name(n, picks_port, &services);
        for arg in f.command.get_ref().iter().chain(f.env.values()) {
            Template::parse(arg, &known).map_err(|e| file.err(f.command.span(), e))?;
        }
        check_reset(&file, f.reset.as_ref(), &services)?;
        let requests = f
            .request
            .iter()
            .map(|r| super::mapping::RequestMap::parse(&file, r))
            .collect::<Result<Vec<_>, _>>()?;
        let (row_user, attribute) = choices(&file, &f.database)?;
        let max_rows = max_rows(&file, &f.database.max_rows)?;
        let stack = f.stack.as_ref().map(|s| stack_of(&file, path, s)).transpose()?;
        let start_timeout_us = start_timeout(&file, &f.start_timeout_ms)?;
        Ok(Target {
            name: f.name.into_inner(),
            model: f.model,
            stack,
            description: f.description,
            path: path.to_path_buf(),
            command: f.command.into_inner(),
            env: f.env.into_iter().collect(),
            start_timeout_us,
            rows_sql: f.database.rows.into_inner(),
            row_user,
            attribute,
            keys_sql: f.database.keys.map(Spanned::into_inner),
            delete_keys_sql: f.database.delete_keys,
            max_rows,
            listen,
            services,
            reset: f.reset.map(Spanned::into_inner).unwrap_or_default(),
            requests,
        })
    }

    /// The folder relative paths resolve against.
    pub fn dir(&self) -> PathBuf {
        match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }
}

/// A name the command, environment and reset commands may use: `${process}` (1, 2, …),
/// `${db}` (the database file), `${port}` (where idemsim picks the port) and
/// `${service.NAME.port}`.
pub fn launch_name(n: &str, port: bool, services: &[Service]) -> bool {
    matches!(n, "process" | "db")
        || (port && n == "port")
        || n.strip_prefix("service.")
            .and_then(|r| r.strip_suffix(".port"))
            .is_some_and(|s| services.iter().any(|x| x.name == s))
}

/// The most rows a target's query may return, unless its `[database] max_rows` says.
pub const DEFAULT_MAX_ROWS: u64 = 100_000;

/// A target's `stack`: a shipped stack's name, or a stack file's path as seen from the
/// working directory (it is written relative to the target file).
fn stack_of(file: &Source, path: &Path, s: &Spanned<String>) -> Result<String, InputError> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    crate::model::named_stack(s.get_ref(), &dir)
        .map_err(|e| file.err(s.span(), format!("stack: {e}")))?;
    let spec = s.get_ref();
    Ok(if is_kebab(spec) { spec.clone() } else { dir.join(spec).display().to_string() })
}

/// `[database] max_rows`: [`DEFAULT_MAX_ROWS`] when absent, else 1 to 10 000 000.
fn max_rows(file: &Source, v: &Option<Spanned<i64>>) -> Result<u64, InputError> {
    match v {
        None => Ok(DEFAULT_MAX_ROWS),
        Some(n) if (1..=10_000_000).contains(n.get_ref()) => Ok(*n.get_ref() as u64),
        Some(n) => Err(file.err(n.span(), "max_rows: expected 1 to 10000000")),
    }
}

/// The longest a process may take to be ready (µs): two minutes.
const MAX_START_US: u64 = 120_000_000;

/// `start_timeout_ms`: 10 s when absent, from 100 ms to two minutes, or an error at the value.
fn start_timeout(file: &Source, v: &Option<Spanned<f64>>) -> Result<u64, InputError> {
    let us = file.ms("start_timeout_ms", v, 10_000_000, 100_000)?;
    match v {
        Some(v) if us > MAX_START_US => Err(file.err(
            v.span(),
            format!("start_timeout_ms = {}: expected at most 120000 (two minutes)", v.get_ref()),
        )),
        _ => Ok(us),
    }
}

fn check_reset(
    file: &Source,
    reset: Option<&Spanned<Vec<Vec<String>>>>,
    services: &[Service],
) -> Result<(), InputError> {
    let Some(reset) = reset else { return Ok(()) };
    for cmd in reset.get_ref() {
        if cmd.first().is_none_or(|p| p.is_empty()) {
            return Err(file.err(reset.span(), "expected a program and its arguments"));
        }
        for arg in cmd {
            Template::parse(arg, &|n| launch_name(n, false, services))
                .map_err(|e| file.err(reset.span(), e))?;
        }
    }
    Ok(())
}

/// `[database] user` and `attribute`.
fn choices(file: &Source, d: &DatabaseFile) -> Result<(RowUser, Attribute), InputError> {
    let row_user = match d.user.as_ref().map(|u| (u.get_ref().as_str(), u.span())) {
        None | Some(("column", _)) => RowUser::Column,
        Some(("none", _)) => RowUser::None,
        Some((_, span)) => return Err(file.err(span, "expected \"column\" or \"none\"")),
    };
    let attribute = match d.attribute.as_ref().map(|a| (a.get_ref().as_str(), a.span())) {
        None | Some(("intent", _)) => Attribute::Intent,
        Some(("body", _)) => Attribute::Body,
        Some((_, span)) => return Err(file.err(span, "expected \"intent\" or \"body\"")),
    };
    Ok((row_user, attribute))
}

fn services(file: &Source, list: &[ServiceFile]) -> Result<Vec<Service>, InputError> {
    let mut out: Vec<Service> = Vec::new();
    for s in list {
        let name = s.name.get_ref();
        if !is_kebab(name) || out.iter().any(|o| &o.name == name) {
            return Err(file.err(s.name.span(), "expected a kebab-case name no other service has"));
        }
        if s.command.get_ref().first().is_none_or(|p| p.is_empty()) {
            return Err(file.err(s.command.span(), "expected a program and its arguments"));
        }
        for arg in s.command.get_ref() {
            Template::parse(arg, &|n| n == "port").map_err(|e| file.err(s.command.span(), e))?;
        }
        let start_timeout_us = start_timeout(file, &s.start_timeout_ms)?;
        if let Some(p) = &s.proxy
            && p.get_ref() != "resp"
        {
            return Err(file.err(p.span(), "expected \"resp\" (Redis's protocol)"));
        }
        out.push(Service {
            name: name.clone(),
            command: s.command.get_ref().clone(),
            start_timeout_us,
            proxy: s.proxy.as_ref().map(|p| p.get_ref().clone()),
        });
    }
    Ok(out)
}

fn listen(file: &Source, l: Option<&ListenFile>) -> Result<Listen, InputError> {
    let Some(l) = l else { return Ok(Listen::Line) };
    if let Some(e) = &l.env {
        let ok = !e.get_ref().is_empty()
            && e.get_ref().bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !RESERVED.contains(&e.get_ref().as_str());
        if !ok {
            return Err(file.err(e.span(), "expected an environment variable's name (A-Z, 0-9, _)"));
        }
    }
    if let Some(p) = &l.probe
        && !p.get_ref().starts_with('/')
    {
        return Err(file.err(p.span(), "expected a path starting with `/` (sent as a GET)"));
    }
    Ok(Listen::Port {
        env: l.env.as_ref().map(|e| e.get_ref().clone()),
        probe: l.probe.as_ref().map(|p| p.get_ref().clone()),
    })
}

/// Find a target by name (under `targets/`) or path.
pub fn find(name_or_path: &str) -> Result<Target, InputError> {
    let p = Path::new(name_or_path);
    if name_or_path.ends_with(".toml") || p.components().count() > 1 {
        return Target::load(p);
    }
    let mut tried = Vec::new();
    for dir in [PathBuf::from("targets"), PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("targets")]
    {
        let f = dir.join(format!("{name_or_path}.toml"));
        if f.is_file() {
            return Target::load(&f);
        }
        tried.push(f.display().to_string());
    }
    Err(InputError::file(
        p,
        format!("no target `{name_or_path}` (looked for {})", tried.join(", ")),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "check-first"
model = "check-first"
command = ["node", "node/server.mjs"]
env = { VARIANT = "check-first" }
[database]
rows = "SELECT id, user, operation, item, qty, intent FROM rows ORDER BY id"
keys = "SELECT user, operation, key, status FROM keys"
"#;

    #[test]
    fn a_target_file_loads_and_a_bad_one_is_located() {
        let t = Target::parse(Path::new("targets/t.toml"), GOOD).unwrap();
        assert_eq!((t.name.as_str(), t.start_timeout_us), ("check-first", 10_000_000));
        assert_eq!(t.dir(), PathBuf::from("targets"));
        let bad = GOOD.replace("SELECT user", "DELETE user");
        let e = Target::parse(Path::new("t.toml"), &bad).unwrap_err().to_string();
        assert!(e.contains("t.toml:8:8:") && e.contains("expected a SELECT query"), "{e}");
        let bad = format!("start_timeout_ms = 3600000\n{GOOD}");
        let e = Target::parse(Path::new("t.toml"), &bad).unwrap_err().to_string();
        assert!(e.contains("t.toml:1:") && e.contains("expected at most 120000"), "{e}");
        let bad = GOOD.replace("VARIANT", "IDEMSIM_DB");
        let e = Target::parse(Path::new("t.toml"), &bad).unwrap_err().to_string();
        assert!(e.contains("`IDEMSIM_DB`"), "{e}");
    }
}
