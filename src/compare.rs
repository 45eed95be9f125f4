//! Two designs compared sim by sim: is the difference in their rates significant at the seeds
//! run, and if not, about how many seeds would settle it (`idemsim compare A B`).
//!
//! Two rates are compared per sim: the share of seeds that were **unsafe** (a violation that is
//! not policy-permitted) and the share whose **expectations failed**. Each is a binomial count
//! over the sim's seeds, so a difference is tested with Fisher's exact test
//! ([`crate::agree::two_proportion`]) at [`ALPHA`] (0.01, as `validate`: with a dozen sims per
//! comparison, 0.05 would call one difference in twenty by chance). When the test does not
//! call it, the seeds each design would need to detect a difference of the observed size with
//! power 0.8 at that level are (normal approximation, Fleiss, Levin & Paik, 3rd ed., §4.2;
//! p̄ = (p₁ + p₂)/2, d = |p₁ − p₂|):
//!
//! ```text
//! n = (z_{α/2} · sqrt(2 p̄ (1 − p̄)) + z_β · sqrt(p₁(1 − p₁) + p₂(1 − p₂)))² / d²
//! ```
//!
//! with z_{α/2} = 2.575829 (α = 0.01) and z_β = 0.841621 (power 0.8).

use serde::Serialize;

use crate::agree;
use crate::sweep::Cell;

/// Significance level of a called difference.
pub const ALPHA: f64 = agree::DEFAULT_ALPHA;
/// z for a two-sided test at [`ALPHA`] = 0.01: Φ⁻¹(0.995).
pub const Z_99: f64 = 2.575_829_303_548_900_4;

/// One rate of both designs on one sim, and what the seeds say about their difference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateDiff {
    /// `unsafe` or `spec-failed`.
    pub measure: &'static str,
    /// Design A: seeds counted, seeds run, 95 % Wilson interval.
    pub a: (u64, u64, (f64, f64)),
    /// Design B: the same.
    pub b: (u64, u64, (f64, f64)),
    /// Design A's share as an object: seeds, runs, `rate` and `ci95`.
    pub a_share: Share,
    /// Design B's share as an object.
    pub b_share: Share,
    /// Fisher's exact two-sided p (1 when the rates are equal).
    pub p_value: f64,
    /// `same`, `a-worse`, `b-worse` or `not-significant`.
    pub verdict: &'static str,
    /// When not significant: seeds per design that would detect a difference of the observed
    /// size with power 0.8 at [`ALPHA`] (None when the rates are equal or the answer is
    /// already in).
    pub seeds_to_settle: Option<u64>,
}

/// One design's share of seeds: counted, run, the rate (0 to 1) and its Wilson 95 %
/// interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Share {
    /// Seeds counted.
    pub seeds: u64,
    /// Seeds run.
    pub runs: u64,
    /// `seeds / runs` (0 when nothing ran).
    pub rate: f64,
    /// The 95 % Wilson interval of the rate, `[lo, hi]`.
    pub ci95: (f64, f64),
}

impl Share {
    fn new(seeds: u64, runs: u64, ci95: (f64, f64)) -> Share {
        let rate = if runs == 0 { 0.0 } else { seeds.min(runs) as f64 / runs as f64 };
        Share { seeds, runs, rate, ci95 }
    }
}

/// The comparison of two designs' cells on one sim (None fields when a cell is n/a).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimDiff {
    /// The sim's name.
    pub sim: String,
    /// Why the sim cannot compare the two (a design it does not apply to), if so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_applicable: Option<String>,
    /// The two rates compared (empty when n/a).
    pub rates: Vec<RateDiff>,
}

/// Compare cell `a` with cell `b` (the same sim under designs A and B).
pub fn compare_cells(a: &Cell, b: &Cell) -> SimDiff {
    let na = match (a.applicable, b.applicable) {
        (true, true) => None,
        (false, true) => Some(format!("n/a for {}", a.model)),
        (true, false) => Some(format!("n/a for {}", b.model)),
        (false, false) => Some("n/a for both".to_string()),
    };
    let rates = if na.is_some() {
        vec![]
    } else {
        vec![
            rate("unsafe", (a.violating_seeds, a.runs), (b.violating_seeds, b.runs)),
            rate("spec-failed", (a.failed_seeds, a.runs), (b.failed_seeds, b.runs)),
        ]
    };
    SimDiff { sim: a.sim.clone(), not_applicable: na, rates }
}

fn rate(measure: &'static str, (ka, na): (u64, u64), (kb, nb): (u64, u64)) -> RateDiff {
    let c = agree::two_proportion(ka.min(na), na, kb.min(nb), nb);
    let equal = u128::from(ka) * u128::from(nb) == u128::from(kb) * u128::from(na);
    let verdict = if equal {
        "same"
    } else if c.p_value < ALPHA {
        if c.difference > 0.0 { "a-worse" } else { "b-worse" }
    } else {
        "not-significant"
    };
    let seeds_to_settle =
        (verdict == "not-significant").then(|| seeds_to_detect(c.a_rate, c.b_rate)).flatten();
    RateDiff {
        measure,
        a: (ka, na, c.a_interval),
        b: (kb, nb, c.b_interval),
        a_share: Share::new(ka, na, c.a_interval),
        b_share: Share::new(kb, nb, c.b_interval),
        p_value: if equal { 1.0 } else { c.p_value },
        verdict,
        seeds_to_settle,
    }
}

/// Seeds per design to detect rates `p1` vs `p2` with power 0.8 at [`ALPHA`] (module
/// formula); None when they are equal.
pub fn seeds_to_detect(p1: f64, p2: f64) -> Option<u64> {
    let d = (p1 - p2).abs();
    if d <= 0.0 || !d.is_finite() {
        return None;
    }
    let pbar = (p1 + p2) / 2.0;
    let num = Z_99 * (2.0 * pbar * (1.0 - pbar)).sqrt()
        + agree::Z_POWER_80 * (p1 * (1.0 - p1) + p2 * (1.0 - p2)).sqrt();
    Some(((num * num) / (d * d)).ceil() as u64)
}

/// The comparison as a table: one line per sim and rate.
pub fn text(a: &str, b: &str, diffs: &[SimDiff]) -> String {
    use std::fmt::Write;
    let pct = |s: Share| {
        let (lo, hi) = s.ci95;
        format!(
            "{}/{} {:.1}% [{:.1}–{:.1}]",
            s.seeds,
            s.runs,
            100.0 * s.rate,
            100.0 * lo,
            100.0 * hi
        )
    };
    let (a, b) = (crate::text::printable(a), crate::text::printable(b));
    let width = diffs.iter().map(|d| d.sim.chars().count()).max().unwrap_or(3).max(3) + 2;
    let mut out = format!(
        "{a} (A) vs {b} (B): seeds with a violation (unsafe) and with failed expectations \
         (spec-failed): seeds/runs, rate [95 % Wilson interval]; Fisher's exact test at p < {ALPHA}\n\n"
    );
    let _ = writeln!(out, "{:<width$}{:<13}{:<28}{:<28}verdict", "sim", "rate", "A", "B");
    for d in diffs {
        let sim = crate::text::printable(&d.sim);
        if let Some(na) = &d.not_applicable {
            let _ = writeln!(out, "{sim:<width$}{na}");
            continue;
        }
        for r in &d.rates {
            let verdict = match r.verdict {
                "same" => "same".to_string(),
                "a-worse" => format!("{a} worse (p = {:.1e})", r.p_value),
                "b-worse" => format!("{b} worse (p = {:.1e})", r.p_value),
                _ => format!(
                    "not significant (p = {:.2}); ~{} seeds each would settle it",
                    r.p_value,
                    r.seeds_to_settle.map_or("?".into(), |n| n.to_string())
                ),
            };
            let _ = writeln!(
                out,
                "{sim:<width$}{:<13}{:<28}{:<28}{verdict}",
                r.measure,
                pct(r.a_share),
                pct(r.b_share)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_to_detect_matches_the_textbook_formula() {
        // Fleiss §4.2 at alpha 0.01, power 0.8: 0.10 vs 0.20 needs 296.4 → 297 per group.
        assert_eq!(seeds_to_detect(0.10, 0.20), Some(297));
        assert_eq!(seeds_to_detect(0.3, 0.3), None);
        // A larger difference needs fewer seeds.
        assert_eq!(seeds_to_detect(0.1, 0.5), Some(30));
    }

    #[test]
    fn verdicts_follow_the_counts() {
        let r = rate("unsafe", (200, 200), (0, 200));
        assert_eq!(r.verdict, "a-worse");
        assert!(r.seeds_to_settle.is_none());
        assert_eq!(rate("unsafe", (0, 200), (9, 200)).verdict, "b-worse");
        let ns = rate("unsafe", (3, 50), (5, 50));
        assert_eq!(ns.verdict, "not-significant");
        assert!(ns.seeds_to_settle.unwrap() > 50);
        assert_eq!(rate("unsafe", (10, 100), (20, 200)).verdict, "same");
    }
}
