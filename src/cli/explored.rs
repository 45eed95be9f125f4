//! `idemsim matrix --explore STRATEGY`: every cell hunted with one strategy (each seed of the
//! cell's range explored, or for `exhaustive` the schedules of its first seed), reported as
//! what was found and after how many runs, never as rates.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::MatrixArgs;
use crate::explore::Strategy;
use crate::model::Model;
use crate::scenario::Sim;
use crate::sweep::{self, Cell};
use crate::{catalog, render};

/// One explored cell: its aggregate (an exhaustive cell's seeds are its schedules), the seed
/// its runs are counted from, and for `exhaustive` the schedules and whether the space ran out.
pub(super) struct Hunted {
    /// The aggregate.
    pub cell: Cell,
    /// The first seed of the range (runs to first count from it); an exhaustive cell's: 0.
    pub start: u64,
    /// `exhaustive`: the seed every schedule ran with, each schedule's choices, exhausted.
    pub exhaustive: Option<(u64, Vec<String>, bool)>,
    /// The sim's path and the model's name as a replay command names them (the files this
    /// matrix loaded, not a lookup by name).
    pub sim_path: String,
    /// See `sim_path`.
    pub model_name: String,
}

impl Hunted {
    /// The strategy that replays the run numbered `i` of this cell, and its seed.
    fn replay(&self, strategy: &Strategy, i: u64) -> (String, u64) {
        match &self.exhaustive {
            Some((seed, schedules, _)) => (format!("exhaustive@{}", schedules[i as usize]), *seed),
            None => (strategy.to_string(), i),
        }
    }

    /// Per violation, the runs until it was first seen.
    pub fn runs_to_first(&self) -> std::collections::BTreeMap<String, u64> {
        let c = &self.cell;
        c.violations
            .iter()
            .map(|(n, v)| (n.clone(), render::runs_to_first(v.first_seed, self.start)))
            .collect()
    }

    /// The runs until its first violation that is not policy-permitted, if any.
    fn first(&self) -> Option<u64> {
        let c = &self.cell;
        c.violating().map(|(_, v)| render::runs_to_first(v.first_seed, self.start)).min()
    }
}

/// Hunt every cell of `sims` × `models` with `strategy` over `seeds` (default: each sim's own
/// range), on `jobs` workers; cells in sim-major order, the same for any `jobs`.
pub(super) fn hunt(
    sims: &[Arc<Sim>],
    models: &[Arc<Model>],
    seeds: Option<std::ops::Range<u64>>,
    (strategy, coverage): (&Strategy, bool),
    jobs: usize,
) -> anyhow::Result<Vec<Hunted>> {
    let Strategy::Exhaustive { bound, depth, .. } = strategy else {
        let bar = super::progress::Bar::start("matrix");
        let opts = sweep::SweepOptions {
            jobs,
            progress: Some(bar.counters()),
            explore: Some(strategy.clone()),
            coverage,
            ..Default::default()
        };
        let cells = sweep::run_cells(sims, models, seeds.clone(), &opts, |_, _| {})?;
        // Cells come sim-major, as the pairs below.
        return Ok(cells
            .into_iter()
            .zip(pairs(sims, models))
            .map(|(cell, (s, m))| {
                let start = seeds.as_ref().map_or(s.seeds.start, |r| r.start);
                Hunted { cell, start, exhaustive: None, ..names(s, m) }
            })
            .collect());
    };
    let pairs = pairs(sims, models);
    let next = AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<anyhow::Result<Hunted>>>> =
        pairs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, pairs.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((s, m)) = pairs.get(i) else { break };
                    let seed = seeds.as_ref().map_or(s.seeds.start, |r| r.start);
                    let r = exhaustive_cell(s, m, seed, (*bound, *depth));
                    *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                }
            });
        }
    });
    results
        .into_iter()
        .map(|r| {
            r.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .unwrap_or_else(|| Err(anyhow::anyhow!("a worker stopped")))
        })
        .collect()
}

/// The cells' (sim, model) pairs, sim-major (the order of `run_cells`' cells).
fn pairs<'a>(
    sims: &'a [Arc<Sim>],
    models: &'a [Arc<Model>],
) -> Vec<(&'a Arc<Sim>, &'a Arc<Model>)> {
    sims.iter().flat_map(|s| models.iter().map(move |m| (s, m))).collect()
}

/// A hunted cell of `sim` × `model` with nothing in it yet but the names its replays use.
fn names(sim: &Sim, model: &Model) -> Hunted {
    Hunted {
        cell: Cell::new(sim, model, &(0..0)),
        start: 0,
        exhaustive: None,
        sim_path: catalog::display_path(&sim.path),
        model_name: catalog::cli_name(model),
    }
}

/// One cell's exhaustive hunt (an `n/a` cell runs nothing).
fn exhaustive_cell(
    sim: &Arc<Sim>,
    model: &Arc<Model>,
    seed: u64,
    space: (u64, u32),
) -> anyhow::Result<Hunted> {
    if crate::run::not_applicable(sim, model).is_some() {
        let cell = Cell::new(sim, model, &(seed..seed));
        return Ok(Hunted { cell, exhaustive: Some((seed, vec![], true)), ..names(sim, model) });
    }
    let e = sweep::run_exhaustive(sim, model, seed, space, None)?;
    let exhaustive = Some((e.seed, e.schedules, e.exhausted));
    Ok(Hunted { cell: e.cell, exhaustive, ..names(sim, model) })
}

/// The hunt as text: one row per cell (runs, what was found, runs to its first violation),
/// a summary, and the replay of each cell's first violation.
pub(super) fn text(
    args: &MatrixArgs,
    hunted: &[Hunted],
    strategy: &Strategy,
    jobs: usize,
) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let sims =
        hunted.iter().map(|h| h.cell.sim.as_str()).collect::<std::collections::BTreeSet<_>>();
    let models =
        hunted.iter().map(|h| h.cell.model.as_str()).collect::<std::collections::BTreeSet<_>>();
    let seeds = args.seeds.clone().unwrap_or_else(|| "each sim's own range".into());
    let _ = writeln!(
        out,
        "idemsim matrix: {} sim(s) × {} model(s) · seeds {} · {jobs} job(s) · explore {strategy}",
        sims.len(),
        models.len(),
        crate::text::printable(&seeds)
    );
    let summary = match strategy {
        Strategy::Exhaustive { bound, depth, .. } => format!(
            "explore {strategy}: every combination of the first {depth} decisions of each \
             cell's first seed, depth first, at most {bound} schedules per cell (timing draws \
             {{low, high}}, random routes; madsim's own task order and the fault \
             draws held by the seed); a cell's runs are its schedules"
        ),
        _ => super::sweep::explored_summary(strategy),
    };
    let _ = writeln!(out, "  {summary}");
    let _ = writeln!(
        out,
        "  a hunt: a cell's violations exist (replay them below); its counts are not rates\n"
    );
    let w_sim = hunted.iter().map(|h| h.cell.sim.chars().count()).max().unwrap_or(3).max(3);
    let w_model = hunted.iter().map(|h| h.cell.model.chars().count()).max().unwrap_or(5).max(5);
    let _ = writeln!(
        out,
        "{:w_sim$}  {:w_model$}  {:>6}  {:>13}  found",
        "sim", "model", "runs", "runs to first"
    );
    for h in hunted {
        let _ = writeln!(out, "{}", row(h, (w_sim, w_model)));
    }
    let found: Vec<u64> = hunted.iter().filter_map(Hunted::first).collect();
    let applicable = hunted.iter().filter(|h| h.cell.applicable).count();
    let _ = write!(out, "\ncells with a violation: {} of {applicable} applicable", found.len());
    if !found.is_empty() {
        let mut f = found.clone();
        f.sort_unstable();
        let _ = write!(
            out,
            " · runs to first violation: median {}, worst {}",
            f[(f.len() - 1) / 2],
            f[f.len() - 1]
        );
    }
    out.push('\n');
    replays(&mut out, hunted, strategy);
    out
}

/// One cell's row.
fn row(h: &Hunted, (w_sim, w_model): (usize, usize)) -> String {
    let c = &h.cell;
    let (runs, first, found) = if !c.applicable {
        ("—".to_string(), "—".to_string(), "n/a".to_string())
    } else if c.runs == 0 {
        // Interrupted before this cell started: nothing was hunted, so nothing is clean.
        ("0".to_string(), "—".to_string(), render::NOT_RUN.to_string())
    } else {
        let mut found: Vec<String> = c
            .violations_in_order()
            .into_iter()
            .filter(|(_, v)| !v.permitted)
            .map(|(n, v)| format!("{n} ({})", render::runs_to_first(v.first_seed, h.start)))
            .collect();
        if c.failed_seeds > 0 {
            found.push(format!("expectations failed on {} run(s)", c.failed_seeds));
        }
        if c.bounded_runs > 0 {
            found.push(format!("{} run(s) hit a bound", c.bounded_runs));
        }
        if let Some((_, _, exhausted)) = &h.exhaustive {
            found.push(if *exhausted { "space exhausted" } else { "bound reached" }.into());
        }
        let first = h.first().map_or("—".into(), |n| n.to_string());
        let found = if found.is_empty() { "clean".into() } else { found.join(" · ") };
        (c.runs.to_string(), first, found)
    };
    format!("{:w_sim$}  {:w_model$}  {runs:>6}  {first:>13}  {found}", c.sim, c.model)
}

/// The replay of each cell's first violation (not policy-permitted).
fn replays(out: &mut String, hunted: &[Hunted], strategy: &Strategy) {
    use std::fmt::Write;
    let mut first = true;
    for h in hunted {
        let Some((name, v)) = h.cell.violating().min_by_key(|(_, v)| v.first_seed) else {
            continue;
        };
        if std::mem::take(&mut first) {
            out.push_str("\nreplay the first violation of each cell:\n");
        }
        let (explore, seed) = h.replay(strategy, v.first_seed);
        let cmd = catalog::replay_explored(&h.sim_path, &h.model_name, seed, Some(&explore));
        let _ = writeln!(out, "  {} × {} {name}: {}", h.cell.sim, h.cell.model, cmd);
    }
}

/// The hunt as JSON: the matrix's (`cells`, `totals`) with `explore`, and per cell
/// `runs_to_first` (and an exhaustive cell's `exploration`).
pub(super) fn json(models: &[Arc<Model>], hunted: &[Hunted], strategy: &Strategy) -> String {
    let cells: Vec<Cell> = hunted.iter().map(|h| h.cell.clone()).collect();
    let mut v = render::matrix_value(models, &cells);
    v["explore"] = strategy.to_string().into();
    for (i, h) in hunted.iter().enumerate() {
        let c = &mut v["cells"][i];
        c["runs_to_first"] = serde_json::to_value(h.runs_to_first()).unwrap_or_default();
        if let (Some((seed, schedules, exhausted)), Strategy::Exhaustive { bound, depth, .. }) =
            (&h.exhaustive, strategy)
        {
            c["exploration"] = serde_json::json!({ "seed": seed, "bound": bound,
                "depth": depth, "schedules": schedules.len(), "exhausted": exhausted });
            for (n, stat) in &h.cell.violations {
                if let Some(s) = schedules.get(stat.first_seed as usize) {
                    c["violations"][n]["schedule"] = format!("exhaustive@{s}").into();
                }
            }
        }
    }
    format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default())
}
