//! The conventions of a Rust command-line tool (issue 24): shell completions and man pages
//! generated from the parser itself, `compare`, and the CI gate of a baseline.

use super::idemsim;

#[test]
fn completions_and_man_pages_come_from_the_parser() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let (code, out, err) = idemsim(&["completions", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        // Every command is completed.
        for cmd in ["run", "sweep", "matrix", "merge", "shrink", "explain", "compare"] {
            assert!(out.contains(cmd), "{shell} completions lack {cmd}");
        }
    }
    let (code, _, err) = idemsim(&["completions", "tcsh"]);
    assert_eq!(code, 2, "{err}");
    let (code, page, _) = idemsim(&["man"]);
    assert_eq!(code, 0);
    assert!(page.starts_with(".ie") && page.contains(".TH idemsim 1"), "{page}");
    let dir = tempfile_dir("man");
    let (code, _, err) = idemsim(&["man", "--dir", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let sweep = std::fs::read_to_string(dir.join("idemsim-sweep.1")).unwrap();
    assert!(sweep.contains(".TH idemsim-sweep 1") && sweep.contains("\\-\\-seeds"), "{sweep}");
}

#[test]
fn compare_calls_a_difference_only_when_the_seeds_do() {
    let (code, out, err) = idemsim(&[
        "compare",
        "check-first",
        "transactional",
        "--sims",
        "article/10-failure-before-commit.toml,article/01-same-key-same-content.toml",
    ]);
    assert_eq!(code, 0, "{err}");
    let line = |sim: &str, rate: &str| {
        out.lines()
            .find(|l| l.starts_with(sim) && l.contains(rate))
            .unwrap_or_else(|| panic!("no {sim} {rate} line in\n{out}"))
            .to_string()
    };
    // Case 10: check-first fails on every seed, transactional on none.
    assert!(line("10-failure", "unsafe").contains("check-first worse"), "{out}");
    assert!(line("01-same-key", "unsafe").ends_with("same"), "{out}");
    let (code, json, _) = idemsim(&[
        "compare",
        "check-first",
        "transactional",
        "--sims",
        "article/10-failure-before-commit.toml",
        "--seeds",
        "0..3",
        "--json",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let unsafe_rate = &v["sims"][0]["rates"][0];
    assert_eq!(unsafe_rate["verdict"], "not-significant", "3 seeds cannot tell: {v}");
    assert!(unsafe_rate["seeds_to_settle"].as_u64().unwrap() > 3, "{v}");
}

/// A fresh folder under the system's temporary folder.
pub(super) fn tempfile_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("idemsim-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
