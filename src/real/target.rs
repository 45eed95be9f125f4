//! The target file (`targets/*.toml`, contract in `docs/targets.md`): how to start one real
//! server process and how to read what it stored.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

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
    /// The query that lists the key records.
    pub keys_sql: String,
    /// The statement that deletes every key record (the sims' delete-keys action).
    pub delete_keys_sql: Option<String>,
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
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DatabaseFile {
    rows: Spanned<String>,
    keys: Spanned<String>,
    delete_keys: Option<String>,
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
];

impl Target {
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
        for q in [&f.database.rows, &f.database.keys] {
            if !q.get_ref().trim_start().to_ascii_lowercase().starts_with("select") {
                return Err(file.err(q.span(), "expected a SELECT query"));
            }
        }
        if let Some(name) = f.env.keys().find(|k| RESERVED.contains(&k.as_str())) {
            return Err(InputError::file(path, format!("env sets `{name}`, which idemsim sets")));
        }
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let stack = match &f.stack {
            None => None,
            Some(s) => {
                crate::model::named_stack(s.get_ref(), &dir)
                    .map_err(|e| file.err(s.span(), format!("stack: {e}")))?;
                let spec = s.get_ref();
                Some(if is_kebab(spec) {
                    spec.clone()
                } else {
                    dir.join(spec).display().to_string()
                })
            }
        };
        let start_timeout_us =
            file.ms("start_timeout_ms", &f.start_timeout_ms, 10_000_000, 100_000)?.min(120_000_000);
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
            keys_sql: f.database.keys.into_inner(),
            delete_keys_sql: f.database.delete_keys,
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
        let bad = GOOD.replace("VARIANT", "IDEMSIM_DB");
        let e = Target::parse(Path::new("t.toml"), &bad).unwrap_err().to_string();
        assert!(e.contains("`IDEMSIM_DB`"), "{e}");
    }
}
