//! Where models and sims come from when they are named rather than given as paths: the user's
//! project first, then the library shipped inside the binary.
//!
//! - **A project** is a folder with an `idemsim.toml` (found in the current folder or the
//!   nearest parent, as cargo finds `Cargo.toml`), naming its model and sim folders:
//!
//!   ```toml
//!   [project]
//!   models = ["designs"]        # folders of model files, relative to idemsim.toml
//!   sims = ["scenarios"]        # folders of sim files
//!   shipped = true              # also the shipped models and sims (default)
//!   ```
//!
//!   A folder with both `models/` and `sims/` (this repository, or a copy of its layout) is a
//!   project without a file. `--project PATH` (a folder or an `idemsim.toml`) names one
//!   explicitly.
//! - **Lookup roots** `--models-dir DIR` and `--sims-dir DIR` (global, repeatable) come before
//!   the project and the shipped library: folders of model or sim files used by name without a
//!   project file ([`Library::with_roots`]).
//! - **The shipped library** (`models/`, `sims/`, `stacks/`, `calibration/` of the build) is embedded in
//!   the binary, so an installed `idemsim` (`cargo install`, the container image) runs
//!   anywhere. It is used in place when the build's own folder still holds the same files (a
//!   checkout), else written once to a cache folder named by its content hash
//!   (`$XDG_CACHE_HOME/idemsim/`, else `~/.cache/idemsim/`, else the temporary folder), checked
//!   byte for byte before every use, so a stale or tampered copy is rewritten, never trusted.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use include_dir::{Dir, include_dir};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::input::InputError;

/// The shipped models, sims, stack profiles and calibration profiles, as built.
static SHIPPED: [(&str, Dir<'static>); 4] = [
    ("models", include_dir!("$CARGO_MANIFEST_DIR/models")),
    ("sims", include_dir!("$CARGO_MANIFEST_DIR/sims")),
    ("stacks", include_dir!("$CARGO_MANIFEST_DIR/stacks")),
    ("calibration", include_dir!("$CARGO_MANIFEST_DIR/calibration")),
];

/// A shipped stack profile by name (`stacks/NAME.toml`, embedded in the binary, so a model
/// names it wherever it is run): its text, or None.
pub fn shipped_stack(name: &str) -> Option<&'static str> {
    let (_, stacks) = SHIPPED.iter().find(|(top, _)| *top == "stacks")?;
    stacks.get_file(format!("{name}.toml"))?.contents_utf8()
}

/// The names of the shipped stack profiles, sorted.
pub fn shipped_stack_names() -> Vec<&'static str> {
    let Some((_, stacks)) = SHIPPED.iter().find(|(top, _)| *top == "stacks") else {
        return Vec::new();
    };
    let mut names: Vec<&'static str> =
        stacks.files().filter_map(|f| f.path().to_str()?.strip_suffix(".toml")).collect();
    names.sort_unstable();
    names
}

/// The project file's name.
pub const PROJECT_FILE: &str = "idemsim.toml";

/// Every shipped file: (path relative to the library's root, bytes), sorted by path.
pub fn shipped_files() -> Vec<(String, &'static [u8])> {
    fn walk(d: &Dir<'static>, top: &str, out: &mut Vec<(String, &'static [u8])>) {
        for f in d.files() {
            out.push((format!("{top}/{}", f.path().display()), f.contents()));
        }
        for sub in d.dirs() {
            walk(sub, top, out);
        }
    }
    let mut out = Vec::new();
    for (top, d) in &SHIPPED {
        walk(d, top, &mut out);
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// SHA-256 over every shipped file's path and bytes: names the cache folder.
fn shipped_hash() -> String {
    let mut h = Sha256::new();
    for (p, b) in shipped_files() {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    }
    hex::encode(h.finalize())
}

/// Whether `dir` holds every shipped file byte for byte (extra files are allowed: a
/// checkout's own additions, which then belong to it, are not the shipped library's).
fn holds_shipped(dir: &Path) -> bool {
    shipped_files().iter().all(|(p, bytes)| {
        let f = dir.join(p);
        // Regular files only, never through a symlink planted in a shared cache.
        std::fs::symlink_metadata(&f).is_ok_and(|m| m.is_file())
            && std::fs::read(&f).is_ok_and(|b| b == *bytes)
    })
}

/// The folder the shipped library is read from (see the module's documentation).
pub fn shipped_root() -> Result<PathBuf, InputError> {
    static ROOT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    ROOT.get_or_init(|| {
        let built = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        if holds_shipped(&built) {
            return Ok(built);
        }
        extract(&cache_base()).map_err(|e| format!("cannot write the shipped models and sims: {e}"))
    })
    .clone()
    .map_err(|m| InputError::file(Path::new("<shipped library>"), m))
}

/// Where the cache lives: `$XDG_CACHE_HOME` or `$HOME/.cache` when absolute (a relative
/// value is ignored, as the XDG specification says), else the temporary folder.
fn cache_base() -> PathBuf {
    let abs = |v: Option<std::ffi::OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    abs(std::env::var_os("XDG_CACHE_HOME"))
        .or_else(|| abs(std::env::var_os("HOME")).map(|h| h.join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("idemsim")
}

/// Write the shipped files to `<cache>/shipped-<hash>/`: into a fresh private folder, then
/// renamed into place, so a reader never sees half a library; a folder already there that
/// does not hold the files exactly is replaced.
fn extract(base: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(base)?;
    let dest = base.join(format!("shipped-{}", &shipped_hash()[..16]));
    if holds_shipped(&dest) {
        return Ok(dest);
    }
    let tmp = base.join(format!(".tmp-{}-{}", std::process::id(), &shipped_hash()[..16]));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::DirBuilder::new().mode(0o700).create(&tmp)?;
    for (p, bytes) in shipped_files() {
        let f = tmp.join(&p);
        if let Some(parent) = f.parent() {
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(parent)?;
        }
        std::fs::write(&f, bytes)?;
    }
    if std::fs::symlink_metadata(&dest).is_ok() {
        // A stale or damaged copy (checked above): moved aside, then removed.
        let old = base.join(format!(".old-{}", std::process::id()));
        std::fs::rename(&dest, &old)?;
        let _ = std::fs::remove_dir_all(&old);
    }
    match std::fs::rename(&tmp, &dest) {
        Ok(()) => Ok(dest),
        // Another process put an identical copy in place first.
        Err(_) if holds_shipped(&dest) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(dest)
        }
        Err(e) => Err(e),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProjectFile {
    project: ProjectTable,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProjectTable {
    #[serde(default)]
    models: Vec<String>,
    #[serde(default)]
    sims: Vec<String>,
    #[serde(default = "yes")]
    shipped: bool,
}

fn yes() -> bool {
    true
}

/// The folders names are looked up in, in order (the project's, then the shipped ones).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Library {
    /// The project file, if the folders came from one.
    pub project_file: Option<PathBuf>,
    /// The project's root (the folder of its file, or the folder with models/ and sims/).
    pub project_root: Option<PathBuf>,
    /// Model folders, project first.
    pub models: Vec<PathBuf>,
    /// Sim folders, project first.
    pub sims: Vec<PathBuf>,
    /// The shipped library's root, when it is searched.
    pub shipped: Option<PathBuf>,
}

impl Library {
    /// Read a project file and its folders (each must exist), then the shipped library.
    pub fn from_file(file: &Path) -> Result<Library, InputError> {
        let src = crate::input::read_file(file, "project")?;
        let src_ref = crate::input::Source::new(file, &src);
        let p: ProjectFile = src_ref.toml()?;
        let root = file.parent().map(Path::to_path_buf).unwrap_or_default();
        let dirs = |names: &[String], what: &str| -> Result<Vec<PathBuf>, InputError> {
            names
                .iter()
                .map(|n| {
                    let d = root.join(n);
                    if d.is_dir() {
                        Ok(d)
                    } else {
                        Err(InputError::file(
                            file,
                            format!(
                                "project.{what}: `{}` is not a folder next to this file",
                                crate::text::shown(n)
                            ),
                        ))
                    }
                })
                .collect()
        };
        let models = dirs(&p.project.models, "models")?;
        let sims = dirs(&p.project.sims, "sims")?;
        Library::with_shipped(Some(file.to_path_buf()), Some(root), models, sims, p.project.shipped)
    }

    fn with_shipped(
        project_file: Option<PathBuf>,
        project_root: Option<PathBuf>,
        mut models: Vec<PathBuf>,
        mut sims: Vec<PathBuf>,
        shipped: bool,
    ) -> Result<Library, InputError> {
        let shipped = if shipped { Some(shipped_root()?) } else { None };
        if let Some(s) = &shipped {
            // A checkout is its own project and the shipped library at once: listed once.
            for (list, sub) in [(&mut models, "models"), (&mut sims, "sims")] {
                if !list.iter().any(|d| same_dir(d, &s.join(sub))) {
                    list.push(s.join(sub));
                }
            }
        }
        Ok(Library { project_file, project_root, models, sims, shipped })
    }

    /// The library seen from `cwd`: `explicit` (--project) if given, else the nearest
    /// `idemsim.toml`, else `cwd` if it has models/ and sims/, else the shipped library alone.
    pub fn discover(cwd: &Path, explicit: Option<&Path>) -> Result<Library, InputError> {
        if let Some(p) = explicit {
            let file = if p.is_dir() { p.join(PROJECT_FILE) } else { p.to_path_buf() };
            if !file.is_file() && p.is_dir() {
                return Library::folder(p);
            }
            return Library::from_file(&file);
        }
        for dir in cwd.ancestors() {
            let f = dir.join(PROJECT_FILE);
            if f.is_file() {
                return Library::from_file(&f);
            }
        }
        Library::folder(cwd)
    }

    /// Put folders named on the command line (`--models-dir`, `--sims-dir`) before every
    /// other, in the order given: each must be a folder; one already searched moves to the front.
    pub fn with_roots(
        mut self,
        models: &[PathBuf],
        sims: &[PathBuf],
    ) -> Result<Library, InputError> {
        for (list, given, flag) in
            [(&mut self.models, models, "--models-dir"), (&mut self.sims, sims, "--sims-dir")]
        {
            let mut front: Vec<PathBuf> = Vec::new();
            for d in given {
                if !d.is_dir() {
                    return Err(InputError::file(d, format!("{flag}: not a folder")));
                }
                if !front.iter().any(|f| same_dir(f, d)) {
                    front.push(d.clone());
                }
            }
            list.retain(|x| !front.iter().any(|f| same_dir(f, x)));
            front.append(list);
            *list = front;
        }
        Ok(self)
    }

    /// A folder with models/ and sims/ as a project without a file; else the shipped library.
    fn folder(dir: &Path) -> Result<Library, InputError> {
        let (m, s) = (dir.join("models"), dir.join("sims"));
        if m.is_dir() && s.is_dir() {
            return Library::with_shipped(None, Some(dir.to_path_buf()), vec![m], vec![s], true);
        }
        Library::with_shipped(None, None, vec![], vec![], true)
    }
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_file_is_embedded_and_the_checkout_is_used_in_place() {
        let files = shipped_files();
        assert!(files.iter().any(|(p, _)| p == "models/transactional.toml"));
        assert!(files.iter().filter(|(p, _)| p.starts_with("sims/")).count() > 40);
        assert_eq!(shipped_root().unwrap(), PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    }

    #[test]
    fn a_copy_that_differs_is_not_the_shipped_library() {
        let dir = std::env::temp_dir().join(format!("idemsim-lib-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (p, b) in shipped_files() {
            let f = dir.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, b).unwrap();
        }
        assert!(holds_shipped(&dir));
        std::fs::write(dir.join("models/transactional.toml"), "tampered").unwrap();
        assert!(!holds_shipped(&dir));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_library_is_written_once_and_a_tampered_copy_rewritten() {
        let base = std::env::temp_dir().join(format!("idemsim-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dest = extract(&base).unwrap();
        assert!(holds_shipped(&dest));
        assert_eq!(extract(&base).unwrap(), dest, "the same folder again");
        std::fs::write(dest.join("sims/article/01-same-key-same-content.toml"), "x").unwrap();
        assert!(!holds_shipped(&dest));
        assert_eq!(extract(&base).unwrap(), dest);
        assert!(holds_shipped(&dest), "rewritten");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn lookup_roots_come_first_once_each_and_must_be_folders() {
        let dir = std::env::temp_dir().join(format!("idemsim-roots-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("a")).unwrap();
        std::fs::create_dir_all(dir.join("b")).unwrap();
        let lib = Library::discover(&dir, None).unwrap();
        let shipped = lib.models.clone();
        let (a, b) = (dir.join("a"), dir.join("b"));
        let lib =
            lib.with_roots(&[b.clone(), a.clone(), b.clone()], std::slice::from_ref(&a)).unwrap();
        assert_eq!(lib.models[..2], [b.clone(), a.clone()], "in the order given, once each");
        assert_eq!(lib.models[2..], shipped[..], "then the others");
        assert_eq!(lib.sims[0], a);
        let e = Library::discover(&dir, None).unwrap().with_roots(&[], &[dir.join("c")]);
        let e = e.unwrap_err().to_string();
        assert!(e.contains("--sims-dir") && e.contains("not a folder"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_project_file_names_its_folders_and_bad_ones_are_located() {
        let dir = std::env::temp_dir().join(format!("idemsim-proj-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("designs/deep")).unwrap();
        std::fs::create_dir_all(dir.join("scen")).unwrap();
        let file = dir.join(PROJECT_FILE);
        std::fs::write(&file, "[project]\nmodels = [\"designs\"]\nsims = [\"scen\"]\n").unwrap();
        let lib = Library::discover(&dir.join("designs/deep"), None).unwrap();
        assert_eq!(lib.project_file.as_deref(), Some(file.as_path()));
        assert_eq!(lib.models[0], dir.join("designs"));
        assert_eq!(lib.models.len(), 2, "the project's, then the shipped models");
        std::fs::write(&file, "[project]\nmodels = [\"nope\"]\n").unwrap();
        let e = Library::discover(&dir, None).unwrap_err().to_string();
        assert!(e.contains("idemsim.toml") && e.contains("nope"), "{e}");
        std::fs::write(&file, "[project]\nmodel = [\"designs\"]\n").unwrap();
        let e = Library::discover(&dir, None).unwrap_err().to_string();
        assert!(e.contains(":2:") || e.contains("model"), "{e}");
        std::fs::write(&file, "[project]\nshipped = false\n").unwrap();
        let lib = Library::discover(&dir, None).unwrap();
        assert!(lib.models.is_empty() && lib.shipped.is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
