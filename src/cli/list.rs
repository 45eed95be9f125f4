//! `idemsim list`: the models and sims found (paths printable: a file name cannot forge a
//! line).

use super::{EXIT_NOT_APPLICABLE, EXIT_OK};
use crate::catalog;
use crate::scenario::Sim;
use crate::text::printable;

/// `idemsim list`'s arguments.
#[derive(clap::Args, Debug)]
#[allow(missing_docs)]
pub struct ListArgs {
    /// Print the folders, models and sims as JSON (`"format": "idemsim-list"`, version 1).
    #[arg(long)]
    json: bool,
    /// Write the report to this file instead of stdout (`-`: stdout), then say `written to
    /// FILE (N bytes)` on stderr. A link is followed; a FIFO, a device or a folder is refused
    /// (exit 2); a file is replaced whole.
    #[arg(short = 'o', long, value_name = "FILE")]
    out: Option<std::path::PathBuf>,
}

/// The JSON of `list --json`: what the text shows, unescaped (JSON escapes it).
fn list_json(models: &[std::sync::Arc<crate::model::Model>], sims: &[(String, Sim)]) -> String {
    let path = |p: &std::path::Path| catalog::display_path(p);
    let v = serde_json::json!({
        "format": "idemsim-list",
        "version": 1,
        "model_folders": catalog::model_dirs().iter().map(|d| path(d)).collect::<Vec<_>>(),
        "sim_folders": catalog::sim_dirs().iter().map(|d| path(d)).collect::<Vec<_>>(),
        "models": models.iter().map(|m| serde_json::json!({
            "name": m.name, "summary": m.summary, "path": path(&m.path),
        })).collect::<Vec<_>>(),
        "sims": sims.iter().map(|(p, s)| serde_json::json!({
            "name": s.name, "path": p, "description": s.description, "injects": injects(s),
        })).collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&v).expect("serialisable") + "\n"
}

/// The points a sim injects at, sorted, once each.
fn injects(s: &Sim) -> Vec<String> {
    let mut points: Vec<String> = s.injects.iter().map(|i| format!("@{}", i.point)).collect();
    points.sort();
    points.dedup();
    points
}

pub(super) fn list(args: ListArgs) -> anyhow::Result<i32> {
    super::out::stdout_taken(&[("--out", args.out.as_deref())])?;
    catalog::library()?;
    let text = if args.json {
        let models = catalog::ordered_models(catalog::all_models()?);
        let mut sims = Vec::new();
        for p in catalog::sim_dirs().iter().flat_map(|d| catalog::files_under(d)) {
            sims.push((catalog::display_path(&p), Sim::load(&p)?));
        }
        list_json(&models, &sims)
    } else {
        list_text()?
    };
    super::out::emit_report(args.out.as_deref(), false, &text)?;
    Ok(EXIT_OK)
}

/// A folder as `list` names it: relative to its root, and marked `(shipped)` when it is the
/// library embedded in the binary while a project's own folders are searched too (else a
/// project's `models` and the shipped `models` would read alike).
fn folder_label(d: &std::path::Path) -> String {
    let shown = printable(&catalog::display_path(d));
    let lib = catalog::library().ok();
    let shipped =
        lib.and_then(|l| l.shipped.as_deref().filter(|s| Some(*s) != l.project_root.as_deref()));
    match shipped {
        Some(s) if d.starts_with(s) => format!("{shown} (shipped)"),
        _ => shown,
    }
}

/// The text of `list`: the folders searched, the models, the sims.
fn list_text() -> anyhow::Result<String> {
    use std::fmt::Write;
    let mut o = String::new();
    let shown = |p: &std::path::Path| printable(&catalog::display_path(p));
    let dirs = |ds: Vec<std::path::PathBuf>| -> String {
        ds.iter().map(|d| folder_label(d)).collect::<Vec<_>>().join(", ")
    };
    writeln!(o, "models ({}):", dirs(catalog::model_dirs()))?;
    let models = catalog::ordered_models(catalog::all_models()?);
    let width = models.iter().map(|m| m.name.chars().count()).max().unwrap_or(0);
    for m in models {
        writeln!(o, "  {:<width$}  {}", m.name, m.summary)?;
    }
    writeln!(o, "\nsims ({}):", dirs(catalog::sim_dirs()))?;
    let sims: Vec<std::path::PathBuf> =
        catalog::sim_dirs().iter().flat_map(|d| catalog::files_under(d)).collect();
    let width = sims.iter().map(|p| shown(p).chars().count()).max().unwrap_or(0);
    for p in sims {
        let s = Sim::load(&p)?;
        let points = injects(&s);
        let points = if points.is_empty() {
            String::new()
        } else {
            format!("  [injects at {}]", points.join(", "))
        };
        writeln!(o, "  {:<width$}  {}{points}", shown(&p), s.description)?;
    }
    writeln!(
        o,
        "\na sim that injects at a point a model lacks is n/a for that model (run and sweep exit {EXIT_NOT_APPLICABLE})"
    )?;
    Ok(o)
}
