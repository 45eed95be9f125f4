//! Shard-file mutants and their judge (issue 23): honest shard files made by the tool itself
//! (a small matrix run in process, shard by shard, as `matrix --shard K/N` does), mutated — the
//! structured forgeries of [`classes`] and random JSON-level edits — and merged by the binary
//! (`idemsim merge --expect-seeds A..B --out F`). The judge: each mutant is refused with a
//! located error (exit 2, naming a shard file given or a cell, nothing written to `--out`), or
//! merged to the report the honest merge gives (text, JSON and exit code). A mutant only a
//! re-run of seeds could tell from an honest shard ([`Expect::Sane`]) may merge to another
//! report, but never to one with an impossible number. Never a panic, a hang or a crash.
//!
//! Mutant `i` of a campaign is drawn from (campaign seed, `i`) alone: even indices are the
//! structured classes in turn, odd ones random edits (one to three JSON edits, or one time in
//! eight an edit of the raw bytes).

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::catalog;
use crate::report::ViolationKind;
use crate::scenario::{MAX_ATTEMPTS, MAX_COPIES, MAX_REQUESTS};
use crate::shard::{self, ShardSpec, Timing};
use crate::sweep::{self, SweepOptions};

/// The honest matrix's sims: one fails on some seeds with a violation, one does not.
pub const SIMS: [&str; 2] =
    ["sims/teaching/check-first-race.toml", "sims/faults/dropped-replies.toml"];
/// The honest matrix's models: one that fails the race, one that passes, one n/a on both sims.
pub const MODELS: [&str; 3] = ["check-first", "transactional", "update-last-write"];
/// The honest matrix's seeds (every cell's range).
pub const SEEDS: Range<u64> = 0..40;
/// How many shards the honest matrix is split into.
pub const SHARDS: u64 = 3;
/// In a mutant file's text, the mutant's folder (a path field naming a FIFO made there).
pub const DIR: &str = "@MUTANT_DIR@";
/// The address space a merge may use (bytes): a shard that points it at `/dev/zero` fails
/// instead of taking the machine's memory.
pub const MERGE_MEMORY: u64 = 512 << 20;

/// What the judge requires of a mutant `merge` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Expect {
    /// The report of the honest merge (text, JSON, exit code), or a located refusal: merge can
    /// check the field against the sims and models it reloads or against the other shards.
    Strict,
    /// Any report without an impossible number, or a located refusal: only re-running seeds
    /// could tell (counts moved between buckets, a later first seed, timing, a failure's text).
    Sane,
}

/// One entry of a mutant's folder.
#[derive(Debug, Clone)]
pub enum Entry {
    /// A file with these bytes ([`DIR`] replaced by the folder's path when written).
    File {
        /// The file's name in the folder.
        name: String,
        /// Its content.
        bytes: Vec<u8>,
    },
    /// A FIFO: a reader that opens it blocks until a writer comes.
    Fifo {
        /// The FIFO's name in the folder.
        name: String,
    },
}

/// One mutant: the files of its folder and the paths `merge` is given.
#[derive(Debug, Clone)]
pub struct Mutant {
    /// Its class: a structured class's name, or `random`.
    pub class: &'static str,
    /// What the judge requires if merge accepts it.
    pub expect: Expect,
    /// The folder's entries.
    pub files: Vec<Entry>,
    /// merge's shard arguments, as indices into `files` (one may be given twice, or not at all).
    pub given: Vec<usize>,
    /// What was done, in one line.
    pub what: String,
}

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
fn seeds_arg() -> String {
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

fn pretty(v: &Value) -> Vec<u8> {
    serde_json::to_vec_pretty(v).expect("a JSON value serialises")
}

/// merge's arguments: the seeds expected, `--out` when given, `--json` when asked, the files;
/// `--quiet`, so that stderr holds no `written to` line (its path and size are the mutant's
/// own) and compares with the honest merge's.
fn merge_args(paths: &[PathBuf], out: Option<&Path>, json: bool) -> Vec<String> {
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

// ---------------------------------------------------------------------------------------------
// Structured mutants.

/// The honest files being forged, and merge's arguments.
struct Draft {
    files: Vec<(String, Value)>,
    /// A file's raw bytes instead of its value.
    raw: Vec<Option<Vec<u8>>>,
    /// Text replaced in a file once serialised: (file, from, to) (JSON cannot say NaN).
    replace: Vec<(usize, String, String)>,
    given: Vec<usize>,
    fifo: bool,
}

impl Draft {
    fn new(h: &Honest) -> Draft {
        Draft {
            files: h.files.clone(),
            raw: vec![None; h.files.len()],
            replace: Vec::new(),
            given: (0..h.files.len()).collect(),
            fifo: false,
        }
    }

    fn name(&self, f: usize) -> &str {
        &self.files[f].0
    }

    fn cell(&mut self, f: usize, c: usize) -> &mut Value {
        &mut self.files[f].1["cells"][c]
    }

    fn agg(&mut self, f: usize, c: usize) -> &mut Value {
        &mut self.files[f].1["cells"][c]["aggregate"]
    }

    /// (file, cell) pairs satisfying `pred`.
    fn cells_where(&self, pred: impl Fn(&Value) -> bool) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (f, (_, v)) in self.files.iter().enumerate() {
            for (c, cell) in v["cells"].as_array().into_iter().flatten().enumerate() {
                if pred(cell) {
                    out.push((f, c));
                }
            }
        }
        out
    }

    /// A cell some file covers seeds of (so it ran them), satisfying `pred`.
    fn pick(&self, rng: &mut StdRng, pred: impl Fn(&Value) -> bool) -> Option<(usize, usize)> {
        let covering = |c: &Value| c["covered"].as_array().is_some_and(|a| !a.is_empty());
        self.cells_where(|c| covering(c) && pred(c)).choose(rng).copied()
    }

    fn into_mutant(self, class: &'static str, expect: Expect, what: String) -> Mutant {
        let mut files: Vec<Entry> = Vec::new();
        for (i, ((name, v), raw)) in self.files.into_iter().zip(self.raw).enumerate() {
            let mut bytes = raw.unwrap_or_else(|| pretty(&v));
            for (_, from, to) in self.replace.iter().filter(|(f, _, _)| *f == i) {
                let text = String::from_utf8_lossy(&bytes).replacen(from.as_str(), to, 1);
                bytes = text.into_bytes();
            }
            files.push(Entry::File { name, bytes });
        }
        if self.fifo {
            files.push(Entry::Fifo { name: "fifo".into() });
        }
        Mutant { class, expect, files, given: self.given, what }
    }
}

/// A structured forgery: edits the draft, says what it did (None: nothing to forge here).
type Forge = fn(&mut Draft, &mut StdRng) -> Option<String>;

fn covered_of(cell: &Value) -> Vec<[u64; 2]> {
    serde_json::from_value(cell["covered"].clone()).unwrap_or_default()
}

fn has_failures(c: &Value) -> bool {
    c["aggregate"]["failed_seeds"].as_u64().is_some_and(|n| n > 0)
        || c["aggregate"]["violations"].as_object().is_some_and(|v| !v.is_empty())
}

fn is_na(c: &Value) -> bool {
    c["aggregate"]["applicable"] == false
}

fn choose<T: Clone>(rng: &mut StdRng, xs: &[T]) -> T {
    xs.choose(rng).expect("a non-empty choice").clone()
}

/// A key of the object at `ptr` (None if it has none).
fn key_of(v: &Value, ptr: &str, rng: &mut StdRng) -> Option<String> {
    let keys: Vec<String> = v.pointer(ptr)?.as_object()?.keys().cloned().collect();
    keys.choose(rng).cloned()
}

fn rename_key(obj: &mut Value, from: &str, to: &str) {
    if let Some(m) = obj.as_object_mut()
        && let Some(x) = m.remove(from)
    {
        m.insert(to.to_string(), x);
    }
}

fn runs_disagree(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    let runs = d.agg(f, c)["runs"].as_u64()?;
    let new = choose(rng, &[runs * 17, runs + 1, runs - 1, 0, u64::MAX]);
    d.agg(f, c)["runs"] = json!(new);
    Some(format!("{}: cell {c}: runs {runs} → {new}", d.name(f)))
}

fn covered_widened(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |c| covered_of(c) != [[SEEDS.start, SEEDS.end]])?;
    d.cell(f, c)["covered"] = json!([[SEEDS.start, SEEDS.end]]);
    Some(format!("{}: cell {c}: covered widened to the whole range", d.name(f)))
}

fn covered_overlapping(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |c| covered_of(c).iter().any(|i| i[1] - i[0] >= 2))?;
    let [a, b] = covered_of(d.cell(f, c))[0];
    let m = (a + b) / 2;
    let new = choose(
        rng,
        &[json!([[a, m], [m - 1, b]]), json!([[a, b], [a, b]]), json!([[m, b], [a, m]])],
    );
    d.cell(f, c)["covered"] = new.clone();
    Some(format!("{}: cell {c}: covered {new}", d.name(f)))
}

fn covered_outside(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    let [a, b] = covered_of(d.cell(f, c))[0];
    let end = SEEDS.end;
    let new = choose(
        rng,
        &[json!([[a + end, b + end]]), json!([[a, b + 1]]), json!([[u64::MAX - 1, u64::MAX]])],
    );
    d.cell(f, c)["covered"] = new.clone();
    Some(format!("{}: cell {c}: covered {new}", d.name(f)))
}

/// Pointers (inside an aggregate) to the counts of `agg`.
fn count_pointers(agg: &Value) -> Vec<String> {
    let mut out: Vec<String> = ["/failed_seeds", "/violating_seeds", "/bounded_runs"]
        .into_iter()
        .chain(["/ambiguous_intents"])
        .map(String::from)
        .collect();
    for h in ["statuses", "rows", "effects", "rows_per_intent", "effects_per_intent"] {
        for k in agg[h].as_object().into_iter().flat_map(|m| m.keys()) {
            out.push(format!("/{h}/{k}"));
        }
    }
    for k in agg["violations"].as_object().into_iter().flat_map(|m| m.keys()) {
        out.push(format!("/violations/{k}/seeds"));
        out.push(format!("/violations/{k}/occurrences"));
    }
    out
}

fn count_near_max(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    let ptr = count_pointers(d.agg(f, c)).choose(rng)?.clone();
    let new = u64::MAX - rng.gen_range(0..3);
    *d.agg(f, c).pointer_mut(&ptr)? = json!(new);
    Some(format!("{}: cell {c}: {ptr} → {new}", d.name(f)))
}

/// Pointers to an aggregate's first seeds: each violation's and the first failing seed's.
fn first_seed_ptrs(agg: &Value) -> Vec<String> {
    let mut ptrs: Vec<String> = agg["violations"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.keys().map(|k| format!("/violations/{k}/first_seed")))
        .collect();
    if !agg["first_failed_seed"].is_null() {
        ptrs.push("/first_failed_seed".into());
    }
    ptrs
}

fn first_seed_outside(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, has_failures)?;
    let ptr = first_seed_ptrs(d.agg(f, c)).choose(rng)?.clone();
    let covered = covered_of(d.cell(f, c));
    let mut outside: Vec<u64> = vec![SEEDS.end, 1000, u64::MAX];
    outside.extend(SEEDS.filter(|s| !covered.iter().any(|i| i[0] <= *s && *s < i[1])).take(1));
    let new = choose(rng, &outside);
    *d.agg(f, c).pointer_mut(&ptr)? = json!(new);
    Some(format!("{}: cell {c}: {ptr} → {new}", d.name(f)))
}

fn seeds_banana(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    let new = choose(rng, &["banana", "", "40..0", "0..18446744073709551615", "0..40\u{1b}[2J"]);
    let ptr = choose(rng, &["/seeds", "/aggregate/seeds"]);
    *d.cell(f, c).pointer_mut(ptr)? = json!(new);
    Some(format!("{}: cell {c}: {ptr} → {new:?}", d.name(f)))
}

fn identity_disagrees(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    let other_sim =
        SIMS.iter().map(|s| s.rsplit('/').next().unwrap_or(s).trim_end_matches(".toml"));
    let sims: Vec<&str> = other_sim.collect();
    let (ptr, new) = match rng.gen_range(0..5) {
        0 => ("/aggregate/model", json!(choose(rng, &MODELS))),
        1 => ("/aggregate/sim", json!(choose(rng, &sims))),
        2 => ("/aggregate/seeds", json!("0..41")),
        3 => ("/sim/name", json!(choose(rng, &sims))),
        _ => ("/model/name", json!(choose(rng, &MODELS))),
    };
    let old = d.cell(f, c).pointer(ptr)?.clone();
    if old == new {
        return None;
    }
    *d.cell(f, c).pointer_mut(ptr)? = new.clone();
    Some(format!("{}: cell {c}: {ptr} {old} → {new}", d.name(f)))
}

fn cells_empty(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let f = rng.gen_range(0..d.files.len());
    d.files[f].1["cells"] = json!([]);
    Some(format!("{}: cells []", d.name(f)))
}

fn only_empty_file(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let f = rng.gen_range(0..d.files.len());
    d.files[f].1["cells"] = json!([]);
    d.given = vec![f];
    Some(format!("{} alone, with cells []", d.name(f)))
}

fn forged_na(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |c| !is_na(c))?;
    let a = d.agg(f, c);
    for k in ["rows", "effects", "statuses", "violations", "rows_per_intent", "effects_per_intent"]
    {
        a[k] = json!({});
    }
    for k in ["runs", "failed_seeds", "bounded_runs", "violating_seeds", "ambiguous_intents"] {
        a[k] = json!(0);
    }
    a["passed"] = json!(true);
    a["first_failed_seed"] = Value::Null;
    a["first_failure"] = json!([]);
    a["applicable"] = json!(false);
    a["reason"] = json!("the sim injects at a point the model does not have");
    Some(format!("{}: cell {c}: applicable false, runs 0, counts emptied", d.name(f)))
}

fn forged_applicable(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = *d.cells_where(is_na).choose(rng)?;
    let runs = SEEDS.end - SEEDS.start;
    d.cell(f, c)["covered"] = json!([[SEEDS.start, SEEDS.end]]);
    let a = d.agg(f, c);
    if let Some(m) = a.as_object_mut() {
        m.remove("applicable");
        m.remove("reason");
    }
    a["runs"] = json!(runs);
    a["rows"] = json!({"1": runs});
    a["effects"] = json!({"0": runs});
    a["rows_per_intent"] = json!({"1": runs});
    a["effects_per_intent"] = json!({"0": runs});
    a["statuses"] = json!({"201": 2 * runs});
    Some(format!("{}: n/a cell {c}: applicable, every seed covered and passed", d.name(f)))
}

fn forged_passed(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    let old = d.agg(f, c)["passed"].as_bool()?;
    d.agg(f, c)["passed"] = json!(!old);
    Some(format!("{}: cell {c}: passed {old} → {}", d.name(f), !old))
}

fn forged_clean(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, has_failures)?;
    let a = d.agg(f, c);
    a["passed"] = json!(true);
    a["failed_seeds"] = json!(0);
    a["first_failed_seed"] = Value::Null;
    a["first_failure"] = json!([]);
    a["violations"] = json!({});
    a["violating_seeds"] = json!(0);
    Some(format!("{}: cell {c}: every failure and violation erased, consistently", d.name(f)))
}

fn violation_renamed(d: &mut Draft, rng: &mut StdRng, names: &[&str]) -> Option<String> {
    let (f, c) =
        d.pick(rng, |c| c["aggregate"]["violations"].as_object().is_some_and(|v| !v.is_empty()))?;
    let from = key_of(d.agg(f, c), "/violations", rng)?;
    let to = choose(rng, names);
    rename_key(&mut d.agg(f, c)["violations"], &from, to);
    Some(format!("{}: cell {c}: violation {from} renamed {to:?}", d.name(f)))
}

fn violation_name_escape(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let names = [
        "duplicate-row\u{1b}[2J\u{1b}[H",
        "duplicate-row\n  transactional × check-first-race: duplicate-row 0/40",
        "\u{1b}]0;pwned\u{7}duplicate-row",
    ];
    violation_renamed(d, rng, &names)
}

fn violation_name_unknown(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    violation_renamed(d, rng, &["banana", "", "DUPLICATE-ROW", "duplicate-row "])
}

fn status_not_status(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    let from = key_of(d.agg(f, c), "/statuses", rng)?;
    let to = choose(rng, &["banana", "\u{1b}[31m201", "", "2011", "20", "reply\nFAKE"]);
    rename_key(&mut d.agg(f, c)["statuses"], &from, to);
    Some(format!("{}: cell {c}: status {from} renamed {to:?}", d.name(f)))
}

fn shard_dropped(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let i = rng.gen_range(0..d.given.len());
    let f = d.given.remove(i);
    Some(format!("{} not given", d.name(f)))
}

fn shard_duplicated(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let f = rng.gen_range(0..d.files.len());
    let copy = (format!("copy-of-{}", d.name(f)), d.files[f].1.clone());
    d.files.push(copy);
    d.raw.push(None);
    d.given.insert(rng.gen_range(0..=d.given.len()), d.files.len() - 1);
    Some(format!("{} given again as a copy", d.name(f)))
}

fn shard_given_twice(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let f = rng.gen_range(0..d.files.len());
    d.given.insert(rng.gen_range(0..=d.given.len()), f);
    Some(format!("{} given twice (the same path)", d.name(f)))
}

fn cell_duplicated(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = *d.cells_where(|_| true).choose(rng)?;
    let cell = d.cell(f, c).clone();
    let cells = d.files[f].1["cells"].as_array_mut()?;
    cells.insert(rng.gen_range(0..=cells.len()), cell);
    Some(format!("{}: cell {c} listed twice", d.name(f)))
}

fn cells_reordered(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let f = rng.gen_range(0..d.files.len());
    let cells = d.files[f].1["cells"].as_array_mut()?;
    let before = cells.clone();
    while *cells == before {
        cells.shuffle(rng);
    }
    Some(format!("{}: its cells in another order than the other files'", d.name(f)))
}

/// A control: honest files given in another order merge to the same report.
fn files_reordered(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let before = d.given.clone();
    while d.given == before {
        d.given.shuffle(rng);
    }
    Some(format!("honest files given in the order {:?}", d.given))
}

fn build_edit(rng: &mut StdRng) -> (&'static str, &'static str) {
    choose(
        rng,
        &[
            ("idemsim", "0.0.0"),
            ("madsim", "0.2.33"),
            ("target", "aarch64-macos"),
            ("profile", "bogus"),
            ("idemsim", ""),
            ("target", "x86_64-linux\u{1b}[2J"),
        ],
    )
}

fn build_changed(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let f = rng.gen_range(0..d.files.len());
    let (k, v) = build_edit(rng);
    d.files[f].1["build"][k] = json!(v);
    Some(format!("{}: build.{k} → {v:?}", d.name(f)))
}

fn build_changed_everywhere(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (k, v) = build_edit(rng);
    for (_, file) in &mut d.files {
        file["build"][k] = json!(v);
    }
    Some(format!("every file: build.{k} → {v:?}"))
}

fn format_or_version(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let f = rng.gen_range(0..d.files.len());
    let (k, v) = choose(
        rng,
        &[
            ("format", json!("idemsim-shard2")),
            ("format", json!("")),
            ("version", json!(2)),
            ("version", json!(0)),
            ("version", json!(u32::MAX)),
        ],
    );
    d.files[f].1[k] = v.clone();
    Some(format!("{}: {k} → {v}", d.name(f)))
}

fn sha_changed(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = *d.cells_where(|_| true).choose(rng)?;
    let which = choose(rng, &["sim", "model"]);
    let old = d.cell(f, c)[which]["sha256"].as_str()?.to_string();
    let flipped = format!("{}{}", if old.starts_with('0') { "1" } else { "0" }, &old[1..]);
    let new = choose(rng, &["0".repeat(64), flipped, String::new(), "zz".into()]);
    d.cell(f, c)[which]["sha256"] = json!(new);
    Some(format!("{}: cell {c}: {which}.sha256 → {new:?}", d.name(f)))
}

fn sha_changed_everywhere(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let which = choose(rng, &["sim", "model"]);
    let names = if which == "sim" { SIMS.to_vec() } else { MODELS.to_vec() };
    let pick = choose(rng, &names);
    let name = pick.rsplit('/').next().unwrap_or(pick).trim_end_matches(".toml").to_string();
    for (f, c) in d.cells_where(|c| c[which]["name"] == name.as_str()) {
        d.cell(f, c)[which]["sha256"] = json!("0".repeat(64));
    }
    Some(format!("every file: {which} {name}'s sha256 → 0…0"))
}

fn histogram_moved(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    let h = choose(rng, &["rows", "effects", "rows_per_intent", "effects_per_intent", "statuses"]);
    let from = key_of(d.agg(f, c), &format!("/{h}"), rng)?;
    let n = d.agg(f, c)[h][&from].as_u64()?;
    let k = rng.gen_range(1..=n.max(1)).min(n);
    let to = match from.parse::<u64>() {
        Ok(x) if h == "statuses" => {
            choose(rng, &["500".to_string(), "409".into(), (x + 1).to_string()])
        }
        Ok(x) => choose(rng, &[(x + 1).to_string(), x.saturating_sub(1).to_string(), "7".into()]),
        Err(_) => "201".into(),
    };
    if to == from {
        return None;
    }
    let m = d.agg(f, c)[h].as_object_mut()?;
    m.insert(from.clone(), json!(n - k));
    let old = m.get(&to).and_then(Value::as_u64).unwrap_or(0);
    m.insert(to.clone(), json!(old + k));
    Some(format!("{}: cell {c}: {h}: {k} moved from {from} to {to}", d.name(f)))
}

fn timing_nonsense(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let f = rng.gen_range(0..d.files.len());
    let t = &mut d.files[f].1["timing"];
    let what = match rng.gen_range(0..8) {
        0 => ("wall_s", json!(-1.0)),
        1 => ("wall_s", json!(1e308)),
        2 => ("jobs", json!(0)),
        3 => ("jobs", json!(u64::MAX)),
        4 => ("jobs", json!(1u64 << 32)),
        5 => ("jobs", json!(-1)),
        _ => {
            let raw = choose(rng, &["NaN", "Infinity", "-Infinity", "1e999"]);
            t["wall_s"] = json!(123_456.5);
            d.replace.push((f, "123456.5".into(), raw.into()));
            return Some(format!("{}: timing.wall_s → {raw}", d.name(f)));
        }
    };
    t[what.0] = what.1.clone();
    Some(format!("{}: timing.{} → {}", d.name(f), what.0, what.1))
}

fn interrupted_forged(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    d.agg(f, c)["interrupted"] = json!(true);
    Some(format!("{}: cell {c}: interrupted true", d.name(f)))
}

fn nondeterministic_forged(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    let new = choose(rng, &[json!([SEEDS.end]), json!([u64::MAX]), json!([1000, 3])]);
    d.agg(f, c)["nondeterministic_seeds"] = new.clone();
    Some(format!("{}: cell {c}: nondeterministic_seeds {new}", d.name(f)))
}

/// A cell's sim or model path set to one of `paths` (None: to a FIFO in the mutant's
/// folder); three times in four in the cell merge reloads the file from (the first naming it
/// in the first file given).
fn path_set(d: &mut Draft, rng: &mut StdRng, paths: &[Option<&str>]) -> Option<String> {
    let (mut f, mut c) = *d.cells_where(|_| true).choose(rng)?;
    let which = choose(rng, &["sim", "model"]);
    if rng.gen_ratio(3, 4) {
        let name = d.cell(f, c)[which]["name"].clone();
        f = d.given[0];
        c = d.cells_where(|x| x[which]["name"] == name).into_iter().find(|p| p.0 == f)?.1;
    }
    let fifo = format!("{DIR}/fifo");
    let new = choose(rng, paths);
    d.fifo = new.is_none();
    let new = new.unwrap_or(&fifo);
    d.cell(f, c)[which]["path"] = json!(new);
    Some(format!("{}: cell {c}: {which}.path → {new:?}", d.name(f)))
}

fn path_changed(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let paths = [
        Some("/etc/passwd"),
        Some(SIMS[1]),
        Some("models/transactional.toml"),
        Some(""),
        Some("../../../../etc/passwd"),
        Some("no/such/file.toml"),
    ];
    path_set(d, rng, &paths)
}

fn path_not_a_file(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    path_set(d, rng, &[None, Some("/dev/zero"), Some("/dev/stdin"), Some("sims")])
}

fn first_failure_text(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) =
        d.pick(rng, |c| c["aggregate"]["first_failure"].as_array().is_some_and(|a| !a.is_empty()))?;
    let field = choose(rng, &["what", "expected", "actual"]);
    let new = choose(
        rng,
        &[
            "\u{1b}[2J\u{1b}[Hall clear".to_string(),
            "x\nFAKE: 6/6 passed".into(),
            "x".repeat(10_000),
        ],
    );
    d.agg(f, c)["first_failure"][0][field] = json!(new);
    Some(format!("{}: cell {c}: first_failure[0].{field} forged", d.name(f)))
}

fn reason_forged(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = *d.cells_where(is_na).choose(rng)?;
    let new = choose(rng, &["\u{1b}[31mforged", "all good", ""]);
    d.agg(f, c)["reason"] = json!(new);
    Some(format!("{}: n/a cell {c}: reason {new:?}", d.name(f)))
}

fn shard_spec_forged(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let f = rng.gen_range(0..d.files.len());
    let new = choose(
        rng,
        &[
            json!({"k": 7, "n": 3, "source": "--shard"}),
            json!({"k": u64::MAX, "n": 0, "source": "\u{1b}[2J"}),
            Value::Null,
        ],
    );
    d.files[f].1["shard"] = new.clone();
    Some(format!("{}: shard → {new}", d.name(f)))
}

fn first_seed_moved(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, has_failures)?;
    let ptr = first_seed_ptrs(d.agg(f, c)).choose(rng)?.clone();
    let seeds: Vec<u64> = covered_of(d.cell(f, c)).iter().flat_map(|i| i[0]..i[1]).collect();
    let new = *seeds.choose(rng)?;
    *d.agg(f, c).pointer_mut(&ptr)? = json!(new);
    Some(format!("{}: cell {c}: {ptr} → {new} (covered)", d.name(f)))
}

/// A count changed within what the other fields allow: only a re-run could tell.
fn counts_within_runs(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    let a = d.agg(f, c).clone();
    let runs = a["runs"].as_u64()?;
    let mut options: Vec<(String, u64)> = vec![
        ("/bounded_runs".into(), rng.gen_range(0..=runs)),
        ("/ambiguous_intents".into(), rng.gen_range(0..=2 * runs)),
    ];
    if a["failed_seeds"].as_u64()? > 0 {
        options.push(("/failed_seeds".into(), rng.gen_range(1..=runs)));
    }
    // A violation on at most the seeds with a violation, each seen at least once.
    let violating = a["violating_seeds"].as_u64()?;
    for (k, v) in a["violations"].as_object().into_iter().flatten() {
        if violating > 0 && v["permitted"] == false {
            let seeds = rng.gen_range(1..=violating);
            let occ = v["occurrences"].as_u64()?.max(seeds);
            options.push((format!("/violations/{k}/seeds"), seeds));
            options.push((format!("/violations/{k}/occurrences"), rng.gen_range(seeds..=occ * 2)));
        }
    }
    let (ptr, new) = options.choose(rng)?.clone();
    *d.agg(f, c).pointer_mut(&ptr)? = json!(new);
    Some(format!("{}: cell {c}: {ptr} → {new} (within the runs)", d.name(f)))
}

fn cli_forged(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = *d.cells_where(|_| true).choose(rng)?;
    let new = choose(rng, &["x; rm -rf ~", "$(reboot)", "", "\u{1b}[2J"]);
    d.cell(f, c)["model"]["cli"] = json!(new);
    Some(format!("{}: cell {c}: model.cli → {new:?}", d.name(f)))
}

fn not_json(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let f = rng.gen_range(0..d.files.len());
    let whole = pretty(&d.files[f].1);
    let half = whole[..whole.len() / 2].to_vec();
    let new: Vec<u8> = match rng.gen_range(0..7) {
        0 => Vec::new(),
        1 => b"{}".to_vec(),
        2 => b"null".to_vec(),
        3 => b"[]".to_vec(),
        4 => br#"{"format":"idemsim-shard","version":1}"#.to_vec(),
        5 => half,
        _ => [b"\xff\xfe".as_slice(), &whole].concat(),
    };
    let shown = String::from_utf8_lossy(&new[..new.len().min(40)]).into_owned();
    d.raw[f] = Some(new);
    Some(format!("{}: replaced by {shown:?}…", d.name(f)))
}

/// Every structured class: its name, what the judge requires, its forgery.
const CLASSES: &[(&str, Expect, Forge)] = &[
    ("runs-disagree", Expect::Strict, runs_disagree),
    ("covered-widened", Expect::Strict, covered_widened),
    ("covered-overlapping", Expect::Strict, covered_overlapping),
    ("covered-outside", Expect::Strict, covered_outside),
    ("count-near-max", Expect::Strict, count_near_max),
    ("first-seed-outside", Expect::Strict, first_seed_outside),
    ("seeds-banana", Expect::Strict, seeds_banana),
    ("identity-disagrees", Expect::Strict, identity_disagrees),
    ("cells-empty", Expect::Strict, cells_empty),
    ("only-empty-file", Expect::Strict, only_empty_file),
    ("forged-na", Expect::Strict, forged_na),
    ("forged-applicable", Expect::Strict, forged_applicable),
    ("forged-passed", Expect::Strict, forged_passed),
    ("forged-clean", Expect::Sane, forged_clean),
    ("violation-name-escape", Expect::Strict, violation_name_escape),
    ("violation-name-unknown", Expect::Strict, violation_name_unknown),
    ("status-not-status", Expect::Strict, status_not_status),
    ("shard-dropped", Expect::Strict, shard_dropped),
    ("shard-duplicated", Expect::Strict, shard_duplicated),
    ("shard-given-twice", Expect::Strict, shard_given_twice),
    ("cell-duplicated", Expect::Strict, cell_duplicated),
    ("cells-reordered", Expect::Strict, cells_reordered),
    ("files-reordered", Expect::Strict, files_reordered),
    ("build-changed", Expect::Strict, build_changed),
    ("build-changed-everywhere", Expect::Strict, build_changed_everywhere),
    ("format-or-version", Expect::Strict, format_or_version),
    ("sha-changed", Expect::Strict, sha_changed),
    ("sha-changed-everywhere", Expect::Strict, sha_changed_everywhere),
    ("histogram-moved", Expect::Sane, histogram_moved),
    ("timing-nonsense", Expect::Sane, timing_nonsense),
    ("interrupted-forged", Expect::Strict, interrupted_forged),
    ("nondeterministic-forged", Expect::Strict, nondeterministic_forged),
    ("path-changed", Expect::Strict, path_changed),
    ("path-not-a-file", Expect::Strict, path_not_a_file),
    ("first-failure-text", Expect::Sane, first_failure_text),
    ("reason-forged", Expect::Strict, reason_forged),
    ("shard-spec-forged", Expect::Strict, shard_spec_forged),
    ("first-seed-moved", Expect::Sane, first_seed_moved),
    ("counts-within-runs", Expect::Sane, counts_within_runs),
    ("cli-forged", Expect::Strict, cli_forged),
    ("not-json", Expect::Strict, not_json),
];

/// Every structured mutant class with what the judge requires of it.
pub fn classes() -> Vec<(&'static str, Expect)> {
    CLASSES.iter().map(|(n, e, _)| (*n, *e)).collect()
}

// ---------------------------------------------------------------------------------------------
// Random mutants: JSON-level edits of one file, or an edit of its raw bytes.

/// Fields of an aggregate only a re-run of seeds could check (within their bounds).
const SANE_FIELDS: [&str; 13] = [
    "statuses",
    "first_failure",
    "rows_per_intent",
    "effects_per_intent",
    "ambiguous_intents",
    "nondeterministic_seeds",
    "bounded_runs",
    "failed_seeds",
    "violating_seeds",
    "violations",
    "first_failed_seed",
    "rows",
    "effects",
];

/// Whether a change at `ptr` (a JSON pointer in a shard file) can only be told by re-running.
fn sane_path(ptr: &str) -> bool {
    let parts: Vec<&str> = ptr.split('/').collect();
    parts.get(1) == Some(&"timing")
        || (parts.len() >= 5
            && parts[1] == "cells"
            && parts[3] == "aggregate"
            && SANE_FIELDS.contains(&parts[4]))
}

/// The pointers where `a` and `b` differ.
fn diff_paths(a: &Value, b: &Value, here: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let p = format!("{here}/{k}");
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => diff_paths(u, v, &p, out),
                    _ => out.push(p),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                diff_paths(u, v, &format!("{here}/{i}"), out);
            }
        }
        _ if a != b => out.push(here.to_string()),
        _ => {}
    }
}

/// Sane when the bytes parse and every change is one only a re-run could tell; else strict.
fn expectation(before: &Value, after: &[u8]) -> Expect {
    let Ok(after) = serde_json::from_slice::<Value>(after) else { return Expect::Strict };
    let mut diffs = Vec::new();
    diff_paths(before, &after, "", &mut diffs);
    if !diffs.is_empty() && diffs.iter().all(|p| sane_path(p)) {
        Expect::Sane
    } else {
        Expect::Strict
    }
}

/// Values that find bugs in a shard file: bounds, signs, types, text.
fn extreme(rng: &mut StdRng) -> Value {
    choose(
        rng,
        &[
            json!(0),
            json!(1),
            json!(-1),
            json!(40),
            json!(41),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(9_007_199_254_740_993u64),
            json!(1e300),
            json!(-0.5),
            json!(""),
            json!("banana"),
            json!("0..40"),
            json!("\u{1b}[2J"),
            json!("x".repeat(5000)),
            json!(true),
            json!(false),
            Value::Null,
            json!([]),
            json!({}),
            json!([0, 40]),
            json!([[0, 40]]),
        ],
    )
}

fn json_paths(v: &Value, here: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{here}/{k}");
                out.push(p.clone());
                json_paths(x, &p, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let p = format!("{here}/{i}");
                out.push(p.clone());
                json_paths(x, &p, out);
            }
        }
        _ => {}
    }
}

/// One edit of a file's tree at a random place; says what it did.
fn json_edit(root: &mut Value, rng: &mut StdRng) -> Option<String> {
    let mut all = Vec::new();
    json_paths(root, "", &mut all);
    let path = all.choose(rng)?.clone();
    let (parent, last) = path.rsplit_once('/')?;
    match rng.gen_range(0..8) {
        0 => match root.pointer_mut(parent)? {
            Value::Object(m) => m.remove(last).map(|_| format!("{path} removed")),
            Value::Array(a) => {
                let i: usize = last.parse().ok()?;
                (i < a.len()).then(|| a.remove(i)).map(|_| format!("{path} removed"))
            }
            _ => None,
        },
        1 => {
            let names = ["extra", "runs", "seeds", "covered", "cells", "passed", "applicable"];
            let k = choose(rng, &names);
            let v = extreme(rng);
            let m = root.pointer_mut(parent)?.as_object_mut()?;
            m.insert(k.to_string(), v.clone());
            Some(format!("{parent}/{k} = {v:.40}"))
        }
        2 => {
            let a = root.pointer_mut(&path)?.as_array_mut()?;
            match rng.gen_range(0..3) {
                0 => a.clear(),
                1 => a.reverse(),
                _ => {
                    let x = a.first()?.clone();
                    a.extend(std::iter::repeat_n(x, rng.gen_range(1..4)));
                }
            }
            Some(format!("{path}: array emptied, reversed or grown"))
        }
        3 | 4 => {
            let v = root.pointer_mut(&path)?;
            let n = v.as_u64()?;
            *v = json!(choose(rng, &[n + 1, n.saturating_sub(1), n.saturating_mul(1000), 0]));
            Some(format!("{path}: {n} → {v}"))
        }
        _ => {
            let new = extreme(rng);
            let shown = format!("{new:.40}");
            *root.pointer_mut(&path)? = new;
            Some(format!("{path} = {shown}"))
        }
    }
}

/// One edit of a file's raw bytes.
fn raw_edit(bytes: &mut Vec<u8>, rng: &mut StdRng) -> String {
    let at = rng.gen_range(0..=bytes.len());
    if rng.gen_bool(0.5) {
        bytes.truncate(at);
        format!("truncated at byte {at}")
    } else {
        let b = choose(rng, &[b'[', b']', b'"', b',', b'}', b'\n', b'0', b'-', b'9', 0xff, 0x00]);
        bytes.insert(at, b);
        format!("byte {b:#04x} inserted at {at}")
    }
}

fn random(h: &Honest, rng: &mut StdRng) -> Mutant {
    let mut d = Draft::new(h);
    let f = rng.gen_range(0..d.files.len());
    let before = d.files[f].1.clone();
    let what = if rng.gen_ratio(1, 8) {
        let mut bytes = pretty(&before);
        let what = raw_edit(&mut bytes, rng);
        d.raw[f] = Some(bytes);
        what
    } else {
        let edits: Vec<String> =
            (0..rng.gen_range(1..=3)).filter_map(|_| json_edit(&mut d.files[f].1, rng)).collect();
        edits.join("; ")
    };
    let after = d.raw[f].clone().unwrap_or_else(|| pretty(&d.files[f].1));
    let expect = expectation(&before, &after);
    let what = format!("{}: {what}", d.name(f));
    d.into_mutant("random", expect, what)
}

/// Mutant `i` of campaign `seed`: structured class `i/2 mod classes` when `i` is even (a random
/// edit when that class finds nothing to forge), else a random edit.
pub fn mutant(h: &Honest, seed: u64, i: u64) -> Mutant {
    let mut rng = StdRng::seed_from_u64(seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    if i.is_multiple_of(2) {
        let (name, expect, forge) = CLASSES[(i / 2) as usize % CLASSES.len()];
        let mut d = Draft::new(h);
        if let Some(what) = forge(&mut d, &mut rng) {
            return d.into_mutant(name, expect, what);
        }
    }
    random(h, &mut rng)
}

// ---------------------------------------------------------------------------------------------
// The judge.

/// What became of one mutant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// Exit 2.
    Refused {
        /// The message names a shard file given (or a file in the mutant's folder) or a cell
        /// (`model × sim`).
        located: bool,
        /// The message holds control characters (a forged name printed raw).
        raw_text: bool,
        /// `--out` was written although the merge was refused.
        out_written: bool,
        /// The message's first line.
        msg: String,
    },
    /// Exit 0 or 1: a report.
    Merged {
        /// Text, JSON and exit code equal the honest merge's.
        honest: bool,
        /// The first impossible thing in the report, if any.
        impossible: Option<String>,
        /// The first line that differs from the honest merge's report.
        diff: String,
    },
    /// Exit 101 or a panic message.
    Panicked {
        /// The panic's line.
        msg: String,
    },
    /// Killed at the wall bound.
    Hung {
        /// The bound (ms).
        millis: u128,
    },
    /// Killed by a signal or another exit code.
    Crashed {
        /// What happened.
        msg: String,
    },
}

impl Judgement {
    /// The defect, if the judgement breaks the rule for a mutant that expects `expect`.
    pub fn defect(&self, expect: Expect) -> Option<&'static str> {
        match self {
            Judgement::Refused { out_written: true, .. } => Some("refused after writing --out"),
            Judgement::Refused { located: false, .. } => {
                Some("refused without naming a shard file or a cell")
            }
            Judgement::Refused { raw_text: true, .. } => {
                Some("refused, printing raw control characters")
            }
            Judgement::Refused { .. } => None,
            Judgement::Merged { impossible: Some(_), .. } => Some("merged to an impossible report"),
            Judgement::Merged { honest: false, .. } if expect == Expect::Strict => {
                Some("merged to a report other than the honest merge's")
            }
            Judgement::Merged { .. } => None,
            Judgement::Panicked { .. } => Some("panic"),
            Judgement::Hung { .. } => Some("hang"),
            Judgement::Crashed { .. } => Some("crash"),
        }
    }

    /// The judgement's kind in a few words (for counts).
    pub fn kind(&self) -> &'static str {
        match self {
            Judgement::Refused { .. } => "refused",
            Judgement::Merged { honest: true, .. } => "merged: the honest report",
            Judgement::Merged { impossible: Some(_), .. } => "merged: an impossible report",
            Judgement::Merged { .. } => "merged: another possible report",
            Judgement::Panicked { .. } => "panic",
            Judgement::Hung { .. } => "hang",
            Judgement::Crashed { .. } => "crash",
        }
    }
}

/// Write a mutant's folder (`dir`, emptied first): its files with [`DIR`] replaced, its FIFO.
/// The paths of its entries, in order.
pub fn write_mutant(m: &Mutant, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let shown = dir.display().to_string();
    let mut paths = Vec::new();
    for e in &m.files {
        match e {
            Entry::File { name, bytes } => {
                let p = dir.join(name);
                let text = String::from_utf8_lossy(bytes);
                if text.contains(DIR) {
                    std::fs::write(&p, text.replace(DIR, &shown))?;
                } else {
                    std::fs::write(&p, bytes)?;
                }
                paths.push(p);
            }
            Entry::Fifo { name } => {
                let p = dir.join(name);
                let made = Command::new("mkfifo").arg(&p).status()?;
                if !made.success() {
                    return Err(std::io::Error::other("mkfifo failed"));
                }
                paths.push(p);
            }
        }
    }
    Ok(paths)
}

/// Merge mutant `m` with `bin` in folder `dir` (text with `--out`, then `--json`) and judge it.
pub fn judge(bin: &Path, h: &Honest, m: &Mutant, dir: &Path, wall: Duration) -> Judgement {
    let paths = write_mutant(m, dir).expect("the mutant's folder is writable");
    let given: Vec<PathBuf> = m.given.iter().map(|&i| paths[i].clone()).collect();
    let out = dir.join("merged-out.json");
    let text = run_merge(bin, &merge_args(&given, Some(&out), false), dir, "text", wall);
    if let Some(j) = abnormal(&text, wall) {
        return j;
    }
    if text.code == Some(2) {
        // A cell is named `model × sim`; a file by its path (in the mutant's folder).
        let located =
            text.stderr.contains(" × ") || text.stderr.contains(&dir.display().to_string());
        return Judgement::Refused {
            located,
            raw_text: text.stderr.chars().any(|c| c.is_control() && c != '\n'),
            out_written: out.exists(),
            msg: text.stderr.lines().next().unwrap_or_default().chars().take(300).collect(),
        };
    }
    let json = run_merge(bin, &merge_args(&given, None, true), dir, "json", wall);
    if let Some(j) = abnormal(&json, wall) {
        return j;
    }
    let honest = text == h.text && json == h.json;
    let diff = first_diff(&h.text.stdout, &text.stdout)
        .or_else(|| first_diff(&h.json.stdout, &json.stdout))
        .unwrap_or_else(|| format!("exit {:?} (honest: {:?})", text.code, h.text.code));
    let impossible = if json.code != text.code {
        Some(format!("exit {:?} with --json, {:?} without", json.code, text.code))
    } else {
        impossible(h, &text.stdout, &json.stdout, text.code.unwrap_or(-1))
    };
    Judgement::Merged { honest, impossible, diff: if honest { String::new() } else { diff } }
}

/// A hang, a panic or a crash; None for exit 0, 1 or 2.
fn abnormal(r: &Merged, wall: Duration) -> Option<Judgement> {
    if r.timed_out {
        return Some(Judgement::Hung { millis: wall.as_millis() });
    }
    if r.code == Some(101) || r.stderr.contains("panicked at") {
        let line = r.stderr.lines().find(|l| l.contains("panicked")).unwrap_or_default();
        let next = r.stderr.lines().skip_while(|l| !l.contains("panicked")).nth(1);
        return Some(Judgement::Panicked { msg: format!("{line} {}", next.unwrap_or_default()) });
    }
    match r.code {
        Some(0..=2) => None,
        code => Some(Judgement::Crashed {
            msg: format!("exit {code:?}: {}", r.stderr.lines().last().unwrap_or_default()),
        }),
    }
}

fn first_diff(want: &str, got: &str) -> Option<String> {
    if want == got {
        return None;
    }
    let (mut w, mut g) = (want.lines(), got.lines());
    loop {
        match (w.next(), g.next()) {
            (Some(a), Some(b)) if a == b => continue,
            (a, b) => {
                let cut =
                    |s: Option<&str>| s.unwrap_or("<end>").chars().take(160).collect::<String>();
                return Some(format!("honest {:?}, got {:?}", cut(a), cut(b)));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Impossible numbers.

/// A count of attempts or intents above this for `runs` runs is impossible (every sim bound).
fn attempt_bound(runs: u64) -> u64 {
    runs.saturating_mul(MAX_REQUESTS as u64).saturating_mul(MAX_COPIES).saturating_mul(MAX_ATTEMPTS)
}

fn is_status(k: &str) -> bool {
    k == "reply"
        || k == "transport-failure"
        || k.parse::<u16>().is_ok_and(|s| (100..=599).contains(&s))
}

/// The first impossible thing in a merged report (its text, its JSON, its exit code), if any.
pub fn impossible(h: &Honest, text: &str, json: &str, code: i32) -> Option<String> {
    if let Some(c) = text.chars().chain(json.chars()).find(|c| c.is_control() && *c != '\n') {
        return Some(format!("control character {c:?} printed"));
    }
    let Ok(v) = serde_json::from_str::<Value>(json) else {
        return Some("--json printed no JSON".into());
    };
    let Some(cells) = v["cells"].as_array() else { return Some("--json without cells".into()) };
    if cells.len() != h.cells.len() {
        return Some(format!("{} cells, the matrix has {}", cells.len(), h.cells.len()));
    }
    for (c, (model, sim, applicable)) in cells.iter().zip(&h.cells) {
        if c["model"] != model.as_str() || c["sim"] != sim.as_str() {
            return Some(format!("cell {} × {} where {model} × {sim} was", c["model"], c["sim"]));
        }
        if let Err(e) = cell_possible(c, *applicable) {
            return Some(format!("{model} × {sim}: {e}"));
        }
    }
    let failed = cells.iter().any(|c| c["passed"] == false);
    if code != i32::from(failed) {
        return Some(format!(
            "exit {code} for a matrix that {}",
            if failed { "failed" } else { "passed" }
        ));
    }
    text_possible(text).err()
}

fn count(c: &Value, k: &str) -> Result<u64, String> {
    c[k].as_u64().ok_or_else(|| format!("{k} is {}", c[k]))
}

fn histogram_total(c: &Value, k: &str) -> Result<u64, String> {
    let m = c[k].as_object().ok_or_else(|| format!("{k} is not a histogram"))?;
    m.values()
        .try_fold(0u64, |t, n| n.as_u64().and_then(|n| t.checked_add(n)))
        .ok_or(format!("{k} overflows"))
}

/// One cell of the JSON report: its counts fit its runs and every seed its range.
fn cell_possible(c: &Value, applicable: bool) -> Result<(), String> {
    let inside = |s: u64| SEEDS.contains(&s);
    if c["seeds"] != seeds_arg().as_str() {
        return Err(format!("seeds {}", c["seeds"]));
    }
    if (c["applicable"] != false) != applicable {
        return Err(format!("applicable {} (the sim and model say {applicable})", c["applicable"]));
    }
    let runs = count(c, "runs")?;
    let want = if applicable { SEEDS.end - SEEDS.start } else { 0 };
    if runs != want {
        return Err(format!("{runs} runs for {want} seeds"));
    }
    for k in ["failed_seeds", "violating_seeds", "bounded_runs"] {
        if count(c, k)? > runs {
            return Err(format!("{k} {} > {runs} runs", count(c, k)?));
        }
    }
    let failed = count(c, "failed_seeds")?;
    if applicable && c["passed"] != (failed == 0) {
        return Err(format!("passed {} with {failed} failed seeds", c["passed"]));
    }
    match c["first_failed_seed"].as_u64() {
        Some(s) if failed == 0 || !inside(s) => return Err(format!("first failing seed {s}")),
        None if failed > 0 => return Err("failed seeds without a first one".into()),
        _ => {}
    }
    for k in ["rows", "effects"] {
        if histogram_total(c, k)? != runs {
            return Err(format!("{k} histogram counts {} of {runs} runs", histogram_total(c, k)?));
        }
    }
    violations_possible(c, runs)?;
    attempts_possible(c, runs)
}

fn violations_possible(c: &Value, runs: u64) -> Result<(), String> {
    let known: Vec<&str> = ViolationKind::ALL.iter().map(|k| k.name()).collect();
    let (mut most, mut sum) = (0u64, 0u64);
    for (name, v) in c["violations"].as_object().ok_or("violations is not a map")? {
        let (seeds, occ, first) =
            (count(v, "seeds")?, count(v, "occurrences")?, count(v, "first_seed")?);
        if !known.contains(&name.as_str()) {
            return Err(format!("violation {name:?} is not a violation"));
        }
        if seeds == 0 || seeds > runs || occ < seeds || !SEEDS.contains(&first) {
            return Err(format!("{name}: {seeds} seeds, {occ} times, first seed {first}"));
        }
        if v["permitted"] != true {
            most = most.max(seeds);
            sum = sum.saturating_add(seeds);
        }
    }
    let violating = count(c, "violating_seeds")?;
    if violating < most || violating > sum {
        return Err(format!("{violating} violating seeds for violations on {most}..={sum}"));
    }
    Ok(())
}

fn attempts_possible(c: &Value, runs: u64) -> Result<(), String> {
    let bound = attempt_bound(runs);
    for k in ["statuses", "rows_per_intent", "effects_per_intent"] {
        for (key, n) in c[k].as_object().ok_or(format!("{k} is not a map"))? {
            if k == "statuses" && !is_status(key) {
                return Err(format!("status {key:?} is not a status"));
            }
            if n.as_u64().is_none_or(|n| n > bound) {
                return Err(format!("{k}[{key}] = {n} for {runs} runs"));
            }
        }
    }
    if count(c, "ambiguous_intents")? > bound {
        return Err(format!("{} ambiguous intents", count(c, "ambiguous_intents")?));
    }
    for s in c["nondeterministic_seeds"].as_array().ok_or("nondeterministic_seeds")? {
        if s.as_u64().is_none_or(|s| !SEEDS.contains(&s)) {
            return Err(format!("nondeterministic seed {s}"));
        }
    }
    Ok(())
}

/// The text report: every `k/n` has k ≤ n, every rate is in [0, 100] %, every seed named is in
/// the range.
fn text_possible(text: &str) -> Result<(), String> {
    let words: Vec<&str> =
        text.split_whitespace().map(|w| w.trim_matches(|c: char| "(),;:·".contains(c))).collect();
    for (i, w) in words.iter().enumerate() {
        if let Some((k, n)) = w.split_once('/')
            && let (Ok(k), Ok(n)) = (k.parse::<u64>(), n.parse::<u64>())
            && k > n
        {
            return Err(format!("{k}/{n} printed"));
        }
        if let Some(p) = w.strip_suffix('%')
            && let Ok(p) = p.parse::<f64>()
            && !(0.0..=100.0).contains(&p)
        {
            return Err(format!("a rate of {p}% printed"));
        }
        if (*w == "--seed" || *w == "seed")
            && let Some(s) = words.get(i + 1).and_then(|s| s.parse::<u64>().ok())
            && !SEEDS.contains(&s)
        {
            return Err(format!("seed {s} printed, outside {}", seeds_arg()));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Campaigns.

/// One mutant and its judgement.
#[derive(Debug, Clone)]
pub struct Judged {
    /// The mutant's index in its campaign.
    pub index: u64,
    /// The mutant.
    pub mutant: Mutant,
    /// What merge made of it.
    pub judgement: Judgement,
    /// How long its merges took (wall-clock ms).
    pub millis: u128,
}

impl Judged {
    /// The defect, if any ([`Judgement::defect`] for the mutant's expectation).
    pub fn defect(&self) -> Option<&'static str> {
        self.judgement.defect(self.mutant.expect)
    }
}

/// Mutants `0..n` of campaign `seed`, judged with `bin` on `threads` threads, each in its own
/// folder under `work` (removed once judged): the same mutants and judgements whatever the
/// thread count, in mutant order.
pub fn campaign(
    bin: &Path,
    h: &Honest,
    seed: u64,
    n: u64,
    threads: u64,
    work: &Path,
    wall: Duration,
) -> Vec<Judged> {
    let threads = threads.max(1);
    let mut out: Vec<Judged> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut out = Vec::new();
                    for index in (t..n).step_by(threads as usize) {
                        let mutant = mutant(h, seed, index);
                        let dir = work.join(format!("mutant-{index}"));
                        let started = Instant::now();
                        let judgement = judge(bin, h, &mutant, &dir, wall);
                        let millis = started.elapsed().as_millis();
                        let _ = std::fs::remove_dir_all(&dir);
                        out.push(Judged { index, mutant, judgement, millis });
                    }
                    out
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("a judging thread")).collect()
    });
    out.sort_by_key(|j| j.index);
    out
}

/// Per (class, judgement kind, defect): how many mutants, and the first one's index.
pub fn tally(
    results: &[Judged],
) -> BTreeMap<(&'static str, &'static str, &'static str), (u64, u64)> {
    let mut out: BTreeMap<_, (u64, u64)> = BTreeMap::new();
    for j in results {
        let key = (j.mutant.class, j.judgement.kind(), j.defect().unwrap_or(""));
        let e = out.entry(key).or_insert((0, j.index));
        e.0 += 1;
    }
    out
}

/// Save a judged mutant for a human: its folder under `dir` with a `README` saying its class,
/// what was done, the judgement and the command that merges it again. The folder's path.
pub fn save(j: &Judged, dir: &Path) -> std::io::Result<PathBuf> {
    let d = dir.join(format!("mutant-{}", j.index));
    let paths = write_mutant(&j.mutant, &d)?;
    let given: Vec<PathBuf> = j.mutant.given.iter().map(|&i| paths[i].clone()).collect();
    let args = merge_args(&given, None, false).join(" ");
    let readme = format!(
        "class: {} ({:?})\nwhat: {}\njudgement: {:?}\ndefect: {}\nreplay (from the repository): idemsim {args}\n",
        j.mutant.class,
        j.mutant.expect,
        crate::text::printable(&j.mutant.what),
        j.judgement,
        j.defect().unwrap_or("none"),
    );
    std::fs::write(d.join("README"), readme)?;
    Ok(d)
}
