//! `idemsim explain`: the explanation printed, and written as a page with `--html` (with
//! `--html -` the page is stdout's and the explanation goes to stderr).

use super::out::{not_applicable_to, print_report, stdout_taken, write_file};
use super::{EXIT_OK, ExplainArgs};
use crate::catalog;

pub(super) fn explain_cmd(args: ExplainArgs) -> anyhow::Result<i32> {
    let model = catalog::model(&args.model)?;
    let sim = args.sim.as_deref().map(catalog::sim).transpose()?;
    let to_stderr = stdout_taken(&[("--html", args.html.as_deref())])?;
    if let Some(s) = &sim
        && let Some(code) = not_applicable_to(to_stderr, s, &model)
    {
        return Ok(code);
    }
    let e = crate::explain::explain(&model, sim.as_ref(), args.seed)?;
    print_report(to_stderr, &e.text);
    if let Some(p) = &args.html {
        write_file(p, &crate::text::xml_chars(&e.html))?;
    }
    Ok(EXIT_OK)
}
