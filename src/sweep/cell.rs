//! The aggregate of one cell (`Cell`): what one seed adds to it (`SeedResult`), the commutative
//! merge that workers and shards fold with, its verdicts (`Cell::sweep_failed`), per-model
//! totals, Wilson intervals and the per-seed JSON line.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::catalog;
use crate::model::Model;
use crate::report::{Check, RunReport, Verdict, ViolationKind};
use crate::run;
use crate::scenario::Sim;

/// The aggregate of one cell: one sim × one model over a seed range.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Cell {
    /// The model's name.
    pub model: String,
    /// The sim's name.
    pub sim: String,
    /// The seed range swept, `A..B`.
    pub seeds: String,
    /// Seeds run (fewer than the range when interrupted, none when n/a).
    pub runs: u64,
    /// Expectations held on every seed tried.
    pub passed: bool,
    /// Seeds on which an expectation failed.
    pub failed_seeds: u64,
    /// The lowest seed on which an expectation failed, if any.
    pub first_failed_seed: Option<u64>,
    /// The checks that failed on the first failing seed.
    pub first_failure: Vec<Check>,
    /// Rows at the end of a run → number of runs.
    pub rows: BTreeMap<u64, u64>,
    /// External effects at the end of a run → number of runs.
    pub effects: BTreeMap<u64, u64>,
    /// Status of every attempt (or `transport-failure`) → count over all runs.
    pub statuses: BTreeMap<String, u64>,
    /// Runs that hit a bound (time, steps).
    pub bounded_runs: u64,
    /// Per violation name: on how many seeds, how often in all, first seed.
    pub violations: BTreeMap<String, ViolationStat>,
    /// Rows per intent → number of intents (over all runs).
    pub rows_per_intent: BTreeMap<u64, u64>,
    /// Effects per intent → number of intents (over all runs).
    pub effects_per_intent: BTreeMap<u64, u64>,
    /// Seeds with at least one violation that is not policy-permitted.
    pub violating_seeds: u64,
    /// Intents without a final client-visible outcome, over all runs.
    pub ambiguous_intents: u64,
    /// Seeds whose second run gave a different trace (only with determinism checking).
    pub nondeterministic_seeds: Vec<u64>,
    /// The sweep was interrupted: the cell holds only the seeds that finished (`runs`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// False when the sim does not apply to the model (`n/a`: it injects at a point the
    /// model lacks); no seed is run.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub applicable: bool,
    /// Why the cell is `n/a`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Coverage of dangerous moments (`--coverage`): per moment, possible for the cell and
    /// the seeds that reached it. None (and absent from shard files and JSON) without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<crate::moments::Coverage>,
    /// Per fault that fired (the sim's `[faults]` knob, or `@point:action` of an
    /// `[[inject]]`): in how many runs, and how often in all. A rate is read beside whether its
    /// fault happened at all.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fired: BTreeMap<String, Fired>,
    /// The model's note for this sim (`[notes]`), shown beside the cell wherever it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The seeds this cell ran when a shard ran a slice of the work (`--shard`).
    #[serde(skip)]
    pub covered: Option<Range<u64>>,
}

impl Cell {
    pub(crate) fn new(sim: &Sim, model: &Model, seeds: &Range<u64>) -> Cell {
        let reason = run::not_applicable(sim, model);
        Cell {
            model: model.name.clone(),
            sim: sim.name.clone(),
            seeds: format!("{}..{}", seeds.start, seeds.end),
            runs: 0,
            passed: true,
            failed_seeds: 0,
            first_failed_seed: None,
            first_failure: vec![],
            rows: BTreeMap::new(),
            effects: BTreeMap::new(),
            statuses: BTreeMap::new(),
            bounded_runs: 0,
            violations: BTreeMap::new(),
            rows_per_intent: BTreeMap::new(),
            effects_per_intent: BTreeMap::new(),
            ambiguous_intents: 0,
            violating_seeds: 0,
            nondeterministic_seeds: vec![],
            interrupted: false,
            applicable: reason.is_none(),
            reason,
            coverage: None,
            fired: BTreeMap::new(),
            note: model.notes.get(&sim.name).cloned(),
            covered: None,
        }
    }

    pub(crate) fn add(&mut self, sr: &SeedResult) {
        let r = &sr.report;
        if sr.nondeterministic {
            let pos = self.nondeterministic_seeds.partition_point(|s| *s < sr.seed);
            self.nondeterministic_seeds.insert(pos, sr.seed);
        }
        for (i, v) in r.violations.iter().enumerate() {
            let name = v.name.name();
            let st = match self.violations.get_mut(name) {
                Some(st) => st,
                None => self.violations.entry(name.to_string()).or_insert(ViolationStat {
                    seeds: 0,
                    occurrences: 0,
                    first_seed: r.seed,
                    permitted: v.permitted,
                }),
            };
            st.occurrences += 1;
            // The first violation of its kind in this run.
            if !r.violations[..i].iter().any(|x| x.name == v.name) {
                st.seeds += 1;
                st.first_seed = st.first_seed.min(r.seed);
            }
        }
        for (rows, effects) in &r.per_intent {
            *self.rows_per_intent.entry(*rows).or_insert(0) += 1;
            *self.effects_per_intent.entry(*effects).or_insert(0) += 1;
        }
        self.ambiguous_intents += r.ambiguous_intents;
        for (name, n) in &r.faults {
            let f = match self.fired.get_mut(name) {
                Some(f) => f,
                None => self.fired.entry(name.clone()).or_default(),
            };
            f.runs += 1;
            f.times = f.times.saturating_add(*n);
        }
        if r.violations.iter().any(|v| !v.permitted) {
            self.violating_seeds += 1;
        }
        self.runs += 1;
        *self.rows.entry(r.rows.len() as u64).or_insert(0) += 1;
        *self.effects.entry(r.effects_total).or_insert(0) += 1;
        count_statuses(&mut self.statuses, r);
        if !r.bounds_hit.is_empty() {
            self.bounded_runs += 1;
        }
        if !r.passed() {
            self.passed = false;
            self.failed_seeds += 1;
            if self.first_failed_seed.is_none_or(|s| r.seed < s) {
                self.first_failed_seed = Some(r.seed);
                self.first_failure = r.checks.iter().filter(|c| !c.held).cloned().collect();
                for b in &r.bounds_hit {
                    self.first_failure.push(Check {
                        what: "bound".into(),
                        held: false,
                        expected: "no bound hit".into(),
                        actual: b.clone(),
                    });
                }
            }
        }
    }

    /// Count one seed's dangerous moments (`--coverage`; the seed itself is [`Cell::add`]ed).
    pub(crate) fn add_moments(&mut self, reached: &[crate::moments::Moment]) {
        if let Some(c) = self.coverage.as_mut() {
            crate::moments::add(c, reached);
        }
    }

    /// Fold another part of this cell (other seeds) into it: commutative and associative, the
    /// monoid that workers and shards merge with.
    pub fn merge(&mut self, o: Cell) {
        self.runs = self.runs.saturating_add(o.runs);
        self.passed &= o.passed;
        self.failed_seeds = self.failed_seeds.saturating_add(o.failed_seeds);
        if let Some(s) = o.first_failed_seed
            && self.first_failed_seed.is_none_or(|m| s < m)
        {
            self.first_failed_seed = Some(s);
            self.first_failure = o.first_failure;
        }
        sum_into(&mut self.rows, o.rows);
        sum_into(&mut self.effects, o.effects);
        sum_into(&mut self.rows_per_intent, o.rows_per_intent);
        sum_into(&mut self.effects_per_intent, o.effects_per_intent);
        sum_into(&mut self.statuses, o.statuses);
        for (k, v) in o.violations {
            let e = self.violations.entry(k).or_insert(ViolationStat {
                seeds: 0,
                occurrences: 0,
                first_seed: v.first_seed,
                permitted: v.permitted,
            });
            e.seeds = e.seeds.saturating_add(v.seeds);
            e.occurrences = e.occurrences.saturating_add(v.occurrences);
            e.first_seed = e.first_seed.min(v.first_seed);
        }
        for (k, f) in o.fired {
            let e = self.fired.entry(k).or_default();
            e.runs = e.runs.saturating_add(f.runs);
            e.times = e.times.saturating_add(f.times);
        }
        self.bounded_runs = self.bounded_runs.saturating_add(o.bounded_runs);
        self.ambiguous_intents = self.ambiguous_intents.saturating_add(o.ambiguous_intents);
        self.violating_seeds = self.violating_seeds.saturating_add(o.violating_seeds);
        self.nondeterministic_seeds.extend(o.nondeterministic_seeds);
        self.interrupted |= o.interrupted;
        self.nondeterministic_seeds.sort_unstable();
        if let Some(oc) = o.coverage {
            crate::moments::merge(self.coverage.get_or_insert_with(Default::default), oc);
        }
    }

    /// The cell's two verdicts (None when the sim does not apply): safe on every seed (no
    /// violation that is not policy-permitted, no run cut short by a bound) and as specified
    /// (the sim's expectations held on every seed).
    pub fn verdict(&self) -> Option<Verdict> {
        self.applicable.then_some(Verdict {
            safe: self.violating_seeds == 0 && self.bounded_runs == 0,
            as_specified: self.passed,
        })
    }

    /// The command that replays the first failing seed of this cell of `sim` × `model`, if any
    /// seed failed.
    pub fn replay_command(&self, sim: &Sim, model: &Model) -> Option<String> {
        self.first_failed_seed.map(|s| catalog::replay_for(sim, model, s))
    }
}

/// Add `r`'s [`RunReport::status_histogram`] to `h`, without building it: a status's text is
/// made on the stack and allocated only for a status `h` has not counted yet.
fn count_statuses(h: &mut BTreeMap<String, u64>, r: &RunReport) {
    for a in r.requests.iter().flat_map(|q| q.copies.iter().flatten()) {
        let digits;
        let k = match a.status {
            Some(s) => {
                digits = crate::http::itoa_i64(i64::from(s));
                digits.as_str()
            }
            None => a.outcome.name(),
        };
        match h.get_mut(k) {
            Some(n) => *n += 1,
            None => {
                h.insert(k.to_string(), 1);
            }
        }
    }
}

/// Add the counts of `b` to those of `a`.
fn sum_into<K: Ord>(a: &mut BTreeMap<K, u64>, b: BTreeMap<K, u64>) {
    for (k, v) in b {
        let e = a.entry(k).or_insert(0);
        // Saturating: a merged shard's counts are untrusted input.
        *e = e.saturating_add(v);
    }
}

/// How often one fault fired in a cell.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Fired {
    /// Runs in which it fired at least once.
    pub runs: u64,
    /// Firings over all runs.
    pub times: u64,
}

impl Cell {
    /// The header line saying how often each fault fired (`fired: crash in 12 of 50 runs (14
    /// times); @before-commit:fail in 50 of 50 runs (50 times)`), `unit` naming the runs
    /// (`runs`, `rounds`); None for a sim that arms no fault and saw none fire.
    pub fn fired_line(&self, sim: &Sim, unit: &str) -> Option<String> {
        let armed = sim.faults.describe() != "none" || !sim.injects.is_empty();
        if !armed && self.fired.is_empty() {
            return None;
        }
        if self.fired.is_empty() {
            return Some(format!("fired: none of these faults, in {} {unit}", self.runs));
        }
        let each: Vec<String> = self
            .fired
            .iter()
            .map(|(name, f)| {
                format!(
                    "{} in {} of {} {unit} ({} times)",
                    crate::text::printable(name),
                    f.runs,
                    self.runs,
                    f.times
                )
            })
            .collect();
        Some(format!("fired: {}", each.join("; ")))
    }
}

/// How often one violation occurred in a cell.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ViolationStat {
    /// Seeds on which it occurred at least once.
    pub seeds: u64,
    /// Occurrences over all seeds.
    pub occurrences: u64,
    /// The lowest seed on which it occurred.
    pub first_seed: u64,
    /// Policy-permitted (caused only by documented expiry).
    pub permitted: bool,
}

impl Cell {
    /// The violations found, in report order ([`ViolationKind::ALL`]).
    pub fn violations_in_order(&self) -> Vec<(&String, &ViolationStat)> {
        let mut v: Vec<(&String, &ViolationStat)> = self.violations.iter().collect();
        v.sort_by_key(|(n, _)| {
            ViolationKind::from_name(n).map_or(usize::MAX, ViolationKind::order)
        });
        v
    }

    /// Seeds with at least one violation that is not policy-permitted.
    pub fn violating(&self) -> impl Iterator<Item = (&String, &ViolationStat)> {
        self.violations.iter().filter(|(_, v)| !v.permitted)
    }

    /// The sweep's verdict on the cell (`sweep`, and `merge` of one cell, exit 1): a violation
    /// that is not policy-permitted, a nondeterministic seed, a run cut short by a bound, or an
    /// expectation that failed.
    pub fn sweep_failed(&self) -> bool {
        self.violating().next().is_some()
            || !self.nondeterministic_seeds.is_empty()
            || self.bounded_runs > 0
            || !self.passed
    }
}

/// Per-model totals: cells passed out of cells.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Total {
    /// The model's name.
    pub model: String,
    /// Applicable cells whose expectations held on every seed.
    pub passed: u64,
    /// Applicable cells (n/a ones are not counted).
    pub total: u64,
    /// Cells that do not apply to the model (`n/a`).
    #[serde(skip_serializing_if = "is_zero")]
    pub not_applicable: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_true(b: &bool) -> bool {
    *b
}

fn yes() -> bool {
    true
}

/// Per-model totals over `cells`, in `models`' order.
pub fn totals(models: &[Arc<Model>], cells: &[Cell]) -> Vec<Total> {
    models
        .iter()
        .map(|m| {
            let mine: Vec<&Cell> =
                cells.iter().filter(|c| c.model == m.name && c.applicable).collect();
            Total {
                model: m.name.clone(),
                passed: mine.iter().filter(|c| c.passed).count() as u64,
                total: mine.len() as u64,
                not_applicable: cells.iter().filter(|c| c.model == m.name && !c.applicable).count()
                    as u64,
            }
        })
        .collect()
}

/// What one seed contributes to a cell (compact: no traces are kept).
#[derive(Debug, Clone)]
pub struct SeedResult {
    /// The index of the cell it belongs to.
    pub cell: usize,
    /// The seed.
    pub seed: u64,
    /// The run's report: [`run::judge`]'s, or (a sweep's workers) [`run::judge_lean`]'s,
    /// which leaves empty what [`Cell::add`] and [`per_seed_line`] do not read.
    pub report: RunReport,
    /// Set by `check_determinism`: the second run's trace hash differed.
    pub nondeterministic: bool,
}

/// The Wilson score interval for k successes in n trials at 95 % confidence.
pub fn wilson(k: u64, n: u64) -> (f64, f64) {
    // A merged shard may claim more seeds than runs: clamp rather than panic.
    crate::agree::wilson(k.min(n), n, crate::agree::Z_95)
}

/// One JSON line per seed, for researchers' own analysis.
pub fn per_seed_line(r: &SeedResult, sim: &str, model: &str) -> String {
    let rep = &r.report;
    let mut permitted: Vec<ViolationKind> =
        rep.violations.iter().filter(|v| v.permitted).map(|v| v.name).collect();
    permitted.dedup();
    serde_json::json!({
        "sim": sim,
        "model": model,
        "seed": r.seed,
        "passed": rep.passed(),
        "violations": rep.violation_names(),
        "permitted": permitted,
        "rows": rep.rows.len(),
        "effects": rep.effects_total,
        "keys": rep.keys,
        "statuses": rep.status_histogram(),
        "ambiguous_intents": rep.ambiguous_intents,
        "bounds_hit": rep.bounds_hit,
        "trace_hash": rep.trace_hash,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one Wilson interval every report prints, at known values (computed independently:
    /// centre ± half with z = 1.959964), exact at 0 and n, and clamped when a merged shard
    /// claims more seeds than runs.
    #[test]
    fn wilson_at_known_values() {
        for (k, n, lo, hi) in [
            (0, 200, 0.0, 0.018_845_326),
            (200, 200, 0.981_154_674, 1.0),
            (46, 200, 0.177_093_433, 0.293_083_044),
            (1, 1, 0.206_549_314, 1.0),
        ] {
            let (l, h) = wilson(k, n);
            assert!((l - lo).abs() < 1e-8 && (h - hi).abs() < 1e-8, "{k}/{n}: {l} {h}");
        }
        assert_eq!(wilson(0, 200).0, 0.0);
        assert_eq!(wilson(200, 200).1, 1.0);
        assert_eq!(wilson(0, 0), (0.0, 1.0));
        assert_eq!(wilson(5, 3), wilson(3, 3));
    }
}
