//! `idemsim lesson`: one run as a page a class steps through. The run (a sim, a model, a
//! seed: by default the first seed of the sim's range that breaks an invariant) and the same
//! client schedule under a fix (`--vs`), each computed here as plain data: lanes (one per
//! client copy, server process and dependency that acts), steps (the events, with the
//! committed tables after each, [`state::tables`]), the race window (open, or closed by the
//! fix), the violating step named in words, the step where the fix blocks or replays, and
//! `explain`'s narrative anchored to the steps it tells. [`page`] renders it as one
//! self-contained HTML file; `--json` prints the same data.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::explain::{self, Failure};
use crate::history::{Actor, Event, History, Node, StateTrack, What};
use crate::model::Model;
use crate::picture::{self, intent_of};
use crate::report::ViolationKind;
use crate::run::{self, RunOptions};
use crate::scenario::Sim;
use crate::shrink::Hit;

pub mod page;
pub mod state;

/// Seeds tried, in order, when no seed is given.
pub const SEARCH_SEEDS: usize = 200;

/// What a lesson shows.
pub struct LessonOptions {
    /// The sim.
    pub sim: Arc<Sim>,
    /// The model that races.
    pub model: Arc<Model>,
    /// The fix shown on the same schedule (none: the run alone).
    pub vs: Option<Arc<Model>>,
    /// The seed (none: the first violating seed of the sim's range).
    pub seed: Option<u64>,
}

/// A lesson: the page and its data.
pub struct Lesson {
    /// The self-contained HTML page.
    pub html: String,
    /// The data the page embeds (`"format": "idemsim-lesson"`).
    pub json: serde_json::Value,
    /// The seed shown.
    pub seed: u64,
}

/// A lane: a client copy, a server process, a dependency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum LaneId {
    Copy(u32, u32),
    Server(u32),
    Receiver,
    Control,
}

/// Everything the page embeds.
#[derive(Serialize)]
struct PageData {
    format: &'static str,
    version: u32,
    title: String,
    sim: String,
    seed: u64,
    replay: String,
    palette: Vec<&'static str>,
    main: RunView,
    vs: Option<RunView>,
    narrative: Vec<Para>,
}

/// One run as the page draws it.
#[derive(Serialize)]
struct RunView {
    model: String,
    verdict: String,
    alt: String,
    lanes: Vec<LaneView>,
    steps: Vec<StepView>,
    end_us: u64,
    not_drawn: usize,
    window: Option<Window>,
    violation: Option<Mark>,
    fix: Option<Mark>,
}

#[derive(Serialize)]
struct LaneView {
    name: String,
    kind: &'static str,
    color: &'static str,
    shape: &'static str,
}

#[derive(Serialize)]
struct StepView {
    /// The event's index in the run's history.
    event: usize,
    t_us: u64,
    time: String,
    lane: usize,
    /// The lane a message goes to, and the step where it arrives (none: it never did).
    to: Option<usize>,
    arrive: Option<usize>,
    text: String,
    fault: bool,
    rows: u64,
    keys_done: u64,
    keys_in_progress: u64,
    tables: state::Tables,
}

#[derive(Serialize)]
struct Window {
    from: usize,
    to: usize,
    from_us: u64,
    to_us: u64,
    closed: bool,
    label: String,
}

#[derive(Serialize)]
struct Mark {
    step: usize,
    name: String,
    words: String,
}

#[derive(Serialize)]
struct Para {
    step: usize,
    text: String,
}

/// The Okabe–Ito colour for the k-th client copy; black for processes and dependencies.
const COPY_COLORS: [&str; 6] = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"];
const COPY_SHAPES: [&str; 6] = ["circle", "triangle", "square", "diamond", "cross", "star"];

/// Build the lesson: find the seed, run the model (and the fix) with their histories.
pub fn lesson(o: &LessonOptions) -> Result<Lesson, String> {
    let seed = match o.seed {
        Some(s) => s,
        None => first_violating_seed(&o.sim, &o.model).ok_or_else(|| {
            format!(
                "model {} breaks no invariant on the first {SEARCH_SEEDS} seeds of sim {}: \
                 nothing to teach there; give --seed or another sim",
                o.model.name, o.sim.name
            )
        })?,
    };
    let pick = |r: &crate::report::RunReport| {
        Hit::first_violation(r).or_else(|| Hit::first_expectation(r))
    };
    let main = run_failure(&o.sim, &o.model, seed, pick)?;
    let steps = (main.history.events.iter()).filter(|e| !bookkeeping(&e.what)).count();
    if steps > picture::MAX_EVENTS {
        return Err(format!(
            "seed {seed} of sim {} takes {steps} steps under {}; a lesson page steps through at \
             most {}: shrink the sim first (idemsim shrink {} --model {} --seed {seed})",
            o.sim.name,
            o.model.name,
            picture::MAX_EVENTS,
            crate::text::shell_arg(&crate::catalog::display_path(&o.sim.path)),
            crate::text::shell_arg(&crate::catalog::cli_name(&o.model)),
        ));
    }
    let intent = main.intent().map(str::to_string);
    let mut view = run_view(&main.sim, &o.model, &main.history, &main.report, intent.as_deref());
    mark_violation(&mut view, &main);
    let vs = match &o.vs {
        Some(m) => Some(vs_view(&o.sim, m, seed, intent.as_deref())?),
        None => None,
    };
    let narrative = narrative(&main, &o.model, &view);
    let data = PageData {
        format: "idemsim-lesson",
        version: 1,
        title: format!(
            "How {} fails {} on seed {seed}: {}",
            o.model.name,
            o.sim.name,
            main.hit.following()
        ),
        sim: o.sim.name.clone(),
        seed,
        replay: crate::catalog::replay_command(
            &crate::catalog::display_path(&o.sim.path),
            &crate::catalog::cli_name(&o.model),
            seed,
        ),
        palette: COPY_COLORS.to_vec(),
        main: view,
        vs,
        narrative,
    };
    let json = serde_json::to_value(&data).map_err(|e| e.to_string())?;
    Ok(Lesson { html: page::html(&data.title, &json), json, seed })
}

/// The first seed of the sim's range (at most [`SEARCH_SEEDS`]) on which the model breaks an
/// invariant (not policy-permitted), run in order.
pub fn first_violating_seed(sim: &Arc<Sim>, model: &Arc<Model>) -> Option<u64> {
    sim.seeds.clone().take(SEARCH_SEEDS).find(|&s| {
        run::run(sim, model, s, RunOptions::default())
            .is_ok_and(|o| o.report.violations.iter().any(|v| !v.permitted))
    })
}

/// The run with its history; a run that shows nothing wrong is still shown (no violation).
fn run_failure(
    sim: &Arc<Sim>,
    model: &Arc<Model>,
    seed: u64,
    pick: impl Fn(&crate::report::RunReport) -> Option<Hit>,
) -> Result<Failure, String> {
    if let Some(f) = explain::run_with(sim, model, (seed, None), pick) {
        return Ok(f);
    }
    Err(format!(
        "model {} shows neither a violation nor a failed expectation on sim {} seed {seed}: \
         nothing to teach; try without --seed (the first violating seed is found)",
        model.name, sim.name
    ))
}

/// The fix on the same sim and seed (the same client schedule).
fn vs_view(
    sim: &Arc<Sim>,
    m: &Arc<Model>,
    seed: u64,
    intent: Option<&str>,
) -> Result<RunView, String> {
    let out =
        run::run(sim, m, seed, RunOptions { keep_history: true }).map_err(|e| e.to_string())?;
    let h = out.history.as_ref().ok_or("no history")?;
    let mut v = run_view(sim, m, h, &out.report, intent);
    let broken =
        out.report.violations.iter().any(|x| !x.permitted && Some(x.intent.as_str()) == intent);
    // A fix that shows the same violation neither blocks nor replays it: nothing to mark.
    v.fix = if broken { None } else { fix_mark(sim, h, intent, &v) };
    if let Some(w) = &mut v.window
        && !broken
    {
        w.closed = true;
        w.label = format!(
            "closed under {}: no other execution checked the key between this check and this save",
            m.name
        );
    }
    Ok(v)
}

/// Is this event bookkeeping (no lane of its own is drawn for it)?
fn bookkeeping(w: &What) -> bool {
    matches!(w, What::Quiescent | What::Probe { .. })
}

/// The lane of an event: a client's events on the lane of their copy.
fn lane_of(e: &Event) -> LaneId {
    match e.node {
        Node::Client(r) => LaneId::Copy(r, copy_of(e.who)),
        Node::Server(p) => LaneId::Server(p),
        Node::Receiver => LaneId::Receiver,
        Node::Control => LaneId::Control,
    }
}

fn copy_of(who: Option<Actor>) -> u32 {
    match who {
        Some(Actor::Attempt { copy, .. }) => copy,
        _ => 0,
    }
}

/// Where a message goes: a reply to its attempt's copy.
fn to_lane(e: &Event) -> Option<LaneId> {
    e.to().map(|n| match n {
        Node::Client(r) => LaneId::Copy(r, copy_of(e.who)),
        Node::Server(p) => LaneId::Server(p),
        Node::Receiver => LaneId::Receiver,
        Node::Control => LaneId::Control,
    })
}

/// The steps drawn: events that are not bookkeeping, at most [`picture::MAX_EVENTS`].
fn step_events(h: &History) -> Vec<usize> {
    (0..h.events.len())
        .filter(|&i| !bookkeeping(&h.events[i].what))
        .take(picture::MAX_EVENTS)
        .collect()
}

/// Lane names and cues, in lane order.
fn lane_views(h: &History, lanes: &[LaneId]) -> Vec<LaneView> {
    let mut k = 0;
    lanes
        .iter()
        .map(|l| match *l {
            LaneId::Copy(r, c) => {
                let (color, shape) = (COPY_COLORS[k % 6], COPY_SHAPES[k % 6]);
                k += 1;
                let copies = h.legend.requests.get(r as usize).map_or(1, |q| q.1);
                let name = crate::history::attempt_label(
                    h.legend.requests.get(r as usize).map_or("?", |q| q.0.as_str()),
                    copies,
                    c,
                    1,
                );
                LaneView { name, kind: "client copy", color, shape }
            }
            LaneId::Server(p) => LaneView {
                name: h.legend.node(Node::Server(p)),
                kind: "server process",
                color: "#000000",
                shape: "bar",
            },
            LaneId::Receiver | LaneId::Control => LaneView {
                name: h.legend.node(if *l == LaneId::Receiver {
                    Node::Receiver
                } else {
                    Node::Control
                }),
                kind: "dependency",
                color: "#000000",
                shape: "bar",
            },
        })
        .collect()
}

/// One run as the page draws it.
fn run_view(
    sim: &Sim,
    model: &Model,
    h: &History,
    report: &crate::report::RunReport,
    intent: Option<&str>,
) -> RunView {
    let idx = step_events(h);
    let shown = idx.last().map_or(0, |i| i + 1);
    let mut lanes: Vec<LaneId> = idx
        .iter()
        .flat_map(|&i| std::iter::once(lane_of(&h.events[i])).chain(to_lane(&h.events[i])))
        .collect();
    lanes.sort();
    lanes.dedup();
    let step_of: BTreeMap<usize, usize> = idx.iter().enumerate().map(|(s, &i)| (i, s)).collect();
    let arrivals = picture::arrivals(h, shown);
    let counts = StateTrack::of(h);
    let tables = state::tables(h, shown);
    let pos = |l: LaneId| lanes.iter().position(|x| *x == l).unwrap_or(0);
    let steps: Vec<StepView> = idx
        .iter()
        .map(|&i| {
            let e = &h.events[i];
            let (rows, keys_done, keys_in_progress) = counts.after[i];
            StepView {
                event: i,
                t_us: e.t_us,
                time: format!("{} ms", crate::units::show_ms(e.t_us)),
                lane: pos(lane_of(e)),
                to: to_lane(e).map(pos),
                arrive: arrivals.get(&i).copied().flatten().and_then(|j| step_of.get(&j).copied()),
                text: crate::text::printable(&h.legend.text(e)),
                fault: picture::is_fault(&e.what),
                rows,
                keys_done,
                keys_in_progress,
                tables: tables[i].clone(),
            }
        })
        .collect();
    let window = intent.and_then(|x| picture::race_window(h, sim, x)).and_then(|(a, b)| {
        let (from, to) = (nearest(&step_of, a)?, nearest(&step_of, b)?);
        Some(Window {
            from,
            to,
            from_us: h.events[a].t_us,
            to_us: h.events[b].t_us,
            closed: false,
            label: "race window: key checked, not yet saved".into(),
        })
    });
    let lane_views = lane_views(h, &lanes);
    let verdict = verdict(model, report);
    let alt = alt_text(model, &lane_views, &steps, &verdict);
    let end_us = steps.last().map_or(0, |s| s.t_us);
    let not_drawn = h.events.len() - shown;
    RunView {
        model: model.name.clone(),
        verdict,
        alt,
        lanes: lane_views,
        steps,
        end_us,
        not_drawn,
        window,
        violation: None,
        fix: None,
    }
}

/// The step of event `i`, or of the last step before it.
fn nearest(step_of: &BTreeMap<usize, usize>, i: usize) -> Option<usize> {
    step_of.range(..=i).next_back().map(|(_, s)| *s)
}

/// `check-first: NOT safe: duplicate-row (…)` or `transactional: safe, as specified`.
fn verdict(model: &Model, r: &crate::report::RunReport) -> String {
    let bad: Vec<String> = r
        .violations
        .iter()
        .filter(|v| !v.permitted)
        .map(|v| format!("{} ({})", v.name.name(), v.detail))
        .collect();
    let spec = if r.checks.iter().all(|c| c.held) { "as specified" } else { "not as specified" };
    if bad.is_empty() {
        format!("{}: safe (no violation), {spec}", model.name)
    } else {
        format!("{}: NOT safe: {}; {spec}", model.name, bad.join("; "))
    }
}

/// The picture in words, for its text alternative.
fn alt_text(model: &Model, lanes: &[LaneView], steps: &[StepView], verdict: &str) -> String {
    let names: Vec<String> =
        lanes.iter().map(|l| format!("{} ({}, {})", l.name, l.kind, l.shape)).collect();
    format!(
        "Timeline of model {} over {}: {} steps on lanes {}. {verdict}.",
        model.name,
        steps.last().map_or("0 ms".into(), |s| s.time.clone()),
        steps.len(),
        names.join(", ")
    )
}

/// The violating step: the second execution's insert (or effect), else the intent's last
/// step; named in words.
fn mark_violation(v: &mut RunView, f: &Failure) {
    let h = &f.history;
    let Hit::Violation(x) = &f.hit else {
        if let Hit::Expectation(k, c) = &f.hit {
            let step = v.steps.len().saturating_sub(1);
            v.violation = Some(Mark {
                step,
                name: format!("expectation {}", k.name()),
                words: format!("{} expected {}, got {}", c.what, c.expected, c.actual),
            });
        }
        return;
    };
    let dup = explain::duplicated(f, x);
    let at = match dup.get(1) {
        Some(b) => h.events.iter().position(|e| e.t_us == b.t_us && e.what == b.what),
        None => h.events.iter().rposition(|e| intent_of(&f.sim, e) == Some(x.intent.as_str())),
    };
    let Some(at) = at else { return };
    let step = v.steps.iter().rposition(|s| s.event <= at).unwrap_or(0);
    let what = match x.name {
        ViolationKind::DuplicateRow | ViolationKind::ExpiredDuplicateRow => {
            format!("the second row for intent `{}` is inserted here", x.intent)
        }
        ViolationKind::DuplicateEffect | ViolationKind::ExpiredDuplicateEffect => {
            format!("the effect of intent `{}` is performed a second time here", x.intent)
        }
        _ => format!("intent `{}`'s last step", x.intent),
    };
    v.violation = Some(Mark {
        step,
        name: x.name.name().to_string(),
        words: format!("{}: {what}: {} ({})", x.name.name(), x.name.meaning(), x.detail),
    });
}

/// Where the fix stops the second execution: it waits for a lock or for the original, or
/// finds the key and replays.
fn fix_mark(sim: &Sim, h: &History, intent: Option<&str>, v: &RunView) -> Option<Mark> {
    let (i, e) = h.events.iter().enumerate().find(|(_, e)| {
        intent_of(sim, e) == intent
            && matches!(
                e.what,
                What::LockWait { .. }
                    | What::WaitingForOriginal
                    | What::InFlight { .. }
                    | What::AlreadyClaimed
                    | What::ClaimUniqueFailed
                    | What::Replayed { .. }
                    | What::HitCompleted { .. }
            )
    })?;
    let blocks = !matches!(e.what, What::Replayed { .. } | What::HitCompleted { .. });
    let step = v.steps.iter().rposition(|s| s.event <= i)?;
    let (name, how) = if blocks {
        ("the fix blocks", "the second execution is stopped before it can act")
    } else {
        (
            "the fix replays",
            "the second execution finds the saved key and answers the first's reply",
        )
    };
    Some(Mark {
        step,
        name: name.into(),
        words: format!("{name}: {}: {how}", crate::text::printable(&h.legend.text(e))),
    })
}

/// `explain`'s narrative of the run, paragraph by paragraph, each at the step it tells:
/// the first execution's act, where the second came from, its check of the key, the
/// violation.
fn narrative(f: &Failure, model: &Model, v: &RunView) -> Vec<Para> {
    let text = explain::narrative(f, model);
    let paras: Vec<String> =
        text.split("\n\n").map(|p| p.trim().replace('\n', " ")).filter(|p| !p.is_empty()).collect();
    let h = &f.history;
    let vstep = v.violation.as_ref().map_or(0, |m| m.step);
    let step_at = |i: Option<usize>| {
        i.and_then(|i| v.steps.iter().rposition(|s| s.event <= i)).unwrap_or(vstep)
    };
    let find = |e: &Event| h.events.iter().position(|x| x.t_us == e.t_us && x.what == e.what);
    let mut anchors = vec![vstep; paras.len()];
    if let Hit::Violation(x) = &f.hit {
        let dup = explain::duplicated(f, x);
        if let (Some(a), Some(b), 4) = (dup.first(), dup.get(1), paras.len()) {
            let b_first = h.events.iter().position(|e| e.who == b.who);
            let (checked, _) = explain::check_and_save(h, a, b);
            anchors =
                vec![step_at(find(a)), step_at(b_first), step_at(checked.and_then(find)), vstep];
        }
    }
    paras.into_iter().zip(anchors).map(|(text, step)| Para { step, text }).collect()
}
