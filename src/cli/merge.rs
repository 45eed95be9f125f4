//! `idemsim merge`: shard files in, the report one run over the whole range gives out. What
//! is accepted and what fails is the shard code's ([`crate::shard::policy`]).

use std::io::Write;

use super::matrix::matrix_output;
use super::out::{emit_report, stdout_taken, write_output};
use super::{MergeArgs, seed_arg};
use crate::render;
use crate::shard::{ShardFile, policy};

pub(super) fn merge_cmd(args: MergeArgs) -> anyhow::Result<i32> {
    // The output files are checked first; only one of them can be stdout.
    stdout_taken(&[("--out", args.out.as_deref()), ("--report", args.report.as_deref())])?;
    args.gate.preflight()?;
    let paths = policy::shard_paths(&args.files)?;
    let merged = policy::read_and_merge(&paths)?;
    let expect = seed_arg(args.expect_seeds.clone())?;
    if let Some(msg) = policy::accept(&merged, expect.as_ref(), args.allow_partial)? {
        eprintln!("{msg}");
    }
    let report = policy::report(&merged)?;
    let text = if let Some((sim, model, cell)) = report.single() {
        if args.json {
            let mut v = render::cell_json(cell);
            v["speed"] = speed(&merged);
            let v = render::versioned("sweep", v);
            format!("{}\n", serde_json::to_string_pretty(&v)?)
        } else {
            render::sweep_text(sim, model, cell, report.jobs)
        }
    } else {
        let (sims, models, cells) = (&report.sims, &report.models, &report.cells);
        matrix_output(args.json, args.markdown, sims, models, cells)
    };
    // Every check passed and the verdict is known: only now is the merged file written.
    let merged_json = serde_json::to_string_pretty(&merged).expect("serialisable");
    let merged_on_stdout = args.out.as_deref().is_some_and(|p| p.as_os_str() == "-");
    match args.out.as_deref() {
        Some(_) if merged_on_stdout => {
            // The merged file is standard output: the report goes to standard error.
            println!("{merged_json}");
            std::io::stdout().flush()?;
        }
        Some(p) => write_output(p, &merged_json)?,
        None => {}
    }
    emit_report(args.report.as_deref(), merged_on_stdout, &text)?;
    // With the merged file on stdout, the baseline's comparison goes to stderr too.
    let quiet_stdout = args.json || merged_on_stdout;
    args.gate.exit(&report.cells, report.failed(), quiet_stdout)
}

/// `sweep --json`'s `speed` for a merge: its runs and simulated requests, over the shards'
/// summed wall-clock time (not the merge's own) and the most threads a shard used.
fn speed(merged: &ShardFile) -> serde_json::Value {
    let cells = merged.cells.iter().map(|c| &c.aggregate);
    let runs: u64 = cells.clone().map(|c| c.runs).fold(0, u64::saturating_add);
    let requests: u64 =
        cells.flat_map(|c| c.statuses.values()).fold(0, |t, n| t.saturating_add(*n));
    let wall_s = merged.timing.wall_s;
    let per_s = |n: u64| (n as f64 / wall_s.max(1e-9)).round();
    serde_json::json!({
        "runs": runs,
        "simulated_requests": requests,
        "wall_s": wall_s,
        "jobs": merged.timing.jobs,
        "runs_per_s": per_s(runs),
        "simulated_requests_per_s": per_s(requests),
    })
}
