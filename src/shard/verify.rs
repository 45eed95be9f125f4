//! A shard's cells checked against the files they name, reloaded: what `merge` can recompute
//! it recomputes, what it can only bound it bounds, and the few seeds a cell names are run
//! again. Every refusal names the field; the caller adds the shard file and the cell.
//!
//! What a shard says and how it is checked here (beyond [`super::check_cell`]):
//!
//! - **recomputed**: the sim's and model's names (the reloaded files'), `applicable` and
//!   `reason` (`run::not_applicable` of the reloaded pair);
//! - **implied by the sim's expectations** ([`check_expectations`]): a run fails when its
//!   rows or effects differ from what `[expect]` fixes (`rows`, the length of `row_qty`,
//!   `effects`), so the runs the `rows` and `effects` histograms put elsewhere are failed
//!   seeds; every run has the sim's intents, so the per-intent histograms count `runs` times
//!   that many;
//! - **run again** ([`spot_seeds`], [`check_rerun`]): the first failing seed and the first seed
//!   of every violation. A run is a function of (build, sim, model, seed) and the shard
//!   claims that seed ran and counted: rerun, it must fail or show the violation as claimed,
//!   and what it shows (failure, violations, bound, rows, effects, statuses, intents) must
//!   be in the aggregate. At most one rerun per distinct seed named, so never more runs than
//!   the cell claims it ran.
//! - **not verifiable without running every seed**: the exact counts (how many seeds failed
//!   or showed each violation beyond those bounds, the histograms' other entries, the
//!   statuses' counts). A shard that forges only those is consistent with some run of the
//!   same files; only rerunning the whole range would tell.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{FileId, ShardCell};
use crate::input::InputError;
use crate::model::Model;
use crate::run::{self, RunError, RunOptions};
use crate::scenario::Sim;
use crate::sweep::{Cell, SeedResult};

/// The sims and models the shards name, each reloaded once per (path, SHA-256).
#[derive(Default)]
pub struct Loaded {
    sims: HashMap<(String, String), Arc<Sim>>,
    models: HashMap<(String, String), Arc<Model>>,
}

impl Loaded {
    /// The sim `id` names, still the file the shard ran.
    pub fn sim(&mut self, id: &FileId) -> Result<Arc<Sim>, InputError> {
        let k = (id.path.clone(), id.sha256.clone());
        if let Some(s) = self.sims.get(&k) {
            return Ok(s.clone());
        }
        let s = reload(id, crate::catalog::sim)?;
        self.sims.insert(k, s.clone());
        Ok(s)
    }

    /// The model `id` names, still the file the shard ran.
    pub fn model(&mut self, id: &FileId) -> Result<Arc<Model>, InputError> {
        let k = (id.path.clone(), id.sha256.clone());
        if let Some(m) = self.models.get(&k) {
            return Ok(m.clone());
        }
        let m = reload(id, crate::catalog::model)?;
        self.models.insert(k, m.clone());
        Ok(m)
    }
}

/// Load a cell's sim or model as the shard names it, checking it is still the same file: a
/// regular file of at most `input::MAX_FILE_BYTES` (never a FIFO or a device) whose SHA-256 is
/// the shard's. A relative path is looked for where replay commands name files from: the
/// current directory, the project's root, the shipped library's root; the first that exists is
/// the file, and it must have the shard's hash (a changed file is refused even if the shipped
/// library still holds the original: the merged report's replay commands would name the
/// changed one).
pub fn reload<T>(
    id: &FileId,
    load: impl Fn(&str) -> Result<Arc<T>, InputError>,
) -> Result<Arc<T>, InputError> {
    let p = Path::new(&id.path);
    let shipped = crate::catalog::library().ok().and_then(|l| l.shipped.clone());
    let candidates: Vec<std::path::PathBuf> = if p.is_absolute() {
        vec![p.to_path_buf()]
    } else {
        [Some(p.to_path_buf()), Some(crate::catalog::root().join(p)), shipped.map(|s| s.join(p))]
            .into_iter()
            .flatten()
            .collect()
    };
    let path = candidates.iter().find(|c| c.exists()).unwrap_or(&candidates[0]);
    if hash_of(path).as_deref() != Some(id.sha256.as_str()) {
        return Err(InputError::file(
            path,
            "changed (or missing) since the shards ran: the merged report names this file",
        ));
    }
    let loaded = load(path.to_str().unwrap_or(&id.path))?;
    Ok(loaded)
}

/// A regular file's SHA-256 (hex), if it is one of at most `input::MAX_FILE_BYTES`.
fn hash_of(path: &Path) -> Option<String> {
    std::fs::metadata(path)
        .ok()
        .filter(|m| m.is_file() && m.len() <= crate::input::MAX_FILE_BYTES)
        .and_then(|_| std::fs::read(path).ok())
        .map(|b| {
            use sha2::Digest;
            hex::encode(sha2::Sha256::digest(&b))
        })
}

/// A cell against its reloaded sim and model: their names, whether the sim applies to the
/// model and why not (recomputed), and what the sim's expectations imply.
pub fn check_files(c: &ShardCell, sim: &Sim, model: &Model) -> Result<(), String> {
    for (field, claim, name) in
        [("sim.name", &c.sim.name, &sim.name), ("model.name", &c.model.name, &model.name)]
    {
        if claim != name {
            return Err(format!(
                "{field} `{}` is not the name of the file it names (`{}`)",
                crate::text::shown(claim),
                crate::text::shown(name)
            ));
        }
    }
    let a = &c.aggregate;
    let reason = run::not_applicable(sim, model);
    if a.applicable != reason.is_none() {
        return Err(format!(
            "aggregate.applicable: {}, but the sim {} to the model",
            a.applicable,
            if reason.is_none() { "applies" } else { "does not apply" }
        ));
    }
    if a.reason != reason {
        return Err("aggregate.reason: not why the sim does not apply to the model".into());
    }
    if a.applicable { check_expectations(a, sim) } else { Ok(()) }
}

/// What the sim's expectations imply for any aggregate of its runs: a run whose rows differ
/// from `[expect] rows` (or from `row_qty`'s length) or whose effects differ from `[expect]
/// effects` fails (`expect::end_state_checks`; `Cell::effects` counts the effect log the
/// check counts), so each is at most `failed_seeds`; every run judges each of the sim's
/// intents once (`oracle::per_intent`), so the per-intent histograms count `runs` × intents;
/// and no run answers more attempts than its requests' copies × `max_attempts`.
fn check_expectations(a: &Cell, sim: &Sim) -> Result<(), String> {
    let x = &sim.expect;
    let rows_fail = |k: u64| {
        x.rows.is_some_and(|n| n != k) || x.row_qty.as_ref().is_some_and(|q| q.len() as u64 != k)
    };
    let off = |h: &BTreeMap<u64, u64>, fails: &dyn Fn(u64) -> bool| {
        h.iter().filter(|(k, _)| fails(**k)).fold(0u64, |t, (_, n)| t.saturating_add(*n))
    };
    for (what, n) in [
        ("rows", off(&a.rows, &rows_fail)),
        ("effects", off(&a.effects, &|k| x.effects.is_some_and(|n| n != k))),
    ] {
        if n > a.failed_seeds {
            return Err(format!(
                "aggregate.failed_seeds: {} failed seeds, but {n} runs ended with {what} the \
                 sim's expectations fail",
                a.failed_seeds
            ));
        }
    }
    // Every attempt of every copy of every request has one status (or a transport failure),
    // and a copy makes at most `max_attempts` attempts (`RunReport::status_histogram`).
    let per_run = sim.requests.iter().fold(0u64, |t, q| {
        t.saturating_add(u64::from(q.copies).saturating_mul(u64::from(q.policy.max_attempts)))
    });
    let statuses = a.statuses.values().fold(0u64, |t, n| t.saturating_add(*n));
    if statuses > a.runs.saturating_mul(per_run) {
        return Err(format!(
            "aggregate.statuses: {statuses} attempts, more than {} runs × {per_run} attempts the \
             sim's requests can make",
            a.runs
        ));
    }
    let intents = sim.intents().len() as u64;
    // Each occurrence of a violation is about an intent, an attempt (its key, its reply, its
    // message), a row or an effect of one run: at most one per each of them.
    let made = |h: &BTreeMap<u64, u64>| {
        h.iter().fold(0u64, |t, (k, n)| t.saturating_add(k.saturating_mul(*n)))
    };
    let most = a
        .runs
        .saturating_mul(intents.saturating_add(per_run))
        .saturating_add(made(&a.rows))
        .saturating_add(made(&a.effects));
    if let Some((name, v)) = a.violations.iter().find(|(_, v)| v.occurrences > most) {
        return Err(format!(
            "aggregate.violations.{}.occurrences: {}, more than the intents, attempts, rows \
             and effects of {} runs ({most})",
            crate::text::shown(name),
            v.occurrences,
            a.runs
        ));
    }
    let want = a.runs.checked_mul(intents);
    for (what, h) in
        [("rows_per_intent", &a.rows_per_intent), ("effects_per_intent", &a.effects_per_intent)]
    {
        let total = h.values().try_fold(0u64, |t, n| t.checked_add(*n));
        if total != want {
            return Err(format!(
                "aggregate.{what}: does not count {} runs × {intents} intents of the sim",
                a.runs
            ));
        }
    }
    Ok(())
}

/// The seeds of an applicable cell worth running again: its first failing seed and the first
/// seed of each violation, distinct, except those it reports nondeterministic (their rerun
/// may differ from the run that counted).
pub fn spot_seeds(a: &Cell) -> Vec<u64> {
    if !a.applicable {
        return vec![];
    }
    let mut seeds: Vec<u64> = a
        .first_failed_seed
        .into_iter()
        .chain(a.violations.values().map(|v| v.first_seed))
        .collect();
    seeds.sort_unstable();
    seeds.dedup();
    seeds.retain(|s| a.nondeterministic_seeds.binary_search(s).is_err());
    seeds
}

/// One rerun asked for: the cell's sim and model and the seed.
pub type Rerun = (Arc<Sim>, Arc<Model>, u64);

/// Run every seed of `todo` again on up to `jobs` threads; the one-seed aggregate of each,
/// in `todo`'s order (the same whatever the number of threads: each run is deterministic).
pub fn rerun_all(todo: &[Rerun], jobs: usize) -> Result<Vec<Cell>, RunError> {
    let next = AtomicUsize::new(0);
    let one = |(sim, model, seed): &Rerun| -> Result<Cell, RunError> {
        let report = run::run(sim, model, *seed, RunOptions::default())?.report;
        let mut c = Cell::new(sim, model, &(*seed..seed.saturating_add(1)));
        c.add(&SeedResult { cell: 0, seed: *seed, report, nondeterministic: false });
        Ok(c)
    };
    let parts: Vec<Result<Vec<(usize, Cell)>, RunError>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..jobs.clamp(1, todo.len().max(1)))
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(t) = todo.get(i) else { break };
                        mine.push((i, one(t)?));
                    }
                    Ok(mine)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("a rerun panicked")).collect()
    });
    let mut out: Vec<Option<Cell>> = vec![None; todo.len()];
    for part in parts {
        for (i, c) in part? {
            out[i] = Some(c);
        }
    }
    Ok(out.into_iter().map(|c| c.expect("every rerun ran")).collect())
}

/// A cell against the rerun of one of its seeds (`one`: that seed's aggregate). The seed ran
/// and counted in the cell (it is the first seed of something the cell claims, inside what it
/// covered), so what the rerun shows must be there: its failure (with the same failed checks
/// when it is the first failing seed), its violations (the first seed's among them), its
/// bound, its rows, effects, statuses and per-intent counts.
pub fn check_rerun(a: &Cell, seed: u64, one: &Cell) -> Result<(), String> {
    match (one.first_failed_seed, a.first_failed_seed) {
        (Some(_), None) => {
            return Err(format!(
                "aggregate.first_failed_seed: none, but seed {seed} fails when run again"
            ));
        }
        (Some(_), Some(f)) if f > seed => {
            return Err(format!(
                "aggregate.first_failed_seed: {f}, but seed {seed} fails when run again"
            ));
        }
        (Some(_), Some(f)) if f == seed && a.first_failure != one.first_failure => {
            return Err(format!(
                "aggregate.first_failure: not the checks seed {seed} fails when run again"
            ));
        }
        (None, Some(f)) if f == seed => {
            return Err(format!("aggregate.first_failed_seed: seed {seed} passes when run again"));
        }
        _ => {}
    }
    for (name, v) in &a.violations {
        if v.first_seed == seed && !one.violations.contains_key(name) {
            return Err(format!(
                "aggregate.violations: {name} on seed {seed}, which does not show it when run again"
            ));
        }
    }
    for (name, v) in &one.violations {
        let held = a.violations.get(name);
        if held.is_none_or(|h| h.first_seed > seed || h.occurrences < v.occurrences) {
            return Err(format!(
                "aggregate.violations: seed {seed} shows {name} {} time(s) when run again",
                v.occurrences
            ));
        }
    }
    check_rerun_counts(a, seed, one)
}

/// The counts of one rerun seed are among the cell's.
fn check_rerun_counts(a: &Cell, seed: u64, one: &Cell) -> Result<(), String> {
    fn within<K: Ord>(part: &BTreeMap<K, u64>, whole: &BTreeMap<K, u64>) -> bool {
        part.iter().all(|(k, n)| whole.get(k).is_some_and(|w| w >= n))
    }
    let histograms = [
        ("rows", within(&one.rows, &a.rows)),
        ("effects", within(&one.effects, &a.effects)),
        ("statuses", within(&one.statuses, &a.statuses)),
        ("rows_per_intent", within(&one.rows_per_intent, &a.rows_per_intent)),
        ("effects_per_intent", within(&one.effects_per_intent, &a.effects_per_intent)),
        ("bounded_runs", one.bounded_runs <= a.bounded_runs),
        ("ambiguous_intents", one.ambiguous_intents <= a.ambiguous_intents),
    ];
    match histograms.iter().find(|(_, ok)| !ok) {
        Some((field, _)) => {
            Err(format!("aggregate.{field}: lacks what seed {seed} gives when run again"))
        }
        None => Ok(()),
    }
}
