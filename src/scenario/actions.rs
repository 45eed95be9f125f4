//! The `[[action]]`s and `[[inject]]`s, and the check that `after` and `until` form no cycle.

use std::collections::BTreeMap;

use toml::Spanned;

use super::file::{InjectFile, SimFile};
use super::parse::Names;
use super::*;
use crate::input::{InputError, Source, is_kebab};

/// Every `[[action]]`.
pub(super) fn parse_actions(
    file: Source,
    f: &SimFile,
    names: &Names,
    rename: &impl Fn(&String) -> String,
) -> Result<Vec<ActionSpec>, InputError> {
    let mut actions = Vec::new();
    for a in &f.actions {
        let kind = match a.kind.get_ref().as_str() {
            "hold-lock" => {
                if a.until.is_none() && a.for_ms.is_none() {
                    return Err(
                        file.err(a.kind.span(), "hold-lock needs `until` (an id) or `for_ms`")
                    );
                }
                let until = a.until.as_ref().map(|u| names.known(u)).transpose()?;
                let for_us =
                    a.for_ms.is_some().then(|| file.ms("for_ms", &a.for_ms, 0, 0)).transpose()?;
                ActionKind::HoldLock { until: until.as_ref().map(rename), for_us }
            }
            "delete-keys" => {
                if let Some(u) = &a.until {
                    return Err(file.err(u.span(), "`until` applies to hold-lock only"));
                }
                ActionKind::DeleteKeys
            }
            other => {
                return Err(file.err(
                    a.kind.span(),
                    format!("unknown action kind `{other}`; expected hold-lock or delete-keys"),
                ));
            }
        };
        let after = names.after_list(&a.after)?.iter().map(rename).collect();
        actions.push(ActionSpec {
            id: a.id.get_ref().clone(),
            kind,
            after,
            delay_us: file.ms("delay_ms", &a.delay_ms, 0, 0)?,
        });
    }
    Ok(actions)
}

/// `after` and `until` must not form a cycle (it would only show up as a time-limit bound).
/// Tarjan's strongly connected components, linear in ids and edges; the error names the first
/// id (in file order) that waits for itself.
pub(super) fn check_no_cycles(
    file: Source,
    names: &Names,
    requests: &[RequestSpec],
    actions: &[ActionSpec],
) -> Result<(), InputError> {
    let ids: Vec<&str> = requests
        .iter()
        .map(|q| q.id.as_str())
        .chain(actions.iter().map(|a| a.id.as_str()))
        .collect();
    let index: BTreeMap<&str, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let deps: Vec<Vec<usize>> = requests
        .iter()
        .map(|q| q.after.iter().collect::<Vec<_>>())
        .chain(actions.iter().map(|a| {
            let mut d: Vec<&String> = a.after.iter().collect();
            if let ActionKind::HoldLock { until: Some(u), .. } = &a.kind {
                d.push(u);
            }
            d
        }))
        .map(|d| d.into_iter().filter_map(|id| index.get(id.as_str()).copied()).collect())
        .collect();
    let on_cycle = nodes_on_cycles(&deps);
    match ids.iter().zip(&on_cycle).find(|(_, c)| **c) {
        None => Ok(()),
        Some((start, _)) => Err(file.err(
            names.span_of(start),
            format!(
                "`{start}` waits for itself through `after`/`until`; expected an order without \
                 cycles"
            ),
        )),
    }
}

/// Which nodes of a directed graph (adjacency lists) lie on a cycle (an SCC with more than one
/// node, or a self-loop). Iterative Tarjan: no recursion depth limit.
fn nodes_on_cycles(adj: &[Vec<usize>]) -> Vec<bool> {
    const NONE: usize = usize::MAX;
    let n = adj.len();
    let (mut index, mut low) = (vec![NONE; n], vec![0; n]);
    let (mut on_stack, mut stack) = (vec![false; n], Vec::new());
    let mut on_cycle = vec![false; n];
    let mut next = 0;
    for root in 0..n {
        if index[root] != NONE {
            continue;
        }
        // (node, next edge to visit)
        let mut work = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut e)) = work.last_mut() {
            if *e == 0 && index[v] == NONE {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = adj[v].get(*e) {
                *e += 1;
                if w == v {
                    on_cycle[v] = true;
                }
                if index[w] == NONE {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                loop {
                    let w = stack.pop().expect("v is on the stack");
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    for w in component {
                        on_cycle[w] = true;
                    }
                }
            }
        }
    }
    on_cycle
}

/// Every `[[inject]]`.
pub(super) fn parse_injects(file: Source, f: &SimFile) -> Result<Vec<Inject>, InputError> {
    let mut injects = Vec::new();
    for i in &f.injects {
        let point = i.point.get_ref().trim_start_matches('@').to_string();
        if !is_kebab(&point) {
            return Err(
                file.err(i.point.span(), "point: expected a point name such as before-commit")
            );
        }
        let action = parse_inject_action(file, i)?;
        let rate = parse_inject_rate(file, &i.rate)?;
        let request = match &i.request {
            None => None,
            Some(r) if f.requests.iter().any(|q| q.id.get_ref() == r.get_ref()) => {
                Some(r.get_ref().clone())
            }
            Some(r) => return Err(file.err(r.span(), format!("unknown request `{}`", r.get_ref()))),
        };
        injects.push(Inject { point, action, request, times: i.times, rate });
    }
    Ok(injects)
}

/// An inject's `action`, and no field of another action beside it.
fn parse_inject_action(file: Source, i: &InjectFile) -> Result<InjectAction, InputError> {
    let action = match i.action.get_ref().as_str() {
        "fail" => InjectAction::Fail,
        "effect" => InjectAction::Effect { fallback: i.fallback.unwrap_or(false) },
        "drop-reply" => InjectAction::DropReply,
        "crash" => {
            InjectAction::Crash { restart_us: file.ms("restart_ms", &i.restart_ms, 100_000, 0)? }
        }
        "pause" => InjectAction::Pause { us: file.ms("pause_ms", &i.pause_ms, 1_000_000, 0)? },
        "stall" => InjectAction::Stall { us: file.ms("stall_ms", &i.stall_ms, 1_000_000, 0)? },
        "clock-jump" => match &i.jump_ms {
            Some(j) => InjectAction::ClockJump { us: file.signed_ms("jump_ms", j)? },
            None => return Err(file.err(i.action.span(), "clock-jump needs `jump_ms`")),
        },
        other => {
            return Err(file.err(
                i.action.span(),
                format!(
                    "unknown inject action `{other}`; expected fail, effect, drop-reply, \
                     crash, pause, stall or clock-jump"
                ),
            ));
        }
    };
    // A field of another action is a mistake, not something to ignore.
    for (set, field, of) in [
        (i.fallback.is_some(), "fallback", "effect"),
        (i.jump_ms.is_some(), "jump_ms", "clock-jump"),
        (i.pause_ms.is_some(), "pause_ms", "pause"),
        (i.stall_ms.is_some(), "stall_ms", "stall"),
        (i.restart_ms.is_some(), "restart_ms", "crash"),
    ] {
        if set && action.name() != of {
            return Err(file.err(
                i.action.span(),
                format!("`{field}` is only for action = \"{of}\", not \"{}\"", action.name()),
            ));
        }
    }
    Ok(action)
}

/// An inject's `rate`: a probability (1.0 by default).
fn parse_inject_rate(file: Source, rate: &Option<Spanned<f64>>) -> Result<f64, InputError> {
    let rate = match rate {
        None => 1.0,
        Some(r) if (0.0..=1.0).contains(r.get_ref()) => *r.get_ref(),
        Some(r) => {
            return Err(file.err(
                r.span(),
                format!("rate {}: expected a probability in 0.0..=1.0", r.get_ref()),
            ));
        }
    };
    Ok(rate)
}
