//! Real runs: a sim's client side played for real against real server processes (a target,
//! `docs/targets.md`), judged by the same expectations and oracle as a simulated run.
//!
//! This is idemsim's second world: like `src/world/` it touches SQLite (the target's database
//! file, read after each round), and unlike it it reads wall-clock time and runs real
//! threads, sockets and processes. Nothing here is deterministic, and nothing here is used by
//! a simulated run.

pub mod calibrate;
pub mod cmd;
pub mod conduct;
pub mod controlled_text;
pub mod db;
pub mod hub;
pub mod interleave;
pub mod janitor;
pub mod mapping;
pub mod measure;
pub mod procs;
pub mod proxy;
pub mod resp;
pub mod round;
pub mod services;
pub mod shrink;
pub mod startup;
pub mod target;
pub mod template;
pub mod validate;
pub mod wire;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;

use crate::model::Model;
use crate::run;
use crate::scenario::{InjectAction, Sim};
use crate::sweep::{Cell, SeedResult};

pub use round::RoundOptions;
pub use target::Target;

/// Options of a real run.
#[derive(Debug, Clone)]
pub struct RealOptions {
    /// Rounds to play (each a fresh database and fresh processes).
    pub runs: u64,
    /// The first round's number (its seed); rounds are `first..first + runs`.
    pub first: u64,
    /// Controlled rounds: how many times each is played again to see it reproduce.
    pub replays: u32,
    /// Controlled rounds: shrink the first violating round's schedule ([`shrink`]).
    pub shrink: bool,
    /// Each round's options.
    pub round: RoundOptions,
}

impl RealOptions {
    /// `runs` rounds from round 0, not replayed.
    pub fn plain(runs: u64, round: RoundOptions) -> RealOptions {
        RealOptions { runs, first: 0, replays: 0, shrink: false, round }
    }
}

/// The most rounds one real run plays.
pub const MAX_RUNS: u64 = 10_000;

/// One round, as a line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct RoundLine {
    /// 0-based.
    pub round: u64,
    /// Wall time of the round's traffic (ms).
    pub wall_ms: f64,
    /// Rows at the end.
    pub rows: u64,
    /// Effects at the end.
    pub effects: u64,
    /// The expectations held.
    pub passed: bool,
    /// Violation names (not policy-permitted ones).
    pub violations: Vec<String>,
    /// The round's folder, when kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    /// A controlled round: its schedule, and whether its replays reproduced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control: Option<RoundControl>,
    /// `--trace`: the round as it ran (reported for one round, [`RealReport::trace`]).
    #[serde(skip)]
    pub trace: Option<interleave::Interleaving>,
}

impl RoundLine {
    fn ok(&self) -> bool {
        self.violations.is_empty()
    }

    /// Round `r`'s line from its judged report, its wall time, folder and control.
    fn of(
        r: u64,
        report: &crate::report::RunReport,
        (wall_ms, dir, control): (f64, Option<std::path::PathBuf>, Option<RoundControl>),
    ) -> RoundLine {
        RoundLine {
            round: r,
            wall_ms,
            rows: report.rows.len() as u64,
            effects: report.effects_total,
            passed: report.passed(),
            violations: report.violation_names().iter().map(|v| v.name().to_string()).collect(),
            dir: dir.map(|d| d.display().to_string()),
            control,
            trace: None,
        }
    }
}

/// What a controlled round decided, and how its replays went.
#[derive(Debug, Clone, Serialize)]
pub struct RoundControl {
    /// The events released, in order (`send A`, `resume A at POINT`, `expire A`).
    pub schedule: Vec<String>,
    /// Released events after which their flow showed nothing within the quiet bound.
    pub escaped: Vec<String>,
    /// The slowest wait from a release to its flow's next visible event (ms).
    pub slowest_ms: f64,
    /// The round's bound ended it with events still held.
    pub cut: bool,
    /// Replays played, and those that reproduced the round exactly (schedule, answers, rows,
    /// effects).
    pub replays: u32,
    /// See `replays`.
    pub reproduced: u32,
    /// Where the first replay that did not reproduce the round departed from it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub differs: Option<String>,
    /// `--schedule`: its events never taken (the first was never enabled).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unplayed: Vec<String>,
}

/// A real run: the cell over its rounds, and each round.
#[derive(Debug, Clone, Serialize)]
pub struct RealReport {
    /// Always "idemsim-real" (schemas/real.v1.schema.json).
    pub format: &'static str,
    /// The format's version: 1.
    pub version: u32,
    /// Always "real": this report is of a real, not a deterministic, run.
    pub kind: &'static str,
    /// The target's name.
    pub target: String,
    /// The aggregate, as a sweep's cell (`seeds` are rounds).
    pub cell: Cell,
    /// Every round.
    pub rounds: Vec<RoundLine>,
    /// The machine's load average (1, 5, 15 min) before the first round and after the last.
    pub load_before: [f64; 3],
    /// See `load_before`.
    pub load_after: [f64; 3],
    /// Logical CPUs of the machine.
    pub cpus: usize,
    /// Warm-up requests each process answered before a round's traffic (0: cold processes).
    pub warm: u32,
    /// Crashes idemsim caused over every round (a sim's `crash` rate is a chance per step:
    /// this is how many happened).
    pub crashes: u64,
    /// Per hook point the target called (`step` for its steps): in how many rounds, and how
    /// often in all.
    pub points: BTreeMap<String, crate::sweep::Fired>,
    /// 2xx answers that named no row (no top-level `id`, nothing at the target's `id`
    /// pointer): the oracle cannot check them against the stored rows.
    pub successes_without_id: u64,
    /// Controlled rounds (`--controlled`): the strategy and the quiet bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controlled: Option<ControlSummary>,
    /// `--shrink`: the first violating round's schedule, shrunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shrunk: Option<shrink::Shrunk>,
    /// `--trace`: the first violating round (else the first round) as it ran: its schedule
    /// merged with the server's own trace lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<interleave::Interleaving>,
}

/// How a controlled run chose its rounds' schedules.
#[derive(Debug, Clone, Serialize)]
pub struct ControlSummary {
    /// `random`, `pct:d=N`, `schedule`.
    pub strategy: String,
    /// How long a released flow may show nothing before it has escaped control (ms).
    pub quiet_ms: u64,
    /// `schedule`: the file it was read from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule_file: Option<String>,
}

impl ControlSummary {
    fn of(c: &conduct::Control) -> ControlSummary {
        ControlSummary {
            strategy: c.order.name(),
            quiet_ms: c.quiet.as_millis() as u64,
            schedule_file: c.schedule_file.clone(),
        }
    }
}

/// A real run that could not go on.
#[derive(Debug, Clone)]
pub struct RealError(pub String);

impl std::fmt::Display for RealError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why real runs cannot play this sim (None: they can): the faults and actions a real round
/// does not reproduce yet.
pub fn unsupported(sim: &Sim) -> Option<String> {
    let f = &sim.faults;
    let mut missing = Vec::new();
    if !f.partitions.is_empty() {
        missing.push("partitions");
    }
    if f.gc_every_us.is_some() {
        missing.push("a key collector (gc_every_ms)");
    }
    if f.commit_lost > 0.0 {
        missing.push("commit_lost");
    }
    if f.reply_drop_after_commit > 0.0 {
        missing.push("reply_drop_after_commit");
    }
    let e = &f.effects;
    if [e.drop, e.ack_drop, e.duplicate, e.error_after_success, e.delay, e.decline]
        .iter()
        .any(|r| *r > 0.0)
    {
        missing.push("effect provider faults");
    }
    let c = &f.cache;
    if [c.unavailable, c.evict, c.restart, c.reply_drop].iter().any(|r| *r > 0.0) {
        missing.push("cache faults");
    }
    if sim.world.clock_skew_us.is_some() || sim.requests.iter().any(|q| q.clock_skew_us.is_some()) {
        missing.push("clock skew");
    }
    if sim.injects.iter().any(|i| matches!(i.action, InjectAction::ClockJump { .. })) {
        missing.push("clock jumps");
    }
    if !sim.world.stock.is_empty() {
        missing.push("stock");
    }
    (!missing.is_empty()).then(|| format!("real runs do not reproduce {} yet", missing.join(", ")))
}

fn load_average() -> [f64; 3] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut it = text.split_whitespace().map(|x| x.parse::<f64>().unwrap_or(0.0));
    [it.next().unwrap_or(0.0), it.next().unwrap_or(0.0), it.next().unwrap_or(0.0)]
}

/// Play `opts.runs` rounds of `sim` against `target`, judging each as `model`; `on_round`
/// sees each round as it ends (progress).
pub fn real(
    sim: &Arc<Sim>,
    model: &Arc<Model>,
    target: &Target,
    opts: &RealOptions,
    mut on_round: impl FnMut(&RoundLine),
) -> Result<RealReport, RealError> {
    playable(sim, model)?;
    if let Some(why) = opts.round.control.as_ref().and_then(|_| conduct::uncontrollable(sim)) {
        return Err(RealError(format!("sim `{}`: {why}", sim.name)));
    }
    let runs = opts.runs.clamp(1, MAX_RUNS);
    let first = opts.first.min(u64::MAX - runs);
    let mut cell = Cell::new(sim, model, &(first..first + runs));
    let load_before = load_average();
    let mut rounds = Vec::new();
    let mut tally = Tally::default();
    for r in first..first + runs {
        if crate::sweep::INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed) {
            cell.interrupted = true;
            break;
        }
        let res = round::play(sim, model, target, r, &opts.round);
        if crate::sweep::INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed) {
            // A round cut short by a signal is not a finding, nor a target's fault (its
            // servers were ended by the signal's handler): it is not judged.
            cell.interrupted = true;
            break;
        }
        let res = res.map_err(|e| RealError(format!("round {r}: {}", e.0)))?;
        let control = match &res.control {
            Some(log) => Some(replay(sim, model, target, r, opts, (&res.observation, log))?),
            None => None,
        };
        tally.add(&res);
        let wall_ms = res.wall_us as f64 / 1000.0;
        let report = judged(sim, model, r, res.observation, res.control.as_ref());
        let mut line = RoundLine::of(r, &report, (wall_ms, res.dir, control));
        line.trace = res.interleaving;
        on_round(&line);
        rounds.push(line);
        cell.add(&SeedResult { cell: 0, seed: r, report, nondeterministic: false });
    }
    never_reached(sim, &tally, rounds.len())?;
    if opts.round.control.is_some() && !rounds.is_empty() {
        never_held(model, target, &tally.held_at)?;
    }
    cell.seeds = format!("{} rounds", cell.runs);
    let shrunk = shrink_first((sim, model, target), opts, &rounds)?;
    Ok(RealReport {
        format: "idemsim-real",
        version: 1,
        kind: "real",
        target: target.name.clone(),
        cell,
        trace: rounds.iter().find(|l| !l.ok()).or(rounds.first()).and_then(|l| l.trace.clone()),
        rounds,
        load_before,
        load_after: load_average(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        warm: opts.round.warm,
        crashes: tally.crashes,
        points: tally.points,
        successes_without_id: tally.successes_without_id,
        controlled: opts.round.control.as_ref().map(ControlSummary::of),
        shrunk,
    })
}

/// `--shrink`: the first violating round's schedule, shrunk (None: no round violated).
fn shrink_first(
    (sim, model, target): (&Arc<Sim>, &Arc<Model>, &Target),
    opts: &RealOptions,
    rounds: &[RoundLine],
) -> Result<Option<shrink::Shrunk>, RealError> {
    // An interrupted run is reported as it stands: no round more.
    let interrupted = crate::sweep::INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed);
    let first = rounds.iter().find(|l| !l.violations.is_empty());
    let Some(l) = first.filter(|_| opts.shrink && !interrupted) else {
        return Ok(None);
    };
    let schedule = l.control.as_ref().map(|c| c.schedule.clone()).unwrap_or_default();
    shrink::shrink((sim, model, target), opts, l.round, &schedule, &l.violations[0]).map(Some)
}

/// A real round's observation judged as the model's: the oracle's violations, plus a 2xx
/// that names no stored row, with transport failures never excused as the client's except
/// for a controlled round's intents every attempt of which its conductor gave up (`control`).
pub fn judged(
    sim: &Sim,
    model: &Model,
    r: u64,
    observation: crate::report::Observation,
    control: Option<&conduct::ControlLog>,
) -> crate::report::RunReport {
    let timed_out = control.map(|l| timed_out_intents(&observation, l)).unwrap_or_default();
    let mut report = run::judge(sim, model, r, observation);
    report.violations.extend(successes_of_nothing(&report));
    crate::oracle::unanswered_as_real(&mut report.violations, &timed_out);
    report
}

/// The intents of a controlled round every attempt of which met no answer because the
/// conductor chose its client's timeout: their `out-of-retries` is the round's fault, as in a
/// simulated run, not a server that never answered.
fn timed_out_intents(
    o: &crate::report::Observation,
    log: &conduct::ControlLog,
) -> BTreeSet<String> {
    let mut by_intent: BTreeMap<&str, bool> = BTreeMap::new();
    for (qi, q) in o.requests.iter().enumerate() {
        let intent = q.intent.as_str();
        for (c, copy) in q.copies.iter().enumerate() {
            for (k, a) in copy.iter().enumerate() {
                let flow = format!("{qi}.{c}.{}", k + 1);
                let excused = a.outcome == crate::report::Outcome::TransportFailure
                    && log.expired.contains(&flow);
                let all = by_intent.entry(intent).or_insert(true);
                *all = *all && excused;
            }
        }
    }
    by_intent.into_iter().filter(|(_, all)| *all).map(|(i, _)| i.to_string()).collect()
}

/// A controlled round `r` played `opts.replays` times more: how many reproduced it exactly.
fn replay(
    sim: &Arc<Sim>,
    model: &Arc<Model>,
    target: &Target,
    r: u64,
    opts: &RealOptions,
    (observation, log): (&crate::report::Observation, &conduct::ControlLog),
) -> Result<RoundControl, RealError> {
    let print = outcome_print(observation, log);
    let mut reproduced = 0;
    let mut differs = None;
    let again = RoundOptions { keep: false, ..opts.round.clone() };
    for _ in 0..opts.replays {
        let res = round::play(sim, model, target, r, &again)
            .map_err(|e| RealError(format!("round {r} (replay): {}", e.0)))?;
        let other = res.control.as_ref().map(|l| outcome_print(&res.observation, l));
        match other.as_ref().map(|o| first_difference(&print, o)) {
            Some(None) => reproduced += 1,
            Some(Some(d)) => differs = differs.or(Some(d)),
            None => {}
        }
    }
    Ok(RoundControl {
        schedule: log.schedule.clone(),
        escaped: log.escaped.clone(),
        slowest_ms: log.slowest_us as f64 / 1000.0,
        cut: log.cut,
        replays: opts.replays,
        reproduced,
        differs,
        unplayed: log.unplayed.clone(),
    })
}

/// What a replay must reproduce: the schedule, every attempt's answer (status and the row it
/// names), the rows stored (id and intent) and the effects, in order.
fn outcome_print(o: &crate::report::Observation, log: &conduct::ControlLog) -> [Vec<String>; 4] {
    let mut answers = Vec::new();
    for q in &o.requests {
        for (c, copy) in q.copies.iter().enumerate() {
            for (k, a) in copy.iter().enumerate() {
                answers.push(format!("{}.{c}.{}: {:?} row {:?}", q.id, k + 1, a.status, a.row));
            }
        }
    }
    let rows = o.rows.iter().map(|r| format!("row {} for {}", r.id, r.intent)).collect();
    let effects = o.effect_log.iter().map(|e| format!("effect for {}", e.intent)).collect();
    [log.schedule.clone(), answers, rows, effects]
}

/// Where a replay first departed from its round (None: it did not): the part, the position,
/// and both entries.
fn first_difference(first: &[Vec<String>; 4], again: &[Vec<String>; 4]) -> Option<String> {
    const PARTS: [&str; 4] = ["schedule", "answers", "rows", "effects"];
    for (part, (a, b)) in PARTS.iter().zip(first.iter().zip(again)) {
        if a == b {
            continue;
        }
        let i = a.iter().zip(b).take_while(|(x, y)| x == y).count();
        let at = |v: &Vec<String>| v.get(i).map_or("(nothing)".to_string(), |e| format!("`{e}`"));
        return Some(format!("{part}, entry {}: {} then {}", i + 1, at(a), at(b)));
    }
    None
}

/// A crash idemsim caused: the sim's crash rate, or an injected crash.
fn is_crash(fault: &str) -> bool {
    fault == "crash" || fault.ends_with(":crash")
}

/// The rounds played no round of the sim when a point it arms (an `[[inject]]`'s, or the
/// steps where its crash rate strikes) was never reached: the target does not call the hook
/// there, so the faults the sim is about never fired. A target fault, never a result.
fn never_reached(sim: &Sim, tally: &Tally, rounds: usize) -> Result<(), RealError> {
    if rounds == 0 {
        return Ok(());
    }
    let mut armed: BTreeSet<&str> = sim.injects.iter().map(|i| i.point.as_str()).collect();
    if sim.faults.crash > 0.0 {
        armed.insert("step");
    }
    let missed: Vec<String> = armed
        .into_iter()
        .filter(|p| !tally.points.contains_key(*p))
        .map(|p| if p == "step" { "its steps".to_string() } else { format!("@{p}") })
        .collect();
    if missed.is_empty() {
        return Ok(());
    }
    Err(RealError(format!(
        "the target never reached {} (0 of {rounds} rounds): it does not call the hook \
         (IDEMSIM_HOOK) there, so the faults the sim arms never fired and no round played \
         this sim (docs/targets.md, \"Points\")",
        missed.join(", ")
    )))
}

/// Controlled rounds hold the server at every step where its runtime lets another request
/// run ([`conduct::yield_steps`]). A target that never announced one of them there was never
/// held there: its requests ran one after the other where real ones interleave, and the
/// rounds' "no violation" would be a false safe. A target fault, never a result.
fn never_held(model: &Model, target: &Target, held_at: &BTreeSet<String>) -> Result<(), RealError> {
    let missed: Vec<String> = conduct::yield_steps(model, target.proxied())
        .into_iter()
        .filter(|s| !held_at.contains(s))
        .map(|s| format!("`{}`", s.trim_start_matches("step ")))
        .collect();
    for s in target.services.iter().filter(|s| s.proxy.is_some()) {
        let prefix = format!("{} ", s.name);
        if !held_at.iter().any(|p| p.starts_with(&prefix)) {
            return Err(RealError(format!(
                "a controlled round holds every reply service `{}` gives a request, through a \
                 proxy whose port the target's command is given for ${{service.{}.port}}; no \
                 reply to a request's command ever came through it, so the server does not \
                 talk to that service where the target says and no round can be judged \
                 (docs/controlled.md)",
                s.name, s.name
            )));
        }
    }
    if missed.is_empty() {
        return Ok(());
    }
    Err(RealError(format!(
        "a controlled round holds the server where its runtime lets requests interleave, and \
         model `{}` interleaves at step(s) {}; the target never announced them at the hook \
         (IDEMSIM_HOOK, `step`), so its requests ran one after the other there and no round \
         can be judged (docs/controlled.md)",
        model.name,
        missed.join(", ")
    )))
}

/// Can real rounds play `sim` judged as `model`?
fn playable(sim: &Sim, model: &Model) -> Result<(), RealError> {
    if let Some(why) = unsupported(sim) {
        return Err(RealError(format!("sim `{}`: {why}", sim.name)));
    }
    if let Some(why) = run::not_applicable(sim, model) {
        return Err(RealError(format!(
            "sim `{}` does not apply to model `{}`: {why}",
            sim.name, model.name
        )));
    }
    Ok(())
}

/// A real server's 2xx that names no row, for an intent of which no row was stored: a
/// success of nothing (`lost-success`), never passed by default. The simulated designs always
/// name the row they answer for, so only a real round can show it.
fn successes_of_nothing(report: &crate::report::RunReport) -> Vec<crate::report::Violation> {
    let mut out: Vec<crate::report::Violation> = Vec::new();
    for q in &report.requests {
        let stored = report.rows.iter().any(|row| row.intent == q.intent);
        let empty = q.copies.iter().flatten().find(|a| a.is_success() && a.id().is_none());
        if let Some(a) = empty.filter(|_| !stored)
            && !out.iter().any(|v| v.intent == q.intent)
        {
            out.push(crate::report::Violation {
                name: crate::report::ViolationKind::LostSuccess,
                intent: q.intent.clone(),
                detail: format!(
                    "client saw {} naming no row, and no row of the intent was stored",
                    a.status.unwrap_or(0)
                ),
                permitted: false,
            });
        }
    }
    out
}

/// What the rounds add up to besides the cell.
#[derive(Default)]
struct Tally {
    points: BTreeMap<String, crate::sweep::Fired>,
    /// Controlled rounds: the steps where the server was held, over every round.
    held_at: BTreeSet<String>,
    crashes: u64,
    successes_without_id: u64,
}

impl Tally {
    fn add(&mut self, res: &round::RoundResult) {
        for (point, n) in &res.reached {
            let p = self.points.entry(point.clone()).or_default();
            p.runs += 1;
            p.times = p.times.saturating_add(*n);
        }
        if let Some(log) = &res.control {
            self.held_at.extend(log.held_at.iter().cloned());
        }
        let faults = &res.observation.faults;
        self.crashes += faults.iter().filter(|(k, _)| is_crash(k)).map(|(_, n)| n).sum::<u64>();
        let answers = res.observation.requests.iter().flat_map(|q| q.copies.iter().flatten());
        self.successes_without_id +=
            answers.filter(|a| a.is_success() && a.id().is_none()).count() as u64;
    }
}
