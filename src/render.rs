//! Renderings of reports as text: one run, a sweep, the matrix tables (the reference table,
//! the compact table, the survival Markdown) and JSON. Pure functions of their inputs.

use std::fmt::Write as _;
use std::sync::Arc;

use crate::catalog;
use crate::model::Model;
use crate::report::RunReport;
use crate::run::{self, RunOutput};
use crate::scenario::Sim;
use crate::sweep::{self, Cell};
use crate::text::{markdown_cell, printable};
use crate::units::show_ms;

mod html;
pub use html::{matrix_html, run_html};

/// The text report of one run: header, trace (when kept), attempts, counts, checks, violations
/// and the verdict with its replay command.
pub fn run_text(sim: &Sim, model: &Model, out: &RunOutput, replay: &str) -> String {
    let r = &out.report;
    let mut o = String::new();
    let _ = writeln!(o, "idemsim run: sim {} · model {} · seed {}", sim.name, model.name, r.seed);
    run_header(&mut o, sim, model);
    for w in &r.warnings {
        let _ = writeln!(o, "  warning: {w}");
    }
    if let Some(h) = &out.history {
        let _ = writeln!(o, "\ntrace:");
        o.push_str(&h.render());
    }
    run_attempts(&mut o, r);
    let _ = writeln!(
        o,
        "\nrows: {}   stored keys: {}   effects: {}",
        r.rows.len(),
        r.keys,
        r.effects_total
    );
    run_writes(&mut o, r);
    run_checks(&mut o, r);
    let _ = writeln!(
        o,
        "\n{} events, trace hash {}, ended at {:.3} ms simulated",
        r.events, r.trace_hash, r.end_ms
    );
    run_verdict(&mut o, r, replay);
    o
}

/// An explored run's text (`--explore`): [`run_text`]'s, its first line naming the strategy
/// and followed by what the explorer decided.
pub fn explored_run_text(text: &str, note: &run::ExploreNote) -> String {
    let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
    format!("{first} · explore {}\n  {}\n{rest}", note.replay_name(), note.line())
}

/// A run's header after its first line: the world, the driver, the model's program, the
/// faults and the keys' retention.
fn run_header(o: &mut String, sim: &Sim, model: &Model) {
    let w = &sim.world;
    let d = &model.driver;
    let _ = write!(
        o,
        "  world: {} process(es), wait budget {} ms, client timeout {} ms, network latency \
         {}..{} ms",
        w.processes,
        show_ms(w.wait_budget_us.unwrap_or(model.wait_budget_us)),
        show_ms(w.client_timeout_us),
        show_ms(w.latency_us.0),
        show_ms(w.latency_us.1)
    );
    if w.effect_latency_us != w.latency_us {
        let (lo, hi) = w.effect_latency_us;
        let _ = write!(o, ", effect latency {}..{} ms", show_ms(lo), show_ms(hi));
    }
    if let Some((lo, hi)) = w.clock_skew_us {
        let signed =
            |us: i64| format!("{}{}", if us < 0 { "-" } else { "" }, show_ms(us.unsigned_abs()));
        let _ = write!(o, ", clock skew {}..{} ms", signed(lo), signed(hi));
    }
    o.push('\n');
    let _ = writeln!(
        o,
        "  driver: {} awaits, {} journal, {}, {}",
        match d.awaits {
            crate::model::Awaits::Explicit => "explicit (synchronous)",
            crate::model::Awaits::EveryStatement => "every-statement (asynchronous)",
        },
        d.journal.name(),
        d.begin.sql(),
        if d.pool == 0 {
            "one shared connection per process".to_string()
        } else {
            format!("a pool of {} connections per process", d.pool)
        }
    );
    let _ = writeln!(o, "  model: {}", model.program_text());
    let _ = writeln!(o, "  faults: {}", sim.faults.describe());
    if let Some(line) = run::retention_line(sim, model) {
        let _ = writeln!(o, "  keys: {line}");
    }
}

/// Every attempt of every request and what it got.
fn run_attempts(o: &mut String, r: &RunReport) {
    let _ = writeln!(o, "\nrequests:");
    for q in &r.requests {
        let copies = q.copies.len() as u32;
        for (c, attempts) in q.copies.iter().enumerate() {
            for (n, a) in attempts.iter().enumerate() {
                let name = crate::history::attempt_label(&q.id, copies, c as u32, n as u32 + 1);
                let what = match a.status {
                    Some(s) => format!(
                        "{s} {}{}",
                        a.body.as_deref().unwrap_or(""),
                        if a.replayed { " (replayed)" } else { "" }
                    ),
                    None => "transport failure".into(),
                };
                let _ = writeln!(o, "  {name:<14} {}", printable(&what));
            }
        }
    }
}

/// Document writes, in version order per document: `doc-1 v2 (alice), v3 (bob)`.
fn run_writes(o: &mut String, r: &RunReport) {
    if r.writes.is_empty() {
        return;
    }
    let mut line = String::new();
    for (i, w) in r.writes.iter().enumerate() {
        let same = i > 0 && r.writes[i - 1].doc == w.doc;
        let sep = if i == 0 {
            ""
        } else if same {
            ", "
        } else {
            "; "
        };
        let doc = if same { String::new() } else { format!("{} ", printable(&w.doc)) };
        let _ = write!(line, "{sep}{doc}v{} ({})", w.version, printable(&w.intent));
    }
    let _ = writeln!(o, "document writes: {line}");
}

/// The checks, the bounds hit and the oracle's violations.
fn run_checks(o: &mut String, r: &RunReport) {
    let _ = writeln!(o, "\nchecks:");
    for c in &r.checks {
        let _ = writeln!(o, "  {}", check_line(c));
    }
    for b in &r.bounds_hit {
        let _ = writeln!(o, "  BOUND {}", printable(b));
    }
    if !r.violations.is_empty() {
        let _ = writeln!(o, "\nviolations (oracle):");
        for v in &r.violations {
            let p = if v.permitted { " (policy-permitted)" } else { "" };
            let (intent, detail) = (printable(&v.intent), printable(&v.detail));
            let _ = writeln!(o, "  {}{p}: intent {intent}: {detail}", v.name.name());
        }
    }
}

/// One check as the text report and the HTML page show it: `ok    what: actual` or
/// `FAIL  what: expected E, got A` (printable: a check of a merged shard is read from a file).
pub(crate) fn check_line(c: &crate::report::Check) -> String {
    let (what, actual) = (printable(&c.what), printable(&c.actual));
    if c.held {
        format!("ok    {what}: {actual}")
    } else {
        format!("FAIL  {what}: expected {}, got {actual}", printable(&c.expected))
    }
}

/// The two verdicts: as specified (PASS/FAIL: the sim's expectations) and safe (the oracle:
/// no violation that is not policy-permitted, no bound hit); the replay command on a failure.
fn run_verdict(o: &mut String, r: &RunReport, replay: &str) {
    let hard = r.violations.iter().filter(|v| !v.permitted).count();
    let permitted = r.violations.len() - hard;
    let spec = if r.passed() { "PASS (as specified)" } else { "FAIL (not as specified)" };
    let safety = match (hard, permitted, r.bounds_hit.is_empty()) {
        (_, _, false) => "NOT safe: cut short by a bound".to_string(),
        (0, 0, true) => "safe: no violation".to_string(),
        (0, p, true) => format!("safe: {p} policy-permitted violation(s)"),
        (h, 0, true) => format!("NOT safe: {h} violation(s) found by the oracle"),
        (h, p, true) => {
            format!("NOT safe: {h} violation(s) and {p} policy-permitted found by the oracle")
        }
    };
    let _ = writeln!(o, "{spec} · {safety}");
    if hard > 0 || !r.passed() {
        let _ = writeln!(o, "replay with: {replay}");
    }
}

/// A cell's two verdicts, one line for the sweep text ("" for an n/a cell).
fn verdict_line(c: &Cell) -> String {
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

/// The legend under the reference table.
const REFERENCE_LEGEND: &str = "pass: the case's expectations held on every seed (as \
     specified); FAIL k/n: they failed on k of n seeds (FAIL alone: on every seed). Whether a design is safe is the oracle's \
     verdict, below.\n";

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
fn sweep_header(out: &mut String, sim: &Sim, model: &Model, c: &Cell, jobs: usize) {
    let _ = writeln!(
        out,
        "idemsim sweep: sim {} · model {} · seeds {} · {jobs} job(s)",
        sim.name,
        model.name,
        printable(&c.seeds)
    );
    let _ = writeln!(out, "  faults: {}", sim.faults.describe());
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
    if c.interrupted {
        let _ = writeln!(
            out,
            "  INTERRUPTED: partial aggregate of the {} seed(s) that finished out of {}",
            c.runs, c.seeds
        );
    }
}

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

/// The sweep's violations table: seeds, rate, interval, first seed and its replay; explored
/// (`first`: the cell's first seed), the runs until each was first seen.
fn sweep_violations(
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
    if c.violations.values().any(|v| v.permitted) {
        let _ = writeln!(
            out,
            "  * policy-permitted: caused only by a retry after the key's documented retention"
        );
    }
}

/// The runs until a violation first seen on seed (or schedule) `seed` of a cell starting at
/// `start`: an explored sweep runs its seeds in order (the count is the same for any
/// `--jobs`).
pub fn runs_to_first(seed: u64, start: u64) -> u64 {
    seed.saturating_sub(start).saturating_add(1)
}

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

/// The models ranked by safety: (index, cells safe on every seed, applicable cells), most safe
/// cells first, then the fewest applicable (a design judged on fewer sims is not ahead of one
/// judged on more), then the models' own order.
fn ranked_by_safety(
    sims: &[Arc<Sim>],
    models: &[Arc<Model>],
    cells: &[Cell],
) -> Vec<(usize, (usize, usize))> {
    let mut ranked: Vec<(usize, (usize, usize))> = (0..models.len())
        .map(|mi| {
            let verdicts =
                (0..sims.len()).filter_map(|si| sweep::cell(cells, models.len(), si, mi).verdict());
            let (mut safe, mut applicable) = (0, 0);
            for v in verdicts {
                safe += v.safe as usize;
                applicable += 1;
            }
            (mi, (safe, applicable))
        })
        .collect();
    ranked.sort_by_key(|&(mi, (safe, applicable))| {
        (std::cmp::Reverse(safe), applicable.saturating_sub(safe), mi)
    });
    ranked
}

/// Which models have at least one applicable cell (the others are left out of the tables).
fn applicable_models(sims: &[Arc<Sim>], models: &[Arc<Model>], cells: &[Cell]) -> Vec<bool> {
    (0..models.len())
        .map(|mi| (0..sims.len()).any(|si| sweep::cell(cells, models.len(), si, mi).applicable))
        .collect()
}

/// The line naming the models left out because no sim applies to them ("" if none).
fn not_shown(models: &[Arc<Model>], shown: &[bool]) -> String {
    let hidden: Vec<&str> =
        models.iter().zip(shown).filter(|(_, s)| !**s).map(|(m, _)| m.name.as_str()).collect();
    if hidden.is_empty() {
        return String::new();
    }
    format!("(n/a for every sim, not shown: {})\n", hidden.join(", "))
}

/// Short names for table cells.
fn short(name: &str) -> &str {
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
    out.push_str("| design | safe in |");
    for s in sims {
        let _ = write!(out, " {} |", markdown_cell(&s.name));
    }
    out.push_str("\n|---|---|");
    for _ in sims {
        out.push_str("---|");
    }
    out.push('\n');
    let shown = applicable_models(sims, models, cells);
    for (mi, (safe, applicable)) in ranked_by_safety(sims, models, cells) {
        if !shown[mi] {
            continue;
        }
        let m = &models[mi];
        let _ = write!(out, "| **{}** | {safe}/{applicable} |", markdown_cell(&m.name));
        for si in 0..sims.len() {
            let c = sweep::cell(cells, models.len(), si, mi);
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
                "✓".to_string()
            } else {
                parts.join("<br>")
            };
            let _ = write!(out, " {text} |");
        }
        out.push('\n');
    }
    let note = not_shown(models, &shown);
    if !note.is_empty() {
        let _ = write!(out, "\n{note}");
    }
    let _ = writeln!(out, "\n{SURVIVAL_LEGEND}");
    out
}

/// A first line for tables of an interrupted matrix.
fn interrupted_note(cells: &[Cell]) -> String {
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
fn failure_lines(sims: &[Arc<Sim>], models: &[Arc<Model>], cells: &[Cell]) -> String {
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
fn na_lines(cells: &[Cell]) -> String {
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
fn violation_lines(sims: &[Arc<Sim>], models: &[Arc<Model>], cells: &[Cell]) -> String {
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

/// The version of every JSON output's shape (`"version"` beside `"format": "idemsim-<kind>"`):
/// an added field keeps it, a field removed or renamed bumps it (`schemas/README.md`).
pub const JSON_VERSION: u64 = 1;

/// A JSON output stamped with its format (`idemsim-<kind>`) and [`JSON_VERSION`].
pub fn versioned(kind: &str, mut v: serde_json::Value) -> serde_json::Value {
    if let Some(o) = v.as_object_mut() {
        o.insert("format".into(), format!("idemsim-{kind}").into());
        o.insert("version".into(), JSON_VERSION.into());
    }
    v
}

/// The matrix as JSON (`idemsim-matrix`): every cell (see [`cell_json`]) and the per-model
/// totals.
pub fn matrix_json(models: &[Arc<Model>], cells: &[Cell]) -> String {
    serde_json::to_string_pretty(&matrix_value(models, cells)).expect("serialisable")
}

/// [`matrix_json`] as a value, for outputs that add to it (`matrix --explore`).
pub fn matrix_value(models: &[Arc<Model>], cells: &[Cell]) -> serde_json::Value {
    let json: Vec<serde_json::Value> = cells.iter().map(cell_json).collect();
    let v = serde_json::json!({
        "cells": json,
        "totals": sweep::totals(models, cells),
    });
    versioned("matrix", v)
}

/// A share of `k` seeds out of `runs` as JSON: `rate` (0 to 1) and `ci95`, its Wilson 95 %
/// interval `[lo, hi]` (`[0, 1]` when nothing ran).
pub fn share_json(k: u64, runs: u64) -> serde_json::Value {
    let (lo, hi) = sweep::wilson(k, runs);
    let rate = if runs == 0 { 0.0 } else { k.min(runs) as f64 / runs as f64 };
    serde_json::json!({ "seeds": k, "rate": rate, "ci95": [lo, hi] })
}

/// One cell as JSON: its aggregate and its two verdicts (`safe`, `as_specified`; `null`
/// with `passed` for an `n/a` cell, which ran nothing and neither passed nor failed); each
/// violation with its `rate` and `ci95`, and `rates`: the seeds with a violation
/// (`violating`), with a failed expectation (`failed`) and cut short by a bound (`bounded`),
/// each as [`share_json`].
pub fn cell_json(c: &Cell) -> serde_json::Value {
    let mut v = serde_json::to_value(c).expect("serialisable");
    for (name, stat) in &c.violations {
        let share = share_json(stat.seeds, c.runs);
        v["violations"][name]["rate"] = share["rate"].clone();
        v["violations"][name]["ci95"] = share["ci95"].clone();
    }
    v["rates"] = serde_json::json!({
        "violating": share_json(c.violating_seeds, c.runs),
        "failed": share_json(c.failed_seeds, c.runs),
        "bounded": share_json(c.bounded_runs, c.runs),
    });
    // No verdict where no seed ran: an n/a cell, or one an interrupted matrix never reached.
    let verdict = c.verdict().filter(|_| c.runs > 0);
    v["safe"] = verdict.map_or(serde_json::Value::Null, |x| x.safe.into());
    v["as_specified"] = verdict.map_or(serde_json::Value::Null, |x| x.as_specified.into());
    if verdict.is_none() {
        v["passed"] = serde_json::Value::Null;
    }
    v
}

/// The marks of one cell in the catalogue tables (Markdown, HTML): each violation with the
/// share of seeds it occurred on and its interval ([`share_mark`]; `permitted`:
/// policy-permitted), runs cut short by a bound, and failed expectations, each as (label,
/// share, permitted); empty when the cell is safe and as specified.
fn cell_marks(c: &Cell) -> Vec<(String, String, bool)> {
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
fn verdict_marks(c: &Cell) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if c.bounded_runs > 0 {
        out.push(("bound".to_string(), share_mark(c.bounded_runs, c.runs)));
    }
    if c.applicable && !c.passed {
        out.push(("spec ✗".to_string(), share_mark(c.failed_seeds, c.runs)));
    }
    out
}

/// A cell no seed of which ran (an interrupted matrix): neither a pass nor a failure.
pub(crate) const NOT_RUN: &str = "not run";

/// The legend printed beside the catalogue tables.
pub const SURVIVAL_LEGEND: &str = "Designs ranked by safety: `safe in` counts the sims on \
     which the design was safe on every seed. ✓: safe (no violation that is not \
     policy-permitted, no run cut short by a bound) and as specified (the sim's expectations \
     held) on every seed. \
     Otherwise each violation with the share of seeds it occurred on (*italics*: \
     policy-permitted), `bound N%`: runs cut short by a time or step bound, `spec ✗ N%`: seeds on \
     which the sim's expectations failed; each share is followed by its 95 % Wilson confidence \
     interval over the seeds run, `[lo–hi]` in percent, rounded outward. n/a: the sim does not \
     apply to the model.";

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
}
