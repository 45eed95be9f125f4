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

#[test]
fn a_baseline_fails_only_on_a_regression() {
    let dir = tempfile_dir("baseline");
    let b = dir.join("baseline.json");
    let b = b.to_str().unwrap();
    let sims = "article/11-twenty-concurrent-one-process.toml";
    let args = |extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> =
            ["matrix", "--sims", sims, "--models", "check-first,transactional", "--seeds", "0..40"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let run = |extra: &[&str]| {
        let a = args(extra);
        idemsim(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    // Without a baseline, check-first's failures fail the matrix.
    assert_eq!(run(&[]).0, 1);
    let (code, _, err) = run(&["--baseline", b, "--update-baseline"]);
    assert_eq!(code, 0, "{err}");
    // The same run against its own baseline: no regression, exit 0 although cells fail.
    let (code, out, err) = run(&["--baseline", b]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("0 regression(s)") && out.contains("2 unchanged"), "{out}");
    // A baseline in which check-first never raced: now it does, on many seeds: a regression.
    let text = std::fs::read_to_string(b).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    for c in v["cells"].as_array_mut().unwrap() {
        if c["model"] == "check-first" {
            c["as_specified"] = true.into();
            c["failed_seeds"] = 0.into();
            c["violations"] = serde_json::json!({});
        }
    }
    std::fs::write(b, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let (code, out, _) = run(&["--baseline", b]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("REGRESSION check-first") && out.contains("stopped passing"), "{out}");
    // A forged baseline is refused, naming the file.
    std::fs::write(b, "{\"format\": \"idemsim-baseline\", \"version\": 9, \"cells\": []}").unwrap();
    let (code, _, err) = run(&["--baseline", b]);
    assert_eq!((code, err.contains("baseline.json")), (2, true), "{err}");
    // --fail-on-violation and a baseline are one decision too many.
    assert_eq!(run(&["--baseline", b, "--fail-on-violation"]).0, 2);
    // A sweep takes the same gate: its failing cell against its own baseline passes.
    let sweep = |extra: &[&str]| {
        let mut a = vec!["sweep", "check-first-race", "--model", "check-first", "--seeds", "0..60"];
        a.extend_from_slice(extra);
        idemsim(&a)
    };
    assert_eq!(sweep(&[]).0, 1);
    assert_eq!(sweep(&["--baseline", b, "--update-baseline"]).0, 0);
    let (code, out, err) = sweep(&["--baseline", b, "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(serde_json::from_str::<serde_json::Value>(&out).is_ok(), "stdout stays JSON: {out}");
    assert!(err.contains("0 regression(s)"), "{err}");
}

#[test]
fn an_installed_binary_finds_the_shipped_library_and_a_project_of_its_own() {
    let dir = tempfile_dir("project");
    let bin = env!("CARGO_BIN_EXE_idemsim");
    let in_dir = |args: &[&str]| {
        let out = std::process::Command::new(bin)
            .args(args)
            .current_dir(&dir)
            .env_remove("CARGO")
            .env("XDG_CACHE_HOME", dir.join("cache"))
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
    };
    // Outside any project: shipped models and sims by name, replay commands as invoked.
    let (code, out, err) = in_dir(&["sweep", "check-first-race", "--model", "check-first"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        out.contains(&format!("replay: {bin} run sims/teaching/check-first-race.toml")),
        "{out}"
    );
    // A project: its own design by name beside the shipped ones, its own sims.
    std::fs::create_dir_all(dir.join("designs")).unwrap();
    std::fs::create_dir_all(dir.join("scenarios")).unwrap();
    let model = std::fs::read_to_string(super::root().join("models/transactional.toml")).unwrap();
    let model = model.replace("name = \"transactional\"", "name = \"mine\"");
    std::fs::write(dir.join("designs/mine.toml"), model).unwrap();
    std::fs::copy(
        super::root().join("sims/teaching/check-first-race.toml"),
        dir.join("scenarios/race.toml"),
    )
    .unwrap();
    std::fs::write(
        dir.join("idemsim.toml"),
        "[project]\nmodels = [\"designs\"]\nsims = [\"scenarios\"]\n",
    )
    .unwrap();
    let (code, out, err) = in_dir(&["matrix", "--sims", "race", "--models", "mine,check-first"]);
    assert_eq!(code, 1, "{err}");
    assert!(out.contains("mine") && out.contains("FAIL"), "{out}");
    let (code, out, _) = in_dir(&["list"]);
    assert_eq!(code, 0);
    assert!(out.contains("models (designs") && out.contains("scenarios/race.toml"), "{out}");
    // A project file naming a folder that does not exist is a located error.
    std::fs::write(dir.join("idemsim.toml"), "[project]\nsims = [\"nope\"]\n").unwrap();
    let (code, _, err) = in_dir(&["list"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("idemsim.toml") && err.contains("nope"), "{err}");
}

#[test]
fn list_as_json_names_what_the_text_names() {
    let (code, json, err) = idemsim(&["list", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!((v["format"].as_str(), v["version"].as_u64()), (Some("idemsim-list"), Some(1)));
    let (_, text, _) = idemsim(&["list"]);
    for m in v["models"].as_array().unwrap() {
        let name = m["name"].as_str().unwrap();
        assert!(text.lines().any(|l| l.trim_start().starts_with(name)), "{name} not listed");
    }
    let sims = v["sims"].as_array().unwrap();
    assert!(sims.len() > 40);
    for s in sims {
        assert!(text.contains(s["path"].as_str().unwrap()), "{s}");
    }
}

/// The binary run in `dir` as an installed one is (no `CARGO`, its own cache).
fn idemsim_in(dir: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_idemsim"))
        .args(args)
        .current_dir(dir)
        .env_remove("CARGO")
        .env("IDEMSIM_INVOKED", "idemsim")
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

#[test]
fn lookup_roots_name_a_users_folders_without_a_project_file() {
    let dir = tempfile_dir("roots");
    std::fs::create_dir_all(dir.join("designs")).unwrap();
    std::fs::create_dir_all(dir.join("scen")).unwrap();
    let model = std::fs::read_to_string(super::root().join("models/check-first.toml")).unwrap();
    let model = model.replace("name = \"check-first\"", "name = \"mine\"");
    std::fs::write(dir.join("designs/mine.toml"), model).unwrap();
    let race = super::root().join("sims/teaching/check-first-race.toml");
    std::fs::copy(race, dir.join("scen/race.toml")).unwrap();
    let roots = ["--models-dir", "designs", "--sims-dir", "scen"];
    let with_roots = |args: &[&str]| idemsim_in(&dir, &[&roots[..], args].concat());
    // Without the roots the names are unknown; with them (before or after the command) found.
    assert_eq!(idemsim_in(&dir, &["run", "race", "--model", "mine"]).0, 2);
    let (code, out, err) = with_roots(&["list"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("models (designs, ") && out.contains("sims (scen, "), "{out}");
    assert!(out.lines().any(|l| l.trim_start().starts_with("mine ")), "{out}");
    assert!(out.contains("scen/race.toml"), "{out}");
    let (code, json, _) = with_roots(&["list", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!((code, v["model_folders"][0].as_str()), (0, Some("designs")), "{v}");
    let (code, out, err) = idemsim_in(
        &dir,
        &[&["sweep", "race", "--model", "mine", "--seeds", "0..60"][..], &roots[..]].concat(),
    );
    assert_eq!(code, 1, "the copy of check-first races: {out}{err}");
    // The replay command names the files, so that it runs without the flags.
    let replay = "idemsim run scen/race.toml --model designs/mine.toml --seed ";
    let line = out.lines().find(|l| l.contains(replay)).unwrap_or_else(|| panic!("{out}"));
    let seed = line[line.find(replay).unwrap() + replay.len()..].split(' ').next().unwrap();
    let again = ["run", "scen/race.toml", "--model", "designs/mine.toml", "--seed", seed];
    let (code, out, err) = idemsim_in(&dir, &again);
    assert!(code < 2 && out.contains("mine"), "the replay runs without the flags: {out}{err}");
    let (code, out, err) =
        with_roots(&["matrix", "--sims", "race", "--models", "mine,transactional"]);
    assert_eq!(code, 1, "{err}");
    assert!(out.contains("mine") && out.contains("transactional"), "{out}");
    // A root that is not a folder is bad input, named.
    let (code, _, err) = idemsim_in(&dir, &["--sims-dir", "nope", "list"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--sims-dir") && err.contains("nope"), "{err}");
}

/// What a new user met in a project of their own (each was a defect): `explain` without
/// `--sim` searches the project's sims and the shipped ones (it searched neither); a sharded
/// matrix mixing the project's model with a shipped one merges (the shipped file's path was
/// looked for in the project); a model is found by the name it declares; a sim typo gets a
/// suggestion; `--per-seed` onto a FIFO nobody reads is refused, not a hang; a bad baseline
/// is refused before anything runs.
#[test]
fn a_project_of_ones_own_explains_merges_and_names_as_documented() {
    let dir = tempfile_dir("newuser");
    std::fs::create_dir_all(dir.join("designs")).unwrap();
    std::fs::create_dir_all(dir.join("scenarios")).unwrap();
    let model = std::fs::read_to_string(super::root().join("models/transactional.toml")).unwrap();
    let model = model.replace("name = \"transactional\"", "name = \"declared\"");
    std::fs::write(dir.join("designs/file-name.toml"), model).unwrap();
    let race = super::root().join("sims/teaching/check-first-race.toml");
    std::fs::copy(race, dir.join("scenarios/myrace.toml")).unwrap();
    std::fs::write(
        dir.join("idemsim.toml"),
        "[project]\nmodels = [\"designs\"]\nsims = [\"scenarios\"]\n",
    )
    .unwrap();
    let (code, out, err) = idemsim_in(&dir, &["explain", "check-first"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("verdict: check-first fails myrace on seed"), "{out}");
    // The declared name, as list and the tables show it.
    let (code, out, err) = idemsim_in(&dir, &["run", "myrace", "--model", "declared"]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, _, err) = idemsim_in(&dir, &["run", "myrce", "--model", "declared"]);
    assert_eq!(code, 2);
    assert!(err.contains("did you mean myrace"), "{err}");
    // Shards of the project's model and a shipped one, merged in the project.
    for k in ["0/2", "1/2"] {
        let args = ["-q", "matrix", "--sims", "scenarios", "--models", "declared,check-first"];
        let (code, _, err) = idemsim_in(
            &dir,
            &[&args[..], &["--seeds", "0..40", "--shard", k, "--out-dir", "sh"]].concat(),
        );
        assert_eq!(code, 0, "{err}");
    }
    let (code, out, err) = idemsim_in(&dir, &["merge", "sh"]);
    assert_eq!(code, 1, "{err}");
    assert!(out.contains("check-first"), "{out}");
    // A FIFO nobody reads.
    let fifo = dir.join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let per_seed = ["sweep", "myrace", "--model", "declared", "--per-seed", "fifo"];
    let (code, _, err) = idemsim_in(&dir, &per_seed);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no process reads"), "{err}");
    // A bad baseline: refused before the run (nothing on stdout).
    std::fs::write(dir.join("b.json"), "{").unwrap();
    let gate = ["matrix", "--sims", "scenarios", "--models", "declared", "--baseline", "b.json"];
    let (code, out, err) = idemsim_in(&dir, &gate);
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty() && err.contains("b.json"), "{out}{err}");
}
