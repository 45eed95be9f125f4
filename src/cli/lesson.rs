//! `idemsim lesson`: the page a class steps through (`-o FILE`, else stdout), or its data as
//! JSON (`--json`). The sim defaults to the teaching race, the fix to transactional, the seed
//! to the first of the sim's range that breaks an invariant.

use std::path::PathBuf;

use clap::Args;

use super::EXIT_OK;
use super::out::{not_applicable_as, write_output};
use crate::catalog;
use crate::lesson::{LessonOptions, lesson};

/// The sim a lesson shows by default.
const DEFAULT_SIM: &str = "check-first-race";
/// The fix shown beside it by default.
const DEFAULT_FIX: &str = "transactional";

#[derive(Args, Debug)]
// clap turns a doc comment into help text: these types' help is their attributes'.
#[allow(missing_docs)]
pub struct LessonArgs {
    /// Model name or file path (the design that races).
    model: String,
    /// The fix shown on the same client schedule (same sim, same seed, same time axis);
    /// default: transactional (none for transactional itself); `none`: the run alone.
    #[arg(long)]
    vs: Option<String>,
    /// Sim name or file path (default: check-first-race, the teaching double click).
    #[arg(long)]
    sim: Option<String>,
    /// The seed (default: the first seed of the sim's range, at most 200 tried in order, on
    /// which the model breaks an invariant).
    #[arg(long)]
    seed: Option<u64>,
    /// Print the lesson's data (per-step state of both runs) as JSON instead of the page.
    #[arg(long)]
    json: bool,
    /// Write the page (or the JSON) to this file instead of stdout (`-`: stdout); files as
    /// for run -o.
    #[arg(short = 'o', long, value_name = "FILE")]
    out: Option<PathBuf>,
}

pub(super) fn lesson_cmd(args: LessonArgs) -> anyhow::Result<i32> {
    let model = catalog::model(&args.model)?;
    let sim = catalog::sim(args.sim.as_deref().unwrap_or(DEFAULT_SIM))?;
    let vs = match args.vs.as_deref() {
        Some("none") => None,
        Some(v) => Some(catalog::model(v)?),
        None if model.name == DEFAULT_FIX => None,
        None => Some(catalog::model(DEFAULT_FIX)?),
    };
    let mut inputs = vec![sim.path.as_path(), model.path.as_path()];
    inputs.extend(vs.as_ref().map(|v| v.path.as_path()));
    super::out::distinct_files(&[("-o", args.out.as_deref())], &inputs)?;
    for m in std::iter::once(&model).chain(vs.as_ref()) {
        if let Some(code) = not_applicable_as(args.json.then_some("lesson"), false, &sim, m) {
            return Ok(code);
        }
    }
    let l = lesson(&LessonOptions { sim, model, vs, seed: args.seed })
        .map_err(|e| anyhow::anyhow!(e))?;
    let text = if args.json {
        format!("{}\n", serde_json::to_string_pretty(&l.json)?)
    } else {
        crate::text::xml_chars(&l.html).into_owned()
    };
    match &args.out {
        Some(p) => write_output(p, &text)?,
        None => print!("{text}"),
    }
    Ok(EXIT_OK)
}
