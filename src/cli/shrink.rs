//! `idemsim shrink`: a failing sim shrunk to a minimal one, printed or written.

use super::out::{not_applicable_to, print_report, stdout_taken, write_file};
use super::{EXIT_OK, ShrinkArgs};
use crate::catalog;
use crate::model::Model;
use crate::report::ViolationKind;
use crate::scenario::Sim;
use crate::shrink::{ShrinkError, ShrinkOptions, Shrunk, Target};
use crate::text::printable;

pub(super) fn shrink_cmd(args: ShrinkArgs) -> anyhow::Result<i32> {
    // `-o -`: the minimal sim is stdout, so everything else goes to stderr.
    let to_stderr = stdout_taken(&[("-o", args.out.as_deref())])?;
    let sim = catalog::sim(&args.sim)?;
    let model = catalog::model(&args.model)?;
    super::out::distinct_files(&[("-o", args.out.as_deref())], &[&sim.path, &model.path])?;
    if let Some(code) = not_applicable_to(to_stderr, &sim, &model) {
        return Ok(code);
    }
    let target = match violation_arg(args.violation.as_deref())? {
        Some(v) => Some(Target::Violation(v)),
        None => target_arg(args.target.as_deref())?,
    };
    let src = crate::input::read_file(&sim.path, "sim")?;
    // The file's path as the replay commands name it (its header's and the line below).
    let file = args.out.as_ref().filter(|_| !to_stderr).map(|p| p.display().to_string());
    // Progress on stderr (a terminal, not --quiet): runs of the budget, no cells.
    let bar = super::progress::Bar::start("shrink");
    bar.counters().start(args.budget, 0, 0);
    let opts = ShrinkOptions {
        window: args.window,
        budget_runs: args.budget,
        target,
        file: file.clone(),
        progress: Some(bar.counters()),
        explore: args.explore.clone(),
    };
    // Out of range: refused, naming the flag and its range (exit 2), never clamped.
    opts.check().map_err(anyhow::Error::msg)?;
    let started = std::time::Instant::now();
    let s = match crate::shrink::shrink(&sim.path, &src, &model, args.seed, &opts) {
        Ok(s) => s,
        Err(ShrinkError::NoFailure(none)) => {
            print_report(to_stderr, &format!("{none}\n"));
            return Ok(EXIT_OK);
        }
        Err(e) => return Err(e.into()),
    };
    drop(bar);
    super::out::info(&format!("{} runs in {:.2} s", s.runs, started.elapsed().as_secs_f64()));
    print_report(to_stderr, &shrunk_text(&sim, &model, &s, &opts));
    match (&args.out, &file) {
        (Some(p), Some(f)) => {
            write_file(p, &s.text)?;
            let explore = opts.explore_name();
            let model = catalog::cli_name(&model);
            let replay = catalog::replay_explored(f, &model, s.seed, explore.as_deref());
            println!("written to {}; replay: {}", printable(f), printable(&replay));
        }
        (Some(p), None) => write_file(p, &s.text)?,
        _ => print!("\n{}", s.text),
    }
    Ok(EXIT_OK)
}

/// `--violation`: a violation's name (what is wrong lists the valid ones, whole: an
/// `InputError` would cut the list).
fn violation_arg(v: Option<&str>) -> anyhow::Result<Option<ViolationKind>> {
    v.map(|v| {
        ViolationKind::ALL.into_iter().find(|k| k.name() == v).ok_or_else(|| {
            anyhow::anyhow!(
                "--violation: unknown violation `{}`: expected one of {}",
                crate::text::shown(v),
                ViolationKind::ALL.map(|k| k.name()).join(", ")
            )
        })
    })
    .transpose()
}

/// `--target`: `violation:NAME` or `expect:KIND` (what is wrong lists the valid ones).
pub(super) fn target_arg(t: Option<&str>) -> anyhow::Result<Option<Target>> {
    t.map(|t| Target::parse(t).map_err(|e| anyhow::anyhow!("--target: {e}"))).transpose()
}

/// What was shrunk to what, and what was removed.
fn shrunk_text(sim: &Sim, model: &Model, s: &Shrunk, opts: &ShrinkOptions) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "following: {}", s.first.following());
    let shows = match s.target {
        Target::Violation(v) => format!("shows {}", v.name()),
        Target::Expectation(k) => format!("fails the expectation {}", k.name()),
    };
    let _ = writeln!(
        out,
        "shrunk {} under {}{} to a sim that {shows} on {}/{} seeds (first: seed {}):",
        printable(&sim.name),
        printable(&model.name),
        opts.explore_name().map_or(String::new(), |s| format!(" (explore {s})")),
        s.failing_in_window,
        s.window,
        s.seed
    );
    for r in &s.removed {
        let _ = writeln!(out, "  - {}", printable(r));
    }
    if s.budget_spent {
        let _ = writeln!(
            out,
            "  (the budget of {} runs was spent before every candidate was tried: it may shrink \
             further with a larger --budget)",
            opts.budget_runs
        );
    } else if s.removed.is_empty() {
        out.push_str("  (nothing could be removed: it was minimal)\n");
    }
    out
}
