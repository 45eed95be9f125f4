//! The JSON outputs: every one stamped with its format and version (`versioned`), the matrix
//! and one cell with its shares.

use std::sync::Arc;

use super::share_json;
use crate::model::Model;
use crate::sweep::{self, Cell};

/// The version of every JSON output's shape (`"version"` beside `"format": "idemsim-<kind>"`):
/// an added field keeps it, a field removed or renamed bumps it (`schemas/README.md`).
pub const JSON_VERSION: u64 = 1;

/// A JSON output stamped with its format (`idemsim-<kind>`) and [`JSON_VERSION`].
pub fn versioned(kind: &str, mut v: serde_json::Value) -> serde_json::Value {
    if let Some(o) = v.as_object_mut() {
        o.insert("format".into(), format!("idemsim-{kind}").into());
        o.insert("version".into(), JSON_VERSION.into());
    }
    v
}

/// The matrix as JSON (`idemsim-matrix`): every cell (see [`cell_json`]) and the per-model
/// totals.
pub fn matrix_json(models: &[Arc<Model>], cells: &[Cell]) -> String {
    serde_json::to_string_pretty(&matrix_value(models, cells)).expect("serialisable")
}

/// [`matrix_json`] as a value, for outputs that add to it (`matrix --explore`).
pub fn matrix_value(models: &[Arc<Model>], cells: &[Cell]) -> serde_json::Value {
    let json: Vec<serde_json::Value> = cells.iter().map(cell_json).collect();
    let v = serde_json::json!({
        "cells": json,
        "totals": sweep::totals(models, cells),
    });
    versioned("matrix", v)
}

/// One cell as JSON: its aggregate and its two verdicts (`safe`, `as_specified`; `null`
/// with `passed` for an `n/a` cell, which ran nothing and neither passed nor failed); each
/// violation with its `rate` and `ci95`, and `rates`: the seeds with a violation
/// (`violating`), with a failed expectation (`failed`) and cut short by a bound (`bounded`),
/// each as [`share_json`].
pub fn cell_json(c: &Cell) -> serde_json::Value {
    let mut v = serde_json::to_value(c).expect("serialisable");
    for (name, stat) in &c.violations {
        let share = share_json(stat.seeds, c.runs);
        v["violations"][name]["rate"] = share["rate"].clone();
        v["violations"][name]["ci95"] = share["ci95"].clone();
    }
    v["rates"] = serde_json::json!({
        "violating": share_json(c.violating_seeds, c.runs),
        "failed": share_json(c.failed_seeds, c.runs),
        "bounded": share_json(c.bounded_runs, c.runs),
    });
    // No verdict where no seed ran: an n/a cell, or one an interrupted matrix never reached.
    let verdict = c.verdict().filter(|_| c.runs > 0);
    v["safe"] = verdict.map_or(serde_json::Value::Null, |x| x.safe.into());
    v["as_specified"] = verdict.map_or(serde_json::Value::Null, |x| x.as_specified.into());
    if verdict.is_none() {
        v["passed"] = serde_json::Value::Null;
    }
    v
}
