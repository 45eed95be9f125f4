//! The matrix as tables: the reference table, the compact table, the survival Markdown, their
//! legends and the marks of a cell they share with the HTML page.

use std::fmt::Write as _;
use std::sync::Arc;

use super::{NOT_RUN, share_mark, share_text};
use crate::catalog;
use crate::model::Model;
use crate::scenario::Sim;
use crate::sweep::{self, Cell};
use crate::text::{markdown_cell, printable};

/// The legend under the reference table.
pub(super) const REFERENCE_LEGEND: &str = "pass: the case's expectations held on every seed (as \
     specified); FAIL k/n: they failed on k of n seeds (FAIL alone: on every seed). Whether a design is safe is the oracle's \
     verdict, below.\n";

/// Models as rows, cases as columns (numbered by the sims' leading digits): ✓/✗ whether the
/// case's expectations held on every seed; for a case whose expectations describe a reference
/// design's limitation (`limitation`), = (behaves like that design) or ≠ (does not), which is
/// neither a pass nor a failure and is not counted in `passed`. A legend follows the rows.
pub fn compact_table(sims: &[Arc<Sim>], models: &[Arc<Model>], cells: &[Cell]) -> String {
    let mut out = String::new();
    let width = models.iter().map(|m| m.name.len()).max().unwrap_or(5) + 2;
    let _ = write!(out, "{:<width$}", "");
    for (i, s) in sims.iter().enumerate() {
        let num: String = s.name.chars().take_while(|c| c.is_ascii_digit()).collect();
        let num = if num.is_empty() { format!("{:02}", i + 1) } else { num };
        let _ = write!(out, "{num:>3}");
    }
    out.push_str("   passed\n");
    let shown = applicable_models(sims, models, cells);
    for (mi, m) in models.iter().enumerate() {
        if !shown[mi] {
            continue;
        }
        let _ = write!(out, "{:<width$}", m.name);
        let (mut passed, mut applicable) = (0, 0);
        for (si, s) in sims.iter().enumerate() {
            let c = sweep::cell(cells, models.len(), si, mi);
            let limitation = s.limitation.is_some();
            passed += (c.passed && c.applicable && !limitation) as usize;
            applicable += (c.applicable && !limitation) as usize;
            let mark = match (c.applicable, limitation, c.passed) {
                (false, _, _) => "·",
                (true, true, true) => "=",
                (true, true, false) => "≠",
                (true, false, true) => "✓",
                (true, false, false) => "✗",
            };
            let _ = write!(out, "{mark:>3}");
        }
        let limits = sims.iter().filter(|s| s.limitation.is_some()).count();
        let na = sims.len() - limits - applicable;
        let _ = write!(out, "   {passed}/{applicable}");
        if na > 0 {
            let _ = write!(out, " ({na} n/a)");
        }
        out.push('\n');
    }
    out.push_str(&not_shown(models, &shown));
    out.push_str(
        "✓ the case's expectations held on every seed (as specified), ✗ not; · n/a. Safety (the \
         oracle's violations) is in the lines below and in the catalogue tables.\n",
    );
    let limits: Vec<&str> = sims
        .iter()
        .filter(|s| s.limitation.is_some())
        .map(|s| s.name.split('-').next().unwrap_or(""))
        .collect();
    if !limits.is_empty() {
        let _ = writeln!(
            out,
            "{}: the expectations describe a limitation of the article's variants: = behaves \
             like them, ≠ does not (neither pass nor fail; not counted in `passed`).",
            limits.join(", ")
        );
    }
    out
}

/// A model's place in a ranking by safety.
pub(super) struct Ranked {
    /// The model's index.
    pub model: usize,
    /// Cells safe on every seed.
    pub safe: usize,
    /// Cells that apply.
    pub applicable: usize,
    /// Its rank, 1-based; equal to the one above when the difference is not significant.
    pub rank: usize,
    /// It shares its rank with another.
    pub tied: bool,
    /// Answers that refused and asked for a retry (409, 425, 429, 503), and all answers, over
    /// its applicable cells: the cost of its safety.
    pub refused: (u64, u64),
}

impl Ranked {
    /// `3` or `3=` (tied).
    pub fn rank_label(&self) -> String {
        if self.tied { format!("{}=", self.rank) } else { self.rank.to_string() }
    }

    /// The refusals as a share of its answers (`12%`, `—` with none).
    pub fn refused_label(&self) -> String {
        match self.refused {
            (_, 0) => "—".into(),
            (k, n) => format!("{:.0}%", 100.0 * k as f64 / n as f64),
        }
    }
}

/// Statuses that refuse a request and ask the client to come back.
const REFUSALS: [&str; 4] = ["409", "425", "429", "503"];

/// The models ranked by safety: most cells safe on every seed first, then the fewest
/// applicable (a design judged on fewer sims is not ahead of one judged on more), then the
/// models' own order. A model shares the rank of the one above unless it is significantly
/// less safe (Fisher's exact test, p < 0.01, over the seeds run) on a sim where the one above
/// is safe: a ✓ over 200 seeds against 1 failing seed in 200 is luck, not a ranking.
pub(super) fn ranked_by_safety(
    sims: &[Arc<Sim>],
    models: &[Arc<Model>],
    cells: &[Cell],
) -> Vec<Ranked> {
    let cell = |si: usize, mi: usize| sweep::cell(cells, models.len(), si, mi);
    let mut ranked: Vec<Ranked> = (0..models.len())
        .map(|mi| {
            let (mut safe, mut applicable, mut refused) = (0, 0, (0u64, 0u64));
            for si in 0..sims.len() {
                let c = cell(si, mi);
                let Some(v) = c.verdict() else { continue };
                safe += v.safe as usize;
                applicable += 1;
                refused.0 += REFUSALS.iter().filter_map(|s| c.statuses.get(*s)).sum::<u64>();
                refused.1 += c.statuses.values().sum::<u64>();
            }
            Ranked { model: mi, safe, applicable, rank: 0, tied: false, refused }
        })
        .collect();
    ranked
        .sort_by_key(|r| (std::cmp::Reverse(r.safe), r.applicable.saturating_sub(r.safe), r.model));
    let unsafe_runs = |c: &Cell| (c.violating_seeds.max(c.bounded_runs).min(c.runs), c.runs);
    for i in 0..ranked.len() {
        let separated = i == 0 || {
            let (a, b) = (ranked[i - 1].model, ranked[i].model);
            (0..sims.len()).any(|si| {
                let (ca, cb) = (cell(si, a), cell(si, b));
                let (Some(va), Some(vb)) = (ca.verdict(), cb.verdict()) else { return false };
                let ((ka, na), (kb, nb)) = (unsafe_runs(ca), unsafe_runs(cb));
                va.safe
                    && !vb.safe
                    && na > 0
                    && nb > 0
                    && crate::agree::two_proportion(ka, na, kb, nb).p_value < 0.01
            })
        };
        ranked[i].rank = if separated { i + 1 } else { ranked[i - 1].rank };
        if !separated {
            ranked[i].tied = true;
            ranked[i - 1].tied = true;
        }
    }
    ranked
}

/// Which models have at least one applicable cell (the others are left out of the tables).
pub(super) fn applicable_models(
    sims: &[Arc<Sim>],
    models: &[Arc<Model>],
    cells: &[Cell],
) -> Vec<bool> {
    (0..models.len())
        .map(|mi| (0..sims.len()).any(|si| sweep::cell(cells, models.len(), si, mi).applicable))
        .collect()
}

/// The line naming the models left out because no sim applies to them ("" if none).
pub(super) fn not_shown(models: &[Arc<Model>], shown: &[bool]) -> String {
    let hidden: Vec<&str> =
        models.iter().zip(shown).filter(|(_, s)| !**s).map(|(m, _)| m.name.as_str()).collect();
    if hidden.is_empty() {
        return String::new();
    }
    format!("(n/a for every sim, not shown: {})\n", hidden.join(", "))
}

/// Short names for table cells.
pub(super) fn short(name: &str) -> &str {
    match name {
        "duplicate-row" => "dup-row",
        "duplicate-effect" => "dup-effect",
        "payload-mismatch-executed" => "payload-executed",
        "unacknowledged-effect" => "unacked-effect",
        "unfinished-intent" => "unfinished",
        "expired-duplicate-row" => "expired-row",
        "expired-duplicate-effect" => "expired-effect",
        "expired-replay-mismatch" => "expired-replay",
        other => other,
    }
}

/// Models × sims as Markdown: `✓` when the cell is safe and as specified on every seed, else
/// its marks (`cell_marks`); policy-permitted violations in italics.
pub fn survival_markdown(sims: &[Arc<Sim>], models: &[Arc<Model>], cells: &[Cell]) -> String {
    let mut out = interrupted_note(cells);
    out.push_str("| rank | design | safe in | refused |");
    for s in sims {
        let _ = write!(out, " {} |", markdown_cell(&s.name));
    }
    out.push_str("\n|---|---|---|---|");
    for _ in sims {
        out.push_str("---|");
    }
    out.push('\n');
    let shown = applicable_models(sims, models, cells);
    let mut notes: Vec<String> = Vec::new();
    for r in ranked_by_safety(sims, models, cells) {
        let mi = r.model;
        if !shown[mi] {
            continue;
        }
        let m = &models[mi];
        let _ = write!(
            out,
            "| {} | **{}** | {}/{} | {} |",
            r.rank_label(),
            markdown_cell(&m.name),
            r.safe,
            r.applicable,
            r.refused_label()
        );
        for si in 0..sims.len() {
            let c = sweep::cell(cells, models.len(), si, mi);
            let text = survival_cell(c, &m.name, &mut notes);
            let _ = write!(out, " {text} |");
        }
        out.push('\n');
    }
    let note = not_shown(models, &shown);
    if !note.is_empty() {
        let _ = write!(out, "\n{note}");
    }
    if !notes.is_empty() {
        let _ = writeln!(out, "\nNotes (each model's own, `[notes]` in its file):\n");
        for n in &notes {
            let _ = writeln!(out, "{n}");
        }
    }
    let _ = writeln!(out, "\n{SURVIVAL_LEGEND}");
    out
}

/// One cell of [`survival_markdown`]: its marks, or ✓ with its interval, and a reference to
/// its note (pushed onto `notes`) when the model has one for the sim.
fn survival_cell(c: &Cell, model: &str, notes: &mut Vec<String>) -> String {
    let parts: Vec<String> = cell_marks(c)
        .into_iter()
        .map(|(label, share, permitted)| {
            // The share is ours (digits, %, brackets): only the label is escaped.
            let m = format!("{} {share}", markdown_cell(&label));
            if permitted { format!("*{m}*") } else { m }
        })
        .collect();
    let text = if !c.applicable {
        "n/a".to_string()
    } else if c.runs == 0 {
        NOT_RUN.to_string()
    } else if parts.is_empty() {
        // The interval of "no seed failed": how unsafe it could still be.
        let bound = share_mark(0, c.runs);
        format!("✓ {}", bound.trim_start_matches("0% "))
    } else {
        parts.join("<br>")
    };
    let Some(n) = &c.note else { return text };
    notes.push(format!(
        "{}. **{}** × {}: {}",
        notes.len() + 1,
        markdown_cell(model),
        markdown_cell(&c.sim),
        markdown_cell(n)
    ));
    format!("{text}<br>(note {})", notes.len())
}

/// A first line for tables of an interrupted matrix.
pub(super) fn interrupted_note(cells: &[Cell]) -> String {
    if cells.iter().any(|c| c.interrupted) {
        let runs: u64 = cells.iter().map(|c| c.runs).sum();
        format!("INTERRUPTED: partial results, {runs} run(s) finished; a pass may not hold\n\n")
    } else {
        String::new()
    }
}

/// The pass/fail table, like the published results table, with per-variant totals and then
/// one line per failing cell ending with its replay command.
pub fn matrix_table(sims: &[Arc<Sim>], models: &[Arc<Model>], cells: &[Cell]) -> String {
    let mut out = interrupted_note(cells);
    if !sims.iter().any(|s| s.has_expectations()) {
        out.push_str("(these sims state no expectations: the oracle's findings are the result)\n");
        out.push_str(&na_lines(cells));
        return out + &violation_lines(sims, models, cells);
    }
    let width = sims.iter().map(|s| s.name.len()).max().unwrap_or(4).max(5) + 2;
    let colw = models.iter().map(|m| m.name.len()).max().unwrap_or(8).max(12) + 2;
    let _ = write!(out, "{:<width$}", "case");
    for m in models {
        let _ = write!(out, "{:<colw$}", m.name);
    }
    out.push('\n');
    for (si, s) in sims.iter().enumerate() {
        let _ = write!(out, "{:<width$}", s.name);
        for (mi, _) in models.iter().enumerate() {
            let c = sweep::cell(cells, models.len(), si, mi);
            let text = if !c.applicable {
                "n/a".to_string()
            } else if c.runs == 0 {
                NOT_RUN.to_string()
            } else if c.passed {
                "pass".to_string()
            } else if c.failed_seeds == c.runs {
                "FAIL".to_string()
            } else {
                format!("FAIL {}/{}", c.failed_seeds, c.runs)
            };
            let _ = write!(out, "{text:<colw$}");
        }
        out.push('\n');
    }
    let _ = write!(out, "{:<width$}", "passed");
    let totals = sweep::totals(models, cells);
    for t in &totals {
        let _ = write!(out, "{:<colw$}", format!("{}/{}", t.passed, t.total));
    }
    out.push('\n');
    out.push_str(REFERENCE_LEGEND);
    out.push_str(&na_lines(cells));
    out.push_str(&violation_lines(sims, models, cells));
    out.push_str(&failure_lines(sims, models, cells));
    out
}

/// One line per failing cell: its failed seeds, the first failing seed's first failed check
/// and its replay command ("" when every cell passed).
pub(super) fn failure_lines(sims: &[Arc<Sim>], models: &[Arc<Model>], cells: &[Cell]) -> String {
    let mut out = String::new();
    let failing: Vec<(usize, &Cell)> =
        cells.iter().enumerate().filter(|(_, c)| !c.passed).collect();
    if !failing.is_empty() {
        out.push_str("\nfailures (first failing seed of each cell):\n");
        for (i, c) in failing {
            let (sim, model) = (&sims[i / models.len()], &models[i % models.len()]);
            let why = c
                .first_failure
                .first()
                .map(|k| {
                    let (what, expected) = (printable(&k.what), printable(&k.expected));
                    format!("{what}: expected {expected}, got {}", printable(&k.actual))
                })
                .unwrap_or_default();
            let more = if c.first_failure.len() > 1 {
                format!(" (+{} more)", c.first_failure.len() - 1)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "  {} × {}: failed on {}/{} seeds ({}); seed {}: {why}{more}\n    replay: {}",
                printable(&c.model),
                printable(&c.sim),
                c.failed_seeds,
                c.runs,
                share_text(c.failed_seeds, c.runs),
                c.first_failed_seed.unwrap_or_default(),
                c.replay_command(sim, model).unwrap_or_default()
            );
        }
    }
    out
}

/// The n/a cells, if any.
pub(super) fn na_lines(cells: &[Cell]) -> String {
    let na: Vec<&Cell> = cells.iter().filter(|c| !c.applicable).collect();
    let mut out = String::new();
    if !na.is_empty() {
        out.push_str("\nn/a (not counted): the sim injects at a point the model does not have:\n");
        for c in na {
            let _ = writeln!(out, "  {} × {}", printable(&c.model), printable(&c.sim));
        }
    }
    out
}

/// One line per cell with violations: names, seeds with each, first seed's replay command.
pub(super) fn violation_lines(sims: &[Arc<Sim>], models: &[Arc<Model>], cells: &[Cell]) -> String {
    let mut out = String::new();
    let violating: Vec<(usize, &Cell)> =
        cells.iter().enumerate().filter(|(_, c)| !c.violations.is_empty()).collect();
    if violating.is_empty() {
        out.push_str("\nno violations found by the oracle on any seed\n");
        return out;
    }
    out.push_str(
        "\nviolations found by the oracle (seeds with each / seeds run; * = policy-permitted):\n",
    );
    for (i, c) in violating {
        let (sim, model) = (&sims[i / models.len()], &models[i % models.len()]);
        let list: Vec<String> = c
            .violations_in_order()
            .into_iter()
            .map(|(n, v)| {
                let n = printable(n);
                let star = if v.permitted { "*" } else { "" };
                format!("{n}{star} {}/{} ({})", v.seeds, c.runs, share_text(v.seeds, c.runs))
            })
            .collect();
        let first = c.violations.values().filter(|v| !v.permitted).map(|v| v.first_seed).min();
        let (cm, cs) = (printable(&c.model), printable(&c.sim));
        let _ = writeln!(out, "  {cm} × {cs}: {}", list.join(", "));
        if let Some(seed) = first {
            let _ = writeln!(out, "    replay: {}", catalog::replay_for(sim, model, seed));
        }
    }
    out
}

/// The marks of one cell in the catalogue tables (Markdown, HTML): each violation with the
/// share of seeds it occurred on and its interval ([`share_mark`]; `permitted`:
/// policy-permitted), runs cut short by a bound, and failed expectations, each as (label,
/// share, permitted); empty when the cell is safe and as specified.
pub(super) fn cell_marks(c: &Cell) -> Vec<(String, String, bool)> {
    let mut out: Vec<(String, String, bool)> = c
        .violations_in_order()
        .iter()
        .map(|(n, v)| (short(n).to_string(), share_mark(v.seeds, c.runs), v.permitted))
        .collect();
    out.extend(verdict_marks(c).into_iter().map(|(label, share)| (label, share, false)));
    out
}

/// The marks of a cell's runs cut short (`bound N% [lo–hi]`) and failed expectations
/// (`spec ✗ N% [lo–hi]`), shared by the Markdown and HTML tables.
pub(super) fn verdict_marks(c: &Cell) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if c.bounded_runs > 0 {
        out.push(("bound".to_string(), share_mark(c.bounded_runs, c.runs)));
    }
    if c.applicable && !c.passed {
        out.push(("spec ✗".to_string(), share_mark(c.failed_seeds, c.runs)));
    }
    out
}

/// The legend printed beside the catalogue tables.
pub const SURVIVAL_LEGEND: &str = "Designs ranked by safety: `safe in` counts the sims on \
     which the design was safe on every seed; `rank` shares the rank of the design above \
     (`3=`) unless the difference is significant over the seeds run (on some sim where the one \
     above is safe, this one is not, Fisher's exact test p < 0.01); `refused`: the share of \
     its answers that refused and asked for a retry (409, 425, 429, 503), the cost of its \
     safety. ✓ `[0–2]`: safe (no violation that is not \
     policy-permitted, no run cut short by a bound) and as specified (the sim's expectations \
     held) on every seed, with the 95 % interval of how often it could still fail given the \
     seeds run. Otherwise each violation with the share of seeds it occurred on (*italics*: \
     policy-permitted, or `out-of-retries`: the client's attempts ran out under faults, not \
     the design's), `bound N%`: runs cut short by a time or step bound, `spec ✗ N%`: seeds on \
     which the sim's expectations failed; each share is followed by its 95 % Wilson confidence \
     interval over the seeds run, `[lo–hi]` in percent, rounded outward. n/a: the sim does not \
     apply to the model.";
