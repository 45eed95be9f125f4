//! Scenarios as data: a sim file says who sends what, what goes wrong where, and what must hold.
//!
//! See `docs/sims.md` for the format. Everything here is checked at load time; a problem names
//! file, line and column.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::input::{InputError, Source, is_kebab, parse_seeds};
use crate::report::Outcome;
use crate::units::show_ms;

/// Which server process a request (copy) goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Always this process (0-based index; files say 1-based).
    Fixed(usize),
    /// Copy `i` goes to process `i mod n`.
    Alternate,
    /// Each attempt draws a process from the seed.
    Random,
}

/// What a client retries on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RetryOn {
    pub transport: bool,
    pub statuses: BTreeSet<u16>,
}

/// A client's retry policy for one request's attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Attempts in all, the first included (1 = no retry).
    pub max_attempts: u32,
    pub on: RetryOn,
    /// Backoff before retry n (µs): base * 2^(n-1), capped, plus jitter drawn from the seed.
    pub backoff_us: u64,
    pub backoff_cap_us: u64,
    pub jitter: bool,
    /// No retry starts later than this after the first attempt.
    pub horizon_us: Option<u64>,
    /// Send a fresh key on every attempt (disables server-side dedupe).
    pub new_key_per_attempt: bool,
    /// Body of the retries if it differs from the first attempt's.
    pub retry_body: Option<String>,
}

impl Policy {
    /// The longest backoff before retry `n` (1-based), before jitter (µs).
    pub fn backoff_before_us(&self, n: u32) -> u64 {
        self.backoff_us.saturating_mul(1 << (n - 1).min(20)).min(self.backoff_cap_us)
    }

    /// The latest a retry can start after the first attempt was sent (µs), with attempts that
    /// each run to `timeout_us` and the longest backoffs; capped by the horizon.
    pub fn window_us(&self, timeout_us: u64) -> u64 {
        let w = (1..self.max_attempts).fold(0u64, |t, n| {
            t.saturating_add(timeout_us).saturating_add(self.backoff_before_us(n))
        });
        self.horizon_us.map_or(w, |h| w.min(h))
    }
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            max_attempts: 1,
            on: RetryOn::default(),
            backoff_us: 100_000,
            backoff_cap_us: 5_000_000,
            jitter: false,
            horizon_us: None,
            new_key_per_attempt: false,
            retry_body: None,
        }
    }
}

/// What must hold for one request (for its final attempt, for every copy).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestExpect {
    pub status: Option<u16>,
    pub outcome: Option<Outcome>,
    pub replayed: Option<bool>,
    pub id: Option<i64>,
    /// Same `id` in the body as this other request.
    pub same_id_as: Option<String>,
    /// A different `id` from this other request.
    pub id_differs_from: Option<String>,
    /// Every copy got the same `id`.
    pub same_id: Option<bool>,
    /// Rows in the database right after this request finished.
    pub rows_after: Option<u64>,
    /// Stored keys right after this request finished.
    pub keys_after: Option<u64>,
    /// Stored responses (key records holding a completed outcome, which a retry would be
    /// answered with) right after this request finished; a claim or a failed record is none.
    pub responses_after: Option<u64>,
}

impl RequestSpec {
    /// Who the request is for, as the server records it: `tenant/user`, or the user alone.
    pub fn principal(&self) -> Option<String> {
        let u = self.user.as_ref()?;
        Some(match &self.tenant {
            Some(t) => format!("{t}/{u}"),
            None => u.clone(),
        })
    }

    /// The body attempt `attempt` (1-based) sends: the retry body, if any, after the first.
    pub fn body_for(&self, attempt: u32) -> &str {
        match &self.policy.retry_body {
            Some(b) if attempt > 1 => b,
            _ => &self.body,
        }
    }
}

impl RequestExpect {
    pub fn needs_probe(&self) -> bool {
        self.rows_after.is_some() || self.keys_after.is_some() || self.responses_after.is_some()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestSpec {
    pub id: String,
    /// The id as written in the file (`id-3` of `intents = 5` has group `id`).
    pub group: String,
    /// The logical operation this request belongs to (default: its id).
    pub intent: String,
    /// None: no user header (401).
    pub user: Option<String>,
    /// `X-Tenant` (None: not sent).
    pub tenant: Option<String>,
    /// `If-Match` as sent (None: not sent): the version the client's copy was loaded at.
    pub if_match: Option<String>,
    /// The client's clock is this far off true time (µs); when set, every attempt sends its
    /// clock's time as `X-Client-Time` (ms). None: no header.
    pub clock_skew_us: Option<i64>,
    pub method: String,
    pub path: String,
    pub key: Option<String>,
    pub body: String,
    /// Concurrent copies of each attempt (double submit; 20 in case 11).
    pub copies: u32,
    /// Each copy leaves after a delay drawn from this range (µs): a client sending its copies
    /// one after the other, spread over a window. [0, 0]: all at once.
    pub spread_us: (u64, u64),
    pub route: Route,
    /// Starts when all of these (requests or actions) have finished.
    pub after: Vec<String>,
    /// Wait (µs) after `after` before starting.
    pub delay_us: u64,
    /// How long (µs) the client waits for a reply before it sees a transport failure.
    pub timeout_us: u64,
    pub policy: Policy,
    pub expect: RequestExpect,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionKind {
    /// Another connection takes `BEGIN IMMEDIATE` and holds it until `until` has finished or
    /// `for_us` has passed.
    HoldLock { until: Option<String>, for_us: Option<u64> },
    /// Delete every stored key (an operator or a collector wiping the key store).
    DeleteKeys,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionSpec {
    pub id: String,
    pub kind: ActionKind,
    pub after: Vec<String>,
    pub delay_us: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum InjectAction {
    /// The step fails: an error, handled by the model's on_error (→ 500).
    Fail,
    /// An external effect is performed (counted by the receiver) here. A fallback effect
    /// fires only in designs with no effect step of their own: it is where the operation's
    /// external call goes when the design does not say.
    Effect { fallback: bool },
    /// The connection drops: the request goes on, the reply is never sent.
    DropReply,
    /// The server process crashes here; it restarts after `restart_us`.
    Crash { restart_us: u64 },
    /// The request waits here for `us` on something asynchronous (a slow downstream call):
    /// an await; the process's event loop serves its other requests meanwhile.
    Pause { us: u64 },
    /// The whole process stops here for `us` (a stop-the-world GC pause, a VM or container
    /// frozen, SIGSTOP): none of its tasks runs, whatever its driver; messages to it queue.
    Stall { us: u64 },
    /// The process's clock jumps by `us` (may be negative): an NTP step, a VM resumed.
    ClockJump { us: i64 },
}

impl InjectAction {
    pub fn name(&self) -> &'static str {
        match self {
            InjectAction::Fail => "fail",
            InjectAction::Effect { .. } => "effect",
            InjectAction::DropReply => "drop-reply",
            InjectAction::Crash { .. } => "crash",
            InjectAction::Pause { .. } => "pause",
            InjectAction::Stall { .. } => "stall",
            InjectAction::ClockJump { .. } => "clock-jump",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Inject {
    /// Point name without the `@`.
    pub point: String,
    pub action: InjectAction,
    /// Only requests with this id (all copies and attempts); None: every request.
    pub request: Option<String>,
    /// Fires at most this many times in a run.
    pub times: Option<u32>,
    /// Fires with this probability, drawn from the seed (1.0 when absent).
    pub rate: f64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldSpec {
    pub processes: usize,
    /// Overrides the model's wait budget (µs).
    pub wait_budget_us: Option<u64>,
    pub client_timeout_us: u64,
    /// Network latency per message (µs, inclusive range).
    pub latency_us: (u64, u64),
    /// Simulated-time bound of a run (µs).
    pub time_limit_us: u64,
    /// Bound on server steps executed in a run.
    pub max_steps: u64,
    /// Latency of one leg of an effect call to the provider (µs, inclusive range).
    pub effect_latency_us: (u64, u64),
    /// How long the provider remembers an effect's dedupe key (None: forever).
    pub effect_dedupe_retention_us: Option<u64>,
    /// Each process's clock runs off true time by an offset drawn from this range (µs, may be
    /// negative); None: every clock agrees.
    pub clock_skew_us: Option<(i64, i64)>,
    /// Units in stock per catalogue item at the start (`stock` table; items not listed have
    /// no stock row, and `take-stock` leaves them unlimited).
    pub stock: Vec<(String, i64)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Expect {
    pub rows: Option<u64>,
    pub keys: Option<u64>,
    pub effects: Option<u64>,
    /// `qty` of every row, in id order.
    pub row_qty: Option<Vec<i64>>,
}

/// A scenario, loaded and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Sim {
    pub name: String,
    pub path: PathBuf,
    pub description: String,
    pub seeds: Range<u64>,
    pub world: WorldSpec,
    pub requests: Vec<RequestSpec>,
    pub actions: Vec<ActionSpec>,
    pub injects: Vec<Inject>,
    pub faults: Faults,
    pub expect: Expect,
    /// `limitation`: the expectations describe what a reference design does *not* do (the
    /// article's cases 14-16): holding them means "behaves like that design", not "passes".
    pub limitation: Option<String>,
}

/// A window in which a server process is cut off from the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    /// 0-based process index.
    pub process: usize,
    pub from_us: u64,
    pub for_us: u64,
}

/// Random faults drawn from the seed (rates are probabilities per message or per step).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Faults {
    /// A request is lost on its way to the server.
    pub request_drop: f64,
    /// A reply is lost on its way back.
    pub reply_drop: f64,
    /// A fresh success's reply is lost after the server committed (the targeted case).
    pub reply_drop_after_commit: f64,
    /// A request is sent twice: a proxy or a client library resends it after a stall drawn
    /// from `duplicate_after_us`, and the client gets the resent copy's reply.
    pub duplicate: f64,
    pub duplicate_after_us: (u64, u64),
    /// A message is held back by an extra delay drawn from `delay_us` (reorders messages).
    pub delay: f64,
    pub delay_us: (u64, u64),
    /// A server process crashes at a step boundary with this probability per step.
    pub crash: f64,
    pub restart_us: u64,
    /// What the client of a crashed process sees: a reset connection at once (a process that
    /// dies: its kernel resets its connections and refuses new ones), or silence until its
    /// timeout (a machine that dies).
    pub crash_signal: CrashSignal,
    /// Period of the key collector (deletes keys older than the model's `retention_us`).
    pub gc_every_us: Option<u64>,
    pub partitions: Vec<Partition>,
    /// The external effect provider (a payment API, a mailer).
    pub effects: EffectFaults,
    /// The key cache (`key.store = "cache"`).
    pub cache: CacheFaults,
    /// The database connection loses its server around a COMMIT: the commit happened or not
    /// (even odds), and the server cannot tell.
    pub commit_lost: f64,
}

/// Faults of the external effect provider, per effect call.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EffectFaults {
    /// The request never reaches the provider: nothing happens, no answer.
    pub drop: f64,
    /// The provider performs the effect; its answer is lost.
    pub ack_drop: f64,
    /// The provider receives the call twice (a client library resending it).
    pub duplicate: f64,
    /// The provider performs the effect, then answers an error.
    pub error_after_success: f64,
    /// The provider answers late, by a delay drawn from `delay_us`.
    pub delay: f64,
    pub delay_us: (u64, u64),
    /// The provider refuses the call as a business outcome (a card declined): no effect, a
    /// "declined" answer; a retry with the same dedupe key is declined again.
    pub decline: f64,
}

/// Faults of the key cache, per cache operation.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CacheFaults {
    /// The cache refuses the connection: the operation fails at once.
    pub unavailable: f64,
    /// The operation's key was evicted before its TTL (memory pressure).
    pub evict: f64,
    /// The cache restarted without persistence before the operation: every record is gone.
    pub restart: f64,
    /// The operation is applied but its reply is lost: the server times out.
    pub reply_drop: f64,
}

/// What the clients of a crashed process see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CrashSignal {
    /// A reset connection at once; new connections refused while it is down.
    #[default]
    Reset,
    /// Nothing until the client's timeout.
    Silence,
}

impl Faults {
    /// The knobs that are set, for run headers: `reply_drop=0.2 crash=0.01 ...`.
    pub fn describe(&self) -> String {
        let mut v = Vec::new();
        for (n, r) in [
            ("request_drop", self.request_drop),
            ("reply_drop", self.reply_drop),
            ("reply_drop_after_commit", self.reply_drop_after_commit),
            ("duplicate", self.duplicate),
            ("delay", self.delay),
            ("crash", self.crash),
        ] {
            if r > 0.0 {
                v.push(format!("{n}={r}"));
            }
        }
        if self.delay > 0.0 {
            v.push(format!("delay_ms={}..{}", show_ms(self.delay_us.0), show_ms(self.delay_us.1)));
        }
        if self.duplicate > 0.0 {
            let (lo, hi) = self.duplicate_after_us;
            v.push(format!("duplicate_after_ms={}..{}", show_ms(lo), show_ms(hi)));
        }
        let e = &self.effects;
        let c = &self.cache;
        for (n, r) in [
            ("effects.drop", e.drop),
            ("effects.ack_drop", e.ack_drop),
            ("effects.duplicate", e.duplicate),
            ("effects.error_after_success", e.error_after_success),
            ("effects.delay", e.delay),
            ("effects.decline", e.decline),
            ("cache.unavailable", c.unavailable),
            ("cache.evict", c.evict),
            ("cache.restart", c.restart),
            ("cache.reply_drop", c.reply_drop),
            ("commit_lost", self.commit_lost),
        ] {
            if r > 0.0 {
                v.push(format!("{n}={r}"));
            }
        }
        if e.delay > 0.0 {
            v.push(format!(
                "effects.delay_ms={}..{}",
                show_ms(e.delay_us.0),
                show_ms(e.delay_us.1)
            ));
        }
        if self.crash_signal == CrashSignal::Silence {
            v.push("crash_signal=silence".into());
        }
        if self.crash > 0.0 {
            v.push(format!("restart_ms={}", show_ms(self.restart_us)));
        }
        if let Some(g) = self.gc_every_us {
            v.push(format!("gc_every_ms={}", show_ms(g)));
        }
        for p in &self.partitions {
            v.push(format!(
                "partition(server-{}, {}..{} ms)",
                p.process + 1,
                show_ms(p.from_us),
                show_ms(p.from_us + p.for_us)
            ));
        }
        if v.is_empty() { "none".into() } else { v.join(" ") }
    }
}

pub const DEFAULT_SEEDS: Range<u64> = 0..100;

/// Bound on requests in one sim (after `intents` expansion): each is a client node.
pub const MAX_REQUESTS: usize = 10_000;
/// At most this many copies in a sim (each copy is a client with its attempts): what bounds a
/// run's memory.
pub const MAX_COPIES: u64 = 10_000;
/// At most this many attempts in a sim (copies × their retry budgets): each attempt's outcome
/// and each pending request's state is kept, so this bounds a run's memory (a few hundred MB
/// at the bound, measured; see docs/sims.md).
pub const MAX_ATTEMPTS: u64 = 100_000;
/// The largest `world.max_steps`.
pub const MAX_STEPS: u64 = 10_000_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SimFile {
    description: Option<String>,
    limitation: Option<String>,
    seeds: Option<Spanned<String>>,
    #[serde(default)]
    world: WorldFile,
    #[serde(default, rename = "request")]
    requests: Vec<RequestFile>,
    #[serde(default, rename = "action")]
    actions: Vec<ActionFile>,
    #[serde(default, rename = "inject")]
    injects: Vec<InjectFile>,
    #[serde(default)]
    faults: FaultsFile,
    #[serde(default, rename = "partition")]
    partitions: Vec<PartitionFile>,
    #[serde(default)]
    expect: ExpectFile,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FaultsFile {
    request_drop: Option<Spanned<f64>>,
    reply_drop: Option<Spanned<f64>>,
    reply_drop_after_commit: Option<Spanned<f64>>,
    duplicate: Option<Spanned<f64>>,
    delay: Option<Spanned<f64>>,
    delay_ms: Option<Spanned<Vec<f64>>>,
    crash: Option<Spanned<f64>>,
    restart_ms: Option<Spanned<f64>>,
    gc_every_ms: Option<Spanned<f64>>,
    duplicate_after_ms: Option<Spanned<Vec<f64>>>,
    crash_signal: Option<Spanned<String>>,
    commit_lost: Option<Spanned<f64>>,
    #[serde(default)]
    effects: EffectFaultsFile,
    #[serde(default)]
    cache: CacheFaultsFile,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct EffectFaultsFile {
    drop: Option<Spanned<f64>>,
    ack_drop: Option<Spanned<f64>>,
    duplicate: Option<Spanned<f64>>,
    error_after_success: Option<Spanned<f64>>,
    delay: Option<Spanned<f64>>,
    delay_ms: Option<Spanned<Vec<f64>>>,
    decline: Option<Spanned<f64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CacheFaultsFile {
    unavailable: Option<Spanned<f64>>,
    evict: Option<Spanned<f64>>,
    restart: Option<Spanned<f64>>,
    reply_drop: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PartitionFile {
    process: Spanned<usize>,
    from_ms: Spanned<f64>,
    for_ms: Spanned<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct WorldFile {
    processes: Option<Spanned<usize>>,
    wait_budget_ms: Option<Spanned<f64>>,
    client_timeout_ms: Option<Spanned<f64>>,
    latency_ms: Option<Spanned<Vec<f64>>>,
    time_limit_ms: Option<Spanned<f64>>,
    max_steps: Option<Spanned<u64>>,
    effect_latency_ms: Option<Spanned<Vec<f64>>>,
    effect_dedupe_retention_ms: Option<Spanned<f64>>,
    clock_skew_ms: Option<Spanned<Vec<f64>>>,
    stock: Option<Spanned<std::collections::BTreeMap<String, Spanned<i64>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestFile {
    id: Spanned<String>,
    intents: Option<Spanned<u32>>,
    same_body: Option<Spanned<bool>>,
    gap_ms: Option<Spanned<f64>>,
    timeout_ms: Option<Spanned<f64>>,
    intent: Option<String>,
    user: Option<String>,
    tenant: Option<String>,
    if_match: Option<Spanned<toml::Value>>,
    clock_skew_ms: Option<Spanned<f64>>,
    method: Option<String>,
    path: Option<String>,
    key: Option<String>,
    body: Option<String>,
    copies: Option<Spanned<u32>>,
    spread_ms: Option<Spanned<Vec<f64>>>,
    process: Option<Spanned<toml::Value>>,
    after: Option<Spanned<toml::Value>>,
    delay_ms: Option<Spanned<f64>>,
    retry: Option<RetryFile>,
    expect: Option<RequestExpectFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RetryFile {
    max_attempts: Option<Spanned<u32>>,
    on: Option<Vec<Spanned<toml::Value>>>,
    backoff_ms: Option<Spanned<f64>>,
    backoff_cap_ms: Option<Spanned<f64>>,
    jitter: Option<bool>,
    horizon_ms: Option<Spanned<f64>>,
    new_key: Option<bool>,
    body: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestExpectFile {
    status: Option<Spanned<u16>>,
    outcome: Option<Spanned<String>>,
    replayed: Option<bool>,
    id: Option<i64>,
    same_id_as: Option<Spanned<String>>,
    id_differs_from: Option<Spanned<String>>,
    same_id: Option<bool>,
    rows_after: Option<u64>,
    keys_after: Option<u64>,
    responses_after: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ActionFile {
    id: Spanned<String>,
    kind: Spanned<String>,
    until: Option<Spanned<String>>,
    for_ms: Option<Spanned<f64>>,
    after: Option<Spanned<toml::Value>>,
    delay_ms: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InjectFile {
    point: Spanned<String>,
    action: Spanned<String>,
    request: Option<Spanned<String>>,
    times: Option<u32>,
    rate: Option<Spanned<f64>>,
    restart_ms: Option<Spanned<f64>>,
    pause_ms: Option<Spanned<f64>>,
    stall_ms: Option<Spanned<f64>>,
    jump_ms: Option<Spanned<f64>>,
    fallback: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ExpectFile {
    rows: Option<u64>,
    keys: Option<u64>,
    effects: Option<u64>,
    row_qty: Option<Vec<i64>>,
}

fn default_body() -> String {
    r#"{"item":"test-item","qty":2}"#.to_string()
}

impl Sim {
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

    /// Does the sim state any expectation (else only the oracle judges it)?
    pub fn has_expectations(&self) -> bool {
        let e = &self.expect;
        e.rows.is_some()
            || e.keys.is_some()
            || e.effects.is_some()
            || e.row_qty.is_some()
            || self.requests.iter().any(|r| r.expect != RequestExpect::default())
    }

    /// The client's retry window: the latest a retry of any request can start after that
    /// request's first attempt (µs), each attempt running to its timeout and each backoff at
    /// its longest; 0 when no request retries.
    pub fn retry_window_us(&self) -> u64 {
        self.requests.iter().map(|q| q.policy.window_us(q.timeout_us)).max().unwrap_or(0)
    }

    /// The intents of the sim, in order of first appearance.
    pub fn intents(&self) -> Vec<&str> {
        let mut intents: Vec<&str> = Vec::new();
        for q in &self.requests {
            if !intents.contains(&q.intent.as_str()) {
                intents.push(&q.intent);
            }
        }
        intents
    }

    /// Index of a request by id.
    pub fn request_index(&self, id: &str) -> Option<usize> {
        self.requests.iter().position(|r| r.id == id)
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
    Ok(WorldSpec {
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
        time_limit_us: file.ms("world.time_limit_ms", &w.time_limit_ms, 3_600_000_000, 1)?,
        max_steps: match &w.max_steps {
            None => 100_000,
            Some(m) if (1..=MAX_STEPS).contains(m.get_ref()) => *m.get_ref(),
            Some(m) => {
                return Err(
                    file.err(m.span(), format!("world.max_steps: expected 1..={MAX_STEPS}"))
                );
            }
        },
        effect_latency_us: if w.effect_latency_ms.is_some() {
            file.ms_range(
                "world.effect_latency_ms",
                &w.effect_latency_ms,
                latency_us,
                |lo, hi| lo <= hi && hi <= 60_000_000,
                "[low, high] with low <= high <= 60000",
            )?
        } else {
            latency_us
        },
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
struct Names<'a> {
    file: Source<'a>,
    /// Every id as written, with its span.
    ids: Vec<(String, Range<usize>)>,
    /// Request ids as written.
    requests: Vec<String>,
}

impl<'a> Names<'a> {
    fn collect(file: Source<'a>, f: &SimFile) -> Result<Names<'a>, InputError> {
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

    fn is_known(&self, id: &str) -> bool {
        self.ids.iter().any(|(n, _)| n == id)
    }

    /// A request or action id.
    fn known(&self, s: &Spanned<String>) -> Result<String, InputError> {
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
    fn known_request(&self, s: &Spanned<String>) -> Result<String, InputError> {
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
    fn after_list(&self, v: &Option<Spanned<toml::Value>>) -> Result<Vec<String>, InputError> {
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
    fn span_of(&self, id: &str) -> Range<usize> {
        self.ids
            .iter()
            .find(|(n, _)| n == id || id.starts_with(&format!("{n}-")))
            .map(|(_, s)| s.clone())
            .unwrap_or(0..0)
    }
}

/// (written id, id of its last expanded intent) for every request with `intents > 1`.
type Expanded = Vec<(String, String)>;

/// Every `[[request]]`, with `intents = N` expanded into N requests.
fn parse_requests(
    file: Source,
    f: &SimFile,
    names: &Names,
    world: &WorldSpec,
) -> Result<(Vec<RequestSpec>, Expanded), InputError> {
    let mut requests = Vec::new();
    let mut expanded: Expanded = Vec::new();
    let (mut copies, mut attempts) = (0u64, 0u64);
    for r in &f.requests {
        let (spec, how) = parse_request(file, r, names, world)?;
        let intents = how.n;
        // The bounds that keep a run's memory in check, refused at the request that passes
        // them, before anything is expanded.
        if requests.len() + intents as usize > MAX_REQUESTS {
            return Err(file.err(
                r.id.span(),
                format!(
                    "{} requests after expanding `intents` up to here; at most {MAX_REQUESTS}",
                    requests.len() + intents as usize
                ),
            ));
        }
        copies += intents as u64 * spec.copies as u64;
        if copies > MAX_COPIES {
            return Err(file.err(
                r.id.span(),
                format!(
                    "{copies} copies up to here (copies × intents, summed over requests); at most \
                     {MAX_COPIES}"
                ),
            ));
        }
        attempts += intents as u64 * spec.copies as u64 * spec.policy.max_attempts as u64;
        if attempts > MAX_ATTEMPTS {
            return Err(file.err(
                r.id.span(),
                format!(
                    "{attempts} attempts possible up to here (copies × intents × \
                     retry.max_attempts, summed over requests); at most {MAX_ATTEMPTS}"
                ),
            ));
        }
        if intents > 1 {
            expanded.push((spec.id.clone(), format!("{}-{intents}", spec.id)));
            requests.extend(expand_intents(&spec, &how));
        } else {
            requests.push(spec);
        }
    }
    let actions: std::collections::BTreeSet<&str> =
        f.actions.iter().map(|a| a.id.get_ref().as_str()).collect();
    let mut seen = std::collections::BTreeSet::new();
    for q in &requests {
        let clash = !seen.insert(q.id.as_str()) || actions.contains(q.id.as_str());
        if clash {
            return Err(file.err(
                names.span_of(&q.group),
                format!("id `{}` is used twice (after expanding `intents`)", q.id),
            ));
        }
    }
    Ok((requests, expanded))
}

/// How a request's `intents = N` expands: N, whether every intent sends the body as written
/// (`same_body`), and the wait before each intent after the first (`gap_ms`, µs).
struct Intents {
    n: u32,
    same_body: bool,
    gap_us: u64,
}

/// One `[[request]]` as written, and how its intents expand.
fn parse_request(
    file: Source,
    r: &RequestFile,
    names: &Names,
    world: &WorldSpec,
) -> Result<(RequestSpec, Intents), InputError> {
    let processes = world.processes;
    let copies = match &r.copies {
        None => 1,
        Some(c) if (1..=1000).contains(c.get_ref()) => *c.get_ref(),
        Some(c) => return Err(file.err(c.span(), "copies: expected 1..=1000")),
    };
    let route = match &r.process {
        None => Route::Fixed(0),
        Some(p) => match p.get_ref() {
            toml::Value::Integer(i) if *i >= 1 && (*i as usize) <= processes => {
                Route::Fixed(*i as usize - 1)
            }
            toml::Value::String(s) if s == "alternate" => Route::Alternate,
            toml::Value::String(s) if s == "random" => Route::Random,
            _ => {
                return Err(file.err(
                    p.span(),
                    format!("process: expected 1..={processes}, \"alternate\" or \"random\""),
                ));
            }
        },
    };
    let policy = match &r.retry {
        None => Policy::default(),
        Some(rt) => parse_retry(file, rt)?,
    };
    let expect = match &r.expect {
        None => RequestExpect::default(),
        Some(e) => parse_request_expect(file, e, names)?,
    };
    let timeout_us = file.ms("timeout_ms", &r.timeout_ms, world.client_timeout_us, 1)?;
    let delay_us = file.ms("delay_ms", &r.delay_ms, 0, 0)?;
    let intents = match &r.intents {
        None => 1,
        Some(n) if (1..=1000).contains(n.get_ref()) => *n.get_ref(),
        Some(n) => return Err(file.err(n.span(), "intents: expected 1..=1000")),
    };
    let gap_us = file.ms("gap_ms", &r.gap_ms, 0, 0)?;
    let body = r.body.clone().unwrap_or_else(default_body);
    let same_body = r.same_body.as_ref().is_some_and(|b| *b.get_ref());
    if let Some(n) = &r.intents
        && intents > 1
        && !same_body
        && intent_body(&body, 1).is_none()
    {
        return Err(file.err(
            n.span(),
            format!(
                "intents = {intents}: each intent sends its own order, and this body is not an \
                 order whose qty can be varied ({{\"item\":…,\"qty\":1..=10}}); set \
                 same_body = true to send it to every intent"
            ),
        ));
    }
    let id = r.id.get_ref().clone();
    let spec = RequestSpec {
        group: id.clone(),
        intent: r.intent.clone().unwrap_or_else(|| id.clone()),
        id,
        user: match r.user.as_deref() {
            None => Some("u1".into()),
            Some("") => None,
            Some(u) => Some(u.into()),
        },
        tenant: r.tenant.clone().filter(|t| !t.is_empty()),
        clock_skew_us: match &r.clock_skew_ms {
            None => None,
            Some(v) if v.get_ref().abs() <= 86_400_000.0 => {
                Some((v.get_ref() * 1000.0).round() as i64)
            }
            Some(v) => {
                return Err(file.err(v.span(), "clock_skew_ms: expected -86400000..=86400000"));
            }
        },
        if_match: match &r.if_match {
            None => None,
            Some(v) => match v.get_ref() {
                toml::Value::Integer(i) if *i >= 1 => Some(format!("\"{i}\"")),
                toml::Value::String(s) => Some(s.clone()),
                _ => {
                    return Err(file.err(
                        v.span(),
                        "if_match: expected a version (1, 2, …) or the header's text",
                    ));
                }
            },
        },
        method: r.method.clone().unwrap_or_else(|| "POST".into()),
        path: r.path.clone().unwrap_or_else(|| "/api/orders".into()),
        key: r.key.clone(),
        body,
        copies,
        spread_us: file.ms_range(
            "spread_ms",
            &r.spread_ms,
            (0, 0),
            |lo, hi| lo <= hi,
            "[low, high] with low <= high",
        )?,
        route,
        after: names.after_list(&r.after)?,
        delay_us,
        timeout_us,
        policy,
        expect,
    };
    Ok((spec, Intents { n: intents, same_body, gap_us }))
}

/// A `retry` table.
fn parse_retry(file: Source, rt: &RetryFile) -> Result<Policy, InputError> {
    let max_attempts = match &rt.max_attempts {
        None => 5,
        Some(m) if (1..=100).contains(m.get_ref()) => *m.get_ref(),
        Some(m) => return Err(file.err(m.span(), "retry.max_attempts: expected 1..=100")),
    };
    let default_on = [
        Spanned::new(0..0, toml::Value::String("transport".into())),
        Spanned::new(0..0, toml::Value::Integer(503)),
    ];
    let mut on = RetryOn::default();
    for o in rt.on.as_deref().unwrap_or(&default_on) {
        match o.get_ref() {
            toml::Value::String(s) if s == "transport" => on.transport = true,
            toml::Value::String(s) if s == "5xx" => on.statuses.extend([500, 502, 503, 504]),
            toml::Value::Integer(s) if [202, 409, 425, 429, 500, 502, 503, 504].contains(s) => {
                on.statuses.insert(*s as u16);
            }
            _ => {
                return Err(file.err(
                    o.span(),
                    "retry.on: expected \"transport\", \"5xx\" (500, 502, 503, 504) or one of \
                     202, 409, 425, 429, 500, 502, 503, 504 (never 400/401/422)",
                ));
            }
        }
    }
    let backoff_us = file.ms("retry.backoff_ms", &rt.backoff_ms, 100_000, 0)?;
    let backoff_cap_us = file.ms("retry.backoff_cap_ms", &rt.backoff_cap_ms, 5_000_000, 0)?;
    let horizon_us = rt
        .horizon_ms
        .is_some()
        .then(|| file.ms("retry.horizon_ms", &rt.horizon_ms, 0, 0))
        .transpose()?;
    Ok(Policy {
        max_attempts,
        on,
        backoff_us,
        backoff_cap_us: backoff_cap_us.max(backoff_us),
        jitter: rt.jitter.unwrap_or(true),
        horizon_us,
        new_key_per_attempt: rt.new_key.unwrap_or(false),
        retry_body: rt.body.clone(),
    })
}

/// A request's `expect` table.
fn parse_request_expect(
    file: Source,
    e: &RequestExpectFile,
    names: &Names,
) -> Result<RequestExpect, InputError> {
    let outcome = file.choice(
        &e.outcome,
        "expect.outcome",
        &[("reply", Outcome::Reply), ("transport-failure", Outcome::TransportFailure)],
    );
    let outcome = match outcome {
        Ok(o) => o,
        Err(_) => {
            let span = e.outcome.as_ref().map(|o| o.span()).unwrap_or(0..0);
            return Err(
                file.err(span, "expect.outcome: expected \"reply\" or \"transport-failure\"")
            );
        }
    };
    if let Some(s) = &e.status
        && !(100..=599).contains(s.get_ref())
    {
        return Err(
            file.err(s.span(), format!("expect.status {}: expected 100..=599", s.get_ref()))
        );
    }
    Ok(RequestExpect {
        status: e.status.as_ref().map(|s| *s.get_ref()),
        outcome,
        replayed: e.replayed,
        id: e.id,
        same_id_as: e.same_id_as.as_ref().map(|s| names.known_request(s)).transpose()?,
        id_differs_from: e.id_differs_from.as_ref().map(|s| names.known_request(s)).transpose()?,
        same_id: e.same_id,
        rows_after: e.rows_after,
        keys_after: e.keys_after,
        responses_after: e.responses_after,
    })
}

/// `intents = N`: N logical operations one after the other, each with its own intent id, key
/// and order (unless `same_body`), each `gap_ms` after the previous one has finished. Others'
/// `after = "<id>"` waits for the last one.
fn expand_intents(base: &RequestSpec, how: &Intents) -> Vec<RequestSpec> {
    (1..=how.n)
        .map(|n| {
            let mut q = base.clone();
            q.id = format!("{}-{n}", base.id);
            q.intent = format!("{}-{n}", base.intent);
            q.key = base.key.as_ref().map(|k| format!("{k}-{n}"));
            if !how.same_body
                && let Some(b) = intent_body(&base.body, n)
            {
                q.body = b;
            }
            if n > 1 {
                q.after = vec![format!("{}-{}", base.id, n - 1)];
                q.delay_us = how.gap_us;
            }
            q
        })
        .collect()
}

/// The order intent `n` (1-based) of an `intents = N` request sends: the body as written for
/// the first, then the next orders after it in a fixed cycle of the 30 valid ones (`qty` 1..=10
/// of each catalogue item, qty first), so N intents send N different orders for N <= 30 and a
/// payload-derived key or dedupe cannot merge them. None when the body is not an order
/// (`{"item": <catalogue item>, "qty": 1..=10}`, nothing else).
pub fn intent_body(body: &str, n: u32) -> Option<String> {
    use crate::http::CATALOGUE;
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let o = v.as_object().filter(|o| o.len() == 2)?;
    let item = CATALOGUE.iter().position(|c| o.get("item").and_then(|i| i.as_str()) == Some(*c))?;
    let qty = o.get("qty").and_then(|q| q.as_i64()).filter(|q| (1..=10).contains(q))?;
    if n <= 1 {
        return Some(body.to_string());
    }
    let cycle = CATALOGUE.len() * 10;
    let k = (item * 10 + (qty as usize - 1) + (n as usize - 1)) % cycle;
    Some(format!(r#"{{"item":"{}","qty":{}}}"#, CATALOGUE[k / 10], k % 10 + 1))
}

/// Point `after` and expectation references at the last of an expanded request.
fn link_requests(
    mut requests: Vec<RequestSpec>,
    rename: &impl Fn(&String) -> String,
) -> Vec<RequestSpec> {
    for q in &mut requests {
        q.after = q.after.iter().map(rename).collect();
        q.expect.same_id_as = q.expect.same_id_as.as_ref().map(rename);
        q.expect.id_differs_from = q.expect.id_differs_from.as_ref().map(rename);
    }
    requests
}

/// Every `[[action]]`.
fn parse_actions(
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
fn check_no_cycles(
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
fn parse_injects(file: Source, f: &SimFile) -> Result<Vec<Inject>, InputError> {
    let mut injects = Vec::new();
    for i in &f.injects {
        let point = i.point.get_ref().trim_start_matches('@').to_string();
        if !is_kebab(&point) {
            return Err(
                file.err(i.point.span(), "point: expected a point name such as before-commit")
            );
        }
        let action = match i.action.get_ref().as_str() {
            "fail" => InjectAction::Fail,
            "effect" => InjectAction::Effect { fallback: i.fallback.unwrap_or(false) },
            "drop-reply" => InjectAction::DropReply,
            "crash" => InjectAction::Crash {
                restart_us: file.ms("restart_ms", &i.restart_ms, 100_000, 0)?,
            },
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
        let rate = match &i.rate {
            None => 1.0,
            Some(r) if (0.0..=1.0).contains(r.get_ref()) => *r.get_ref(),
            Some(r) => {
                return Err(file.err(
                    r.span(),
                    format!("rate {}: expected a probability in 0.0..=1.0", r.get_ref()),
                ));
            }
        };
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

/// The `[faults]` section and the `[[partition]]` windows.
fn parse_faults(file: Source, f: &SimFile, processes: usize) -> Result<Faults, InputError> {
    let rate = |r: &Option<Spanned<f64>>, what: &str| -> Result<f64, InputError> {
        match r {
            None => Ok(0.0),
            Some(r) if (0.0..=1.0).contains(r.get_ref()) => Ok(*r.get_ref()),
            Some(r) => Err(file.err(
                r.span(),
                format!("faults.{what} = {}: expected a probability in 0.0..=1.0", r.get_ref()),
            )),
        }
    };
    let ff = &f.faults;
    let delay_us = file.ms_range(
        "faults.delay_ms",
        &ff.delay_ms,
        (10_000, 500_000),
        |lo, hi| lo <= hi,
        "[low, high] with low <= high",
    )?;
    let mut partitions = Vec::new();
    for p in &f.partitions {
        if !(1..=processes).contains(p.process.get_ref()) {
            return Err(
                file.err(p.process.span(), format!("partition.process: expected 1..={processes}"))
            );
        }
        let some = |v: &Spanned<f64>| Some(v.clone());
        partitions.push(Partition {
            process: p.process.get_ref() - 1,
            from_us: file.ms("partition.from_ms", &some(&p.from_ms), 0, 0)?,
            for_us: file.ms("partition.for_ms", &some(&p.for_ms), 0, 0)?,
        });
    }
    let effects = EffectFaults {
        drop: rate(&ff.effects.drop, "effects.drop")?,
        ack_drop: rate(&ff.effects.ack_drop, "effects.ack_drop")?,
        duplicate: rate(&ff.effects.duplicate, "effects.duplicate")?,
        error_after_success: rate(&ff.effects.error_after_success, "effects.error_after_success")?,
        delay: rate(&ff.effects.delay, "effects.delay")?,
        delay_us: file.ms_range(
            "faults.effects.delay_ms",
            &ff.effects.delay_ms,
            (100_000, 2_000_000),
            |lo, hi| lo <= hi,
            "[low, high] with low <= high",
        )?,
        decline: rate(&ff.effects.decline, "effects.decline")?,
    };
    let cache = CacheFaults {
        unavailable: rate(&ff.cache.unavailable, "cache.unavailable")?,
        evict: rate(&ff.cache.evict, "cache.evict")?,
        restart: rate(&ff.cache.restart, "cache.restart")?,
        reply_drop: rate(&ff.cache.reply_drop, "cache.reply_drop")?,
    };
    let crash_signal = file
        .choice(
            &ff.crash_signal,
            "faults.crash_signal",
            &[("reset", CrashSignal::Reset), ("silence", CrashSignal::Silence)],
        )?
        .unwrap_or_default();
    Ok(Faults {
        effects,
        cache,
        crash_signal,
        commit_lost: rate(&ff.commit_lost, "commit_lost")?,
        duplicate_after_us: file.ms_range(
            "faults.duplicate_after_ms",
            &ff.duplicate_after_ms,
            (0, 25_000),
            |lo, hi| lo <= hi,
            "[low, high] with low <= high",
        )?,
        request_drop: rate(&ff.request_drop, "request_drop")?,
        reply_drop: rate(&ff.reply_drop, "reply_drop")?,
        reply_drop_after_commit: rate(&ff.reply_drop_after_commit, "reply_drop_after_commit")?,
        duplicate: rate(&ff.duplicate, "duplicate")?,
        delay: rate(&ff.delay, "delay")?,
        delay_us,
        crash: rate(&ff.crash, "crash")?,
        restart_us: file.ms("faults.restart_ms", &ff.restart_ms, 100_000, 0)?,
        gc_every_us: ff
            .gc_every_ms
            .is_some()
            .then(|| file.ms("faults.gc_every_ms", &ff.gc_every_ms, 0, 1))
            .transpose()?,
        partitions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> Result<Sim, InputError> {
        Sim::parse(Path::new("s.toml"), src)
    }

    #[test]
    fn minimal_sim_has_defaults() {
        let s = parse("[[request]]\nid = \"a\"\nkey = \"k1\"\n").unwrap();
        assert_eq!(s.requests[0].user.as_deref(), Some("u1"));
        assert_eq!(s.requests[0].policy.max_attempts, 1);
        assert_eq!(s.seeds, DEFAULT_SEEDS);
    }

    #[test]
    fn bad_rate_is_located() {
        let e = parse(
            "[[request]]\nid = \"a\"\n[[inject]]\npoint = \"x\"\naction = \"fail\"\nrate = 1.5\n",
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "s.toml:6:8: rate 1.5: expected a probability in 0.0..=1.0");
    }

    #[test]
    fn unknown_after_is_located() {
        let e = parse("[[request]]\nid = \"a\"\nafter = \"b\"\n").unwrap_err();
        assert_eq!(e.to_string(), "s.toml:3:9: after: unknown request or action `b`");
    }

    #[test]
    fn intents_send_different_orders_unless_same_body() {
        let s = parse("[[request]]\nid = \"o\"\nintents = 3\n").unwrap();
        let bodies: Vec<&str> = s.requests.iter().map(|q| q.body.as_str()).collect();
        assert_eq!(
            bodies,
            [
                r#"{"item":"test-item","qty":2}"#,
                r#"{"item":"test-item","qty":3}"#,
                r#"{"item":"test-item","qty":4}"#
            ]
        );
        let s =
            parse("[[request]]\nid = \"o\"\nintents = 3\nsame_body = true\ngap_ms = 5\n").unwrap();
        assert!(s.requests.iter().all(|q| q.body == default_body()));
        let delays: Vec<u64> = s.requests.iter().map(|q| q.delay_us).collect();
        assert_eq!(delays, [0, 5000, 5000]);
        // The first keeps its text as written; the cycle runs through every item.
        let body = r#"{ "qty": 10, "item": "other-item" }"#;
        assert_eq!(intent_body(body, 1).as_deref(), Some(body));
        assert_eq!(intent_body(body, 2).as_deref(), Some(r#"{"item":"test-item","qty":1}"#));
        let all: BTreeSet<String> = (1..=30).map(|n| intent_body(body, n).unwrap()).collect();
        assert_eq!(all.len(), 30);
    }

    #[test]
    fn intents_of_a_body_that_is_no_order_need_same_body() {
        let e = parse("[[request]]\nid = \"o\"\nintents = 2\nbody = \"nope\"\n").unwrap_err();
        assert!(e.to_string().starts_with("s.toml:3:11: intents = 2: each intent sends"), "{e}");
        parse("[[request]]\nid = \"o\"\nintents = 2\nbody = \"nope\"\nsame_body = true\n").unwrap();
        let e = parse("[[request]]\nid = \"o\"\nsame_body = 1\n").unwrap_err();
        assert!(e.to_string().starts_with("s.toml:3:13: "), "{e}");
    }

    #[test]
    fn unknown_action_is_located() {
        let e = parse("[[request]]\nid = \"a\"\n[[inject]]\npoint = \"x\"\naction = \"explode\"\n")
            .unwrap_err();
        assert!(e.to_string().starts_with("s.toml:5:10: unknown inject action `explode`"), "{e}");
    }
}
