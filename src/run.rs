//! One run end to end: the simulated world observes ([`world::simulate`]), the expectations
//! and the oracle judge the observation, and the [`RunReport`] is built once, complete.

use std::sync::Arc;

pub use crate::world::RunError;

use crate::explore::{Explored, Mode, Strategy, pct_bound, swarm_subset};
use crate::history::History;
use crate::model::{Model, Step};
use crate::report::{Observation, RecordState, RunReport};
use crate::scenario::{InjectAction, Sim};
use crate::units::show_duration;
use crate::{expect, oracle, world};

/// Options of one run.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    /// Keep the typed event history in the output (for `--trace`, `--mermaid`); the hash is
    /// always computed.
    pub keep_history: bool,
}

/// A run's report and (optionally) its history.
pub struct RunOutput {
    /// The judged report.
    pub report: RunReport,
    /// The typed event history, when the run was asked to keep it.
    pub history: Option<History>,
}

/// Run one seed of one sim against one model, and judge it.
pub fn run(
    sim: &Arc<Sim>,
    model: &Arc<Model>,
    seed: u64,
    opts: RunOptions,
) -> Result<RunOutput, RunError> {
    let sim_out = world::simulate(sim, model, seed, opts.keep_history, None)?;
    let report = judge(sim, model, seed, sim_out.observation);
    Ok(RunOutput { report, history: sim_out.history })
}

/// What exploring one run did (`--explore`): the strategy, what its explorer saw and, for
/// PCT, the calibrated run's decision count `k` its change points were drawn among.
#[derive(Debug, Clone)]
pub struct ExploreNote {
    /// The strategy as given (an exhaustive schedule: its own choices, `exhaustive@…`).
    pub strategy: Strategy,
    /// What the explorer saw.
    pub explored: Explored,
    /// PCT: the decisions of the calibrated run of the same seed (k).
    pub k: u64,
    /// Swarm: each fault kind the sim configures ([`crate::scenario::Faults::kinds`]) and
    /// whether this run had it on (empty: the sim configures none, or not swarm).
    pub swarm: Vec<(&'static str, bool)>,
    /// Swarm: the kinds on whose rate was pushed to its top edge, 1.0.
    pub swarm_top: Vec<&'static str>,
}

impl ExploreNote {
    /// The strategy as a replay command spells it: an exhaustive run names its schedule.
    pub fn replay_name(&self) -> String {
        match &self.strategy {
            Strategy::Exhaustive { bound, depth, .. } => Strategy::Exhaustive {
                bound: *bound,
                depth: *depth,
                schedule: Some(self.explored.choices()),
            }
            .to_string(),
            s => s.to_string(),
        }
    }

    /// One line for reports: the strategy and what it decided.
    pub fn line(&self) -> String {
        let e = &self.explored;
        match &self.strategy {
            Strategy::Edges => format!("explore edges: {} timing decision(s) taken", e.decisions),
            Strategy::Swarm => self.swarm_line(),
            Strategy::Faults { n } => format!(
                "explore {}: fired fault draw(s) {:?} of the {} the calibrated run made ({n} \
                 asked; every other fault draw does not fire; timing as calibrated)",
                self.strategy, e.fired, self.k
            ),
            Strategy::Pct { depth } => {
                let bound = pct_bound(e.tasks, self.k, *depth)
                    .map_or(String::new(), |b| format!(" · PCT bound 1/(n·k^(d−1)) = {b:.2e}"));
                format!(
                    "explore {}: {} task(s), k = {} (the calibrated run's decisions), change \
                     points at {:?}{bound}",
                    self.strategy, e.tasks, self.k, e.change_points
                )
            }
            Strategy::Exhaustive { .. } => format!(
                "explore {}: schedule of {} decision(s) (timing draws {{low, high}}, waiter \
                 picks, random routes; madsim's own task order held by the seed)",
                self.replay_name(),
                e.taken.len()
            ),
        }
    }

    /// The fault kinds this swarm run had on (`on`) or off.
    pub fn swarm_kinds(&self, on: bool) -> Vec<&'static str> {
        self.swarm.iter().filter(|(_, o)| *o == on).map(|(k, _)| *k).collect()
    }

    /// Swarm's line: the fault kinds on and off, and the timing decisions taken at the edges.
    fn swarm_line(&self) -> String {
        let d = self.explored.decisions;
        if self.swarm.is_empty() {
            return format!(
                "explore swarm: the sim configures no random fault kind: edges only, {d} timing \
                 decision(s) taken"
            );
        }
        let list = |on| match self.swarm_kinds(on) {
            v if v.is_empty() => "none".to_string(),
            v => v.join(" "),
        };
        let top = match &self.swarm_top[..] {
            [] => "none".to_string(),
            v => v.join(" "),
        };
        format!(
            "explore swarm: fault kinds on: {} · off: {} · at rate 1.0: {top} (each on with \
             probability 1/2 from the seed, and an on kind's rate as configured or at its top \
             edge 1.0, even odds) · {d} timing decision(s) taken at the edges",
            list(true),
            list(false)
        )
    }
}

/// The sim a swarm run of `seed` runs: its fault kinds each on or off ([`swarm_subset`]), the
/// kinds off zeroed ([`crate::scenario::Faults::without`]), and the subset.
fn swarm_sim(sim: &Arc<Sim>, seed: u64) -> (Arc<Sim>, Swarmed) {
    let kinds = sim.faults.kinds();
    let subset = swarm_subset(seed, &kinds);
    let top = crate::explore::swarm_top(seed, &kinds);
    let off: Vec<&str> = subset.iter().filter(|(_, on)| !on).map(|(k, _)| *k).collect();
    let high: Vec<&'static str> = subset
        .iter()
        .zip(&top)
        .filter(|((k, on), t)| *on && **t && !matches!(*k, "gc" | "partitions"))
        .map(|((k, _), _)| *k)
        .collect();
    if off.is_empty() && high.is_empty() {
        return (Arc::clone(sim), (subset, high));
    }
    let mut swarmed = Sim::clone(sim);
    swarmed.faults = sim.faults.without(&off).at_top(&high);
    (Arc::new(swarmed), (subset, high))
}

/// A swarm run's fault kinds (each on or off) and the kinds on at their top edge.
type Swarmed = (Vec<(&'static str, bool)>, Vec<&'static str>);

/// [`run`] with an explorer: `strategy` None is exactly [`run`]. PCT first runs the
/// calibrated run of the same seed to count its decisions (k), so (strategy, seed) replays.
/// Swarm runs the sim with the seed's subset of fault kinds ([`swarm_sim`]).
pub fn run_explored(
    sim: &Arc<Sim>,
    model: &Arc<Model>,
    seed: u64,
    opts: RunOptions,
    strategy: Option<&Strategy>,
) -> Result<(RunOutput, Option<ExploreNote>), RunError> {
    let Some(strategy) = strategy else { return Ok((run(sim, model, seed, opts)?, None)) };
    let (sim, sim_out, note) = explored_world(sim, model, seed, opts.keep_history, strategy)?;
    let report = judge(&sim, model, seed, sim_out.observation);
    Ok((RunOutput { report, history: sim_out.history }, Some(note)))
}

/// The simulated world of one explored run, before it is judged: the sim it ran (swarm's
/// subset), what the world observed, and the note. PCT and `faults` first run the calibrated
/// run of the same seed to count its decisions or its fault draws (k).
pub(crate) fn explored_world(
    sim: &Arc<Sim>,
    model: &Arc<Model>,
    seed: u64,
    keep_history: bool,
    strategy: &Strategy,
) -> Result<(Arc<Sim>, world::Simulated, ExploreNote), RunError> {
    // PCT's k: the calibrated run's decisions. `faults`' k: the fault draws of the run with
    // no fault fired (the explored run is that run up to its first point, so every first
    // point is reached).
    let probe = |mode| -> Result<_, RunError> {
        Ok(world::simulate(sim, model, seed, false, Some(mode))?.explored.unwrap_or_default())
    };
    let k = match strategy {
        Strategy::Pct { .. } => probe(Mode::Count)?.decisions,
        Strategy::Faults { .. } => probe(Mode::Faults(vec![]))?.fault_draws,
        _ => 0,
    };
    let (sim, (swarm, swarm_top)) = match strategy {
        Strategy::Swarm => swarm_sim(sim, seed),
        _ => (Arc::clone(sim), (Vec::new(), Vec::new())),
    };
    let mut sim_out =
        world::simulate(&sim, model, seed, keep_history, Some(strategy.mode(seed, k)))?;
    let explored = sim_out.explored.take().unwrap_or_default();
    let note = ExploreNote { strategy: strategy.clone(), explored, k, swarm, swarm_top };
    Ok((sim, sim_out, note))
}

/// Judge one observation (a simulated run's or a real round's): the sim's expectations and
/// the oracle, and the report built once, complete. `seed` names the run (a real round's
/// number).
pub fn judge(sim: &Sim, model: &Model, seed: u64, obs: Observation) -> RunReport {
    let checks = expect::check(sim, &obs);
    debug_assert_eq!(expect::holds(sim, &obs), checks.iter().all(|c| c.held), "expect::holds");
    let effects = obs.effects_per_intent();
    let mut report = judge_with(sim, model, seed, obs, checks);
    report.effects = effects;
    report.sim = sim.name.clone();
    report.model = model.name.clone();
    report.warnings = warnings(sim, model);
    report
}

/// [`judge`] for a sweep, which keeps of a run only what [`crate::sweep::Cell::add`] and
/// [`crate::sweep::per_seed_line`] read: the same report, except that `checks` is empty when
/// every check held (the full list otherwise: [`RunReport::passed`] is the same either way)
/// and `sim`, `model`, `warnings` and `effects` are left empty (they depend only on the cell,
/// or are summed in `effects_total` and `per_intent`).
pub fn judge_lean(sim: &Sim, model: &Model, seed: u64, obs: Observation) -> RunReport {
    let checks = if expect::holds(sim, &obs) { Vec::new() } else { expect::check(sim, &obs) };
    judge_with(sim, model, seed, obs, checks)
}

/// The report of `obs` with its checks, the oracle's violations and the counts; `sim`, `model`,
/// `warnings` and `effects` left empty for the caller.
fn judge_with(
    sim: &Sim,
    model: &Model,
    seed: u64,
    obs: Observation,
    checks: Vec<crate::report::Check>,
) -> RunReport {
    let violations = oracle::violations(sim, model, &obs);
    RunReport {
        seed,
        sim: String::new(),
        model: String::new(),
        keys: obs.keys.len() as u64,
        keys_in_progress: obs
            .keys
            .iter()
            .filter(|(_, r)| r.state == RecordState::InProgress)
            .count() as u64,
        effects_total: obs.effect_log.len() as u64,
        effects: std::collections::BTreeMap::new(),
        deliveries: obs.deliveries,
        checks,
        warnings: Vec::new(),
        per_intent: oracle::per_intent(sim, &obs),
        ambiguous_intents: oracle::ambiguous_intents(&violations),
        violations,
        end_ms: obs.end_us as f64 / 1000.0,
        events: obs.events,
        trace_hash: hex16(obs.trace_hash),
        faults: obs.faults,
        bounds_hit: obs.bounds_hit,
        rows: obs.rows,
        writes: obs.writes,
        requests: obs.requests,
    }
}

/// `format!("{h:016x}")` without the formatting machinery: 16 lowercase hex digits.
fn hex16(h: u64) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(16);
    for i in (0..16).rev() {
        s.push(char::from(DIGITS[((h >> (4 * i)) & 0xf) as usize]));
    }
    s
}

/// One seed as a sweep runs it: [`run_explored`] without a history, judged by [`judge_lean`].
pub(crate) fn run_lean(
    sim: &Arc<Sim>,
    model: &Arc<Model>,
    seed: u64,
    strategy: Option<&Strategy>,
) -> Result<RunReport, RunError> {
    Ok(match strategy {
        None => judge_lean(
            sim,
            model,
            seed,
            world::simulate(sim, model, seed, false, None)?.observation,
        ),
        Some(s) => {
            let (sim, sim_out, _) = explored_world(sim, model, seed, false, s)?;
            judge_lean(&sim, model, seed, sim_out.observation)
        }
    })
}

/// The model's documented key retention against the client's retry window, for report
/// headers: `kept 24 h · client retries until 2.3 s`. None when the model keeps keys forever.
pub fn retention_line(sim: &Sim, model: &Model) -> Option<String> {
    let r = model.key.as_ref()?.retention_us?;
    let client = match sim.retry_window_us() {
        0 => "the client does not retry".to_string(),
        w => format!("the client retries until {} after a first attempt", show_duration(w)),
    };
    Some(format!("kept {} (documented retention) · {client}", show_duration(r)))
}

/// Why the sim does not apply to the model (None: it does). A sim that injects at a point
/// the model's program does not have would judge a scenario that never happened: such a cell
/// is `n/a`, not a failure.
pub fn not_applicable(sim: &Sim, model: &Model) -> Option<String> {
    let points = model.points();
    let missing: Vec<String> = sim
        .injects
        .iter()
        .filter(|i| !points.contains(&i.point.as_str()))
        .filter(|i| !(i.point == "relay-after-send" && model.program.contains(&Step::Outbox)))
        // A fallback effect never fires in a design with its own effect step.
        .filter(|i| {
            !(matches!(i.action, InjectAction::Effect { fallback: true }) && model.has_effects())
        })
        .map(|i| format!("@{}", i.point))
        .collect();
    // A model of status events does not create orders.
    if model.program.contains(&Step::ApplyStatus)
        && sim.requests.iter().any(|q| q.path == "/api/orders" || q.path == "/api/returns")
    {
        return Some(format!(
            "model {} applies status events (`apply-status`) and the sim sends orders",
            model.name
        ));
    }
    // A sim of status events needs a model that applies them.
    if sim.requests.iter().any(|q| q.path == "/api/events")
        && !model.program.contains(&Step::ApplyStatus)
    {
        return Some(format!(
            "the sim sends status events (/api/events) and model {} has no `apply-status` step",
            model.name
        ));
    }
    // Document updates and the other kinds of request need each their own write step.
    let orders = sim.requests.iter().any(|q| q.path == "/api/orders" || q.path == "/api/returns");
    let updates_docs = model.program.contains(&Step::UpdateDoc);
    if updates_docs && orders {
        return Some(format!(
            "model {} updates documents (`update-doc`) and the sim sends orders",
            model.name
        ));
    }
    if sim.requests.iter().any(|q| q.path.starts_with(crate::http::DOCS_PREFIX)) && !updates_docs {
        return Some(format!(
            "the sim updates documents (PUT /api/docs/…) and model {} has no `update-doc` step",
            model.name
        ));
    }
    if model.version_check == crate::model::VersionCheck::ClientTime
        && sim.requests.iter().any(|q| {
            q.method == "PUT"
                && q.path.starts_with(crate::http::DOCS_PREFIX)
                && q.clock_skew_us.is_none()
        })
    {
        return Some(format!(
            "model {} stamps versions with the client's clock and the sim's updates carry none \
             (no `clock_skew_ms`)",
            model.name
        ));
    }
    let mut missing = missing;
    missing.sort();
    missing.dedup();
    (!missing.is_empty()).then(|| {
        format!(
            "the sim injects at {} and model {} has no such point",
            missing.join(", "),
            model.name
        )
    })
}

/// What in the sim cannot take effect with this model, or makes its verdict weaker.
pub fn warnings(sim: &Sim, model: &Model) -> Vec<String> {
    let mut w: Vec<String> = Vec::new();
    if sim.faults.gc_every_us.is_some() && model.key.as_ref().and_then(|k| k.retention_us).is_none()
    {
        w.push(format!(
            "faults.gc_every_ms is set but model {} has no key retention_ms: nothing expires",
            model.name
        ));
    }
    if let Some(r) = model.key.as_ref().and_then(|k| k.retention_us)
        && sim.retry_window_us() > r
    {
        w.push(format!(
            "model {} keeps keys {} but the client retries until {}: a retry after the \
             retention executes again (reported as policy-permitted expired-*)",
            model.name,
            show_duration(r),
            show_duration(sim.retry_window_us())
        ));
    }
    w.dedup();
    w
}
