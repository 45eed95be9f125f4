//! `idemsim list`: the models and sims found.

use super::{EXIT_NOT_APPLICABLE, EXIT_OK};
use crate::catalog;
use crate::scenario::Sim;

pub(super) fn list() -> anyhow::Result<i32> {
    println!("models ({}):", catalog::display_path(&catalog::root().join("models")));
    let models = catalog::ordered_models(catalog::all_models()?);
    let width = models.iter().map(|m| m.name.chars().count()).max().unwrap_or(0);
    for m in models {
        println!("  {:<width$}  {}", m.name, m.summary);
    }
    println!("\nsims ({}):", catalog::display_path(&catalog::root().join("sims")));
    let sims = catalog::files_under(&catalog::root().join("sims"));
    let width = sims.iter().map(|p| catalog::display_path(p).chars().count()).max().unwrap_or(0);
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
        println!("  {:<width$}  {}{points}", catalog::display_path(&p), s.description);
    }
    println!(
        "\na sim that injects at a point a model lacks is n/a for that model (run and sweep exit {EXIT_NOT_APPLICABLE})"
    );
    Ok(EXIT_OK)
}
