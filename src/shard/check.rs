//! A shard is untrusted: every claim a cell makes is checked against the seeds it covered
//! (runs, counts, first seeds, histograms, `passed`) before it may be merged.

use std::collections::BTreeMap;
use std::ops::Range;

use super::file::parse_range;
use super::{ShardCell, ShardFile};
use crate::report::ViolationKind;
use crate::sweep::Cell;

/// The index of the first cell out of a matrix's layout (every sim × model pair, sim-major,
/// in first-appearance order), if any: the layout [`shard_file`] writes and a merge keeps, so
/// a file whose cells were reordered, dropped or added is refused instead of drawing another
/// table.
pub(super) fn off_grid(cells: &[ShardCell]) -> Option<usize> {
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
pub(super) fn key(c: &ShardCell) -> (String, String) {
    (c.sim.name.clone(), c.model.name.clone())
}

/// The first cell whose (sim, model) pair an earlier cell of `cells` already has.
pub(super) fn first_repeated(cells: &[ShardCell]) -> Option<&ShardCell> {
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
    check_histograms(a)?;
    check_fired(a)
}

/// Faults fired: each counted in at least one run and at most every run, and at least once
/// in each run it counts (`times` ≥ `runs`).
pub(super) fn check_fired(a: &Cell) -> Result<(), String> {
    for (name, f) in &a.fired {
        let name = crate::text::shown(name);
        if f.runs == 0 || f.runs > a.runs {
            return Err(format!("aggregate.fired.{name}.runs: {} of {} runs", f.runs, a.runs));
        }
        if f.times < f.runs {
            return Err(format!(
                "aggregate.fired.{name}.times: fired {} times in {} runs",
                f.times, f.runs
            ));
        }
    }
    Ok(())
}

/// The cell's range, parsed; the aggregate names the cell's sim, model and range.
pub(super) fn check_names(c: &ShardCell) -> Result<Range<u64>, String> {
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
pub(super) fn check_covered(c: &ShardCell, whole: &Range<u64>) -> Result<u64, String> {
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
pub(super) fn check_not_applicable(a: &Cell) -> Result<(), String> {
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
pub(super) fn permitted_kind(k: ViolationKind) -> bool {
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
pub(super) fn check_violations(c: &ShardCell) -> Result<(), String> {
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
    let unfinished: u64 = [ViolationKind::UnfinishedIntent, ViolationKind::OutOfRetries]
        .iter()
        .filter_map(|k| a.violations.get(k.name()))
        .map(|v| v.occurrences)
        .fold(0, u64::saturating_add);
    if a.ambiguous_intents != unfinished {
        return Err(format!(
            "aggregate.ambiguous_intents: {} but {unfinished} unfinished-intent and out-of-retries \
             violations",
            a.ambiguous_intents
        ));
    }
    Ok(())
}

/// Failures: a first failing seed exactly when some seed failed, covered, with the checks
/// that failed on it (each one failed, at least one); `passed` exactly when no seed failed;
/// every run cut short by a bound failed (a bound fails its run: `RunReport::passed`);
/// nondeterministic seeds sorted, distinct, covered and at most `runs`.
pub(super) fn check_failures(c: &ShardCell) -> Result<(), String> {
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
pub(super) fn check_histograms(a: &Cell) -> Result<(), String> {
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
