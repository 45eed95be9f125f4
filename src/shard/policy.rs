//! What `idemsim merge` accepts and what its report says: the shard files named (folders as
//! their `*.json`), read, merged and checked against this build and the sims and models they
//! name, reloaded (each still the file the shards ran; see [`verify`] for what is recomputed,
//! bounded and run again); every cell over the range asked for (`--expect-seeds`) and
//! complete, unless `--allow-partial`; and the verdict (one cell: the sweep's, a matrix:
//! every cell passed).

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::verify::{self, Loaded, Rerun};
use super::{Build, FileId, ShardCell, ShardFile, gaps, merge_refs, pair, read};
use crate::input::InputError;
use crate::model::Model;
use crate::scenario::Sim;
use crate::sweep::{self, Cell};

/// The shard files named on the command line: files as given, a folder as every `*.json`
/// inside it, sorted (a folder without one is an error).
pub fn shard_paths(named: &[PathBuf]) -> Result<Vec<PathBuf>, InputError> {
    let mut paths: Vec<PathBuf> = Vec::new();
    for p in named {
        if p.is_dir() {
            let mut inside: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| InputError::file(p, format!("cannot read: {e}")))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "json"))
                .collect();
            inside.sort();
            if inside.is_empty() {
                return Err(InputError::file(p, "no *.json shard file in this folder"));
            }
            paths.extend(inside);
        } else {
            paths.push(p.clone());
        }
    }
    Ok(paths)
}

/// Read every shard file (each checked against itself: [`super::check_cell`]), [`merge`]
/// them (one build, the same files, no seed twice), then check every file's cells against
/// this build and against the sims and models they name, reloaded ([`verify`]: names,
/// `applicable` and `reason` recomputed, what the sim's expectations imply, the first failing
/// seed and each violation's first seed run again). A refusal names the shard file and the
/// field; a sim or model that changed is named itself.
///
/// [`merge`]: super::merge
pub fn read_and_merge(paths: &[PathBuf]) -> Result<ShardFile, InputError> {
    let mut files = Vec::new();
    for p in paths {
        files.push(read(p).map_err(|m| InputError::file(p, m))?);
    }
    // Each file's build first: a refusal then names the file, not the pair of builds.
    let build = Build::current();
    for (p, f) in paths.iter().zip(&files) {
        if f.build != build {
            return Err(InputError::file(
                p,
                format!(
                    "build: {}; this merge is {build}: a seed reproduces only with its build \
                     (merge with the build that ran the shards)",
                    f.build
                ),
            ));
        }
    }
    if let Some((p, _)) =
        paths.iter().zip(&files).skip(1).find(|(_, f)| super::layout(f) != super::layout(&files[0]))
    {
        return Err(InputError::file(
            p,
            format!(
                "cells: not the same sim × model pairs in the same order as {}: the shards of \
                 one run list one matrix",
                crate::text::printable(&paths[0].display().to_string())
            ),
        ));
    }
    let merged = merge_refs(&files).map_err(|m| InputError::file(Path::new("merge"), m))?;
    check_against_files(paths, &files)?;
    Ok(merged)
}

/// Each cell agrees with its reloaded sim and model and with the reruns of the
/// seeds it names (run on every core, checked in file and cell order).
fn check_against_files(paths: &[PathBuf], files: &[ShardFile]) -> Result<(), InputError> {
    let mut loaded = Loaded::default();
    let mut todo: Vec<Rerun> = Vec::new();
    let mut whose: Vec<(usize, usize)> = Vec::new();
    for (fi, (p, f)) in paths.iter().zip(files).enumerate() {
        for (ci, c) in f.cells.iter().enumerate() {
            let sim = loaded.sim(&c.sim).map_err(|e| in_cell(p, c, format!("sim: {e}")))?;
            let model = loaded.model(&c.model).map_err(|e| in_cell(p, c, format!("model: {e}")))?;
            verify::check_files(c, &sim, &model).map_err(|e| in_cell(p, c, e))?;
            for s in verify::spot_seeds(&c.aggregate) {
                todo.push((sim.clone(), model.clone(), s));
                whose.push((fi, ci));
            }
        }
    }
    let ones = verify::rerun_all(&todo, sweep::default_jobs())
        .map_err(|e| InputError::file(Path::new("merge"), format!("running a seed again: {e}")))?;
    for ((t, &(fi, ci)), one) in todo.iter().zip(&whose).zip(&ones) {
        let c = &files[fi].cells[ci];
        verify::check_rerun(&c.aggregate, t.2, one).map_err(|e| in_cell(&paths[fi], c, e))?;
    }
    Ok(())
}

/// A refusal of cell `c` of the shard file at `p`.
fn in_cell(p: &Path, c: &ShardCell, e: String) -> InputError {
    InputError::file(p, format!("cell {}: {e}", pair(c)))
}

/// Whether the merge is accepted: it has cells, every cell ran exactly `expect` (when
/// given), and no seed is missing and no shard was interrupted. An incomplete merge is
/// refused unless `allow_partial`; then the message saying what is missing comes back (for
/// stderr). A merge without cells is refused: with `--expect-seeds` it misses every seed.
pub fn accept(
    merged: &ShardFile,
    expect: Option<&Range<u64>>,
    allow_partial: bool,
) -> Result<Option<String>, InputError> {
    if merged.cells.is_empty() {
        return Err(InputError::file(Path::new("merge"), "cells: none, so nothing ran"));
    }
    let mut incomplete = Vec::new();
    for c in &merged.cells {
        if let Some(want) = expect
            && c.seeds != format!("{}..{}", want.start, want.end)
        {
            return Err(InputError::file(
                Path::new("--expect-seeds"),
                format!("{} ran seeds {}", pair(c), crate::text::shown(&c.seeds)),
            ));
        }
        for g in gaps(c) {
            incomplete.push(format!("{}: seeds {}..{} missing", pair(c), g.start, g.end));
        }
        if c.aggregate.interrupted {
            incomplete.push(format!("{}: a shard was interrupted", pair(c)));
        }
    }
    if incomplete.is_empty() {
        return Ok(None);
    }
    let msg = format!("incomplete: {}", incomplete.join("; "));
    if !allow_partial {
        return Err(InputError::file(
            Path::new("merge"),
            format!("{msg} (--allow-partial prints what is there)"),
        ));
    }
    Ok(Some(msg))
}

/// The report of one run over the whole range, from the files the shards ran.
pub struct Report {
    /// The sims, in the order the merged cells name them.
    pub sims: Vec<Arc<Sim>>,
    /// The models, in the order the merged cells name them.
    pub models: Vec<Arc<Model>>,
    /// Sim-major: the cell of sim `si` × model `mi` is `cells[si * models.len() + mi]`.
    pub cells: Vec<Cell>,
    /// The most threads a shard ran on (at least 1).
    pub jobs: usize,
}

/// Reload the merged cells' sims and models (each must still be the file the shards ran, one
/// file per name) and lay the cells out as one run over them would: sims and models in the
/// order the cells first name them, every pair present. Each cell is checked against its
/// files again ([`verify::check_files`]: names, `applicable`, `reason`, expectations), and
/// the failed checks it carries are made printable. Linear in the cells.
pub fn report(merged: &ShardFile) -> Result<Report, InputError> {
    let here = |e: String| InputError::file(Path::new("merge"), e);
    let mut loaded = Loaded::default();
    let (mut sims, mut models) = (Vec::new(), Vec::new());
    let mut sim_at: HashMap<&str, (usize, &FileId)> = HashMap::new();
    let mut model_at: HashMap<&str, (usize, &FileId)> = HashMap::new();
    let mut cell_at: HashMap<(usize, usize), &ShardCell> = HashMap::new();
    for c in &merged.cells {
        let si = place(&mut sim_at, &c.sim, "sim", sims.len()).map_err(here)?;
        if si == sims.len() {
            sims.push(loaded.sim(&c.sim)?);
        }
        let mi = place(&mut model_at, &c.model, "model", models.len()).map_err(here)?;
        if mi == models.len() {
            models.push(loaded.model(&c.model)?);
        }
        verify::check_files(c, &sims[si], &models[mi])
            .map_err(|e| here(format!("cell {}: {e}", pair(c))))?;
        if cell_at.insert((si, mi), c).is_some() {
            return Err(here(format!("cells: {} appears twice", pair(c))));
        }
    }
    let mut cells = Vec::with_capacity(sims.len() * models.len());
    for (si, s) in sims.iter().enumerate() {
        for (mi, m) in models.iter().enumerate() {
            let c = cell_at
                .get(&(si, mi))
                .ok_or_else(|| here(format!("no cell {} × {}", m.name, s.name)))?;
            cells.push(printable(&c.aggregate));
        }
    }
    Ok(Report { sims, models, cells, jobs: merged.timing.jobs.max(1) })
}

/// The index of the sim or model `id` names among those seen (`next` if it is new): one file
/// per name, since a row or column of the report is named by it.
fn place<'a>(
    seen: &mut HashMap<&'a str, (usize, &'a FileId)>,
    id: &'a FileId,
    what: &str,
    next: usize,
) -> Result<usize, String> {
    match seen.get(id.name.as_str()) {
        Some((i, first)) if first.sha256 == id.sha256 => Ok(*i),
        Some((_, first)) => Err(format!(
            "two {what} files are named `{}`: {} and {}; a report names its rows and columns \
             by name",
            crate::text::shown(&id.name),
            crate::text::shown(&first.path),
            crate::text::shown(&id.path)
        )),
        None => {
            seen.insert(&id.name, (next, id));
            Ok(next)
        }
    }
}

/// A merged aggregate as printed: the failed checks it carries, which come from a shard
/// file, made printable (as a run's own are: `text::printable` leaves them unchanged).
fn printable(a: &Cell) -> Cell {
    let mut a = a.clone();
    for k in &mut a.first_failure {
        for s in [&mut k.what, &mut k.expected, &mut k.actual] {
            *s = crate::text::printable(s);
        }
    }
    a
}

impl Report {
    /// The one cell, with its sim and model, when the merge is of a single sweep.
    pub fn single(&self) -> Option<(&Arc<Sim>, &Arc<Model>, &Cell)> {
        match (self.sims.as_slice(), self.models.as_slice(), self.cells.as_slice()) {
            ([sim], [model], [cell]) => Some((sim, model, cell)),
            _ => None,
        }
    }

    /// The merge's verdict (exit 1): a single sweep fails as the sweep would
    /// ([`Cell::sweep_failed`]), a matrix when an expectation failed in some cell or a seed
    /// was nondeterministic (a bug of the build; a matrix never reports one, and a merge
    /// cannot check a nondeterministic seed's claims by running it again).
    pub fn failed(&self) -> bool {
        match self.single() {
            Some((_, _, cell)) => cell.sweep_failed(),
            None => !self.cells.iter().all(|c| c.passed && c.nondeterministic_seeds.is_empty()),
        }
    }
}
