//! The command line's output conventions (issue 24, item 7), through the real binary:
//! `-o/--out FILE` writes exactly what stdout would hold, by the output-file rules, and says
//! `written to FILE (N bytes)` on stderr; `--quiet` drops the informational lines but never
//! the report or an error; no progress when stderr is not a terminal; `run
//! --fail-on-violation` says why it fails.

use super::conventions::tempfile_dir;
use super::idemsim;

/// `args` then `args -o FILE`: the same exit code, the file holds what stdout held, stdout is
/// empty, and stderr says what was written.
fn same_bytes_through_out(tag: &str, args: &[&str]) {
    let dir = tempfile_dir(&format!("out-{tag}"));
    let f = dir.join("report.txt");
    let fs = f.to_str().unwrap();
    let (code, stdout, err) = idemsim(args);
    assert!(code == 0 || code == 1, "{tag}: {err}");
    let (code2, stdout2, err2) = idemsim(&[args, &["-o", fs]].concat());
    assert_eq!(code, code2, "{tag}: {err2}");
    let written = std::fs::read_to_string(&f).unwrap();
    assert_eq!(written, stdout, "{tag}: -o wrote other bytes than stdout");
    assert_eq!(stdout2, "", "{tag}: stdout with -o");
    let line = format!("written to {fs} ({} bytes)", written.len());
    assert!(err2.lines().any(|l| l == line), "{tag}: no `{line}` in\n{err2}");
    // `-o -` is stdout.
    let (_, stdout3, _) = idemsim(&[args, &["-o", "-"]].concat());
    assert_eq!(stdout3, stdout, "{tag}: -o - is not stdout");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn out_writes_what_stdout_holds_for_every_command() {
    let race = "sims/teaching/check-first-race.toml";
    same_bytes_through_out("run", &["run", race, "--model", "check-first", "--seed", "13"]);
    same_bytes_through_out(
        "run-json",
        &["run", race, "--model", "transactional", "--seed", "1", "--json"],
    );
    let sweep = ["sweep", race, "--model", "check-first", "--seeds", "0..20", "--jobs", "1"];
    same_bytes_through_out("sweep", &sweep);
    let matrix = ["matrix", "--sims", race, "--models", "check-first,transactional"];
    same_bytes_through_out("matrix", &[&matrix[..], &["--seeds", "0..10", "--markdown"]].concat());
    same_bytes_through_out(
        "compare",
        &["compare", "check-first", "transactional", "--sims", race, "--seeds", "0..10"],
    );
    same_bytes_through_out("list", &["list"]);
    same_bytes_through_out("list-json", &["list", "--json"]);
}

#[test]
fn merge_writes_its_report_with_report_and_keeps_out_for_the_merged_file() {
    let dir = tempfile_dir("merge-report");
    let shard = dir.join("shard.json");
    let race = "sims/teaching/check-first-race.toml";
    let base = ["sweep", race, "--model", "check-first", "--seeds", "0..20", "--jobs", "1"];
    // `--out` with `--shard` is still the shard file.
    let (code, out, err) =
        idemsim(&[&base[..], &["--shard", "0/1", "--out", shard.to_str().unwrap()]].concat());
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    assert!(err.contains("shard 0/1 (from --shard): 20 runs, written to"), "{err}");
    let s = shard.to_str().unwrap();
    let (code, report, _) = idemsim(&["merge", s]);
    assert_eq!(code, 1);
    let (r, m) = (dir.join("report.txt"), dir.join("merged.json"));
    let (code2, out2, err2) =
        idemsim(&["merge", s, "--report", r.to_str().unwrap(), "--out", m.to_str().unwrap()]);
    assert_eq!((code2, out2.as_str()), (1, ""), "{err2}");
    assert_eq!(std::fs::read_to_string(&r).unwrap(), report);
    let (code3, again, _) = idemsim(&["merge", m.to_str().unwrap()]);
    assert_eq!((code3, again), (1, report));
    assert_eq!(err2.matches("written to ").count(), 2, "{err2}");
    // Two documents on one stdout are refused before anything runs.
    let (code, _, err) = idemsim(&["merge", s, "--report", "-", "--out", "-"]);
    assert_eq!(code, 2, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn out_follows_the_output_file_rules() {
    let dir = tempfile_dir("out-rules");
    let run = ["run", "01-same-key-same-content", "--model", "transactional"];
    // A dangling link is refused rather than creating a file where it points.
    let link = dir.join("dangling");
    std::os::unix::fs::symlink(dir.join("nowhere"), &link).unwrap();
    let (code, out, err) = idemsim(&[&run[..], &["-o", link.to_str().unwrap()]].concat());
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(err.contains("symbolic link to nothing"), "{err}");
    assert!(!dir.join("nowhere").exists());
    // A link to a FIFO is refused too (writing could block), before the run.
    let fifo = dir.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let to_fifo = dir.join("to-fifo");
    std::os::unix::fs::symlink(&fifo, &to_fifo).unwrap();
    let (code, _, err) = idemsim(&[&run[..], &["-o", to_fifo.to_str().unwrap()]].concat());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("FIFO"), "{err}");
    // A link to a file: the file is replaced, the link stays a link.
    let target = dir.join("target.txt");
    std::fs::write(&target, "old").unwrap();
    let good = dir.join("good");
    std::os::unix::fs::symlink(&target, &good).unwrap();
    let (code, _, err) = idemsim(&[&run[..], &["-o", good.to_str().unwrap()]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::symlink_metadata(&good).unwrap().file_type().is_symlink());
    assert!(std::fs::read_to_string(&target).unwrap().contains("PASS (as specified)"));
    // A folder is refused.
    let (code, _, _) = idemsim(&[&run[..], &["-o", dir.to_str().unwrap()]].concat());
    assert_eq!(code, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn quiet_drops_information_but_not_the_report_or_errors() {
    let dir = tempfile_dir("quiet");
    let f = dir.join("m.txt");
    let matrix = ["matrix", "--sims", "check-first-race", "--models", "check-first"];
    let args = [&matrix[..], &["--seeds", "0..10", "-o", f.to_str().unwrap()]].concat();
    let (code, _, err) = idemsim(&args);
    assert!(err.contains("runs in") && err.contains("written to"), "{err}");
    let (code2, out, err) = idemsim(&[&["-q"][..], &args].concat());
    assert_eq!((code2, out.as_str(), err.as_str()), (code, "", ""));
    assert!(std::fs::read_to_string(&f).unwrap().contains("check-first"));
    // The report stays on stdout; `--quiet` after the command works too.
    let (code2, out, err) = idemsim(&[&matrix[..], &["--seeds", "0..10", "--quiet"]].concat());
    assert_eq!((code2, err.as_str()), (code, ""));
    assert!(out.contains("check-first"), "{out}");
    // Errors stay.
    let (code, _, err) = idemsim(&["--quiet", "run", "no-such-sim", "--model", "check-first"]);
    assert_eq!(code, 2);
    assert!(err.contains("no-such-sim"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sweep long enough to show progress on a terminal shows none on a pipe: stderr holds the
/// speed line and nothing else.
#[test]
fn no_progress_when_stderr_is_not_a_terminal() {
    let (code, _, err) = idemsim(&[
        "sweep",
        "article/12-twenty-concurrent-two-processes.toml",
        "--model",
        "transactional",
        "--seeds",
        "0..400",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("runs in") && !err.contains('\r') && !err.contains("eta"), "{err}");
}

#[test]
fn fail_on_violation_says_why_it_fails() {
    let args = ["run", "14-collected-key-new-row", "--model", "transactional"];
    let (code, out, _) = idemsim(&args);
    assert_eq!(code, 0);
    assert!(!out.contains("--fail-on-violation"), "{out}");
    let (code, out, _) = idemsim(&[&args[..], &["--fail-on-violation"]].concat());
    assert_eq!(code, 1);
    let last = out.lines().last().unwrap();
    assert!(
        last.starts_with("FAIL (--fail-on-violation): 2 violation(s) not policy-permitted (")
            && last.ends_with("though every expectation held"),
        "{out}"
    );
    // With --json the reason goes to stderr and stdout stays JSON.
    let (code, out, err) = idemsim(&[&args[..], &["--fail-on-violation", "--json"]].concat());
    assert_eq!(code, 1);
    assert!(serde_json::from_str::<serde_json::Value>(&out).is_ok(), "{out}");
    assert!(err.contains("FAIL (--fail-on-violation)"), "{err}");
    // A run that passes clean is not touched by the flag.
    let ok = ["run", "01-same-key-same-content", "--model", "transactional", "--fail-on-violation"];
    let (code, out, _) = idemsim(&ok);
    assert_eq!(code, 0);
    assert!(!out.contains("FAIL"), "{out}");
}

#[test]
fn run_svg_says_what_it_wrote_and_prints_no_trace_unless_asked() {
    let dir = tempfile_dir("svg");
    let f = dir.join("race.svg");
    let fs = f.to_str().unwrap();
    let args = ["run", "check-first-race", "--model", "check-first", "--seed", "13"];
    let (_, plain, _) = idemsim(&args);
    let (_, out, err) = idemsim(&[&args[..], &["--svg", fs]].concat());
    assert_eq!(out, plain, "--svg changed the report");
    let bytes = std::fs::metadata(&f).unwrap().len();
    assert!(err.contains(&format!("written to {fs} ({bytes} bytes)")), "{err}");
    let (_, traced, _) = idemsim(&[&args[..], &["--svg", fs, "--trace"]].concat());
    assert!(traced.contains("\ntrace:\n"), "{traced}");
    let _ = std::fs::remove_dir_all(&dir);
}
