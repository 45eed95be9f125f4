//! `validate`: the same sim simulated over N seeds and played for real over N rounds, side
//! by side, statistic by statistic, each with a verdict (agree, disagree, inconclusive).
//! Pure: it compares two cells.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::agree::{self, COUNT_BINS, Verdict};
use crate::sweep::Cell;

/// One-way latency of a message between two processes on one machine over loopback (µs,
/// inclusive): half the keep-alive round trip Node.js measured on it (p50 0.059 ms, p90
/// 0.11 ms; tools/calibrate/node-loop.mjs), the latency the article's sims state. Real rounds
/// are played on loopback (client, servers, effect provider and their dependencies), so the
/// simulated side of a validation is too.
pub const LOOPBACK_LATENCY_US: (u64, u64) = (30, 55);

/// How the simulated side of a validation was set to the world the real rounds are played in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsPlayed {
    /// How the processes start (the real side's warm-up decides it).
    pub start: crate::scenario::Start,
    /// The sim's own network latency (µs), when it was not loopback's and was replaced.
    pub replaced_latency_us: Option<(u64, u64)>,
    /// The sim's own effect-provider latency (µs), when it was replaced.
    pub replaced_effect_latency_us: Option<(u64, u64)>,
    /// The stack profile measured on this machine just before (`validate --calibrate`), which
    /// the model was simulated on.
    pub calibrated: Option<String>,
}

/// `sim` as the real rounds play it: its processes started as `start` says, and every message
/// on loopback ([`LOOPBACK_LATENCY_US`]) whatever network the sim describes (a sim of clients
/// in another zone of a data centre is still played on one machine).
pub fn as_played(
    sim: std::sync::Arc<crate::scenario::Sim>,
    start: crate::scenario::Start,
) -> (std::sync::Arc<crate::scenario::Sim>, AsPlayed) {
    let w = &sim.world;
    let differs = |l: (u64, u64)| (l != LOOPBACK_LATENCY_US).then_some(l);
    let played = AsPlayed {
        start,
        replaced_latency_us: differs(w.latency_us),
        replaced_effect_latency_us: differs(w.effect_latency_us),
        calibrated: None,
    };
    if w.start == start
        && played.replaced_latency_us.is_none()
        && played.replaced_effect_latency_us.is_none()
    {
        return (sim, played);
    }
    let mut s = (*sim).clone();
    s.world.start = start;
    s.world.latency_us = LOOPBACK_LATENCY_US;
    s.world.effect_latency_us = LOOPBACK_LATENCY_US;
    (std::sync::Arc::new(s), played)
}

impl AsPlayed {
    /// `validate --json`'s `as_played` (schemas/validate.v1.schema.json).
    pub fn json(&self) -> serde_json::Value {
        let ms = |l: Option<(u64, u64)>| {
            l.map(|(a, b)| serde_json::json!([a as f64 / 1000.0, b as f64 / 1000.0]))
        };
        serde_json::json!({
            "start": self.start.name(),
            "latency_ms": ms(Some(LOOPBACK_LATENCY_US)),
            "sim_latency_ms": ms(self.replaced_latency_us),
            "sim_effect_latency_ms": ms(self.replaced_effect_latency_us),
            "calibrated_stack": self.calibrated,
            "judging": "as-real",
        })
    }

    /// The header's words for it: what the simulated side changed of the sim, or nothing.
    pub fn text(&self) -> Option<String> {
        let ms = |(a, b): (u64, u64)| format!("{}–{} ms", a as f64 / 1000.0, b as f64 / 1000.0);
        let mut o = Vec::new();
        if let Some(l) = self.replaced_latency_us {
            o.push(format!("network latency {} (the sim's {})", ms(LOOPBACK_LATENCY_US), ms(l)));
        }
        if let Some(l) = self.replaced_effect_latency_us {
            o.push(format!("effect provider {} (the sim's {})", ms(LOOPBACK_LATENCY_US), ms(l)));
        }
        let mut lines = Vec::new();
        if !o.is_empty() {
            lines.push(format!("simulated on loopback as the rounds are played: {}", o.join(", ")));
        }
        if let Some(p) = &self.calibrated {
            lines
                .push(format!("simulated on the stack measured just now: {}", measured_medians(p)));
        }
        (!lines.is_empty()).then(|| lines.join("\n  "))
    }
}

/// A calibrated profile's measured times in a few words: each measured line's median (or
/// share), in the order the profile gives them (`accept_ms p50 0.203 ms`, `wake_preempts 0.333`).
fn measured_medians(profile: &str) -> String {
    let mut o = Vec::new();
    for l in profile.lines() {
        let Some((field, rest)) = l.split_once(" = ") else { continue };
        if rest.contains("not measured") || !rest.contains("  # ") {
            continue;
        }
        let value = match rest.split_once("p50 = ") {
            Some((_, v)) => format!("p50 {} ms", v.split([',', ' ']).next().unwrap_or("")),
            None => rest.split_whitespace().next().unwrap_or("").to_string(),
        };
        o.push(format!("{field} {value}"));
    }
    o.join(", ")
}

/// One rate compared.
#[derive(Debug, Clone, Serialize)]
pub struct RateRow {
    /// What is counted, e.g. `runs with a violation`, `intents with ≥ 2 rows`.
    pub statistic: String,
    /// Simulated: successes, trials, rate, 95 % interval.
    pub sim: (u64, u64, f64, (f64, f64)),
    /// Real: the same.
    pub real: (u64, u64, f64, (f64, f64)),
    /// Fisher's exact two-sided p-value.
    pub p_value: f64,
    /// The smallest difference these trials detect (power 0.8, alpha 0.05).
    pub detectable: f64,
    /// The verdict.
    pub verdict: Verdict,
}

/// One histogram compared (pooled bins).
#[derive(Debug, Clone, Serialize)]
pub struct HistRow {
    /// What is counted, e.g. `rows per intent`.
    pub statistic: String,
    /// Bin labels.
    pub bins: Vec<String>,
    /// Simulated counts per bin.
    pub sim: Vec<u64>,
    /// Real counts per bin.
    pub real: Vec<u64>,
    /// The permutation test's p-value of the chi-square statistic.
    pub p_value: f64,
    /// The verdict: disagree when p < alpha; agree when the rates of its bins agree;
    /// inconclusive otherwise.
    pub verdict: Verdict,
}

/// A validation: every statistic, and the overall verdict (disagree if any disagrees,
/// inconclusive if any is inconclusive, agree otherwise).
#[derive(Debug, Clone, Serialize)]
pub struct Validation {
    /// Rates.
    pub rates: Vec<RateRow>,
    /// Histograms.
    pub histograms: Vec<HistRow>,
    /// The tolerance (absolute difference in rate) a verdict of agree must be able to see.
    pub tolerance: f64,
    /// Overall.
    pub verdict: Verdict,
    /// Violations the real side cannot observe, not compared (`runs with …` left out).
    pub unobserved: Vec<String>,
    /// The real rounds' first half against their second ([`drift`]), when there were enough.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub real_drift: Option<Drift>,
}

/// Whether the real side held one rate through its run: its rounds with a violation in the
/// first half against the second, in the order they were played (Fisher's exact test). A
/// machine whose timing moves during the run (its load, its disk) is not one real rate to
/// agree with, so a validation that drifted cannot vouch for agreement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Drift {
    /// Rounds with a violation, rounds: the first half.
    pub first: (u64, u64),
    /// The same, the second half.
    pub second: (u64, u64),
    /// Fisher's exact test of the two halves.
    pub p_value: f64,
    /// p < the verdicts' alpha.
    pub drifted: bool,
}

/// The fewest real rounds whose halves are compared.
const DRIFT_MIN_ROUNDS: usize = 10;

/// The drift of real rounds, each given as whether it had a violation, in the order played
/// (None under [`DRIFT_MIN_ROUNDS`]).
pub fn drift(violated: &[bool]) -> Option<Drift> {
    if violated.len() < DRIFT_MIN_ROUNDS {
        return None;
    }
    let (a, b) = violated.split_at(violated.len() / 2);
    let count = |h: &[bool]| (h.iter().filter(|v| **v).count() as u64, h.len() as u64);
    let (first, second) = (count(a), count(b));
    let p_value =
        agree::fisher_exact([[first.0, first.1 - first.0], [second.0, second.1 - second.0]]);
    Some(Drift { first, second, p_value, drifted: p_value < agree::DEFAULT_ALPHA })
}

impl Validation {
    /// Take in the real side's drift: a drifted run's agreement is inconclusive.
    pub fn with_drift(mut self, d: Option<Drift>) -> Validation {
        if d.is_some_and(|d| d.drifted) && self.verdict == Verdict::Agree {
            self.verdict = Verdict::Inconclusive;
        }
        self.real_drift = d;
        self
    }
}

fn rate(statistic: &str, (ks, ns): (u64, u64), (kr, nr): (u64, u64), tol: f64) -> RateRow {
    let c = agree::two_proportion(ks, ns, kr, nr);
    RateRow {
        statistic: statistic.to_string(),
        sim: (ks, ns, c.a_rate, c.a_interval),
        real: (kr, nr, c.b_rate, c.b_interval),
        p_value: c.p_value,
        detectable: c.detectable_difference(),
        verdict: agree::verdict(&c, tol),
    }
}

/// The share of all answers that are `status`, compared run for run: the answers of one run
/// are not independent (a burst's copies share one fate), so each side counts as many trials
/// as it has runs, its successes scaled to match (the most conservative design effect). The
/// row shows the answers themselves.
fn share(statistic: &str, sim: &Cell, real: &Cell, status: &str, tol: f64) -> RateRow {
    let answers = |c: &Cell| c.statuses.values().sum::<u64>();
    let effective = |c: &Cell| {
        let (k, n) = (c.statuses.get(status).copied().unwrap_or(0), answers(c));
        let scaled = if n == 0 { 0.0 } else { ((k as f64) * (c.runs as f64) / (n as f64)).round() };
        (k, n, (scaled as u64).min(c.runs))
    };
    let ((ks, ns, es), (kr, nr, er)) = (effective(sim), effective(real));
    let mut row = rate(statistic, (es, sim.runs), (er, real.runs), tol);
    let rate_of = |k: u64, n: u64| if n == 0 { 0.0 } else { k as f64 / n as f64 };
    row.sim = (ks, ns, rate_of(ks, ns), row.sim.3);
    row.real = (kr, nr, rate_of(kr, nr), row.real.3);
    row
}

/// Whether the faults the rates stand on happened as often in both worlds: a target that
/// reaches a point less often than the model shows it in these rows.
fn fault_rows(sim: &Cell, real: &Cell, tolerance: f64) -> Vec<RateRow> {
    let faults: std::collections::BTreeSet<&String> =
        sim.fired.keys().chain(real.fired.keys()).collect();
    let k = |c: &Cell, name: &String| c.fired.get(name).map_or(0, |f| f.runs);
    faults
        .into_iter()
        .map(|name| {
            rate(
                &format!("runs in which {} fired", crate::text::printable(name)),
                (k(sim, name), sim.runs),
                (k(real, name), real.runs),
                tolerance,
            )
        })
        .collect()
}

/// Expand a `count → runs` histogram into one count per run (for pooling).
fn per_run(h: &BTreeMap<u64, u64>) -> Vec<u64> {
    h.iter().flat_map(|(k, n)| std::iter::repeat_n(*k, *n as usize)).collect()
}

fn at_least(h: &BTreeMap<u64, u64>, min: u64) -> (u64, u64) {
    (h.range(min..).map(|(_, n)| n).sum(), h.values().sum())
}

fn histogram(
    statistic: &str,
    s: &BTreeMap<u64, u64>,
    r: &BTreeMap<u64, u64>,
    rates: &[&RateRow],
) -> HistRow {
    let (a, b) = (agree::pool(&per_run(s), &COUNT_BINS), agree::pool(&per_run(r), &COUNT_BINS));
    let t = agree::histogram_test(&a, &b);
    let verdict = if t.p_value < agree::DEFAULT_ALPHA {
        Verdict::Disagree
    } else if rates.iter().all(|x| x.verdict == Verdict::Agree) {
        Verdict::Agree
    } else {
        Verdict::Inconclusive
    };
    HistRow {
        statistic: statistic.to_string(),
        bins: COUNT_BINS.iter().map(|b| b.label()).collect(),
        sim: a,
        real: b,
        p_value: t.p_value,
        verdict,
    }
}

/// What the clients got: the runs whose expectations failed, and the share of each answer.
fn outcome_rows(sim: &Cell, real: &Cell, tolerance: f64) -> Vec<RateRow> {
    let mut rows = vec![rate(
        "runs whose expectations failed",
        (sim.failed_seeds, sim.runs),
        (real.failed_seeds, real.runs),
        tolerance,
    )];
    let statuses: std::collections::BTreeSet<&String> =
        sim.statuses.keys().chain(real.statuses.keys()).collect();
    for status in statuses {
        rows.push(share(&format!("answers {status} (share)"), sim, real, status, tolerance));
    }
    rows
}

/// Compare a simulated cell with a real one.
/// Violations read from the key records: what a target that keeps its keys outside the
/// database (no `keys` query: a Redis, a process's memory) cannot show.
pub const FROM_KEY_RECORDS: &[&str] = &["stuck-key"];

/// The violations either side saw, less the ones the real side cannot observe.
fn violation_names<'c>(
    sim: &'c Cell,
    real: &'c Cell,
    unobserved: &[&str],
) -> std::collections::BTreeSet<&'c String> {
    let seen = sim.violations.keys().chain(real.violations.keys());
    seen.filter(|n| !unobserved.contains(&n.as_str())).collect()
}

/// The simulated cell beside the real one, statistic by statistic. `unobserved`: violations
/// the real side cannot observe ([`FROM_KEY_RECORDS`] for a target without a keys query): not
/// compared, and listed in [`Validation::unobserved`].
pub fn compare(sim: &Cell, real: &Cell, tolerance: f64, unobserved: &[&str]) -> Validation {
    let mut rates = vec![rate(
        "runs with a violation",
        (sim.violating_seeds, sim.runs),
        (real.violating_seeds, real.runs),
        tolerance,
    )];
    for name in violation_names(sim, real, unobserved) {
        let k = |c: &Cell| c.violations.get(name).map_or(0, |v| v.seeds);
        rates.push(rate(
            &format!("runs with {name}"),
            (k(sim), sim.runs),
            (k(real), real.runs),
            tolerance,
        ));
    }
    rates.extend(outcome_rows(sim, real, tolerance));
    rates.extend(fault_rows(sim, real, tolerance));
    let mut shape = Vec::new();
    for min in [2, 10] {
        shape.push(rate(
            &format!("intents with ≥ {min} rows"),
            at_least(&sim.rows_per_intent, min),
            at_least(&real.rows_per_intent, min),
            tolerance,
        ));
    }
    let mut histograms = vec![histogram(
        "rows per intent",
        &sim.rows_per_intent,
        &real.rows_per_intent,
        &shape.iter().collect::<Vec<_>>(),
    )];
    rates.extend(shape);
    let any_effects = |c: &Cell| c.effects_per_intent.keys().any(|k| *k > 0);
    if any_effects(sim) || any_effects(real) {
        let mut e = Vec::new();
        for min in [1, 2] {
            e.push(rate(
                &format!("intents with ≥ {min} effects"),
                at_least(&sim.effects_per_intent, min),
                at_least(&real.effects_per_intent, min),
                tolerance,
            ));
        }
        histograms.push(histogram(
            "effects per intent",
            &sim.effects_per_intent,
            &real.effects_per_intent,
            &e.iter().collect::<Vec<_>>(),
        ));
        rates.extend(e);
    }
    let all = rates.iter().map(|r| r.verdict).chain(histograms.iter().map(|h| h.verdict));
    let verdict = all.fold(Verdict::Agree, |acc, v| match (acc, v) {
        (Verdict::Disagree, _) | (_, Verdict::Disagree) => Verdict::Disagree,
        (Verdict::Inconclusive, _) | (_, Verdict::Inconclusive) => Verdict::Inconclusive,
        _ => Verdict::Agree,
    });
    let unobserved = unobserved
        .iter()
        .filter(|n| sim.violations.contains_key(**n) || real.violations.contains_key(**n))
        .map(|n| n.to_string())
        .collect();
    Validation { rates, histograms, tolerance, verdict, unobserved, real_drift: None }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// The validation as a text table.
pub fn text(v: &Validation) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<32} {:>22} {:>22} {:>9} {:>7}  verdict",
        "statistic", "simulated (95% CI)", "real (95% CI)", "p", "can see"
    );
    for r in &v.rates {
        let side = |(k, n, p, (lo, hi)): (u64, u64, f64, (f64, f64))| {
            format!("{k}/{n} {} [{}–{}]", pct(p), pct(lo), pct(hi))
        };
        let _ = writeln!(
            o,
            "{:<32} {:>22} {:>22} {:>9.3} {:>7}  {}",
            r.statistic,
            side(r.sim),
            side(r.real),
            r.p_value,
            format!("±{}", pct(r.detectable)),
            r.verdict
        );
    }
    if !v.unobserved.is_empty() {
        let _ = writeln!(
            o,
            "not compared (the target cannot show them: no keys query): runs with {}",
            v.unobserved.join(", ")
        );
    }
    for h in &v.histograms {
        let _ = writeln!(o, "\n{} (bins {})", h.statistic, h.bins.join(" | "));
        let row = |c: &[u64]| c.iter().map(|x| format!("{x:>5}")).collect::<Vec<_>>().join(" ");
        let _ = writeln!(o, "  simulated {}", row(&h.sim));
        let _ = writeln!(o, "  real      {}", row(&h.real));
        let _ = writeln!(o, "  permutation test p = {:.4}: {}", h.p_value, h.verdict);
    }
    if let Some(d) = &v.real_drift {
        let _ = writeln!(
            o,
            "\nreal rounds with a violation, first half against second: {}/{} against {}/{} (Fisher p = {:.4}): {}",
            d.first.0,
            d.first.1,
            d.second.0,
            d.second.1,
            d.p_value,
            if d.drifted {
                "DRIFTED: the real side's rate moved during the run; it cannot vouch for agreement"
            } else {
                "steady"
            }
        );
    }
    let _ = writeln!(
        o,
        "\nverdict: {} (disagree: p < {}; agree: p ≥ {} and the rounds can see a difference of {} or less; otherwise inconclusive)",
        v.verdict.label().to_uppercase(),
        agree::DEFAULT_ALPHA,
        agree::DEFAULT_ALPHA,
        pct(v.tolerance)
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cell of `runs` runs, each with one intent of one row, and the given answers.
    fn cell(runs: u64, statuses: &[(&str, u64)], failed: u64) -> Cell {
        let json = serde_json::json!({
            "model": "m", "sim": "s", "seeds": format!("0..{runs}"), "runs": runs,
            "passed": failed == 0, "failed_seeds": failed, "first_failed_seed": null,
            "first_failure": [], "rows": {"1": runs}, "effects": {"0": runs},
            "statuses": statuses.iter().map(|(s, n)| (s.to_string(), *n)).collect::<BTreeMap<_, _>>(),
            "bounded_runs": 0, "violations": {}, "rows_per_intent": {"1": runs},
            "effects_per_intent": {"0": runs}, "violating_seeds": 0, "ambiguous_intents": 0,
            "nondeterministic_seeds": [], "applicable": true, "reason": null,
            "coverage": null
        });
        serde_json::from_value(json).unwrap()
    }

    fn row<'a>(v: &'a Validation, statistic: &str) -> &'a RateRow {
        v.rates.iter().find(|r| r.statistic == statistic).unwrap()
    }

    #[test]
    fn answers_and_failed_expectations_are_compared_not_only_violations() {
        // Same rows, no violation on either side; the real server answers 409 to a fifth of
        // the copies and fails every round's expectations.
        let sim = cell(200, &[("201", 4000)], 0);
        let real = cell(200, &[("201", 3200), ("409", 800)], 200);
        let v = compare(&sim, &real, 0.15, &[]);
        assert_eq!(row(&v, "runs with a violation").verdict, Verdict::Agree);
        let failed = row(&v, "runs whose expectations failed");
        assert_eq!((failed.real.0, failed.verdict), (200, Verdict::Disagree));
        let conflict = row(&v, "answers 409 (share)");
        // Shown as answers, judged run for run (200 trials a side, not 4000).
        assert_eq!(
            (conflict.sim.0, conflict.sim.1, conflict.real.0, conflict.real.1),
            (0, 4000, 800, 4000)
        );
        assert!((conflict.real.2 - 0.2).abs() < 1e-9);
        assert_eq!(conflict.verdict, Verdict::Disagree);
        assert_eq!(v.verdict, Verdict::Disagree);
        // The same answers on both sides agree.
        let v = compare(&real, &cell(200, &[("201", 3180), ("409", 820)], 200), 0.15, &[]);
        assert_eq!(row(&v, "answers 409 (share)").verdict, Verdict::Agree);
    }

    /// The real rounds' halves are compared in the order they were played; a run whose rate
    /// moved cannot be called in agreement, and says why.
    #[test]
    fn a_real_side_that_drifted_cannot_vouch_for_agreement() {
        let steady: Vec<bool> = (0..60).map(|i| i % 3 == 0).collect();
        let d = drift(&steady).unwrap();
        assert_eq!((d.first, d.second, d.drifted), ((10, 30), (10, 30), false));
        assert!((d.p_value - 1.0).abs() < 1e-9);
        let moved: Vec<bool> = (0..60).map(|i| i < 18).collect();
        let d = drift(&moved).unwrap();
        assert_eq!((d.first, d.second, d.drifted), ((18, 30), (0, 30), true));
        assert!(d.p_value < 1e-5, "{}", d.p_value);
        assert_eq!(drift(&moved[..9]), None);
        let v = compare(&cell(60, &[("201", 60)], 0), &cell(60, &[("201", 60)], 0), 0.6, &[]);
        assert_eq!(v.verdict, Verdict::Agree);
        let held = v.clone().with_drift(drift(&steady));
        assert_eq!(held.verdict, Verdict::Agree);
        assert!(text(&held).contains("10/30 against 10/30 (Fisher p = 1.0000): steady"));
        let drifted = v.with_drift(drift(&moved));
        assert_eq!(drifted.verdict, Verdict::Inconclusive);
        assert!(text(&drifted).contains("18/30 against 0/30"), "{}", text(&drifted));
        assert!(text(&drifted).contains("DRIFTED"));
    }

    #[test]
    fn the_simulated_side_is_played_on_loopback_as_the_real_rounds_are() {
        use crate::scenario::Start;
        // A sim of a data centre's network: its latency (and its provider's, which follows it)
        // is replaced by loopback's, and the header says which it was.
        let dc = crate::catalog::sim("double-submit").unwrap();
        assert_eq!(dc.world.latency_us, (50, 250));
        let (played, how) = as_played(dc.clone(), Start::Warm);
        assert_eq!(played.world.latency_us, LOOPBACK_LATENCY_US);
        assert_eq!(played.world.effect_latency_us, LOOPBACK_LATENCY_US);
        assert_eq!(played.world.start, Start::Warm);
        assert_eq!(how.replaced_latency_us, Some((50, 250)));
        assert_eq!(how.replaced_effect_latency_us, Some((50, 250)));
        let text = how.text().unwrap();
        assert!(text.contains("0.03–0.055 ms (the sim's 0.05–0.25 ms)"), "{text}");
        assert_eq!(how.json()["sim_latency_ms"], serde_json::json!([0.05, 0.25]));
        // A sim already on loopback, started as it says, is simulated as it is.
        let lb = crate::catalog::sim("11-twenty-concurrent-one-process").unwrap();
        let (same, how) = as_played(lb.clone(), lb.world.start);
        assert!(std::sync::Arc::ptr_eq(&same, &lb));
        assert_eq!((how.replaced_latency_us, how.text()), (None, None));
        assert_eq!(how.json()["sim_latency_ms"], serde_json::Value::Null);
    }

    #[test]
    fn what_the_target_cannot_observe_is_not_compared_and_is_said() {
        // The simulated design leaves a key in progress on every run; a target whose keys live
        // in Redis shows none. Compared, that would be a disagreement about what nobody saw.
        let mut sim = cell(40, &[("500", 40)], 0);
        let stuck = serde_json::json!({"seeds": 40, "occurrences": 40, "first_seed": 0,
                                       "permitted": false});
        sim.violations.insert("stuck-key".into(), serde_json::from_value(stuck).unwrap());
        let real = cell(40, &[("500", 40)], 0);
        let seen = compare(&sim, &real, 0.15, &[]);
        assert_eq!(row(&seen, "runs with stuck-key").verdict, Verdict::Disagree);
        let blind = compare(&sim, &real, 0.15, FROM_KEY_RECORDS);
        assert!(blind.rates.iter().all(|r| r.statistic != "runs with stuck-key"));
        assert_eq!(blind.unobserved, vec!["stuck-key".to_string()]);
        assert!(text(&blind).contains("not compared (the target cannot show them"));
    }
}
