//! A real round's processes, started in order: the target's services, in a controlled round a
//! proxy for each service the target proxies, the servers (given the proxies' ports), then
//! the warm-up requests. On an error everything started is ended.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::conduct::Conductor;
use super::hub::Hub;
use super::procs::{Launch, Servers};
use super::proxy::{Proxy, proxied_ports};
use super::round::{RoundError, RoundOptions, WARMUP_USER};
use super::services::Services;
use super::target::Target;
use super::wire;
use crate::model::Model;
use crate::scenario::Sim;

/// A round's processes: its services, a proxy for each the target proxies in a controlled
/// round, and its servers (given the proxies' ports), warmed up. On an error what started is
/// ended (the hub is the caller's).
pub fn start(
    (sim, model, target): (&Sim, &Model, &Target),
    opts: &RoundOptions,
    dir: &Path,
    hub: &Hub,
    conductor: Option<&Arc<Conductor>>,
) -> Result<(Services, Arc<Servers>, Vec<Proxy>), RoundError> {
    let services = Services::start(target, dir).map_err(RoundError)?;
    let mut proxies = Vec::new();
    let started = proxied_ports(target, services.ports(), conductor, &mut proxies)
        .map_err(RoundError)
        .and_then(|ports| start_servers(sim, model, target, opts, dir, hub, ports));
    let warmed = started.and_then(|servers| {
        hub.attach(servers.clone());
        match warm_up(sim, target, &servers, opts.warm) {
            Ok(()) => Ok(servers),
            Err(e) => {
                servers.kill_all();
                Err(RoundError(e))
            }
        }
    });
    match warmed {
        Ok(servers) => Ok((services, servers, proxies)),
        Err(e) => {
            proxies.into_iter().for_each(|p| drop(p.finish()));
            Err(e)
        }
    }
}

/// Warm every process up: `n` requests one after the other, each answered before the next,
/// shaped as the sim's first request but sent by [`WARMUP_USER`] with keys of their own. What
/// they store is left out of the round ([`db`] skips that user). An error names the process.
fn warm_up(sim: &Sim, target: &Target, servers: &Servers, n: u32) -> Result<(), String> {
    let Some(first) = sim.requests.first() else { return Ok(()) };
    let mut spec = first.clone();
    spec.user = Some(WARMUP_USER.to_string());
    spec.intent = WARMUP_USER.to_string();
    for p in 0..sim.world.processes {
        let port = servers.port(p).ok_or_else(|| format!("process {} has no port", p + 1))?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        for i in 0..n {
            let key = format!("{WARMUP_USER}-{}-{i}", p + 1);
            let k = first.key.as_ref().map(|_| key.as_str());
            let req = super::mapping::request_for(target, &spec, 1, k, &key);
            let bytes = wire::request_bytes(&req.method, &req.path, &req.headers, &req.body);
            let deadline = Instant::now() + Duration::from_secs(10);
            let answered = wire::connect(addr, Duration::from_secs(2))
                .ok()
                .and_then(|mut c| {
                    wire::send(&mut c, &bytes).then(|| wire::read_message(&mut c, deadline).ok())
                })
                .flatten()
                .and_then(|m| m.status());
            if answered.is_none() {
                return Err(format!(
                    "process {} did not answer warm-up request {} of {n} within 10 s",
                    p + 1,
                    i + 1
                ));
            }
        }
    }
    Ok(())
}

/// Start the sim's server processes for a round in `dir`.
fn start_servers(
    sim: &Sim,
    model: &Model,
    target: &Target,
    opts: &RoundOptions,
    dir: &Path,
    hub: &Hub,
    services: Vec<(String, u16)>,
) -> Result<Arc<Servers>, RoundError> {
    let launch = Launch {
        dir: dir.to_path_buf(),
        db: dir.join("db.sqlite"),
        // In a controlled round a lock's holder runs when the conductor releases it: a wait
        // for the lock lasts until then, bounded by the round, not by the wall-clock budget.
        busy_timeout_ms: match &opts.control {
            Some(_) => opts.limit_us.min(sim.world.time_limit_us) / 1000,
            None => sim.world.wait_budget_us.unwrap_or(model.wait_budget_us) / 1000,
        },
        hub_url: hub.url(),
        points: armed_points(sim, opts.control.is_some()),
        trace: opts.trace.then(|| dir.join("trace.jsonl")),
        services,
    };
    Servers::start(target, launch, sim.world.processes).map_err(|e| RoundError(e.0))
}

/// The points the sim injects at, plus `steps` when it crashes processes between steps or the
/// round is controlled (its steps are where the conductor holds the server).
pub fn armed_points(sim: &Sim, controlled: bool) -> String {
    let mut points: BTreeSet<&str> = sim.injects.iter().map(|i| i.point.as_str()).collect();
    if sim.faults.crash > 0.0 || controlled {
        points.insert("steps");
    }
    points.into_iter().collect::<Vec<_>>().join(",")
}
