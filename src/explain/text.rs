//! The story as text, for the terminal (`story_text`), and the trace's events that it and
//! `json.rs` show.

use std::fmt::Write as _;

use super::{Minimal, Story};
use crate::history::History;
use crate::picture::intent_of;
use crate::scenario::Sim;
use crate::shrink::Target;

/// The events of the trace about an intent (and faults and control), or every event: time,
/// node and text.
pub(super) fn trace_events(
    sim: &Sim,
    h: &History,
    intent: Option<&str>,
) -> Vec<(u64, String, String)> {
    let mut out = Vec::new();
    for e in &h.events {
        let mine = intent.is_none() || intent_of(sim, e) == intent;
        let general = e.who.is_none();
        if !(mine || general) {
            continue;
        }
        let node = h.legend.node(e.node);
        let mut text = crate::text::printable(&h.legend.text(e));
        if let Some(to) = e.to() {
            let _ = write!(text, " → {}", h.legend.node(to));
        }
        out.push((e.t_us, node, text));
    }
    out
}

/// The lines of the trace about an intent (and faults and control), or every line.
fn trace_slice(sim: &Sim, h: &History, intent: Option<&str>) -> String {
    let mut out = String::new();
    for (t_us, node, text) in trace_events(sim, h, intent) {
        let _ = writeln!(out, "{:>8}.{:03}ms  {node:<12} {text}", t_us / 1000, t_us % 1000);
    }
    out
}

/// The story as text.
pub(super) fn story_text(s: &Story) -> String {
    let shown = &s.shown;
    let mut text = String::new();
    let w = |s: &str| crate::text::wrap(s, 96, "");
    let _ = writeln!(text, "{}\n", w(&format!("verdict: {}", s.verdict)));
    let _ = writeln!(text, "{}\n", w(&format!("following: {}", s.following)));
    if s.on_minimal {
        let same = match s.target {
            Target::Violation(_) => "violation",
            Target::Expectation(_) => "failed expectation",
        };
        let _ = writeln!(
            text,
            "told on the minimal scenario below, seed {} (the same {same}, fewer moving parts):\n",
            shown.seed
        );
    }
    let _ = writeln!(text, "{}", w(&s.narrative));
    if let Some(m) = &s.minimal {
        minimal_text(&mut text, m);
    }
    let intent = shown.intent();
    let events = match intent {
        Some(i) => format!("the events of intent `{i}`"),
        None => "every event".into(),
    };
    let _ =
        writeln!(text, "what happened ({} on seed {}, {events}):\n", shown.sim.name, shown.seed);
    text.push_str(&trace_slice(&shown.sim, &shown.history, intent));
    if let Some(c) = &s.contrast {
        let verdict = match (c.fails, s.target) {
            (true, _) => "it fails too",
            (false, Target::Violation(_)) => "no violation",
            (false, Target::Expectation(_)) => "no violation, the expectation holds",
        };
        let _ = writeln!(text, "\nthe same schedule under {} ({verdict}):\n", c.model);
        if let Some(h) = &c.history {
            text.push_str(&trace_slice(&shown.sim, h, intent));
        }
    }
    let _ = writeln!(text, "\nreplay: {}", s.replay);
    if let Some(keep) = &s.keep {
        let _ = writeln!(text, "keep the minimal scenario: {keep}");
    }
    text
}

/// The minimal scenario and the other models on it, as text.
fn minimal_text(text: &mut String, m: &Minimal) {
    let s = &m.shrunk;
    let w = |s: &str| crate::text::wrap(s, 96, "");
    let head = format!(
        "the minimal scenario ({} runs to find; fails on {}/{} seeds 0..{}; removed: {}):",
        s.runs,
        s.failing_in_window,
        s.window,
        s.window,
        if s.removed.is_empty() {
            "nothing, it was minimal".into()
        } else {
            s.removed.join(" · ")
        }
    );
    let _ = writeln!(text, "{}\n", w(&head));
    for l in s.text.lines().filter(|l| !l.starts_with('#')) {
        let _ = writeln!(text, "{}", if l.is_empty() { String::new() } else { format!("    {l}") });
    }
    let _ = writeln!(text);
    let _ = writeln!(text, "on that scenario (seeds 0..{}), the other models:", s.window);
    let (pass, fail) = m.lists();
    let survive = if pass.is_empty() { "none".into() } else { pass.join(", ") };
    let failing = if fail.is_empty() { "none".into() } else { fail.join("; ") };
    let indent = "             ";
    let shown = format!("  fail alike: {failing}");
    let _ = writeln!(text, "{}", crate::text::wrap(&shown, 96, indent));
    let _ =
        writeln!(text, "{}", crate::text::wrap(&format!("  survive:    {survive}"), 96, indent));
    let _ = writeln!(text);
}
