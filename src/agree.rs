//! Agreement between two samples of the same scenario (say N simulated seeds and N real
//! rounds against a real server): for a rate, or for a histogram of per-run counts, whether
//! the two sides agree, disagree, or there are too few runs to tell. Pure functions of
//! counts, std only, deterministic (the permutation test draws from a fixed-seed
//! splitmix64, never from the OS). Imports nothing from the crate.
//!
//! - Rates: [`wilson`] intervals, [`two_proportion`] (Fisher's exact test, two-sided),
//!   [`detectable_difference`] (power) and the [`verdict`] rule.
//! - Histograms: [`Bin`]s, [`pool`] (per-run counts → per-bin number of runs) and
//!   [`histogram_test`] (permutation test of the chi-square statistic).

use std::fmt;

/// z for a two-sided 95 % interval or a two-sided test at alpha 0.05: the standard normal
/// 0.975 quantile, 1.959964 (Φ⁻¹(0.975) = 1.959963984540054).
pub const Z_95: f64 = 1.959_963_984_540_054;

/// z for power 0.8: the standard normal 0.8 quantile (Φ⁻¹(0.8) = 0.8416212335729143).
pub const Z_POWER_80: f64 = 0.841_621_233_572_914_3;

/// Default significance level of [`verdict`]: a difference is called only when p < 0.01,
/// stricter than the usual 0.05 to limit false alarms on noisy real runs.
pub const DEFAULT_ALPHA: f64 = 0.01;

/// Relative tolerance with which Fisher's test counts a table as "as probable as the
/// observed one" (the same 1 + 1e-7 as R's `fisher.test`), so that tables of equal
/// probability are not split by rounding.
pub const FISHER_REL_TOL: f64 = 1e-7;

/// Number of permutations [`histogram_test`] draws. The p-value's Monte Carlo standard
/// error is at most 0.005 (sqrt(p(1-p)/10 000)), and about 0.001 near p = 0.01.
pub const PERMUTATIONS: u32 = 10_000;

/// Seed of the splitmix64 generator behind [`histogram_test`]: a constant, so that the same
/// histograms always give the same p-value.
pub const PERMUTATION_SEED: u64 = 0x1de5_1a22_5eed_0022;

/// Wilson score interval for a binomial proportion `successes / n` (Wilson 1927; Newcombe
/// 1998, method 3; Agresti & Coull 1998). With p̂ = successes / n:
///
/// ```text
/// centre = (p̂ + z²/(2n)) / (1 + z²/n)
/// half   = z · sqrt(p̂(1 − p̂)/n + z²/(4n²)) / (1 + z²/n)
/// (lo, hi) = (centre − half, centre + half)
/// ```
///
/// Use `z` = [`Z_95`] (1.959964) for 95 %. The bounds are exactly 0 when successes = 0 and
/// exactly 1 when successes = n; n = 0 says nothing and gives (0, 1).
///
/// # Panics
/// When `successes > n`.
pub fn wilson(successes: u64, n: u64, z: f64) -> (f64, f64) {
    assert!(successes <= n, "wilson: {successes} successes out of {n}");
    if n == 0 {
        return (0.0, 1.0);
    }
    let n_f = n as f64;
    let p = successes as f64 / n_f;
    let z2 = z * z;
    let denom = 1.0 + z2 / n_f;
    let centre = (p + z2 / (2.0 * n_f)) / denom;
    let half = z * (p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt() / denom;
    let lo = if successes == 0 { 0.0 } else { (centre - half).clamp(0.0, 1.0) };
    let hi = if successes == n { 1.0 } else { (centre + half).clamp(0.0, 1.0) };
    (lo, hi)
}

/// Two samples' rates compared: what [`two_proportion`] returns and [`verdict`] reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparison {
    /// Successes in sample a.
    pub a_successes: u64,
    /// Size of sample a (runs).
    pub a_n: u64,
    /// Successes in sample b.
    pub b_successes: u64,
    /// Size of sample b (runs).
    pub b_n: u64,
    /// a's rate, a_successes / a_n (0 when a_n = 0).
    pub a_rate: f64,
    /// b's rate, b_successes / b_n (0 when b_n = 0).
    pub b_rate: f64,
    /// a's 95 % Wilson interval ([`wilson`] with [`Z_95`]).
    pub a_interval: (f64, f64),
    /// b's 95 % Wilson interval ([`wilson`] with [`Z_95`]).
    pub b_interval: (f64, f64),
    /// a_rate − b_rate.
    pub difference: f64,
    /// Two-sided p-value of Fisher's exact test ([`fisher_exact`]) of equal rates.
    pub p_value: f64,
}

impl Comparison {
    /// Both samples pooled: (a_successes + b_successes) / (a_n + b_n), 0 when both are empty.
    /// The base rate [`verdict`] hands to [`detectable_difference`].
    pub fn pooled_rate(&self) -> f64 {
        rate(self.a_successes + self.b_successes, self.a_n + self.b_n)
    }

    /// [`detectable_difference`] for these sample sizes at the pooled rate.
    pub fn detectable_difference(&self) -> f64 {
        detectable_difference(self.a_n, self.b_n, self.pooled_rate())
    }
}

fn rate(successes: u64, n: u64) -> f64 {
    if n == 0 { 0.0 } else { successes as f64 / n as f64 }
}

/// Compares a_succ / a_n with b_succ / b_n: both rates, their 95 % Wilson intervals, the
/// difference a − b, and the two-sided p-value of Fisher's exact test on the 2×2 table
/// `[[a_succ, a_n − a_succ], [b_succ, b_n − b_succ]]` (exact, so small counts are fine).
///
/// # Panics
/// When a_succ > a_n or b_succ > b_n.
pub fn two_proportion(a_succ: u64, a_n: u64, b_succ: u64, b_n: u64) -> Comparison {
    assert!(a_succ <= a_n, "two_proportion: {a_succ} successes out of {a_n}");
    assert!(b_succ <= b_n, "two_proportion: {b_succ} successes out of {b_n}");
    let a_rate = rate(a_succ, a_n);
    let b_rate = rate(b_succ, b_n);
    Comparison {
        a_successes: a_succ,
        a_n,
        b_successes: b_succ,
        b_n,
        a_rate,
        b_rate,
        a_interval: wilson(a_succ, a_n, Z_95),
        b_interval: wilson(b_succ, b_n, Z_95),
        difference: a_rate - b_rate,
        p_value: fisher_exact([[a_succ, a_n - a_succ], [b_succ, b_n - b_succ]]),
    }
}

/// Fisher's exact test, two-sided, of a 2×2 table `[[a, b], [c, d]]` (Fisher 1922; Agresti,
/// *Categorical Data Analysis*, 3rd ed., §3.5). With the margins fixed (rows r1 = a + b,
/// r2 = c + d, first column c1 = a + c, N = r1 + r2), the top-left cell k follows the
/// hypergeometric law
///
/// ```text
/// P(k) = C(r1, k) · C(r2, c1 − k) / C(N, c1),   max(0, c1 − r2) ≤ k ≤ min(r1, c1)
/// ```
///
/// and the p-value is the sum of P(k) over every k with P(k) ≤ P(a) · (1 + 1e-7)
/// ([`FISHER_REL_TOL`], as R's `fisher.test`). Each P(k) is computed in log space from
/// ln-factorials ([`ln_factorial`]), so large tables neither overflow nor lose precision.
/// Time is linear in the number of possible k. A table with an empty row or column has a
/// single possible k and p = 1.
pub fn fisher_exact(table: [[u64; 2]; 2]) -> f64 {
    let [[a, b], [c, d]] = table;
    let (r1, r2, c1) = (a + b, c + d, a + c);
    let n = r1 + r2;
    let base = ln_choose(n, c1);
    let ln_p = |k: u64| ln_choose(r1, k) + ln_choose(r2, c1 - k) - base;
    let cutoff = ln_p(a) + FISHER_REL_TOL.ln_1p();
    let p: f64 = (c1.saturating_sub(r2)..=r1.min(c1))
        .map(ln_p)
        .filter(|&lp| lp <= cutoff)
        .map(f64::exp)
        .sum();
    p.min(1.0)
}

fn ln_choose(n: u64, k: u64) -> f64 {
    ln_factorial(n) - ln_factorial(k) - ln_factorial(n - k)
}

/// ln(n!) = ln Γ(n + 1). Summed exactly (Σ ln i) for n < 32; above, Stirling's series
/// (Abramowitz & Stegun 6.1.41)
///
/// ```text
/// ln n! = n ln n − n + ½ ln(2πn) + 1/(12n) − 1/(360n³) + 1/(1260n⁵) − 1/(1680n⁷)
/// ```
///
/// whose truncation error, below 1/(1188 n⁹), is under 1e-16 from n = 32 on.
pub fn ln_factorial(n: u64) -> f64 {
    if n < 32 {
        return (2..=n).map(|i| (i as f64).ln()).sum();
    }
    let x = n as f64;
    let inv = 1.0 / x;
    let inv2 = inv * inv;
    let series =
        inv * (1.0 / 12.0 - inv2 * (1.0 / 360.0 - inv2 * (1.0 / 1260.0 - inv2 * (1.0 / 1680.0))));
    x * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI * x).ln() + series
}

/// The smallest absolute difference in rates that a two-sided test at alpha 0.05 detects
/// with power 0.8, for samples of a_n and b_n runs at base rate `p` (normal approximation;
/// Fleiss, Levin & Paik, *Statistical Methods for Rates and Proportions*, 3rd ed., §4.2):
///
/// ```text
/// d = (z_{α/2} + z_β) · sqrt(p(1 − p) · (1/a_n + 1/b_n)),   z_{α/2} = 1.959964, z_β = 0.841621
/// ```
///
/// `p` is clamped to [0.05, 0.95] so that d is never 0 (a base rate of 0 or 1 observed in a
/// small sample says little); NaN counts as 0.5, the worst case. Infinite when either
/// sample is empty.
pub fn detectable_difference(a_n: u64, b_n: u64, p: f64) -> f64 {
    if a_n == 0 || b_n == 0 {
        return f64::INFINITY;
    }
    let p = if p.is_nan() { 0.5 } else { p.clamp(0.05, 0.95) };
    (Z_95 + Z_POWER_80) * (p * (1.0 - p) * (1.0 / a_n as f64 + 1.0 / b_n as f64)).sqrt()
}

/// What a comparison says about two samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// No significant difference, and enough runs that a difference larger than the
    /// tolerance would very likely have shown.
    Agree,
    /// A significant difference (p < alpha).
    Disagree,
    /// No significant difference, but too few runs to rule out one larger than the tolerance.
    Inconclusive,
}

impl Verdict {
    /// `agree`, `disagree` or `inconclusive`.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Agree => "agree",
            Verdict::Disagree => "disagree",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// [`verdict_with_alpha`] at [`DEFAULT_ALPHA`] (0.01).
pub fn verdict(cmp: &Comparison, tolerance: f64) -> Verdict {
    verdict_with_alpha(cmp, tolerance, DEFAULT_ALPHA)
}

/// The rule, `tolerance` an absolute difference in rates (0.15 = 15 percentage points):
///
/// 1. **Disagree** when `cmp.p_value < alpha`;
/// 2. else **Agree** when [`Comparison::detectable_difference`] (the difference a test at
///    alpha 0.05 finds with power 0.8, at the pooled rate) is at most `tolerance`: had the
///    true rates differed by more than the tolerance, the test would very likely have said so;
/// 3. else **Inconclusive**: too few runs to tell.
///
/// An empty sample is always inconclusive (p = 1, infinite detectable difference). The
/// power is stated at alpha 0.05 while rule 1 uses alpha (0.01 by default): the detectable
/// difference is a yardstick for "enough runs", not the exact power of rule 1 (about 0.6 at
/// alpha 0.01 for the same difference).
pub fn verdict_with_alpha(cmp: &Comparison, tolerance: f64, alpha: f64) -> Verdict {
    if cmp.p_value < alpha {
        Verdict::Disagree
    } else if cmp.detectable_difference() <= tolerance {
        Verdict::Agree
    } else {
        Verdict::Inconclusive
    }
}

/// A histogram bin of per-run counts: `lo..=hi`, or `lo` and above when `hi` is None.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Bin {
    /// Smallest count in the bin.
    pub lo: u64,
    /// Largest count in the bin (inclusive); None: no upper bound.
    pub hi: Option<u64>,
}

impl Bin {
    /// The bin `lo..=hi` (`hi` None: `lo` and above).
    pub const fn new(lo: u64, hi: Option<u64>) -> Bin {
        Bin { lo, hi }
    }

    /// Whether `count` falls in this bin.
    pub fn contains(&self, count: u64) -> bool {
        count >= self.lo && self.hi.is_none_or(|hi| count <= hi)
    }

    /// `0`, `2–4` (en dash), `10+`.
    pub fn label(&self) -> String {
        match self.hi {
            None => format!("{}+", self.lo),
            Some(hi) if hi == self.lo => self.lo.to_string(),
            Some(hi) => format!("{}–{}", self.lo, hi),
        }
    }
}

/// The usual bins for small per-run counts (retries, duplicates, effects): 0, 1, 2–4, 5–9,
/// 10+.
pub const COUNT_BINS: [Bin; 5] = [
    Bin::new(0, Some(0)),
    Bin::new(1, Some(1)),
    Bin::new(2, Some(4)),
    Bin::new(5, Some(9)),
    Bin::new(10, None),
];

/// Per-run counts → number of runs in each bin (same order as `bins`). A run goes to the
/// first bin that contains its count; a run that no bin contains is not counted (so the
/// result sums to less than `counts_per_run.len()` when the bins leave gaps).
pub fn pool(counts_per_run: &[u64], bins: &[Bin]) -> Vec<u64> {
    let mut out = vec![0; bins.len()];
    for &count in counts_per_run {
        if let Some(i) = bins.iter().position(|bin| bin.contains(count)) {
            out[i] += 1;
        }
    }
    out
}

/// Two binned histograms compared: what [`histogram_test`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct HistComparison {
    /// Sample a's runs per bin, as given.
    pub a: Vec<u64>,
    /// Sample b's runs per bin, as given.
    pub b: Vec<u64>,
    /// Runs in a.
    pub a_total: u64,
    /// Runs in b.
    pub b_total: u64,
    /// Bins where a or b has a run (the columns of the table tested).
    pub bins_used: usize,
    /// Pearson's chi-square statistic of the 2 × bins_used table (0 when nothing to compare).
    pub statistic: f64,
    /// Degrees of freedom, bins_used − 1 (0 when nothing to compare). For reference only:
    /// the p-value comes from permutations, not from the chi-square law.
    pub df: usize,
    /// Permutation p-value: (1 + #{permuted statistic ≥ observed}) / (1 + permutations);
    /// 1 when nothing to compare.
    pub p_value: f64,
    /// Permutations drawn (0 when nothing to compare).
    pub permutations: u32,
}

/// [`histogram_test_with`] with [`PERMUTATIONS`] (10 000) and [`PERMUTATION_SEED`].
pub fn histogram_test(a: &[u64], b: &[u64]) -> HistComparison {
    histogram_test_with(a, b, PERMUTATIONS, PERMUTATION_SEED)
}

/// Whether two binned histograms of runs (`a[i]`, `b[i]`: runs in bin i, e.g. from [`pool`])
/// come from the same distribution: a permutation test of Pearson's chi-square statistic
/// (Good, *Permutation, Parametric and Bootstrap Tests of Hypotheses*, 3rd ed., §6; Hope
/// 1968). The table is 2 × k: rows a and b, columns the bins where a or b has a run (bins
/// where both are zero are dropped), and
///
/// ```text
/// X² = Σ_cells (O − E)² / E,   E = row total · column total / N
/// ```
///
/// Under the null hypothesis the runs are exchangeable, so each permutation deals the N
/// runs at random into a group of a_total and one of b_total (a partial Fisher–Yates
/// shuffle driven by splitmix64 seeded with `seed`: deterministic, no OS randomness) and
/// recomputes X². A permuted X² counts as "at least as extreme" when
/// X²_perm ≥ X²_obs · (1 − 64 ε), the tolerance R's `chisq.test` uses for ties, and
/// p = (1 + count) / (1 + permutations) (Phipson & Smyth 2010: never 0, valid).
///
/// With fewer than two bins used, or an empty sample, there is nothing to compare: X² = 0,
/// df = 0, p = 1, no permutations drawn. Time is O(permutations · (min(a_total, b_total) +
/// k)); memory O(N).
///
/// # Panics
/// When `a` and `b` have different lengths.
pub fn histogram_test_with(a: &[u64], b: &[u64], permutations: u32, seed: u64) -> HistComparison {
    assert_eq!(a.len(), b.len(), "histogram_test: histograms of different lengths");
    let a_total: u64 = a.iter().sum();
    let b_total: u64 = b.iter().sum();
    let used: Vec<usize> = (0..a.len()).filter(|&i| a[i] + b[i] > 0).collect();
    let mut out = HistComparison {
        a: a.to_vec(),
        b: b.to_vec(),
        a_total,
        b_total,
        bins_used: used.len(),
        statistic: 0.0,
        df: 0,
        p_value: 1.0,
        permutations: 0,
    };
    if used.len() < 2 || a_total == 0 || b_total == 0 {
        return out;
    }
    let col_totals: Vec<u64> = used.iter().map(|&i| a[i] + b[i]).collect();
    let a_cols: Vec<u64> = used.iter().map(|&i| a[i]).collect();
    let observed = chi_square(&a_cols, &col_totals, a_total, b_total);

    // One entry per run, its (used) bin index. X² is symmetric in the two rows, so only the
    // smaller group is dealt: the first `small` entries after each partial shuffle.
    let mut runs: Vec<usize> = Vec::new();
    for (j, &total) in col_totals.iter().enumerate() {
        runs.extend(std::iter::repeat_n(j, total as usize));
    }
    let small = a_total.min(b_total) as usize;
    let (small_total, large_total) = (small as u64, a_total.max(b_total));
    let threshold = observed * (1.0 - 64.0 * f64::EPSILON);
    let mut rng = SplitMix64(seed);
    let mut cols = vec![0u64; col_totals.len()];
    let mut hits: u64 = 0;
    for _ in 0..permutations {
        for i in 0..small {
            let j = i + rng.below((runs.len() - i) as u64) as usize;
            runs.swap(i, j);
        }
        cols.iter_mut().for_each(|c| *c = 0);
        for &j in &runs[..small] {
            cols[j] += 1;
        }
        if chi_square(&cols, &col_totals, small_total, large_total) >= threshold {
            hits += 1;
        }
    }
    out.statistic = observed;
    out.df = used.len() - 1;
    out.p_value = (1 + hits) as f64 / (1 + u64::from(permutations)) as f64;
    out.permutations = permutations;
    out
}

/// Pearson's X² of the 2 × k table whose first row is `row1`, column totals `col_totals`,
/// row totals `r1`, `r2` (all totals positive).
fn chi_square(row1: &[u64], col_totals: &[u64], r1: u64, r2: u64) -> f64 {
    let n = (r1 + r2) as f64;
    let (r1, r2) = (r1 as f64, r2 as f64);
    row1.iter()
        .zip(col_totals)
        .map(|(&o1, &col)| {
            let col = col as f64;
            let (o1, o2) = (o1 as f64, col - o1 as f64);
            let (e1, e2) = (r1 * col / n, r2 * col / n);
            (o1 - e1).powi(2) / e1 + (o2 - e2).powi(2) / e2
        })
        .sum()
}

/// splitmix64 (Steele, Lea & Flood 2014; constants from Vigna's reference `splitmix64.c`).
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..bound (bound > 0), without modulo bias (Lemire 2019, multiply and
    /// reject).
    fn below(&mut self, bound: u64) -> u64 {
        let reject_below = bound.wrapping_neg() % bound;
        loop {
            let m = u128::from(self.next()) * u128::from(bound);
            if (m as u64) >= reject_below {
                return (m >> 64) as u64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(x: f64, y: f64, tol: f64) -> bool {
        (x - y).abs() <= tol
    }

    #[test]
    fn wilson_known_values() {
        let cases = [
            ((0, 10), (0.0, 0.2775)),
            ((5, 10), (0.2366, 0.7634)),
            // 0.133367 rounds to 0.1334 (0.1333 is the truncation).
            ((20, 100), (0.1334, 0.2888)),
            ((10, 10), (0.7225, 1.0)),
        ];
        for ((s, n), (lo, hi)) in cases {
            let (l, h) = wilson(s, n, 1.959964);
            assert!(close(l, lo, 5e-5) && close(h, hi, 5e-5), "{s}/{n}: ({l}, {h})");
        }
        assert_eq!(wilson(0, 0, Z_95), (0.0, 1.0));
        assert_eq!(wilson(0, 10, Z_95).0, 0.0);
        assert_eq!(wilson(10, 10, Z_95).1, 1.0);
    }

    #[test]
    fn ln_factorial_known_values_and_seam() {
        assert_eq!(ln_factorial(0), 0.0);
        assert_eq!(ln_factorial(1), 0.0);
        assert!(close(ln_factorial(10), 3_628_800f64.ln(), 1e-12));
        assert!(close(ln_factorial(100), 363.739_375_555_563_47, 1e-10));
        // Summation below 32, Stirling from 32: consecutive values still differ by ln n.
        for n in 30..40u64 {
            let step = ln_factorial(n) - ln_factorial(n - 1);
            assert!(close(step, (n as f64).ln(), 1e-12), "n = {n}");
        }
    }

    #[test]
    fn fisher_known_p_values() {
        // Exact values: 34/70; 2/C(20,10); one possible table; R fisher.test.
        let cases = [
            ([[3, 1], [1, 3]], 0.485_714_285_714_285_7),
            ([[10, 0], [0, 10]], 1.082_508_822_446_903e-5),
            ([[0, 5], [0, 5]], 1.0),
            ([[1, 9], [11, 3]], 0.002_759_456_185_220_083_6),
            ([[7, 2], [3, 8]], 0.069_778_518_694_927_36),
            ([[10, 90], [60, 40]], 5.033_109_696_311_592e-14),
        ];
        for (table, p) in cases {
            let got = fisher_exact(table);
            assert!(close(got, p, 1e-9 * p.max(1e-300)), "{table:?}: {got} vs {p}");
        }
        // Transposed and mirrored tables have the same p-value.
        let p = fisher_exact([[1, 9], [11, 3]]);
        assert!(close(fisher_exact([[1, 11], [9, 3]]), p, 1e-15));
        assert!(close(fisher_exact([[11, 3], [1, 9]]), p, 1e-15));
        assert_eq!(fisher_exact([[0, 0], [0, 0]]), 1.0);
    }

    #[test]
    fn two_proportion_fields() {
        let c = two_proportion(3, 4, 1, 4);
        assert_eq!((c.a_rate, c.b_rate, c.difference), (0.75, 0.25, 0.5));
        assert_eq!(c.a_interval, wilson(3, 4, Z_95));
        assert_eq!(c.b_interval, wilson(1, 4, Z_95));
        assert!(close(c.p_value, 0.485_714_285_714_285_7, 1e-12));
        assert_eq!(c.pooled_rate(), 0.5);
        let empty = two_proportion(0, 0, 3, 7);
        assert_eq!((empty.a_rate, empty.a_interval, empty.p_value), (0.0, (0.0, 1.0), 1.0));
    }

    #[test]
    fn detectable_difference_values() {
        // 2.801585 · sqrt(0.25 · 0.02)
        assert!(close(detectable_difference(100, 100, 0.5), 0.198_101_990_579_967_27, 1e-12));
        // Clamped: a base rate of 0 or 1 counts as 0.05 or 0.95.
        assert_eq!(detectable_difference(20, 30, 0.0), detectable_difference(20, 30, 0.05));
        assert_eq!(detectable_difference(20, 30, 1.0), detectable_difference(20, 30, 0.95));
        assert!(detectable_difference(20, 30, 0.0) > 0.0);
        assert_eq!(detectable_difference(0, 30, 0.5), f64::INFINITY);
        assert!(detectable_difference(1000, 1000, 0.5) < detectable_difference(100, 100, 0.5));
    }

    #[test]
    fn verdict_clear_cases() {
        let same = two_proportion(50, 100, 52, 100);
        assert!(close(same.detectable_difference(), 0.198_062_366_219_018_85, 1e-12));
        assert_eq!(verdict(&same, 0.2), Verdict::Agree);
        assert_eq!(verdict(&same, 0.1), Verdict::Inconclusive);
        assert_eq!(verdict(&two_proportion(10, 100, 60, 100), 0.2), Verdict::Disagree);
        assert_eq!(verdict(&two_proportion(1, 5, 2, 5), 0.1), Verdict::Inconclusive);
        assert_eq!(verdict(&two_proportion(0, 0, 0, 0), 1.0), Verdict::Inconclusive);
        // alpha is a parameter: [[7,2],[3,8]] (p ≈ 0.0698) differs at 0.1, not at 0.01.
        let mid = two_proportion(7, 9, 3, 11);
        assert_eq!(verdict_with_alpha(&mid, 0.1, 0.1), Verdict::Disagree);
        assert_eq!(verdict(&mid, 0.1), Verdict::Inconclusive);
        assert_eq!(Verdict::Inconclusive.to_string(), "inconclusive");
    }

    #[test]
    fn bins_pool_and_labels() {
        let labels: Vec<String> = COUNT_BINS.iter().map(Bin::label).collect();
        assert_eq!(labels, ["0", "1", "2–4", "5–9", "10+"]);
        assert_eq!(pool(&[0, 0, 1, 2, 4, 5, 9, 10, 1000], &COUNT_BINS), [2, 1, 2, 2, 2]);
        // A count no bin holds is not counted.
        let gappy = [Bin::new(0, Some(0)), Bin::new(5, None)];
        assert_eq!(pool(&[0, 3, 7], &gappy), [1, 1]);
        assert_eq!(pool(&[], &COUNT_BINS), [0; 5]);
    }

    #[test]
    fn histogram_identical_gives_p_one() {
        let h = [30, 20, 25, 15, 10];
        let c = histogram_test(&h, &h);
        assert_eq!((c.statistic, c.df, c.bins_used, c.permutations), (0.0, 4, 5, PERMUTATIONS));
        assert!(c.p_value > 0.99, "{}", c.p_value);
    }

    #[test]
    fn histogram_very_different_gives_small_p() {
        let a = pool(&[1; 100], &COUNT_BINS);
        let b = pool(&[12; 100], &COUNT_BINS);
        let c = histogram_test(&a, &b);
        // Bins 0, 2–4 and 5–9 are empty on both sides and dropped: a 2×2 table.
        assert_eq!((c.bins_used, c.df, c.a_total, c.b_total), (2, 1, 100, 100));
        assert!(close(c.statistic, 200.0, 1e-9), "{}", c.statistic);
        assert!(c.p_value < 0.001, "{}", c.p_value);
        assert_eq!(c.p_value, 1.0 / 10_001.0);
    }

    #[test]
    fn histogram_permutation_p_near_exact() {
        // For this 2×2 table, ordering by X² is ordering by |k − 2|: the exact permutation
        // p-value is Fisher's 34/70. 10 000 permutations: standard error about 0.005.
        let c = histogram_test(&[3, 1], &[1, 3]);
        assert!(close(c.p_value, 34.0 / 70.0, 0.02), "{}", c.p_value);
        assert!(close(c.statistic, 2.0, 1e-12));
    }

    #[test]
    fn histogram_deterministic() {
        let (a, b) = ([12, 8, 5, 3, 2], [9, 10, 6, 2, 4]);
        let first = histogram_test(&a, &b);
        assert_eq!(first, histogram_test(&a, &b));
        assert!(first.p_value > 0.0 && first.p_value <= 1.0);
        // Swapping the samples deals the same smaller group: same statistic, same p.
        let swapped = histogram_test(&b, &a);
        assert_eq!((swapped.statistic, swapped.p_value), (first.statistic, first.p_value));
        // A different seed moves p a little, not much.
        let other = histogram_test_with(&a, &b, PERMUTATIONS, 7);
        assert!(close(other.p_value, first.p_value, 0.03));
    }

    #[test]
    fn histogram_nothing_to_compare() {
        let one_bin = histogram_test(&[0, 7, 0], &[0, 3, 0]);
        assert_eq!((one_bin.p_value, one_bin.bins_used, one_bin.df), (1.0, 1, 0));
        assert_eq!(one_bin.permutations, 0);
        let empty_side = histogram_test(&[0, 0, 0], &[1, 2, 3]);
        assert_eq!((empty_side.p_value, empty_side.statistic), (1.0, 0.0));
    }

    #[test]
    fn splitmix_reference_and_bounds() {
        // First outputs for seed 0 from Vigna's splitmix64.c.
        let mut rng = SplitMix64(0);
        assert_eq!(rng.next(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(rng.next(), 0x6e78_9e6a_a1b9_65f4);
        let mut rng = SplitMix64(PERMUTATION_SEED);
        assert!((0..1000).all(|_| rng.below(3) < 3));
        assert_eq!(rng.below(1), 0);
    }
}
