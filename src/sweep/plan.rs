//! Planning a sweep's work: the empty cells and each one's seeds (`plan`), a shard's slice of
//! the flat (cell, seed) order (`keep_shard`, `shard_slice`), and job `i` of that order (`job`).

use std::ops::Range;
use std::sync::Arc;

use super::Cell;
use crate::model::Model;
use crate::scenario::Sim;

/// Shard `k` of `n` of `0..total`: `[⌊k·total/n⌋, ⌊(k+1)·total/n⌋)`, contiguous and balanced
/// to one item (computed in u128, so any u64 range works).
pub fn shard_slice(total: u64, k: u64, n: u64) -> Range<u64> {
    let s = flat_slice(u128::from(total), k, n);
    // Both ends are at most `total`.
    s.start as u64..s.end as u64
}

/// [`shard_slice`] of a flat order of `total` positions, in u128: a matrix's flat order is the
/// sum of its cells' ranges, which passes `u64::MAX` with two cells of near 2^64 seeds. `k` and
/// `k + 1` are taken at most `n` (and `n` at least 1), so the ends never pass `total`.
/// `⌊i·total/n⌋` is computed as `q·i + ⌊r·i/n⌋` (`total = q·n + r`): neither product passes
/// u128 (`q·i ≤ total`, `r·i < 2^128`), where `i·total` would with a total past 2^64.
fn flat_slice(total: u128, k: u64, n: u64) -> Range<u128> {
    let n = u128::from(n.max(1));
    let (q, r) = (total / n, total % n);
    let at = |i: u64| {
        let i = u128::from(i).min(n);
        q * i + r * i / n
    };
    at(k)..at(k.saturating_add(1))
}

/// One cell's share of the work: its index, its sim and model, the seeds it runs.
pub(super) struct Work {
    pub(super) cell: usize,
    pub(super) sim: Arc<Sim>,
    pub(super) model: Arc<Model>,
    pub(super) seeds: Range<u64>,
}

/// The empty cells, sim-major, and each one's work: its seeds (`seeds`, or the sim's own
/// range; none for an n/a cell).
pub(super) fn plan(
    sims: &[Arc<Sim>],
    models: &[Arc<Model>],
    seeds: Option<Range<u64>>,
) -> (Vec<Cell>, Vec<Work>) {
    let mut cells = Vec::new();
    let mut work: Vec<Work> = Vec::new();
    for sim in sims {
        let range = seeds.clone().unwrap_or_else(|| sim.seeds.clone());
        for model in models {
            let cell = Cell::new(sim, model, &range);
            // An n/a cell runs no seed.
            let seeds = if cell.applicable { range.clone() } else { range.start..range.start };
            work.push(Work { cell: cells.len(), sim: sim.clone(), model: model.clone(), seeds });
            cells.push(cell);
        }
    }
    (cells, work)
}

/// `--coverage`: every applicable cell counts its dangerous moments, from an empty coverage
/// that knows which are possible for its (sim, model).
pub(super) fn count_coverage(work: &[Work], cells: &mut [Cell]) {
    for w in work {
        let c = &mut cells[w.cell];
        if c.applicable {
            c.coverage = Some(crate::moments::empty(&w.sim, &w.model));
        }
    }
}

/// A shard runs its slice of the flat (cell, seed) order: each cell keeps the part of its
/// range that falls in shard `k` of `n`, and says so (`covered`).
/// Positions in the flat order are u128: the cells' ranges may sum past `u64::MAX`.
pub(super) fn keep_shard(work: &mut [Work], cells: &mut [Cell], k: u64, n: u64) {
    let all: u128 = work.iter().map(|w| u128::from(w.seeds.end - w.seeds.start)).sum();
    let mine = flat_slice(all, k, n);
    let mut at = 0u128;
    for w in work {
        let len = u128::from(w.seeds.end - w.seeds.start);
        let end = at + len;
        // The part of this cell's positions [at, end) in the shard's, as offsets into the
        // cell's range (at most `len`, so they fit in u64 and the seeds do not pass its end).
        let lo = mine.start.clamp(at, end) - at;
        let hi = mine.end.clamp(at, end) - at;
        at = end;
        let (lo, hi) = (lo as u64, hi as u64);
        w.seeds = w.seeds.start + lo..w.seeds.start + hi;
        cells[w.cell].covered = Some(w.seeds.clone());
    }
}

/// Job `i` of the flat (cell, seed) order: (cell index, sim, model, seed). Jobs are handed
/// out in this fixed order by an atomic counter.
pub(super) fn job(work: &[Work], i: u64) -> Option<(usize, &Arc<Sim>, &Arc<Model>, u64)> {
    let mut i = i;
    for w in work {
        let n = w.seeds.end - w.seeds.start;
        if i < n {
            return Some((w.cell, &w.sim, &w.model, w.seeds.start + i));
        }
        i -= n;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flat order of cells whose ranges sum past `u64::MAX` (and whose `k·total` passes
    /// u128) is sliced without overflow: contiguous, balanced to one, ending at the total.
    #[test]
    fn flat_slices_past_u64_neither_overflow_nor_leave_gaps() {
        let big = u128::from(u64::MAX);
        for (total, n) in
            [(2 * big, 3), (3 * big, u64::MAX), (1000 * big + 7, u64::MAX - 1), (5, 1)]
        {
            let (lo, hi) = (total / u128::from(n), total.div_ceil(u128::from(n)));
            let mut at = 0;
            for k in [0, 1, n / 2, n.saturating_sub(2), n - 1].into_iter().filter(|k| *k < n) {
                let s = flat_slice(total, k, n);
                assert!(s.start <= s.end && s.end <= total, "{total}/{n} at {k}: {s:?}");
                assert!((lo..=hi).contains(&(s.end - s.start)), "{total}/{n} at {k}: {s:?}");
                if k + 1 < n {
                    assert_eq!(s.end, flat_slice(total, k + 1, n).start);
                }
                at = at.max(s.end);
            }
            assert_eq!(flat_slice(total, 0, n).start, 0);
            assert_eq!(at, total);
        }
        // Out-of-range shards are empty at the end, never past it.
        assert_eq!(flat_slice(10, 5, 3), 10..10);
        assert_eq!(flat_slice(10, u64::MAX, 0), 10..10);
    }
}
