//! Renderings of reports as text: one run, a sweep, the matrix tables (the reference table,
//! the compact table, the survival Markdown) and JSON. Pure functions of their inputs.

use crate::sweep;

mod html;
mod json;
mod run;
mod sweep_text;
mod tables;

pub use html::{matrix_html, run_html};
pub use json::{JSON_VERSION, cell_json, matrix_json, matrix_value, versioned};
pub(crate) use run::check_line;
pub use run::{explored_run_text, run_text};
pub use sweep_text::{ExploredSweep, runs_to_first, sweep_text, sweep_text_explored};
pub use tables::{SURVIVAL_LEGEND, compact_table, matrix_table, survival_markdown};
use tables::{interrupted_note, ranked_by_safety, short, verdict_marks};

/// A share of `k` seeds out of `runs` in percent, with its Wilson 95 % interval.
fn percent(k: u64, runs: u64) -> (f64, f64, f64) {
    let (lo, hi) = sweep::wilson(k, runs);
    (100.0 * k as f64 / runs.max(1) as f64, 100.0 * lo, 100.0 * hi)
}

/// A share in the text reports: `23.0%, 95% CI 17.7%–29.3%` (one decimal).
pub fn share_text(k: u64, runs: u64) -> String {
    let (p, lo, hi) = percent(k, runs);
    format!("{p:.1}%, 95% CI {lo:.1}%–{hi:.1}%")
}

/// A share in a table cell (Markdown, HTML): `23% [17–30]`, the rate rounded to a whole
/// percent and its Wilson 95 % interval rounded outward (so the printed interval holds the
/// exact one).
pub fn share_mark(k: u64, runs: u64) -> String {
    let (p, lo, hi) = percent(k, runs);
    // The bounds are rounded outward past a float's last digits, not past a true integer.
    let (lo, hi) = ((lo + 1e-9).floor(), (hi - 1e-9).ceil());
    format!("{}% [{lo}–{hi}]", p.round())
}

/// A share of `k` seeds out of `runs` as JSON: `rate` (0 to 1) and `ci95`, its Wilson 95 %
/// interval `[lo, hi]` (`[0, 1]` when nothing ran).
pub fn share_json(k: u64, runs: u64) -> serde_json::Value {
    let (lo, hi) = sweep::wilson(k, runs);
    let rate = if runs == 0 { 0.0 } else { k.min(runs) as f64 / runs as f64 };
    serde_json::json!({ "seeds": k, "rate": rate, "ci95": [lo, hi] })
}

/// A cell no seed of which ran (an interrupted matrix): neither a pass nor a failure.
pub(crate) const NOT_RUN: &str = "not run";

#[cfg(test)]
mod tests {
    use super::*;

    /// A share reads the same Wilson interval in every form: one decimal in text, whole
    /// percents rounded outward in a table cell, fractions in JSON.
    #[test]
    fn shares_carry_their_interval_in_every_form() {
        assert_eq!(share_text(46, 200), "23.0%, 95% CI 17.7%–29.3%");
        assert_eq!(share_mark(46, 200), "23% [17–30]");
        assert_eq!(share_mark(0, 200), "0% [0–2]");
        assert_eq!(share_mark(200, 200), "100% [98–100]");
        assert_eq!(share_mark(1, 1), "100% [20–100]");
        let j = share_json(46, 200);
        assert_eq!((j["seeds"].as_u64(), j["rate"].as_f64()), (Some(46), Some(0.23)));
        let (lo, hi) = sweep::wilson(46, 200);
        assert_eq!(j["ci95"], serde_json::json!([lo, hi]));
        assert_eq!(share_json(0, 0)["ci95"], serde_json::json!([0.0, 1.0]));
    }

    /// The examples docs/oracle.md and README.md give of each form (tests/it/headers.rs lists
    /// them as formats, not the matrix's rates).
    #[test]
    fn the_docs_examples_of_each_form() {
        assert_eq!(share_text(45, 200), "22.5%, 95% CI 17.3%–28.8%");
        assert_eq!(share_mark(45, 200), "23% [17–29]");
        assert_eq!(share_text(0, 100), "0.0%, 95% CI 0.0%–3.7%");
    }
}
