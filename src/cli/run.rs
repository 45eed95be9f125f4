//! `idemsim run`: one sim × one model × one seed, as text, JSON, Mermaid, SVG or HTML.

use super::out::{not_applicable_as, print_report, stdout_taken, write_file};
use super::{EXIT_FAILED, EXIT_OK, RunArgs};
use crate::run::{self, RunOptions};
use crate::{catalog, render};

pub(super) fn run_one(args: RunArgs) -> anyhow::Result<i32> {
    let sim = catalog::sim(&args.sim)?;
    let model = catalog::model(&args.model)?;
    // The output files are checked before the run; with `-`, stdout is theirs alone.
    let to_stderr =
        stdout_taken(&[("--svg", args.svg.as_deref()), ("--html", args.html.as_deref())])?;
    if let Some(code) = not_applicable_as(args.json.then_some("run"), to_stderr, &sim, &model) {
        return Ok(code);
    }
    let keep_history = args.trace || args.mermaid || args.svg.is_some() || args.html.is_some();
    let out = run::run(&sim, &model, args.seed, RunOptions { keep_history })?;
    let r = &out.report;
    let sim_path = catalog::display_path(&sim.path);
    let replay = catalog::replay_command(&sim_path, &catalog::cli_name(&model), args.seed);
    if args.mermaid {
        let text = out.history.as_ref().map(|h| h.mermaid()).unwrap_or_default();
        print_report(to_stderr, &text);
    } else if args.json {
        let mut v = serde_json::to_value(r)?;
        let verdict = r.verdict();
        (v["safe"], v["as_specified"]) = (verdict.safe.into(), verdict.as_specified.into());
        let v = render::versioned("run", v);
        print_report(to_stderr, &format!("{}\n", serde_json::to_string_pretty(&v)?));
    } else {
        print_report(to_stderr, &render::run_text(&sim, &model, &out, &replay));
    }
    if let Some(note) = out
        .history
        .as_ref()
        .filter(|_| args.svg.is_some() || args.html.is_some())
        .and_then(crate::picture::elided)
    {
        eprintln!("{note}");
    }
    if let (Some(h), Some(path)) = (&out.history, &args.svg) {
        let focus = r.violations.iter().find(|v| !v.permitted).map(|v| v.intent.as_str());
        let title = format!("{} × {} · seed {}", model.name, sim.name, args.seed);
        let svg = crate::picture::svg(h, &sim, &title, focus);
        write_file(path, &crate::text::xml_chars(&svg))?;
    }
    if let (Some(h), Some(path)) = (&out.history, &args.html) {
        write_file(path, &render::run_html(&sim, &model, &out, h, &replay))?;
    }
    let violated = args.fail_on_violation && r.violations.iter().any(|v| !v.permitted);
    Ok(if r.passed() && !violated { EXIT_OK } else { EXIT_FAILED })
}
