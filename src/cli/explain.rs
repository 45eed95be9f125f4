//! `idemsim explain`: the explanation printed (as text, or as JSON with `--json`), and written
//! as a page with `--html` (with `--html -` the page is stdout's and the explanation goes to
//! stderr).

use super::out::{not_applicable_as, print_report, stdout_taken, write_file};
use super::shrink::target_arg;
use super::{EXIT_OK, ExplainArgs};
use crate::catalog;
use crate::explain::ExplainOptions;

pub(super) fn explain_cmd(args: ExplainArgs) -> anyhow::Result<i32> {
    let model = catalog::model(&args.model)?;
    let sim = args.sim.as_deref().map(catalog::sim).transpose()?;
    let to_stderr = stdout_taken(&[("--html", args.html.as_deref())])?;
    if args.json && to_stderr {
        anyhow::bail!("--json prints to stdout, which --html - takes: write the page to a file");
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
    let opts = ExplainOptions { target, others };
    let e = crate::explain::explain_with(&model, sim.as_ref(), args.seed, &opts)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&e.json)?);
    } else {
        print_report(to_stderr, &e.text);
    }
    if let Some(p) = &args.html {
        write_file(p, &crate::text::xml_chars(&e.html))?;
    }
    Ok(EXIT_OK)
}
