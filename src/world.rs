//! One run = one seed = one madsim runtime: client nodes, server process nodes, an effect
//! receiver, a control node (actions, restarts), the simulated network and clock, and one real
//! SQLite database. [`run`] builds the world, drives it to quiescence or a bound, and turns what
//! happened into a [`RunReport`].

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use madsim::runtime::{Handle, NodeHandle, Runtime};
use madsim::task::NodeId;
use madsim::time::{Instant, sleep};
use rusqlite::Connection;

use crate::history::{Event, History};
use crate::model::Model;
use crate::report::{AttemptOutcome, RequestReport, RunReport};
use crate::scenario::{ActionKind, Sim};
use crate::store::{self, Record};
use crate::{checker, oracle};

/// Options of one run.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    /// Keep the full history in the output (for `--trace`); the hash is always computed.
    pub keep_history: bool,
}

/// A run's report and (optionally) its history.
pub struct RunOutput {
    pub report: RunReport,
    pub history: Option<History>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("SQLite: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

pub(crate) const REQ_TAG: u64 = 1;
pub(crate) const EFFECT_TAG: u64 = 2;
pub(crate) const SERVER_PORT: u16 = 80;

/// Mutable state of a run, shared by every node (one thread: the lock is never contended).
pub(crate) struct State {
    pub history: Vec<Event>,
    pub inject_fired: Vec<u32>,
    pub outcomes: Vec<RequestReport>,
    pub steps: u64,
    pub handlers_in_flight: u32,
    pub actions_running: u32,
    pub bounds_hit: Vec<String>,
    pub next_tag: u64,
    /// (intent, ms) of every effect the receiver counted (after dedupe), in order: effects
    /// per intent and in total are derived from it.
    pub effect_log: Vec<(String, u64)>,
    /// (intent, ms) of every key deleted by the collector or a delete-keys action.
    pub collected: Vec<(String, u64)>,
    /// The cache and per-process memory key stores.
    pub mem: crate::keystore::MemStores,
    /// Every delivery the effect receiver got (before deduplication).
    pub deliveries: u64,
    /// Dedupe keys the receiver has seen.
    pub dedupe_seen: std::collections::BTreeSet<String>,
    /// Per process: which request holds its event loop (synchronous driver), and who waits.
    pub loops: Vec<(Option<u64>, Vec<std::task::Waker>)>,
    /// Per process: a crash is under way (the process is going down, restart pending).
    pub crashing: Vec<bool>,
    /// Per request then action: finished?, and the wakers of tasks waiting for it.
    pub done: Vec<(bool, Vec<std::task::Waker>)>,
}

impl State {
    fn empty() -> State {
        State {
            history: Vec::with_capacity(64),
            inject_fired: vec![],
            outcomes: vec![],
            steps: 0,
            handlers_in_flight: 0,
            actions_running: 0,
            bounds_hit: vec![],
            next_tag: 1000,
            effect_log: vec![],
            collected: vec![],
            crashing: vec![],
            loops: vec![],
            mem: Default::default(),
            deliveries: 0,
            dedupe_seen: Default::default(),
            done: vec![],
        }
    }
}

/// Everything a node of the run can reach.
pub(crate) struct World {
    pub sim: Arc<Sim>,
    pub model: Arc<Model>,
    pub db_uri: String,
    pub wait_budget_ms: u64,
    pub start: Instant,
    pub state: Mutex<State>,
    pub control: Mutex<Option<NodeHandle>>,
    pub server_nodes: Mutex<Vec<NodeId>>,
    /// Ids of requests then actions (the index into `State::done`).
    pub names: Vec<String>,
}

pub(crate) fn server_addr(i: usize) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 1, i as u8 + 1)), SERVER_PORT)
}
pub(crate) fn client_ip(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 2 + (i / 250) as u8, (i % 250) as u8 + 1))
}
pub(crate) fn receiver_addr() -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3)), 80)
}

impl World {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Simulated time since the run started.
    pub fn now_us(&self) -> u64 {
        Instant::now().duration_since(self.start).as_micros() as u64
    }

    pub fn now_ms(&self) -> f64 {
        self.now_us() as f64 / 1000.0
    }

    /// Record an event in the history.
    pub fn event(&self, node: &str, text: impl Into<String>) {
        let t_us = self.now_us();
        self.lock().history.push(Event {
            t_us,
            node: node.to_string(),
            text: text.into(),
            to: None,
        });
    }

    /// Record a message sent from `node` to `to` (drawn as an arrow in sequence diagrams).
    pub fn message(&self, node: &str, to: &str, text: impl Into<String>) {
        let t_us = self.now_us();
        self.lock().history.push(Event {
            t_us,
            node: node.to_string(),
            text: text.into(),
            to: Some(to.to_string()),
        });
    }

    pub fn bound_hit(&self, what: String) {
        let mut st = self.lock();
        if !st.bounds_hit.contains(&what) {
            st.bounds_hit.push(what);
        }
    }

    pub fn next_tag(&self) -> u64 {
        let mut st = self.lock();
        st.next_tag += 1;
        st.next_tag
    }

    fn index_of(&self, name: &str) -> usize {
        self.names.iter().position(|n| n == name).expect("ids are checked at load")
    }

    /// Wait until every named request or action has finished.
    ///
    /// Hand-written rather than tokio's `watch`: tokio picks a notify shard with a thread-local
    /// RNG seeded from the OS, which made wake-up order (and so the schedule) vary between runs.
    pub async fn wait_for(&self, names: &[String]) {
        for n in names {
            let i = self.index_of(n);
            std::future::poll_fn(|cx| {
                let mut st = self.lock();
                if st.done[i].0 {
                    std::task::Poll::Ready(())
                } else {
                    st.done[i].1.push(cx.waker().clone());
                    std::task::Poll::Pending
                }
            })
            .await;
        }
    }

    /// Mark a request or action finished and wake its waiters, in the order they waited.
    pub fn mark_done(&self, name: &str) {
        let i = self.index_of(name);
        let wakers = {
            let mut st = self.lock();
            st.done[i].0 = true;
            std::mem::take(&mut st.done[i].1)
        };
        for w in wakers {
            w.wake();
        }
    }

    /// Count rows and keys now, as the observer (retrying in simulated time while locked).
    pub async fn probe(&self) -> Option<(u64, u64)> {
        retry_busy(1000, || {
            store::with_observer(|c| Ok((store::count(c, "rows")?, store::count(c, "keys")?)))
        })
        .await
        .ok()
    }

    /// Which server process a copy's attempt goes to.
    pub fn route(&self, req: usize, copy: u32) -> usize {
        use crate::scenario::Route;
        let n = self.sim.world.processes;
        match self.sim.requests[req].route {
            Route::Fixed(i) => i,
            Route::Alternate => copy as usize % n,
            Route::Random => {
                use madsim::rand::Rng;
                madsim::rand::thread_rng().gen_range(0..n)
            }
        }
    }
}

/// Run one seed of one sim against one model.
pub fn run(
    sim: &Arc<Sim>,
    model: &Arc<Model>,
    seed: u64,
    opts: RunOptions,
) -> Result<RunOutput, RunError> {
    let db_uri = store::fresh_run_database()?;
    let mut cfg = madsim::Config::default();
    let (lo, hi) = sim.world.latency_ms;
    cfg.net.send_latency = Duration::from_millis(lo)..Duration::from_millis(hi);
    let rt = Runtime::with_seed_and_config(seed, cfg);

    let names: Vec<String> = sim
        .requests
        .iter()
        .map(|r| r.id.clone())
        .chain(sim.actions.iter().map(|a| a.id.clone()))
        .collect();
    let done = names.iter().map(|_| (false, Vec::new())).collect();
    let outcomes = sim
        .requests
        .iter()
        .map(|r| RequestReport {
            id: r.id.clone(),
            intent: r.intent.clone(),
            copies: vec![Vec::new(); r.copies as usize],
            rows_after: None,
            keys_after: None,
            finished: false,
        })
        .collect();

    let world = rt.block_on({
        let sim = sim.clone();
        let model = model.clone();
        async move {
            let processes = sim.world.processes;
            let state = State {
                outcomes,
                done,
                inject_fired: vec![0; sim.injects.len()],
                crashing: vec![false; processes],
                loops: (0..processes).map(|_| (None, Vec::new())).collect(),
                mem: crate::keystore::MemStores {
                    cache: Default::default(),
                    memory: vec![Default::default(); processes],
                },
                ..State::empty()
            };
            let world = Arc::new(World {
                wait_budget_ms: sim.world.wait_budget_ms.unwrap_or(model.wait_budget_ms),
                sim,
                model,
                db_uri,
                start: Instant::now(),
                state: Mutex::new(state),
                control: Mutex::new(None),
                server_nodes: Mutex::new(vec![]),
                names,
            });
            supervise(world.clone()).await;
            world
        }
    });
    // Every node was killed at the end of `supervise`, and dropping the runtime drops what is
    // left: connections have rolled back and gone back to the pool, as if every process
    // stopped. Then the observer reads the final state.
    drop(rt);
    // The control node's handle lives in the world; drop it so no task keeps the world alive.
    world.control.lock().unwrap_or_else(|p| p.into_inner()).take();
    let rows = store::with_observer(store::read_rows)?;
    let mut keys = store::with_observer(store::read_keys)?;
    let state = std::mem::replace(&mut *world.lock(), State::empty());
    let history = History { events: state.history };
    let end_us = history.events.last().map(|e| e.t_us).unwrap_or(0);
    // Keys held outside SQLite (a TTL cache, process memory) as the checker sees them: cache
    // records still alive at the end, and what each process's memory holds (a restart has
    // emptied it).
    let ttl = world.model.key.as_ref().and_then(|k| k.retention_ms);
    let live = |r: &Record| ttl.is_none_or(|ttl| r.created_ms + ttl > end_us / 1000);
    keys.extend(state.mem.cache.into_iter().filter(|(_, r)| live(r)));
    keys.extend(state.mem.memory.into_iter().flatten());
    // Effects per intent, from the receiver's log.
    let mut effects = std::collections::BTreeMap::new();
    for (intent, _) in &state.effect_log {
        *effects.entry(intent.clone()).or_insert(0) += 1;
    }

    let mut report = RunReport {
        seed,
        sim: world.sim.name.clone(),
        model: world.model.name.clone(),
        requests: state.outcomes,
        keys: keys.len() as u64,
        keys_in_progress: keys.iter().filter(|(_, r)| r.state != "done").count() as u64,
        rows,
        effects_total: state.effect_log.len() as u64,
        effects,
        deliveries: state.deliveries,
        checks: vec![],
        violations: vec![],
        warnings: warnings(&world.sim, &world.model),
        per_intent: vec![],
        ambiguous_intents: 0,
        bounds_hit: state.bounds_hit,
        end_ms: end_us as f64 / 1000.0,
        events: history.events.len(),
        trace_hash: format!("{:016x}", history.hash()),
    };
    report.checks = checker::check_expectations(&world.sim, &report);
    // An in-progress key under a lease can be taken over once the lease expires: not stuck.
    let leased = world.model.key.as_ref().is_some_and(|k| k.lease_ms.is_some());
    let stuck: Vec<(String, String)> = keys
        .iter()
        .filter(|(_, r)| r.state != "done" && !leased)
        .map(|((_, _, key), r)| (r.intent.clone(), key.clone()))
        .collect();
    report.violations = oracle::violations(
        &world.sim,
        &report,
        &oracle::Evidence {
            collected: &state.collected,
            effect_log: &state.effect_log,
            stuck: &stuck,
            effects_expected: effects_expected(&world.sim, &world.model),
        },
    );
    report.per_intent = oracle::per_intent(&world.sim, &report);
    report.ambiguous_intents =
        report.violations.iter().filter(|v| v.name == "unfinished-intent").count() as u64;
    Ok(RunOutput { report, history: opts.keep_history.then_some(history) })
}

/// Should every acknowledged intent have an effect? Yes when the model performs effects, or
/// when the sim injects an unconditional effect at a point of the model for every request.
fn effects_expected(sim: &Sim, model: &Model) -> bool {
    model.has_effects()
        || sim.injects.iter().any(|i| {
            matches!(i.action, crate::scenario::InjectAction::Effect)
                && i.request.is_none()
                && i.rate >= 1.0
                && i.times.is_none()
                && model.points().contains(&i.point.as_str())
        })
}

/// What in the sim cannot take effect with this model.
pub fn warnings(sim: &Sim, model: &Model) -> Vec<String> {
    let points = model.points();
    let mut w: Vec<String> = sim
        .injects
        .iter()
        .filter(|i| !points.contains(&i.point.as_str()))
        .filter(|i| {
            !(i.point == "relay-after-send" && model.program.contains(&crate::model::Step::Outbox))
        })
        .map(|i| {
            format!(
                "inject `{}` at @{} never fires: model {} has no such point",
                i.action.name(),
                i.point,
                model.name
            )
        })
        .collect();
    if sim.faults.gc_every_ms.is_some() && model.key.as_ref().and_then(|k| k.retention_ms).is_none()
    {
        w.push(format!(
            "faults.gc_every_ms is set but model {} has no key retention_ms: nothing expires",
            model.name
        ));
    }
    w.dedup();
    w
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
    sleep(Duration::from_millis(1)).await;
}

async fn supervise_nodes(world: &Arc<World>, h: &Handle, nodes: &mut Vec<NodeId>) {
    let control = h.create_node().name("control").ip("10.0.0.2".parse().unwrap()).build();
    nodes.push(control.id());
    *world.control.lock().unwrap() = Some(control.clone());
    {
        let w = world.clone();
        let r = h
            .create_node()
            .name("receiver")
            .ip(receiver_addr().ip())
            .init(move || crate::server::receiver_main(w.clone()))
            .build();
        nodes.push(r.id());
    }
    for i in 0..world.sim.world.processes {
        let w = world.clone();
        let node = h
            .create_node()
            .name(format!("server-{}", i + 1))
            .ip(server_addr(i).ip())
            .init(move || crate::server::process_main(w.clone(), i))
            .build();
        world.server_nodes.lock().unwrap().push(node.id());
        nodes.push(node.id());
    }
    for (i, a) in world.sim.actions.iter().enumerate() {
        world.lock().actions_running += 1;
        let (w, kind) = (world.clone(), a.kind.clone());
        // The action holds a (Send, !Sync) connection across awaits: run it as a local task.
        control.spawn(async move {
            madsim::task::spawn_local(run_action(w, i, kind));
        });
    }
    if let (Some(every), Some(retention)) =
        (world.sim.faults.gc_every_ms, world.model.key.as_ref().and_then(|k| k.retention_ms))
    {
        let w = world.clone();
        control.spawn(async move {
            madsim::task::spawn_local(collector(w, every, retention));
        });
    }
    for p in world.sim.faults.partitions.clone() {
        let w = world.clone();
        control.spawn(async move {
            sleep(Duration::from_millis(p.from_ms)).await;
            let id = w.server_nodes.lock().unwrap()[p.process];
            let net = madsim::net::NetSim::current();
            net.clog_node(id);
            w.event(
                "control",
                format!("fault: server-{} partitioned from the network", p.process + 1),
            );
            sleep(Duration::from_millis(p.for_ms)).await;
            net.unclog_node(id);
            w.event("control", format!("server-{} reconnected", p.process + 1));
        });
    }
    let mut clients = Vec::new();
    for i in 0..world.sim.requests.len() {
        let node = h
            .create_node()
            .name(format!("client-{}", world.sim.requests[i].id))
            .ip(client_ip(i))
            .build();
        nodes.push(node.id());
        clients.push(node.spawn(crate::client::run_request(world.clone(), i)));
    }

    let limit = Duration::from_millis(world.sim.world.time_limit_ms);
    let all_clients = async {
        for c in clients {
            let _ = c.await;
        }
    };
    if madsim::time::timeout(limit, all_clients).await.is_err() {
        world.bound_hit(format!(
            "time-limit: clients not finished after {} ms of simulated time",
            limit.as_millis()
        ));
        return;
    }
    // Quiescence: no request handler or action still running on any node.
    loop {
        let busy = {
            let st = world.lock();
            st.handlers_in_flight + st.actions_running
        } as u64
            + outbox_pending(world);
        if busy == 0 {
            break;
        }
        if Instant::now().duration_since(world.start) >= limit {
            world.bound_hit(format!(
                "time-limit: server work still running after {} ms of simulated time",
                limit.as_millis()
            ));
            break;
        }
        sleep(Duration::from_millis(10)).await;
    }
    world.event("control", "quiescent");
}

/// Outbox rows not yet delivered (0 when the model has no outbox or the table is locked).
fn outbox_pending(world: &World) -> u64 {
    if !world.model.program.contains(&crate::model::Step::Outbox) {
        return 0;
    }
    store::with_observer(|c| {
        c.query_row("SELECT COUNT(*) FROM outbox WHERE sent = 0", [], |r| r.get::<_, i64>(0))
    })
    .map(|n| n as u64)
    .unwrap_or(1)
}

/// Run a world action on the control node.
async fn run_action(world: Arc<World>, i: usize, kind: ActionKind) {
    let spec = &world.sim.actions[i];
    world.wait_for(&spec.after).await;
    if spec.delay_ms > 0 {
        sleep(Duration::from_millis(spec.delay_ms)).await;
    }
    let id = spec.id.clone();
    let conn = match store::checkout(&world.db_uri) {
        Ok(c) => c,
        Err(e) => {
            world.event("control", format!("{id}: cannot open database: {e}"));
            finish_action(&world, &id);
            return;
        }
    };
    match kind {
        ActionKind::HoldLock { until, for_ms } => {
            if wait_statement(&conn, "BEGIN IMMEDIATE").await {
                world.event(
                    "control",
                    format!("{id}: another connection holds the write lock (BEGIN IMMEDIATE)"),
                );
                if let Some(u) = &until {
                    world.wait_for(std::slice::from_ref(u)).await;
                }
                if let Some(ms) = for_ms {
                    sleep(Duration::from_millis(ms)).await;
                }
                let _ = store::exec_cached(&conn, "COMMIT");
                world.event("control", format!("{id}: write lock released"));
            } else {
                world.event("control", format!("{id}: could not take the write lock"));
            }
        }
        ActionKind::DeleteKeys => {
            // Read the intents and delete in one transaction, retrying while the database is
            // locked, so that every collected key is known to the oracle.
            let deleted = retry_busy(100_000, || collect_keys(&conn, None)).await.map(|intents| {
                let now = world.now_us() / 1000;
                let n = intents.len();
                world.lock().collected.extend(intents.into_iter().map(|i| (i, now)));
                n
            });
            match deleted {
                Err(e) => world.event("control", format!("{id}: cannot delete keys: {e}")),
                Ok(mut n) => {
                    // Keys held outside SQLite (TTL cache, process memory) are wiped too; cache
                    // records already past their TTL are gone and do not count.
                    let now = world.now_us() / 1000;
                    let ttl = world.model.key.as_ref().and_then(|k| k.retention_ms);
                    {
                        let mut st = world.lock();
                        let st = &mut *st;
                        let mut wiped: Vec<String> = st
                            .mem
                            .cache
                            .values()
                            .filter(|r| ttl.is_none_or(|t| r.created_ms + t > now))
                            .map(|r| r.intent.clone())
                            .collect();
                        st.mem.cache.clear();
                        for m in &mut st.mem.memory {
                            wiped.extend(m.values().map(|r| r.intent.clone()));
                            m.clear();
                        }
                        n += wiped.len();
                        st.collected.extend(wiped.into_iter().map(|i| (i, now)));
                    }
                    world.event("control", format!("{id}: deleted {n} stored key(s)"));
                }
            }
        }
    }
    finish_action(&world, &id);
}

/// The key collector: every `every` ms, delete keys older than `retention` ms.
async fn collector(world: Arc<World>, every: u64, retention: u64) {
    let Ok(conn) = store::checkout(&world.db_uri) else { return };
    loop {
        sleep(Duration::from_millis(every)).await;
        let now = world.now_us() / 1000;
        let Some(cutoff) = now.checked_sub(retention) else { continue };
        match collect_keys(&conn, Some(cutoff)) {
            Ok(intents) if !intents.is_empty() => {
                world.event(
                    "control",
                    format!("gc: deleted {} key(s) older than {retention} ms", intents.len()),
                );
                let mut st = world.lock();
                for i in intents {
                    st.collected.push((i, now));
                }
            }
            _ => {} // nothing expired, or the database is busy: try at the next tick
        }
    }
}

fn finish_action(world: &World, id: &str) {
    world.lock().actions_running -= 1;
    world.mark_done(id);
}

async fn wait_statement(conn: &Connection, sql: &str) -> bool {
    retry_busy(100_000, || store::exec_cached(conn, sql)).await.is_ok()
}

/// Run `f` until it is not refused for a locked database, 1 ms of simulated time apart, at
/// most `tries` times (then the last busy error).
async fn retry_busy<T>(
    tries: u32,
    mut f: impl FnMut() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    let mut r = f();
    for _ in 1..tries {
        match r {
            Err(e) if store::is_busy(&e) => sleep(Duration::from_millis(1)).await,
            _ => break,
        }
        r = f();
    }
    r
}

/// Delete the stored keys created at or before `cutoff` (all of them: None) in one
/// transaction; returns their intents, so that the oracle knows every collected key.
fn collect_keys(conn: &Connection, cutoff: Option<u64>) -> rusqlite::Result<Vec<String>> {
    let cutoff = cutoff.map_or(i64::MAX, |c| c as i64);
    let tx = conn.unchecked_transaction()?;
    let intents = tx
        .prepare_cached(
            "SELECT intent FROM keys WHERE created_ms <= ?1 ORDER BY user, operation, key",
        )?
        .query_map([cutoff], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    tx.execute("DELETE FROM keys WHERE created_ms <= ?1", [cutoff])?;
    tx.commit()?;
    Ok(intents)
}

/// Record a finished attempt.
pub(crate) fn record_attempt(world: &World, req: usize, copy: u32, a: AttemptOutcome) {
    world.lock().outcomes[req].copies[copy as usize].push(a);
}
