//! `calibrate`: measure, against a real target on the machine at hand, the times a sim's
//! `[world.event_loop]` draws, from the target's instrumentation lines (`IDEMSIM_TRACE`,
//! `docs/targets.md`), and write them as a profile a sim can name (`profile = "…"`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;

use crate::model::Dist;

/// One instrumentation line of a target.
#[derive(Debug, Deserialize)]
struct Line {
    t_us: f64,
    #[serde(default)]
    process: Option<u64>,
    #[serde(default)]
    attempt: Option<String>,
    ev: String,
    #[serde(default)]
    accepted_us: Option<f64>,
}

/// What one round's instrumentation shows (µs).
#[derive(Debug, Default)]
pub struct RoundTimes {
    /// The first connection: its accept to the next accept.
    pub first_accept: Option<f64>,
    /// Later accept-to-accept gaps.
    pub accepts: Vec<f64>,
    /// The first request: read to lookup.
    pub first_handler: Option<f64>,
    /// Later requests: read to lookup.
    pub handlers: Vec<f64>,
    /// An autocommitted INSERT (or a COMMIT) that wrote: the statement and its fsync.
    pub commits: Vec<f64>,
    /// Per server process, its first connection: whether the woken process preempted the
    /// client, inside `connect` or after it.
    pub first_preempted: Vec<Preempted>,
    /// Per server process whose first client connected alone: whether the server its
    /// connection woke took that client's core ([`lone_waker_held`]).
    pub lone_waker_held: Vec<bool>,
}

/// What the server a connection woke did to its client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preempted {
    /// Nothing seen.
    No,
    /// The client's `connect` returned only after the server began accepting it.
    InConnect,
    /// `connect` returned in time, but the client, due to write while the server ran its first
    /// iteration, wrote only after it (when the server began its second accept).
    AfterConnect,
}

/// The client's trace line of one attempt (`client.jsonl`; µs since the Unix epoch).
#[derive(Debug, Deserialize)]
struct ClientLine {
    attempt: String,
    process: u64,
    connect_us: f64,
    connected_us: f64,
    write_us: f64,
    gap_us: f64,
}

/// For each server process, what happened to the client of its first connection (see
/// [`Preempted`]). A client that kept its core returns from `connect` within microseconds,
/// long before a fresh process's accept gets to JavaScript, and writes when its gap ends
/// (docs/reality.md, "What a scheduler trace showed").
fn first_preempted(clients: &[ClientLine], trace: &[Line]) -> Vec<Preempted> {
    let first = first_clients(clients);
    // Per attempt, when its accept began; per process, every accept's beginning.
    let mut accepted: BTreeMap<&str, f64> = BTreeMap::new();
    let mut accepts: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for l in trace {
        if let (Some(a), Some(at)) = (l.attempt.as_deref(), l.accepted_us)
            && !accepted.contains_key(a)
        {
            accepted.insert(a, at);
            accepts.entry(l.process.unwrap_or(1)).or_default().push(at);
        }
    }
    first
        .iter()
        .filter_map(|(process, c)| {
            let at = *accepted.get(c.attempt.as_str())?;
            if c.connected_us > at {
                return Some(Preempted::InConnect);
            }
            let mut all = accepts.get(process).cloned().unwrap_or_default();
            all.sort_by(f64::total_cmp);
            let second = all.iter().copied().find(|a| *a > at);
            let due = c.connected_us + c.gap_us;
            Some(match second {
                Some(s) if due < s && c.write_us >= s => Preempted::AfterConnect,
                _ => Preempted::No,
            })
        })
        .collect()
}

/// Per server process, the client whose `connect` began first (of two that began in the same
/// microsecond, the first line's).
fn first_clients(clients: &[ClientLine]) -> BTreeMap<u64, &ClientLine> {
    let mut first: BTreeMap<u64, &ClientLine> = BTreeMap::new();
    for c in clients {
        match first.get(&c.process) {
            Some(f) if f.connect_us <= c.connect_us => {}
            _ => {
                first.insert(c.process, c);
            }
        }
    }
    first
}

/// The client's lines of a round (`client.jsonl`), a bad one named with its number.
fn client_lines(dir: &Path) -> Result<Vec<ClientLine>, String> {
    let path = dir.join("client.jsonl");
    let text = crate::input::read_file(&path, "client trace").map_err(|e| e.to_string())?;
    let lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    lines
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| format!("{}:{}: not a client trace line: {e}", path.display(), i + 1))
        })
        .collect()
}

/// Per server process whose first client connected alone (no other client of it began its
/// `connect` before that one returned), whether the server its connection woke took that
/// client's core: its `connect` returned only after the server began accepting it.
fn lone_waker_held(clients: &[ClientLine], trace: &[Line]) -> Vec<bool> {
    let mut accepted: BTreeMap<&str, f64> = BTreeMap::new();
    for l in trace {
        if let (Some(a), Some(at)) = (l.attempt.as_deref(), l.accepted_us) {
            accepted.entry(a).or_insert(at);
        }
    }
    let alone = |f: &ClientLine| {
        !clients.iter().any(|c| {
            c.process == f.process && c.attempt != f.attempt && c.connect_us < f.connected_us
        })
    };
    first_clients(clients)
        .values()
        .filter(|f| alone(f))
        .filter_map(|f| accepted.get(f.attempt.as_str()).map(|at| f.connected_us > *at))
        .collect()
}

/// Whose core the server a connection woke took, two clients connecting to it at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woken {
    /// Neither client was delayed.
    Neither,
    /// The client whose connection it accepted first (the one that woke it): its `connect`
    /// returned only after the server began accepting it.
    Waker,
    /// The other client: it returned from `connect` more than twice the quicker connect time
    /// after the first of the two began (it began late, or its `connect` was slow).
    Other,
}

/// Per server process, whose core the woken server took of the first two clients to connect
/// to it (attempt 1 of request 0's copies, begun together: [`Woken`]). A loopback `connect`
/// takes about 0.05 ms; a client whose core the woken server took, before or inside its
/// `connect`, returned 0.14-1.3 ms after (docs/reality.md, "Who the woken server preempts").
/// A process with fewer than two such clients accepted is not counted.
pub fn whom_woken(dir: &Path) -> Result<Vec<Woken>, String> {
    let trace = lines(&dir.join("trace.jsonl"))?;
    let mut accepted: BTreeMap<(u64, &str), f64> = BTreeMap::new();
    for l in &trace {
        if let (Some(a), Some(at)) = (l.attempt.as_deref(), l.accepted_us) {
            accepted.entry((l.process.unwrap_or(1), a)).or_insert(at);
        }
    }
    let mut by: BTreeMap<u64, Vec<(ClientLine, f64)>> = BTreeMap::new();
    for c in client_lines(dir)? {
        let at = accepted.get(&(c.process, c.attempt.as_str())).copied();
        if c.attempt.starts_with("0.")
            && c.attempt.ends_with(".1")
            && let Some(at) = at
        {
            by.entry(c.process).or_default().push((c, at));
        }
    }
    let whom = |cs: &mut Vec<(ClientLine, f64)>| {
        cs.sort_by(|a, b| a.1.total_cmp(&b.1));
        let ((w, at), (o, _)) = (&cs[0], &cs[1]);
        if w.connected_us > *at {
            return Woken::Waker;
        }
        let t0 = w.connect_us.min(o.connect_us);
        let took = (w.connected_us - w.connect_us).min(o.connected_us - o.connect_us);
        if o.connected_us - t0 > 2.0 * took { Woken::Other } else { Woken::Neither }
    };
    Ok(by.values_mut().filter(|cs| cs.len() >= 2).map(whom).collect())
}

/// One round's instrumentation file, line by line (a bad line is named with its number).
fn lines(trace: &Path) -> Result<Vec<Line>, String> {
    let text = crate::input::read_file(trace, "instrumentation").map_err(|e| e.to_string())?;
    let lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    lines
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                format!("{}:{}: not an instrumentation line: {e}", trace.display(), i + 1)
            })
        })
        .collect()
}

/// One round's times, from its folder: its instrumentation (`trace.jsonl`, read once) and its
/// client's lines (`client.jsonl`).
pub fn round_times(dir: &Path) -> Result<RoundTimes, String> {
    let trace = lines(&dir.join("trace.jsonl"))?;
    let mut r = times(&trace);
    let clients = client_lines(dir)?;
    r.first_preempted = first_preempted(&clients, &trace);
    r.lone_waker_held = lone_waker_held(&clients, &trace);
    Ok(r)
}

/// The times in one round's instrumentation lines.
fn times(trace: &[Line]) -> RoundTimes {
    let mut by: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    let mut accepts = Vec::new();
    let mut others = Vec::new();
    for line in trace {
        let who = line.attempt.clone().unwrap_or_default();
        if line.ev == "read"
            && let Some(a) = line.accepted_us
        {
            accepts.push(a);
        }
        others.push(line.t_us);
        by.entry(who).or_default().entry(line.ev.clone()).or_insert(line.t_us);
    }
    accepts.sort_by(f64::total_cmp);
    let mut r = RoundTimes::default();
    let gaps: Vec<f64> = accepts.windows(2).map(|w| w[1] - w[0]).collect();
    r.first_accept = gaps.first().copied();
    // Accept-only iterations: consecutive accepts with no other event of the process between.
    r.accepts = accepts
        .windows(2)
        .skip(1)
        .filter(|w| !others.iter().any(|t| *t > w[0] && *t < w[1]))
        .map(|w| w[1] - w[0])
        .collect();
    let mut reqs: Vec<&BTreeMap<String, f64>> =
        by.values().filter(|e| e.contains_key("read")).collect();
    reqs.sort_by(|a, b| a["read"].total_cmp(&b["read"]));
    for (i, e) in reqs.iter().enumerate() {
        if let Some(l) = e.get("lookup") {
            let d = l - e["read"];
            if i == 0 { r.first_handler = Some(d) } else { r.handlers.push(d) }
        }
        let before = e.get("resume").or(e.get("lookup")).or(e.get("read"));
        if let (Some(b), Some(ins)) = (before, e.get("insert")) {
            r.commits.push(ins - b);
        }
    }
    r
}

/// Warm-up requests a calibration's cold-code rounds send to every fresh process
/// (`idemsim-warmup-P-I`, one after the other, each with a key of its own): the first runs
/// every step's code for the first time, the last two ([`WARM_FROM`] on) run it warm.
pub const WARMUPS: u32 = 5;
/// The first warm-up request counted as warm.
const WARM_FROM: u32 = 3;

/// The steps of fresh processes' warm-up requests: per interval between two consecutive
/// trace events of a request after its first statement began (`lookup→resume`,
/// `resume→insert`, `insert→save`; not the handler before it, not the reply after it), the
/// times of each process's first request and of its warm ones (µs).
#[derive(Debug, Default)]
pub struct ColdSteps {
    /// Per interval, the first requests' times.
    pub first: BTreeMap<String, Vec<f64>>,
    /// Per interval, the warm requests' times.
    pub warm: BTreeMap<String, Vec<f64>>,
}

impl ColdSteps {
    /// Add one round's warm-up requests (its instrumentation file; other requests are skipped).
    pub fn add(&mut self, trace: &Path) -> Result<(), String> {
        let prefix = format!("{}-", super::round::WARMUP_USER);
        let mut by: BTreeMap<String, Vec<(f64, String)>> = BTreeMap::new();
        for line in lines(trace)? {
            if let Some(a) = line.attempt.filter(|a| a.starts_with(&prefix)) {
                by.entry(a).or_default().push((line.t_us, line.ev));
            }
        }
        for (attempt, mut events) in by {
            let Some(nth) = attempt.rsplit('-').next().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let into = match nth {
                0 => &mut self.first,
                n if n >= WARM_FROM => &mut self.warm,
                _ => continue,
            };
            events.sort_by(|a, b| a.0.total_cmp(&b.0));
            for w in events.windows(2).skip(1).filter(|w| w[1].1 != "reply") {
                let name = format!("{}→{}", w[0].1, w[1].1);
                into.entry(name).or_default().push(w[1].0 - w[0].0);
            }
        }
        Ok(())
    }

    /// Each first request's interval less its kind's warm median (at least 0): the cold
    /// code's extra time, one value per statement and process.
    pub fn excess(&self) -> Vec<f64> {
        let mut out = Vec::new();
        for (name, first) in &self.first {
            let Some(warm) = self.warm.get(name).filter(|w| !w.is_empty()) else { continue };
            let mut w = warm.clone();
            w.sort_by(f64::total_cmp);
            let median = w[w.len() / 2];
            out.extend(first.iter().map(|f| (f - median).max(0.0)));
        }
        out
    }
}

/// The measured values' quantiles (µs → a distribution), if any were measured.
fn measured(v: &[f64]) -> Option<(Dist, usize)> {
    let us: Vec<u64> =
        v.iter().filter(|x| x.is_finite() && **x >= 0.0).map(|x| x.round() as u64).collect();
    Dist::measured(&us).map(|d| (d, us.len()))
}

/// One line `name = …  # how`: the measured quantiles, else the default stack's value,
/// saying so.
fn line(o: &mut String, name: &str, values: &[f64], (default, from): (Dist, &str), how: &str) {
    match measured(values) {
        Some((d, n)) => {
            let _ = writeln!(o, "{name} = {}  # {how}: {n} measured", d.toml());
        }
        None => {
            let _ = writeln!(
                o,
                "{name} = {}  # not measured ({how}: no such lines): {from}'s",
                default.toml(),
            );
        }
    }
}

/// The `wake_preempts` line: of fresh processes' first connections, the share whose client
/// the woken server preempted inside `connect`, else the default stack's, saying so; and, as
/// comments (measured, not modelled: docs/reality.md), how many of the others it preempted
/// after `connect`, how many of those first clients that connected alone it preempted, and of
/// two clients connecting at once (`others`: [`whom_woken`]), whose core it took.
fn wake_lines(
    o: &mut String,
    (rounds, others): (&[RoundTimes], &[Woken]),
    (t, from): (&crate::model::LoopTimes, &str),
) {
    let firsts: Vec<Preempted> = rounds.iter().flat_map(|r| r.first_preempted.clone()).collect();
    let n = firsts.len();
    let count = |p: Preempted| firsts.iter().filter(|f| **f == p).count();
    let (inside, after) = (count(Preempted::InConnect), count(Preempted::AfterConnect));
    let how = "a fresh process's first connection whose client's connect returned after the \
               server began accepting it";
    let _ = if n == 0 {
        writeln!(
            o,
            "wake_preempts = {}  # not measured ({how}: no client lines): {from}'s",
            t.wake_preempts(),
        )
    } else {
        writeln!(
            o,
            "wake_preempts = {:.3}  # {how}: {inside} of {n}\n\
             # not modelled (docs/reality.md): of the others, whose client, due to write during \
             the server's first iteration, wrote only when its second accept began: {after} of {}",
            inside as f64 / n as f64,
            n - inside
        )
    };
    let share = |v: &[bool]| format!("{} of {}", v.iter().filter(|h| **h).count(), v.len());
    let lone: Vec<bool> = rounds.iter().flat_map(|r| r.lone_waker_held.clone()).collect();
    if !lone.is_empty() {
        let _ = writeln!(
            o,
            "# not modelled (docs/reality.md, \"Who the woken server preempts\"): of those first \
             clients that connected alone, returned after the server began accepting: {}",
            share(&lone)
        );
    }
    if !others.is_empty() {
        let count = |w: Woken| others.iter().filter(|o| **o == w).count();
        let _ = writeln!(
            o,
            "# not modelled (same): of two clients connecting at once to an idle loop, the \
             server took the core of the one that woke it: {}, of the other: {}, of neither: {} \
             (of {})",
            count(Woken::Waker),
            count(Woken::Other),
            count(Woken::Neither),
            others.len()
        );
    }
}

/// The profile: a stack file (`[runtime]` and `[driver]`, each measured time as its
/// quantiles p0 … p100 in ms, `Dist::measured`) with its provenance, a model names by path
/// (`stack = "..."`). What the target's lines do not measure is its own stack's (`base`, an
/// event loop's; [`super::measure::base_stack`]), each such line says so.
pub fn profile(
    (rounds, wakes): (&[RoundTimes], &[Woken]),
    cold: &ColdSteps,
    (base, t): (&crate::model::Stack, &crate::model::LoopTimes),
    provenance: &str,
) -> String {
    let all = |f: fn(&RoundTimes) -> Vec<f64>| rounds.iter().flat_map(f).collect::<Vec<f64>>();
    let first_accept = all(|r| r.first_accept.into_iter().collect());
    let first_handler = all(|r| r.first_handler.into_iter().collect());
    let from = base.name.as_str();
    let mut o = String::new();
    for l in provenance.lines() {
        let _ = writeln!(o, "# {l}");
    }
    let _ = writeln!(o, "description = \"measured on this machine by idemsim calibrate\"\n");
    let _ = writeln!(o, "[runtime]\nkind = \"event-loop\"");
    line(&mut o, "turn_ms", &[], (t.turn_us, from), "an idle iteration");
    let how = "accept-only iterations (no other event between two accepts)";
    line(&mut o, "accept_ms", &all(|r| r.accepts.clone()), (t.accept_us, from), how);
    let how = "a fresh process's first accept to its second";
    line(&mut o, "first_accept_ms", &first_accept, (t.first_accept_us, from), how);
    let how = "read to lookup, after the first request";
    line(&mut o, "handler_ms", &all(|r| r.handlers.clone()), (t.handler_us, from), how);
    let how = "the first request's read to lookup";
    line(&mut o, "first_handler_ms", &first_handler, (t.first_handler_us, from), how);
    wake_lines(&mut o, (rounds, wakes), (t, from));
    let how = "a fresh process's first request's steps less their warm medians (warm-up requests)";
    line(&mut o, "first_statement_ms", &cold.excess(), (t.first_statement_us, from), how);
    let d = &base.driver;
    let _ = writeln!(o, "\n[driver]\nawaits = \"explicit\"");
    line(&mut o, "statement_ms", &[], (d.statement_us, from), "a statement that did not write");
    let how = "a statement that wrote, with its fsync";
    line(&mut o, "commit_ms", &all(|r| r.commits.clone()), (d.commit_us, from), how);
    line(&mut o, "latency_ms", &[], (d.latency_us, from), "an await of setImmediate");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default stack, the base of what a line does not measure.
    fn base() -> (&'static crate::model::Stack, &'static crate::model::LoopTimes) {
        let s: &'static crate::model::Stack = Box::leak(Box::new(crate::model::default_stack()));
        match &s.runtime {
            crate::model::Runtime::EventLoop(t) => (s, t),
            crate::model::Runtime::Threads(_) => unreachable!("the default stack is an event loop"),
        }
    }

    #[test]
    fn a_round_s_lines_give_its_times() {
        let dir = std::env::temp_dir().join(format!("idemsim-cal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("trace.jsonl");
        let lines = [
            r#"{"t_us":1000,"attempt":"0.0.1","ev":"read","accepted_us":0}"#,
            r#"{"t_us":2500,"attempt":"0.0.1","ev":"lookup"}"#,
            r#"{"t_us":2600,"attempt":"0.0.1","ev":"resume"}"#,
            r#"{"t_us":3400,"attempt":"0.0.1","ev":"insert"}"#,
            r#"{"t_us":3500,"attempt":"0.1.1","ev":"read","accepted_us":300}"#,
            r#"{"t_us":3620,"attempt":"0.1.1","ev":"lookup"}"#,
            r#"{"t_us":3700,"attempt":"0.2.1","ev":"read","accepted_us":3450}"#,
        ];
        std::fs::write(&f, lines.join("\n")).unwrap();
        std::fs::write(dir.join("client.jsonl"), "").unwrap();
        let r = round_times(&dir).unwrap();
        // The third accept follows other events of the process: not an accept-only gap.
        assert_eq!((r.first_accept, r.accepts.as_slice()), (Some(300.0), &[][..]));
        assert_eq!((r.first_handler, r.handlers.as_slice()), (Some(1500.0), &[120.0][..]));
        assert_eq!(r.commits, [800.0]);
        let p = profile((&[r], &[]), &ColdSteps::default(), base(), "measured here");
        assert!(p.starts_with("# measured here\ndescription = "), "{p}");
        assert!(p.contains("[runtime]\nkind = \"event-loop\"\n"), "{p}");
        assert!(
            p.contains(
                "first_handler_ms = { p0 = 1.5, p10 = 1.5, p25 = 1.5, p50 = 1.5, p75 = 1.5,"
            ),
            "{p}"
        );
        assert!(p.contains("commit_ms = { p0 = 0.8, p10 = 0.8,"), "{p}");
        // What the lines did not measure is the default stack's, and says so.
        assert!(p.contains("turn_ms = [0.001, 0.002]  # not measured"), "{p}");
        // A model names it: a complete stack.
        std::fs::write(dir.join("mine.toml"), &p).unwrap();
        let m = crate::model::Model::parse(
            &dir.join("m.toml"),
            "stack = \"mine.toml\"\nprogram = [\"begin\", \"insert-row\", \"commit\"]\n",
        )
        .unwrap();
        assert_eq!((m.driver.commit_us.min(), m.driver.commit_us.max()), (800, 800));
        let first = m.loop_times().unwrap().first_handler_us;
        assert_eq!((first.min(), first.max()), (1500, 1500));
        std::fs::write(&f, "garbage").unwrap();
        assert!(
            round_times(&dir).unwrap_err().contains("trace.jsonl:1: not an instrumentation line")
        );
    }

    #[test]
    fn a_fresh_process_s_first_steps_less_its_warm_ones_are_its_cold_code() {
        let dir = std::env::temp_dir().join(format!("idemsim-cal-cold-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("trace.jsonl");
        let req = |p: u32, i: u32, t: [u32; 5]| {
            let a = format!("idemsim-warmup-{p}-{i}");
            ["read", "lookup", "resume", "insert", "reply"]
                .iter()
                .zip(t)
                .map(|(ev, t)| format!(r#"{{"t_us":{t},"attempt":"{a}","ev":"{ev}"}}"#))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let lines = [
            // Written out of order: a request's events are sorted by time.
            req(1, 0, [0, 2000, 2700, 3800, 9000]),
            req(1, 1, [10_000, 10_200, 10_500, 11_200, 11_300]),
            req(1, 3, [20_000, 20_100, 20_200, 20_800, 20_900]),
            req(1, 4, [30_000, 30_100, 30_200, 30_700, 30_800]),
            r#"{"t_us":40000,"attempt":"0.0.1","ev":"read"}"#.to_string(),
            r#"{"t_us":40100,"attempt":"0.0.1","ev":"lookup"}"#.to_string(),
            r#"{"t_us":40900,"attempt":"0.0.1","ev":"resume"}"#.to_string(),
        ];
        std::fs::write(&f, lines.join("\n")).unwrap();
        let mut c = ColdSteps::default();
        c.add(&f).unwrap();
        // Warm medians: lookup→resume 100, resume→insert 600 (of 500 and 600, the upper).
        assert_eq!(c.first["lookup→resume"], [700.0]);
        assert_eq!(c.warm["resume→insert"], [600.0, 500.0]);
        // The request itself (0.0.1), the handler (read→lookup), the reply and warm-up 1 are
        // not counted.
        assert_eq!(c.first.len(), 2);
        assert_eq!(c.excess(), [600.0, 500.0]);
        let p = profile((&[], &[]), &c, base(), "here");
        assert!(p.contains("first_statement_ms = { p0 = 0.5, "), "{p}");
        assert!(p.contains("less their warm medians (warm-up requests): 2 measured"), "{p}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_first_client_held_in_connect_or_in_its_write_was_preempted() {
        let dir = std::env::temp_dir().join(format!("idemsim-cal-pre-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let client = |a: &str, p: u32, [connect, connected, write, gap]: [u32; 4]| {
            format!(
                r#"{{"attempt":"{a}","process":{p},"tid":1,"connect_us":{connect},"connected_us":{connected},"write_us":{write},"written_us":0,"gap_us":{gap}}}"#
            )
        };
        // Process 1's first client (0.1.1, not the first line) returned from connect after
        // the server began accepting it; process 2's first returned before and wrote on time;
        // process 3's returned before, was due to write at 160 µs, during the server's first
        // iteration, and wrote only at 2500 µs, after its second accept began (2000 µs).
        let lines = [
            client("0.0.1", 1, [120, 130, 200, 50]),
            client("0.1.1", 1, [100, 1900, 1950, 50]),
            client("0.2.1", 2, [110, 115, 165, 50]),
            client("0.3.1", 3, [100, 110, 2500, 50]),
            client("0.4.1", 3, [150, 160, 210, 50]),
        ];
        std::fs::write(dir.join("client.jsonl"), lines.join("\n")).unwrap();
        let trace = [
            r#"{"t_us":2000,"process":1,"attempt":"0.1.1","ev":"read","accepted_us":400}"#,
            r#"{"t_us":2100,"process":1,"attempt":"0.0.1","ev":"read","accepted_us":1950}"#,
            r#"{"t_us":900,"process":2,"attempt":"0.2.1","ev":"read","accepted_us":300}"#,
            r#"{"t_us":2600,"process":3,"attempt":"0.3.1","ev":"read","accepted_us":300}"#,
            r#"{"t_us":2700,"process":3,"attempt":"0.4.1","ev":"read","accepted_us":2000}"#,
        ];
        std::fs::write(dir.join("trace.jsonl"), trace.join("\n")).unwrap();
        use Preempted::*;
        let r = round_times(&dir).unwrap();
        assert_eq!(r.first_preempted, [InConnect, No, AfterConnect]);
        // First clients connecting alone: process 2's (its only one) and process 3's (0.4.1
        // began at 150 µs, after 0.3.1 returned at 110), both back before their accepts;
        // process 1's (0.1.1) was not alone (0.0.1 began at 120, before it returned at 1900).
        assert_eq!(r.lone_waker_held, [false, false]);
        let r = RoundTimes {
            first_preempted: vec![InConnect, No, AfterConnect, No],
            ..Default::default()
        };
        let p = profile((&[r], &[]), &ColdSteps::default(), base(), "here");
        assert!(p.contains("\nwake_preempts = 0.250  # a fresh process's first"), "{p}");
        assert!(
            p.contains("accepting it: 1 of 4\n# not modelled (docs/reality.md): of the others"),
            "{p}"
        );
        assert!(p.contains("second accept began: 1 of 3\n"), "{p}");
        let p = profile((&[], &[]), &ColdSteps::default(), base(), "here");
        assert!(p.contains("wake_preempts = ") && !p.contains("# not modelled"), "{p}");
        assert!(p.contains("(a fresh process's first connection") && p.contains("no client lines"));
        std::fs::write(dir.join("client.jsonl"), "{").unwrap();
        assert!(round_times(&dir).unwrap_err().contains("client.jsonl:1: not a client trace"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn whom_the_woken_server_preempts_is_measured_apart() {
        let dir = std::env::temp_dir().join(format!("idemsim-cal-whom-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let client = |a: &str, p: u32, [connect, connected]: [u32; 2]| {
            format!(
                r#"{{"attempt":"{a}","process":{p},"tid":1,"connect_us":{connect},"connected_us":{connected},"write_us":0,"written_us":0,"gap_us":50}}"#
            )
        };
        // Two clients at once. Process 1: both begin at 1000 µs; the one accepted first
        // (0.0.1, at 1100) returned from connect at 1400, after: the waker held. Process 2:
        // the other began 120 µs late and returned 155 after the first began, more than twice
        // the quicker connect (35): the other delayed. Process 3: 50 and 60: neither (a
        // retry, 0.0.2, and another request's copy, 1.0.1, are not its first two). Process 4:
        // one client, not counted.
        let lines = [
            client("0.0.1", 1, [1000, 1400]),
            client("0.1.1", 1, [1000, 1050]),
            client("0.1.1", 2, [1120, 1155]),
            client("0.0.1", 2, [1000, 1050]),
            client("0.0.1", 3, [1000, 1050]),
            client("0.1.1", 3, [1000, 1060]),
            client("0.0.2", 3, [1000, 9000]),
            client("1.0.1", 3, [1000, 9000]),
            client("0.0.1", 4, [1000, 1050]),
        ];
        std::fs::write(dir.join("client.jsonl"), lines.join("\n")).unwrap();
        let accepted = |p: u32, a: &str, at: u32| {
            format!(
                r#"{{"t_us":{at},"process":{p},"attempt":"{a}","ev":"read","accepted_us":{at}}}"#
            )
        };
        let trace: Vec<String> = [(1, "0.0.1", 1100), (1, "0.1.1", 1500), (2, "0.0.1", 1100)]
            .into_iter()
            .chain([(2, "0.1.1", 1300), (3, "0.0.1", 1100), (3, "0.1.1", 1300)])
            .chain([(3, "0.0.2", 1400), (3, "1.0.1", 1500), (4, "0.0.1", 1100)])
            .map(|(p, a, at)| accepted(p, a, at))
            .collect();
        std::fs::write(dir.join("trace.jsonl"), trace.join("\n")).unwrap();
        let wakes = whom_woken(&dir).unwrap();
        assert_eq!(wakes, [Woken::Waker, Woken::Other, Woken::Neither]);
        // A lone first client: process 1's returned from connect (900 µs) after the server
        // began accepting it (500): held; process 2's before; process 3's first was not alone
        // (0.4.1 began its connect at 100, before the first returned): not counted.
        let lines = [
            client("0.0.1", 1, [0, 900]),
            client("0.1.1", 1, [1000, 1050]),
            client("0.2.1", 2, [0, 50]),
            client("0.3.1", 3, [0, 900]),
            client("0.4.1", 3, [100, 150]),
        ];
        std::fs::write(dir.join("client.jsonl"), lines.join("\n")).unwrap();
        let trace = [
            r#"{"t_us":950,"attempt":"0.0.1","ev":"read","accepted_us":500}"#,
            r#"{"t_us":1950,"attempt":"0.1.1","ev":"read","accepted_us":1500}"#,
            r#"{"t_us":950,"attempt":"0.2.1","ev":"read","accepted_us":500}"#,
            r#"{"t_us":950,"attempt":"0.3.1","ev":"read","accepted_us":500}"#,
        ];
        std::fs::write(dir.join("trace.jsonl"), trace.join("\n")).unwrap();
        let r = round_times(&dir).unwrap();
        assert_eq!(r.lone_waker_held, [true, false]);
        let p = profile((&[r], &wakes), &ColdSteps::default(), base(), "here");
        assert!(
            p.contains("that connected alone, returned after the server began accepting: 1 of 2\n"),
            "{p}"
        );
        assert!(p.contains("the one that woke it: 1, of the other: 1, of neither: 1 (of 3)\n"));
        std::fs::write(dir.join("client.jsonl"), "{").unwrap();
        assert!(whom_woken(&dir).unwrap_err().contains("client.jsonl:1: not a client trace"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
