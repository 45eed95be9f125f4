//! Sweeps sharded over existing batch engines (Slurm arrays, Kubernetes Indexed Jobs, AWS
//! Batch arrays, CI matrices) and merged exactly.
//!
//! `--shard K/N` runs the K-th of N contiguous, balanced slices of the flat (cell, seed) order
//! and writes a versioned shard file: the build, each cell's sim and model (name, path,
//! SHA-256 of the file), the seeds it covered and its mergeable aggregate ([`Cell`]). `merge`
//! checks that the shards come from one build and the same files and that their slices tile
//! every cell's range without overlap, and gives back the aggregate a single run over the
//! whole range gives: counts and histograms add, first seeds take the minimum, intervals are
//! recomputed from the merged counts. Its output is a shard file itself, so merges nest.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::catalog;
use crate::model::Model;
use crate::report::ViolationKind;
use crate::scenario::Sim;
use crate::sweep::Cell;

pub mod policy;
pub mod verify;

/// The format name and version every shard file carries.
pub const FORMAT: &str = "idemsim-shard";
/// The shard file format's version; this build reads only this one.
pub const VERSION: u32 = 1;
/// The madsim release the build pins (`Cargo.toml`: `madsim = "=0.2.34"`).
pub const MADSIM: &str = "0.2.34";

/// Which shard this process runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardSpec {
    /// This shard's index K, 0-based (K < N).
    pub k: u64,
    /// The number of shards N the work is split into.
    pub n: u64,
    /// Where K came from: `--shard` or the engine's variable.
    pub source: String,
}

/// The engines' index variables, read by `--shard auto[/N]`.
pub const ENGINE_VARS: [&str; 9] = [
    "JOB_COMPLETION_INDEX",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_ARRAY_TASK_STEP",
    "AWS_BATCH_JOB_ARRAY_INDEX",
    "AWS_BATCH_JOB_ARRAY_SIZE",
    "CI_NODE_INDEX",
    "CI_NODE_TOTAL",
];

/// Parse `--shard K/N`, `auto/N` or `auto` (the index, and the count if the engine says it,
/// from `env`).
pub fn parse_spec(arg: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<ShardSpec, String> {
    let num = |s: &str, what: &str| -> Result<u64, String> {
        s.trim().parse::<u64>().map_err(|_| format!("--shard {arg}: {what} `{s}` is not a number"))
    };
    let (k_part, n_part) = match arg.split_once('/') {
        Some((k, n)) => (k, Some(n)),
        None => (arg, None),
    };
    let n_given = n_part.map(|n| num(n, "N")).transpose()?;
    let spec = if k_part == "auto" {
        auto(env, n_given)?
    } else {
        let n = n_given.ok_or_else(|| format!("--shard {arg}: expected K/N or auto[/N]"))?;
        ShardSpec { k: num(k_part, "K")?, n, source: "--shard".into() }
    };
    if spec.n == 0 || spec.k >= spec.n {
        return Err(format!(
            "--shard: shard {} of {} does not exist; expected 0 <= K < N (from {})",
            spec.k, spec.n, spec.source
        ));
    }
    if let Some(n) = n_given
        && n != spec.n
    {
        return Err(format!("--shard: {} says {} shards, the argument {n}", spec.source, spec.n));
    }
    Ok(spec)
}

/// The index from whichever engine set its variables; an error if none or several that
/// disagree.
fn auto(env: &dyn Fn(&str) -> Option<String>, n: Option<u64>) -> Result<ShardSpec, String> {
    let get = |v: &str| -> Result<Option<u64>, String> {
        env(v)
            .map(|s| {
                s.trim()
                    .parse::<u64>()
                    .map_err(|_| format!("--shard auto: {v}=`{s}` is not a number"))
            })
            .transpose()
    };
    let mut found: Vec<ShardSpec> = Vec::new();
    if let Some(k) = get("JOB_COMPLETION_INDEX")? {
        // Kubernetes exports the index, not the number of completions.
        let n = n.ok_or(
            "--shard auto: Kubernetes does not export the number of completions; \
                         use --shard auto/N",
        )?;
        found.push(ShardSpec { k, n, source: "JOB_COMPLETION_INDEX".into() });
    }
    if let Some(spec) = slurm(&get, n)? {
        found.push(spec);
    }
    if let Some(k) = get("AWS_BATCH_JOB_ARRAY_INDEX")? {
        let n = match get("AWS_BATCH_JOB_ARRAY_SIZE")? {
            Some(s) => s,
            None => {
                n.ok_or("--shard auto: AWS_BATCH_JOB_ARRAY_SIZE is not set; use --shard auto/N")?
            }
        };
        found.push(ShardSpec { k, n, source: "AWS_BATCH_JOB_ARRAY_INDEX/SIZE".into() });
    }
    if let Some(i) = get("CI_NODE_INDEX")? {
        // GitLab counts from 1.
        let k = i.checked_sub(1).ok_or("--shard auto: CI_NODE_INDEX counts from 1")?;
        let n = match get("CI_NODE_TOTAL")? {
            Some(t) => t,
            None => n.ok_or("--shard auto: CI_NODE_TOTAL is not set; use --shard auto/N")?,
        };
        found.push(ShardSpec { k, n, source: "CI_NODE_INDEX/TOTAL".into() });
    }
    match found.as_slice() {
        [] => Err("--shard auto: no engine index variable is set (looked for \
                   JOB_COMPLETION_INDEX, SLURM_ARRAY_TASK_ID, AWS_BATCH_JOB_ARRAY_INDEX, \
                   CI_NODE_INDEX)"
            .into()),
        [one] => Ok(one.clone()),
        [first, rest @ ..] => {
            if rest.iter().all(|s| s.k == first.k && s.n == first.n) {
                Ok(first.clone())
            } else {
                let all: Vec<String> =
                    found.iter().map(|s| format!("{} = {}/{}", s.source, s.k, s.n)).collect();
                Err(format!("--shard auto: engine variables disagree: {}", all.join(", ")))
            }
        }
    }
}

/// A Slurm array task's index (from its MIN) and count, if Slurm set its variables.
fn slurm(
    get: &dyn Fn(&str) -> Result<Option<u64>, String>,
    n: Option<u64>,
) -> Result<Option<ShardSpec>, String> {
    let Some(id) = get("SLURM_ARRAY_TASK_ID")? else { return Ok(None) };
    let min = get("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
    if get("SLURM_ARRAY_TASK_STEP")?.is_some_and(|s| s != 1) {
        return Err("--shard auto: a Slurm array with a step other than 1 (use --array=A-B)".into());
    }
    let n = match get("SLURM_ARRAY_TASK_COUNT")? {
        Some(c) => c,
        None => n.ok_or("--shard auto: SLURM_ARRAY_TASK_COUNT is not set; use --shard auto/N")?,
    };
    let k = id.checked_sub(min).ok_or("--shard auto: SLURM_ARRAY_TASK_ID below its MIN")?;
    let source = if get("SLURM_ARRAY_TASK_COUNT")?.is_some() {
        "SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT"
    } else {
        "SLURM_ARRAY_TASK_ID"
    };
    Ok(Some(ShardSpec { k, n, source: source.into() }))
}

impl std::fmt::Display for Build {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "idemsim {}, madsim {}, {}, {}",
            self.idemsim, self.madsim, self.target, self.profile
        )
    }
}

/// The build a shard ran: merged shards must come from one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Build {
    /// idemsim's version (`Cargo.toml`).
    pub idemsim: String,
    /// The madsim release pinned ([`MADSIM`]).
    pub madsim: String,
    /// The machine it ran on: `arch-os`.
    pub target: String,
    /// `debug` or `release`.
    pub profile: String,
}

impl Build {
    /// The build of this binary.
    pub fn current() -> Build {
        Build {
            idemsim: env!("CARGO_PKG_VERSION").into(),
            madsim: MADSIM.into(),
            target: format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS),
            profile: if cfg!(debug_assertions) { "debug" } else { "release" }.into(),
        }
    }
}

/// A sim or model file, identified by its content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileId {
    /// The sim's or model's name.
    pub name: String,
    /// Its file's path as shown (`catalog::display_path`).
    pub path: String,
    /// How `--model` names it (models only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cli: String,
    /// SHA-256 of the file's bytes, hex: merged shards must have run the same files.
    pub sha256: String,
}

fn file_sha(path: &std::path::Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    hex::encode(Sha256::digest(&bytes))
}

impl FileId {
    /// A loaded sim's identity (its file read again and hashed).
    pub fn of_sim(s: &Sim) -> FileId {
        FileId {
            name: s.name.clone(),
            path: catalog::display_path(&s.path),
            cli: String::new(),
            sha256: file_sha(&s.path),
        }
    }

    /// A loaded model's identity, with how `--model` names it.
    pub fn of_model(m: &Model) -> FileId {
        FileId {
            name: m.name.clone(),
            path: catalog::display_path(&m.path),
            cli: catalog::cli_name(m),
            sha256: file_sha(&m.path),
        }
    }
}

/// One cell of a shard: what it is, which seeds it covered, its aggregate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardCell {
    /// The sim it ran.
    pub sim: FileId,
    /// The model it ran.
    pub model: FileId,
    /// The cell's whole seed range `A..B`.
    pub seeds: String,
    /// The seed intervals `[a, b)` this file covers, sorted, disjoint.
    pub covered: Vec<[u64; 2]>,
    /// The aggregate over the covered seeds.
    pub aggregate: Cell,
}

/// Information only: never compared.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timing {
    /// Wall-clock seconds the shard took (summed in a merge).
    pub wall_s: f64,
    /// Worker threads it used (the most of any, in a merge).
    pub jobs: usize,
}

/// A shard file (or a merge of several).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardFile {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always [`VERSION`] when written.
    pub version: u32,
    /// The build that ran it.
    pub build: Build,
    /// Its cells, sim-major as the matrix orders them.
    pub cells: Vec<ShardCell>,
    /// The shard this file came from (None for a merge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardSpec>,
    /// How long it took (never compared).
    #[serde(default)]
    pub timing: Timing,
}

/// The shard file of cells a run produced.
pub fn shard_file(
    sims: &[std::sync::Arc<Sim>],
    models: &[std::sync::Arc<Model>],
    cells: &[Cell],
    spec: Option<ShardSpec>,
    timing: Timing,
) -> ShardFile {
    let mut out = Vec::new();
    for (si, s) in sims.iter().enumerate() {
        for (mi, m) in models.iter().enumerate() {
            let c = crate::sweep::cell(cells, models.len(), si, mi);
            let whole = parse_range(&c.seeds).unwrap_or(0..0);
            let covered = c.covered.clone().unwrap_or(whole);
            out.push(ShardCell {
                sim: FileId::of_sim(s),
                model: FileId::of_model(m),
                seeds: c.seeds.clone(),
                covered: if covered.is_empty() {
                    vec![]
                } else {
                    vec![[covered.start, covered.end]]
                },
                aggregate: c.clone(),
            });
        }
    }
    ShardFile {
        format: FORMAT.into(),
        version: VERSION,
        build: Build::current(),
        cells: out,
        shard: spec,
        timing,
    }
}

fn parse_range(s: &str) -> Option<Range<u64>> {
    crate::input::parse_seeds(s).ok()
}

/// The largest shard file read (bytes): a shard of 20,000 cells is about 40 MB.
pub const MAX_SHARD_BYTES: u64 = 256 << 20;

/// A regular file of at most [`MAX_SHARD_BYTES`], whole (never a FIFO, a device or stdin).
fn read_bounded(path: &std::path::Path) -> Result<String, String> {
    use std::io::Read;
    let shown = crate::text::printable(&path.display().to_string());
    // Checked before opening: opening a FIFO for reading blocks until a writer comes.
    let before = std::fs::metadata(path).map_err(|e| format!("{shown}: cannot read: {e}"))?;
    if !before.is_file() {
        return Err(format!("{shown}: not a regular file"));
    }
    let f = std::fs::File::open(path).map_err(|e| format!("{shown}: cannot read: {e}"))?;
    let meta = f.metadata().map_err(|e| format!("{shown}: cannot read: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown}: not a regular file"));
    }
    if meta.len() > MAX_SHARD_BYTES {
        return Err(format!(
            "{shown}: {} bytes; a shard file is at most {MAX_SHARD_BYTES}",
            meta.len()
        ));
    }
    let mut text = String::new();
    f.take(MAX_SHARD_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("{shown}: cannot read: {e}"))?;
    if text.len() as u64 > MAX_SHARD_BYTES {
        return Err(format!("{shown}: more than {MAX_SHARD_BYTES} bytes"));
    }
    Ok(text)
}

/// Read and check one shard file: its format, then every cell against itself (see
/// [`check_cell`]); one cell per (sim, model) pair.
pub fn read(path: &std::path::Path) -> Result<ShardFile, String> {
    let text = read_bounded(path)?;
    let shown = crate::text::printable(&path.display().to_string());
    let f: ShardFile =
        serde_json::from_str(&text).map_err(|e| format!("{shown}: not a shard file: {e}"))?;
    if f.format != FORMAT || f.version != VERSION {
        return Err(format!(
            "{shown}: format {} version {}; this build reads {FORMAT} version {VERSION}",
            crate::text::shown(&f.format),
            f.version
        ));
    }
    if f.cells.is_empty() {
        return Err(format!("{shown}: no cells"));
    }
    for c in &f.cells {
        check_cell(c).map_err(|e| format!("{shown}: cell {}: {e}", pair(c)))?;
    }
    if let Some(c) = first_repeated(&f.cells) {
        return Err(format!(
            "{shown}: cells: {} appears twice (two sims or two models of one name, or one pair \
             run twice): a (sim, model) pair is one cell",
            pair(c)
        ));
    }
    if let Some(i) = off_grid(&f.cells) {
        let what = f.cells.get(i).map_or("missing".to_string(), |c| format!("({})", pair(c)));
        return Err(format!(
            "{shown}: cells: cell {i} {what} is not where a matrix puts it: a shard lists every \
             sim × model pair, sim-major, sims and models in the order they first appear"
        ));
    }
    Ok(f)
}

/// The index of the first cell out of a matrix's layout (every sim × model pair, sim-major,
/// in first-appearance order), if any: the layout [`shard_file`] writes and a merge keeps, so
/// a file whose cells were reordered, dropped or added is refused instead of drawing another
/// table.
fn off_grid(cells: &[ShardCell]) -> Option<usize> {
    let mut sims: Vec<&str> = Vec::new();
    let mut models: Vec<&str> = Vec::new();
    for c in cells {
        if !sims.contains(&c.sim.name.as_str()) {
            sims.push(&c.sim.name);
        }
        if sims.len() == 1 && !models.contains(&c.model.name.as_str()) {
            models.push(&c.model.name);
        }
    }
    let m = models.len().max(1);
    let at = |i: usize| (sims.get(i / m).copied(), models.get(i % m).copied());
    (0..cells.len().max(sims.len() * m)).find(|&i| {
        cells.get(i).map(|c| (Some(c.sim.name.as_str()), Some(c.model.name.as_str())))
            != Some(at(i))
    })
}

/// The (sim, model) names of a file's cells in order: every file of one merge has the same.
pub fn layout(f: &ShardFile) -> Vec<(&str, &str)> {
    f.cells.iter().map(|c| (c.sim.name.as_str(), c.model.name.as_str())).collect()
}

/// `model × sim` of a cell, as messages name it (printable: the names come from a file).
pub fn pair(c: &ShardCell) -> String {
    format!("{} × {}", crate::text::shown(&c.model.name), crate::text::shown(&c.sim.name))
}

/// A cell's key in a merge: its sim's and its model's names.
fn key(c: &ShardCell) -> (String, String) {
    (c.sim.name.clone(), c.model.name.clone())
}

/// The first cell whose (sim, model) pair an earlier cell of `cells` already has.
fn first_repeated(cells: &[ShardCell]) -> Option<&ShardCell> {
    let mut seen = std::collections::HashSet::with_capacity(cells.len());
    cells.iter().find(|c| !seen.insert((c.sim.name.as_str(), c.model.name.as_str())))
}

/// A shard's cell must agree with itself; each refusal names the field. A shard is untrusted
/// input: what it claims is checked, not believed. What a cell is checked for here needs
/// neither its sim nor its model (those checks are [`policy`]'s, which reloads them):
///
/// - `seeds` is a range `A..B` written as a shard writes it, and the aggregate's `seeds`,
///   `sim` and `model` are the cell's;
/// - `covered`: sorted, disjoint intervals inside the range;
/// - an n/a cell holds no result at all (a sweep runs nothing for it);
/// - `runs` are the seeds covered (fewer only when interrupted); no count exceeds the runs;
/// - see [`check_violations`], [`check_failures`] and [`check_histograms`].
pub fn check_cell(c: &ShardCell) -> Result<(), String> {
    let whole = check_names(c)?;
    let covered = check_covered(c, &whole)?;
    let a = &c.aggregate;
    if !a.applicable {
        return check_not_applicable(a);
    }
    // An interrupted shard covers its slice but ran only the seeds that finished.
    if a.runs > covered || (a.runs != covered && !a.interrupted) {
        return Err(format!("aggregate.runs: {} runs for {covered} seeds covered", a.runs));
    }
    for (what, n) in [
        ("failed_seeds", a.failed_seeds),
        ("violating_seeds", a.violating_seeds),
        ("bounded_runs", a.bounded_runs),
    ] {
        if n > a.runs {
            let words = what.replace('_', " ");
            return Err(format!("aggregate.{what}: {n} {words} out of {} runs", a.runs));
        }
    }
    check_violations(c)?;
    check_failures(c)?;
    check_histograms(a)
}

/// The cell's range, parsed; the aggregate names the cell's sim, model and range.
fn check_names(c: &ShardCell) -> Result<Range<u64>, String> {
    let whole = parse_range(&c.seeds)
        .ok_or_else(|| format!("seeds `{}`: expected A..B", crate::text::shown(&c.seeds)))?;
    if c.seeds != format!("{}..{}", whole.start, whole.end) {
        return Err(format!(
            "seeds `{}`: not written as a shard writes it ({}..{})",
            crate::text::shown(&c.seeds),
            whole.start,
            whole.end
        ));
    }
    let a = &c.aggregate;
    for (field, claim, want) in [
        ("seeds", &a.seeds, &c.seeds),
        ("sim", &a.sim, &c.sim.name),
        ("model", &a.model, &c.model.name),
    ] {
        if claim != want {
            return Err(format!(
                "aggregate.{field} `{}` is not the cell's `{}`",
                crate::text::shown(claim),
                crate::text::shown(want)
            ));
        }
    }
    Ok(whole)
}

/// `covered`: sorted, disjoint, non-empty intervals inside the range; the seeds they hold.
fn check_covered(c: &ShardCell, whole: &Range<u64>) -> Result<u64, String> {
    let mut at = whole.start;
    let mut covered: u64 = 0;
    for i in &c.covered {
        if i[0] >= i[1] || i[0] < at || i[1] > whole.end {
            return Err(format!(
                "covered [{}, {}) is empty, out of order, overlapping or outside {}..{}",
                i[0], i[1], whole.start, whole.end
            ));
        }
        covered += i[1] - i[0];
        at = i[1];
    }
    Ok(covered)
}

/// An n/a cell ran nothing: no runs, no counts, no histograms, no violations, no failure
/// (as `Cell::new` makes it; only `interrupted` may be set, by the shard's interruption).
fn check_not_applicable(a: &Cell) -> Result<(), String> {
    if a.runs != 0 {
        return Err(format!("aggregate.runs: n/a but {} runs", a.runs));
    }
    let empty = a.passed
        && a.failed_seeds == 0
        && a.first_failed_seed.is_none()
        && a.first_failure.is_empty()
        && a.rows.is_empty()
        && a.effects.is_empty()
        && a.statuses.is_empty()
        && a.bounded_runs == 0
        && a.violations.is_empty()
        && a.rows_per_intent.is_empty()
        && a.effects_per_intent.is_empty()
        && a.violating_seeds == 0
        && a.ambiguous_intents == 0
        && a.nondeterministic_seeds.is_empty();
    if !empty {
        return Err("aggregate: n/a (nothing ran) but it holds results".into());
    }
    Ok(())
}

/// Is a violation of this kind policy-permitted? Exactly the `expired-*` kinds: the oracle
/// names a permitted duplicate or mismatch `expired-*` and every other violation is
/// `permitted: false` (`oracle::duplicates`, `oracle::replies`).
fn permitted_kind(k: ViolationKind) -> bool {
    matches!(
        k,
        ViolationKind::ExpiredDuplicateRow
            | ViolationKind::ExpiredDuplicateEffect
            | ViolationKind::ExpiredReplayMismatch
    )
}

/// `violations`: every name a [`ViolationKind`]'s, `permitted` as that kind always is, seen
/// on at least one and at most `runs` seeds, its first seed covered, at least one occurrence
/// per seed. `violating_seeds` (seeds with a violation that is not permitted) lies between the
/// most seeds of one such kind and their sum, and is 0 exactly when there is none.
/// `ambiguous_intents` counts the `unfinished-intent` occurrences (`oracle::ambiguous_intents`).
fn check_violations(c: &ShardCell) -> Result<(), String> {
    let a = &c.aggregate;
    let inside = |s: u64| c.covered.iter().any(|i| i[0] <= s && s < i[1]);
    let (mut most, mut sum) = (0u64, 0u64);
    for (name, v) in &a.violations {
        let kind = ViolationKind::from_name(name).ok_or_else(|| {
            format!("aggregate.violations: `{}` is not a violation", crate::text::shown(name))
        })?;
        if v.seeds > a.runs || v.seeds == 0 || !inside(v.first_seed) || v.occurrences < v.seeds {
            return Err(format!(
                "aggregate.violations: violation {name}: {} seeds, first seed {} do not fit the \
                 seeds covered",
                v.seeds, v.first_seed
            ));
        }
        if v.permitted != permitted_kind(kind) {
            return Err(format!(
                "aggregate.violations: violation {name}: permitted is {}; a {name} is {}",
                v.permitted,
                if permitted_kind(kind) { "always permitted" } else { "never permitted" }
            ));
        }
        if !v.permitted {
            most = most.max(v.seeds);
            sum = sum.saturating_add(v.seeds);
        }
    }
    if a.violating_seeds < most || a.violating_seeds > sum {
        return Err(format!(
            "aggregate.violating_seeds: {} seeds with a violation that is not permitted; the \
             violations say {most} to {sum}",
            a.violating_seeds
        ));
    }
    let unfinished = a.violations.get(ViolationKind::UnfinishedIntent.name());
    if a.ambiguous_intents != unfinished.map_or(0, |v| v.occurrences) {
        return Err(format!(
            "aggregate.ambiguous_intents: {} but {} unfinished-intent violations",
            a.ambiguous_intents,
            unfinished.map_or(0, |v| v.occurrences)
        ));
    }
    Ok(())
}

/// Failures: a first failing seed exactly when some seed failed, covered, with the checks
/// that failed on it (each one failed, at least one); `passed` exactly when no seed failed;
/// every run cut short by a bound failed (a bound fails its run: `RunReport::passed`);
/// nondeterministic seeds sorted, distinct, covered and at most `runs`.
fn check_failures(c: &ShardCell) -> Result<(), String> {
    let a = &c.aggregate;
    let inside = |s: u64| c.covered.iter().any(|i| i[0] <= s && s < i[1]);
    if a.first_failed_seed.is_some_and(|s| !inside(s))
        || a.first_failed_seed.is_some() != (a.failed_seeds > 0)
    {
        return Err("aggregate.first_failed_seed: first failing seed does not fit the seeds \
                    covered and failed"
            .into());
    }
    if a.first_failure.is_empty() != a.first_failed_seed.is_none()
        || a.first_failure.iter().any(|k| k.held)
    {
        return Err("aggregate.first_failure: not the failed checks of a first failing seed".into());
    }
    if a.passed != (a.failed_seeds == 0) {
        return Err(format!(
            "aggregate.passed: passed is {} with {} failed seeds",
            a.passed, a.failed_seeds
        ));
    }
    if a.bounded_runs > a.failed_seeds {
        return Err(format!(
            "aggregate.failed_seeds: {} failed seeds but {} runs cut short by a bound, which \
             fail",
            a.failed_seeds, a.bounded_runs
        ));
    }
    let n = &a.nondeterministic_seeds;
    if n.windows(2).any(|w| w[0] >= w[1])
        || n.iter().any(|s| !inside(*s))
        || n.len() as u64 > a.runs
    {
        return Err("aggregate.nondeterministic_seeds: not distinct seeds that ran".into());
    }
    Ok(())
}

/// Histograms: `rows` and `effects` count every run once; `rows_per_intent` and
/// `effects_per_intent` count the same intents (every run's, `oracle::per_intent`); every
/// `statuses` key is an HTTP status or `transport-failure` (`RunReport::status_histogram`).
fn check_histograms(a: &Cell) -> Result<(), String> {
    let total = |h: &BTreeMap<u64, u64>| h.values().try_fold(0u64, |t, n| t.checked_add(*n));
    for (what, h) in [("rows", &a.rows), ("effects", &a.effects)] {
        if total(h) != Some(a.runs) {
            return Err(format!(
                "aggregate.{what}: the {what} histogram does not count {} runs",
                a.runs
            ));
        }
    }
    if total(&a.rows_per_intent).is_none()
        || total(&a.rows_per_intent) != total(&a.effects_per_intent)
    {
        return Err(
            "aggregate.effects_per_intent: does not count the intents rows_per_intent counts"
                .into(),
        );
    }
    let transport = crate::report::Outcome::TransportFailure.name();
    for k in a.statuses.keys() {
        // Three digits, 100 to 599 (RFC 9110 §15): what a server can answer.
        let status =
            k.parse::<u16>().is_ok_and(|s| (100..=599).contains(&s) && s.to_string() == *k);
        if !status && k != transport {
            return Err(format!(
                "aggregate.statuses: `{}` is neither an HTTP status nor {transport}",
                crate::text::shown(k)
            ));
        }
    }
    Ok(())
}

/// Union of sorted disjoint intervals; an error on overlap.
fn union(a: &[[u64; 2]], b: &[[u64; 2]]) -> Result<Vec<[u64; 2]>, [u64; 2]> {
    let mut all: Vec<[u64; 2]> = a.iter().chain(b).copied().filter(|i| i[0] < i[1]).collect();
    all.sort_unstable();
    let mut out: Vec<[u64; 2]> = Vec::new();
    for i in all {
        match out.last_mut() {
            Some(last) if i[0] < last[1] => return Err([i[0], last[1].min(i[1])]),
            Some(last) if i[0] == last[1] => last[1] = i[1],
            _ => out.push(i),
        }
    }
    Ok(out)
}

/// Merge shard files: one build, the same files per cell, one cell per (sim, model) pair in a
/// file, no seed covered twice. The result covers the union; a cell's aggregate is the merge
/// of its parts. Its cells are the first file's in their order, then each new pair in the
/// order the files bring it. Linear: cells are matched through an index by (sim, model).
pub fn merge(files: Vec<ShardFile>) -> Result<ShardFile, String> {
    merge_refs(&files)
}

/// [`merge`] of borrowed files (the cells are copied into the result).
pub fn merge_refs(files: &[ShardFile]) -> Result<ShardFile, String> {
    let (first, rest) = files.split_first().ok_or("merge: no shard file")?;
    let mut acc = first.clone();
    acc.shard = None;
    let repeated = |f: &ShardFile| {
        first_repeated(&f.cells)
            .map(|c| format!("merge: {}: one file has this cell twice", pair(c)))
    };
    if let Some(e) = repeated(first) {
        return Err(e);
    }
    // The position of each pair's cell in `acc.cells`.
    let mut index: std::collections::HashMap<(String, String), usize> =
        acc.cells.iter().enumerate().map(|(i, c)| (key(c), i)).collect();
    for f in rest {
        if f.build != acc.build {
            return Err(format!(
                "merge: shards from different builds ({} and {}); a seed reproduces only with \
                 its build",
                acc.build, f.build
            ));
        }
        if let Some(e) = repeated(f) {
            return Err(e);
        }
        acc.timing.wall_s += f.timing.wall_s;
        acc.timing.jobs = acc.timing.jobs.max(f.timing.jobs);
        for c in &f.cells {
            match index.get(&key(c)) {
                Some(&i) => merge_cell(&mut acc.cells[i], c)?,
                None => {
                    index.insert(key(c), acc.cells.len());
                    acc.cells.push(c.clone());
                }
            }
        }
    }
    Ok(acc)
}

/// Fold cell `c` of another shard into `a`, the same pair's cell: the same files and range,
/// no seed covered twice.
fn merge_cell(a: &mut ShardCell, c: &ShardCell) -> Result<(), String> {
    if a.sim.sha256 != c.sim.sha256 || a.model.sha256 != c.model.sha256 {
        return Err(format!("merge: {}: the sim or model file differs between shards", pair(c)));
    }
    if a.seeds != c.seeds {
        return Err(format!(
            "merge: {}: seed ranges {} and {} differ",
            pair(c),
            crate::text::shown(&a.seeds),
            crate::text::shown(&c.seeds)
        ));
    }
    a.covered = union(&a.covered, &c.covered)
        .map_err(|o| format!("merge: {}: seeds {}..{} are covered twice", pair(c), o[0], o[1]))?;
    a.aggregate.merge(c.aggregate.clone());
    Ok(())
}

/// Seeds of a cell's range the merged file does not cover.
pub fn gaps(c: &ShardCell) -> Vec<Range<u64>> {
    let Some(whole) = parse_range(&c.seeds) else { return vec![] };
    if !c.aggregate.applicable {
        return vec![];
    }
    let mut out = Vec::new();
    let mut at = whole.start;
    for i in &c.covered {
        if i[0] > at {
            out.push(at..i[0]);
        }
        at = at.max(i[1]);
    }
    if at < whole.end {
        out.push(at..whole.end);
    }
    out
}

/// Cells in a stable order (as the sims and models were given when they came from one run).
pub fn by_key(f: &ShardFile) -> BTreeMap<(String, String), &ShardCell> {
    f.cells.iter().map(|c| ((c.sim.name.clone(), c.model.name.clone()), c)).collect()
}
