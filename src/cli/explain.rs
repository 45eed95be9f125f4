//! `idemsim explain`: the explanation printed, and written as a page with `--html`.

use super::out::{not_applicable, write_file};
use super::{EXIT_OK, ExplainArgs};
use crate::catalog;

pub(super) fn explain_cmd(args: ExplainArgs) -> anyhow::Result<i32> {
    let model = catalog::model(&args.model)?;
    let sim = args.sim.as_deref().map(catalog::sim).transpose()?;
    if let Some(s) = &sim
        && let Some(code) = not_applicable(s, &model)
    {
        return Ok(code);
    }
    let e = crate::explain::explain(&model, sim.as_ref(), args.seed)?;
    print!("{}", e.text);
    if let Some(p) = &args.html {
        write_file(p, &e.html)?;
    }
    Ok(EXIT_OK)
}
