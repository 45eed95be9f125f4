//! `idemsim explain`: a failure in plain words. The verdict and what it follows (an invariant
//! broken, or a failed expectation of the sim: a [`Target`]); the story, answering *where did
//! the second execution come from* and *why did the key not stop it*; the minimal scenario
//! (shrunk); which other models survive it; the picture; the replay command; the same as JSON
//! (`json.rs`). With only a model it finds the model's smallest failure among the shipped
//! sims, the teaching sims first (`explain check-first` is the teaching demo).

use std::sync::Arc;

use crate::explore::Strategy;
use crate::history::History;
use crate::model::Model;
use crate::picture;
use crate::report::RunReport;
use crate::scenario::Sim;
use crate::shrink::{self, Hit, Shrunk, Target};

mod html;
mod json;
mod narrative;
mod story;
mod text;

use html::story_html;
pub(crate) use narrative::{check_and_save, duplicated, narrative};
pub(crate) use story::run_with;
use story::{SEARCH_SEEDS, compute, find_failure, search_dirs};
use text::story_text;

/// An explanation, as text and as an HTML page.
pub struct Explanation {
    /// The explanation as text, for the terminal.
    pub text: String,
    /// The explanation as a self-contained HTML page.
    pub html: String,
    /// The failing run was found (false: the model passed everything searched).
    pub failed: bool,
    /// The explanation as JSON (`"format": "idemsim-explain"`, version 1;
    /// `schemas/explain.v1.schema.json`).
    pub json: serde_json::Value,
}

/// What to explain and what to compare it with.
#[derive(Debug, Clone, Default)]
pub struct ExplainOptions {
    /// What to follow (default: the first violation that is not policy-permitted, else the
    /// first failed expectation).
    pub target: Option<Target>,
    /// The other models run on the minimal scenario (default: every model of the catalogue).
    pub others: Option<Vec<Arc<Model>>>,
    /// Every run explored with this strategy (`--explore`), else calibrated: the search, the
    /// shrink, the other models and the contrast, and every command printed names it.
    pub explore: Option<Strategy>,
}

/// A failing run: the sim, the seed, its report and history, what it shows of the target.
pub(crate) struct Failure {
    pub(crate) sim: Arc<Sim>,
    pub(crate) seed: u64,
    pub(crate) report: RunReport,
    pub(crate) history: History,
    pub(crate) hit: Hit,
}

impl Failure {
    /// The intent the story is about (none: a failed expectation on the end state).
    pub(crate) fn intent(&self) -> Option<&str> {
        self.hit.intent(&self.sim)
    }
}

/// Another model on the minimal scenario: on how many seeds it fails the target, and the
/// other violations it shows (not policy-permitted), with their seed counts.
struct Other {
    model: Arc<Model>,
    /// The target's label (`duplicate-row`, `expectation status`) and its seeds; empty: it
    /// survives.
    same: Vec<(String, u64)>,
    /// Other violations and their seeds.
    also: Vec<(String, u64)>,
    /// Seeds run.
    runs: u64,
}

impl Other {
    /// `no-key (duplicate-row 16/16; also replay-mismatch 16/16)`, or for a survivor
    /// `lease` or `inbox (also duplicate-effect 3/16)`.
    fn text(&self) -> String {
        let list = |l: &[(String, u64)]| -> Vec<String> {
            l.iter().map(|(n, x)| format!("{n} {x}/{}", self.runs)).collect()
        };
        let (same, other) = (list(&self.same), list(&self.also));
        let others =
            if other.is_empty() { String::new() } else { format!("; also {}", other.join(", ")) };
        match (same.is_empty(), other.is_empty()) {
            (true, true) => self.model.name.clone(),
            (true, false) => format!("{} ({})", self.model.name, &others[2..]),
            (false, _) => format!("{} ({}{others})", self.model.name, same.join(", ")),
        }
    }
}

/// An explanation of one failure, computed before anything is printed: plain data that
/// [`story_text`], [`story_html`] and `json::story_json` render.
struct Story {
    /// The model's name.
    model: String,
    /// What the story follows (the page's title names it).
    target: Target,
    /// `following: …`: the violation, or the failed expectation with its values.
    following: String,
    /// `{model} fails {sim} on seed {seed}: …`.
    verdict: String,
    /// The failure found (before shrinking).
    found: Found,
    /// The run the story is told on: the minimal scenario's when it fails alike, else the
    /// failure found.
    shown: Failure,
    /// `shown` is the minimal scenario's run.
    on_minimal: bool,
    /// The story in plain words ([`narrative`]).
    narrative: String,
    /// The minimal scenario and how the other models fare on it.
    minimal: Option<Minimal>,
    /// The same schedule under a model that survives it.
    contrast: Option<Contrast>,
    /// The command that replays the failure found.
    replay: String,
    /// The command that keeps the minimal scenario (when there is one).
    keep: Option<String>,
}

/// Where the failure was found.
struct Found {
    sim: String,
    path: String,
    seed: u64,
}

/// The minimal scenario, with the other models on it.
struct Minimal {
    shrunk: Shrunk,
    others: Vec<Other>,
}

impl Minimal {
    /// The other models that survive it and that fail alike, as text.
    fn lists(&self) -> (Vec<String>, Vec<String>) {
        let (fail, pass): (Vec<&Other>, Vec<&Other>) =
            self.others.iter().partition(|o| !o.same.is_empty());
        (pass.iter().map(|o| o.text()).collect(), fail.iter().map(|o| o.text()).collect())
    }
}

/// The shown run's schedule under another model.
struct Contrast {
    model: String,
    /// It shows a violation too.
    fails: bool,
    history: Option<History>,
}

/// Explain the model's first failure (on `sim` if given, else among the shipped sims).
pub fn explain(
    model: &Arc<Model>,
    sim: Option<&Arc<Sim>>,
    seed: Option<u64>,
) -> Result<Explanation, shrink::ShrinkError> {
    explain_with(model, sim, seed, &ExplainOptions::default())
}

/// Explain the model's first failure of `opts.target` (on `sim` if given, else among the
/// shipped sims), comparing with `opts.others`.
pub fn explain_with(
    model: &Arc<Model>,
    sim: Option<&Arc<Sim>>,
    seed: Option<u64>,
    opts: &ExplainOptions,
) -> Result<Explanation, shrink::ShrinkError> {
    let Some(f) = find_failure(model, sim, seed, (opts.target, opts.explore.as_ref())) else {
        return Ok(nothing_found(model, sim, seed, opts.target));
    };
    let story = compute(model, f, opts);
    Ok(Explanation {
        text: story_text(&story),
        html: story_html(&story),
        failed: true,
        json: json::story_json(&story),
    })
}

/// No failure on what was searched: nothing to explain.
fn nothing_found(
    model: &Model,
    sim: Option<&Arc<Sim>>,
    seed: Option<u64>,
    target: Option<Target>,
) -> Explanation {
    let where_ = sim.map(|s| s.name.clone()).unwrap_or_else(|| {
        search_dirs().into_iter().map(|(label, _)| label).collect::<Vec<_>>().join("; ")
    });
    let seeds = match seed {
        Some(n) => format!("seed {n}"),
        None => format!("the first {SEARCH_SEEDS} seeds of each sim's range"),
    };
    let what = match target {
        None => "no violation nor failed expectation".to_string(),
        Some(Target::Violation(v)) => format!("no violation {}", v.name()),
        Some(Target::Expectation(k)) => format!("no failed expectation {}", k.name()),
    };
    let text =
        format!("model {} showed {what} on {where_} ({seeds}): nothing to explain.\n", model.name);
    let html = picture::html_page(
        &format!("{}: no failure found", model.name),
        &[(String::new(), picture::pre(&text))],
    );
    let json = json::nothing_json(model, target, &text);
    Explanation { text, html, failed: false, json }
}
