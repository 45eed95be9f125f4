//! Names ↔ files: finding models and sims by file path or by name under `models/` and
//! `sims/`, and naming them back on a command line (replay commands).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::OnceLock;

use crate::input::InputError;
use crate::library::Library;
use crate::model::Model;
use crate::scenario::Sim;

/// The project given with `--project` (set once by the command line, before any lookup).
pub static PROJECT: OnceLock<PathBuf> = OnceLock::new();

/// The lookup roots given with `--models-dir` and `--sims-dir` (set once by the command line,
/// before any lookup): searched before the project and the shipped library.
pub static ROOTS: OnceLock<(Vec<PathBuf>, Vec<PathBuf>)> = OnceLock::new();

/// The folders names are looked up in ([`crate::library`]): the lookup roots ([`ROOTS`]), the
/// project found from the current folder (or `--project`), then the shipped library.
/// Discovered once per process.
pub fn library() -> Result<&'static Library, InputError> {
    static LIB: OnceLock<Result<Library, InputError>> = OnceLock::new();
    LIB.get_or_init(|| {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        let (models, sims) = ROOTS.get().cloned().unwrap_or_default();
        Library::discover(&cwd, PROJECT.get().map(PathBuf::as_path))?.with_roots(&models, &sims)
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// The root paths are shown relative to: the project's, else the shipped library's (a checkout
/// is both). If the library cannot be found, the current folder.
pub fn root() -> PathBuf {
    match library() {
        Ok(l) => l.project_root.clone().or_else(|| l.shipped.clone()).unwrap_or_default(),
        Err(_) => PathBuf::from("."),
    }
}

/// The model folders, project first (none if the library cannot be found: the lookup then
/// says so).
pub fn model_dirs() -> Vec<PathBuf> {
    library().map(|l| l.models.clone()).unwrap_or_default()
}

/// The sim folders, project first.
pub fn sim_dirs() -> Vec<PathBuf> {
    library().map(|l| l.sims.clone()).unwrap_or_default()
}

fn toml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            toml_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "toml") {
            out.push(p);
        }
    }
}

/// Every `.toml` file under a folder, recursively, sorted by path.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    toml_files(dir, &mut out);
    out
}

/// Shorten a path for display and replay commands: relative to the root when inside it.
pub fn display_path(p: &Path) -> String {
    let shipped = library().ok().and_then(|l| l.shipped.clone());
    [Some(root()), shipped]
        .into_iter()
        .flatten()
        .find_map(|r| p.strip_prefix(&r).ok().map(|q| q.display().to_string()))
        .unwrap_or_else(|| p.display().to_string())
}

/// A model by file path or by name (`models/NAME.toml`); `MODEL@STACK` is that model on
/// another stack (a shipped stack's name, or a stack file's path from the working directory).
pub fn model(name_or_path: &str) -> Result<Arc<Model>, InputError> {
    if !Path::new(name_or_path).exists()
        && let Some((base, spec)) = name_or_path.rsplit_once('@')
        && !base.is_empty()
    {
        let stack = crate::model::named_stack(spec, Path::new("."))?;
        return Ok(Arc::new(plain_model(base)?.on_stack(spec, stack)?));
    }
    plain_model(name_or_path)
}

fn plain_model(name_or_path: &str) -> Result<Arc<Model>, InputError> {
    let p = Path::new(name_or_path);
    // Anything at that path is meant as the file: a folder or a device gets its own error.
    if p.exists() {
        return Model::load(p).map(Arc::new);
    }
    library()?;
    let named = format!("{name_or_path}.toml");
    if let Some(by_name) = model_dirs().iter().map(|d| d.join(&named)).find(|f| f.is_file()) {
        return Model::load(&by_name).map(Arc::new);
    }
    // By the name the file declares (`name = "…"`, what `list` and the tables show), when it
    // differs from the file's.
    let declared = all_model_paths()
        .into_iter()
        .filter_map(|f| Model::load(&f).ok())
        .find(|m| m.name == name_or_path);
    if let Some(m) = declared {
        return Ok(Arc::new(m));
    }
    let known: Vec<String> = all_model_paths()
        .iter()
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    Err(InputError::file(p, not_found("model", name_or_path, &known)))
}

/// The edit distance between two names (insertions, deletions, substitutions of characters).
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// "no such KIND file or name", with the known names that look like what was asked for (or
/// all of them if few).
fn not_found(kind: &str, asked: &str, known: &[String]) -> String {
    let asked = asked.to_lowercase();
    let mut near: Vec<&String> = known
        .iter()
        .filter(|k| {
            asked.len() >= 3
                && (k.contains(asked.as_str())
                    || asked.contains(k.as_str())
                    || edits(k, &asked) <= 2)
        })
        .collect();
    // Those that start with what was asked first, shortest first.
    near.sort_by_key(|k| (!k.starts_with(asked.as_str()), k.len(), k.as_str()));
    near.dedup();
    if known.join(", ").len() <= 240 {
        format!("no such {kind} file or name; known {kind}s: {}", known.join(", "))
    } else if near.is_empty() {
        format!("no such {kind} file or name; `idemsim list` names all {} {kind}s", known.len())
    } else {
        let near: Vec<&str> = near.iter().map(|s| s.as_str()).collect();
        format!(
            "no such {kind} file or name; did you mean {}? (`idemsim list` names all {})",
            near.join(", "),
            known.len()
        )
    }
}

/// A sim by file path, or by name (file stem, or path under `sims/` without `.toml`).
pub fn sim(name_or_path: &str) -> Result<Arc<Sim>, InputError> {
    let p = Path::new(name_or_path);
    if p.exists() {
        return Sim::load(p).map(Arc::new);
    }
    let lib = library()?;
    let named = format!("{name_or_path}.toml");
    // `NAME`, a path under a sim folder (`article/01-….toml`), or a path as shown
    // (`sims/article/01-….toml`, under a library root).
    let roots = lib.project_root.iter().chain(lib.shipped.iter());
    if let Some(direct) = sim_dirs()
        .iter()
        .flat_map(|d| [d.join(&named), d.join(name_or_path)])
        .chain(roots.map(|r| r.join(name_or_path)))
        .find(|f| f.is_file())
    {
        return Sim::load(&direct).map(Arc::new);
    }
    // By file stem, in the first folder that has it (the project's shadow the shipped ones).
    let matches: Vec<PathBuf> = sim_dirs()
        .iter()
        .map(|d| {
            files_under(d)
                .into_iter()
                .filter(|f| f.file_stem().is_some_and(|s| s == name_or_path))
                .collect::<Vec<_>>()
        })
        .find(|m| !m.is_empty())
        .unwrap_or_default();
    match matches.as_slice() {
        [one] => Sim::load(one).map(Arc::new),
        [] => {
            let known: Vec<String> = sim_dirs()
                .iter()
                .flat_map(|d| files_under(d))
                .filter_map(|f| f.file_stem().map(|s| s.to_string_lossy().into_owned()))
                .collect();
            Err(InputError::file(p, not_found("sim", name_or_path, &known)))
        }
        many => Err(InputError::file(
            p,
            format!(
                "ambiguous sim name; candidates: {}",
                many.iter().map(|m| display_path(m)).collect::<Vec<_>>().join(", ")
            ),
        )),
    }
}

/// Every sim file under a path (a file, or a folder searched recursively).
pub fn sims_at(path: &str) -> Result<Vec<Arc<Sim>>, InputError> {
    let p = Path::new(path);
    let p = if p.exists() {
        p.to_path_buf()
    } else {
        // Under a sim folder; or, as paths are shown, under a library root (`sims/...`).
        let lib = library()?;
        let roots = lib.project_root.iter().chain(lib.shipped.iter());
        sim_dirs()
            .iter()
            .map(|d| d.join(path))
            .chain(roots.map(|r| r.join(path)))
            .find(|c| c.exists())
            .unwrap_or_else(|| root().join("sims").join(path))
    };
    if !p.exists() {
        // Not a path: a sim's name, as `run` takes it.
        return match sim(path) {
            Ok(one) => Ok(vec![one]),
            Err(_) => Err(InputError::file(Path::new(path), "no such sim file, folder or name")),
        };
    }
    if !p.is_dir() {
        return Ok(vec![Arc::new(Sim::load(&p)?)]);
    }
    let files = files_under(&p);
    if files.is_empty() {
        return Err(InputError::file(&p, "folder holds no .toml sim files"));
    }
    files.iter().map(|f| Sim::load(f).map(Arc::new)).collect()
}

/// Every model file under the catalogue's `models/` folder (recursively, sorted).
pub fn all_model_paths() -> Vec<PathBuf> {
    // A project's model shadows a shipped one of the same file name.
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for d in model_dirs() {
        for f in files_under(&d) {
            if seen.insert(f.file_name().map(|n| n.to_os_string())) {
                out.push(f);
            }
        }
    }
    out.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    out
}

/// Every model under `models/`, sorted by file name.
pub fn all_models() -> Result<Vec<Arc<Model>>, InputError> {
    library()?;
    let models: Result<Vec<_>, _> =
        all_model_paths().iter().map(|p| Model::load(p).map(Arc::new)).collect();
    models.and_then(unique_names)
}

/// Models loaded together name the columns of one table: two with one name are refused.
pub fn unique_names(models: Vec<Arc<Model>>) -> Result<Vec<Arc<Model>>, InputError> {
    for (i, m) in models.iter().enumerate() {
        if let Some(other) = models[..i].iter().find(|o| o.name == m.name) {
            if other.path == m.path {
                return Err(InputError::file(&m.path, "model given twice"));
            }
            return Err(InputError::file(
                &m.path,
                format!(
                    "model name `{}` is also the name of {}; names must be unique (set `name`)",
                    m.name,
                    display_path(&other.path)
                ),
            ));
        }
    }
    Ok(models)
}

/// The reference article's three variants, in its order.
pub const REFERENCE_MODELS: [&str; 3] = ["no-key", "check-first", "transactional"];

/// The three reference variants of the article, in the article's order, then the others.
pub fn ordered_models(mut models: Vec<Arc<Model>>) -> Vec<Arc<Model>> {
    models.sort_by_key(|m| {
        (
            REFERENCE_MODELS.iter().position(|f| *f == m.name).unwrap_or(REFERENCE_MODELS.len()),
            m.name.clone(),
        )
    });
    models
}

/// How to name a model on a command line: its name when `models/<name>.toml` is this very
/// file, else (also for a model found through `--models-dir`) its path.
pub fn cli_name(model: &Model) -> String {
    let base = cli_base_name(model);
    match &model.on_stack {
        Some(spec) => format!("{base}@{spec}"),
        None => base,
    }
}

fn cli_base_name(model: &Model) -> String {
    // A name found through `--models-dir` would not resolve without that flag: the path does.
    let roots = ROOTS.get().map(|r| r.0.as_slice()).unwrap_or_default();
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    if roots.iter().any(|r| canon(&model.path).starts_with(canon(r))) {
        return display_path(&model.path);
    }
    let plain = model.name.rsplit_once('@').filter(|_| model.on_stack.is_some());
    let name = plain.map_or(model.name.as_str(), |(n, _)| n);
    let named = format!("{name}.toml");
    let by_name = model_dirs().into_iter().map(|d| d.join(&named)).find(|f| f.is_file());
    match (by_name.unwrap_or_default().canonicalize(), model.path.canonicalize()) {
        (Ok(a), Ok(b)) if a == b => name.to_string(),
        _ => display_path(&model.path),
    }
}

/// The command that replays `seed` of `sim` × `model` with its trace.
pub fn replay_for(sim: &Sim, model: &Model, seed: u64) -> String {
    replay_command(&display_path(&sim.path), &cli_name(model), seed)
}

/// How replay commands start: set once by the command line to the way this binary was run
/// ([`invoked_as`]); `cargo run --release --` when unset (a checkout, the library's callers).
pub static INVOKED: OnceLock<String> = OnceLock::new();

/// The prefix that runs this binary again in a printed command ([`INVOKED`]).
pub fn invocation() -> &'static str {
    INVOKED.get().map_or("cargo run --release --", String::as_str)
}

/// The command line's prefix that runs this binary again, from how it was run: under cargo
/// (`CARGO` set, as `cargo run` and `cargo test` set it) `cargo run --release --`; a bare name
/// found on PATH (`idemsim`) as it is; a path as given, quoted for a shell. `IDEMSIM_INVOKED`
/// overrides it (shown as text, made printable: the environment is untrusted).
pub fn invoked_as(argv0: Option<&str>, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    if let Some(v) = env("IDEMSIM_INVOKED") {
        return Some(crate::text::printable(&v));
    }
    if env("CARGO").is_some() {
        return None;
    }
    let a = argv0?;
    Some(if a.contains('/') { crate::text::shell_arg(a) } else { crate::text::printable(a) })
}

/// The command that replays one seed of a cell with its trace (starting as [`INVOKED`] says), from the sim's path as shown
/// and the model's `--model` name. Each is quoted for a shell when it needs to be
/// ([`crate::text::shell_arg`]): the command pastes as exactly these arguments, and an
/// ordinary path or name prints as it is. A sim path starting with `-` gets `./` before it.
pub fn replay_command(sim_path: &str, model: &str, seed: u64) -> String {
    replay_explored(sim_path, model, seed, None)
}

/// [`replay_command`] of an explored run: `--explore STRATEGY` after the seed (None: the
/// calibrated command).
pub fn replay_explored(sim_path: &str, model: &str, seed: u64, explore: Option<&str>) -> String {
    use crate::text::shell_arg;
    // A relative path that starts with `-` would be read as an option.
    let sim_path =
        if sim_path.starts_with('-') { format!("./{sim_path}") } else { sim_path.to_string() };
    let prefix = invocation();
    let explore = explore.map_or(String::new(), |s| format!(" --explore {}", shell_arg(s)));
    format!(
        "{prefix} run {} --model {} --seed {seed}{explore} --trace",
        shell_arg(&sim_path),
        shell_arg(model)
    )
}
