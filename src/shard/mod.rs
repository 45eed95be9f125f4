//! Sweeps sharded over existing batch engines (Slurm arrays, Kubernetes Indexed Jobs, AWS
//! Batch arrays, CI matrices) and merged exactly.
//!
//! `--shard K/N` runs the K-th of N contiguous, balanced slices of the flat (cell, seed) order
//! and writes a versioned shard file: the build, each cell's sim and model (name, path,
//! SHA-256 of the file), the seeds it covered and its mergeable aggregate ([`Cell`](crate::sweep::Cell)). `merge`
//! checks that the shards come from one build and the same files and that their slices tile
//! every cell's range without overlap, and gives back the aggregate a single run over the
//! whole range gives: counts and histograms add, first seeds take the minimum, intervals are
//! recomputed from the merged counts. Its output is a shard file itself, so merges nest.

mod check;
mod file;
mod merge;
pub mod policy;
mod spec;
pub mod verify;

pub use check::check_cell;
use check::{layout, pair};
pub use file::{Build, FileId, MAX_SHARD_BYTES, ShardCell, ShardFile, Timing, read, shard_file};
pub use merge::{by_key, gaps, merge, merge_refs};
pub use spec::{ENGINE_VARS, ShardSpec, parse_spec};

/// The format name and version every shard file carries.
pub const FORMAT: &str = "idemsim-shard";
/// The shard file format's version; this build reads only this one.
pub const VERSION: u32 = 1;
/// The madsim release the build pins (`Cargo.toml`: `madsim = "=0.2.34"`).
pub const MADSIM: &str = "0.2.34";
