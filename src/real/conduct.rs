//! Controlled real rounds (`real --controlled`): idemsim decides the order of what a real
//! server sees, the way the simulated world's scheduler does, instead of leaving it to the
//! machine.
//!
//! Every attempt is a *flow*. Its client waits at a gate before it connects and writes; every
//! hook call its server makes (the target's steps, armed for a controlled round, and the sim's
//! points) waits in the hub. Those waits are the enabled events: `send A`, `resume A at
//! POINT`, and `expire A` where the sim gives the attempt a timeout of its own. The conductor
//! takes one decision at a time, chosen from the round's seed by a strategy ([`Order`]), and
//! before the next it waits until the released flow's next visible event (its next hook call,
//! or its answer read) and until every client has reached a gate or ended. A released flow that
//! shows nothing within the quiet bound has *escaped* control: the round says so, and goes on
//! with the events it has. Between two events the server runs alone, so a server whose
//! only concurrency is its hook points (one event loop; threads that only meet at them)
//! replays from the seed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::wire;
use crate::model::Model;
use crate::scenario::{InjectAction, Sim};

/// How a controlled round chooses among the enabled events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Order {
    /// Uniformly at random at every decision (a random walk over schedules).
    Random,
    /// Probabilistic concurrency testing (Burckhardt et al., ASPLOS 2010) of depth `depth`:
    /// each flow gets a random priority, the highest enabled one runs, and at `depth − 1`
    /// random decisions the running flow drops to the lowest priority.
    Pct {
        /// The bug depth d.
        depth: u32,
    },
    /// Swarm testing (Groce et al., ISSTA 2012) over the kinds of event: each round turns
    /// sends, resumes and timeouts on or off (at least one on), and chooses uniformly among
    /// the enabled events of the kinds that are on, among all when none is enabled. A round
    /// with resumes off sends every copy before any runs on; one with sends off runs each
    /// request to its end.
    Swarm,
    /// A schedule given event by event (`--schedule`, or a shrink's candidate): at every
    /// decision its next event when enabled, else [`default_choice`].
    Schedule(std::sync::Arc<Vec<String>>),
}

impl Order {
    /// Parse `--explore`'s value for a controlled round.
    pub fn parse(s: &str) -> Result<Order, String> {
        match crate::explore::Strategy::parse(s) {
            _ if s == "random" => Ok(Order::Random),
            Ok(crate::explore::Strategy::Swarm) => Ok(Order::Swarm),
            Ok(crate::explore::Strategy::Pct { depth }) => Ok(Order::Pct { depth }),
            _ => Err(format!(
                "--explore {} with --controlled: a controlled round chooses an order, not \
                 timings or faults; expected random, swarm, pct or pct:d=N (N from 1 to 8)",
                crate::text::shown(s)
            )),
        }
    }

    /// As the command line spells it.
    pub fn name(&self) -> String {
        match self {
            Order::Random => "random".into(),
            Order::Pct { depth } => format!("pct:d={depth}"),
            Order::Schedule(_) => "schedule".into(),
            Order::Swarm => "swarm".into(),
        }
    }
}

/// What a flow is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Flow {
    /// Its client waits to send it.
    Unsent,
    /// Released; its next visible event is awaited since then.
    Moving(Instant),
    /// Its server waits at a hook point: the point, and the hold's ticket.
    Held(String, u64),
    /// Released, and nothing visible came within the quiet bound.
    Quiet,
    /// Answered, closed or failed: nothing more comes from it.
    Over,
}

/// How an attempt's exchange ended, as its client sees it.
pub enum Answer {
    /// What the reader got.
    Read(Result<wire::Message, wire::ReadError>),
    /// The conductor chose its timeout.
    Expired,
    /// The round ended first.
    Over,
}

/// What a controlled round did, for its report.
#[derive(Debug, Clone, Default)]
pub struct ControlLog {
    /// The events released, in order.
    pub schedule: Vec<String>,
    /// Flows that showed nothing within the quiet bound after a release: the event released.
    pub escaped: Vec<String>,
    /// The slowest wait from a release to its flow's next visible event (µs).
    pub slowest_us: u64,
    /// The round ended on its bound with events still held.
    pub cut: bool,
    /// The steps where the conductor held the server at least once.
    pub held_at: BTreeSet<String>,
    /// The flows whose client the conductor made give up (`expire A`).
    pub expired: BTreeSet<String>,
    /// A given schedule's events never taken: the first of them was never enabled.
    pub unplayed: Vec<String>,
    /// When each event of `schedule` was released (µs since the Unix epoch, the clock of the
    /// target's trace lines).
    pub released_us: Vec<u64>,
}

struct State {
    flows: BTreeMap<String, Flow>,
    /// Clients between two events (they always reach a gate or end, without waiting on the
    /// server), plus requests whose copies ended and which are about to be marked done.
    busy: usize,
    /// Copies of each request still running.
    copies_left: Vec<u32>,
    /// Requests started (their copies counted busy) and done.
    started: Vec<bool>,
    done: BTreeSet<String>,
    /// Flows whose client chose to stop waiting, and answers read for waiting clients.
    expired: BTreeSet<String>,
    answers: BTreeMap<String, Result<wire::Message, wire::ReadError>>,
    released: BTreeSet<u64>,
    next_ticket: u64,
    /// Held dependency replies by proxy connection, in arrival order: only the first of each
    /// is enabled (a client pairs replies with its commands by position).
    dependency: BTreeMap<u64, std::collections::VecDeque<u64>>,
    /// No decision before then: after an answer, the server's work that follows it (a
    /// response stored once sent) reaches a proxy first.
    settle_until: Option<Instant>,
    log: ControlLog,
    over: bool,
}

/// The conductor of one controlled round.
pub struct Conductor {
    st: Mutex<State>,
    changed: Condvar,
    quiet: Duration,
    /// Requests' ids and `after` lists, copies, and the attempts that may expire.
    requests: Vec<(String, Vec<String>, u32)>,
    expirable: Vec<bool>,
    chooser: Mutex<Chooser>,
    /// The steps where the server's runtime lets another request run: the conductor holds
    /// the server there (every other hook call passes).
    yields: BTreeSet<String>,
    /// How long after an answer the conductor waits before its next decision (zero without a
    /// proxied dependency).
    settle: Duration,
}

/// After an answer or a held dependency reply, how long a round with a proxied dependency
/// waits before its next decision: for the server's work that follows an answer
/// (express-idempotency stores the response once it is sent) to reach the proxy, so that its
/// command is not taken for the next released flow's; and for an answer sent in the same run
/// as a command, so that the command's reply is not taken for one of the flow's events.
pub const SETTLE: Duration = Duration::from_millis(5);

impl Conductor {
    /// A conductor for `sim`'s round `seed`, choosing by `order`, with the quiet bound `quiet`.
    /// `model`: the design the target runs, whose runtime says where requests interleave;
    /// `proxied`: its key store's replies come through a proxy ([`super::proxy`]).
    pub fn new(
        sim: &Sim,
        model: &Model,
        seed: u64,
        (order, quiet): (&Order, Duration),
        proxied: bool,
    ) -> Conductor {
        let yields = yield_steps(model, proxied);
        let steps = yields.len() + if proxied { proxied_steps(model) } else { 0 };
        let requests: Vec<(String, Vec<String>, u32)> =
            sim.requests.iter().map(|q| (q.id.clone(), q.after.clone(), q.copies)).collect();
        let default_timeout = sim.world.client_timeout_us;
        let expirable = sim
            .requests
            .iter()
            .map(|q| q.timeout_us < default_timeout || q.policy.abandon_first_us.is_some())
            .collect();
        // First attempts: a retry is the exception, and a longer estimate would put PCT's change
        // points past the round's end. A round's decisions when nothing expires or retries:
        // each send, and its holds.
        let attempts: u64 = sim.requests.iter().map(|q| u64::from(q.copies)).sum();
        let length = attempts.saturating_mul(steps as u64 + 1).max(1);
        let mut st = State {
            flows: BTreeMap::new(),
            busy: 0,
            copies_left: requests.iter().map(|r| r.2).collect(),
            started: vec![false; requests.len()],
            done: BTreeSet::new(),
            expired: BTreeSet::new(),
            answers: BTreeMap::new(),
            released: BTreeSet::new(),
            next_ticket: 0,
            dependency: BTreeMap::new(),
            settle_until: None,
            log: ControlLog::default(),
            over: false,
        };
        start_ready(&requests, &mut st);
        Conductor {
            st: Mutex::new(st),
            changed: Condvar::new(),
            quiet,
            requests,
            expirable,
            chooser: Mutex::new(Chooser::new(order, seed, length)),
            yields,
            settle: if proxied { SETTLE } else { Duration::ZERO },
        }
    }

    /// Round `round`'s conductor when it is controlled.
    pub fn for_round(
        sim: &Sim,
        model: &Model,
        round: u64,
        control: Option<&Control>,
        proxied: bool,
    ) -> Option<std::sync::Arc<Conductor>> {
        let c = control?;
        Some(std::sync::Arc::new(Conductor::new(sim, model, round, (&c.order, c.quiet), proxied)))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A client is about to send attempt `id`: wait until the conductor releases it. False
    /// when the round is over.
    pub fn send_gate(&self, id: &str) -> bool {
        let mut st = self.lock();
        st.flows.insert(id.to_string(), Flow::Unsent);
        st.busy = st.busy.saturating_sub(1);
        self.changed.notify_all();
        while st.flows.get(id) == Some(&Flow::Unsent) && !st.over {
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        !st.over
    }

    /// The server of flow `id` called the hook at `point`: hold it until released. A call
    /// from no flow of the round (a warm-up request) passes.
    pub fn hold(&self, id: &str, point: &str) {
        if !self.yields.contains(point) {
            return;
        }
        let mut st = self.lock();
        let Some(flow) = st.flows.get(id).cloned() else { return };
        let ticket = self.held(&mut st, id, &flow, point);
        while !st.released.remove(&ticket) && !st.over {
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Flow `id` is held at `point` (it showed its next event): its ticket. A dependency reply
    /// the flow was held at goes on (nothing else would release it).
    fn held(&self, st: &mut State, id: &str, flow: &Flow, point: &str) -> u64 {
        if let Flow::Held(_, old) = flow {
            pass_dependency(st, *old);
        }
        st.log.held_at.insert(point.to_string());
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        self.seen(st, flow);
        st.flows.insert(id.to_string(), Flow::Held(point.to_string(), ticket));
        self.changed.notify_all();
        ticket
    }

    /// The flow a command a proxy sees now belongs to: the one released last, while it is
    /// still moving (only one moves at a time). None: the command passes.
    pub fn command_owner(&self) -> Option<String> {
        let st = self.lock();
        let last = st.log.schedule.last()?;
        let id = flow_of(last)?;
        matches!(st.flows.get(id), Some(Flow::Moving(_))).then(|| id.to_string())
    }

    /// A reply to flow `id`'s command reached the proxy on connection `conn`: the flow's
    /// next event. Its ticket, for [`Conductor::await_release`]; None (it passes) when the
    /// flow no longer moves (it escaped control, or the round is over).
    pub fn dependency_reply(&self, id: &str, conn: u64, point: &str) -> Option<u64> {
        let mut st = self.lock();
        let flow = st.flows.get(id).cloned()?;
        if !matches!(flow, Flow::Moving(_)) || st.over {
            return None;
        }
        let ticket = self.held(&mut st, id, &flow, point);
        st.dependency.entry(conn).or_default().push_back(ticket);
        // The server may have answered the flow in the same run that sent the command: its
        // answer, when it comes, ends the hold ([`Conductor::answered`]) before any decision.
        st.settle_until = Some(Instant::now() + self.settle);
        Some(ticket)
    }

    /// Wait until `ticket` is released (or the round is over).
    pub fn await_release(&self, ticket: u64) {
        let mut st = self.lock();
        while !st.released.remove(&ticket) && !st.over {
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Flow `id`'s exchange ended (`got`): the reader's visible event. Its client, when still
    /// waiting, takes the answer and is busy until its next gate.
    pub fn answered(&self, id: &str, got: Result<wire::Message, wire::ReadError>) {
        let mut st = self.lock();
        if let Some(flow) = st.flows.get(id).cloned() {
            self.seen(&mut st, &flow);
            if let Flow::Held(_, ticket) = flow {
                // A dependency reply held for a flow already answered: the server's work after
                // its answer (a response stored once sent), not one of the flow's events.
                pass_dependency(&mut st, ticket);
            }
        }
        st.flows.insert(id.to_string(), Flow::Over);
        if !self.settle.is_zero() {
            st.settle_until = Some(Instant::now() + self.settle);
        }
        if !st.expired.contains(id) {
            st.answers.insert(id.to_string(), got);
            st.busy += 1;
        }
        self.changed.notify_all();
    }

    /// Wait for flow `id`'s answer, or for the conductor to choose its timeout.
    pub fn await_answer(&self, id: &str) -> Answer {
        let mut st = self.lock();
        loop {
            if let Some(got) = st.answers.remove(id) {
                return Answer::Read(got);
            }
            if st.expired.contains(id) {
                return Answer::Expired;
            }
            if st.over {
                return Answer::Over;
            }
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// A copy of request `qi` ended.
    pub fn leave(&self, qi: usize) {
        let mut st = self.lock();
        st.busy = st.busy.saturating_sub(1);
        if let Some(left) = st.copies_left.get_mut(qi) {
            *left = left.saturating_sub(1);
            if *left == 0 {
                st.busy += 1; // the request itself, until `request_done`
            }
        }
        self.changed.notify_all();
    }

    /// Request `qi` is done (its copies ended; its probe read): requests waiting on it start.
    pub fn request_done(&self, qi: usize) {
        let mut st = self.lock();
        st.busy = st.busy.saturating_sub(1);
        st.done.insert(self.requests[qi].0.clone());
        start_ready(&self.requests, &mut st);
        self.changed.notify_all();
    }

    /// The round is over (its bound, or its traffic ended): every wait returns.
    pub fn finish(&self) -> ControlLog {
        let mut st = self.lock();
        st.over = true;
        self.changed.notify_all();
        let ch = self.chooser.lock().unwrap_or_else(|e| e.into_inner());
        if let Order::Schedule(list) = &ch.order {
            st.log.unplayed = list.get(ch.next..).unwrap_or_default().to_vec();
        }
        std::mem::take(&mut st.log)
    }

    /// The latency of a release whose flow showed its next event now.
    fn seen(&self, st: &mut State, flow: &Flow) {
        if let Flow::Moving(since) = flow {
            let us = since.elapsed().as_micros() as u64;
            st.log.slowest_us = st.log.slowest_us.max(us);
        }
    }

    /// Take decisions until every request is done or `deadline` passes.
    pub fn conduct(&self, deadline: Instant) {
        let mut st = self.lock();
        loop {
            let now = Instant::now();
            if now >= deadline || st.over {
                st.log.cut = !st.over && st.flows.values().any(|f| matches!(f, Flow::Held(..)));
                st.over = true;
                self.changed.notify_all();
                return;
            }
            let mut moving = false;
            let escaped: Vec<String> = st
                .flows
                .iter()
                .filter_map(|(id, f)| match f {
                    Flow::Moving(since) if now.duration_since(*since) >= self.quiet => {
                        Some(id.clone())
                    }
                    Flow::Moving(_) => {
                        moving = true;
                        None
                    }
                    _ => None,
                })
                .collect();
            for id in escaped {
                let last = st.log.schedule.iter().rev().find(|e| flow_of(e) == Some(&id)).cloned();
                st.log.escaped.push(last.unwrap_or(id.clone()));
                st.flows.insert(id, Flow::Quiet);
            }
            let settling = st.settle_until.is_some_and(|t| now < t);
            let options =
                if st.busy == 0 && !moving && !settling { self.enabled(&st) } else { Vec::new() };
            if options.is_empty() {
                if st.busy == 0 && !moving && st.done.len() == self.requests.len() {
                    st.over = true;
                    self.changed.notify_all();
                    return;
                }
                let wait = self.quiet.min(Duration::from_millis(5)).min(deadline - now);
                st = self.changed.wait_timeout(st, wait).unwrap_or_else(|e| e.into_inner()).0;
                continue;
            }
            let i = self.chooser.lock().unwrap_or_else(|e| e.into_inner()).pick(&options);
            let (name, ev) = options[i].clone();
            st.log.schedule.push(name);
            st.log.released_us.push(super::round::epoch_us() as u64);
            match ev {
                Event::Send(id) => {
                    st.flows.insert(id, Flow::Moving(Instant::now()));
                }
                Event::Resume(id, ticket) => {
                    st.released.insert(ticket);
                    for q in st.dependency.values_mut() {
                        if q.front() == Some(&ticket) {
                            q.pop_front();
                        }
                    }
                    st.flows.insert(id, Flow::Moving(Instant::now()));
                }
                Event::Expire(id) => {
                    st.log.expired.insert(id.clone());
                    st.expired.insert(id);
                    st.busy += 1; // its client goes on to its next attempt
                }
            }
            self.changed.notify_all();
        }
    }

    /// The enabled events, by name (their order is the name's, so a choice's index replays).
    fn enabled(&self, st: &State) -> Vec<(String, Event)> {
        let mut out = Vec::new();
        for (id, f) in &st.flows {
            match f {
                Flow::Unsent => out.push((format!("send {id}"), Event::Send(id.clone()))),
                Flow::Held(point, ticket) if !queued(st, *ticket) => out
                    .push((format!("resume {id} at {point}"), Event::Resume(id.clone(), *ticket))),
                _ => {}
            }
            let waiting = matches!(f, Flow::Held(..) | Flow::Quiet) && !st.expired.contains(id);
            if waiting && self.may_expire(id) {
                out.push((format!("expire {id}"), Event::Expire(id.clone())));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    fn may_expire(&self, id: &str) -> bool {
        let qi = id.split('.').next().and_then(|q| q.parse::<usize>().ok());
        qi.and_then(|q| self.expirable.get(q)).copied().unwrap_or(false)
    }
}

/// Let held dependency reply `ticket` go on without a decision (no-op for a hook's ticket).
fn pass_dependency(st: &mut State, ticket: u64) {
    if st.dependency.values().any(|q| q.contains(&ticket)) {
        st.released.insert(ticket);
        st.dependency.values_mut().for_each(|q| q.retain(|t| *t != ticket));
    }
}

/// Whether held dependency reply `ticket` waits behind another on its connection.
fn queued(st: &State, ticket: u64) -> bool {
    st.dependency.values().any(|q| q.contains(&ticket) && q.front() != Some(&ticket))
}

/// The steps (as the hook names them, `step NAME`) where the model's runtime lets another
/// request run and the hook must hold the server: where a controlled round holds it. With
/// `proxied`, a key store in a cache is held at its replies instead ([`super::proxy`]).
pub fn yield_steps(model: &Model, proxied: bool) -> BTreeSet<String> {
    model
        .program
        .iter()
        .filter_map(|s| crate::model::STEPS.iter().find(|k| k.step == *s))
        .filter(|k| k.named.is_none() && yields_at(model, k))
        .filter(|k| !(proxied && cache_step(model, k)))
        .map(|k| format!("step {}", k.name))
        .collect()
}

/// How many of the model's steps are a round trip to a cache key store (each a reply a proxy
/// holds).
fn proxied_steps(model: &Model) -> usize {
    let steps =
        model.program.iter().filter_map(|s| crate::model::STEPS.iter().find(|k| k.step == *s));
    steps.filter(|k| cache_step(model, k)).count()
}

/// A step of a key store that lives in a cache (Redis): a network round trip.
fn cache_step(model: &Model, k: &crate::model::StepKind) -> bool {
    use crate::model::{KeyStore, Step};
    let cache = model.key.as_ref().is_some_and(|key| key.store == KeyStore::Cache);
    cache && matches!(k.step, Step::Lookup | Step::Claim | Step::SaveResponse)
}

/// Whether the model's runtime lets another request run at step `k`: a thread anywhere (the
/// scheduler may preempt it; prefork processes run side by side); an event loop at an
/// `await` and at network I/O (`effect`, a key store in a cache such as Redis), and before
/// every statement with an asynchronous driver. Holding a Node.js server anywhere else would run requests side by side where its
/// synchronous code never lets them.
fn yields_at(model: &Model, k: &crate::model::StepKind) -> bool {
    use crate::model::{Awaits, Runtime, Step};
    match &model.runtime {
        Runtime::Threads(_) => true,
        Runtime::EventLoop(_) => {
            matches!(k.step, Step::Await | Step::Effect)
                || (k.statement && model.driver.awaits == Awaits::EveryStatement)
                || cache_step(model, k)
        }
    }
}

/// The flow (attempt id) an event's name is about: `send A`, `resume A at POINT`, `expire A`.
fn flow_of(event: &str) -> Option<&str> {
    event.split(' ').nth(1)
}

/// Count the copies of every request whose `after` list is done and that has not started.
fn start_ready(requests: &[(String, Vec<String>, u32)], st: &mut State) {
    for (i, (_, after, copies)) in requests.iter().enumerate() {
        if !st.started[i] && after.iter().all(|a| st.done.contains(a)) {
            st.started[i] = true;
            st.busy += *copies as usize;
            if *copies == 0 {
                st.busy += 1;
            }
        }
    }
}

/// An enabled event.
#[derive(Debug, Clone)]
pub enum Event {
    /// A client's attempt may connect and write.
    Send(String),
    /// A held hook call or dependency reply may go on (its ticket).
    Resume(String, u64),
    /// A client may give up waiting.
    Expire(String),
}

impl Event {
    /// The flow (attempt id) the event belongs to.
    fn flow(&self) -> &str {
        match self {
            Event::Send(id) | Event::Resume(id, _) | Event::Expire(id) => id,
        }
    }
}

/// How often a decision where a client's timeout could fire lets it fire, when a send or a
/// resume could happen instead. A timeout is a rare event on a real server (answers take
/// milliseconds; the sims' timeouts are seconds), yet a uniform choice would take it at half
/// of the decisions where a request is held, and most rounds would be clients giving up: one
/// decision in eight explores it and leaves the rest to the requests' interleaving.
pub const EXPIRY_SHARE: f64 = 0.125;

/// The strategy's state over a round.
struct Chooser {
    order: Order,
    rng: StdRng,
    /// PCT: each flow's priority (higher runs first), the change points, decisions taken.
    priority: BTreeMap<String, u64>,
    changes: Vec<u64>,
    step: u64,
    /// A given schedule: the index of its next event.
    next: usize,
    /// The flow of the event chosen last.
    last: Option<String>,
    /// Swarm: whether sends, resumes and timeouts are on this round.
    kinds: [bool; 3],
}

/// The choice a given schedule leaves to idemsim: go on with the flow that moved last (a
/// request runs on until the schedule says otherwise), else the first send or resume by name;
/// a client's timeout only when nothing else can happen. Serial, without preemption: a
/// schedule's events are the points where it departs from this.
pub fn default_choice(options: &[(String, Event)], last: Option<&str>) -> usize {
    let progress = |i: &usize| !matches!(options[*i].1, Event::Expire(_));
    let mut all = 0..options.len();
    let same = |i: &usize| progress(i) && Some(options[*i].1.flow()) == last;
    (0..options.len()).find(same).or_else(|| all.find(progress)).unwrap_or(0)
}

impl Chooser {
    fn new(order: &Order, seed: u64, length: u64) -> Chooser {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x636f_6e64_7563_7400);
        let changes = match order {
            Order::Pct { depth } => {
                (1..*depth).map(|_| rng.gen_range(0..length)).collect::<Vec<u64>>()
            }
            Order::Random | Order::Schedule(_) | Order::Swarm => Vec::new(),
        };
        let mut kinds = [true; 3];
        if *order == Order::Swarm {
            loop {
                kinds = [rng.gen_bool(0.5), rng.gen_bool(0.5), rng.gen_bool(0.5)];
                if kinds.contains(&true) {
                    break;
                }
            }
        }
        let (priority, step, next) = (BTreeMap::new(), 0, 0);
        Chooser { order: order.clone(), rng, priority, changes, step, next, last: None, kinds }
    }

    fn pick(&mut self, options: &[(String, Event)]) -> usize {
        let i = self.choose(options);
        self.last = Some(options[i].1.flow().to_string());
        i
    }

    fn choose(&mut self, options: &[(String, Event)]) -> usize {
        let step = self.step;
        self.step += 1;
        match &self.order {
            Order::Schedule(list) => {
                let want = list.get(self.next);
                match want.and_then(|w| options.iter().position(|(n, _)| n == w)) {
                    Some(i) => {
                        self.next += 1;
                        i
                    }
                    None => default_choice(options, self.last.as_deref()),
                }
            }
            Order::Random => {
                let all: Vec<usize> = (0..options.len()).collect();
                self.progress_or_expiry(options, &all)
            }
            Order::Swarm => {
                let kind = |e: &Event| match e {
                    Event::Send(_) => 0,
                    Event::Resume(..) => 1,
                    Event::Expire(_) => 2,
                };
                let on: Vec<usize> =
                    (0..options.len()).filter(|&i| self.kinds[kind(&options[i].1)]).collect();
                match on.len() {
                    0 => {
                        let all: Vec<usize> = (0..options.len()).collect();
                        self.progress_or_expiry(options, &all)
                    }
                    n => on[self.rng.gen_range(0..n)],
                }
            }
            &Order::Pct { depth } => {
                for (_, ev) in options {
                    if !self.priority.contains_key(ev.flow()) {
                        // Initial priorities sit above the change points' (0..depth).
                        let p = self.rng.gen_range(u64::from(depth)..u64::MAX);
                        self.priority.insert(ev.flow().to_string(), p);
                    }
                }
                let best_flow = |prio: &BTreeMap<String, u64>| {
                    let i = (0..options.len())
                        .max_by_key(|&i| (prio[options[i].1.flow()], std::cmp::Reverse(i)))
                        .unwrap_or(0);
                    options[i].1.flow().to_string()
                };
                let mut flow = best_flow(&self.priority);
                if let Some(k) = self.changes.iter().position(|&c| c == step) {
                    // A change point: the flow about to run drops below every other.
                    self.priority.insert(flow, k as u64);
                    flow = best_flow(&self.priority);
                }
                // The flow's own events: its resume, or (rarely) its expiry.
                let mine: Vec<usize> =
                    (0..options.len()).filter(|&i| options[i].1.flow() == flow).collect();
                self.progress_or_expiry(options, &mine)
            }
        }
    }

    /// One of `among` (indices into `options`): an expiry with probability [`EXPIRY_SHARE`]
    /// when something else could happen, every time when nothing else can; otherwise
    /// uniformly among the sends and resumes.
    fn progress_or_expiry(&mut self, options: &[(String, Event)], among: &[usize]) -> usize {
        let (expiries, progress): (Vec<usize>, Vec<usize>) =
            among.iter().partition(|&&i| matches!(options[i].1, Event::Expire(_)));
        let expire =
            progress.is_empty() || (!expiries.is_empty() && self.rng.gen_bool(EXPIRY_SHARE));
        let from = if expire { &expiries } else { &progress };
        from[self.rng.gen_range(0..from.len())]
    }
}

/// A controlled round's options.
#[derive(Debug, Clone)]
pub struct Control {
    /// The strategy.
    pub order: Order,
    /// How long a released flow may show nothing before it has escaped control.
    pub quiet: Duration,
    /// `--schedule`: the file the order was read from, for the report.
    pub schedule_file: Option<String>,
}

/// The default quiet bound (ms): see docs/controlled.md for what a round measured against it.
pub const DEFAULT_QUIET_MS: u64 = 500;

/// Why a controlled round cannot play `sim` (None: it can): what would happen outside the
/// conductor's order.
pub fn uncontrollable(sim: &Sim) -> Option<String> {
    let mut why = Vec::new();
    if !sim.actions.is_empty() {
        why.push("[[action]] (they run on wall-clock delays)");
    }
    if sim.faults.duplicate > 0.0 {
        why.push("duplicate (a proxy's resend shares its attempt's id)");
    }
    let crashes = sim.injects.iter().any(|i| matches!(i.action, InjectAction::Crash { .. }));
    if sim.faults.crash > 0.0 || crashes {
        why.push("crashes (a restart takes wall-clock time)");
    }
    (!why.is_empty()).then(|| format!("controlled rounds do not order {} yet", why.join(", ")))
}

/// Read flow `id`'s answer on its own thread, and hand it to the conductor: the visible event
/// the conductor waits for, even after the client stopped waiting.
pub fn read_answer(
    conductor: &std::sync::Arc<Conductor>,
    id: &str,
    mut conn: std::net::TcpStream,
    deadline: Instant,
) {
    let (c, id) = (conductor.clone(), id.to_string());
    std::thread::spawn(move || {
        let got = wire::read_message(&mut conn, deadline);
        c.answered(&id, got);
    });
}

#[cfg(test)]
mod tests {
    use super::flow_of;

    #[test]
    fn an_event_names_its_own_flow_not_one_whose_id_ends_the_same() {
        assert_eq!(flow_of("send 10.1.1"), Some("10.1.1"));
        assert_ne!(flow_of("send 10.1.1"), Some("0.1.1"));
        assert_eq!(flow_of("resume 0.1.1 at step await"), Some("0.1.1"));
        assert_eq!(flow_of("expire 2.0.3"), Some("2.0.3"));
    }
}
