//! `Sim::parse`: the sim file read section by section, in the order the checks were always
//! run (so a bad file's first error stays the same); the `[world]` section; the ids requests
//! and actions share (`Names`).

use std::ops::Range;
use std::path::Path;

use toml::Spanned;

use super::actions::{check_no_cycles, parse_actions, parse_injects};
use super::faults::parse_faults;
use super::file::{SimFile, WorldFile};
use super::requests::{link_requests, parse_requests};
use super::*;
use crate::input::{InputError, Source, is_kebab, parse_seeds};

impl Sim {
    /// Load a sim file.
    pub fn load(path: &Path) -> Result<Sim, InputError> {
        let src = crate::input::read_file(path, "sim")?;
        Self::parse(path, &src)
    }

    /// Parse sim text; `path` names it in errors and gives the sim its name.
    pub fn parse(path: &Path, src: &str) -> Result<Sim, InputError> {
        let file = Source::new(path, src);
        let f: SimFile = file.toml()?;
        let seeds = match &f.seeds {
            None => DEFAULT_SEEDS,
            Some(s) => parse_seeds(s.get_ref()).map_err(|m| file.err(s.span(), m))?,
        };
        let world = parse_world(file, &f.world)?;
        let names = Names::collect(file, &f)?;
        let (requests, expanded) = parse_requests(file, &f, &names, &world)?;
        let rename = |n: &String| {
            expanded
                .iter()
                .find(|(a, _)| a == n)
                .map(|(_, b)| b.clone())
                .unwrap_or_else(|| n.clone())
        };
        let requests = link_requests(requests, &rename);
        let actions = parse_actions(file, &f, &names, &rename)?;
        check_no_cycles(file, &names, &requests, &actions)?;
        let injects = parse_injects(file, &f)?;
        let faults = parse_faults(file, &f, world.processes)?;
        if requests.is_empty() {
            return Err(InputError::at(
                file.path,
                file.src,
                0,
                "no [[request]]: a sim needs at least one request (a run without one proves \
                 nothing)",
            ));
        }
        // The file name names a row of every table, the description heads reports: escaped.
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        Ok(Sim {
            name: crate::text::printable(&stem),
            path: path.to_path_buf(),
            description: crate::text::printable(&f.description.unwrap_or_default()),
            limitation: f.limitation.as_deref().map(crate::text::printable),
            seeds,
            world,
            requests,
            actions,
            injects,
            faults,
            expect: Expect {
                rows: f.expect.rows,
                keys: f.expect.keys,
                effects: f.expect.effects,
                row_qty: f.expect.row_qty,
            },
        })
    }
}

/// The `[world]` section.
fn parse_world(file: Source, w: &WorldFile) -> Result<WorldSpec, InputError> {
    let processes = match &w.processes {
        None => 1,
        Some(p) if (1..=16).contains(p.get_ref()) => *p.get_ref(),
        Some(p) => return Err(file.err(p.span(), "world.processes: expected 1..=16")),
    };
    let latency_us = file.ms_range(
        "world.latency_ms",
        &w.latency_ms,
        (1_000, 10_000),
        |lo, hi| lo <= hi && hi <= 60_000_000,
        "[low, high] with low <= high <= 60000",
    )?;
    if let Some(e) = &w.event_loop {
        return Err(file.err(
            e.span(),
            "world.event_loop: a sim no longer chooses how the server takes in work: that is \
             the runtime of the model's stack (`stack` in the model, `[runtime]` in stacks/*.toml, \
             docs/models.md); the client's gap between connecting and sending is \
             `[world] connect_gap_ms`",
        ));
    }
    let connect_gap_us = file.ms_range(
        "world.connect_gap_ms",
        &w.connect_gap_ms,
        CONNECT_GAP_US,
        |lo, hi| lo <= hi && hi <= 60_000_000,
        "[low, high] with low <= high <= 60000",
    )?;
    let start = file
        .choice(&w.start, "world.start", &[("cold", Start::Cold), ("warm", Start::Warm)])?
        .unwrap_or_default();
    Ok(WorldSpec {
        start,
        processes,
        wait_budget_us: w
            .wait_budget_ms
            .is_some()
            .then(|| file.ms("world.wait_budget_ms", &w.wait_budget_ms, 0, 0))
            .transpose()?,
        client_timeout_us: file.ms(
            "world.client_timeout_ms",
            &w.client_timeout_ms,
            30_000_000,
            1,
        )?,
        latency_us,
        connect_gap_us,
        time_limit_us: file.ms("world.time_limit_ms", &w.time_limit_ms, 3_600_000_000, 1)?,
        max_steps: parse_max_steps(file, &w.max_steps)?,
        effect_latency_us: parse_effect_latency(file, w, latency_us)?,
        effect_dedupe_retention_us: w
            .effect_dedupe_retention_ms
            .is_some()
            .then(|| {
                file.ms("world.effect_dedupe_retention_ms", &w.effect_dedupe_retention_ms, 0, 1)
            })
            .transpose()?,
        clock_skew_us: w
            .clock_skew_ms
            .as_ref()
            .map(|v| file.signed_ms_range("world.clock_skew_ms", v))
            .transpose()?,
        stock: parse_stock(file, &w.stock)?,
    })
}

/// The client's default gap between its connection being established and its request's
/// bytes arriving (µs): a Node.js client writes in its connect callback; the spread measured
/// over 20 connect callbacks of a burst on this project's machine, p10 0.33 ms and p50
/// 0.47 ms (docs/reality.md), widened to 0.05-0.6 ms. idemsim's real client waits the same gap.
const CONNECT_GAP_US: (u64, u64) = (50, 600);

/// `world.max_steps`: 1..=`MAX_STEPS` (100000 by default).
fn parse_max_steps(file: Source, max_steps: &Option<Spanned<u64>>) -> Result<u64, InputError> {
    match max_steps {
        None => Ok(100_000),
        Some(m) if (1..=MAX_STEPS).contains(m.get_ref()) => Ok(*m.get_ref()),
        Some(m) => Err(file.err(m.span(), format!("world.max_steps: expected 1..={MAX_STEPS}"))),
    }
}

/// `world.effect_latency_ms`: the provider's latency (µs), the network's when absent.
fn parse_effect_latency(
    file: Source,
    w: &WorldFile,
    latency_us: (u64, u64),
) -> Result<(u64, u64), InputError> {
    if w.effect_latency_ms.is_none() {
        return Ok(latency_us);
    }
    file.ms_range(
        "world.effect_latency_ms",
        &w.effect_latency_ms,
        latency_us,
        |lo, hi| lo <= hi && hi <= 60_000_000,
        "[low, high] with low <= high <= 60000",
    )
}

/// `world.stock = { "sample-item" = 3 }`: catalogue items, 0..=1000000 units each.
fn parse_stock(
    file: Source,
    stock: &Option<Spanned<std::collections::BTreeMap<String, Spanned<i64>>>>,
) -> Result<Vec<(String, i64)>, InputError> {
    let Some(stock) = stock else { return Ok(vec![]) };
    let mut out = Vec::new();
    for (item, n) in stock.get_ref() {
        if !crate::http::CATALOGUE.contains(&item.as_str()) {
            return Err(file.err(
                stock.span(),
                format!(
                    "world.stock: `{}` is not a catalogue item; expected one of {}",
                    crate::input::shown(item),
                    crate::http::CATALOGUE.join(", ")
                ),
            ));
        }
        if !(0..=1_000_000).contains(n.get_ref()) {
            return Err(file.err(n.span(), "world.stock: expected 0..=1000000 units"));
        }
        out.push((item.clone(), *n.get_ref()));
    }
    Ok(out)
}

/// The ids of a sim file: requests and actions share one namespace (`after` refers to either).
pub(super) struct Names<'a> {
    file: Source<'a>,
    /// Every id as written, with its span.
    ids: Vec<(String, Range<usize>)>,
    /// Request ids as written.
    requests: Vec<String>,
}

impl<'a> Names<'a> {
    pub(super) fn collect(file: Source<'a>, f: &SimFile) -> Result<Names<'a>, InputError> {
        let mut ids: Vec<(String, Range<usize>)> = Vec::new();
        let all = f.requests.iter().map(|r| &r.id).chain(f.actions.iter().map(|a| &a.id));
        for id in all {
            if !is_kebab(id.get_ref()) {
                return Err(file.err(
                    id.span(),
                    format!("id `{}`: expected lowercase letters, digits and '-'", id.get_ref()),
                ));
            }
            if ids.iter().any(|(n, _)| n == id.get_ref()) {
                return Err(file.err(id.span(), format!("duplicate id `{}`", id.get_ref())));
            }
            ids.push((id.get_ref().clone(), id.span()));
        }
        let requests = f.requests.iter().map(|r| r.id.get_ref().clone()).collect();
        Ok(Names { file, ids, requests })
    }

    pub(super) fn is_known(&self, id: &str) -> bool {
        self.ids.iter().any(|(n, _)| n == id)
    }

    /// A request or action id.
    pub(super) fn known(&self, s: &Spanned<String>) -> Result<String, InputError> {
        if self.is_known(s.get_ref()) {
            return Ok(s.get_ref().clone());
        }
        let all: Vec<&str> = self.ids.iter().map(|(n, _)| n.as_str()).collect();
        Err(self.file.err(
            s.span(),
            format!(
                "unknown request or action `{}`; expected one of: {}",
                s.get_ref(),
                all.join(", ")
            ),
        ))
    }

    /// A request id.
    pub(super) fn known_request(&self, s: &Spanned<String>) -> Result<String, InputError> {
        if self.requests.contains(s.get_ref()) {
            return Ok(s.get_ref().clone());
        }
        Err(self.file.err(
            s.span(),
            format!(
                "unknown request `{}`; expected one of: {}",
                s.get_ref(),
                self.requests.join(", ")
            ),
        ))
    }

    /// An `after` value: an id or a list of ids.
    pub(super) fn after_list(
        &self,
        v: &Option<Spanned<toml::Value>>,
    ) -> Result<Vec<String>, InputError> {
        let Some(v) = v else { return Ok(vec![]) };
        let items: Vec<String> = match v.get_ref() {
            toml::Value::String(s) => vec![s.clone()],
            toml::Value::Array(a) if a.iter().all(|x| x.is_str()) => {
                a.iter().map(|x| x.as_str().unwrap_or_default().to_string()).collect()
            }
            _ => return Err(self.file.err(v.span(), "after: expected an id or a list of ids")),
        };
        for i in &items {
            if !self.is_known(i) {
                return Err(self
                    .file
                    .err(v.span(), format!("after: unknown request or action `{i}`")));
            }
        }
        Ok(items)
    }

    /// The span of the id an (expanded) id comes from.
    pub(super) fn span_of(&self, id: &str) -> Range<usize> {
        self.ids
            .iter()
            .find(|(n, _)| n == id || id.starts_with(&format!("{n}-")))
            .map(|(_, s)| s.clone())
            .unwrap_or(0..0)
    }
}
