//! Sharded sweeps: slices tile the range, merging is associative and order-independent and
//! equals one run, each engine's environment picks the right shard, merge refuses what does
//! not tile.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use idemsim::model::Model;
use idemsim::scenario::Sim;
use idemsim::shard::{self, ShardCell, ShardFile, Timing};
use idemsim::sweep::{self, SweepOptions};

use super::{model, root, sim};

#[test]
fn slices_tile_any_range_balanced_to_one() {
    let mut rng = StdRng::seed_from_u64(12);
    let mut cases: Vec<(u64, u64)> = vec![(0, 1), (1, 1), (1, 7), (10, 3), (u64::MAX, 1)];
    cases.extend([(u64::MAX, 7), (u64::MAX, u64::MAX), (u64::MAX - 1, 1 << 40)]);
    for _ in 0..500 {
        let total = match rng.gen_range(0..3) {
            0 => rng.gen_range(0..100),
            1 => rng.gen_range(0..1_000_000_000),
            _ => rng.r#gen::<u64>(),
        };
        cases.push((total, rng.gen_range(1..200)));
    }
    for (total, n) in cases {
        // Check the ends and a sample of the interior (n can be 2^64 − 1).
        let ks: Vec<u64> =
            if n <= 200 { (0..n).collect() } else { vec![0, 1, n / 2, n - 2, n - 1] };
        let (lo, hi) = (total / n, total.div_ceil(n));
        for &k in &ks {
            let s = sweep::shard_slice(total, k, n);
            assert!(s.start <= s.end, "{total}/{n} shard {k}: {s:?}");
            let len = s.end - s.start;
            assert!(len == lo || len == hi, "{total}/{n} shard {k}: {len} not in {lo}..={hi}");
            if k + 1 < n {
                assert_eq!(s.end, sweep::shard_slice(total, k + 1, n).start, "{total}/{n} at {k}");
            }
        }
        assert_eq!(sweep::shard_slice(total, 0, n).start, 0);
        assert_eq!(sweep::shard_slice(total, n - 1, n).end, total);
    }
}

fn cells_of(
    sims: &[Arc<Sim>],
    models: &[Arc<Model>],
    seeds: std::ops::Range<u64>,
    shard: Option<(u64, u64)>,
) -> ShardFile {
    let opts = SweepOptions { jobs: 2, shard, ..Default::default() };
    let cells = sweep::run_cells(sims, models, Some(seeds), &opts, |_, _| {}).unwrap();
    let spec = shard.map(|(k, n)| shard::ShardSpec { k, n, source: "--shard".into() });
    shard::shard_file(sims, models, &cells, spec, Timing::default())
}

/// Merge by a random binary tree over a random order of the parts.
fn merge_randomly(rng: &mut StdRng, mut parts: Vec<ShardFile>) -> ShardFile {
    parts.shuffle(rng);
    while parts.len() > 1 {
        let i = rng.gen_range(0..parts.len() - 1);
        let take = rng.gen_range(2..=(parts.len() - i).min(3));
        let group: Vec<ShardFile> = parts.drain(i..i + take).collect();
        parts.insert(i, shard::merge(group).unwrap());
    }
    parts.pop().unwrap()
}

/// The cells without the in-memory slice (not part of the file).
fn comparable(f: &ShardFile) -> Vec<ShardCell> {
    let mut cells = f.cells.clone();
    for c in &mut cells {
        c.aggregate.covered = None;
    }
    cells
}

#[test]
fn merging_shards_in_any_order_and_grouping_equals_one_run() {
    let sims =
        vec![sim("sims/teaching/check-first-race.toml"), sim("sims/faults/dropped-replies.toml")];
    let models = vec![model("check-first"), model("transactional"), model("no-key")];
    let seeds = 0..150;
    let whole = cells_of(&sims, &models, seeds.clone(), None);
    assert!(
        whole.cells.iter().any(|c| !c.aggregate.violations.is_empty()),
        "a cell with violations"
    );
    let mut rng = StdRng::seed_from_u64(7);
    for n in [1u64, 2, 5, 13] {
        let parts: Vec<ShardFile> =
            (0..n).map(|k| cells_of(&sims, &models, seeds.clone(), Some((k, n)))).collect();
        // Every seed of every cell is run by exactly one shard.
        let runs: u64 = parts.iter().flat_map(|p| &p.cells).map(|c| c.aggregate.runs).sum();
        assert_eq!(runs, 6 * 150, "{n} shards");
        for _ in 0..6 {
            let merged = merge_randomly(&mut rng, parts.clone());
            assert_eq!(comparable(&merged), comparable(&whole), "{n} shards");
            assert!(merged.cells.iter().all(|c| shard::gaps(c).is_empty()));
        }
    }
}

#[test]
fn merge_refuses_overlap_other_files_and_other_builds() {
    let sims = vec![sim("sims/teaching/check-first-race.toml")];
    let models = vec![model("check-first")];
    let a = cells_of(&sims, &models, 0..40, Some((0, 2)));
    let b = cells_of(&sims, &models, 0..40, Some((1, 2)));
    let e = shard::merge(vec![a.clone(), a.clone()]).unwrap_err();
    assert!(e.contains("seeds 0..20 are covered twice"), "{e}");
    let mut other = b.clone();
    other.cells[0].sim.sha256 = "0".repeat(64);
    let e = shard::merge(vec![a.clone(), other]).unwrap_err();
    assert!(e.contains("the sim or model file differs"), "{e}");
    let mut other = b.clone();
    other.build.idemsim = "0.0.0".into();
    let e = shard::merge(vec![a.clone(), other]).unwrap_err();
    assert!(e.contains("different builds"), "{e}");
    let wider = cells_of(&sims, &models, 0..41, Some((1, 2)));
    let e = shard::merge(vec![a.clone(), wider]).unwrap_err();
    assert!(e.contains("seed ranges 0..40 and 0..41 differ"), "{e}");
    // Half of the range: the gap is named.
    let gaps = shard::gaps(&a.cells[0]);
    assert_eq!(gaps, vec![20..40]);
}

/// The engines' variables, each as the engine sets them for index `i` of `n`.
fn engine_env(engine: &str, i: u64, n: u64) -> Vec<(&'static str, String)> {
    match engine {
        // Kubernetes Indexed Job: the index only; the count is in the manifest (`auto/N`).
        "kubernetes" => vec![("JOB_COMPLETION_INDEX", i.to_string())],
        // Slurm `--array=5-7`: ids from 5, with MIN, MAX, COUNT and STEP.
        "slurm" => vec![
            ("SLURM_ARRAY_JOB_ID", "4242".into()),
            ("SLURM_ARRAY_TASK_ID", (5 + i).to_string()),
            ("SLURM_ARRAY_TASK_MIN", "5".into()),
            ("SLURM_ARRAY_TASK_MAX", (5 + n - 1).to_string()),
            ("SLURM_ARRAY_TASK_COUNT", n.to_string()),
            ("SLURM_ARRAY_TASK_STEP", "1".into()),
        ],
        "aws-batch" => vec![
            ("AWS_BATCH_JOB_ARRAY_INDEX", i.to_string()),
            ("AWS_BATCH_JOB_ARRAY_SIZE", n.to_string()),
        ],
        // GitLab `parallel: N`: 1-based.
        "gitlab" => vec![("CI_NODE_INDEX", (i + 1).to_string()), ("CI_NODE_TOTAL", n.to_string())],
        _ => unreachable!(),
    }
}

fn run_in(dir: &Path, args: &[&str], env: &[(&str, String)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_idemsim"));
    cmd.args(args).current_dir(root());
    for v in shard::ENGINE_VARS {
        cmd.env_remove(v);
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v.as_str())));
    let _ = dir;
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn each_engines_shards_merge_to_exactly_one_runs_report() {
    let tmp = std::env::temp_dir().join(format!("idemsim-shards-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let sweep_args = [
        "sweep",
        "sims/teaching/check-first-race.toml",
        "--model",
        "check-first",
        "--seeds",
        "0..500",
    ];
    let (code, one, _) = run_in(&tmp, &sweep_args, &[]);
    assert_eq!(code, 1, "the whole sweep finds the race");
    let matrix_args = [
        "matrix",
        "--sims",
        "sims/teaching/check-first-race.toml",
        "sims/article/12-twenty-concurrent-two-processes.toml",
        "--models",
        "check-first",
        "transactional",
        "--seeds",
        "0..60",
    ];
    let (_, one_matrix, _) = run_in(&tmp, &matrix_args, &[]);
    let n = 3;
    for engine in ["kubernetes", "slurm", "aws-batch", "gitlab"] {
        for (what, args, whole) in
            [("sweep", &sweep_args[..], &one), ("matrix", &matrix_args[..], &one_matrix)]
        {
            let dir = tmp.join(engine).join(what);
            std::fs::create_dir_all(&dir).unwrap();
            let spec = if engine == "kubernetes" { format!("auto/{n}") } else { "auto".into() };
            for i in 0..n {
                let mut a: Vec<&str> = args.to_vec();
                let d = dir.to_str().unwrap();
                a.extend(["--shard", &spec, "--out-dir", d]);
                let (code, _, err) = run_in(&tmp, &a, &engine_env(engine, i, n));
                // A violation is a result in shard mode: exit 0 once the file is written.
                assert_eq!(code, 0, "{engine} {what} shard {i}: {err}");
                assert!(dir.join(format!("shard-{i}-of-{n}.json")).exists(), "{engine} {i}: {err}");
            }
            let mut files: Vec<String> = (0..n)
                .rev()
                .map(|i| dir.join(format!("shard-{i}-of-{n}.json")).to_str().unwrap().to_string())
                .collect();
            let mut m = vec!["merge"];
            m.extend(files.iter().map(String::as_str));
            let (code, merged, err) = run_in(&tmp, &m, &[]);
            assert_eq!(&merged, whole, "{engine} {what}: merge differs from one run\n{err}");
            assert_eq!(code, 1, "{engine} {what}: merge exits as the whole run does");
            // A missing shard is named, and with --expect-seeds refused (exit 2).
            files.pop();
            let seeds = if what == "sweep" { "0..500" } else { "0..60" };
            let mut m = vec!["merge", "--expect-seeds", seeds];
            m.extend(files.iter().map(String::as_str));
            let (code, _, err) = run_in(&tmp, &m, &[]);
            assert_eq!(code, 2, "{engine} {what}: {err}");
            assert!(err.contains("missing"), "{err}");
        }
    }
    // Bad input in shard mode exits 2 (a scheduler must not retry it).
    let (code, _, err) = run_in(
        &tmp,
        &["sweep", "sims/teaching/no-such.toml", "--model", "check-first", "--shard", "auto"],
        &engine_env("slurm", 0, 3),
    );
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run_in(
        &tmp,
        &sweep_args.iter().copied().chain(["--shard", "auto"]).collect::<Vec<_>>(),
        &[],
    );
    assert_eq!(code, 2, "no engine variable: {err}");
    assert!(err.contains("auto"), "{err}");
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn auto_reads_each_engines_variables() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    };
    let ok = |arg: &str, pairs: &'static [(&'static str, &'static str)]| {
        let s = shard::parse_spec(arg, &env(pairs)).unwrap();
        (s.k, s.n)
    };
    let err = |arg: &str, pairs: &'static [(&'static str, &'static str)]| {
        shard::parse_spec(arg, &env(pairs)).unwrap_err()
    };
    assert_eq!(ok("3/8", &[]), (3, 8));
    assert_eq!(ok("auto/4", &[("JOB_COMPLETION_INDEX", "2")]), (2, 4));
    assert!(err("auto", &[("JOB_COMPLETION_INDEX", "2")]).contains("auto/N"));
    let slurm: &[(&str, &str)] = &[
        ("SLURM_ARRAY_TASK_ID", "12"),
        ("SLURM_ARRAY_TASK_MIN", "10"),
        ("SLURM_ARRAY_TASK_COUNT", "5"),
    ];
    assert_eq!(ok("auto", slurm), (2, 5));
    assert_eq!(ok("auto/5", slurm), (2, 5));
    assert!(err("auto/6", slurm).contains("says 5 shards"));
    assert!(
        err(
            "auto",
            &[
                ("SLURM_ARRAY_TASK_ID", "3"),
                ("SLURM_ARRAY_TASK_COUNT", "2"),
                ("SLURM_ARRAY_TASK_STEP", "2")
            ]
        )
        .contains("step")
    );
    assert_eq!(
        ok("auto", &[("AWS_BATCH_JOB_ARRAY_INDEX", "0"), ("AWS_BATCH_JOB_ARRAY_SIZE", "2")]),
        (0, 2)
    );
    assert_eq!(ok("auto", &[("CI_NODE_INDEX", "1"), ("CI_NODE_TOTAL", "3")]), (0, 3));
    assert!(
        err("auto", &[("CI_NODE_INDEX", "0"), ("CI_NODE_TOTAL", "3")]).contains("CI_NODE_INDEX")
    );
    assert!(err("auto", &[]).contains("no engine"));
    assert!(
        err(
            "auto",
            &[
                ("CI_NODE_INDEX", "1"),
                ("CI_NODE_TOTAL", "3"),
                ("AWS_BATCH_JOB_ARRAY_INDEX", "2"),
                ("AWS_BATCH_JOB_ARRAY_SIZE", "3")
            ]
        )
        .contains("disagree")
    );
    assert!(err("3/3", &[]).contains("does not exist"));
    assert!(err("1/0", &[]).contains("does not exist"));
    assert!(err("x/2", &[]).contains("not a number"));
    assert!(err("2", &[]).contains("expected K/N"));
    assert!(err("auto", &[("SLURM_ARRAY_TASK_ID", "abc")]).contains("not a number"));
}

/// A shard is untrusted input: every claim that does not fit the seeds it covers is refused
/// by name, and a shard that is not a regular file is refused without reading it.
#[test]
fn forged_shards_are_refused_not_believed() {
    let s = vec![super::sim("sims/teaching/check-first-race.toml")];
    let m = vec![super::model("check-first")];
    let good = cells_of(&s, &m, 0..40, Some((1, 2)));
    let dir = std::env::temp_dir().join(format!("idemsim-forged-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, f: &ShardFile| {
        let p = dir.join(name);
        std::fs::write(&p, serde_json::to_string(f).unwrap()).unwrap();
        p
    };
    assert!(shard::read(&write("good.json", &good)).is_ok());
    let forge = |name: &str, edit: &dyn Fn(&mut ShardFile), want: &str| {
        let mut f = good.clone();
        edit(&mut f);
        let e = shard::read(&write(name, &f)).unwrap_err();
        assert!(e.contains(want), "{name}: {e}");
    };
    forge("runs.json", &|f| f.cells[0].aggregate.runs *= 17, "runs for 20 seeds covered");
    forge("wide.json", &|f| f.cells[0].covered = vec![[0, 40]], "runs for 40 seeds covered");
    forge("outside.json", &|f| f.cells[0].covered = vec![[30, 50]], "outside 0..40");
    forge("overlap.json", &|f| f.cells[0].covered = vec![[0, 15], [10, 20]], "overlapping");
    forge("banana.json", &|f| f.cells[0].seeds = "banana".into(), "seeds `banana`");
    forge("empty.json", &|f| f.cells.clear(), "no cells");
    forge(
        "max.json",
        &|f| f.cells[0].aggregate.violating_seeds = u64::MAX,
        "violating seeds out of 20 runs",
    );
    forge(
        "passed.json",
        &|f| {
            let a = &mut f.cells[0].aggregate;
            a.passed = true;
            a.failed_seeds = 0;
            a.first_failed_seed = None;
            a.first_failure.clear();
            a.violations.insert(
                "duplicate-row".into(),
                sweep::ViolationStat {
                    seeds: 10,
                    occurrences: 10,
                    first_seed: 99,
                    permitted: false,
                },
            );
        },
        "violation duplicate-row",
    );
    // Not a regular file: refused at once (a FIFO would block a reader forever).
    let e = shard::read(Path::new("/dev/zero")).unwrap_err();
    assert!(e.contains("not a regular file"), "{e}");
    let fifo = dir.join("fifo.json");
    let _ = std::fs::remove_file(&fifo);
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let e = shard::read(&fifo).unwrap_err();
    assert!(e.contains("not a regular file"), "{e}");
}

/// A temporary folder of this test process.
fn tmp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("idemsim-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `idemsim merge ARGS` from the repository root: (exit code, stdout, stderr).
fn merge_cli(args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["merge"];
    all.extend(args);
    run_in(Path::new("."), &all, &[])
}

/// The aggregate of a cell that ran nothing.
fn blank(a: &mut sweep::Cell) {
    let (seeds, sim, model) = (a.seeds.clone(), a.sim.clone(), a.model.clone());
    let s = serde_json::json!({
        "model": model, "sim": sim, "seeds": seeds, "runs": 0, "passed": true,
        "failed_seeds": 0, "first_failed_seed": null, "first_failure": [], "rows": {},
        "effects": {}, "statuses": {}, "bounded_runs": 0, "violations": {},
        "rows_per_intent": {}, "effects_per_intent": {}, "violating_seeds": 0,
        "ambiguous_intents": 0, "nondeterministic_seeds": [],
    });
    *a = serde_json::from_value(s).unwrap();
}

/// Every forgery `merge` can tell from the files a shard names is refused with exit 2, naming
/// the shard file and the field: recomputed (names, n/a and its reason), implied by the sim's
/// expectations (failed seeds, per-intent counts), contradicted by running the seeds it names
/// again, or impossible by itself (unknown violations and statuses, permitted flags, a pair
/// twice, another build). Text from the shard never reaches the terminal raw.
#[test]
fn merge_refuses_forged_claims_naming_file_and_field() {
    let dir = tmp_dir("forged-merge");
    let s = vec![sim("sims/teaching/check-first-race.toml")];
    let good = cells_of(&s, &[model("check-first")], 0..40, Some((0, 1)));
    let a = &good.cells[0].aggregate;
    assert!(a.failed_seeds > 0 && a.violations.contains_key("duplicate-row"), "{a:?}");
    let write = |name: &str, f: &ShardFile| {
        let p = dir.join(name);
        std::fs::write(&p, serde_json::to_string(f).unwrap()).unwrap();
        p.to_str().unwrap().to_string()
    };
    let (code, _, err) = merge_cli(&[&write("good.json", &good)]);
    assert_eq!(code, 1, "the honest shard merges and finds the race: {err}");
    let refused = |name: &str, f: &ShardFile, field: &str| {
        let p = write(name, f);
        let (code, out, err) = merge_cli(&[&p]);
        assert_eq!(code, 2, "{name}: {out}{err}");
        assert!(err.contains(&format!("{p}: ")) && err.contains(field), "{name}: {err}");
        assert!(!err.contains('\u{1b}') && err.trim_end().lines().count() == 1, "{name}: {err}");
    };
    let forge = |name: &str, edit: &dyn Fn(&mut ShardFile), field: &str| {
        let mut f = good.clone();
        edit(&mut f);
        refused(name, &f, field);
    };
    // The forgery: a failing cell claims it passed while it lists duplicate-row.
    let green = |f: &mut ShardFile| {
        let a = &mut f.cells[0].aggregate;
        (a.passed, a.failed_seeds, a.first_failed_seed) = (true, 0, None);
        a.first_failure.clear();
    };
    forge("green.json", &green, "aggregate.failed_seeds");
    // With the rows histogram forged too, rerunning duplicate-row's first seed tells.
    let all_one_row = |f: &mut ShardFile| {
        green(f);
        let a = &mut f.cells[0].aggregate;
        let runs = a.runs;
        a.rows = [(1, runs)].into();
    };
    forge("green-rows.json", &all_one_row, "when run again");
    forge(
        "na.json",
        &|f| {
            let a = &mut f.cells[0].aggregate;
            blank(a);
            (a.applicable, a.reason) = (false, Some("forged".into()));
        },
        "aggregate.applicable",
    );
    let passing_seed = |f: &ShardFile| {
        let a = &f.cells[0].aggregate;
        let bad: Vec<u64> = a.violations.values().map(|v| v.first_seed).collect();
        (0..a.first_failed_seed.unwrap()).find(|s| !bad.contains(s)).unwrap()
    };
    forge(
        "first-seed.json",
        &|f| f.cells[0].aggregate.first_failed_seed = Some(passing_seed(f)),
        "aggregate.first_failed_seed",
    );
    forge(
        "violation-seed.json",
        &|f| {
            let s = passing_seed(f);
            f.cells[0].aggregate.violations.get_mut("duplicate-row").unwrap().first_seed = s;
        },
        "aggregate.violations",
    );
    forge(
        "first-failure.json",
        &|f| f.cells[0].aggregate.first_failure[0].actual = "\u{1b}[2J201".into(),
        "aggregate.first_failure",
    );
    for (i, name) in ["\u{1b}[2Jduplicate-row", "duplicate-row\nPASS", "no-such-violation"]
        .into_iter()
        .enumerate()
    {
        forge(
            &format!("violation-name-{i}.json"),
            &|f| {
                let a = &mut f.cells[0].aggregate;
                let v = a.violations.remove("duplicate-row").unwrap();
                a.violations.insert(name.into(), v);
            },
            "aggregate.violations",
        );
    }
    forge(
        "permitted.json",
        &|f| f.cells[0].aggregate.violations.get_mut("duplicate-row").unwrap().permitted = true,
        "permitted",
    );
    for (i, status) in ["201\nPASS", "\u{1b}[31m", "0201", "ok"].into_iter().enumerate() {
        forge(
            &format!("status-{i}.json"),
            &|f| {
                let a = &mut f.cells[0].aggregate;
                let n = a.statuses.remove("201").unwrap();
                a.statuses.insert(status.into(), n);
            },
            "aggregate.statuses",
        );
    }
    forge(
        "rows-per-intent.json",
        &|f| {
            let a = &mut f.cells[0].aggregate;
            for h in [&mut a.rows_per_intent, &mut a.effects_per_intent] {
                *h.entry(7).or_insert(0) += 1;
            }
        },
        "aggregate.rows_per_intent",
    );
    forge(
        "bounded.json",
        &|f| f.cells[0].aggregate.bounded_runs = f.cells[0].aggregate.failed_seeds + 1,
        "aggregate.failed_seeds",
    );
    forge(
        "ambiguous.json",
        &|f| f.cells[0].aggregate.ambiguous_intents += 1,
        "aggregate.ambiguous_intents",
    );
    forge(
        "sim-name.json",
        &|f| {
            f.cells[0].sim.name = "other\u{1b}[2J".into();
            f.cells[0].aggregate.sim = "other\u{1b}[2J".into();
        },
        "sim.name",
    );
    forge(
        "model-name.json",
        &|f| f.cells[0].aggregate.model = "transactional".into(),
        "aggregate.model",
    );
    forge("twice.json", &|f| f.cells.push(f.cells[0].clone()), "cells");
    forge("build.json", &|f| f.build.idemsim = "0.0.0-forged".into(), "build");
    // The reason of a cell that is n/a is recomputed too.
    let bare = dir.join("bare.toml");
    std::fs::write(&bare, "program = [\"lookup\", \"insert-row\", \"save-response\"]\n[key]\n")
        .unwrap();
    let na = cells_of(
        &[sim("sims/article/10-failure-before-commit.toml")],
        &[Arc::new(Model::load(&bare).unwrap())],
        0..4,
        Some((0, 1)),
    );
    assert!(!na.cells[0].aggregate.applicable);
    let (code, out, err) = merge_cli(&[&write("na-good.json", &na)]);
    assert_eq!(code, 0, "{out}{err}");
    let mut f = na.clone();
    f.cells[0].aggregate.reason = Some("\u{1b}[2Jforged".into());
    refused("na-reason.json", &f, "aggregate.reason");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `merge --out FILE` writes nothing when the merge is refused, and the file once every check
/// passed; `--out -` writes the merged file to standard output and the report to standard
/// error (never a file named `-`).
#[test]
fn merge_out_waits_for_every_check_and_dash_is_stdout() {
    let dir = tmp_dir("merge-out");
    let s = vec![sim("sims/teaching/check-first-race.toml")];
    let m = vec![model("check-first")];
    let parts: Vec<String> = (0..2)
        .map(|k| {
            let p = dir.join(format!("part-{k}.json"));
            let f = cells_of(&s, &m, 0..30, Some((k, 2)));
            std::fs::write(&p, serde_json::to_string(&f).unwrap()).unwrap();
            p.to_str().unwrap().to_string()
        })
        .collect();
    let out = dir.join("merged.json");
    let o = out.to_str().unwrap();
    // Refused after the files were read and merged: nothing is written.
    for extra in [&["--expect-seeds", "0..31"][..], &[]] {
        let mut args = vec![parts[0].as_str(), "--out", o];
        args.extend(extra);
        let (code, _, err) = merge_cli(&args);
        assert_eq!(code, 2, "{err}");
        assert!(!out.exists(), "written although refused: {err}");
    }
    let mut forged: ShardFile =
        serde_json::from_str(&std::fs::read_to_string(&parts[1]).unwrap()).unwrap();
    forged.cells[0].aggregate.statuses.insert("PASS".into(), 1);
    let fp = dir.join("forged.json");
    std::fs::write(&fp, serde_json::to_string(&forged).unwrap()).unwrap();
    let (code, _, err) = merge_cli(&[&parts[0], fp.to_str().unwrap(), "--out", o]);
    assert_eq!(code, 2, "{err}");
    assert!(!out.exists(), "written although refused: {err}");
    // Accepted: written, and it merges again to the same report.
    let (code, report, _) = merge_cli(&[&parts[0], &parts[1], "--out", o]);
    assert_eq!(code, 1);
    let (code, again, _) = merge_cli(&[o]);
    assert_eq!((code, &again), (1, &report));
    // `-`: the merged file on stdout, the report on stderr.
    let (code, stdout, stderr) = merge_cli(&[&parts[0], &parts[1], "--out", "-"]);
    assert_eq!(code, 1);
    let f: ShardFile = serde_json::from_str(&stdout).unwrap();
    assert_eq!(f, serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap());
    assert_eq!(stdout.trim_end(), std::fs::read_to_string(&out).unwrap());
    assert_eq!(stderr, report);
    assert!(!root().join("-").exists(), "a file named `-`");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `merge --json` prints what `sweep --json` prints (one cell, with `speed`: the shards'
/// summed wall time) and what `matrix --json` prints (several), key for key.
#[test]
fn merge_json_equals_sweep_and_matrix_json() {
    let dir = tmp_dir("merge-json");
    let d = dir.to_str().unwrap();
    let sweep_args = ["sweep", "sims/teaching/check-first-race.toml", "--model", "check-first"];
    let matrix_args = [
        "matrix",
        "--sims",
        "sims/teaching/check-first-race.toml",
        "sims/article/01-same-key-same-content.toml",
        "--models",
        "check-first",
        "transactional",
    ];
    for (what, args) in [("sweep", &sweep_args[..]), ("matrix", &matrix_args[..])] {
        let mut one: Vec<&str> = args.to_vec();
        one.extend(["--seeds", "0..40", "--json"]);
        let (_, whole, err) = run_in(&dir, &one, &[]);
        let out = format!("{d}/{what}");
        for k in ["0/3", "1/3", "2/3"] {
            let mut a: Vec<&str> = args.to_vec();
            a.extend(["--seeds", "0..40", "--shard", k, "--out-dir", &out]);
            let (code, _, err) = run_in(&dir, &a, &[]);
            assert_eq!(code, 0, "{err}");
        }
        let (_, merged, _) = merge_cli(&[&out, "--json"]);
        let mut whole: serde_json::Value =
            serde_json::from_str(&whole).unwrap_or_else(|_| panic!("{err}"));
        let mut merged: serde_json::Value = serde_json::from_str(&merged).unwrap();
        if what == "sweep" {
            let keys = |v: &serde_json::Value| -> Vec<String> {
                v["speed"].as_object().unwrap().keys().cloned().collect()
            };
            assert_eq!(keys(&whole), keys(&merged));
            assert_eq!(merged["speed"]["runs"], 40);
            whole.as_object_mut().unwrap().remove("speed");
            merged.as_object_mut().unwrap().remove("speed");
        }
        assert_eq!(whole, merged, "{what}");
        // Key order as printed, too.
        assert_eq!(serde_json::to_string(&whole).unwrap(), serde_json::to_string(&merged).unwrap());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two sim files of one name cannot be told apart in a matrix's rows or a shard's cells:
/// `matrix` refuses them up front naming both paths, and a merged file that pairs two sim
/// files of one name with different models is refused.
#[test]
fn sims_of_one_name_are_refused() {
    let dir = tmp_dir("same-name");
    for (sub, from) in
        [("a", "teaching/check-first-race"), ("b", "article/01-same-key-same-content")]
    {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        std::fs::copy(root().join(format!("sims/{from}.toml")), dir.join(sub).join("x.toml"))
            .unwrap();
    }
    let (a, b) = (dir.join("a/x.toml"), dir.join("b/x.toml"));
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    for sims in
        [vec![a_s, b_s], vec![dir.join("a").to_str().unwrap(), dir.join("b").to_str().unwrap()]]
    {
        let mut args = vec!["matrix", "--sims"];
        args.extend(&sims);
        args.extend(["--models", "check-first", "--seeds", "0..2", "--shard", "0/1"]);
        let (code, out, err) = run_in(&dir, &args, &[]);
        assert_eq!(code, 2, "{out}{err}");
        assert!(err.contains(a_s) && err.contains(b_s), "{err}");
    }
    let (code, _, err) = run_in(&dir, &["matrix", "--sims", a_s, a_s, "--seeds", "0..2"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("given twice"), "{err}");
    // Each cell is right about its own file; together they name two files `x`.
    let one = cells_of(&[Arc::new(Sim::load(&a).unwrap())], &[model("check-first")], 0..4, None);
    let mut f =
        cells_of(&[Arc::new(Sim::load(&b).unwrap())], &[model("transactional")], 0..4, None);
    f.cells.insert(0, one.cells[0].clone());
    let p = dir.join("two.json");
    std::fs::write(&p, serde_json::to_string(&f).unwrap()).unwrap();
    let (code, _, err) = merge_cli(&[p.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("two sim files are named `x`"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Cells are matched by an index, not by scanning: a merge of two files of 20,000 cells each
/// (the second in reverse order, with 500 pairs of its own) keeps the first file's order, then
/// the new pairs in the order the second brings them, each cell the merge of its two halves.
/// (Measured by hand: two such files took 70 s to `merge` before, 1.7 s after.)
#[test]
fn a_merge_of_twenty_thousand_cells_keeps_order() {
    let s = vec![sim("sims/teaching/check-first-race.toml")];
    let m = vec![model("check-first")];
    let halves: Vec<ShardFile> = (0..2).map(|k| cells_of(&s, &m, 0..10, Some((k, 2)))).collect();
    let whole = shard::merge(halves.clone()).unwrap().cells[0].aggregate.clone();
    let named = |c: &ShardCell, i: usize| {
        let mut c = c.clone();
        c.sim.name = format!("s{}", i / 100);
        c.model.name = format!("m{}", i % 100);
        (c.aggregate.sim, c.aggregate.model) = (c.sim.name.clone(), c.model.name.clone());
        c
    };
    let n = 20_000;
    let mut first = halves[0].clone();
    first.cells = (0..n).map(|i| named(&halves[0].cells[0], i)).collect();
    let mut second = halves[1].clone();
    second.cells = (0..n + 500).rev().map(|i| named(&halves[1].cells[0], i)).collect();
    let merged = shard::merge(vec![first, second]).unwrap();
    assert_eq!(merged.cells.len(), n + 500);
    for (i, c) in merged.cells.iter().enumerate() {
        let want = if i < n { i } else { n + 500 - 1 - (i - n) };
        assert_eq!(named(c, want).sim.name, c.sim.name);
        assert_eq!(named(c, want).model.name, c.model.name);
        if i < n {
            let mut a = c.aggregate.clone();
            (a.sim, a.model) = (whole.sim.clone(), whole.model.clone());
            assert_eq!(a, whole, "cell {i}");
        }
    }
    // One pair twice in one file is refused.
    let mut twice = halves[0].clone();
    twice.cells.push(twice.cells[0].clone());
    assert!(shard::merge(vec![twice]).unwrap_err().contains("twice"));
}

/// A merge without cells is a gap: refused, with `--expect-seeds` or without.
#[test]
fn an_empty_merge_is_refused() {
    let s = vec![sim("sims/teaching/check-first-race.toml")];
    let mut f = cells_of(&s, &[model("check-first")], 0..4, None);
    f.cells.clear();
    for expect in [Some(0..4), None] {
        for partial in [false, true] {
            assert!(shard::policy::accept(&f, expect.as_ref(), partial).is_err());
        }
    }
}
