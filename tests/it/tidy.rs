//! Tidy checks (rust-analyzer style): the architecture's rules, read from the source text.
//! - only `src/world/` uses madsim or rusqlite;
//! - the leaves (`history`, `http`, `input`) use nothing from the crate but `units` and `text`,
//!   and `report` nothing but `units` and `http` (the reply's plain types);
//! - only `src/world/clock.rs` uses madsim's time (model time runs on a scale over it);
//! - the judges (`expect`, `oracle`) see only the sim, the model and the observation;
//! - the top-level modules form no cycle;
//! - `ARCHITECTURE.md` names every source file;
//! - no function passes 70 lines unless it is listed with its reason, and the list only
//!   shrinks (`LONG_FUNCTIONS`);
//! - no code file (Rust under `src/`, `tests/`, `benches/`, `examples/`; the scripts under
//!   `tools/`) passes 800 lines (`MAX_FILE_LINES`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The file's code without comments (line comments and doc comments).
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|l| match l.find("//") {
            // A `//` inside a string literal is rare in this code base; good enough for a lint.
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level module a file belongs to: `world` for `src/world/exec.rs`, `cli` for
/// `src/cli.rs`; None for `lib.rs` and `main.rs`.
fn module_of(path: &Path) -> Option<String> {
    let rel = path.strip_prefix(src()).unwrap();
    let first = rel.components().next()?.as_os_str().to_string_lossy().into_owned();
    let name = first.trim_end_matches(".rs").to_string();
    (name != "lib" && name != "main").then_some(name)
}

/// Top-level module → the top-level modules it uses (`crate::x`).
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let Some(m) = module_of(f) else { continue };
        let deps = g.entry(m.clone()).or_default();
        let text = code(f);
        for (i, _) in text.match_indices("crate::") {
            let rest = &text[i + "crate::".len()..];
            if let Some(used) = rest.strip_prefix('{') {
                // `use crate::{a, b::c}`: every first segment inside the braces.
                let inner = &used[..used.find('}').unwrap_or(used.len())];
                for part in inner.split(',') {
                    let name: String = part
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() && name != m {
                        deps.insert(name);
                    }
                }
            } else {
                let name: String =
                    rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if !name.is_empty() && name != m {
                    deps.insert(name);
                }
            }
        }
    }
    g
}

#[test]
fn only_the_world_uses_madsim_and_sqlite() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let world = src().join("world");
    // Real runs (src/real/) read the real target's database file: SQLite, never madsim.
    let real = src().join("real");
    let mut offenders = Vec::new();
    for f in &files {
        if f.starts_with(&world) {
            continue;
        }
        let text = code(f);
        let needles: &[&str] = if f.starts_with(&real) {
            &["madsim::", "use madsim"]
        } else {
            &["madsim::", "rusqlite::", "use madsim", "use rusqlite"]
        };
        for &needle in needles {
            if text.contains(needle) {
                offenders.push(format!("{}: {needle}", f.display()));
            }
        }
    }
    assert!(offenders.is_empty(), "madsim/rusqlite outside src/world/: {offenders:#?}");
}

#[test]
fn leaves_import_nothing_from_the_crate() {
    let g = graph();
    assert!(g["units"].is_empty(), "units must be a leaf, uses {:?}", g["units"]);
    assert!(g["text"].is_empty(), "text must be a leaf, uses {:?}", g["text"]);
    for leaf in ["history", "http", "input"] {
        let deps: Vec<&String> =
            g[leaf].iter().filter(|d| !["units", "text"].contains(&d.as_str())).collect();
        assert!(deps.is_empty(), "{leaf} must be a leaf, uses {deps:?}");
    }
    let deps: Vec<&String> =
        g["report"].iter().filter(|d| !["units", "http"].contains(&d.as_str())).collect();
    assert!(deps.is_empty(), "report may use only units and http, uses {deps:?}");
}

#[test]
fn only_the_clock_uses_madsim_time() {
    let mut files = Vec::new();
    rust_files(&src().join("world"), &mut files);
    let offenders: Vec<String> = files
        .iter()
        .filter(|f| !f.ends_with("clock.rs"))
        .filter(|f| {
            let text = code(f);
            text.contains("madsim::time") || text.contains("Duration::from_")
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(offenders.is_empty(), "madsim time outside world/clock.rs: {offenders:?}");
}

#[test]
fn judges_see_only_sim_model_and_observation() {
    let g = graph();
    let allowed: BTreeSet<&str> = ["scenario", "model", "report", "http", "input", "units"].into();
    for judge in ["expect", "oracle"] {
        let extra: Vec<&String> =
            g[judge].iter().filter(|d| !allowed.contains(d.as_str())).collect();
        assert!(extra.is_empty(), "{judge} may use only {allowed:?}, also uses {extra:?}");
    }
}

#[test]
fn top_level_modules_form_no_cycle() {
    let g = graph();
    // Depth-first search with colours; report the first cycle found as a path.
    fn visit<'a>(
        n: &'a str,
        g: &'a BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<&'a str, u8>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(2) => return None,
            Some(1) => {
                let from = path.iter().position(|p| *p == n).unwrap();
                let mut cycle: Vec<String> = path[from..].iter().map(|s| s.to_string()).collect();
                cycle.push(n.to_string());
                return Some(cycle);
            }
            _ => {}
        }
        state.insert(n, 1);
        path.push(n);
        for d in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(d, g, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(n, 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in g.keys() {
        if let Some(cycle) = visit(n, &g, &mut state, &mut Vec::new()) {
            panic!("module cycle: {}", cycle.join(" → "));
        }
    }
}

#[test]
fn architecture_md_names_every_source_file() {
    let arch =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
            .unwrap();
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let missing: Vec<String> = files
        .iter()
        .map(|f| f.strip_prefix(src().parent().unwrap()).unwrap().display().to_string())
        .filter(|rel| !arch.contains(&format!("`{rel}`")))
        .collect();
    assert!(missing.is_empty(), "ARCHITECTURE.md's code map lacks {missing:?}");
}

/// Functions over 70 lines (file under `src/`, name, its length now, why). The list only
/// shrinks, as TigerBeetle's tidy ratchet: a function not listed may not pass 70 lines, a
/// listed one may not grow past its length here, and one that has come back under 71 must
/// leave the list. A flat `match` table (one arm per variant) may stay long.
const LONG_FUNCTIONS: &[(&str, &str, usize, &str)] =
    &[("fuzz.rs", "edit", 81, "flat match: one arm per mutation")];

/// Every function of `src/` with its length in lines, from its `fn` line to the `}` at its
/// own indentation: (file under `src/`, name, lines).
fn function_lengths() -> Vec<(String, String, usize)> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut out = Vec::new();
    for f in files {
        let rel = f.strip_prefix(src()).unwrap().to_string_lossy().replace('\\', "/");
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let indent = &l[..l.len() - l.trim_start().len()];
            let mut rest = l.trim_start();
            for prefix in ["pub(crate) ", "pub(super) ", "pub ", "async ", "const ", "unsafe "] {
                rest = rest.strip_prefix(prefix).unwrap_or(rest);
            }
            let Some(sig) = rest.strip_prefix("fn ") else { continue };
            if l.trim_end().ends_with(';') {
                continue;
            }
            let name: String =
                sig.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            let close = format!("{indent}}}");
            let end = lines[i + 1..].iter().position(|x| x.trim_end() == close);
            if let Some(end) = end {
                out.push((rel.clone(), name, end + 2));
            }
        }
    }
    out
}

#[test]
fn long_functions_only_shrink() {
    let all = function_lengths();
    assert!(all.len() > 500, "the scan found the functions ({})", all.len());
    // Two functions of one name in one file (a method and a free function) count as their
    // longest.
    let mut longest: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (file, name, n) in all {
        let e = longest.entry((file, name)).or_default();
        *e = (*e).max(n);
    }
    let lengths: Vec<(String, String, usize)> =
        longest.into_iter().map(|((f, m), n)| (f, m, n)).collect();
    let mut problems = Vec::new();
    for (file, name, n) in &lengths {
        let listed = LONG_FUNCTIONS.iter().find(|(f, m, _, _)| f == file && m == name);
        match listed {
            None if *n > 70 => problems.push(format!("{file} {name}: {n} lines, not listed")),
            Some((_, _, max, _)) if n > max => {
                problems.push(format!("{file} {name}: {n} lines, grew past {max}"))
            }
            Some(_) if *n <= 70 => {
                problems.push(format!("{file} {name}: {n} lines now, take it off the list"))
            }
            _ => {}
        }
    }
    for (f, m, _, _) in LONG_FUNCTIONS {
        if !lengths.iter().any(|(file, name, _)| file == f && name == m) {
            problems.push(format!("{f} {m}: listed, not found"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The most lines a code file may have. A file that grows past it is split along a line a
/// reader can see from the folder listing (ARCHITECTURE.md "Where new code goes").
const MAX_FILE_LINES: usize = 800;

/// Every code file of the repository a reader maintains: Rust under `src/`, `tests/`,
/// `benches/` and `examples/`, and the scripts under `tools/` (Python, JavaScript, shell).
fn code_files() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for dir in ["src", "tests", "benches", "examples", "tools"] {
        let mut stack = vec![root.join(dir)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                if p.is_dir() {
                    // Installed packages and insta's snapshots are not this project's code.
                    if name != "node_modules" && name != "snapshots" {
                        stack.push(p);
                    }
                } else if ["rs", "py", "mjs", "js", "sh"]
                    .iter()
                    .any(|x| name.ends_with(&format!(".{x}")))
                {
                    out.push(p);
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn files_stay_under_800_lines() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let files = code_files();
    assert!(files.len() > 100, "the scan found the code files ({})", files.len());
    let long: Vec<String> = files
        .iter()
        .map(|f| (f, std::fs::read_to_string(f).unwrap().lines().count()))
        .filter(|(_, n)| *n > MAX_FILE_LINES)
        .map(|(f, n)| {
            format!(
                "{}: {n} lines (at most {MAX_FILE_LINES})",
                f.strip_prefix(&root).unwrap().display()
            )
        })
        .collect();
    assert!(long.is_empty(), "files over {MAX_FILE_LINES} lines, split them:\n{}", long.join("\n"));
}
