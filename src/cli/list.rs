//! `idemsim list`: the models and sims found (paths printable: a file name cannot forge a
//! line).

use super::{EXIT_NOT_APPLICABLE, EXIT_OK};
use crate::catalog;
use crate::scenario::Sim;
use crate::text::printable;

pub(super) fn list() -> anyhow::Result<i32> {
    catalog::library()?;
    let shown = |p: &std::path::Path| printable(&catalog::display_path(p));
    let dirs = |ds: Vec<std::path::PathBuf>| -> String {
        ds.iter().map(|d| shown(d)).collect::<Vec<_>>().join(", ")
    };
    println!("models ({}):", dirs(catalog::model_dirs()));
    let models = catalog::ordered_models(catalog::all_models()?);
    let width = models.iter().map(|m| m.name.chars().count()).max().unwrap_or(0);
    for m in models {
        println!("  {:<width$}  {}", m.name, m.summary);
    }
    println!("\nsims ({}):", dirs(catalog::sim_dirs()));
    let sims: Vec<std::path::PathBuf> =
        catalog::sim_dirs().iter().flat_map(|d| catalog::files_under(d)).collect();
    let width = sims.iter().map(|p| shown(p).chars().count()).max().unwrap_or(0);
    for p in sims {
        let s = Sim::load(&p)?;
        let mut points: Vec<String> = s.injects.iter().map(|i| format!("@{}", i.point)).collect();
        points.sort();
        points.dedup();
        let points = if points.is_empty() {
            String::new()
        } else {
            format!("  [injects at {}]", points.join(", "))
        };
        println!("  {:<width$}  {}{points}", shown(&p), s.description);
    }
    println!(
        "\na sim that injects at a point a model lacks is n/a for that model (run and sweep exit {EXIT_NOT_APPLICABLE})"
    );
    Ok(EXIT_OK)
}
