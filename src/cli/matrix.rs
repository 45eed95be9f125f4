//! `idemsim matrix` (models × sims × seeds, or one shard of it) and the bare `idemsim`, the
//! reference experiment.

use std::sync::Arc;

use super::out::{
    emit_report, interrupted, report_speed, stdout_taken, stop_on_interrupt, write_output,
    write_shard,
};
use super::{EXIT_INTERRUPTED, EXIT_OK, MatrixArgs, seed_arg, shard_spec};
use crate::input::InputError;
use crate::model::Model;
use crate::scenario::Sim;
use crate::sweep::{self, Cell};
use crate::{catalog, render};

pub(super) fn matrix_cmd(args: MatrixArgs) -> anyhow::Result<i32> {
    let seeds = seed_arg(args.seeds.clone())?;
    let spec = shard_spec(&args.shard)?;
    // `--out` is the report (with --shard the shard file, stdout by default); `--html -`:
    // the page is stdout, so the tables go to stderr. Only one of them can be `-`.
    let out = match (spec.is_some(), args.shard.out_dir.is_some()) {
        (true, true) => None,
        (true, false) => Some(args.shard.out.as_deref().unwrap_or(std::path::Path::new("-"))),
        (false, _) => args.shard.out.as_deref(),
    };
    let to_stderr = stdout_taken(&[("--out", out), ("--html", args.html.as_deref())])?;
    super::sweep::check_explore(args.explore.as_ref(), "matrix", &args.gate)?;
    args.gate.preflight()?;
    let (sims, models) = load_matrix_inputs(&args.sims, &args.models)?;
    let jobs = args.jobs.unwrap_or_else(sweep::default_jobs);
    let started = std::time::Instant::now();
    stop_on_interrupt();
    if let Some(strategy) = &args.explore {
        return hunt(&args, (&sims, &models), seeds, strategy, jobs);
    }
    if let Some(spec) = spec {
        let bar = super::progress::Bar::start("matrix");
        let progress = Some(bar.counters());
        let opts = sweep::SweepOptions {
            jobs,
            shard: Some((spec.k, spec.n)),
            progress,
            coverage: args.coverage,
            ..Default::default()
        };
        let cells = sweep::run_cells(&sims, &models, seeds, &opts, |_, _| {})?;
        drop(bar);
        let timing = crate::shard::Timing { wall_s: started.elapsed().as_secs_f64(), jobs };
        let f = crate::shard::shard_file(&sims, &models, &cells, Some(spec), timing);
        write_shard(&args.shard, &f)?;
        // In shard mode a violation is a result: the engine must not retry the shard.
        return Ok(if interrupted() { EXIT_INTERRUPTED } else { EXIT_OK });
    }
    let cells = if args.coverage {
        let bar = super::progress::Bar::start("matrix");
        let opts = sweep::SweepOptions {
            jobs,
            progress: Some(bar.counters()),
            coverage: true,
            ..Default::default()
        };
        sweep::run_cells(&sims, &models, seeds, &opts, |_, _| {})?
    } else {
        super::progress::run_matrix("matrix", &sims, &models, seeds, jobs)?
    };
    report_speed(&cells, started, jobs);
    if interrupted() {
        eprintln!("interrupted: the tables cover only the seeds that finished");
    }
    let mut text = matrix_output(args.json, args.markdown, &sims, &models, &cells);
    if args.coverage && !args.json && !args.markdown {
        text.push_str(&coverage_lines(&cells));
    }
    emit_report(args.shard.out.as_deref(), to_stderr, &text)?;
    if let Some(p) = &args.html {
        write_output(p, &render::matrix_html(&sims, &models, &cells))?;
    }
    if interrupted() {
        return Ok(EXIT_INTERRUPTED);
    }
    args.gate.exit(&cells, !cells.iter().all(|c| c.passed), args.json || to_stderr)
}

/// `matrix --explore`: every cell hunted, reported as what was found and when.
fn hunt(
    args: &MatrixArgs,
    (sims, models): (&[Arc<Sim>], &[Arc<Model>]),
    seeds: Option<std::ops::Range<u64>>,
    strategy: &crate::explore::Strategy,
    jobs: usize,
) -> anyhow::Result<i32> {
    if args.coverage && matches!(strategy, crate::explore::Strategy::Exhaustive { .. }) {
        anyhow::bail!("--coverage is not counted over exhaustive schedules: give a seed strategy");
    }
    let hunted = super::explored::hunt(sims, models, seeds, (strategy, args.coverage), jobs)?;
    if interrupted() {
        eprintln!("interrupted: the hunt covers only the runs that finished");
    }
    let text = if args.json {
        super::explored::json(models, &hunted, strategy)
    } else {
        let text = super::explored::text(args, &hunted, strategy, jobs);
        let cells: Vec<Cell> = hunted.iter().map(|h| h.cell.clone()).collect();
        if args.coverage { format!("{text}{}", coverage_lines(&cells)) } else { text }
    };
    emit_report(args.shard.out.as_deref(), false, &text)?;
    if interrupted() {
        return Ok(EXIT_INTERRUPTED);
    }
    let cells: Vec<Cell> = hunted.into_iter().map(|h| h.cell).collect();
    args.gate.exit(&cells, !cells.iter().all(|c| c.passed), args.json)
}

/// A matrix as `--json`, `--markdown` or the table.
pub(super) fn matrix_output(
    json: bool,
    markdown: bool,
    sims: &[Arc<Sim>],
    models: &[Arc<Model>],
    cells: &[Cell],
) -> String {
    if json {
        format!("{}\n", render::matrix_json(models, cells))
    } else if markdown {
        render::survival_markdown(sims, models, cells)
    } else {
        render::matrix_table(sims, models, cells)
    }
}

/// `--coverage`: one line per cell with the possible dangerous moments it never reached.
fn coverage_lines(cells: &[Cell]) -> String {
    use std::fmt::Write as _;
    let mut t = String::from(
        "\ncoverage of dangerous moments: possible for the cell but reached on no seed\n",
    );
    let width = cells.iter().map(|c| (c.sim.len() + c.model.len()) + 3).max().unwrap_or(0);
    for c in cells {
        let Some(cov) = &c.coverage else { continue };
        let unreached: Vec<&str> =
            crate::moments::unreached(cov).iter().map(|m| m.name()).collect();
        let cell = format!("{} × {}", c.sim, c.model);
        let what = if unreached.is_empty() {
            "every possible moment reached".to_string()
        } else {
            unreached.join(", ")
        };
        let _ = writeln!(t, "  {cell:<width$}  {what}");
    }
    t
}

/// The sims and models a matrix runs over.
type MatrixInputs = (Vec<Arc<Sim>>, Vec<Arc<Model>>);

fn load_matrix_inputs(sims: &[String], models: &[String]) -> Result<MatrixInputs, InputError> {
    let sims = if sims.is_empty() { vec!["article".to_string()] } else { sims.to_vec() };
    let mut all_sims = Vec::new();
    for s in &sims {
        all_sims.extend(catalog::sims_at(s)?);
    }
    let models = if models.is_empty() {
        catalog::ordered_models(catalog::all_models()?)
    } else {
        catalog::unique_names(models.iter().map(|m| catalog::model(m)).collect::<Result<_, _>>()?)?
    };
    Ok((unique_sims(all_sims)?, models))
}

/// Sims run together name the rows of one table and the cells of one shard file (a cell is
/// a (sim name, model name) pair, which `merge` matches): two sim files with one name (their
/// file stem), or one file given twice, are refused up front, naming both paths.
fn unique_sims(sims: Vec<Arc<Sim>>) -> Result<Vec<Arc<Sim>>, InputError> {
    let mut seen: std::collections::HashMap<&str, &Sim> = std::collections::HashMap::new();
    for s in &sims {
        if let Some(other) = seen.insert(&s.name, s) {
            let same = |p: &std::path::Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
            let msg = if same(&other.path) == same(&s.path) {
                "sim given twice".to_string()
            } else {
                format!(
                    "sim name `{}` is also the name of {}; a matrix names its rows and its \
                     cells by sim name (the file's stem): rename one",
                    s.name,
                    crate::text::printable(&catalog::display_path(&other.path))
                )
            };
            return Err(InputError::file(&s.path, msg));
        }
    }
    Ok(sims)
}

pub(super) fn demo() -> anyhow::Result<i32> {
    let (sims, models) = load_matrix_inputs(&[], &[])?;
    let cells =
        super::progress::run_matrix("idemsim", &sims, &models, None, sweep::default_jobs())?;
    // The article's three variants get the published table; the other models a compact one.
    let (reference, others): (Vec<usize>, Vec<usize>) = (0..models.len())
        .partition(|&i| catalog::REFERENCE_MODELS.contains(&models[i].name.as_str()));
    let pick = |idx: &[usize]| -> (Vec<Arc<Model>>, Vec<Cell>) {
        let ms: Vec<Arc<Model>> = idx.iter().map(|&i| models[i].clone()).collect();
        let cs = (0..sims.len())
            .flat_map(|si| idx.iter().map(move |&mi| (si, mi)))
            .map(|(si, mi)| sweep::cell(&cells, models.len(), si, mi).clone())
            .collect();
        (ms, cs)
    };
    println!(
        "idemsim: the reference experiment: every sim in sims/article/ × every model, over each sim's seed range."
    );
    println!("A case passes for a variant only when its expectations hold on every seed tried.\n");
    let (ref_models, ref_cells) = pick(&reference);
    if !ref_models.is_empty() {
        print!("{}", render::matrix_table(&sims, &ref_models, &ref_cells));
    }
    if !others.is_empty() {
        let (other_models, other_cells) = pick(&others);
        println!(
            "\nthe other models in models/ on the same cases (✓ held on every seed, ✗ failed on some):\n"
        );
        print!("{}", render::compact_table(&sims, &other_models, &other_cells));
        println!("details of one: {} matrix --models <name>", catalog::invocation());
    }
    Ok(EXIT_OK)
}
