//! What `idemsim merge` accepts and what its report says: the shard files named (folders as
//! their `*.json`), read and merged; every cell over the range asked for (`--expect-seeds`)
//! and complete, unless `--allow-partial`; the sims and models reloaded, each still the file
//! the shards ran; and the verdict (one cell: the sweep's, a matrix: every cell passed).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{ShardFile, gaps, merge, read};
use crate::catalog;
use crate::input::InputError;
use crate::model::Model;
use crate::scenario::Sim;
use crate::sweep::Cell;

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

/// Read every shard file and [`merge`] them.
pub fn read_and_merge(paths: &[PathBuf]) -> Result<ShardFile, InputError> {
    let mut files = Vec::new();
    for p in paths {
        files.push(read(p).map_err(|m| InputError::file(p, m))?);
    }
    merge(files).map_err(|m| InputError::file(Path::new("merge"), m))
}

/// Whether the merge is accepted: every cell ran exactly `expect` (when given), and no seed
/// is missing and no shard was interrupted. An incomplete merge is refused unless
/// `allow_partial`; then the message saying what is missing comes back (for stderr).
pub fn accept(
    merged: &ShardFile,
    expect: Option<&Range<u64>>,
    allow_partial: bool,
) -> Result<Option<String>, InputError> {
    let mut incomplete = Vec::new();
    for c in &merged.cells {
        if let Some(want) = expect
            && c.seeds != format!("{}..{}", want.start, want.end)
        {
            return Err(InputError::file(
                Path::new("--expect-seeds"),
                format!("{} × {} ran seeds {}", c.model.name, c.sim.name, c.seeds),
            ));
        }
        for g in gaps(c) {
            incomplete.push(format!(
                "{} × {}: seeds {}..{} missing",
                c.model.name, c.sim.name, g.start, g.end
            ));
        }
        if c.aggregate.interrupted {
            incomplete.push(format!("{} × {}: a shard was interrupted", c.model.name, c.sim.name));
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

/// Reload the merged cells' sims and models (each must still be the file the shards ran) and
/// lay the cells out as one run over them would.
pub fn report(merged: &ShardFile) -> Result<Report, InputError> {
    let mut sims: Vec<Arc<Sim>> = Vec::new();
    let mut models: Vec<Arc<Model>> = Vec::new();
    for c in &merged.cells {
        if !sims.iter().any(|s| s.name == c.sim.name) {
            sims.push(reload(&c.sim, catalog::sim)?);
        }
        if !models.iter().any(|m| m.name == c.model.name) {
            models.push(reload(&c.model, catalog::model)?);
        }
    }
    let mut cells = Vec::new();
    for s in &sims {
        for m in &models {
            let c = merged
                .cells
                .iter()
                .find(|c| c.sim.name == s.name && c.model.name == m.name)
                .ok_or_else(|| {
                    InputError::file(Path::new("merge"), format!("no cell {} × {}", m.name, s.name))
                })?;
            cells.push(c.aggregate.clone());
        }
    }
    Ok(Report { sims, models, cells, jobs: merged.timing.jobs.max(1) })
}

/// Load a cell's sim or model as a merge found it, checking it is still the same file.
fn reload<T>(
    id: &super::FileId,
    load: impl Fn(&str) -> Result<Arc<T>, InputError>,
) -> Result<Arc<T>, InputError> {
    let p = Path::new(&id.path);
    let path =
        if p.is_absolute() || p.exists() { p.to_path_buf() } else { catalog::root().join(p) };
    let now = std::fs::read(&path).map(|b| {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(&b))
    });
    if now.as_deref().ok() != Some(id.sha256.as_str()) {
        return Err(InputError::file(
            &path,
            "changed (or missing) since the shards ran: the merged report names this file",
        ));
    }
    load(path.to_str().unwrap_or(&id.path))
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
    /// ([`Cell::sweep_failed`]), a matrix when an expectation failed in some cell.
    pub fn failed(&self) -> bool {
        match self.single() {
            Some((_, _, cell)) => cell.sweep_failed(),
            None => !self.cells.iter().all(|c| c.passed),
        }
    }
}
