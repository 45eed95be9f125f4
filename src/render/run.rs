//! One run as text: header, attempts, document writes, checks and the verdict with its
//! replay command, one function each.

use std::fmt::Write as _;

use crate::model::Model;
use crate::report::RunReport;
use crate::run::{self, RunOutput};
use crate::scenario::Sim;
use crate::text::printable;
use crate::units::show_ms;

/// The text report of one run: header, trace (when kept), attempts, counts, checks, violations
/// and the verdict with its replay command.
pub fn run_text(sim: &Sim, model: &Model, out: &RunOutput, replay: &str) -> String {
    let r = &out.report;
    let mut o = String::new();
    let _ = writeln!(o, "idemsim run: sim {} · model {} · seed {}", sim.name, model.name, r.seed);
    run_header(&mut o, sim, model);
    if !r.faults.is_empty() || sim.faults.describe() != "none" || !sim.injects.is_empty() {
        let each: Vec<String> =
            r.faults.iter().map(|(n, k)| format!("{} ×{k}", printable(n))).collect();
        let each = if each.is_empty() { "none".to_string() } else { each.join(", ") };
        let _ = writeln!(o, "  fired: {each}");
    }
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
pub(super) fn run_header(o: &mut String, sim: &Sim, model: &Model) {
    let w = &sim.world;
    let d = &model.driver;
    let _ = write!(
        o,
        "  world: {} process(es) started {}, wait budget {} ms, client timeout {} ms, network \
         latency {}..{} ms",
        w.processes,
        w.start.name(),
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
    let (stack, runtime) = (printable(&model.stack), model.runtime.describe());
    let _ = writeln!(o, "  stack: {stack}, {runtime}");
    let _ = writeln!(
        o,
        "  driver: {} awaits, {} journal, {}, {}",
        match d.awaits {
            crate::model::Awaits::Explicit => "explicit (synchronous)",
            crate::model::Awaits::EveryStatement => "every-statement (asynchronous)",
        },
        d.journal.name(),
        d.begin.sql(),
        if d.pool == 0 && model.thread_times().is_some() {
            "a connection per request".to_string()
        } else if d.pool == 0 {
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
pub(super) fn run_attempts(o: &mut String, r: &RunReport) {
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
pub(super) fn run_writes(o: &mut String, r: &RunReport) {
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
pub(super) fn run_checks(o: &mut String, r: &RunReport) {
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
pub(super) fn run_verdict(o: &mut String, r: &RunReport, replay: &str) {
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
