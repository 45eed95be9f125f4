//! Computing a [`Story`]: the search for a failure (the sim given, or the shipped sims in
//! [`SEARCH`] order), its shrink to a minimal scenario, the other models on that scenario, a
//! contrasting run, and the story told on the run shown.

use std::path::PathBuf;
use std::sync::Arc;

use super::{Contrast, ExplainOptions, Failure, Found, Minimal, Other, Story, narrative};
use crate::catalog;
use crate::explore::Strategy;
use crate::model::Model;
use crate::report::RunReport;
use crate::run::{self, RunOptions};
use crate::scenario::Sim;
use crate::shrink::{self, Hit, ShrinkOptions, Target};
use crate::sweep;

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
pub(super) fn search_dirs() -> Vec<(String, Vec<PathBuf>)> {
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
pub(super) const SEARCH_SEEDS: u64 = 200;

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
pub(super) fn find_failure(
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
pub(super) fn compute(model: &Arc<Model>, f: Failure, eo: &ExplainOptions) -> Story {
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
