//! The checker: turns a run's outcomes into named checks of the sim's expectations.

use crate::report::{Check, RunReport};
use crate::scenario::Sim;

fn check(out: &mut Vec<Check>, what: String, expected: String, actual: String) {
    out.push(Check { held: expected == actual, what, expected, actual });
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "none".into())
}

/// Evaluate every expectation of `sim` against `report`.
pub fn check_expectations(sim: &Sim, report: &RunReport) -> Vec<Check> {
    let mut out = Vec::new();
    for (i, spec) in sim.requests.iter().enumerate() {
        let r = &report.requests[i];
        let e = &spec.expect;
        let finals: Vec<_> = r.finals().collect();
        let many = spec.copies > 1;
        for (c, a) in r.copies.iter().enumerate() {
            let who = if many { format!("{}[{c}]", spec.id) } else { spec.id.clone() };
            let Some(a) = a.last() else {
                check(&mut out, format!("{who} finished"), "true".into(), "false".into());
                continue;
            };
            if let Some(s) = e.status {
                check(
                    &mut out,
                    format!("{who}.status"),
                    s.to_string(),
                    opt(a.status).replace("none", "transport-failure"),
                );
            }
            if let Some(o) = &e.outcome {
                check(&mut out, format!("{who}.outcome"), o.clone(), a.outcome.to_string());
            }
            if let Some(rp) = e.replayed {
                check(&mut out, format!("{who}.replayed"), rp.to_string(), a.replayed.to_string());
            }
            if let Some(id) = e.id {
                check(&mut out, format!("{who}.id"), id.to_string(), opt(a.id()));
            }
            if let Some(other) = &e.same_id_as {
                let j = sim.request_index(other).expect("checked at load");
                let theirs = report.requests[j].finals().next().and_then(|x| x.id());
                out.push(Check {
                    what: format!("{who}.id = {other}.id"),
                    held: theirs.is_some() && a.id() == theirs,
                    expected: opt(theirs),
                    actual: opt(a.id()),
                });
            }
            if let Some(other) = &e.id_differs_from {
                let j = sim.request_index(other).expect("checked at load");
                let theirs = report.requests[j].finals().next().and_then(|x| x.id());
                let differs = a.id().is_some() && a.id() != theirs;
                out.push(Check {
                    what: format!("{who}.id ≠ {other}.id"),
                    held: differs,
                    expected: format!("an id other than {}", opt(theirs)),
                    actual: opt(a.id()),
                });
            }
        }
        if let Some(same) = e.same_id {
            let mut ids: Vec<String> = finals.iter().map(|a| opt(a.id())).collect();
            ids.sort();
            ids.dedup();
            let all_same = ids.len() == 1 && ids[0] != "none";
            let real = ids.iter().filter(|i| *i != "none").count();
            out.push(Check {
                what: format!("{}: every copy got the same id", spec.id),
                held: if same { all_same } else { real > 1 },
                expected: if same {
                    "1 distinct id, on every copy".into()
                } else {
                    "more than 1 distinct id".into()
                },
                actual: {
                    let real: Vec<&String> = ids.iter().filter(|i| *i != "none").collect();
                    let none =
                        if ids.len() > real.len() { " (and copies without an id)" } else { "" };
                    format!(
                        "{} distinct id(s): {}{none}",
                        real.len(),
                        real.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                    )
                },
            });
        }
        if let Some(n) = e.rows_after {
            check(&mut out, format!("rows after {}", spec.id), n.to_string(), opt(r.rows_after));
        }
        if let Some(n) = e.keys_after {
            check(
                &mut out,
                format!("stored keys after {}", spec.id),
                n.to_string(),
                opt(r.keys_after),
            );
        }
    }
    let x = &sim.expect;
    if let Some(n) = x.rows {
        check(&mut out, "rows".into(), n.to_string(), report.rows.len().to_string());
    }
    if let Some(n) = x.keys {
        check(&mut out, "stored keys".into(), n.to_string(), report.keys.to_string());
    }
    if let Some(n) = x.effects {
        check(&mut out, "effects".into(), n.to_string(), report.effects_total.to_string());
    }
    if let Some(q) = &x.row_qty {
        let actual: Vec<i64> = report.rows.iter().map(|r| r.qty).collect();
        check(&mut out, "row qty".into(), format!("{q:?}"), format!("{actual:?}"));
    }
    out
}
