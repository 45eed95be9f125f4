//! The honest side: the shard files the tool itself writes for the small matrix, run shard by
//! shard in process (`honest`), and the binary's `merge` run on shard files within a wall and
//! a memory bound (`run_merge`, `Merged`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{MERGE_MEMORY, MODELS, SEEDS, SHARDS, SIMS};
use crate::catalog;
use crate::shard::{self, ShardSpec, Timing};
use crate::sweep::{self, SweepOptions};

/// What `idemsim merge` printed and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    /// Its exit code (None: killed by a signal or by the wall bound).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// It ran past the wall bound and was killed.
    pub timed_out: bool,
}

/// The honest shard files and the honest merge's report.
#[derive(Debug, Clone)]
pub struct Honest {
    /// The shard files as `--shard K/N` writes them: (file name, content).
    pub files: Vec<(String, Value)>,
    /// The matrix's cells in order: (model, sim, applicable).
    pub cells: Vec<(String, String, bool)>,
    /// `merge` of the honest files (text).
    pub text: Merged,
    /// `merge --json` of the honest files.
    pub json: Merged,
}

/// The seed range as merge's `--expect-seeds` takes it.
pub(super) fn seeds_arg() -> String {
    format!("{}..{}", SEEDS.start, SEEDS.end)
}

/// Run the honest matrix shard by shard in process (as `matrix --shard K/N` does) and merge
/// the files with `bin` (files written under `work/honest`).
pub fn honest(bin: &Path, work: &Path) -> Result<Honest, String> {
    let root = catalog::root();
    let sims = SIMS
        .iter()
        .map(|s| catalog::sim(&root.join(s).display().to_string()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let models = MODELS
        .iter()
        .map(|m| catalog::model(m))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let mut files = Vec::new();
    for k in 0..SHARDS {
        let started = Instant::now();
        let opts = SweepOptions { jobs: 2, shard: Some((k, SHARDS)), ..Default::default() };
        let cells = sweep::run_cells(&sims, &models, Some(SEEDS), &opts, |_, _| {})
            .map_err(|e| e.to_string())?;
        let timing = Timing { wall_s: started.elapsed().as_secs_f64(), jobs: 2 };
        let spec = ShardSpec { k, n: SHARDS, source: "--shard".into() };
        let f = shard::shard_file(&sims, &models, &cells, Some(spec), timing);
        let v = serde_json::to_value(&f).map_err(|e| e.to_string())?;
        files.push((format!("shard-{k}-of-{SHARDS}.json"), v));
    }
    let cells = files[0].1["cells"]
        .as_array()
        .ok_or("a shard file without cells")?
        .iter()
        .map(|c| {
            let name = |x: &Value| x["name"].as_str().unwrap_or_default().to_string();
            (name(&c["model"]), name(&c["sim"]), c["aggregate"]["applicable"] != false)
        })
        .collect();
    let dir = work.join("honest");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut paths = Vec::new();
    for (name, v) in &files {
        let p = dir.join(name);
        std::fs::write(&p, pretty(v)).map_err(|e| e.to_string())?;
        paths.push(p);
    }
    let wall = Duration::from_secs(60);
    let text = run_merge(bin, &merge_args(&paths, None, false), &dir, "text", wall);
    let json = run_merge(bin, &merge_args(&paths, None, true), &dir, "json", wall);
    Ok(Honest { files, cells, text, json })
}

pub(super) fn pretty(v: &Value) -> Vec<u8> {
    serde_json::to_vec_pretty(v).expect("a JSON value serialises")
}

/// merge's arguments: the seeds expected, `--out` when given, `--json` when asked, the files;
/// `--quiet`, so that stderr holds no `written to` line (its path and size are the mutant's
/// own) and compares with the honest merge's.
pub(super) fn merge_args(paths: &[PathBuf], out: Option<&Path>, json: bool) -> Vec<String> {
    let mut args =
        vec!["--quiet".to_string(), "merge".into(), "--expect-seeds".into(), seeds_arg()];
    if let Some(o) = out {
        args.extend(["--out".into(), o.display().to_string()]);
    }
    if json {
        args.push("--json".into());
    }
    args.extend(paths.iter().map(|p| p.display().to_string()));
    args
}

/// Run `bin args` from the repository's root with its output in files under `dir`, at most
/// [`MERGE_MEMORY`] of address space and `wall` of wall-clock time (then it is killed).
pub fn run_merge(bin: &Path, args: &[String], dir: &Path, tag: &str, wall: Duration) -> Merged {
    use std::os::unix::process::CommandExt;
    let (out_p, err_p) = (dir.join(format!("{tag}.stdout")), dir.join(format!("{tag}.stderr")));
    let mut cmd = Command::new(bin);
    cmd.args(args).current_dir(catalog::root()).stdin(Stdio::null());
    cmd.stdout(std::fs::File::create(&out_p).expect("the mutant's folder is writable"));
    cmd.stderr(std::fs::File::create(&err_p).expect("the mutant's folder is writable"));
    // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit { rlim_cur: MERGE_MEMORY, rlim_max: MERGE_MEMORY };
            libc::setrlimit(libc::RLIMIT_AS, &lim);
            Ok(())
        });
    }
    let started = Instant::now();
    let mut child = cmd.spawn().expect("the idemsim binary starts");
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait().expect("waiting on merge") {
            break Some(s);
        }
        if started.elapsed() > wall {
            timed_out = true;
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let read = |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into();
    Merged {
        code: status.and_then(|s| s.code()),
        stdout: read(&out_p),
        stderr: read(&err_p),
        timed_out,
    }
}
