//! `idemsim compare A B`: two designs over the same sims and seeds, per sim whether their
//! difference is significant and, if not, how many seeds would settle it ([`crate::compare`]).

use std::sync::Arc;

use super::out::{emit_report, interrupted, report_speed, stdout_taken, stop_on_interrupt};
use super::{EXIT_INTERRUPTED, EXIT_OK, seed_arg};
use crate::catalog;
use crate::compare::{self, SimDiff};
use crate::sweep;

/// `idemsim compare`'s arguments.
#[derive(clap::Args, Debug)]
#[allow(missing_docs)]
pub struct CompareArgs {
    /// Design A: a model name or file.
    a: String,
    /// Design B: a model name or file.
    b: String,
    /// Sim files or folders, several after one flag or comma-separated (default: sims/article).
    #[arg(long = "sims", num_args = 1.., value_delimiter = ',')]
    sims: Vec<String>,
    /// Seed range A..B (default: each sim's own range).
    #[arg(long)]
    seeds: Option<String>,
    /// Worker threads, 1 to 256 (default: all cores; the result is the same for any value).
    #[arg(long, value_parser = super::parse_jobs)]
    jobs: Option<usize>,
    /// Print the comparison as JSON.
    #[arg(long)]
    json: bool,
    /// Write the report to this file instead of stdout (`-`: stdout), then say `written to
    /// FILE (N bytes)` on stderr. A link is followed; a FIFO, a device or a folder is refused
    /// (exit 2); a file is replaced whole.
    #[arg(short = 'o', long, value_name = "FILE")]
    out: Option<std::path::PathBuf>,
}

pub(super) fn compare_cmd(args: CompareArgs) -> anyhow::Result<i32> {
    let seeds = seed_arg(args.seeds)?;
    stdout_taken(&[("--out", args.out.as_deref())])?;
    let models = catalog::unique_names(vec![catalog::model(&args.a)?, catalog::model(&args.b)?])?;
    let wanted = if args.sims.is_empty() { vec!["article".to_string()] } else { args.sims };
    let mut sims = Vec::new();
    for s in &wanted {
        sims.extend(catalog::sims_at(s)?);
    }
    let sims: Vec<Arc<_>> = sims;
    let jobs = args.jobs.unwrap_or_else(sweep::default_jobs);
    let started = std::time::Instant::now();
    stop_on_interrupt();
    let cells = super::progress::run_matrix("compare", &sims, &models, seeds, jobs)?;
    report_speed(&cells, started, jobs);
    let diffs: Vec<SimDiff> = (0..sims.len())
        .map(|si| {
            compare::compare_cells(sweep::cell(&cells, 2, si, 0), sweep::cell(&cells, 2, si, 1))
        })
        .collect();
    let text = if args.json {
        let v = serde_json::json!({ "a": models[0].name, "b": models[1].name, "sims": diffs });
        let v = crate::render::versioned("compare", v);
        format!("{}\n", serde_json::to_string_pretty(&v)?)
    } else {
        compare::text(&models[0].name, &models[1].name, &diffs)
    };
    emit_report(args.out.as_deref(), false, &text)?;
    Ok(if interrupted() { EXIT_INTERRUPTED } else { EXIT_OK })
}
