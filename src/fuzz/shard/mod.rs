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

mod campaign;
mod draft;
mod edit;
mod forge;
mod honest;
mod impossible;
mod judge;

pub use campaign::{Judged, campaign, save, tally};
pub use edit::mutant;
pub use forge::classes;
pub use honest::{Honest, Merged, honest, run_merge};
pub use impossible::impossible;
pub use judge::{Judgement, judge, write_mutant};

use std::ops::Range;

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
