//! Baselines for CI: the verdicts and violation rates of a matrix, committed beside a project,
//! and the comparison of a later run against them.
//!
//! A CI gate on "every cell passes" is useless for a research matrix: check-first is meant to
//! fail case 11. What a maintainer wants to know is whether a change made anything *worse* than
//! it was. A baseline records, per cell (sim × model): whether it applied, its runs, whether the
//! sim's expectations held (`as_specified`), the seeds whose expectations failed, the runs cut
//! short by a bound, and per violation kind the seeds it showed on. [`compare`] then sorts every
//! difference into a regression (exit 1), an improvement, or a change within what the seed
//! counts can tell apart:
//!
//! - a cell that stopped passing, stopped applying, or started hitting a bound: regression;
//! - a violation kind that was never seen and now is: regression ("new violation");
//! - a rate (a violation kind's seeds, the failed seeds) that moved: Fisher's exact test of
//!   the two counts ([`crate::agree::two_proportion`]); worse with p < [`ALPHA`] is a
//!   regression, better with p < [`ALPHA`] an improvement, anything else is within tolerance
//!   and reported as such. The tolerance is thus derived from the seed counts: 10/200 → 14/200
//!   is noise, 10/200 → 60/200 is not; on the same seeds and build the counts are equal.
//! - the reverse of each regression (a cell that now passes, a kind no longer seen) is an
//!   improvement; cells only in the run are new, cells only in the baseline are missing
//!   (neither fails: adding a model or running a subset is not a regression).
//!
//! Policy-permitted violations (documented expiry) are recorded but never fail the gate.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::agree;
use crate::input::InputError;
use crate::sweep::Cell;
use crate::text::printable;

/// The format name every baseline file carries.
pub const FORMAT: &str = "idemsim-baseline";
/// The baseline format's version; this build reads only this one.
pub const VERSION: u32 = 1;
/// Significance level at which a moved rate counts as a regression or an improvement.
pub const ALPHA: f64 = agree::DEFAULT_ALPHA;
/// The largest baseline file read (bytes).
pub const MAX_BASELINE_BYTES: u64 = 64 << 20;

/// One cell's recorded outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaselineCell {
    /// The sim's name.
    pub sim: String,
    /// The model's name.
    pub model: String,
    /// The seed range run, `A..B`.
    pub seeds: String,
    /// False when the sim does not apply to the model (then nothing else counts).
    pub applicable: bool,
    /// Seeds run.
    pub runs: u64,
    /// The sim's expectations held on every seed.
    pub as_specified: bool,
    /// Seeds on which an expectation failed.
    pub failed_seeds: u64,
    /// Runs cut short by a time or step bound.
    pub bounded_runs: u64,
    /// Per violation kind: seeds on which it showed (policy-permitted kinds in `permitted`).
    pub violations: BTreeMap<String, u64>,
    /// Policy-permitted violation kinds: seeds on which each showed (never a regression).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub permitted: BTreeMap<String, u64>,
}

impl BaselineCell {
    /// What a run's cell records.
    pub fn of(c: &Cell) -> BaselineCell {
        let mut violations = BTreeMap::new();
        let mut permitted = BTreeMap::new();
        for (name, v) in &c.violations {
            let into = if v.permitted { &mut permitted } else { &mut violations };
            into.insert(name.clone(), v.seeds);
        }
        BaselineCell {
            sim: c.sim.clone(),
            model: c.model.clone(),
            seeds: c.seeds.clone(),
            applicable: c.applicable,
            runs: c.runs,
            as_specified: c.passed,
            failed_seeds: c.failed_seeds,
            bounded_runs: c.bounded_runs,
            violations,
            permitted,
        }
    }

    fn name(&self) -> String {
        format!("{} × {}", printable(&self.model), printable(&self.sim))
    }
}

/// A baseline file: cells sorted by (sim, model), so that a regenerated file diffs cleanly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Baseline {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always [`VERSION`] when written.
    pub version: u32,
    /// The cells, sorted by (sim, model).
    pub cells: Vec<BaselineCell>,
}

impl Baseline {
    /// The baseline of a run's cells (an interrupted cell is refused: it would record fewer
    /// seeds than asked for).
    pub fn of(cells: &[Cell]) -> Result<Baseline, String> {
        if let Some(c) = cells.iter().find(|c| c.interrupted) {
            return Err(format!(
                "{} × {} was interrupted; a baseline records only complete runs",
                printable(&c.model),
                printable(&c.sim)
            ));
        }
        let mut out: Vec<BaselineCell> = cells.iter().map(BaselineCell::of).collect();
        out.sort_by(|a, b| (&a.sim, &a.model).cmp(&(&b.sim, &b.model)));
        Ok(Baseline { format: FORMAT.into(), version: VERSION, cells: out })
    }

    /// The file's text (pretty JSON, one trailing newline).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("serialisable") + "\n"
    }

    /// Read a baseline file: a regular file of at most [`MAX_BASELINE_BYTES`], of this format
    /// and version, whose cells agree with themselves (counts within runs, no cell twice).
    pub fn read(path: &Path) -> Result<Baseline, InputError> {
        let meta = std::fs::metadata(path)
            .map_err(|e| InputError::file(path, format!("cannot read baseline: {e}")))?;
        if !meta.is_file() {
            return Err(InputError::file(path, "not a regular file; expected a baseline (.json)"));
        }
        if meta.len() > MAX_BASELINE_BYTES {
            return Err(InputError::file(
                path,
                format!("{} bytes; a baseline is at most {MAX_BASELINE_BYTES}", meta.len()),
            ));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| InputError::file(path, format!("cannot read baseline: {e}")))?;
        Baseline::parse(&text).map_err(|m| InputError::file(path, m))
    }

    /// Parse and check a baseline's text (see [`Baseline::read`]).
    pub fn parse(text: &str) -> Result<Baseline, String> {
        let b: Baseline = serde_json::from_str(text)
            .map_err(|e| format!("not a baseline file: {e} (write one with --update-baseline)"))?;
        if b.format != FORMAT || b.version != VERSION {
            return Err(format!(
                "format `{}` version {}; this build reads {FORMAT} version {VERSION}",
                printable(&b.format),
                b.version
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for c in &b.cells {
            if !seen.insert((&c.sim, &c.model)) {
                return Err(format!("cell {} appears twice", c.name()));
            }
            let covered = seeds_covered(&c.seeds).ok_or_else(|| {
                format!(
                    "cell {}: seeds `{}` is not A..B[, C..D …] with A ≤ B",
                    c.name(),
                    printable(&c.seeds)
                )
            })?;
            if c.runs > covered || c.runs > MAX_RUNS {
                return Err(format!(
                    "cell {}: {} runs over seeds {} (at most {}, and at most {MAX_RUNS})",
                    c.name(),
                    c.runs,
                    printable(&c.seeds),
                    covered.min(MAX_RUNS)
                ));
            }
            let counts = c.violations.values().chain(c.permitted.values());
            if let Some(n) =
                [c.failed_seeds, c.bounded_runs].iter().chain(counts).find(|&&n| n > c.runs)
            {
                return Err(format!(
                    "cell {}: a count of {n} seeds out of {} runs",
                    c.name(),
                    c.runs
                ));
            }
            if c.as_specified != (c.failed_seeds == 0) {
                return Err(format!(
                    "cell {}: as_specified is {} with {} failed seeds",
                    c.name(),
                    c.as_specified,
                    c.failed_seeds
                ));
            }
        }
        Ok(b)
    }
}

/// The most runs a baseline cell may claim: 2^50, far beyond any sweep, and small enough that
/// the rates' arithmetic in `f64` stays exact.
const MAX_RUNS: u64 = 1 << 50;

/// How many seeds a cell's `seeds` covers (`A..B`, or intervals joined by `, ` as a merge
/// writes them; an n/a cell's is empty, `A..A`), or `None` if it does not parse or an
/// interval is reversed.
fn seeds_covered(seeds: &str) -> Option<u64> {
    seeds.split(", ").try_fold(0u64, |sum, part| {
        let (a, b) = part.split_once("..")?;
        let (a, b): (u64, u64) = (a.parse().ok()?, b.parse().ok()?);
        (a <= b).then(|| sum.checked_add(b - a)).flatten()
    })
}

/// Which way one difference goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// Worse, beyond what the seed counts explain: the gate fails.
    Regression,
    /// Better, beyond what the seed counts explain.
    Improvement,
    /// Moved, but within what the seed counts explain (p ≥ [`ALPHA`]).
    WithinTolerance,
}

/// One difference between a run and its baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Regression, improvement or within tolerance.
    pub direction: Direction,
    /// The sim's name.
    pub sim: String,
    /// The model's name.
    pub model: String,
    /// What changed, in words (printable).
    pub what: String,
}

/// The comparison of a run with a baseline.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Diff {
    /// Every difference, regressions first, then improvements, then changes within tolerance;
    /// within each, in (sim, model) order.
    pub findings: Vec<Finding>,
    /// Cells of the run the baseline does not have (`model × sim`).
    pub new_cells: Vec<String>,
    /// Cells of the baseline the run does not have.
    pub missing_cells: Vec<String>,
    /// Cells found in both and equal in every recorded count.
    pub unchanged: usize,
}

impl Diff {
    /// Regressions found (the gate fails when there is one).
    pub fn regressions(&self) -> usize {
        self.count(Direction::Regression)
    }

    fn count(&self, d: Direction) -> usize {
        self.findings.iter().filter(|f| f.direction == d).count()
    }

    /// The report: a summary line, then one line per finding, new and missing cells.
    pub fn text(&self, baseline: &str) -> String {
        use std::fmt::Write;
        let mut out = format!(
            "baseline {}: {} regression(s), {} improvement(s), {} within tolerance, {} \
             unchanged, {} new, {} missing\n",
            printable(baseline),
            self.regressions(),
            self.count(Direction::Improvement),
            self.count(Direction::WithinTolerance),
            self.unchanged,
            self.new_cells.len(),
            self.missing_cells.len()
        );
        for f in &self.findings {
            let tag = match f.direction {
                Direction::Regression => "REGRESSION",
                Direction::Improvement => "improved  ",
                Direction::WithinTolerance => "within tolerance",
            };
            let _ = writeln!(
                out,
                "  {tag} {} × {}: {}",
                printable(&f.model),
                printable(&f.sim),
                f.what
            );
        }
        for c in &self.new_cells {
            let _ =
                writeln!(out, "  new       {c} (not in the baseline; --update-baseline adds it)");
        }
        for c in &self.missing_cells {
            let _ = writeln!(out, "  missing   {c} (in the baseline, not run)");
        }
        out
    }
}

/// Compare a run's cells with a baseline (see the module's documentation for the rules).
pub fn compare(baseline: &Baseline, now: &Baseline) -> Diff {
    let before: BTreeMap<(&str, &str), &BaselineCell> =
        baseline.cells.iter().map(|c| ((c.sim.as_str(), c.model.as_str()), c)).collect();
    let after: BTreeMap<(&str, &str), &BaselineCell> =
        now.cells.iter().map(|c| ((c.sim.as_str(), c.model.as_str()), c)).collect();
    let mut diff = Diff::default();
    for (k, n) in &after {
        match before.get(k) {
            None => diff.new_cells.push(n.name()),
            Some(b) => {
                let found = compare_cell(b, n);
                // No finding: the same verdicts, and rates the same or equal (10/200, 20/400).
                if found.is_empty() {
                    diff.unchanged += 1;
                }
                diff.findings.extend(found);
            }
        }
    }
    diff.missing_cells =
        before.iter().filter(|(k, _)| !after.contains_key(*k)).map(|(_, b)| b.name()).collect();
    // Stable: regressions first, each group in (sim, model) order as found.
    diff.findings.sort_by_key(|f| f.direction);
    diff
}

fn compare_cell(b: &BaselineCell, n: &BaselineCell) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut say = |direction: Direction, what: String| {
        out.push(Finding { direction, sim: n.sim.clone(), model: n.model.clone(), what });
    };
    match (b.applicable, n.applicable) {
        (true, false) => {
            say(Direction::Regression, "no longer applies (n/a): its seeds no longer run".into());
            return out;
        }
        (false, true) => say(Direction::Improvement, "applies now (was n/a)".into()),
        (false, false) => return out,
        (true, true) => {}
    }
    match (b.as_specified, n.as_specified) {
        (true, false) => say(
            Direction::Regression,
            format!("stopped passing: expectations failed on {}/{} seeds", n.failed_seeds, n.runs),
        ),
        (false, true) => say(
            Direction::Improvement,
            format!("passes now (failed on {}/{} seeds)", b.failed_seeds, b.runs),
        ),
        (false, false) => {
            if let Some(f) = rate_change(
                "seeds failing expectations",
                b.failed_seeds,
                b.runs,
                n.failed_seeds,
                n.runs,
            ) {
                say(f.0, f.1);
            }
        }
        (true, true) => {}
    }
    match (b.bounded_runs, n.bounded_runs) {
        (0, k) if k > 0 => {
            say(Direction::Regression, format!("runs cut short by a bound: {k}/{}", n.runs))
        }
        (k, 0) if k > 0 => say(Direction::Improvement, "no run cut short by a bound now".into()),
        (kb, kn) => {
            if let Some(f) = rate_change("runs cut short by a bound", kb, b.runs, kn, n.runs) {
                say(f.0, f.1);
            }
        }
    }
    compare_kinds(b, n, &mut say);
    out
}

/// Each violation kind of either cell: new, gone, or its rate moved.
fn compare_kinds(b: &BaselineCell, n: &BaselineCell, say: &mut impl FnMut(Direction, String)) {
    let kinds: std::collections::BTreeSet<&String> =
        b.violations.keys().chain(n.violations.keys()).collect();
    for kind in kinds {
        let kb = b.violations.get(kind).copied().unwrap_or(0);
        let kn = n.violations.get(kind).copied().unwrap_or(0);
        let name = printable(kind);
        match (kb, kn) {
            (0, 0) => {}
            (0, k) => {
                say(Direction::Regression, format!("new violation {name} on {k}/{} seeds", n.runs))
            }
            (k, 0) => say(
                Direction::Improvement,
                format!("{name} no longer found (was on {k}/{} seeds)", b.runs),
            ),
            (kb, kn) => {
                if let Some(f) = rate_change(&name, kb, b.runs, kn, n.runs) {
                    say(f.0, f.1);
                }
            }
        }
    }
}

/// A rate that moved from kb/nb to kn/nn: which way, in words, with Fisher's p; None when
/// the rate is the same.
fn rate_change(what: &str, kb: u64, nb: u64, kn: u64, nn: u64) -> Option<(Direction, String)> {
    // Equal rates (cross-multiplied, so 10/200 and 20/400 are the same): nothing to say.
    if u128::from(kb) * u128::from(nn) == u128::from(kn) * u128::from(nb) {
        return None;
    }
    let c = agree::two_proportion(kn, nn, kb, nb);
    let worse = c.difference > 0.0;
    let direction = match (c.p_value < ALPHA, worse) {
        (true, true) => Direction::Regression,
        (true, false) => Direction::Improvement,
        (false, _) => Direction::WithinTolerance,
    };
    let pct = |k: u64, n: u64| 100.0 * k as f64 / n.max(1) as f64;
    Some((
        direction,
        format!(
            "{what} {kb}/{nb} ({:.1} %) → {kn}/{nn} ({:.1} %), Fisher p = {:.2e}{}",
            pct(kb, nb),
            pct(kn, nn),
            c.p_value,
            if direction == Direction::WithinTolerance {
                format!(" (≥ {ALPHA}: the seed counts cannot tell them apart)")
            } else {
                String::new()
            }
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(sim: &str, model: &str, runs: u64, failed: u64, v: &[(&str, u64)]) -> BaselineCell {
        BaselineCell {
            sim: sim.into(),
            model: model.into(),
            seeds: format!("0..{runs}"),
            applicable: true,
            runs,
            as_specified: failed == 0,
            failed_seeds: failed,
            bounded_runs: 0,
            violations: v.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
            permitted: BTreeMap::new(),
        }
    }

    fn base(cells: Vec<BaselineCell>) -> Baseline {
        Baseline { format: FORMAT.into(), version: VERSION, cells }
    }

    #[test]
    fn equal_runs_are_unchanged() {
        let b = base(vec![cell("s", "m", 200, 3, &[("duplicate-row", 3)])]);
        let d = compare(&b, &b.clone());
        assert_eq!((d.regressions(), d.unchanged, d.findings.len()), (0, 1, 0));
    }

    #[test]
    fn a_new_violation_and_a_cell_that_stopped_passing_are_regressions() {
        let b = base(vec![cell("s", "m", 200, 0, &[])]);
        let n = base(vec![cell("s", "m", 200, 1, &[("duplicate-row", 1)])]);
        let d = compare(&b, &n);
        assert_eq!(d.regressions(), 2, "{d:?}");
        assert!(d.text("b.json").contains("new violation duplicate-row on 1/200 seeds"));
        assert!(d.text("b.json").contains("stopped passing"));
    }

    #[test]
    fn rates_move_within_or_beyond_what_the_seed_counts_tell_apart() {
        let b = base(vec![cell("s", "m", 200, 10, &[("duplicate-row", 10)])]);
        // 10/200 → 14/200: Fisher p ≈ 0.5, noise.
        let small = compare(&b, &base(vec![cell("s", "m", 200, 14, &[("duplicate-row", 14)])]));
        assert_eq!(small.regressions(), 0, "{small:?}");
        assert!(small.findings.iter().all(|f| f.direction == Direction::WithinTolerance));
        // 10/200 → 60/200: p ≈ 1e-10, a regression (twice: the kind and the failed seeds).
        let big = compare(&b, &base(vec![cell("s", "m", 200, 60, &[("duplicate-row", 60)])]));
        assert_eq!(big.regressions(), 2, "{big:?}");
        // And back: an improvement.
        let back = compare(&base(vec![cell("s", "m", 200, 60, &[("duplicate-row", 60)])]), &b);
        assert_eq!((back.regressions(), back.count(Direction::Improvement)), (0, 2));
        // The same rate over more seeds is no change at all.
        let more = compare(&b, &base(vec![cell("s", "m", 400, 20, &[("duplicate-row", 20)])]));
        assert!(more.findings.is_empty(), "{more:?}");
    }

    #[test]
    fn new_and_missing_cells_do_not_fail_and_permitted_kinds_are_ignored() {
        let mut permitted = cell("s", "m", 100, 0, &[]);
        permitted.permitted.insert("expired-duplicate-row".into(), 40);
        let b = base(vec![cell("s", "m", 100, 0, &[]), cell("s", "gone", 100, 0, &[])]);
        let n = base(vec![permitted, cell("s", "added", 100, 5, &[("duplicate-row", 5)])]);
        let d = compare(&b, &n);
        assert_eq!(d.regressions(), 0, "{d:?}");
        assert_eq!(d.new_cells, ["added × s"]);
        assert_eq!(d.missing_cells, ["gone × s"]);
    }

    #[test]
    fn a_cell_that_no_longer_applies_or_hits_a_bound_is_a_regression() {
        let b = base(vec![cell("s", "m", 100, 0, &[])]);
        let mut na = cell("s", "m", 0, 0, &[]);
        na.applicable = false;
        assert_eq!(compare(&b, &base(vec![na])).regressions(), 1);
        let mut bounded = cell("s", "m", 100, 0, &[]);
        bounded.bounded_runs = 1;
        assert_eq!(compare(&b, &base(vec![bounded])).regressions(), 1);
    }

    #[test]
    fn forged_or_foreign_baselines_are_refused_by_name() {
        let good = base(vec![cell("s", "m", 100, 2, &[("duplicate-row", 2)])]).to_json();
        assert!(Baseline::parse(&good).is_ok());
        for (from, to, says) in [
            ("\"runs\": 100", "\"runs\": 1", "out of 1 runs"),
            ("idemsim-baseline", "idemsim-shard", "format"),
            ("\"as_specified\": false", "\"as_specified\": true", "as_specified is true"),
            // Seeds that do not parse or run backwards, and more runs than seeds (a count as
            // large as u64 would make the rates' arithmetic meaningless).
            ("\"0..100\"", "\"banana\"", "seeds `banana`"),
            ("\"0..100\"", "\"50..0\"", "seeds `50..0`"),
            ("\"0..100\"", "\"0..50\"", "100 runs over seeds 0..50"),
            ("\"runs\": 100", "\"runs\": 18446744073709551615", "at most"),
        ] {
            let bad = good.replacen(from, to, 1);
            let err = Baseline::parse(&bad).unwrap_err();
            assert!(err.contains(says), "{from} → {to}: {err}");
        }
        let twice = base(vec![cell("s", "m", 1, 0, &[]), cell("s", "m", 1, 0, &[])]).to_json();
        assert!(Baseline::parse(&twice).unwrap_err().contains("twice"));
        assert!(Baseline::parse("[]").unwrap_err().contains("--update-baseline"));
    }

    /// README's example of the regression rule ("CI: baselines"): 10/200 → 14/200 is within
    /// tolerance, 10/200 → 60/200 a regression.
    #[test]
    fn readme_fisher_example() {
        let dir = |kn| rate_change("duplicate-row", 10, 200, kn, 200).map(|(d, _)| d);
        assert_eq!(dir(14), Some(Direction::WithinTolerance));
        assert_eq!(dir(60), Some(Direction::Regression));
    }
}
