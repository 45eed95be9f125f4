//! idemsim's side of a real round's contract: the hook a target calls at an armed point (the
//! sim's injections answered, crashes done by killing the process) and the provider that
//! counts external effects. One thread per connection; every read bounded.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Deserialize;

use super::procs::Servers;
use super::wire;
use crate::report::EffectRecord;
use crate::scenario::{InjectAction, Sim};

/// What the hub saw in a round.
#[derive(Debug, Default)]
pub struct HubLog {
    /// Effects counted, in order.
    pub effects: Vec<EffectRecord>,
    /// Calls to the provider (equal to `effects`: the provider does not deduplicate).
    pub deliveries: u64,
    /// Crashes idemsim caused (process index, µs into the round).
    pub crashes: Vec<(usize, u64)>,
    /// Hook calls that could not be understood.
    pub bad_calls: Vec<String>,
    /// Hook calls answered (or ended by a crash), by point.
    pub reached: BTreeMap<String, u64>,
    /// Faults the hook fired: `crash` (the sim's crash rate, at a step) and `@point:action`
    /// (an `[[inject]]`), the names a simulated run gives them.
    pub faults: BTreeMap<String, u64>,
}

impl HubLog {
    fn fired(&mut self, name: String) {
        *self.faults.entry(name).or_insert(0) += 1;
    }
}

/// The hook and provider server of one round.
pub struct Hub {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    state: Arc<HubState>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct HubState {
    sim: Arc<Sim>,
    start: Instant,
    log: Mutex<HubLog>,
    fired: Mutex<Vec<u32>>,
    rng: Mutex<StdRng>,
    servers: Mutex<Option<Arc<Servers>>>,
    restarts: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// The round is over: no restart starts, and restart threads return. (A restarted
    /// process dies with the thread that started it, `PR_SET_PDEATHSIG`, so that thread
    /// lives until the round is over.)
    over: AtomicBool,
    /// A controlled round's conductor: every call waits there until released.
    conductor: Option<Arc<super::conduct::Conductor>>,
}

#[derive(Deserialize)]
struct HookCall {
    point: String,
    #[serde(default)]
    process: Option<u64>,
    #[serde(default)]
    intent: Option<String>,
    /// The `X-Attempt` of the request at the point (`request.copy.attempt`, 0-based request
    /// index in the sim): names the very request, where several share an intent.
    #[serde(default)]
    attempt: Option<String>,
    /// The step, at the `step` point.
    #[serde(default)]
    step: Option<String>,
}

#[derive(Deserialize)]
struct EffectCall {
    intent: Option<String>,
}

impl Hub {
    /// Listen on a free loopback port.
    pub fn start(
        sim: Arc<Sim>,
        seed: u64,
        start: Instant,
        conductor: Option<Arc<super::conduct::Conductor>>,
    ) -> std::io::Result<Hub> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(HubState {
            fired: Mutex::new(vec![0; sim.injects.len()]),
            sim,
            start,
            log: Mutex::new(HubLog::default()),
            rng: Mutex::new(StdRng::seed_from_u64(seed ^ 0x6875_6221)),
            servers: Mutex::new(None),
            restarts: Mutex::new(Vec::new()),
            over: AtomicBool::new(false),
            conductor,
        });
        let (st, sp) = (state.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if sp.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(conn) = conn {
                    let st = st.clone();
                    std::thread::spawn(move || serve(&st, conn));
                }
            }
        });
        Ok(Hub { addr, stop, state, thread: Some(thread) })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The servers the hook may crash and restart.
    pub fn attach(&self, servers: Arc<Servers>) {
        *self.state.servers.lock().unwrap() = Some(servers);
    }

    /// Stop serving and hand over what was seen.
    pub fn finish(mut self) -> HubLog {
        self.stop.store(true, Ordering::SeqCst);
        self.state.over.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        for r in std::mem::take(&mut *self.state.restarts.lock().unwrap()) {
            let _ = r.join();
        }
        *self.state.servers.lock().unwrap() = None;
        std::mem::take(&mut *self.state.log.lock().unwrap())
    }
}

fn serve(st: &Arc<HubState>, mut conn: TcpStream) {
    let _ = conn.set_nodelay(true);
    let Ok(msg) = wire::read_message(&mut conn, Instant::now() + Duration::from_secs(10)) else {
        return;
    };
    match msg.path() {
        Some("/effect") => {
            let call: Option<EffectCall> = serde_json::from_slice(&msg.body).ok();
            let intent = call.and_then(|c| c.intent).unwrap_or_default();
            let at_us = st.start.elapsed().as_micros() as u64;
            let mut log = st.log.lock().unwrap();
            log.effects.push(EffectRecord { intent, at_us, exec: None });
            log.deliveries += 1;
            drop(log);
            wire::send(&mut conn, &wire::json_answer(200, "{\"ok\":true}"));
        }
        Some("/point") => match serde_json::from_slice::<HookCall>(&msg.body) {
            Ok(call) => {
                let point = crate::text::printable(&call.point);
                if let (Some(c), Some(attempt)) = (&st.conductor, &call.attempt) {
                    let at = match &call.step {
                        Some(step) => format!("{point} {}", crate::text::printable(step)),
                        None => point.clone(),
                    };
                    c.hold(attempt, &at);
                }
                *st.log.lock().unwrap().reached.entry(point).or_insert(0) += 1;
                if let Some(answer) = st.answer(&call) {
                    wire::send(&mut conn, &wire::json_answer(200, &answer));
                }
            }
            Err(e) => {
                st.log.lock().unwrap().bad_calls.push(format!("a hook call that is not JSON: {e}"));
                wire::send(&mut conn, &wire::json_answer(400, "{\"error\":\"bad hook call\"}"));
            }
        },
        _ => {
            wire::send(&mut conn, &wire::json_answer(404, "{\"error\":\"no such endpoint\"}"));
        }
    }
}

impl HubState {
    /// The answer to a hook call, or None when the process was killed (no answer).
    fn answer(self: &Arc<Self>, call: &HookCall) -> Option<String> {
        let process = call.process.and_then(|p| usize::try_from(p).ok()).unwrap_or(1).max(1) - 1;
        if call.point == "step" {
            let crash = self.sim.faults.crash;
            if crash > 0.0 && self.rng.lock().unwrap().r#gen::<f64>() < crash {
                self.log.lock().unwrap().fired("crash".into());
                self.crash(process, self.sim.faults.restart_us);
                return None;
            }
            return Some("{\"then\":\"continue\",\"effect\":false}".into());
        }
        let (mut effect, mut then, mut wait_us) = (false, "continue", 0u64);
        for (i, inj) in self.sim.injects.iter().enumerate() {
            if inj.point != call.point || !self.applies(inj, call) || !self.fire(i) {
                continue;
            }
            self.log.lock().unwrap().fired(format!("@{}:{}", inj.point, inj.action.name()));
            match &inj.action {
                InjectAction::Effect { .. } => effect = true,
                InjectAction::Fail => then = "fail",
                InjectAction::DropReply if then != "fail" => then = "drop",
                InjectAction::Stall { us } if then == "continue" => {
                    then = "stall";
                    wait_us = *us;
                }
                InjectAction::Pause { us } => std::thread::sleep(Duration::from_micros(*us)),
                InjectAction::Crash { restart_us } => {
                    self.crash(process, *restart_us);
                    return None;
                }
                _ => {}
            }
        }
        let stall_ms = wait_us as f64 / 1000.0;
        Some(format!("{{\"then\":\"{then}\",\"effect\":{effect},\"stall_ms\":{stall_ms}}}"))
    }

    fn applies(&self, inj: &crate::scenario::Inject, call: &HookCall) -> bool {
        let Some(req) = &inj.request else { return true };
        // The very request, by its attempt id; a target that does not say it is matched by
        // intent (every request of that intent).
        let index =
            call.attempt.as_deref().and_then(|a| a.split('.').next()?.parse::<usize>().ok());
        if let Some(q) = index.and_then(|i| self.sim.requests.get(i)) {
            return q.id == *req || q.group == *req;
        }
        let intent = call.intent.as_deref().unwrap_or_default();
        self.sim.requests.iter().any(|q| q.intent == intent && (q.id == *req || q.group == *req))
    }

    /// Count a firing of injection `i` if its `times` and `rate` allow it.
    fn fire(&self, i: usize) -> bool {
        let inj = &self.sim.injects[i];
        let mut fired = self.fired.lock().unwrap();
        if inj.times.is_some_and(|t| fired[i] >= t) {
            return false;
        }
        if inj.rate < 1.0 && self.rng.lock().unwrap().r#gen::<f64>() >= inj.rate {
            return false;
        }
        fired[i] += 1;
        true
    }

    /// Kill process `i` now and start it again after `restart_us`.
    fn crash(self: &Arc<Self>, i: usize, restart_us: u64) {
        let Some(servers) = self.servers.lock().unwrap().clone() else { return };
        servers.kill(i);
        self.log.lock().unwrap().crashes.push((i, self.start.elapsed().as_micros() as u64));
        let st = self.clone();
        let t = std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_micros(restart_us);
            while Instant::now() < until {
                if st.over.load(Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(1).min(until - Instant::now()));
            }
            let servers = st.servers.lock().unwrap().clone();
            if let Some(s) = servers
                && let Err(e) = s.start_one(i)
            {
                st.log.lock().unwrap().bad_calls.push(format!("restart failed: {}", e.0));
            }
            while !st.over.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        self.restarts.lock().unwrap().push(t);
    }
}
