//! The versioned shard file: the build, each cell's sim and model files by hash, the seeds
//! covered and the mergeable aggregate; written by `shard_file`, read back bounded by `read`.

use std::ops::Range;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::check::{first_repeated, off_grid};
use super::{FORMAT, MADSIM, ShardSpec, VERSION, check_cell, pair};
use crate::catalog;
use crate::model::Model;
use crate::scenario::Sim;
use crate::sweep::Cell;

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

pub(super) fn file_sha(path: &std::path::Path) -> String {
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

pub(super) fn parse_range(s: &str) -> Option<Range<u64>> {
    crate::input::parse_seeds(s).ok()
}

/// The largest shard file read (bytes): a shard of 20,000 cells is about 40 MB.
pub const MAX_SHARD_BYTES: u64 = 256 << 20;

/// A regular file of at most [`MAX_SHARD_BYTES`], whole (never a FIFO, a device or stdin).
pub(super) fn read_bounded(path: &std::path::Path) -> Result<String, String> {
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
