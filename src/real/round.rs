//! One real round: a fresh database folder, the hub, the server processes, then the sim's
//! requests and actions played for real (threads, sockets, wall-clock waits) in the order
//! their `after` lists give, then the processes killed and the database read into the same
//! [`Observation`] a simulated run gives.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::conduct::{Answer, Conductor, Control, ControlLog};
use super::hub::Hub;
use super::procs::Servers;
use super::proxy::Proxy;
use super::startup;
use super::target::Target;
use super::{db, wire};
use crate::model::Model;
use crate::report::{AttemptOutcome, Observation, Outcome, RequestReport};
use crate::scenario::{ActionKind, NextAttempt, RequestSpec, Route, Sim};

/// Options of a round.
#[derive(Debug, Clone)]
pub struct RoundOptions {
    /// The round's wall-clock bound (µs); the sim's own time limit applies when shorter.
    pub limit_us: u64,
    /// Keep the round's folder (database, server logs, instrumentation) instead of deleting it.
    pub keep: bool,
    /// Ask the target for instrumentation lines (`IDEMSIM_TRACE`).
    pub trace: bool,
    /// Throw-away requests each process answers before the round's traffic (0: the round
    /// meets cold processes). Sent by [`WARMUP_USER`], whose rows and keys are not the round's.
    pub warm: u32,
    /// A controlled round (`--controlled`): idemsim orders every send and hook call.
    pub control: Option<Control>,
}

impl RoundOptions {
    /// A round bounded by `limit_us`, uncontrolled, warmed by `warm` requests; `kept`: its
    /// folder kept, with the target's instrumentation.
    pub fn plain(limit_us: u64, kept: bool, warm: u32) -> RoundOptions {
        RoundOptions { limit_us, keep: kept, trace: kept, warm, control: None }
    }
}

/// The user of warm-up requests: their rows and key records are left out of the round.
pub const WARMUP_USER: &str = "idemsim-warmup";

/// The most warm-up requests per process.
pub const MAX_WARM: u32 = 1000;

/// What one round observed, with its wall time.
pub struct RoundResult {
    /// The same plain data a simulated run gives (no trace hash: a real run has none).
    pub observation: Observation,
    /// Wall time of the round's traffic (µs), from the first request to the last answer.
    pub wall_us: u64,
    /// The round's folder when kept.
    pub dir: Option<PathBuf>,
    /// Calls the target made to the hook, by point (`step` for its steps).
    pub reached: BTreeMap<String, u64>,
    /// A controlled round's schedule and what escaped it.
    pub control: Option<ControlLog>,
    /// A controlled round with `trace`: its schedule merged with the server's trace lines.
    pub interleaving: Option<super::interleave::Interleaving>,
}

/// A real round could not be played (the target, not the design, is at fault).
#[derive(Debug, Clone)]
pub struct RoundError(pub String);

/// Which `[[request]]` and `[[action]]` have finished, for `after` lists.
struct Done {
    names: Mutex<BTreeSet<String>>,
    changed: Condvar,
}

impl Done {
    fn mark(&self, name: &str) {
        self.names.lock().unwrap().insert(name.to_string());
        self.changed.notify_all();
    }

    /// Wait until every name in `after` is done, or the deadline; false on the deadline.
    fn wait(&self, after: &[String], deadline: Instant) -> bool {
        let mut names = self.names.lock().unwrap();
        loop {
            if after.iter().all(|a| names.contains(a)) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline
                || crate::sweep::INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed)
            {
                return false;
            }
            names = self
                .changed
                .wait_timeout(names, (deadline - now).min(Duration::from_millis(50)))
                .unwrap()
                .0;
        }
    }
}

struct Ctx {
    sim: Arc<Sim>,
    model: Arc<Model>,
    servers: Arc<Servers>,
    db: PathBuf,
    target: Target,
    start: Instant,
    deadline: Instant,
    done: Done,
    seed: u64,
    /// The first answer that was not HTTP (the target's fault).
    garbage: Mutex<Option<String>>,
    /// The client's network faults that fired, by the sim's knob name.
    faults: Mutex<BTreeMap<String, u64>>,
    /// Connections a server process closed or reset without answering, per process index.
    closed: Mutex<BTreeMap<usize, u64>>,
    /// `--instrument`: the client's own trace lines (`client.jsonl` beside the target's).
    client_trace: Option<Mutex<std::fs::File>>,
    /// A controlled round's conductor.
    conductor: Option<Arc<Conductor>>,
}

impl Ctx {
    /// A round's context: its traffic starts at `start` and may last `limit_us`.
    fn new(
        (sim, model, target): (&Arc<Sim>, &Arc<Model>, &Target),
        servers: &Arc<Servers>,
        db: &Path,
        seed: u64,
        (start, limit_us): (Instant, u64),
        client_trace: Option<std::fs::File>,
        conductor: Option<Arc<Conductor>>,
    ) -> Arc<Ctx> {
        Arc::new(Ctx {
            sim: sim.clone(),
            model: model.clone(),
            servers: servers.clone(),
            db: db.to_path_buf(),
            target: target.clone(),
            start,
            deadline: start + Duration::from_micros(limit_us),
            done: Done { names: Mutex::new(BTreeSet::new()), changed: Condvar::new() },
            seed,
            garbage: Mutex::new(None),
            faults: Mutex::new(BTreeMap::new()),
            closed: Mutex::new(BTreeMap::new()),
            client_trace: client_trace.map(Mutex::new),
            conductor,
        })
    }

    /// Connections closed or reset without an answer in a round where idemsim ordered nothing
    /// that closes one (no drop, crash or failure at a hook point): the server's doing, a
    /// target fault, never a run of unanswered attempts scored against the design.
    fn unasked_closes(&self, log: &super::hub::HubLog) -> Option<String> {
        let closed = self.closed.lock().unwrap();
        let (process, n) = closed.iter().next()?;
        log.faults.is_empty().then(|| {
            format!(
                "process {} closed or reset {n} connection(s) without answering, though idemsim \
                 ordered no drop, crash or failure (docs/targets.md)",
                process + 1
            )
        })
    }

    /// The client's faults that fired and `more` (the hub's), by name.
    fn faults_with(&self, more: BTreeMap<String, u64>) -> BTreeMap<String, u64> {
        let mut faults = std::mem::take(&mut *self.faults.lock().unwrap());
        for (name, n) in more {
            *faults.entry(name).or_insert(0) += n;
        }
        faults
    }

    /// Count a firing of the client's fault `name`.
    fn fired(&self, name: &str) {
        *self.faults.lock().unwrap().entry(name.to_string()).or_insert(0) += 1;
    }
}

/// Play round `round` of `sim` against `target`.
pub fn play(
    sim: &Arc<Sim>,
    model: &Arc<Model>,
    target: &Target,
    round: u64,
    opts: &RoundOptions,
) -> Result<RoundResult, RoundError> {
    let dir = round_dir(round)?;
    let mut result = play_in(sim, model, target, round, opts, &dir);
    if let Ok(RoundResult { control: Some(c), interleaving, .. }) = &mut result
        && opts.trace
    {
        let released: Vec<(String, u64)> =
            c.schedule.iter().cloned().zip(c.released_us.iter().copied()).collect();
        *interleaving = Some(super::interleave::merge(round, &released, &dir.join("trace.jsonl")));
    }
    if opts.keep {
        if let Ok(RoundResult { control: Some(c), interleaving, .. }) = &result {
            let _ = std::fs::write(dir.join("schedule.txt"), c.schedule.join("\n") + "\n");
            if let Some(i) = interleaving {
                let _ = std::fs::write(dir.join("interleaving.txt"), i.lines.join("\n") + "\n");
            }
        }
        return result.map(|r| RoundResult { dir: Some(dir), ..r });
    }
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn round_dir(round: u64) -> Result<PathBuf, RoundError> {
    let base = std::env::temp_dir();
    for attempt in 0..100u32 {
        let d = base.join(format!("idemsim-real-{}-{round}-{attempt}", std::process::id()));
        match std::fs::create_dir(&d) {
            Ok(()) => return Ok(d),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(RoundError(format!("cannot create {}: {e}", d.display()))),
        }
    }
    Err(RoundError("cannot create a fresh round folder in the temporary folder".into()))
}

fn play_in(
    sim: &Arc<Sim>,
    model: &Arc<Model>,
    target: &Target,
    round: u64,
    opts: &RoundOptions,
    dir: &Path,
) -> Result<RoundResult, RoundError> {
    let start = Instant::now();
    let client_trace = client_trace(opts, dir)?;
    let conductor =
        Conductor::for_round(sim, model, round, opts.control.as_ref(), target.proxied());
    let hub = Hub::start(sim.clone(), round, start, conductor.clone())
        .map_err(|e| RoundError(format!("cannot listen on loopback for the hook: {e}")))?;
    let db_path = dir.join("db.sqlite");
    let started = startup::start((sim, model, target), opts, dir, &hub, conductor.as_ref());
    let (services, servers, proxies) = match started {
        Ok(s) => s,
        Err(e) => {
            hub.finish();
            return Err(e);
        }
    };
    let limit = opts.limit_us.min(sim.world.time_limit_us);
    let traffic = Instant::now();
    let ctx = Ctx::new(
        (sim, model, target),
        &servers,
        &db_path,
        round,
        (traffic, limit),
        client_trace,
        conductor.clone(),
    );
    let (requests, collected, bound) = play_items(&ctx);
    let control = conductor.map(|c| c.finish());
    let wall_us = traffic.elapsed().as_micros() as u64;
    let died = servers.died();
    let log = hub.finish();
    servers.kill_all();
    let proxy_faults: Vec<String> = proxies.into_iter().flat_map(Proxy::finish).collect();
    drop(services);
    let refused = ctx.garbage.lock().unwrap().clone().or_else(|| ctx.unasked_closes(&log));
    let bad = died.first().or(log.bad_calls.first()).or(refused.as_ref());
    if let Some(bad) = bad.or(proxy_faults.first()) {
        return Err(RoundError(bad.clone()));
    }
    let state = db::read_final(&db_path, target).map_err(RoundError)?;
    let bounds_hit =
        if bound { vec![format!("round time limit {} ms", limit / 1000)] } else { vec![] };
    let observation = Observation {
        requests,
        rows: state.rows(sim),
        keys: state.keys_for(sim),
        effect_log: log.effects,
        deliveries: log.deliveries,
        collected,
        bounds_hit,
        end_us: wall_us,
        faults: ctx.faults_with(log.faults),
        ..Observation::default()
    };
    let reached = log.reached;
    Ok(RoundResult { observation, wall_us, dir: None, reached, control, interleaving: None })
}

/// `--instrument`: the file of the client's trace lines, `client.jsonl` in the round's folder.
fn client_trace(opts: &RoundOptions, dir: &Path) -> Result<Option<std::fs::File>, RoundError> {
    if !opts.trace {
        return Ok(None);
    }
    std::fs::File::create_new(dir.join("client.jsonl"))
        .map(Some)
        .map_err(|e| RoundError(format!("cannot write the client's trace: {e}")))
}

/// Run every request and action on its own thread; returns the clients' reports, the key
/// records a delete-keys action removed, and whether the round's bound was hit.
fn play_items(ctx: &Arc<Ctx>) -> (Vec<RequestReport>, Vec<crate::report::Collected>, bool) {
    let reports: Arc<Mutex<Vec<RequestReport>>> = Arc::new(Mutex::new(
        ctx.sim
            .requests
            .iter()
            .map(|q| RequestReport {
                id: q.id.clone(),
                intent: q.intent.clone(),
                copies: vec![Vec::new(); q.copies as usize],
                rows_after: None,
                keys_after: None,
                responses_after: None,
                finished: false,
            })
            .collect(),
    ));
    let collected = Arc::new(Mutex::new(Vec::new()));
    let mut threads = Vec::new();
    for qi in 0..ctx.sim.requests.len() {
        let (ctx, reports) = (ctx.clone(), reports.clone());
        threads.push(std::thread::spawn(move || run_request(&ctx, qi, &reports)));
    }
    for ai in 0..ctx.sim.actions.len() {
        let (ctx, collected) = (ctx.clone(), collected.clone());
        threads.push(std::thread::spawn(move || run_action(&ctx, ai, &collected)));
    }
    if let Some(c) = ctx.conductor.clone() {
        let deadline = ctx.deadline;
        threads.push(std::thread::spawn(move || c.conduct(deadline)));
    }
    for t in threads {
        let _ = t.join();
    }
    let bound = Instant::now() >= ctx.deadline;
    let reports = std::mem::take(&mut *reports.lock().unwrap());
    let collected = std::mem::take(&mut *collected.lock().unwrap());
    (reports, collected, bound)
}

fn run_request(ctx: &Arc<Ctx>, qi: usize, reports: &Mutex<Vec<RequestReport>>) {
    let spec = &ctx.sim.requests[qi];
    if !ctx.done.wait(&spec.after, ctx.deadline) {
        return;
    }
    ctx.pause(spec.delay_us);
    let mut copies = Vec::new();
    for copy in 0..spec.copies {
        let ctx = ctx.clone();
        copies.push(std::thread::spawn(move || run_copy(&ctx, qi, copy)));
    }
    let attempts: Vec<Vec<AttemptOutcome>> =
        copies.into_iter().map(|c| c.join().unwrap_or_default()).collect();
    let probe = spec.expect.needs_probe().then(|| db::probe(&ctx.db, &ctx.target)).flatten();
    {
        let mut r = reports.lock().unwrap();
        r[qi].copies = attempts;
        if let Some((rows, keys, responses)) = probe {
            r[qi].rows_after = Some(rows);
            r[qi].keys_after = Some(keys);
            r[qi].responses_after = Some(responses);
        }
        r[qi].finished = Instant::now() < ctx.deadline;
    }
    if let Some(c) = &ctx.conductor {
        c.request_done(qi);
    }
    ctx.done.mark(&spec.id);
}

impl Ctx {
    /// The client waits `us` of wall-clock time; in a controlled round not at all: there the
    /// conductor's order is the round's time.
    fn pause(&self, us: u64) {
        if self.conductor.is_none() {
            sleep_until(Instant::now() + Duration::from_micros(us), self.deadline);
        }
    }
}

fn sleep_until(t: Instant, deadline: Instant) {
    let t = t.min(deadline);
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

impl Ctx {
    /// `--instrument`: the client's trace line of an attempt it wrote, written whole: when it
    /// began to connect, when its connect returned, when it woke after its gap to write and
    /// when the write returned (µs since the Unix epoch, the clock of the target's lines), the
    /// gap it slept, and the thread's id (to find it in a kernel trace).
    fn client_line(&self, attempt: &str, process: usize, times: [u128; 3], faults: &NetFaults) {
        let Some(trace) = &self.client_trace else { return };
        let [connect_us, connected_us, write_us] = times;
        let line = format!(
            "{{\"attempt\":\"{attempt}\",\"process\":{},\"tid\":{},\"connect_us\":{connect_us},\
             \"connected_us\":{connected_us},\"write_us\":{write_us},\"written_us\":{},\
             \"gap_us\":{}}}\n",
            process + 1,
            // SAFETY: gettid has no preconditions.
            unsafe { libc::gettid() },
            epoch_us(),
            faults.connect_gap_us
        );
        let _ = trace.lock().unwrap().write_all(line.as_bytes());
    }
}

/// Wall-clock µs since the Unix epoch: the clock of the targets' trace lines.
/// Now, in µs since the Unix epoch: the clock of the targets' trace lines.
pub(super) fn epoch_us() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros())
}

fn ms_since(ctx: &Ctx, t: Instant) -> f64 {
    t.saturating_duration_since(ctx.start).as_micros() as f64 / 1000.0
}

/// One copy: its attempts, with the sim's faults applied between idemsim's socket and the
/// server (a proxy in front of the process would act at the same place), retried as the
/// policy says.
fn run_copy(ctx: &Arc<Ctx>, qi: usize, copy: u32) -> Vec<AttemptOutcome> {
    let spec = &ctx.sim.requests[qi];
    let mut rng = StdRng::seed_from_u64(
        ctx.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((qi as u64) << 32) ^ u64::from(copy),
    );
    let (lo, hi) = spec.spread_us;
    if hi > 0 {
        ctx.pause(if hi > lo { rng.gen_range(lo..=hi) } else { lo });
    }
    let policy = &spec.policy;
    let first_sent = Instant::now();
    let mut out = Vec::new();
    for attempt in 1..=policy.max_attempts {
        if Instant::now() >= ctx.deadline {
            break;
        }
        let key = spec.key.as_ref().map(|k| {
            if policy.new_key_per_attempt && attempt > 1 {
                format!("{k}-{attempt}")
            } else {
                k.clone()
            }
        });
        let process = route(spec, copy, ctx.sim.world.processes, &mut rng);
        let outcome = attempt_once(ctx, spec, (qi, copy, attempt), key, process, &mut rng);
        let next = spec.after_attempt(attempt, outcome.status);
        out.push(outcome);
        match next {
            NextAttempt::Stop => break,
            NextAttempt::AtOnce => continue,
            NextAttempt::AfterBackoff => {}
        }
        let mut backoff = policy.backoff_before_us(attempt);
        if policy.jitter && backoff > 0 {
            backoff = rng.gen_range(backoff / 2..=backoff);
        }
        let since_first = first_sent.elapsed().as_micros() as u64;
        if policy.horizon_us.is_some_and(|h| since_first.saturating_add(backoff) > h) {
            break;
        }
        ctx.pause(backoff);
    }
    if let Some(c) = &ctx.conductor {
        c.leave(qi);
    }
    out
}

fn route(spec: &RequestSpec, copy: u32, processes: usize, rng: &mut StdRng) -> usize {
    match spec.route {
        Route::Fixed(p) => p.min(processes - 1),
        Route::Alternate => copy as usize % processes,
        Route::Random => rng.gen_range(0..processes),
    }
}

fn chance(rng: &mut StdRng, rate: f64) -> bool {
    rate > 0.0 && rng.r#gen::<f64>() < rate
}

fn draw(rng: &mut StdRng, (lo, hi): (u64, u64)) -> u64 {
    if hi > lo { rng.gen_range(lo..=hi) } else { lo }
}

/// The network faults one attempt draws (in the client's path, where a proxy would act).
struct NetFaults {
    drop_request: bool,
    drop_reply: bool,
    /// The request held this long before it is sent (the sim's `delay`, on the request).
    delay_us: Option<u64>,
    /// The reply held this long before the client reads it (the sim's `delay`, drawn again for
    /// the reply, as the simulated network draws it for every message).
    reply_delay_us: Option<u64>,
    resend_after_us: Option<u64>,
    /// The sim's client gap between a connection and its bytes (`[world] connect_gap_ms`).
    connect_gap_us: u64,
}

impl NetFaults {
    fn draw(sim: &Sim, rng: &mut StdRng) -> NetFaults {
        let f = &sim.faults;
        let connect_gap_us = draw(rng, sim.world.connect_gap_us);
        let (drop_request, drop_reply) = (chance(rng, f.request_drop), chance(rng, f.reply_drop));
        let delay_us = chance(rng, f.delay).then(|| draw(rng, f.delay_us));
        let resend_after_us = chance(rng, f.duplicate).then(|| draw(rng, f.duplicate_after_us));
        let reply_delay_us = chance(rng, f.delay).then(|| draw(rng, f.delay_us));
        NetFaults {
            drop_request,
            drop_reply,
            delay_us,
            reply_delay_us,
            resend_after_us,
            connect_gap_us,
        }
    }
}

/// One attempt over a real socket.
fn attempt_once(
    ctx: &Arc<Ctx>,
    spec: &RequestSpec,
    (qi, copy, attempt): (usize, u32, u32),
    key: Option<String>,
    process: usize,
    rng: &mut StdRng,
) -> AttemptOutcome {
    let attempt_id = format!("{qi}.{copy}.{attempt}");
    let req = super::mapping::request_for(&ctx.target, spec, attempt, key.as_deref(), &attempt_id);
    let bytes = wire::request_bytes(&req.method, &req.path, &req.headers, &req.body);
    let faults = NetFaults::draw(&ctx.sim, rng);
    let sent = Instant::now();
    let deadline =
        (sent + Duration::from_micros(spec.attempt_timeout_us(attempt))).min(ctx.deadline);
    let answer = exchange(ctx, (process, &attempt_id), &bytes, &faults, deadline);
    let marker = ctx.model.key.as_ref().map_or("Idempotent-Replayed", |k| k.replay_marker.as_str());
    AttemptOutcome {
        outcome: if answer.is_some() { Outcome::Reply } else { Outcome::TransportFailure },
        status: answer.as_ref().and_then(|m| m.status()),
        replayed: answer.as_ref().is_some_and(|m| m.header(marker).is_some()),
        row: answer.as_ref().and_then(|m| {
            super::mapping::reply_id(&ctx.target, spec, &String::from_utf8_lossy(&m.body))
        }),
        body: answer.map(|m| String::from_utf8_lossy(&m.body).into_owned()),
        key,
        sent_ms: ms_since(ctx, sent),
        done_ms: ms_since(ctx, Instant::now()),
        reason: None,
        exec: None,
    }
}

/// Send the request with its faults and read the answer; None is what the client sees as a
/// transport failure (a timeout, a reset, a refused connection, a lost reply).
fn exchange(
    ctx: &Ctx,
    (process, attempt_id): (usize, &str),
    bytes: &[u8],
    faults: &NetFaults,
    deadline: Instant,
) -> Option<wire::Message> {
    if let Some(d) = faults.delay_us {
        ctx.fired("delay");
        if ctx.conductor.is_none() {
            sleep_until(Instant::now() + Duration::from_micros(d), deadline);
        }
    }
    if faults.drop_request {
        ctx.fired("request_drop");
        if ctx.conductor.is_none() {
            sleep_until(deadline, deadline);
        }
        return None;
    }
    if let Some(c) = &ctx.conductor {
        return controlled_exchange(ctx, c, (process, attempt_id), bytes, faults);
    }
    let connect_us = epoch_us();
    let mut conn = connect(ctx, process)?;
    let connected_us = epoch_us();
    if faults.connect_gap_us > 0 {
        // The sim's client writes this long after its connection is established.
        sleep_until(Instant::now() + Duration::from_micros(faults.connect_gap_us), deadline);
    }
    let write_us = epoch_us();
    if !wire::send(&mut conn, bytes) {
        return None;
    }
    ctx.client_line(attempt_id, process, [connect_us, connected_us, write_us], faults);
    if let Some(after) = faults.resend_after_us {
        // A proxy's resend: the same bytes on a second connection; the client gets its reply.
        ctx.fired("duplicate");
        sleep_until(Instant::now() + Duration::from_micros(after), deadline);
        let mut second = connect(ctx, process)?;
        if !wire::send(&mut second, bytes) {
            return None;
        }
        let mut first = std::mem::replace(&mut conn, second);
        std::thread::spawn(move || {
            let _ = wire::read_message(&mut first, Instant::now() + Duration::from_secs(30));
        });
    }
    let msg = ctx.judged(process, wire::read_message(&mut conn, deadline))?;
    if faults.drop_reply {
        ctx.fired("reply_drop");
        sleep_until(deadline, deadline);
        return None;
    }
    if let Some(d) = faults.reply_delay_us {
        // Held on its way back: a reply that would come after the client's timeout is one
        // the client never got.
        ctx.fired("delay");
        let until = Instant::now() + Duration::from_micros(d);
        sleep_until(until, deadline);
        if until > deadline {
            return None;
        }
    }
    Some(msg)
}

/// [`exchange`] in a controlled round: the attempt waits at the conductor's gate, then its
/// answer is read on a thread of its own (the conductor's visible event) while the client
/// waits for it or for the conductor to choose its timeout.
fn controlled_exchange(
    ctx: &Ctx,
    c: &Arc<Conductor>,
    (process, attempt_id): (usize, &str),
    bytes: &[u8],
    faults: &NetFaults,
) -> Option<wire::Message> {
    if !c.send_gate(attempt_id) {
        return None;
    }
    match connect(ctx, process) {
        Some(mut conn) => match wire::send(&mut conn, bytes) {
            true => super::conduct::read_answer(c, attempt_id, conn, ctx.deadline),
            false => c.answered(attempt_id, Err(wire::ReadError::Closed)),
        },
        None => c.answered(attempt_id, Err(wire::ReadError::Timeout)),
    }
    let got = match c.await_answer(attempt_id) {
        Answer::Read(got) => got,
        Answer::Expired => {
            // The conductor chose the client's timeout: a fault of the round, not the server's.
            ctx.fired("client_timeout");
            return None;
        }
        Answer::Over => return None,
    };
    let msg = ctx.judged(process, got)?;
    if faults.drop_reply {
        ctx.fired("reply_drop");
        return None;
    }
    if faults.reply_delay_us.is_some() {
        // Counted as the request's delay is: when the answer reaches the client is the
        // conductor's choice here.
        ctx.fired("delay");
    }
    Some(msg)
}

impl Ctx {
    /// What a read got, as the client takes it: an HTTP answer, or None (a transport failure).
    /// An answer that is not HTTP, or a connection closed unasked, is recorded as the target's.
    fn judged(
        &self,
        process: usize,
        got: Result<wire::Message, wire::ReadError>,
    ) -> Option<wire::Message> {
        match got {
            Ok(m) if m.status().is_some() => Some(m),
            Ok(m) => {
                let why =
                    format!("process {} answered `{}`, not an HTTP answer", process + 1, m.start);
                self.garbage.lock().unwrap().get_or_insert(crate::text::printable(&why));
                None
            }
            Err(wire::ReadError::Garbage(why)) => {
                let why = format!("process {} answered {why}", process + 1);
                self.garbage.lock().unwrap().get_or_insert(crate::text::printable(&why));
                None
            }
            Err(wire::ReadError::Closed) => {
                *self.closed.lock().unwrap().entry(process).or_insert(0) += 1;
                None
            }
            Err(_) => None,
        }
    }
}

/// A connection to process `process`; None when it is down (crashed, restarting) or the
/// connection fails. A refusal by a process that is up and was not restarted meanwhile is the
/// target's fault (nothing listens on the port it gave), recorded for the round.
fn connect(ctx: &Ctx, process: usize) -> Option<std::net::TcpStream> {
    let generation = ctx.servers.generation(process);
    let port = ctx.servers.port(process)?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    match wire::connect(addr, Duration::from_secs(2)) {
        Ok(c) => Some(c),
        Err(e) => {
            let same = ctx.servers.port(process) == Some(port)
                && ctx.servers.generation(process) == generation;
            if e.kind() == std::io::ErrorKind::ConnectionRefused && same {
                let why = format!(
                    "process {} refused a connection on port {port}, the port it gave: nothing \
                     listens there",
                    process + 1
                );
                ctx.garbage.lock().unwrap().get_or_insert(why);
            }
            None
        }
    }
}

fn run_action(ctx: &Arc<Ctx>, ai: usize, collected: &Mutex<Vec<crate::report::Collected>>) {
    let a = &ctx.sim.actions[ai];
    if !ctx.done.wait(&a.after, ctx.deadline) {
        return;
    }
    sleep_until(Instant::now() + Duration::from_micros(a.delay_us), ctx.deadline);
    let at_us = ctx.start.elapsed().as_micros() as u64;
    match &a.kind {
        ActionKind::DeleteKeys => {
            let gone = db::delete_keys(&ctx.db, &ctx.target, at_us);
            collected.lock().unwrap().extend(gone);
            ctx.done.mark(&a.id);
        }
        ActionKind::HoldLock { until, for_us } => {
            let lock = db::Lock::take(&ctx.db);
            if let Some(u) = until {
                ctx.done.wait(std::slice::from_ref(u), ctx.deadline);
            }
            if let Some(us) = for_us {
                sleep_until(Instant::now() + Duration::from_micros(*us), ctx.deadline);
            }
            drop(lock);
            ctx.done.mark(&a.id);
        }
    }
}
