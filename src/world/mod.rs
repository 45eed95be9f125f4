//! One run's simulated world: the only code that imports madsim or rusqlite.
//!
//! One run = one seed = one madsim runtime: client nodes, server process nodes, an effect
//! receiver, a control node (actions, restarts, partitions, the key collector), the simulated
//! network and clock, and one real SQLite database. [`simulate`] builds the world, drives it to
//! quiescence or a bound, kills every node and returns what it observed as plain data
//! ([`Observation`]) and, when asked, the typed event history. Judging happens outside.

pub mod bench;
mod client;
mod clock;
mod conn;
mod control;
mod exec;
mod explorer;
mod keystore;
mod net;
mod phases;
mod provider;
mod runner;
mod server;
mod shared;
mod store;
mod threads;
pub mod vfs;

use std::sync::Arc;

use madsim::runtime::{Handle, NodeHandle, Runtime};
use madsim::task::NodeId;

use self::shared::{Latch, ProcessState, Recorder, State, World, draw};
use crate::history::{History, Legend, Node, What};
use crate::model::{Model, Step};
use crate::report::{KeyRecord, Observation, RequestReport};
use crate::scenario::Sim;

/// A run could not be carried out (the harness's own database failed). Violations and failed
/// expectations are not errors: they are in the observation.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The harness's SQLite database failed (not the model's statements, which fail inside the run).
    #[error("SQLite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A sweep could not start its worker threads.
    #[error("cannot start worker threads: {0} (try a smaller --jobs)")]
    Threads(String),
}

/// What one simulation gives back.
pub struct Simulated {
    /// What the run observed, for the judges.
    pub observation: Observation,
    /// The typed event history, when asked for (it is always hashed).
    pub history: Option<History>,
    /// What the run's explorer saw (`--explore`; None: no explorer, a calibrated run).
    pub explored: Option<crate::explore::Explored>,
}

/// Run one seed of one sim against one model; `keep_history` keeps the typed events; `mode`:
/// the run's explorer (None: the calibrated run, exactly as without one).
pub fn simulate(
    sim: &Arc<Sim>,
    model: &Arc<Model>,
    seed: u64,
    keep_history: bool,
    mode: Option<crate::explore::Mode>,
) -> Result<Simulated, RunError> {
    let db = fresh_database(sim, model)?;
    let copies: Vec<u32> = sim.requests.iter().map(|r| r.copies).collect();
    let explorer = explorer::Installed::new(mode, &copies);
    let rt = Runtime::with_seed_and_config(seed, madsim::Config::default());
    let names: Vec<String> = sim
        .requests
        .iter()
        .map(|r| r.id.clone())
        .chain(sim.actions.iter().map(|a| a.id.clone()))
        .collect();
    let state = initial_state(sim, &names, keep_history);
    let world = rt.block_on({
        let (sim, model) = (sim.clone(), model.clone());
        async move {
            let world = Arc::new(World::new(sim, model, db, state, names));
            supervise(world.clone()).await;
            world
        }
    });
    // Every node was killed at the end of `supervise`, and dropping the runtime drops what is
    // left: connections have rolled back and gone back to the pool, as if every process
    // stopped. Then the observer reads the final state.
    drop(rt);
    // The outside node's handle lives in the world; drop it so no task keeps the world alive.
    world.outside.lock().unwrap_or_else(|p| p.into_inner()).take();
    let explored = explorer.finish();
    let mut out = observe(&world, sim, keep_history)?;
    out.explored = explored;
    Ok(out)
}

/// The run's database, filled with the sim's stock and the documents its requests update.
fn fresh_database(sim: &Sim, model: &Model) -> Result<store::Db, RunError> {
    let db = store::fresh_run_database(model.driver.journal)?;
    if !sim.world.stock.is_empty() {
        store::with_observer(&db, |c| store::fill_stock(c, &sim.world.stock))?;
    }
    if model.program.contains(&Step::UpdateDoc) {
        let docs =
            sim.requests.iter().filter_map(|q| q.path.strip_prefix(crate::http::DOCS_PREFIX));
        store::with_observer(&db, |c| store::fill_docs(c, docs))?;
    }
    Ok(db)
}

/// The state a run starts from: an empty report per request, a latch per request and action.
fn initial_state(sim: &Sim, names: &[String], keep_history: bool) -> State {
    let outcomes = sim
        .requests
        .iter()
        .map(|r| RequestReport {
            id: r.id.clone(),
            intent: r.intent.clone(),
            copies: vec![Vec::new(); r.copies as usize],
            rows_after: None,
            keys_after: None,
            responses_after: None,
            finished: false,
        })
        .collect();
    State {
        history: Recorder { keep: keep_history, ..Default::default() },
        inject_fired: vec![0; sim.injects.len()],
        outcomes,
        next_tag: 1000,
        processes: (0..sim.world.processes).map(|_| ProcessState::default()).collect(),
        done: names.iter().map(|_| Latch::default()).collect(),
        ..Default::default()
    }
}

/// A final read of the database the judges need only when the model has `step`.
fn read_if<T>(
    world: &World,
    step: Step,
    read: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<Vec<T>>,
) -> Result<Vec<T>, RunError> {
    if world.model.program.contains(&step) {
        Ok(store::with_observer(&world.db, read)?)
    } else {
        Ok(Vec::new())
    }
}

/// What the run left, as plain data: the final database read by the observer, the keys held
/// outside SQLite, what the clients and the provider saw, and the history.
fn observe(world: &World, sim: &Sim, keep_history: bool) -> Result<Simulated, RunError> {
    let rows = store::with_observer(&world.db, store::read_rows)?;
    let resources = read_if(world, Step::ApplyStatus, store::read_resources)?;
    let writes = read_if(world, Step::UpdateDoc, store::read_writes)?;
    let unsent = read_if(world, Step::Outbox, store::unsent_intents)?;
    let mut keys = store::with_observer(&world.db, store::read_keys)?;
    let mut st = std::mem::take(&mut *world.lock());
    let h = st.history;
    // Keys held outside SQLite (a TTL cache, process memory) as the judges see them: cache
    // records still alive at the end, and what each process's memory holds (a restart has
    // emptied it).
    let end_us = h.last_t_us;
    let ttl = world.model.key.as_ref().and_then(|k| k.retention_us);
    let live = |r: &KeyRecord| ttl.is_none_or(|ttl| r.created_us.saturating_add(ttl) > end_us);
    keys.extend(st.cache.into_iter().filter(|(_, r)| live(r)));
    keys.extend(st.processes.iter_mut().flat_map(|p| p.take_memory()));
    let observation = Observation {
        requests: st.outcomes,
        rows,
        keys,
        effect_log: st.provider.effect_log,
        deliveries: st.provider.deliveries,
        collected: st.collected,
        bounds_hit: st.bounds_hit,
        unsent,
        resources,
        writes,
        end_us: h.last_t_us,
        events: h.count,
        trace_hash: h.hasher.0,
        faults: h.faults,
    };
    let history = keep_history.then(|| History { events: h.events, legend: legend(sim) });
    Ok(Simulated { observation, history, explored: None })
}

/// The names the history's events refer to.
fn legend(sim: &Sim) -> Legend {
    Legend {
        requests: sim.requests.iter().map(|r| (r.id.clone(), r.copies)).collect(),
        actions: sim.actions.iter().map(|a| a.id.clone()).collect(),
    }
}

/// The supervisor: builds the nodes, starts clients and actions, waits for quiescence.
async fn supervise(world: Arc<World>) {
    let h = Handle::current();
    let mut nodes: Vec<NodeId> = Vec::new();
    supervise_nodes(&world, &h, &mut nodes).await;
    // Stop every node: its tasks are dropped at the executor's next pass (open transactions roll
    // back, connections return to the pool). Without this, madsim leaves waiting tasks alive
    // forever (the runtime has no Drop that cancels them) and every run would leak its world.
    for id in nodes {
        h.kill(id);
    }
    clock::sleep_us(1).await;
}

/// Build the nodes, start everything, run the clients to their end, then wait for
/// quiescence (or the time limit).
async fn supervise_nodes(world: &Arc<World>, h: &Handle, nodes: &mut Vec<NodeId>) {
    draw_clock_offsets(world);
    let outside = spawn_nodes(world, h, nodes);
    spawn_control(world, &outside);
    let clients: Vec<_> = (0..world.sim.requests.len())
        .map(|i| outside.spawn(Box::pin(client::run_request(world.clone(), i))))
        .collect();
    let limit = world.sim.world.time_limit_us;
    let all_clients = async {
        for c in clients {
            let _ = c.await;
        }
    };
    if clock::timeout_us(limit, all_clients).await.is_none() {
        world.bound_hit(format!(
            "time-limit: clients not finished after {} ms of simulated time",
            crate::units::show_ms(limit)
        ));
        return;
    }
    wait_quiescent(world).await;
}

/// Each process's clock is off true time by an offset drawn from the sim's skew range.
fn draw_clock_offsets(world: &World) {
    if let Some((lo, hi)) = world.sim.world.clock_skew_us {
        for p in 0..world.sim.world.processes {
            // Drawn as a distance above `lo` (`draw` is over µs, unsigned; `lo <= hi`).
            let offset = lo.saturating_add_unsigned(draw((0, hi.abs_diff(lo))));
            world.lock().processes[p].clock_offset_us = offset;
            world.emit(Node::Server(p as u32), None, What::ClockOffset { us: offset });
        }
    }
}

/// One node for everything that never crashes (the wire, the provider, the clients and the
/// control tasks), returned; each server process a node of its own (a crash kills its tasks).
fn spawn_nodes(world: &Arc<World>, h: &Handle, nodes: &mut Vec<NodeId>) -> NodeHandle {
    let outside = h.create_node().name("outside").build();
    nodes.push(outside.id());
    *world.outside.lock().unwrap() = Some(outside.clone());
    outside.spawn(net::wire_main(world.clone()));
    outside.spawn(provider::receiver_main(world.clone()));
    for i in 0..world.sim.world.processes {
        let w = world.clone();
        let node = h
            .create_node()
            .name(format!("server-{}", i + 1))
            .init(move || server::process_main(w.clone(), i))
            .build();
        world.server_nodes.lock().unwrap().push(node.id());
        nodes.push(node.id());
    }
    outside
}

/// The control tasks on the outside node: the actions, the key collector, partition windows.
fn spawn_control(world: &Arc<World>, outside: &NodeHandle) {
    for (i, a) in world.sim.actions.iter().enumerate() {
        world.lock().quiet.actions_running += 1;
        let (w, kind) = (world.clone(), a.kind.clone());
        // The action holds a (Send, !Sync) connection across awaits: run it as a local task.
        outside.spawn(async move {
            madsim::task::spawn_local(control::run_action(w, i, kind));
        });
    }
    if let (Some(every), Some(retention)) =
        (world.sim.faults.gc_every_us, world.model.key.as_ref().and_then(|k| k.retention_us))
    {
        let w = world.clone();
        outside.spawn(async move {
            madsim::task::spawn_local(control::collector(w, every, retention));
        });
    }
    for p in world.sim.faults.partitions.clone() {
        outside.spawn(control::partition(world.clone(), p));
    }
}

/// Quiescence: no request on its way to a process or waiting in its inbox, no handler or
/// action running, no outbox message undelivered. Event-driven: the supervisor sleeps until
/// one of those changes (or the time limit), never polls.
async fn wait_quiescent(world: &World) {
    let limit = world.sim.world.time_limit_us;
    while busy(world) > 0 {
        let now = world.now_us();
        if now >= limit || clock::timeout_us(limit - now, world.next_work_change()).await.is_none()
        {
            world.bound_hit(format!(
                "time-limit: server work still running after {} ms of simulated time",
                crate::units::show_ms(limit)
            ));
            break;
        }
    }
    world.emit(Node::Control, None, What::Quiescent);
}

/// Work still to come: requests on the wire or in an inbox, handlers and actions running,
/// effects waiting for the provider; outbox rows and abandoned claims while the step budget
/// lasts.
pub(crate) fn busy(world: &World) -> u64 {
    let (busy, budget_spent) = {
        let st = world.lock();
        let busy = st.quiet.running()
            + st.wire.work_in_flight
            + st.wire.receiver.queue.len() as u64
            + st.processes
                .iter()
                .map(|p| (p.inbox.queue.len() + p.phases.accepted.len()) as u64)
                .sum::<u64>();
        (busy, st.steps > world.sim.world.max_steps)
    };
    // Once the step budget is spent the relay has stopped: its outbox is left as it is.
    busy + if budget_spent { 0 } else { outbox_pending(world) + claims_to_complete(world) }
}

/// Abandoned claims a completer still has to finish (0 without a completer).
fn claims_to_complete(world: &World) -> u64 {
    if world.model.completer_every_us().is_none() {
        return 0;
    }
    let horizon = world.model.key.as_ref().and_then(|k| k.completer_horizon_us);
    let now = world.db_clock_us();
    store::with_observer(&world.db, |c| keystore::sql_count_resumable(c, now, horizon)).unwrap_or(1)
}

/// Outbox rows not yet delivered (0 when the model has no outbox or the table is locked).
fn outbox_pending(world: &World) -> u64 {
    if !world.model.program.contains(&Step::Outbox) {
        return 0;
    }
    store::with_observer(&world.db, store::count_unsent).unwrap_or(1)
}
