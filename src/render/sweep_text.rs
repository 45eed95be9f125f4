//! One sweep as text: its header, the cell's two verdicts and the violations table (with the
//! runs until each was first seen when explored).

use std::fmt::Write as _;

use super::{percent, share_text};
use crate::catalog;
use crate::model::Model;
use crate::run;
use crate::scenario::Sim;
use crate::sweep::Cell;
use crate::text::printable;

/// A cell's two verdicts, one line for the sweep text ("" for an n/a cell).
pub(super) fn verdict_line(c: &Cell) -> String {
    let Some(v) = c.verdict() else { return String::new() };
    let (safe, spec) = v.words();
    let why_spec = if c.passed {
        "every expectation held".to_string()
    } else {
        let (k, n) = (c.failed_seeds, c.runs);
        format!("expectations failed on {k} of {n} seeds: {}", share_text(k, n))
    };
    format!(
        "verdict: {safe} ({} violating seeds, {} cut short by a bound) · {spec} ({why_spec})\n",
        c.violating_seeds, c.bounded_runs
    )
}

/// The text report of a sweep.
pub fn sweep_text(sim: &Sim, model: &Model, c: &Cell, jobs: usize) -> String {
    sweep_text_explored(sim, model, c, jobs, None)
}

/// How an explored sweep (`--explore`) names itself and its runs.
pub struct ExploredSweep<'a> {
    /// The header's first line (it names the strategy).
    pub header: String,
    /// What the exploration did, one line under the header.
    pub summary: String,
    /// The cell's first seed (an exhaustive sweep: 0, its first schedule).
    pub first: u64,
    /// The replay command of one seed (or schedule) of the cell.
    pub replay: &'a dyn Fn(u64) -> String,
}

/// The text report of a sweep, explored (`--explore`: the strategy named in the header and
/// in every replay command, each violation with the runs until it was first seen) or not.
pub fn sweep_text_explored(
    sim: &Sim,
    model: &Model,
    c: &Cell,
    jobs: usize,
    ex: Option<&ExploredSweep<'_>>,
) -> String {
    let mut out = String::new();
    sweep_header(&mut out, sim, model, c, jobs);
    if let Some(ex) = ex {
        let first = out.find('\n').unwrap_or(out.len());
        out.replace_range(..first, &ex.header);
        let _ = writeln!(out, "  {}", ex.summary);
    }
    let runs = c.runs;
    let bounds = match c.bounded_runs {
        0 => "0".to_string(),
        k => format!("{k} ({})", share_text(k, runs)),
    };
    let _ = writeln!(
        out,
        "\n{runs} runs · seeds with a violation: {} ({}) · bounds hit: {bounds} · ambiguous intents: {}",
        c.violating_seeds,
        share_text(c.violating_seeds, runs),
        c.ambiguous_intents
    );
    out.push_str(&verdict_line(c));
    let calibrated = |seed: u64| catalog::replay_for(sim, model, seed);
    let replay: &dyn Fn(u64) -> String = ex.map_or(&calibrated, |e| e.replay);
    sweep_violations(&mut out, c, replay, ex.map(|e| e.first));
    let hist = |h: &std::collections::BTreeMap<u64, u64>| {
        h.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join("   ")
    };
    let _ = writeln!(out, "\nrows per intent     {}", hist(&c.rows_per_intent));
    let _ = writeln!(out, "effects per intent  {}", hist(&c.effects_per_intent));
    let _ = writeln!(
        out,
        "attempt outcomes    {}",
        c.statuses
            .iter()
            .map(|(k, v)| format!("{}: {v}", printable(k)))
            .collect::<Vec<_>>()
            .join("   ")
    );
    if !c.nondeterministic_seeds.is_empty() {
        let _ = writeln!(
            out,
            "\nNONDETERMINISTIC seeds (trace differed on a second run): {:?}",
            c.nondeterministic_seeds
        );
    }
    if let Some(s) = c.first_failed_seed {
        let what = if ex.is_some() { "run" } else { "seed" };
        let _ = writeln!(out, "\nexpectations failed first on {what} {s}; replay: {}", replay(s));
    }
    out
}

/// A sweep's header: what ran, the faults, the model's program, the sim's limitation, the
/// keys' retention, warnings, and whether it was interrupted.
pub(super) fn sweep_header(out: &mut String, sim: &Sim, model: &Model, c: &Cell, jobs: usize) {
    let _ = writeln!(
        out,
        "idemsim sweep: sim {} · model {} · seeds {} · {jobs} job(s)",
        sim.name,
        model.name,
        printable(&c.seeds)
    );
    let _ = writeln!(out, "  faults: {}", sim.faults.describe());
    if let Some(line) = c.fired_line(sim, "runs") {
        let _ = writeln!(out, "  {line}");
    }
    let _ = writeln!(
        out,
        "  stack: {}, {}; {} process(es) started {}",
        printable(&model.stack),
        model.runtime.describe(),
        sim.world.processes,
        sim.world.start.name()
    );
    let _ = writeln!(out, "  model: {}", model.program_text());
    if let Some(l) = &sim.limitation {
        let _ = writeln!(out, "  limitation described by the expectations: {l}");
    }
    if let Some(line) = run::retention_line(sim, model) {
        let _ = writeln!(out, "  keys: {line}");
    }
    for w in run::warnings(sim, model) {
        let _ = writeln!(out, "  warning: {w}");
    }
    if let Some(n) = &c.note {
        let _ = writeln!(out, "  note (the model's, for this sim): {n}");
    }
    if c.interrupted {
        let _ = writeln!(
            out,
            "  INTERRUPTED: partial aggregate of the {} seed(s) that finished out of {}",
            c.runs, c.seeds
        );
    }
}

/// The sweep's violations table: seeds, rate, interval, first seed and its replay; explored
/// (`first`: the cell's first seed), the runs until each was first seen.
pub(super) fn sweep_violations(
    out: &mut String,
    c: &Cell,
    replay: &dyn Fn(u64) -> String,
    first: Option<u64>,
) {
    if c.violations.is_empty() {
        let _ = writeln!(out, "\nno violations on any seed");
    } else {
        let _ = writeln!(
            out,
            "\n{:<28} {:>6} {:>8}  {:<17} {:>10}",
            "violation", "seeds", "rate", "95% CI", "first seed"
        );
        for (name, v) in c.violations_in_order() {
            let (p, lo, hi) = percent(v.seeds, c.runs);
            let name = printable(name);
            let label = if v.permitted { format!("{name}*") } else { name };
            let _ = writeln!(
                out,
                "{label:<28} {:>6} {p:>7.1}%  {lo:>6.1}%–{hi:>6.1}%  {:>10}",
                v.seeds, v.first_seed
            );
            if let Some(start) = first {
                let runs = runs_to_first(v.first_seed, start);
                let _ = writeln!(out, "    runs to first violation: {runs}");
            }
            let _ = writeln!(out, "    replay: {}", replay(v.first_seed));
        }
    }
    let retries = crate::report::ViolationKind::OutOfRetries.name();
    if c.violations.iter().any(|(k, v)| v.permitted && k != retries) {
        let _ = writeln!(
            out,
            "  * policy-permitted: caused only by a retry after the key's documented retention"
        );
    }
    if c.violations.contains_key(retries) {
        let _ = writeln!(
            out,
            "  * out-of-retries: not the design's: the client's attempts ran out, none answered, \
             while faults fired"
        );
    }
}

/// The runs until a violation first seen on seed (or schedule) `seed` of a cell starting at
/// `start`: an explored sweep runs its seeds in order (the count is the same for any
/// `--jobs`).
pub fn runs_to_first(seed: u64, start: u64) -> u64 {
    seed.saturating_sub(start).saturating_add(1)
}
