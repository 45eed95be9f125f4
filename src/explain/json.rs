//! `explain --json`: the story as versioned JSON (`"format": "idemsim-explain"`, version 1),
//! carrying what the text carries in structured form. Its schema:
//! `schemas/explain.v1.schema.json`.

use serde_json::{Value, json};

use super::text::trace_events;
use super::{Failure, Minimal, Other, Story};
use crate::history::History;
use crate::model::Model;
use crate::scenario::Sim;
use crate::shrink::{Hit, Target};

/// The format's name and version, as every versioned output carries them.
const FORMAT: &str = "idemsim-explain";
const VERSION: u64 = 1;

/// A target as JSON: `{"kind": "violation"|"expectation", "name", "spec"}`.
fn target_json(t: Target) -> Value {
    let name = match t {
        Target::Violation(v) => v.name(),
        Target::Expectation(k) => k.name(),
    };
    json!({ "kind": t.family(), "name": name, "spec": t.spec() })
}

/// What the run shows of the target: the target, the intent, and the violation's detail or
/// the failed check.
fn hit_json(f: &Failure) -> Value {
    let t = f.hit.target();
    let (detail, check) = match &f.hit {
        Hit::Violation(x) => (x.detail.clone(), Value::Null),
        Hit::Expectation(_, c) => (
            format!("`{}`: expected {}, got {}", c.what, c.expected, c.actual),
            json!({ "what": c.what, "expected": c.expected, "actual": c.actual }),
        ),
    };
    let name = match t {
        Target::Violation(v) => v.name(),
        Target::Expectation(k) => k.name(),
    };
    json!({
        "kind": t.family(),
        "name": name,
        "spec": t.spec(),
        "intent": f.intent(),
        "detail": detail,
        "check": check,
    })
}

/// The events of the trace the text shows.
fn events_json(sim: &Sim, h: &History, intent: Option<&str>) -> Value {
    trace_events(sim, h, intent)
        .into_iter()
        .map(|(t_us, node, text)| json!({ "t_us": t_us, "node": node, "text": text }))
        .collect()
}

fn other_json(o: &Other) -> Value {
    let counts = |l: &[(String, u64)]| -> Value {
        l.iter().map(|(n, x)| json!({ "name": n, "seeds": x })).collect()
    };
    json!({
        "model": o.model.name,
        "fails_alike": !o.same.is_empty(),
        "target_seeds": o.same.iter().map(|(_, x)| *x).sum::<u64>(),
        "also": counts(&o.also),
        "runs": o.runs,
    })
}

fn minimal_json(m: &Minimal) -> Value {
    let s = &m.shrunk;
    json!({
        "toml": s.text,
        "seed": s.seed,
        "window": s.window,
        "failing_in_window": s.failing_in_window,
        "runs": s.runs,
        "budget_spent": s.budget_spent,
        "removed": s.removed,
        "others": m.others.iter().map(other_json).collect::<Vec<_>>(),
    })
}

/// The story as JSON.
pub(super) fn story_json(s: &Story) -> Value {
    let shown = &s.shown;
    let intent = shown.intent();
    let contrast = s.contrast.as_ref().map(|c| {
        json!({
            "model": c.model,
            "fails": c.fails,
            "events": c.history.as_ref().map(|h| events_json(&shown.sim, h, intent)),
        })
    });
    json!({
        "format": FORMAT,
        "version": VERSION,
        "model": s.model,
        "found": true,
        "target": hit_json(shown),
        "following": s.following,
        "verdict": s.verdict,
        "failure": { "sim": s.found.sim, "path": s.found.path, "seed": s.found.seed },
        "told_on": {
            "minimal": s.on_minimal,
            "sim": shown.sim.name,
            "seed": shown.seed,
        },
        "narrative": s.narrative,
        "minimal": s.minimal.as_ref().map(minimal_json),
        "events": events_json(&shown.sim, &shown.history, intent),
        "contrast": contrast,
        "replay": s.replay,
        "keep": s.keep,
    })
}

/// Nothing to explain, as JSON.
pub(super) fn nothing_json(model: &Model, target: Option<Target>, text: &str) -> Value {
    json!({
        "format": FORMAT,
        "version": VERSION,
        "model": model.name,
        "found": false,
        "target": target.map(target_json),
        "message": text.trim_end(),
    })
}
