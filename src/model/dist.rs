//! A duration drawn anew at every use: uniform over `[low, high]` (ms), or a measured
//! distribution given by its quantiles, `{ p0 = …, p10 = …, p50 = …, p90 = …, p100 = … }` (ms),
//! drawn by inverse transform with straight lines between the quantiles given. Timings
//! measured on real servers are skewed (a cold handler: p10 1.1 ms, p50 1.2 ms, p90 2.4 ms); a
//! uniform range over p10–p90 would put its median at 1.75 ms and its mass where the real one
//! has little, so a stack states what it measured.

use std::collections::BTreeMap;

use crate::input::{InputError, Source};
use crate::units::ms_to_us;

/// The most quantiles a distribution may give.
pub const MAX_KNOTS: usize = 11;

/// The longest time a distribution may give (60 s, in µs).
const MAX_US: u64 = 60_000_000;

/// A duration (µs) drawn per use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dist {
    /// Uniform over `low..=high`.
    Uniform(u64, u64),
    /// Piecewise linear between quantiles: `(probability in millionths, µs)`, the first at
    /// probability 0 and the last at 1 (the least and the most it gives).
    Quantiles {
        /// How many of `knots` are given.
        len: u8,
        /// The quantiles, lowest probability first.
        knots: [(u32, u64); MAX_KNOTS],
    },
}

impl From<(u64, u64)> for Dist {
    fn from((lo, hi): (u64, u64)) -> Dist {
        Dist::Uniform(lo, hi)
    }
}

impl Dist {
    /// The least it gives.
    pub fn min(&self) -> u64 {
        match self {
            Dist::Uniform(lo, hi) => *lo.min(hi),
            Dist::Quantiles { knots, .. } => knots[0].1,
        }
    }

    /// The most it gives.
    pub fn max(&self) -> u64 {
        match self {
            Dist::Uniform(lo, hi) => *lo.max(hi),
            Dist::Quantiles { len, knots } => knots[*len as usize - 1].1,
        }
    }

    /// The value at probability `u` (millionths, 0..=1 000 000): the inverse of the
    /// distribution function.
    pub fn at(&self, u: u32) -> u64 {
        let u = u.min(1_000_000);
        match self {
            Dist::Uniform(lo, hi) => {
                let (lo, hi) = (*lo.min(hi), *lo.max(hi));
                lo + ((hi - lo) as u128 * u as u128 / 1_000_000) as u64
            }
            Dist::Quantiles { len, knots } => {
                let knots = &knots[..*len as usize];
                let i = knots.iter().position(|(p, _)| *p >= u).unwrap_or(knots.len() - 1);
                if i == 0 {
                    return knots[0].1;
                }
                let ((p0, v0), (p1, v1)) = (knots[i - 1], knots[i]);
                let span = u128::from(p1 - p0).max(1);
                v0 + ((v1 - v0) as u128 * u128::from(u - p0) / span) as u64
            }
        }
    }

    /// The quantiles given, `(probability in millionths, µs)` (a uniform range: its ends).
    pub fn knots(&self) -> Vec<(u32, u64)> {
        match self {
            Dist::Uniform(lo, hi) => vec![(0, *lo), (1_000_000, *hi)],
            Dist::Quantiles { len, knots } => knots[..*len as usize].to_vec(),
        }
    }

    /// The distribution as a stack file writes it: `[low, high]` or `{ p0 = …, … }` (ms).
    pub fn toml(&self) -> String {
        let ms = crate::units::show_ms;
        match self {
            Dist::Uniform(lo, hi) => format!("[{}, {}]", ms(*lo), ms(*hi)),
            Dist::Quantiles { .. } => {
                let parts: Vec<String> = self
                    .knots()
                    .iter()
                    .map(|(p, v)| format!("{} = {}", percent_key(*p), ms(*v)))
                    .collect();
                format!("{{ {} }}", parts.join(", "))
            }
        }
    }

    /// Quantiles from measured values (µs, any order): the least, p10, p25, p50, p75, p90,
    /// p95, p99 and the most (the tail in steps, so the few slowest do not spread the top
    /// tenth evenly up to the slowest). None without values.
    pub fn measured(values: &[u64]) -> Option<Dist> {
        let mut v = values.to_vec();
        v.sort_unstable();
        let last = v.len().checked_sub(1)?;
        let q = |p: u32| v[(last as u64 * u64::from(p) / 1_000_000) as usize];
        let picks = [0, 100_000, 250_000, 500_000, 750_000, 900_000, 950_000, 990_000, 1_000_000];
        let mut knots = [(0, 0); MAX_KNOTS];
        for (i, p) in picks.iter().enumerate() {
            knots[i] = (*p, q(*p));
        }
        Some(Dist::Quantiles { len: picks.len() as u8, knots })
    }
}

/// `p10`, `p99.9`: a probability in millionths as a key.
fn percent_key(p: u32) -> String {
    let whole = p / 10_000;
    let frac = p % 10_000;
    if frac == 0 {
        format!("p{whole}")
    } else {
        // A dot in a bare TOML key would make it a dotted key: quoted.
        format!("\"p{whole}.{}\"", format!("{frac:04}").trim_end_matches('0'))
    }
}

/// `p10` (or `"p99.9"`, quoted in TOML) → 100 000 (millionths); None unless `p` then a percentage 0..=100 (at most four
/// decimals).
fn parse_key(key: &str) -> Option<u32> {
    let n = key.strip_prefix('p')?;
    if n.is_empty() || !n.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let (whole, frac) = n.split_once('.').unwrap_or((n, ""));
    if whole.is_empty() || whole.len() > 3 || frac.len() > 4 || frac.contains('.') {
        return None;
    }
    let w: u32 = whole.parse().ok()?;
    let f: u32 = if frac.is_empty() { 0 } else { format!("{frac:0<4}").parse().ok()? };
    let p = w.checked_mul(10_000)?.checked_add(f)?;
    (p <= 1_000_000).then_some(p)
}

impl Source<'_> {
    /// A duration distribution written in milliseconds: `[low, high]` (uniform) or a table of
    /// quantiles that gives `p0` and `p100`; `default` when absent.
    pub fn ms_dist(
        &self,
        field: &str,
        value: &Option<toml::Spanned<toml::Value>>,
        default: Dist,
    ) -> Result<Dist, InputError> {
        let Some(v) = value else { return Ok(default) };
        let bad = |why: &str| self.err(v.span(), format!("{field}: {why}"));
        let range = "expected [low, high] with low <= high <= 60000, or quantiles such as \
                     { p0 = 1, p50 = 1.2, p100 = 4 } (milliseconds, in steps of 0.001)";
        match v.get_ref() {
            toml::Value::Array(a) => {
                let ms = |x: &toml::Value| x.as_float().or(x.as_integer().map(|i| i as f64));
                let parsed = match a.as_slice() {
                    [lo, hi] => ms(lo).and_then(ms_to_us).zip(ms(hi).and_then(ms_to_us)),
                    _ => None,
                };
                match parsed {
                    Some((lo, hi)) if lo <= hi && hi <= MAX_US => Ok(Dist::Uniform(lo, hi)),
                    _ => Err(bad(range)),
                }
            }
            toml::Value::Table(t) => self.quantiles(t, &bad),
            _ => Err(bad(range)),
        }
    }

    fn quantiles(
        &self,
        t: &toml::map::Map<String, toml::Value>,
        bad: &dyn Fn(&str) -> InputError,
    ) -> Result<Dist, InputError> {
        let mut by_p = BTreeMap::new();
        for (k, x) in t {
            let Some(p) = parse_key(k) else {
                return Err(bad(&format!(
                    "`{}` is not a quantile: expected p0 to p100 (such as p10, p99.9)",
                    crate::text::shown(k)
                )));
            };
            let ms = x.as_float().or(x.as_integer().map(|i| i as f64));
            let Some(us) = ms.and_then(ms_to_us).filter(|us| *us <= MAX_US) else {
                return Err(bad(&format!("{k}: expected milliseconds from 0 to 60000")));
            };
            by_p.insert(p, us);
        }
        if !by_p.contains_key(&0) || !by_p.contains_key(&1_000_000) {
            return Err(bad("quantiles must give p0 (the least) and p100 (the most)"));
        }
        if by_p.len() > MAX_KNOTS {
            return Err(bad(&format!("at most {MAX_KNOTS} quantiles")));
        }
        let knots_v: Vec<(u32, u64)> = by_p.into_iter().collect();
        if knots_v.windows(2).any(|w| w[1].1 < w[0].1) {
            return Err(bad("a higher quantile must not be shorter than a lower one"));
        }
        let mut knots = [(0, 0); MAX_KNOTS];
        knots[..knots_v.len()].copy_from_slice(&knots_v);
        Ok(Dist::Quantiles { len: knots_v.len() as u8, knots })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Dist, String> {
        #[derive(serde::Deserialize)]
        struct F {
            t: Option<toml::Spanned<toml::Value>>,
        }
        let src = Source::new(std::path::Path::new("s.toml"), text);
        let f: F = src.toml().map_err(|e| e.to_string())?;
        src.ms_dist("t", &f.t, Dist::Uniform(0, 0)).map_err(|e| e.to_string())
    }

    #[test]
    fn quantiles_are_drawn_by_inverse_transform_and_a_range_stays_uniform() {
        let d = parse("t = { p0 = 1, p50 = 1.2, p90 = 2.4, p100 = 4 }").unwrap();
        assert_eq!((d.min(), d.max()), (1_000, 4_000));
        assert_eq!(d.at(0), 1_000);
        assert_eq!(d.at(250_000), 1_100);
        assert_eq!(d.at(500_000), 1_200);
        assert_eq!(d.at(700_000), 1_800);
        assert_eq!(d.at(950_000), 3_200);
        assert_eq!(d.at(1_000_000), 4_000);
        assert_eq!(d.toml(), "{ p0 = 1, p50 = 1.2, p90 = 2.4, p100 = 4 }");
        let u = parse("t = [0.5, 1.5]").unwrap();
        assert_eq!(
            (u, u.at(500_000), u.toml()),
            (Dist::Uniform(500, 1_500), 1_000, "[0.5, 1.5]".into())
        );
        assert_eq!(
            parse("t = { p0 = 1, \"p99.9\" = 2, p100 = 3 }").unwrap().knots()[1],
            (999_000, 2_000)
        );
    }

    #[test]
    fn bad_quantiles_are_located_and_explained() {
        let e = parse("t = { p0 = 1, p50 = 2 }").unwrap_err();
        assert!(e.contains("s.toml:1:5") && e.contains("must give p0 (the least) and p100"), "{e}");
        let e = parse("t = { p0 = 1, median = 2, p100 = 3 }").unwrap_err();
        assert!(e.contains("`median` is not a quantile"), "{e}");
        let e = parse("t = { p0 = 3, p100 = 2 }").unwrap_err();
        assert!(e.contains("must not be shorter"), "{e}");
        let e = parse("t = { p0 = 1, p100 = 1e9 }").unwrap_err();
        assert!(e.contains("p100: expected milliseconds"), "{e}");
        let e = parse("t = [2, 1]").unwrap_err();
        assert!(e.contains("expected [low, high]"), "{e}");
        let e = parse("t = \"fast\"").unwrap_err();
        assert!(e.contains("or quantiles such as"), "{e}");
        for key in ["p101", "p", "p1.23456", "p-1", "pp1"] {
            assert!(parse(&format!("t = {{ p0 = 1, {key} = 2, p100 = 3 }}")).is_err(), "{key}");
        }
    }

    #[test]
    fn measured_values_give_their_quantiles() {
        let d = Dist::measured(&[5, 1, 4, 2, 3, 10, 6, 7, 8, 9, 11]).unwrap();
        let at: Vec<u64> = d.knots().iter().map(|k| k.1).collect();
        assert_eq!(at, [1, 2, 3, 6, 8, 10, 10, 10, 11]);
        assert_eq!(d.knots()[7].0, 990_000);
        assert!(Dist::measured(&[]).is_none());
    }
}
