//! Shards merged exactly: hashes checked, slices tiling each cell's range, counts added and
//! first seeds the minimum (`merge`); what is left uncovered (`gaps`).

use std::collections::BTreeMap;
use std::ops::Range;

use super::check::{first_repeated, key};
use super::file::parse_range;
use super::{ShardCell, ShardFile, pair};

/// Union of sorted disjoint intervals; an error on overlap.
pub(super) fn union(a: &[[u64; 2]], b: &[[u64; 2]]) -> Result<Vec<[u64; 2]>, [u64; 2]> {
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
pub(super) fn merge_cell(a: &mut ShardCell, c: &ShardCell) -> Result<(), String> {
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
