//! `idemsim explain`: a failure in plain words. The verdict and what it follows (an invariant
//! broken, or a failed expectation of the sim: a [`Target`]); the story, answering *where did
//! the second execution come from* and *why did the key not stop it*; the minimal scenario
//! (shrunk); which other models survive it; the picture; the replay command; the same as JSON
//! (`json.rs`). With only a model it finds the model's smallest failure among the shipped
//! sims, the teaching sims first (`explain check-first` is the teaching demo).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use crate::catalog;
use crate::explore::Strategy;
use crate::history::{Actor, Event, History, What};
use crate::model::Model;
use crate::picture::{self, esc, intent_of};
use crate::report::{Check, Outcome, RunReport, Violation, ViolationKind};
use crate::run::{self, RunOptions};
use crate::scenario::Sim;
use crate::shrink::{self, CheckKind, Hit, ShrinkOptions, Shrunk, Target};

mod json;
use crate::sweep;
use crate::units::show_ms;

/// Where `explain` looks for a failure when no sim is given, in order.
const SEARCH: [&str; 8] = [
    "teaching",
    "article",
    "faults",
    "catalogue",
    "dependencies",
    "business",
    "clients",
    "updates",
];
/// The sim folders searched without `--sim`, in order, each with a label: a folder of the
/// shipped kind (it holds [`SEARCH`]'s groups: the shipped library, or this repository's
/// sims/) by those groups in [`SEARCH`] order; any other (a project's own, `--sims-dir`)
/// whole, first.
fn search_dirs() -> Vec<(String, Vec<PathBuf>)> {
    catalog::sim_dirs()
        .into_iter()
        .map(|d| {
            let groups: Vec<PathBuf> =
                SEARCH.iter().map(|g| d.join(g)).filter(|g| g.is_dir()).collect();
            if groups.is_empty() {
                (catalog::display_path(&d), vec![d])
            } else {
                (
                    SEARCH
                        .iter()
                        .filter(|g| d.join(g).is_dir())
                        .copied()
                        .collect::<Vec<_>>()
                        .join(", "),
                    groups,
                )
            }
        })
        .collect()
}

/// The sim files searched without `--sim`, in [`search_dirs`] order.
fn search_files() -> Vec<PathBuf> {
    search_dirs()
        .iter()
        .flat_map(|(_, ds)| ds.iter().flat_map(|d| catalog::files_under(d)))
        .collect()
}

/// Seeds tried per sim when searching.
const SEARCH_SEEDS: u64 = 200;

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

/// The run of `sim` on `seed` with its history, and what `pick` finds in its report.
pub(crate) fn run_with(
    sim: &Arc<Sim>,
    model: &Arc<Model>,
    (seed, ex): (u64, Option<&Strategy>),
    pick: impl Fn(&RunReport) -> Option<Hit>,
) -> Option<Failure> {
    let out = run::run_explored(sim, model, seed, RunOptions { keep_history: true }, ex).ok()?.0;
    let hit = pick(&out.report)?;
    Some(Failure { sim: sim.clone(), seed, history: out.history?, report: out.report, hit })
}

/// The first failing (sim, seed): the given sim's range (or the given seed), or the shipped
/// sims in [`SEARCH`] order. Without a target, the first run with a violation that is not
/// policy-permitted, else (no run searched has one) the first with a failed expectation.
fn find_failure(
    model: &Arc<Model>,
    sim: Option<&Arc<Sim>>,
    seed: Option<u64>,
    (target, ex): (Option<Target>, Option<&Strategy>),
) -> Option<Failure> {
    let sims: Vec<Arc<Sim>> = match sim {
        Some(s) => vec![s.clone()],
        // Sim by sim from the folders searched: one bad file does not hide the others.
        None => search_files()
            .into_iter()
            .filter_map(|p| Sim::load(&p).ok().map(Arc::new))
            .filter(|s| run::not_applicable(s, model).is_none())
            .collect(),
    };
    let mut fallback: Option<Failure> = None;
    for s in &sims {
        let seeds: Vec<u64> = match seed {
            Some(x) => vec![x],
            None => s.seeds.clone().take(SEARCH_SEEDS as usize).collect(),
        };
        for x in seeds {
            let Some(f) = run_with(s, model, (x, ex), |r| match target {
                Some(t) => t.hit(r),
                None => Hit::first_violation(r).or_else(|| Hit::first_expectation(r)),
            }) else {
                continue;
            };
            if target.is_some() || matches!(f.hit, Hit::Violation(_)) {
                return Some(f);
            }
            fallback.get_or_insert(f);
        }
    }
    fallback
}

/// The executions (attempt labels) of an intent that did what `pick` selects, in order.
fn doers(f: &Failure, pick: impl Fn(&What) -> bool) -> Vec<&Event> {
    f.history
        .events
        .iter()
        .filter(|e| intent_of(&f.sim, e) == f.intent() && pick(&e.what))
        .collect()
}

fn ms(t_us: u64) -> String {
    format!("{} ms", show_ms(t_us))
}

/// Events of one actor.
fn of_actor(h: &History, a: Option<Actor>) -> impl Iterator<Item = &Event> {
    h.events.iter().filter(move |e| e.who == a)
}

/// *Where did the second execution come from?*
fn origin(f: &Failure, first: &Event, second: &Event) -> String {
    let h = &f.history;
    let name = |e: &Event| e.who.map(|a| h.legend.actor(a)).unwrap_or_default();
    let (
        Some(Actor::Attempt { req: r1, copy: c1, attempt: a1 }),
        Some(Actor::Attempt { req: r2, copy: c2, attempt: a2 }),
    ) = (first.who, second.who)
    else {
        return match second.who {
            Some(Actor::RelayMessage(id)) => {
                format!("The outbox relay delivered message {id} again.")
            }
            _ => format!("{} ran it again.", name(second)),
        };
    };
    if first.who == second.who {
        if let Some(d) = of_actor(h, second.who).find_map(|e| match e.what {
            What::RequestDuplicated { after_us } => Some(after_us),
            _ => None,
        }) {
            return format!(
                "The same attempt reached the server twice: a proxy resent `{}` {} after the \
                 first copy (the client gets the second copy's reply).",
                name(second),
                ms(d)
            );
        }
        return format!("`{}` ran twice on the server.", name(second));
    }
    let req = &f.sim.requests[r2 as usize];
    if r1 == r2 && c1 == c2 && a2 > a1 {
        let prev = f.report.requests[r2 as usize]
            .copies
            .get(c2 as usize)
            .and_then(|c| c.get(a2 as usize - 2));
        let why = match prev {
            Some(p) if p.outcome == Outcome::TransportFailure => {
                format!("got no reply (attempt {} timed out or its connection failed)", a2 - 1)
            }
            Some(p) => format!("got {} to attempt {}", p.status.unwrap_or(0), a2 - 1),
            None => "gave up on the previous attempt".into(),
        };
        return format!(
            "The client retried: `{}` is attempt {a2} of `{}`, sent because the client {why}, \
             with the same key.",
            name(second),
            req.id
        );
    }
    if r1 == r2 {
        return format!(
            "A second copy of the same request: the sim sends `{}` as {} concurrent copies \
             (a double submit), and `{}` is another copy than `{}`.",
            req.id,
            req.copies,
            name(second),
            name(first)
        );
    }
    format!(
        "A later request for the same order: `{}` (request `{}`) carries intent `{}` too.",
        name(second),
        req.id,
        req.intent
    )
}

/// *Why did the key not stop it?*
fn why_not_stopped(f: &Failure, model: &Model, first: &Event, second: &Event) -> String {
    let h = &f.history;
    let name = |e: &Event| e.who.map(|a| h.legend.actor(a)).unwrap_or_default();
    if let Some(Actor::RelayMessage(id)) = second.who {
        return relay_sent_again(f, model, id, second);
    }
    if model.key.is_none() {
        return format!(
            "Model {} reads no Idempotency-Key: nothing on the server can tell a repeat from a \
             new order, so every execution inserts.",
            model.name
        );
    }
    let key_of = |who: Option<Actor>| {
        of_actor(h, who).find_map(|e| match &e.what {
            What::Sent { key, .. } => key.clone(),
            _ => None,
        })
    };
    let (k1, k2) = (key_of(first.who), key_of(second.who));
    if k1 != k2 {
        return format!(
            "The client sent another key: `{}` used `{}`, `{}` used `{}`. A new key is a new \
             order to the server; only counting rows per intent catches it.",
            name(first),
            k1.unwrap_or_else(|| "-".into()),
            name(second),
            k2.unwrap_or_else(|| "-".into())
        );
    }
    key_missed(f, model, first, second)
}

/// Why the outbox relay delivered message `id` a second time.
fn relay_sent_again(f: &Failure, model: &Model, id: i64, second: &Event) -> String {
    let h = &f.history;
    let mut nodes: Vec<_> = h
        .events
        .iter()
        .filter(|e| e.who == second.who && matches!(e.what, What::EffectCall { .. }))
        .map(|e| e.node)
        .collect();
    nodes.sort_by_key(|n| format!("{n:?}"));
    nodes.dedup();
    let two_relays = nodes.len() > 1;
    let crash = h.events.iter().find(|e| {
        matches!(&e.what, What::CrashFault(crate::history::CrashSite::BetweenSendAndMark))
            || matches!(&e.what, What::Injected { point, .. } if point == "relay-after-send")
    });
    let why = if let Some(c) = crash {
        format!(
            "the relay's process crashed between sending message {id} and marking it sent (at {}), so the next pass sent it again",
            ms(c.t_us)
        )
    } else if two_relays {
        format!("the relays of two processes both read message {id} before either marked it sent")
    } else {
        format!(
            "the relay did not see its first delivery of message {id} acknowledged and sent it again"
        )
    };
    format!(
        "The outbox delivers at least once: {why}. The receiver counts every delivery: model \
         {} does not deduplicate effects (effects.dedupe = none).",
        model.name
    )
}

/// What the second execution found when it checked the key (its last check before acting),
/// and when the first saved it.
pub(crate) fn check_and_save<'a>(
    h: &'a History,
    first: &Event,
    second: &Event,
) -> (Option<&'a Event>, Option<&'a Event>) {
    let checked = of_actor(h, second.who)
        .filter(|e| e.t_us <= second.t_us)
        .filter(|e| matches!(e.what, What::LookupMiss | What::Claimed | What::TookOver))
        .last();
    let saved = of_actor(h, first.who).find(|e| {
        matches!(e.what, What::Stored { .. } | What::ClaimCompleted { .. } | What::Claimed)
    });
    (checked, saved)
}

/// The event that took the first execution's saved key record away before the check.
fn record_gone<'a>(
    h: &'a History,
    first: &Event,
    second: &Event,
    checked: Option<&Event>,
    saved: Option<&Event>,
) -> Option<&'a Event> {
    h.events
        .iter()
        .filter(|e| e.t_us <= checked.map_or(second.t_us, |c| c.t_us))
        .filter(|e| saved.is_some_and(|s| e.t_us >= s.t_us))
        .find(|e| {
            matches!(
                e.what,
                What::KeysDeleted { .. }
                    | What::Collected { .. }
                    | What::CacheEvicted
                    | What::CacheRestarted
                    | What::ClaimReleased { .. }
                    | What::ProcessCrashed
                    | What::Rollback
                    | What::CommitLost { committed: false }
            ) && (e.who.is_none() || e.who == first.who || matches!(e.what, What::ProcessCrashed))
        })
}

/// Both executions sent the same key: why its check did not stop the second.
fn key_missed(f: &Failure, model: &Model, first: &Event, second: &Event) -> String {
    let h = &f.history;
    let name = |e: &Event| e.who.map(|a| h.legend.actor(a)).unwrap_or_default();
    let (checked, saved) = check_and_save(h, first, second);
    let gone = record_gone(h, first, second, checked, saved);
    match (checked, saved) {
        (Some(c), _) if matches!(c.what, What::TookOver) => format!(
            "`{}` found `{}`'s claim still in progress but its lease expired by the clock of the \
             process that judged it (at {}), took it over and ran the request again.",
            name(second),
            name(first),
            ms(c.t_us)
        ),
        (Some(c), Some(s)) if s.t_us > c.t_us => format!(
            "`{}` checked the key at {}, before `{}` had saved it (at {}): the check and the \
             write that would have stopped it are separate steps, and another execution ran \
             between them (the shaded race window).",
            name(second),
            ms(c.t_us),
            name(first),
            ms(s.t_us)
        ),
        (Some(c), None) => format!(
            "`{}` checked the key at {} and found nothing: `{}` never saved it (it failed, crashed \
             or rolled back before saving).",
            name(second),
            ms(c.t_us),
            name(first)
        ),
        (Some(c), Some(_)) => match gone {
            Some(g) => format!(
                "`{}`'s key record was gone when `{}` checked it at {}: {} at {}.",
                name(first),
                name(second),
                ms(c.t_us),
                h.legend.text(g),
                ms(g.t_us)
            ),
            None => format!(
                "`{}` checked the key at {} and did not find a record that stopped it.",
                name(second),
                ms(c.t_us)
            ),
        },
        (None, _) => format!(
            "`{}` never checked the key before it acted (model {}'s program acts first).",
            name(second),
            model.name
        ),
    }
}

/// The failure's story in plain words: two executions and where they came from, or (for
/// other violations and failed expectations) what the client saw against what happened.
pub(crate) fn narrative(f: &Failure, model: &Model) -> String {
    match &f.hit {
        Hit::Violation(v) => {
            let did = duplicated(f, v);
            if did.len() >= 2 {
                return two_executions(f, v, model, &did[0], &did[1]);
            }
            attempts_told(f, v)
        }
        Hit::Expectation(k, c) => expectation_told(f, *k, c),
    }
}

/// The executions that did the duplicated thing (inserted the row, or had the effect
/// performed), in order; empty for other violations.
pub(crate) fn duplicated(f: &Failure, v: &Violation) -> Vec<Event> {
    match v.name {
        ViolationKind::DuplicateRow | ViolationKind::ExpiredDuplicateRow => {
            doers(f, |w| matches!(w, What::RowInserted { .. })).into_iter().cloned().collect()
        }
        // Effects as the provider counted them, each with the execution that asked for it
        // (an attempt, or the outbox relay delivering a message).
        ViolationKind::DuplicateEffect | ViolationKind::ExpiredDuplicateEffect => f
            .history
            .events
            .iter()
            .filter_map(|e| match &e.what {
                What::EffectApplied { intent, from } if *intent == v.intent => {
                    Some(Event { who: Some(*from), ..e.clone() })
                }
                _ => None,
            })
            .collect(),
        _ => vec![],
    }
}

/// The story of two executions `a` and `b` of one intent.
fn two_executions(f: &Failure, v: &Violation, model: &Model, a: &Event, b: &Event) -> String {
    let mut s = String::new();
    // Two deliveries by one relay message would read the same: number them.
    let same = a.who == b.who;
    let name = |e: &Event| {
        let n = e.who.map(|x| f.history.legend.actor(x)).unwrap_or_default();
        match (same, std::ptr::eq(e, a)) {
            (false, _) => n,
            (true, true) => format!("{n} (first time)"),
            (true, false) => format!("{n} (second time)"),
        }
    };
    let act = if matches!(a.what, What::RowInserted { .. }) {
        "inserted a row"
    } else {
        "had its effect performed"
    };
    let _ = writeln!(
        s,
        "Let `{}` and `{}` be two executions of intent `{}`: `{}` {act} at {}, `{}` at {}.",
        name(a),
        name(b),
        v.intent,
        name(a),
        ms(a.t_us),
        name(b),
        ms(b.t_us)
    );
    let _ = writeln!(s, "\nWhere did the second execution come from? {}", origin(f, a, b));
    let _ = writeln!(s, "\nWhy did the key not stop it? {}", why_not_stopped(f, model, a, b));
    let _ = writeln!(s, "\nSo: {} ({}).", v.name.name(), v.detail);
    s
}

/// Other violations: what the client saw against what happened, per attempt.
fn attempts_told(f: &Failure, v: &Violation) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}: {}.", v.name.meaning(), v.detail);
    let _ = writeln!(s, "\nThe attempts of intent `{}`:", v.intent);
    s.push_str(&attempts_and_end(f, Some(&v.intent)));
    s
}

/// A failed expectation: what the sim expected against what the run gave, then what the
/// client saw (the request's intent, or every request for the end state) and the end state.
fn expectation_told(f: &Failure, k: CheckKind, c: &Check) -> String {
    use crate::text::printable;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "The sim expects `{}` to be {}; the run gave {} (a failed expectation of kind {}: the \
         design answered otherwise than the sim specifies).",
        printable(&c.what),
        printable(&c.expected),
        printable(&c.actual),
        k.name()
    );
    match f.intent() {
        Some(i) => {
            let _ = writeln!(s, "\nThe attempts of intent `{i}`:");
        }
        None => {
            let _ = writeln!(s, "\nThe attempts of every request:");
        }
    }
    s.push_str(&attempts_and_end(f, f.intent()));
    s
}

/// Every attempt of `intent` (or of every request) with its answer, and the end state.
fn attempts_and_end(f: &Failure, intent: Option<&str>) -> String {
    let mut s = String::new();
    let mine = |i: &str| intent.is_none_or(|x| x == i);
    for (qi, q) in f.sim.requests.iter().enumerate().filter(|(_, q)| mine(&q.intent)) {
        for (c, attempts) in f.report.requests[qi].copies.iter().enumerate() {
            for (n, a) in attempts.iter().enumerate() {
                let label = crate::history::attempt_label(&q.id, q.copies, c as u32, n as u32 + 1);
                let what = match a.status {
                    Some(st) => format!("{st} {}", a.body.as_deref().unwrap_or("")),
                    None => "no reply (transport failure)".into(),
                };
                let _ = writeln!(
                    s,
                    "  {label}: sent at {} ms, {what}",
                    crate::units::show_ms((a.sent_ms * 1000.0) as u64)
                );
            }
        }
    }
    let rows = f.report.rows.iter().filter(|r| mine(&r.intent)).count();
    let effects: u64 = f.report.effects.iter().filter(|(i, _)| mine(i)).map(|(_, n)| *n).sum();
    let writes = f.report.writes.iter().filter(|w| mine(&w.intent)).count();
    let whose = if intent.is_some() { "for the intent" } else { "in all" };
    if writes > 0 || !f.report.writes.is_empty() {
        let _ = writeln!(
            s,
            "\nIn the end: {writes} document write(s) and {effects} effect(s) {whose}."
        );
    } else {
        let _ = writeln!(s, "\nIn the end: {rows} row(s) and {effects} effect(s) {whose}.");
    }
    s
}

/// The events of the trace about an intent (and faults and control), or every event: time,
/// node and text.
fn trace_events(sim: &Sim, h: &History, intent: Option<&str>) -> Vec<(u64, String, String)> {
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

/// The other models on the minimal scenario over its seed window (every model of the
/// catalogue but `me`, or the ones given), each with the seeds on which it fails the target
/// of `start` (a failed expectation of the kind, whatever its values).
fn survivors(
    sim: &Arc<Sim>,
    window: u64,
    start: &Hit,
    (me, given): (&str, Option<&[Arc<Model>]>),
    ex: Option<&Strategy>,
) -> Vec<Other> {
    let models = match given {
        Some(g) => g.to_vec(),
        None => catalog::all_models().unwrap_or_default(),
    };
    let models = catalog::ordered_models(models);
    let models: Vec<Arc<Model>> = models
        .into_iter()
        .filter(|m| m.name != me && run::not_applicable(sim, m).is_none())
        .collect();
    let opts = sweep::SweepOptions {
        jobs: sweep::default_jobs(),
        explore: ex.cloned(),
        ..Default::default()
    };
    let Ok(cells) =
        sweep::run_cells(std::slice::from_ref(sim), &models, Some(0..window), &opts, |_, _| {})
    else {
        return vec![];
    };
    let mut out = vec![];
    for (c, m) in cells.into_iter().zip(&models) {
        let counts = c.violating().map(|(n, x)| (n.clone(), x.seeds));
        let (same, also) = match start.target() {
            Target::Violation(v) => counts.partition(|(n, _)| n.as_str() == v.name()),
            Target::Expectation(k) => {
                let hits = (0..window)
                    .filter_map(|s| run::run_explored(sim, m, s, RunOptions::default(), ex).ok())
                    .map(|(o, _)| o)
                    .filter(|o| start.target().hit(&o.report).is_some())
                    .count() as u64;
                let label = format!("expectation {}", k.name());
                ((hits > 0).then_some((label, hits)).into_iter().collect(), counts.collect())
            }
        };
        out.push(Other { model: m.clone(), same, also, runs: c.runs });
    }
    out
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

/// `{model} fails {sim} on seed {seed}: …` for the failure found.
fn verdict_of(model: &Model, f: &Failure, ex: Option<&Strategy>) -> String {
    let explored = ex.map_or(String::new(), |s| format!(" explored with {s}"));
    let head = format!("{} fails {} on seed {}{explored}", model.name, f.sim.name, f.seed);
    match &f.hit {
        Hit::Violation(v) => {
            format!("{head}: {}, {} ({}).", v.name.name(), v.name.meaning(), v.detail)
        }
        Hit::Expectation(k, c) => format!(
            "{head}: the expectation {} failed, `{}` expected {}, got {}.",
            k.name(),
            crate::text::printable(&c.what),
            crate::text::printable(&c.expected),
            crate::text::printable(&c.actual)
        ),
    }
}

/// The command that keeps the minimal scenario of `f`.
fn keep_command(model: &Model, f: &Failure, opts: &ShrinkOptions, sim_path: &str) -> String {
    use crate::text::shell_arg;
    let follow = match f.hit.target() {
        Target::Violation(v) => format!("--violation {}", v.name()),
        Target::Expectation(k) => format!("--target expect:{}", k.name()),
    };
    let explore = opts
        .explore
        .as_ref()
        .map_or(String::new(), |s| format!(" --explore {}", shell_arg(&s.to_string())));
    format!(
        "mkdir -p sims/regress && {} shrink {} --model {} --seed {} --window {} --budget {} \
         {follow}{explore} -o {}",
        catalog::invocation(),
        shell_arg(sim_path),
        shell_arg(&catalog::cli_name(model)),
        f.seed,
        opts.window,
        opts.budget_runs,
        shell_arg(&format!("sims/regress/{}-{}.toml", f.sim.name, model.name))
    )
}

/// The story of failure `f`: shrink it, run the other models on the minimal scenario, run a
/// survivor on the same schedule, and tell it on the run shown.
fn compute(model: &Arc<Model>, f: Failure, eo: &ExplainOptions) -> Story {
    let sim_path = catalog::display_path(&f.sim.path);
    let ex = eo.explore.as_ref();
    let name = ex.map(|s| s.to_string());
    let replay =
        catalog::replay_explored(&sim_path, &catalog::cli_name(model), f.seed, name.as_deref());
    let verdict = verdict_of(model, &f, ex);
    let target = f.hit.target();
    let opts = ShrinkOptions {
        window: 16,
        budget_runs: 20_000,
        target: Some(target),
        explore: eo.explore.clone(),
        ..Default::default()
    };
    let minimal = minimal(model, &f, &opts, eo.others.as_deref());
    let contrast = minimal.as_ref().and_then(|m| contrast(m, ex));
    let failing_minimal = minimal.as_ref().and_then(|m| {
        run_with(&m.shrunk.sim, model, (m.shrunk.seed, ex), |r| m.shrunk.first.again(r))
    });
    let keep = minimal.is_some().then(|| keep_command(model, &f, &opts, &sim_path));
    let following = f.hit.following();
    let found = Found { sim: f.sim.name.clone(), path: sim_path, seed: f.seed };
    // Everything below is told on the run shown: the minimal scenario's, when there is one.
    let on_minimal = failing_minimal.is_some();
    let shown = failing_minimal.unwrap_or(f);
    let narrative = narrative(&shown, model);
    let model = model.name.clone();
    Story {
        model,
        target,
        following,
        verdict,
        found,
        shown,
        on_minimal,
        narrative,
        minimal,
        contrast,
        replay,
        keep,
    }
}

/// The minimal scenario of `f` and the other models on it.
fn minimal(
    model: &Arc<Model>,
    f: &Failure,
    opts: &ShrinkOptions,
    given: Option<&[Arc<Model>]>,
) -> Option<Minimal> {
    let src = std::fs::read_to_string(&f.sim.path).unwrap_or_default();
    let shrunk = shrink::shrink(&f.sim.path, &src, model, Some(f.seed), opts).ok()?;
    let ex = opts.explore.as_ref();
    let others = survivors(&shrunk.sim, shrunk.window, &shrunk.first, (&model.name, given), ex);
    Some(Minimal { shrunk, others })
}

/// The minimal scenario's schedule under a model that survives it (transactional if it does).
fn contrast(m: &Minimal, ex: Option<&Strategy>) -> Option<Contrast> {
    let pass: Vec<&Other> = m.others.iter().filter(|o| o.same.is_empty()).collect();
    let other = pass.iter().find(|o| o.model.name == "transactional").or(pass.first())?;
    let other = &other.model;
    let keep = RunOptions { keep_history: true };
    let (o, _) = run::run_explored(&m.shrunk.sim, other, m.shrunk.seed, keep, ex).ok()?;
    Some(Contrast {
        model: other.name.clone(),
        fails: o.report.violations.iter().any(|v| !v.permitted)
            || m.shrunk.first.again(&o.report).is_some(),
        history: o.history,
    })
}

/// The story as text.
fn story_text(s: &Story) -> String {
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

/// The story as a self-contained HTML page.
fn story_html(s: &Story) -> String {
    let shown = &s.shown;
    let intent = shown.intent();
    let mut sections: Vec<(String, String)> = vec![
        ("Verdict".into(), picture::paragraphs(&s.verdict)),
        ("What happened".into(), picture::paragraphs(&s.narrative)),
    ];
    let title = format!("{} × {} · seed {}", s.model, shown.sim.name, shown.seed);
    let fig = |h: &History, title: &str| {
        format!("<div class=\"fig\">{}</div>", picture::svg(h, &shown.sim, title, intent))
    };
    sections.push(("The run".into(), fig(&shown.history, &title)));
    if let Some(c) = &s.contrast
        && let Some(h) = &c.history
    {
        let t = format!("the same schedule under {}", c.model);
        sections.push((t.clone(), fig(h, &t)));
    }
    if let Some(m) = &s.minimal {
        sections.push(("The minimal scenario".into(), picture::pre(&m.shrunk.text)));
        let (pass, fail) = m.lists();
        let mut t = String::from("<table><tr><th>survive</th><th>fail</th></tr><tr><td>");
        t.push_str(
            &pass
                .iter()
                .map(|p| format!("<span class=\"ok\">{}</span>", esc(p)))
                .collect::<Vec<_>>()
                .join("<br>"),
        );
        t.push_str("</td><td>");
        t.push_str(&fail.iter().map(|p| esc(p)).collect::<Vec<_>>().join("<br>"));
        t.push_str("</td></tr></table>");
        sections.push((format!("Models on that scenario (seeds 0..{})", m.shrunk.window), t));
    }
    sections.push(("Replay".into(), picture::pre(&s.replay)));
    let what = match s.target {
        Target::Violation(v) => v.name().to_string(),
        Target::Expectation(k) => format!("expectation {}", k.name()),
    };
    picture::html_page(&format!("Why {} fails: {what}", s.model), &sections)
}
