//! `idemsim explain`: the explanation printed (as text, or as JSON with `--json`), and written
//! as a page with `--html` (with `--html -` the page is stdout's and the explanation goes to
//! stderr).

use super::out::{emit_report, not_applicable_as, stdout_taken, write_output};
use super::shrink::target_arg;
use super::{EXIT_OK, ExplainArgs};
use crate::catalog;
use crate::explain::ExplainOptions;

pub(super) fn explain_cmd(args: ExplainArgs) -> anyhow::Result<i32> {
    let model = catalog::model(&args.model)?;
    let sim = args.sim.as_deref().map(catalog::sim).transpose()?;
    let to_stderr =
        stdout_taken(&[("--out", args.out.as_deref()), ("--html", args.html.as_deref())])?;
    let mut inputs = vec![model.path.as_path()];
    inputs.extend(sim.as_ref().map(|s| s.path.as_path()));
    let outputs = [("--out", args.out.as_deref()), ("--html", args.html.as_deref())];
    super::out::distinct_files(&outputs, &inputs)?;
    // `-o -` is the report on stdout: the report is not moved to stderr for it.
    let to_stderr = to_stderr && args.out.as_deref().is_none_or(|p| p.as_os_str() != "-");
    if args.json && to_stderr && args.out.is_none() {
        anyhow::bail!("--json prints to stdout, which --html - takes: write the page to a file");
    }
    if let Some(s) = &args.explore {
        s.check_one_run("explain").map_err(anyhow::Error::msg)?;
    }
    let target = target_arg(args.target.as_deref())?;
    let others = match &args.others {
        Some(names) => {
            Some(names.iter().map(|n| catalog::model(n)).collect::<Result<Vec<_>, _>>()?)
        }
        None => None,
    };
    if let Some(s) = &sim
        && let Some(code) = not_applicable_as(args.json.then_some("explain"), to_stderr, s, &model)
    {
        return Ok(code);
    }
    let opts = ExplainOptions { target, others, explore: args.explore.clone() };
    let e = crate::explain::explain_with(&model, sim.as_ref(), args.seed, &opts)?;
    let report =
        if args.json { format!("{}\n", serde_json::to_string_pretty(&e.json)?) } else { e.text };
    emit_report(args.out.as_deref(), to_stderr, &report)?;
    if let Some(p) = &args.html {
        write_output(p, &crate::text::xml_chars(&e.html))?;
    }
    Ok(EXIT_OK)
}
