//! Text from files escaped for where it goes (shell, XML, Mermaid, terminal, Markdown), and
//! output files that follow the path given: `-` is stdout, a link is followed, a FIFO, a
//! device or a folder is refused (issue 23).

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use idemsim::sweep::{self, ViolationStat};

use super::{idemsim, model, root, sim};

/// A fresh folder for one test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("idemsim-escaping-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A failing sim (no-key duplicates on seed 0) copied to `path`.
fn failing_sim_at(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::copy(root().join("sims/article/01-same-key-same-content.toml"), path).unwrap();
}

/// A sim whose key and body hold `key` (TOML basic-string escapes allowed).
fn sim_with_key(dir: &Path, key: &str) -> PathBuf {
    let p = dir.join("key.toml");
    let text = format!("[[request]]\nid = \"a\"\nkey = \"{key}\"\nbody = \"{key}\"\n");
    std::fs::write(&p, text).unwrap();
    p
}

/// The arguments `shell` reads from `words` (a command line's tail), run in `dir`.
fn shell_reads(shell: &str, dir: &Path, words: &str) -> Option<Vec<String>> {
    let script = format!("printf '%s\\0' {words}");
    let out = Command::new(shell).arg("-c").arg(&script).current_dir(dir).output().ok()?;
    assert!(out.status.success(), "{shell} -c {script}");
    let text = String::from_utf8(out.stdout).unwrap();
    Some(text.split_terminator('\0').map(str::to_string).collect())
}

/// The replay command after `prefix` on the line that holds it.
fn replay_words(out: &str, prefix: &str) -> String {
    let line = out.lines().find_map(|l| l.trim().strip_prefix(prefix)).expect("a replay line");
    line.strip_prefix("cargo run --release -- ").expect("cargo run").to_string()
}

/// A sim path with `;`, `$(…)`, quotes and spaces prints a replay command that a shell reads
/// back as exactly that path, runs nothing, and reproduces the failure.
#[test]
fn replay_commands_paste_as_their_arguments() {
    let dir = temp_dir("replay");
    let path = dir.join("a;b $(touch X) `touch Z`").join("s 1;$(touch Y) it's.toml");
    failing_sim_at(&path);
    let p = path.to_str().unwrap();
    let expected = ["run", p, "--model", "no-key", "--seed", "0", "--trace"];
    let (code, out, err) = idemsim(&["run", p, "--model", "no-key"]);
    assert_eq!(code, 1, "{out}{err}");
    let words = replay_words(&out, "replay with: ");
    assert!(!words.contains('\n'));
    for shell in ["sh", "bash"] {
        if let Some(argv) = shell_reads(shell, &dir, &words) {
            assert_eq!(argv, expected, "{shell}: {words}");
        }
    }
    for made in ["X", "Y", "Z"] {
        assert!(!dir.join(made).exists(), "{made} was created by {words}");
    }
    let argv = shell_reads("sh", &dir, &words).unwrap();
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let (code, again, _) = idemsim(&argv);
    assert_eq!(code, 1);
    assert!(again.contains("FAIL  "), "{again}");

    // The matrix's replay lines are quoted the same way.
    let (code, out, _) = idemsim(&["matrix", "--sims", p, "--models", "no-key", "--seeds", "0..2"]);
    assert_eq!(code, 1, "{out}");
    let argv = shell_reads("sh", &dir, &replay_words(&out, "replay: ")).unwrap();
    assert_eq!(argv, expected);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A newline in a sim path: the replay command stays on one line and bash reads it back.
#[test]
fn a_newline_in_a_path_stays_on_one_line() {
    let dir = temp_dir("newline");
    let path = dir.join("two\nlines\u{1b}[31m.toml");
    failing_sim_at(&path);
    let p = path.to_str().unwrap();
    let (code, out, _) = idemsim(&["run", p, "--model", "no-key"]);
    assert_eq!(code, 1);
    assert!(!out.contains('\u{1b}'), "{out}");
    let words = replay_words(&out, "replay with: ");
    assert!(words.contains("$'"), "{words}");
    if let Some(argv) = shell_reads("bash", &dir, &words) {
        assert_eq!(argv, ["run", p, "--model", "no-key", "--seed", "0", "--trace"]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A key with characters XML forbids (U+FFFE, U+FFFF, BEL) and markup: the SVG parses as
/// XML, the HTML page holds no forbidden character and no markup from the key.
#[test]
fn svg_and_html_hold_no_character_xml_forbids() {
    let dir = temp_dir("xml");
    let s = sim_with_key(&dir, "k\\uFFFE\\uFFFF\\u0007<script>&'x");
    let s = s.to_str().unwrap();
    let (code, svg, err) = idemsim(&["run", s, "--model", "transactional", "--svg", "-"]);
    assert!(code == 0 || code == 1, "{err}");
    let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    assert!(svg.contains("\\u{fffe}"), "the character is shown, escaped");
    let page = dir.join("run.html");
    let (code, _, err) =
        idemsim(&["run", s, "--model", "transactional", "--html", page.to_str().unwrap()]);
    assert!(code == 0 || code == 1, "{err}");
    let html = std::fs::read_to_string(&page).unwrap();
    let forbidden = |c: char| {
        (c.is_control() && !matches!(c, '\t' | '\n' | '\r')) || matches!(c, '\u{fffe}' | '\u{ffff}')
    };
    assert!(!html.chars().any(forbidden));
    assert!(!html.contains("<script"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--mermaid` with markup, `;`, `#`, `%%` and a newline in a key: no markup, and every line
/// is one statement of the diagram.
#[test]
fn mermaid_labels_hold_no_markup() {
    let dir = temp_dir("mermaid");
    let s = sim_with_key(&dir, "<script>alert(1);</script>\\nNote over P0: forged #1 %%{init}%%");
    let (_, out, err) =
        idemsim(&["run", s.to_str().unwrap(), "--model", "transactional", "--mermaid"]);
    assert!(out.starts_with("sequenceDiagram\n"), "{out}{err}");
    assert!(!out.contains("<script") && !out.contains('<'), "{out}");
    assert!(!out.contains("%%"), "{out}");
    for line in out.lines().skip(1) {
        let ok =
            ["    participant ", "    Note over ", "    P"].iter().any(|p| line.starts_with(p));
        assert!(ok, "{line}");
        // Every `;` and `#` is part of an entity code: none ends a statement.
        let mut bare = line.to_string();
        for code in ["#59;", "#35;", "#37;", "#lt;", "#gt;", "#amp;"] {
            bare = bare.replace(code, "");
        }
        assert!(!bare.contains(';') && !bare.contains('#'), "{line}");
    }
    assert!(out.contains("#lt;script#gt;alert(1)#59;"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Text reports and the Markdown table print a cell's names escaped (a merged shard's cell
/// carries them from a file).
#[test]
fn reports_print_a_cells_names_escaped() {
    let s = sim("sims/article/01-same-key-same-content.toml");
    let m = model("no-key");
    let (sims, models) = (std::slice::from_ref(&s), std::slice::from_ref(&m));
    let mut cells = sweep::run_matrix(sims, models, Some(0..2), 1).unwrap();
    let c = &mut cells[0];
    let stat = ViolationStat { seeds: 1, occurrences: 1, first_seed: 0, permitted: false };
    c.violations.insert("evil|name\n| forged | row |\u{1b}[2J".into(), stat);
    c.statuses.insert("200\nforged line\u{7}".into(), 1);
    c.model = "m\u{1b}]0;title\u{7}".into();
    c.sim = "s\nforged".into();
    if let Some(k) = c.first_failure.first_mut() {
        k.actual = "x\n  forged × line".into();
    }
    let table = idemsim::render::matrix_table(sims, models, &cells);
    let sweep_text = idemsim::render::sweep_text(&s, &m, &cells[0], 1);
    for text in [&table, &sweep_text] {
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text}");
        assert!(!text.lines().any(|l| l.trim_start().starts_with("forged")), "{text}");
    }
    let md = idemsim::render::survival_markdown(sims, models, &cells);
    let row = md.lines().find(|l| l.contains("| **no-key** |")).expect("a row");
    // Cells are split by the `|` no backslash escapes: rank, design, safe in, refused, one sim.
    let borders = row.match_indices('|').filter(|(i, _)| !row[..*i].ends_with('\\')).count();
    assert_eq!(borders, 6, "{row}");
    assert!(!md.chars().any(|c| c.is_control() && c != '\n'), "{md}");
}

/// `-` is stdout: the document alone on stdout, the report on stderr; two documents cannot
/// share it; `/dev/stdout` is the same.
#[test]
fn a_dash_writes_to_stdout_and_the_report_to_stderr() {
    let args = ["run", "01-same-key-same-content", "--model", "no-key"];
    let (code, out, err) = idemsim(&[&args[..], &["--svg", "-"]].concat());
    assert_eq!(code, 1, "{err}");
    assert!(out.starts_with("<svg"), "{out}");
    roxmltree::Document::parse(&out).unwrap();
    assert!(err.contains("replay with: "), "{err}");
    let (code, out, _) = idemsim(&[&args[..], &["--html", "/dev/stdout"]].concat());
    assert_eq!(code, 1);
    assert!(out.starts_with("<!DOCTYPE html>") && !out.contains("replay with: cargo"), "{out}");
    let (code, out, err) = idemsim(&[&args[..], &["--svg", "-", "--html", "-"]].concat());
    assert_eq!(code, 2, "{out}");
    assert!(err.contains("cannot both write to stdout"), "{err}");
    assert!(out.is_empty());
    let (code, out, err) = idemsim(&["explain", "no-key", "--html", "-"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("<!DOCTYPE html>"), "{out}");
    assert!(!err.is_empty());
    assert!(!Path::new(&root()).join("-").exists(), "a file named - was written");
}

/// A link given as an output file is followed: its target is replaced whole (permissions
/// kept) and the link stays a link. A dangling link and a folder are refused.
#[test]
fn output_through_a_symlink_keeps_the_link() {
    let dir = temp_dir("symlink");
    let target = dir.join("target.svg");
    std::fs::write(&target, "old").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
    let link = dir.join("link.svg");
    std::os::unix::fs::symlink("target.svg", &link).unwrap();
    let args = ["run", "01-same-key-same-content", "--model", "no-key", "--svg"];
    let (code, _, err) = idemsim(&[&args[..], &[link.to_str().unwrap()]].concat());
    assert_eq!(code, 1, "{err}");
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert!(std::fs::read_to_string(&target).unwrap().starts_with("<svg"));
    let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);

    let dangling = dir.join("dangling.svg");
    std::os::unix::fs::symlink("nowhere/made.svg", &dangling).unwrap();
    let (code, _, err) = idemsim(&[&args[..], &[dangling.to_str().unwrap()]].concat());
    assert_eq!(code, 2);
    assert!(err.contains("symbolic link to nothing"), "{err}");
    assert!(!dir.join("nowhere").exists());

    let (code, _, err) = idemsim(&[&args[..], &[dir.to_str().unwrap()]].concat());
    assert_eq!(code, 2);
    assert!(err.contains("is a folder"), "{err}");
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A FIFO or a device given as an output file is refused with exit 2, before the run and
/// without blocking, and stays what it was.
#[test]
fn output_to_a_fifo_or_device_is_refused_without_blocking() {
    let dir = temp_dir("fifo");
    let fifo = dir.join("pipe");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    for (flag, path) in [("--svg", fifo.as_path()), ("--html", Path::new("/dev/null"))] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_idemsim"))
            .args(["run", "01-same-key-same-content", "--model", "no-key", flag])
            .arg(path)
            .current_dir(root())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if started.elapsed() > Duration::from_secs(60) {
                let _ = child.kill();
                panic!("{flag} {} blocked", path.display());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(status.code(), Some(2), "{err}");
        assert!(err.contains("not a regular file"), "{err}");
        assert!(out.stdout.is_empty(), "refused before the run");
    }
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());
    let _ = std::fs::remove_dir_all(&dir);
}
