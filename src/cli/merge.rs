//! `idemsim merge`: shard files in, the report one run over the whole range gives out. What
//! is accepted and what fails is the shard code's ([`crate::shard::policy`]).

use super::matrix::matrix_output;
use super::out::write_file;
use super::{EXIT_FAILED, EXIT_OK, MergeArgs, seed_arg};
use crate::render;
use crate::shard::policy;

pub(super) fn merge_cmd(args: MergeArgs) -> anyhow::Result<i32> {
    let paths = policy::shard_paths(&args.files)?;
    let merged = policy::read_and_merge(&paths)?;
    let expect = seed_arg(args.expect_seeds.clone())?;
    if let Some(msg) = policy::accept(&merged, expect.as_ref(), args.allow_partial)? {
        eprintln!("{msg}");
    }
    if let Some(p) = &args.out {
        write_file(p, &serde_json::to_string_pretty(&merged).expect("serialisable"))?;
    }
    let report = policy::report(&merged)?;
    if let Some((sim, model, cell)) = report.single() {
        if args.json {
            println!("{}", serde_json::to_string_pretty(&render::cell_json(cell))?);
        } else {
            print!("{}", render::sweep_text(sim, model, cell, report.jobs));
        }
    } else {
        let (sims, models, cells) = (&report.sims, &report.models, &report.cells);
        print!("{}", matrix_output(args.json, args.markdown, sims, models, cells));
    }
    Ok(if report.failed() { EXIT_FAILED } else { EXIT_OK })
}
