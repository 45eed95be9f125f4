//! The shrinker: from a failing (sim, model) to a minimal sim file that still fails the same
//! way: the same named violation (never a policy-permitted one) or the same kind of failed
//! expectation ([`Target`], `target.rs`).
//!
//! Ordered greedy passes over the sim's TOML (faults, structure, sizes, time, noise); after an
//! accepted edit it starts again from the first pass. Every candidate is re-loaded through the
//! sim loader (so it is a valid sim or it is skipped) and searched over a small seed window,
//! because any edit reshuffles madsim's schedule: a fixed seed of the edited sim is another
//! schedule. The budget is counted in runs only, and covers everything: the search for the
//! first failing seed, every candidate and the final check of the window (whose runs are kept
//! for it from the start), so the result is the same on every machine and never takes more
//! runs than asked. Each run is bounded in simulated time (deterministic too).

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use toml::{Table, Value};

use crate::input::InputError;
use crate::model::Model;
use crate::run::{self, RunOptions};
use crate::scenario::Sim;
use crate::sweep::wilson;

mod target;
pub use target::{CheckKind, Hit, Target, request_of};

/// The largest seed window (`--window`).
pub const MAX_WINDOW: u64 = 4096;

/// How many seeds of the sim's range the first search tries at most (without `--seed`).
pub const FIRST_SEARCH_SEEDS: u64 = 4096;

/// How hard to look.
#[derive(Debug, Clone)]
pub struct ShrinkOptions {
    /// Seeds searched for each candidate (0..window, after the current seed): 1 to
    /// [`MAX_WINDOW`].
    pub window: u64,
    /// Runs in all, honoured exactly: the first search, every candidate and the final check of
    /// the window. At least `window + 1` (one run to find a failure, the window to check it).
    pub budget_runs: u64,
    /// What to keep failing (default: the first violation found that is not
    /// policy-permitted, else the first failed expectation).
    pub target: Option<Target>,
    /// The file the minimal sim goes to, for its header's replay command (default: a
    /// placeholder, `<this file>`).
    pub file: Option<String>,
    /// Counters bumped once per run, for a progress display (read only by the display: the
    /// shrink never reads them back, so they change nothing).
    pub progress: Option<Arc<crate::sweep::Progress>>,
    /// Every run explored with this strategy (`--explore`; the minimal sim's replay names it),
    /// else calibrated. Not a whole exhaustive space: one schedule, `exhaustive@CHOICES`.
    pub explore: Option<crate::explore::Strategy>,
}

impl Default for ShrinkOptions {
    fn default() -> Self {
        ShrinkOptions {
            window: 32,
            budget_runs: 50_000,
            target: None,
            file: None,
            progress: None,
            explore: None,
        }
    }
}

impl ShrinkOptions {
    /// One run more in `runs`, and for the progress display.
    fn count(&self, runs: &mut u64) {
        *runs += 1;
        if let Some(p) = &self.progress {
            p.run_done();
        }
    }

    /// One run of `sim` on `seed`, explored as asked (else calibrated).
    pub fn run(
        &self,
        sim: &Arc<Sim>,
        model: &Arc<Model>,
        seed: u64,
        opts: RunOptions,
    ) -> Result<run::RunOutput, crate::world::RunError> {
        Ok(run::run_explored(sim, model, seed, opts, self.explore.as_ref())?.0)
    }

    /// The strategy as a replay command names it (None: calibrated).
    pub fn explore_name(&self) -> Option<String> {
        self.explore.as_ref().map(|s| s.to_string())
    }

    /// The window and the budget in their ranges, or what is wrong (flag and allowed range).
    pub fn check(&self) -> Result<(), String> {
        if let Some(s) = &self.explore {
            s.check_one_run("shrink")?;
        }
        if !(1..=MAX_WINDOW).contains(&self.window) {
            return Err(format!(
                "--window {}: expected 1 to {MAX_WINDOW} seeds per candidate",
                self.window
            ));
        }
        let least = self.window + 1;
        if self.budget_runs < least {
            return Err(format!(
                "--budget {}: expected at least {least} runs with --window {} (one run that \
                 fails, then the final check of the {} seeds of the window)",
                self.budget_runs, self.window, self.window
            ));
        }
        Ok(())
    }
}

/// What the shrinker found.
#[derive(Debug, Clone)]
pub struct Shrunk {
    /// The minimal sim file (with its provenance header).
    pub text: String,
    /// The minimal sim, loaded.
    pub sim: Arc<Sim>,
    /// The seed on which the minimal sim fails the target.
    pub seed: u64,
    /// What was kept failing while shrinking: a violation (not policy-permitted) or a kind of
    /// failed expectation.
    pub target: Target,
    /// What the run shrinking started from (the original sim) showed of the target.
    pub first: Hit,
    /// What was removed or reduced, in order.
    pub removed: Vec<String>,
    /// Runs spent, at most the budget (the budget is counted in runs, so the result is the
    /// same on every machine).
    pub runs: u64,
    /// The run budget ran out before every candidate was tried.
    pub budget_spent: bool,
    /// Seeds of 0..window on which the minimal sim fails the target.
    pub failing_in_window: u64,
    /// The seed window searched per candidate (`0..window`).
    pub window: u64,
}

/// Why nothing could be shrunk.
#[derive(Debug, thiserror::Error)]
pub enum ShrinkError {
    /// The sim or model file could not be loaded.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The window or the budget is out of its range.
    #[error("{0}")]
    Options(String),
    /// No run to start from: the seed asked for, or every seed tried, shows no violation
    /// (that is not policy-permitted) nor failed expectation to keep (or not the target).
    #[error("{0}")]
    NoFailure(NoFailure),
    /// The harness could not run (its own database failed).
    #[error("the harness could not run: {0}")]
    Run(String),
}

/// What the first search found when there is nothing to shrink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoFailure {
    /// The sim's name.
    pub sim: String,
    /// The model's name.
    pub model: String,
    /// The target asked for (`--target`, `--violation`), if any.
    pub target: Option<Target>,
    /// The seed asked for (`--seed`), which does not fail.
    pub asked: Option<u64>,
    /// Seeds of the sim's range tried (from its start, at most [`FIRST_SEARCH_SEEDS`]).
    pub tried: Range<u64>,
    /// The first seed of `tried` that fails (only when a seed was asked for and passed).
    pub failing: Option<u64>,
    /// Without a target, `failing` fails only an expectation (no seed tried shows a
    /// violation).
    pub failing_expectation: bool,
    /// The budget stopped the search before it had tried what it would have.
    pub budget_spent: bool,
}

impl std::fmt::Display for NoFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (a, no) = match self.target {
            Some(Target::Violation(v)) => {
                let v = format!("{} (not policy-permitted)", v.name());
                (v.clone(), v)
            }
            Some(Target::Expectation(k)) => {
                let k = format!("failed expectation {}", k.name());
                (format!("a {k}"), k)
            }
            None => (
                "a violation that is not policy-permitted or a failed expectation".to_string(),
                "violation that is not policy-permitted nor failed expectation".to_string(),
            ),
        };
        let (sim, model) = (crate::text::printable(&self.sim), crate::text::printable(&self.model));
        let tried = format!("{}..{}", self.tried.start, self.tried.end);
        let end = if self.budget_spent {
            "; the budget ran out (its last --window runs are kept for the final check): a \
             larger --budget searches further"
        } else {
            ": nothing to shrink"
        };
        let shrink_from = |s: u64| format!("shrink from it with --seed {s}, or leave --seed out");
        match (self.asked, self.failing) {
            // Without a target: a seed with a violation is named first, as it is followed first.
            (Some(asked), Some(s)) if self.target.is_none() && !self.failing_expectation => write!(
                f,
                "seed {asked} of {sim} shows no violation that is not policy-permitted under \
                 {model}; seed {s} does (the first of the sim's seeds that does; seed {asked} \
                 fails no expectation either): {}",
                shrink_from(s)
            ),
            (Some(asked), Some(s)) if self.target.is_none() => write!(
                f,
                "seed {asked} of {sim} shows no {no} under {model}; seed {s} fails an \
                 expectation (the first of the sim's seeds that does; none of seeds {tried} \
                 shows a violation): {}",
                shrink_from(s)
            ),
            (Some(asked), Some(s)) => write!(
                f,
                "seed {asked} of {sim} shows no {no} under {model}; seed {s} does (the first of \
                 the sim's seeds that does): {}",
                shrink_from(s)
            ),
            (Some(asked), None) => write!(
                f,
                "seed {asked} of {sim} shows no {no} under {model}, nor does any of seeds \
                 {tried}{end}"
            ),
            (None, _) => {
                write!(f, "no seed of {sim} ({tried} tried) shows {a} under {model}{end}")
            }
        }
    }
}

struct Search<'a> {
    model: &'a Arc<Model>,
    path: &'a Path,
    /// The failure kept: the starting run's ([`Hit::again`]).
    start: Hit,
    opts: &'a ShrinkOptions,
    runs: u64,
    /// Candidates run at most this long in simulated time (ten times the original failing
    /// run, at least 60 s): a candidate that would run to a far time limit is no smaller.
    time_cap_us: u64,
}

impl Search<'_> {
    /// No run left for candidates: the last `window` runs of the budget are the final
    /// check's.
    fn out_of_budget(&self) -> bool {
        self.runs >= self.opts.budget_runs - self.opts.window
    }

    /// Does `sim` fail as the starting run did on `seed` (no bound hit)?
    fn fails(&mut self, sim: &Arc<Sim>, seed: u64) -> bool {
        self.opts.count(&mut self.runs);
        match self.opts.run(sim, self.model, seed, RunOptions::default()) {
            Ok(out) => out.report.bounds_hit.is_empty() && self.start.again(&out.report).is_some(),
            Err(_) => false,
        }
    }

    /// The first seed of [current, 0, 1, …, window-1] on which the candidate fails.
    fn accept(&mut self, table: &Table, current: u64) -> Option<(Arc<Sim>, u64)> {
        let text = toml::to_string(table).ok()?;
        let mut sim = Sim::parse(self.path, &text).ok()?;
        sim.world.time_limit_us = sim.world.time_limit_us.min(self.time_cap_us);
        let sim = Arc::new(sim);
        if run::not_applicable(&sim, self.model).is_some() {
            return None;
        }
        let seeds = std::iter::once(current).chain((0..self.opts.window).filter(|s| *s != current));
        for s in seeds {
            if self.out_of_budget() {
                return None;
            }
            if self.fails(&sim, s) {
                return Some((sim, s));
            }
        }
        None
    }
}

/// A candidate edit: a new table and what it did.
type Candidate = (Table, String);

fn get_table<'a>(t: &'a Table, k: &str) -> Option<&'a Table> {
    t.get(k).and_then(Value::as_table)
}

fn array_len(t: &Table, k: &str) -> usize {
    t.get(k).and_then(Value::as_array).map_or(0, Vec::len)
}

/// Remove references to a deleted request or action id from the rest of the file.
fn forget_id(t: &mut Table, id: &str) {
    for section in ["request", "action", "inject"] {
        let Some(Value::Array(items)) = t.get_mut(section) else { continue };
        for item in items.iter_mut() {
            let Some(it) = item.as_table_mut() else { continue };
            match it.get_mut("after") {
                Some(Value::String(s)) if s == id => {
                    it.remove("after");
                }
                Some(Value::Array(a)) => a.retain(|v| v.as_str() != Some(id)),
                _ => {}
            }
            for k in ["until", "request"] {
                if it.get(k).and_then(Value::as_str) == Some(id) {
                    it.remove(k);
                }
            }
            if let Some(Value::Table(e)) = it.get_mut("expect") {
                for k in ["same_id_as", "id_differs_from"] {
                    if e.get(k).and_then(Value::as_str) == Some(id) {
                        e.remove(k);
                    }
                }
            }
        }
    }
}

/// Candidate edits of one sim table, in the order they are tried.
struct Edits<'a> {
    t: &'a Table,
    out: Vec<Candidate>,
}

impl Edits<'_> {
    /// A copy of the table with `f` applied, kept when it changed something.
    fn edit(&mut self, what: String, f: &dyn Fn(&mut Table)) {
        let mut c = self.t.clone();
        f(&mut c);
        if &c != self.t {
            self.out.push((c, what));
        }
    }
}

/// The candidates of every pass, in order: faults, structure, sizes, time, noise.
fn candidates(t: &Table) -> Vec<Candidate> {
    let mut e = Edits { t, out: Vec::new() };
    fault_edits(&mut e);
    structure_edits(&mut e);
    size_edits(&mut e);
    time_edits(&mut e);
    noise_edits(&mut e);
    e.out
}

/// Pass 1: faults, one kind at a time; injections and partitions; extra processes.
fn fault_edits(e: &mut Edits) {
    let t = e.t;
    // 1. Faults, one kind at a time.
    if let Some(f) = get_table(t, "faults") {
        for (k, v) in f {
            let what = match v {
                Value::Table(_) => format!("[faults.{k}] removed"),
                _ => format!("faults.{k} removed"),
            };
            let key = k.clone();
            e.edit(what, &move |c: &mut Table| {
                if let Some(Value::Table(f)) = c.get_mut("faults") {
                    f.remove(&key);
                }
            });
            if let Value::Table(sub) = v {
                for sk in sub.keys() {
                    let (k, sk) = (k.clone(), sk.clone());
                    e.edit(format!("faults.{k}.{sk} removed"), &move |c: &mut Table| {
                        if let Some(Value::Table(f)) = c.get_mut("faults")
                            && let Some(Value::Table(s)) = f.get_mut(&k)
                        {
                            s.remove(&sk);
                        }
                    });
                }
            }
        }
    }
    for section in ["partition", "inject"] {
        for i in 0..array_len(t, section) {
            e.edit(format!("[[{section}]] {} removed", i + 1), &move |c: &mut Table| {
                if let Some(Value::Array(a)) = c.get_mut(section) {
                    a.remove(i);
                }
            });
        }
    }
    for i in 0..array_len(t, "inject") {
        e.edit(format!("[[inject]] {}: fires every time", i + 1), &move |c: &mut Table| {
            if let Some(Value::Array(a)) = c.get_mut("inject")
                && let Some(Value::Table(it)) = a.get_mut(i)
            {
                it.remove("rate");
            }
        });
    }
    if let Some(w) = get_table(t, "world") {
        for k in ["clock_skew_ms", "processes"] {
            if w.contains_key(k) {
                e.edit(format!("world.{k} removed"), &move |c: &mut Table| {
                    if let Some(Value::Table(w)) = c.get_mut("world") {
                        w.remove(k);
                    }
                    if k == "processes" {
                        strip_field(c, "request", "process");
                        c.remove("partition");
                    }
                });
            }
        }
    }
}

/// Pass 2: structure, each request and action.
fn structure_edits(e: &mut Edits) {
    let t = e.t;
    // 2. Structure: each request and action.
    for section in ["request", "action"] {
        for i in 0..array_len(t, section) {
            let id = t[section].as_array().and_then(|a| a[i].get("id")).and_then(Value::as_str);
            let id = id.unwrap_or("?").to_string();
            e.edit(format!("[[{section}]] `{id}` removed"), &move |c: &mut Table| {
                if let Some(Value::Array(a)) = c.get_mut(section) {
                    a.remove(i);
                }
                forget_id(c, &id);
            });
        }
    }
}

/// Pass 3: sizes (copies, intents toward 1) and each request's optional fields.
fn size_edits(e: &mut Edits) {
    let t = e.t;
    // 3. Sizes: copies, intents, attempts toward 1 (to 1, then halving).
    for (field, floor) in [("copies", 2), ("copies", 1), ("intents", 1)] {
        for i in 0..array_len(t, "request") {
            let n = t["request"][i].get(field).and_then(Value::as_integer).unwrap_or(1);
            for to in [floor, n / 2] {
                if to >= 1 && to < n {
                    e.edit(
                        format!("request {}: {field} {n} → {to}", i + 1),
                        &move |c: &mut Table| {
                            set_request(c, i, field, Value::Integer(to));
                        },
                    );
                }
            }
        }
    }
    for i in 0..array_len(t, "request") {
        let q = &t["request"][i];
        if q.get("retry").is_some() {
            e.edit(format!("request {}: retry removed", i + 1), &move |c: &mut Table| {
                remove_request_field(c, i, "retry");
            });
        }
        for k in ["spread_ms", "process", "timeout_ms", "delay_ms"] {
            if q.get(k).is_some() {
                e.edit(format!("request {}: {k} removed", i + 1), &move |c: &mut Table| {
                    remove_request_field(c, i, k);
                });
            }
        }
    }
}

/// Pass 4: time, the world's latency pinned to its low end.
fn time_edits(e: &mut Edits) {
    let t = e.t;
    // 4. Time: the world's latency pinned to its low end.
    if let Some(w) = get_table(t, "world")
        && let Some(Value::Array(l)) = w.get("latency_ms")
        && l.len() == 2
        && l[0] != l[1]
    {
        let lo = l[0].clone();
        e.edit("world.latency_ms pinned to its low end".into(), &move |c: &mut Table| {
            if let Some(Value::Table(w)) = c.get_mut("world") {
                w.insert("latency_ms".into(), Value::Array(vec![lo.clone(), lo.clone()]));
            }
        });
    }
}

/// Pass 5: noise, expectations and the description (the oracle judges on its own).
fn noise_edits(e: &mut Edits) {
    let t = e.t;
    // 5. Noise: expectations and the description (the oracle judges on its own).
    for i in 0..array_len(t, "request") {
        if t["request"][i].get("expect").is_some() {
            e.edit(format!("request {}: expect removed", i + 1), &move |c: &mut Table| {
                remove_request_field(c, i, "expect");
            });
        }
    }
    for k in ["expect", "description"] {
        if t.contains_key(k) {
            e.edit(format!("{k} removed"), &move |c: &mut Table| {
                c.remove(k);
            });
        }
    }
}

fn set_request(c: &mut Table, i: usize, k: &str, v: Value) {
    if let Some(Value::Array(a)) = c.get_mut("request")
        && let Some(Value::Table(q)) = a.get_mut(i)
    {
        q.insert(k.into(), v);
    }
}

fn remove_request_field(c: &mut Table, i: usize, k: &str) {
    if let Some(Value::Array(a)) = c.get_mut("request")
        && let Some(Value::Table(q)) = a.get_mut(i)
    {
        q.remove(k);
    }
}

fn strip_field(c: &mut Table, section: &str, k: &str) {
    if let Some(Value::Array(a)) = c.get_mut(section) {
        for item in a.iter_mut() {
            if let Some(q) = item.as_table_mut() {
                q.remove(k);
            }
        }
    }
}

/// Shrink `sim` (read from `path`, text `src`) under `model`, starting from `seed` (or the first
/// failing seed of the sim's range), in at most `opts.budget_runs` runs.
pub fn shrink(
    path: &Path,
    src: &str,
    model: &Arc<Model>,
    seed: Option<u64>,
    opts: &ShrinkOptions,
) -> Result<Shrunk, ShrinkError> {
    opts.check().map_err(ShrinkError::Options)?;
    let original = Arc::new(Sim::parse(path, src)?);
    let mut table: Table =
        src.parse().map_err(|e: toml::de::Error| InputError::from_toml(path, src, &e))?;
    let (seed0, start, end_ms, runs) = first_failure(&original, model, seed, opts)?;
    let target = start.target();
    let mut search = Search {
        model,
        path,
        start: start.clone(),
        opts,
        runs,
        time_cap_us: ((end_ms * 1000.0) as u64).saturating_mul(10).max(60_000_000),
    };
    let (mut sim, mut seed) = (original.clone(), seed0);
    let (removed, budget_spent) = passes(&mut search, &mut table, &mut sim, &mut seed);
    // The final check, on the runs kept for it: the smallest failing seed of the window, and
    // how often the minimal sim fails there.
    let window = opts.window;
    let mut failing = 0;
    let mut first = None;
    for s in 0..window {
        if search.fails(&sim, s) {
            failing += 1;
            first.get_or_insert(s);
        }
    }
    debug_assert!(search.runs <= opts.budget_runs);
    let seed = first.unwrap_or(seed);
    table.insert("seeds".into(), Value::String(format!("0..{window}")));
    let found = Found { seed0, seed, failing, window, removed: &removed, budget_spent };
    let header = provenance(path, &search, &found);
    let body = toml::to_string(&table).unwrap_or_default();
    let text = format!("{header}{body}");
    let sim = Arc::new(Sim::parse(path, &text)?);
    Ok(Shrunk {
        text,
        sim,
        seed,
        target,
        first: start,
        removed,
        runs: search.runs,
        budget_spent,
        failing_in_window: failing,
        window,
    })
}

/// The run to start from: the seed asked for, or else the first seed of the sim's range (at
/// most [`FIRST_SEARCH_SEEDS`]), that fails the target asked for; without one, that shows a
/// violation that is not policy-permitted, or else (no seed tried shows one) that fails an
/// expectation (on the seed asked for: its violation, else its failed expectation). Its seed,
/// hit (what it showed of the target) and end time, and the runs it took. Within the budget less the window kept for the
/// final check. When the seed asked for passes, the range is searched too, to name a seed that
/// fails.
fn first_failure(
    original: &Arc<Sim>,
    model: &Arc<Model>,
    seed: Option<u64>,
    opts: &ShrinkOptions,
) -> Result<(u64, Hit, f64, u64), ShrinkError> {
    let allowed = opts.budget_runs - opts.window;
    let mut runs = 0;
    // A seed's hit: (preferred — the target asked for, or a violation —, fallback — a failed
    // expectation when no target was asked for —).
    let try_seed = |s: u64, runs: &mut u64| -> Result<[Option<(Hit, f64)>; 2], ShrinkError> {
        opts.count(runs);
        let out = opts.run(original, model, s, RunOptions::default());
        let r = &out.map_err(|e| ShrinkError::Run(e.to_string()))?.report;
        let found = |h: Option<Hit>| h.map(|h| (h, r.end_ms));
        Ok(match opts.target {
            Some(t) => [found(t.hit(r)), None],
            None => [found(Hit::first_violation(r)), found(Hit::first_expectation(r))],
        })
    };
    if let Some(s) = seed
        && let [a, b] = try_seed(s, &mut runs)?
        && let Some((t, end)) = a.or(b)
    {
        return Ok((s, t, end, runs));
    }
    let range = original.seeds.clone();
    let last = range.start.saturating_add(FIRST_SEARCH_SEEDS).min(range.end);
    let mut tried = range.start..range.start;
    let (mut failing, mut fallback) = (None, None);
    for s in range.start..last {
        if runs >= allowed {
            break;
        }
        tried.end = s + 1;
        if Some(s) == seed {
            continue; // already run
        }
        let [hit, expectation] = try_seed(s, &mut runs)?;
        if fallback.is_none() {
            fallback = expectation.map(|(t, end)| (s, t, end));
        }
        if let Some((t, end)) = hit {
            if seed.is_none() {
                return Ok((s, t, end, runs));
            }
            failing = Some(s);
            break;
        }
    }
    let mut failing_expectation = false;
    if let Some((s, t, end)) = fallback {
        if seed.is_none() {
            return Ok((s, t, end, runs));
        }
        failing_expectation = failing.is_none();
        failing = failing.or(Some(s));
    }
    Err(ShrinkError::NoFailure(NoFailure {
        sim: original.name.clone(),
        model: model.name.clone(),
        target: opts.target,
        asked: seed,
        budget_spent: failing.is_none() && tried.end < last,
        tried,
        failing,
        failing_expectation,
    }))
}

/// The greedy passes: the first candidate that still fails is accepted, then the passes
/// start again, until no candidate fails or the budget is spent. What was removed, in order,
/// and whether the run budget ran out.
fn passes(
    search: &mut Search,
    table: &mut Table,
    sim: &mut Arc<Sim>,
    seed: &mut u64,
) -> (Vec<String>, bool) {
    let mut removed = Vec::new();
    'outer: loop {
        for (cand, what) in candidates(table) {
            if search.out_of_budget() {
                return (removed, true);
            }
            if let Some((s, at)) = search.accept(&cand, *seed) {
                *table = cand;
                *sim = s;
                *seed = at;
                removed.push(what);
                continue 'outer;
            }
        }
        return (removed, false);
    }
}

/// What the search found, for the file's provenance header.
struct Found<'a> {
    seed0: u64,
    seed: u64,
    failing: u64,
    window: u64,
    removed: &'a [String],
    budget_spent: bool,
}

/// The minimal sim file's provenance header: where it came from, the violation and seeds,
/// what was removed, the runs, and the replay command. Every text interpolated from a file or
/// a path is made printable (control characters escaped), so a newline in a path cannot end a
/// comment and become live TOML.
fn provenance(path: &Path, search: &Search, f: &Found) -> String {
    use crate::text::printable;
    let Found { seed0, seed, failing, window, removed, budget_spent } = *f;
    let (lo, hi) = wilson(failing, window);
    // Printed, not written: the file has no name yet, so the command names a placeholder
    // (left unquoted: it is for a reader to replace, not a shell to run).
    const PLACEHOLDER: &str = "THIS-FILE";
    let file = search.opts.file.as_deref().unwrap_or(PLACEHOLDER);
    let explore = search.opts.explore_name();
    let model = crate::catalog::cli_name(search.model);
    let mut replay = crate::catalog::replay_explored(file, &model, seed, explore.as_deref());
    if search.opts.file.is_none() {
        replay = replay.replacen(PLACEHOLDER, "<this file>", 1);
    }
    format!(
        "# Shrunk by `idemsim shrink` (idemsim {}) from {} under model {}\n\
         # {}{} · seed {seed0} → seed {seed} · fails on {failing}/{window} seeds 0..{window} \
         (95% CI {:.0}%–{:.0}%)\n\
         # removed: {}\n\
         # {} runs{}\n\
         # replay: {}\n",
        env!("CARGO_PKG_VERSION"),
        printable(&crate::catalog::display_path(path)),
        printable(&search.model.name),
        printable(&search.start.following()),
        explore.as_deref().map_or(String::new(), |s| format!(" · explore {s}")),
        100.0 * lo,
        100.0 * hi,
        if removed.is_empty() { "nothing".to_string() } else { printable(&removed.join(" · ")) },
        search.runs,
        if budget_spent {
            format!(
                " · the budget of {} runs was spent before every candidate was tried: it may \
                 shrink further",
                search.opts.budget_runs
            )
        } else {
            String::new()
        },
        printable(&replay),
    )
}
