//! Names ↔ files: finding models and sims by file path or by name under `models/` and
//! `sims/`, and naming them back on a command line (replay commands).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::input::InputError;
use crate::model::Model;
use crate::scenario::Sim;

/// The project root: the current directory if it has `models/`, else the crate's own folder.
pub fn root() -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    if cwd.join("models").is_dir() && cwd.join("sims").is_dir() {
        cwd
    } else {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }
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
    let root = root();
    p.strip_prefix(&root).unwrap_or(p).display().to_string()
}

/// A model by file path or by name (`models/NAME.toml`).
pub fn model(name_or_path: &str) -> Result<Arc<Model>, InputError> {
    let p = Path::new(name_or_path);
    // Anything at that path is meant as the file: a folder or a device gets its own error.
    if p.exists() {
        return Model::load(p).map(Arc::new);
    }
    let by_name = root().join("models").join(format!("{name_or_path}.toml"));
    if by_name.is_file() {
        return Model::load(&by_name).map(Arc::new);
    }
    let known: Vec<String> = all_model_paths()
        .iter()
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    // Name the models that look like what was asked for, or all of them if few.
    let asked = name_or_path.to_lowercase();
    let mut near: Vec<&String> = known
        .iter()
        .filter(|k| asked.len() >= 3 && (k.contains(asked.as_str()) || asked.contains(k.as_str())))
        .collect();
    // Those that start with what was asked first, shortest first.
    near.sort_by_key(|k| (!k.starts_with(asked.as_str()), k.len(), k.as_str()));
    let msg = if known.join(", ").len() <= 240 {
        format!("no such model file or name; known models: {}", known.join(", "))
    } else if near.is_empty() {
        format!("no such model file or name; `idemsim list` names all {} models", known.len())
    } else {
        let near: Vec<&str> = near.iter().map(|s| s.as_str()).collect();
        format!(
            "no such model file or name; did you mean {}? (`idemsim list` names all {})",
            near.join(", "),
            known.len()
        )
    };
    Err(InputError::file(p, msg))
}

/// A sim by file path, or by name (file stem, or path under `sims/` without `.toml`).
pub fn sim(name_or_path: &str) -> Result<Arc<Sim>, InputError> {
    let p = Path::new(name_or_path);
    if p.exists() {
        return Sim::load(p).map(Arc::new);
    }
    let sims = root().join("sims");
    let direct = sims.join(format!("{name_or_path}.toml"));
    if direct.is_file() {
        return Sim::load(&direct).map(Arc::new);
    }
    let matches: Vec<PathBuf> = files_under(&sims)
        .into_iter()
        .filter(|f| f.file_stem().is_some_and(|s| s == name_or_path))
        .collect();
    match matches.as_slice() {
        [one] => Sim::load(one).map(Arc::new),
        [] => Err(InputError::file(p, "no such sim file or name (see `idemsim list`)")),
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
    let p = if p.exists() { p.to_path_buf() } else { root().join("sims").join(path) };
    if !p.exists() {
        return Err(InputError::file(Path::new(path), "no such sim file or folder"));
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
    files_under(&root().join("models"))
}

/// Every model under `models/`, sorted by file name.
pub fn all_models() -> Result<Vec<Arc<Model>>, InputError> {
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
/// file, else its path.
pub fn cli_name(model: &Model) -> String {
    let by_name = root().join("models").join(format!("{}.toml", model.name));
    match (by_name.canonicalize(), model.path.canonicalize()) {
        (Ok(a), Ok(b)) if a == b => model.name.clone(),
        _ => display_path(&model.path),
    }
}

/// The command that replays `seed` of `sim` × `model` with its trace.
pub fn replay_for(sim: &Sim, model: &Model, seed: u64) -> String {
    replay_command(&display_path(&sim.path), &cli_name(model), seed)
}

/// The command that replays one seed of a cell with its trace, from the sim's path as shown
/// and the model's `--model` name. Each is quoted for a shell when it needs to be
/// ([`crate::text::shell_arg`]): the command pastes as exactly these arguments, and an
/// ordinary path or name prints as it is. A sim path starting with `-` gets `./` before it.
pub fn replay_command(sim_path: &str, model: &str, seed: u64) -> String {
    use crate::text::shell_arg;
    // A relative path that starts with `-` would be read as an option.
    let sim_path =
        if sim_path.starts_with('-') { format!("./{sim_path}") } else { sim_path.to_string() };
    format!(
        "cargo run --release -- run {} --model {} --seed {seed} --trace",
        shell_arg(&sim_path),
        shell_arg(model)
    )
}
