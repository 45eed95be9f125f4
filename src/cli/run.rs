//! `idemsim run`: one sim × one model × one seed, as text, JSON, Mermaid, SVG or HTML; the
//! report on stdout or where `-o` says.

use super::out::{emit_report, not_applicable_as, stdout_taken, write_output};
use super::{EXIT_FAILED, EXIT_OK, RunArgs};
use crate::report::RunReport;
use crate::run::{self, ExploreNote, RunOptions, RunOutput};
use crate::{catalog, render};

pub(super) fn run_one(args: RunArgs) -> anyhow::Result<i32> {
    let sim = catalog::sim(&args.sim)?;
    let model = catalog::model(&args.model)?;
    // The output files are checked before the run; with `-`, stdout is theirs alone.
    let to_stderr = stdout_taken(&[
        ("--out", args.out.as_deref()),
        ("--svg", args.svg.as_deref()),
        ("--html", args.html.as_deref()),
    ])?;
    let outputs = [
        ("--out", args.out.as_deref()),
        ("--svg", args.svg.as_deref()),
        ("--html", args.html.as_deref()),
    ];
    super::out::distinct_files(&outputs, &[&sim.path, &model.path])?;
    // `-o -` is the report on stdout: the report is not moved to stderr for it.
    let to_stderr = to_stderr && args.out.as_deref().is_none_or(|p| p.as_os_str() != "-");
    if let Some(code) = not_applicable_as(args.json.then_some("run"), to_stderr, &sim, &model) {
        return Ok(code);
    }
    let keep_history = args.trace || args.mermaid || args.svg.is_some() || args.html.is_some();
    let opts = RunOptions { keep_history };
    let (mut out, note) = run::run_explored(&sim, &model, args.seed, opts, args.explore.as_ref())?;
    let sim_path = catalog::display_path(&sim.path);
    let strategy = note.as_ref().map(ExploreNote::replay_name);
    let model_name = catalog::cli_name(&model);
    let replay = catalog::replay_explored(&sim_path, &model_name, args.seed, strategy.as_deref());
    // The history kept for a picture is not the report's: the trace is printed only with --trace.
    let history = if args.trace || args.mermaid { None } else { out.history.take() };
    let gated = gated_by_violation(&args, &out.report);
    let r = &out.report;
    let mut text = if args.mermaid {
        out.history.as_ref().map(|h| h.mermaid()).unwrap_or_default()
    } else if args.json {
        let mut v = serde_json::to_value(r)?;
        let verdict = r.verdict();
        (v["safe"], v["as_specified"]) = (verdict.safe.into(), verdict.as_specified.into());
        if let Some(n) = &note {
            explore_json(&mut v, n);
        }
        let v = render::versioned("run", v);
        format!("{}\n", serde_json::to_string_pretty(&v)?)
    } else {
        let text = render::run_text(&sim, &model, &out, &replay);
        note.as_ref().map_or(text.clone(), |n| render::explored_run_text(&text, n))
    };
    if let Some(line) = &gated {
        if args.json || args.mermaid {
            // Not inside JSON or a diagram: the reason for the exit code goes to stderr.
            eprintln!("{line}");
        } else {
            text.push_str(line);
            text.push('\n');
        }
    }
    emit_report(args.out.as_deref(), to_stderr, &text)?;
    if history.is_some() {
        out.history = history;
    }
    pictures(&args, &sim, &model, &out, &replay)?;
    Ok(if out.report.passed() && gated.is_none() { EXIT_OK } else { EXIT_FAILED })
}

/// An explored run's JSON: `explore` (the strategy as its replay names it) and
/// `exploration` (what the explorer decided).
fn explore_json(v: &mut serde_json::Value, n: &ExploreNote) {
    let e = &n.explored;
    v["explore"] = n.replay_name().into();
    let mut x = serde_json::json!({ "decisions": e.decisions });
    if let crate::explore::Strategy::Pct { depth } = n.strategy {
        x["tasks"] = e.tasks.into();
        x["k"] = n.k.into();
        x["change_points"] = serde_json::to_value(&e.change_points).unwrap_or_default();
        x["pct_bound"] = crate::explore::pct_bound(e.tasks, n.k, depth).into();
    }
    if let crate::explore::Strategy::Faults { .. } = n.strategy {
        x["fault_draws"] = n.k.into();
        x["fired"] = serde_json::to_value(&e.fired).unwrap_or_default();
    }
    if let crate::explore::Strategy::Swarm = n.strategy {
        x["faults_on"] = n.swarm_kinds(true).into();
        x["faults_off"] = n.swarm_kinds(false).into();
        x["faults_at_top"] = n.swarm_top.clone().into();
    }
    if let crate::explore::Strategy::Exhaustive { .. } = n.strategy {
        x["schedule_decisions"] = e.taken.len().into();
    }
    v["exploration"] = x;
}

/// With `--fail-on-violation`, when the expectations held but the oracle named violations
/// that are not policy-permitted: the line that says the run fails for them (so that the
/// printed verdict and the exit code agree).
fn gated_by_violation(args: &RunArgs, r: &RunReport) -> Option<String> {
    let mut names: Vec<&str> =
        r.violations.iter().filter(|v| !v.permitted).map(|v| v.name.name()).collect();
    if !args.fail_on_violation || names.is_empty() || !r.passed() {
        return None;
    }
    let n = names.len();
    names.dedup();
    Some(format!(
        "FAIL (--fail-on-violation): {n} violation(s) not policy-permitted ({}), though every \
         expectation held",
        names.join(", ")
    ))
}

/// `--svg` and `--html`, each saying on stderr that it was written.
fn pictures(
    args: &RunArgs,
    sim: &crate::scenario::Sim,
    model: &crate::model::Model,
    out: &RunOutput,
    replay: &str,
) -> anyhow::Result<()> {
    let (Some(h), true) = (&out.history, args.svg.is_some() || args.html.is_some()) else {
        return Ok(());
    };
    if let Some(note) = crate::picture::elided(h) {
        eprintln!("{note}");
    }
    if let Some(path) = &args.svg {
        let r = &out.report;
        let focus = r.violations.iter().find(|v| !v.permitted).map(|v| v.intent.as_str());
        let explored = args.explore.as_ref().map_or(String::new(), |s| format!(" · explore {s}"));
        let title = format!("{} × {} · seed {}{explored}", model.name, sim.name, args.seed);
        let svg = crate::picture::svg(h, sim, &title, focus);
        write_output(path, &crate::text::xml_chars(&svg))?;
    }
    if let Some(path) = &args.html {
        write_output(path, &render::run_html(sim, model, out, h, replay))?;
    }
    Ok(())
}
