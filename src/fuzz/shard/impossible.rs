//! Impossible numbers: what no merged report of the honest matrix may print (counts past their
//! runs, seeds outside the range, names that are no violation or status, an exit code that
//! contradicts the cells, control characters).

use serde_json::Value;

use super::SEEDS;
use super::honest::{Honest, seeds_arg};
use crate::report::ViolationKind;
use crate::scenario::{MAX_ATTEMPTS, MAX_COPIES, MAX_REQUESTS};

/// A count of attempts or intents above this for `runs` runs is impossible (every sim bound).
fn attempt_bound(runs: u64) -> u64 {
    runs.saturating_mul(MAX_REQUESTS as u64).saturating_mul(MAX_COPIES).saturating_mul(MAX_ATTEMPTS)
}

fn is_status(k: &str) -> bool {
    k == "reply"
        || k == "transport-failure"
        || k.parse::<u16>().is_ok_and(|s| (100..=599).contains(&s))
}

/// The first impossible thing in a merged report (its text, its JSON, its exit code), if any.
pub fn impossible(h: &Honest, text: &str, json: &str, code: i32) -> Option<String> {
    if let Some(c) = text.chars().chain(json.chars()).find(|c| c.is_control() && *c != '\n') {
        return Some(format!("control character {c:?} printed"));
    }
    let Ok(v) = serde_json::from_str::<Value>(json) else {
        return Some("--json printed no JSON".into());
    };
    let Some(cells) = v["cells"].as_array() else { return Some("--json without cells".into()) };
    if cells.len() != h.cells.len() {
        return Some(format!("{} cells, the matrix has {}", cells.len(), h.cells.len()));
    }
    for (c, (model, sim, applicable)) in cells.iter().zip(&h.cells) {
        if c["model"] != model.as_str() || c["sim"] != sim.as_str() {
            return Some(format!("cell {} × {} where {model} × {sim} was", c["model"], c["sim"]));
        }
        if let Err(e) = cell_possible(c, *applicable) {
            return Some(format!("{model} × {sim}: {e}"));
        }
    }
    let failed = cells.iter().any(|c| c["passed"] == false);
    if code != i32::from(failed) {
        return Some(format!(
            "exit {code} for a matrix that {}",
            if failed { "failed" } else { "passed" }
        ));
    }
    text_possible(text).err()
}

fn count(c: &Value, k: &str) -> Result<u64, String> {
    c[k].as_u64().ok_or_else(|| format!("{k} is {}", c[k]))
}

fn histogram_total(c: &Value, k: &str) -> Result<u64, String> {
    let m = c[k].as_object().ok_or_else(|| format!("{k} is not a histogram"))?;
    m.values()
        .try_fold(0u64, |t, n| n.as_u64().and_then(|n| t.checked_add(n)))
        .ok_or(format!("{k} overflows"))
}

/// One cell of the JSON report: its counts fit its runs and every seed its range.
fn cell_possible(c: &Value, applicable: bool) -> Result<(), String> {
    let inside = |s: u64| SEEDS.contains(&s);
    if c["seeds"] != seeds_arg().as_str() {
        return Err(format!("seeds {}", c["seeds"]));
    }
    if (c["applicable"] != false) != applicable {
        return Err(format!("applicable {} (the sim and model say {applicable})", c["applicable"]));
    }
    let runs = count(c, "runs")?;
    let want = if applicable { SEEDS.end - SEEDS.start } else { 0 };
    if runs != want {
        return Err(format!("{runs} runs for {want} seeds"));
    }
    for k in ["failed_seeds", "violating_seeds", "bounded_runs"] {
        if count(c, k)? > runs {
            return Err(format!("{k} {} > {runs} runs", count(c, k)?));
        }
    }
    let failed = count(c, "failed_seeds")?;
    if applicable && c["passed"] != (failed == 0) {
        return Err(format!("passed {} with {failed} failed seeds", c["passed"]));
    }
    match c["first_failed_seed"].as_u64() {
        Some(s) if failed == 0 || !inside(s) => return Err(format!("first failing seed {s}")),
        None if failed > 0 => return Err("failed seeds without a first one".into()),
        _ => {}
    }
    for k in ["rows", "effects"] {
        if histogram_total(c, k)? != runs {
            return Err(format!("{k} histogram counts {} of {runs} runs", histogram_total(c, k)?));
        }
    }
    violations_possible(c, runs)?;
    attempts_possible(c, runs)
}

fn violations_possible(c: &Value, runs: u64) -> Result<(), String> {
    let known: Vec<&str> = ViolationKind::ALL.iter().map(|k| k.name()).collect();
    let (mut most, mut sum) = (0u64, 0u64);
    for (name, v) in c["violations"].as_object().ok_or("violations is not a map")? {
        let (seeds, occ, first) =
            (count(v, "seeds")?, count(v, "occurrences")?, count(v, "first_seed")?);
        if !known.contains(&name.as_str()) {
            return Err(format!("violation {name:?} is not a violation"));
        }
        if seeds == 0 || seeds > runs || occ < seeds || !SEEDS.contains(&first) {
            return Err(format!("{name}: {seeds} seeds, {occ} times, first seed {first}"));
        }
        if v["permitted"] != true {
            most = most.max(seeds);
            sum = sum.saturating_add(seeds);
        }
    }
    let violating = count(c, "violating_seeds")?;
    if violating < most || violating > sum {
        return Err(format!("{violating} violating seeds for violations on {most}..={sum}"));
    }
    Ok(())
}

fn attempts_possible(c: &Value, runs: u64) -> Result<(), String> {
    let bound = attempt_bound(runs);
    for k in ["statuses", "rows_per_intent", "effects_per_intent"] {
        for (key, n) in c[k].as_object().ok_or(format!("{k} is not a map"))? {
            if k == "statuses" && !is_status(key) {
                return Err(format!("status {key:?} is not a status"));
            }
            if n.as_u64().is_none_or(|n| n > bound) {
                return Err(format!("{k}[{key}] = {n} for {runs} runs"));
            }
        }
    }
    if count(c, "ambiguous_intents")? > bound {
        return Err(format!("{} ambiguous intents", count(c, "ambiguous_intents")?));
    }
    for s in c["nondeterministic_seeds"].as_array().ok_or("nondeterministic_seeds")? {
        if s.as_u64().is_none_or(|s| !SEEDS.contains(&s)) {
            return Err(format!("nondeterministic seed {s}"));
        }
    }
    Ok(())
}

/// The text report: every `k/n` has k ≤ n, every rate is in [0, 100] %, every seed named is in
/// the range.
fn text_possible(text: &str) -> Result<(), String> {
    let words: Vec<&str> =
        text.split_whitespace().map(|w| w.trim_matches(|c: char| "(),;:·".contains(c))).collect();
    for (i, w) in words.iter().enumerate() {
        if let Some((k, n)) = w.split_once('/')
            && let (Ok(k), Ok(n)) = (k.parse::<u64>(), n.parse::<u64>())
            && k > n
        {
            return Err(format!("{k}/{n} printed"));
        }
        if let Some(p) = w.strip_suffix('%')
            && let Ok(p) = p.parse::<f64>()
            && !(0.0..=100.0).contains(&p)
        {
            return Err(format!("a rate of {p}% printed"));
        }
        if (*w == "--seed" || *w == "seed")
            && let Some(s) = words.get(i + 1).and_then(|s| s.parse::<u64>().ok())
            && !SEEDS.contains(&s)
        {
            return Err(format!("seed {s} printed, outside {}", seeds_arg()));
        }
    }
    Ok(())
}
