//! The sim's types: `Sim` and its parts (requests and their retry policy and expectations,
//! actions, injections, faults, the world), the bounds a sim is held to, and the questions
//! asked of a loaded sim.

use std::collections::BTreeSet;
use std::ops::Range;
use std::path::PathBuf;

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
    /// Retry after a transport failure (no reply within the timeout, a reset connection).
    pub transport: bool,
    /// Retry after a reply with one of these statuses.
    pub statuses: BTreeSet<u16>,
}

/// A client's retry policy for one request's attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Attempts in all, the first included (1 = no retry).
    pub max_attempts: u32,
    /// What the client retries on.
    pub on: RetryOn,
    /// Backoff before retry n (µs): base * 2^(n-1), capped, plus jitter drawn from the seed.
    pub backoff_us: u64,
    /// The cap on the backoff before jitter (µs).
    pub backoff_cap_us: u64,
    /// Add jitter drawn from the seed to each backoff.
    pub jitter: bool,
    /// No retry starts later than this after the first attempt.
    pub horizon_us: Option<u64>,
    /// The client abandons its first attempt after this long (µs) and sends the retry at
    /// once, whatever the attempt saw (`retry.abandon_first_ms`: a browser's or a mobile
    /// client's short first timeout); later attempts wait `timeout_ms` and back off. None:
    /// every attempt waits `timeout_ms`.
    pub abandon_first_us: Option<u64>,
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
            abandon_first_us: None,
            new_key_per_attempt: false,
            retry_body: None,
        }
    }
}

/// What a client does after an attempt ([`RequestSpec::after_attempt`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextAttempt {
    /// No more attempts: the outcome is final, or the attempts are spent.
    Stop,
    /// The next attempt goes out now (an abandoned first attempt).
    AtOnce,
    /// The next attempt goes out after the policy's backoff (and its horizon check).
    AfterBackoff,
}

/// What must hold for one request (for its final attempt, for every copy).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestExpect {
    /// The final attempt's status.
    pub status: Option<u16>,
    /// How the final attempt ended (a reply, a transport failure).
    pub outcome: Option<Outcome>,
    /// Whether the final reply was a replayed stored outcome.
    pub replayed: Option<bool>,
    /// The `id` in the final reply's JSON body.
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
    /// How long attempt `attempt` (1-based) waits for its reply (µs): the first one's
    /// `abandon_first_ms` if the policy sets it, else `timeout_ms`.
    pub fn attempt_timeout_us(&self, attempt: u32) -> u64 {
        match self.policy.abandon_first_us {
            Some(us) if attempt == 1 => us,
            _ => self.timeout_us,
        }
    }

    /// What the client does after attempt `attempt` (1-based) ended with `status` (None: no
    /// reply): the one retry decision of the simulated and the real client.
    pub fn after_attempt(&self, attempt: u32, status: Option<u16>) -> NextAttempt {
        let policy = &self.policy;
        if attempt >= policy.max_attempts {
            return NextAttempt::Stop;
        }
        // An abandoned first attempt goes again at once, whatever `retry.on` says.
        if attempt == 1 && status.is_none() && policy.abandon_first_us.is_some() {
            return NextAttempt::AtOnce;
        }
        let retry = match status {
            None => policy.on.transport,
            Some(s) => policy.on.statuses.contains(&s),
        };
        if retry { NextAttempt::AfterBackoff } else { NextAttempt::Stop }
    }

    /// The key attempt `attempt` (1-based) sends: the spec's, or a fresh one per retry with
    /// `new_key_per_attempt`.
    pub fn attempt_key(&self, attempt: u32) -> Option<String> {
        self.key.as_ref().map(|k| {
            if self.policy.new_key_per_attempt && attempt > 1 {
                format!("{k}-{attempt}")
            } else {
                k.clone()
            }
        })
    }

    /// The HTTP request of attempt `attempt`: method, path, body and headers, in one order
    /// for the simulated and the real client. `client_time_ms`: the client's clock, sent as
    /// `X-Client-Time` when the spec has a clock skew.
    pub fn request(
        &self,
        attempt: u32,
        key: Option<&str>,
        client_time_ms: Option<i64>,
    ) -> crate::http::Request {
        use crate::http;
        let mut headers: Vec<http::Header> = Vec::with_capacity(7);
        headers.push((http::CONTENT_TYPE.into(), "application/json".into()));
        if let Some(u) = &self.user {
            headers.push((http::USER_HEADER.into(), u.clone().into()));
        }
        if let Some(t) = &self.tenant {
            headers.push((http::TENANT_HEADER.into(), t.clone().into()));
        }
        if let Some(t) = client_time_ms {
            headers.push((http::CLIENT_TIME_HEADER.into(), t.to_string().into()));
        }
        if let Some(m) = &self.if_match {
            headers.push((http::IF_MATCH_HEADER.into(), m.clone().into()));
        }
        if let Some(k) = key {
            headers.push((http::KEY_HEADER.into(), k.to_string().into()));
        }
        headers.push((http::INTENT_HEADER.into(), self.intent.clone().into()));
        http::Request {
            method: self.method.clone(),
            path: self.path.clone(),
            headers,
            body: self.body_for(attempt).as_bytes().to_vec(),
        }
    }

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
    /// Does the client need the observer's probe after this request (one of `rows_after`, `keys_after`, `responses_after` is set)?
    pub fn needs_probe(&self) -> bool {
        self.rows_after.is_some() || self.keys_after.is_some() || self.responses_after.is_some()
    }
}

/// One `[[request]]` of a sim (one of its `intents` when it has several), checked: what its client sends, when, how it retries, and what must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestSpec {
    /// The request's id (unique in the sim; `group-N` for an expanded intent).
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
    /// The HTTP method sent.
    pub method: String,
    /// The path sent.
    pub path: String,
    /// The `Idempotency-Key` sent (None: not sent).
    pub key: Option<String>,
    /// The body of the first attempt (see `Policy::retry_body` for retries).
    pub body: String,
    /// Concurrent copies of each attempt (double submit; 20 in case 11).
    pub copies: u32,
    /// Each copy leaves after a delay drawn from this range (µs): a client sending its copies
    /// one after the other, spread over a window. [0, 0]: all at once.
    pub spread_us: (u64, u64),
    /// Which server process each attempt goes to.
    pub route: Route,
    /// Starts when all of these (requests or actions) have finished.
    pub after: Vec<String>,
    /// Wait (µs) after `after` before starting.
    pub delay_us: u64,
    /// How long (µs) the client waits for a reply before it sees a transport failure.
    pub timeout_us: u64,
    /// How the client retries.
    pub policy: Policy,
    /// What must hold for the request's final attempts.
    pub expect: RequestExpect,
}

/// What a `[[action]]` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionKind {
    /// Another connection takes `BEGIN IMMEDIATE` and holds it until `until` has finished or
    /// `for_us` has passed.
    HoldLock {
        /// Hold until this request or action has finished.
        until: Option<String>,
        /// Hold for this long (µs).
        for_us: Option<u64>,
    },
    /// Delete every stored key (an operator or a collector wiping the key store).
    DeleteKeys,
}

/// One `[[action]]`: an operation on the database by the control node, ordered with the requests by `after` and `delay_us`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionSpec {
    /// The action's id (shares one namespace with the requests' ids).
    pub id: String,
    /// What the action does.
    pub kind: ActionKind,
    /// Starts when all of these (requests or actions) have finished.
    pub after: Vec<String>,
    /// Wait (µs) after `after` before starting.
    pub delay_us: u64,
}

/// What an `[[inject]]` does at its point.
#[derive(Debug, Clone, PartialEq)]
pub enum InjectAction {
    /// The step fails: an error, handled by the model's on_error (→ 500).
    Fail,
    /// An external effect is performed (counted by the receiver) here. A fallback effect
    /// fires only in designs with no effect step of their own: it is where the operation's
    /// external call goes when the design does not say.
    Effect {
        /// Fires only when the design has no effect step of its own.
        fallback: bool,
    },
    /// The connection drops: the request goes on, the reply is never sent.
    DropReply,
    /// The server process crashes here; it restarts after `restart_us`.
    Crash {
        /// How long (µs) the process stays down.
        restart_us: u64,
    },
    /// The request waits here for `us` on something asynchronous (a slow downstream call):
    /// an await; the process's event loop serves its other requests meanwhile.
    Pause {
        /// The wait (µs).
        us: u64,
    },
    /// The whole process stops here for `us` (a stop-the-world GC pause, a VM or container
    /// frozen, SIGSTOP): none of its tasks runs, whatever its driver; messages to it queue.
    Stall {
        /// The stall (µs).
        us: u64,
    },
    /// The process's clock jumps by `us` (may be negative): an NTP step, a VM resumed.
    ClockJump {
        /// The jump (µs, may be negative).
        us: i64,
    },
}

impl InjectAction {
    /// The action's name as written in sim files (`fail`, `effect`, `drop-reply` …).
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

/// One `[[inject]]`: an action fired at a named point of the model's program.
#[derive(Debug, Clone, PartialEq)]
pub struct Inject {
    /// Point name without the `@`.
    pub point: String,
    /// What happens at the point.
    pub action: InjectAction,
    /// Only requests with this id (all copies and attempts); None: every request.
    pub request: Option<String>,
    /// Fires at most this many times in a run.
    pub times: Option<u32>,
    /// Fires with this probability, drawn from the seed (1.0 when absent).
    pub rate: f64,
}

/// The `[world]` section: the server processes, the network and the run's bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldSpec {
    /// Number of server processes.
    pub processes: usize,
    /// Overrides the model's wait budget (µs).
    pub wait_budget_us: Option<u64>,
    /// Default time (µs) a client waits for a reply (a request's `timeout_ms` unless it sets its own).
    pub client_timeout_us: u64,
    /// Network latency per message (µs, inclusive range).
    pub latency_us: (u64, u64),
    /// The client's gap between its connection being established and its request's bytes
    /// arriving (µs, inclusive range; `[world] connect_gap_ms`). How the server takes in the
    /// connection and the bytes is its stack's runtime (the model's), never the sim's.
    pub connect_gap_us: (u64, u64),
    /// How the server processes start: cold (fresh: the first connection and the first
    /// request of each run cold code, as `real` runs them) or warm (they have served before).
    /// A process restarted after a crash is fresh, so cold, either way.
    pub start: Start,
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

/// How a sim's server processes start (`[world] start`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Start {
    /// Freshly started: a process's first accept and first request cost what a fresh
    /// process's do (the stack's `first_accept_ms`, `first_handler_ms`).
    #[default]
    Cold,
    /// Already warm: every accept and request costs a warm one's.
    Warm,
}

impl Start {
    /// The word in reports.
    pub fn name(self) -> &'static str {
        match self {
            Start::Cold => "cold",
            Start::Warm => "warm",
        }
    }
}

/// The sim's `[expect]`: what must hold at the end of the run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Expect {
    /// Business rows at the end.
    pub rows: Option<u64>,
    /// Stored key records at the end.
    pub keys: Option<u64>,
    /// External effects the receiver counted (after deduplication).
    pub effects: Option<u64>,
    /// `qty` of every row, in id order.
    pub row_qty: Option<Vec<i64>>,
}

/// A scenario, loaded and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Sim {
    /// The sim's name (its file name without `.toml`).
    pub name: String,
    /// The file it was loaded from.
    pub path: PathBuf,
    /// What the sim is about, in words.
    pub description: String,
    /// The seeds a sweep runs by default (from the file, else [`DEFAULT_SEEDS`]).
    pub seeds: Range<u64>,
    /// The world: processes, network, bounds.
    pub world: WorldSpec,
    /// The requests, in file order (intents expanded).
    pub requests: Vec<RequestSpec>,
    /// The actions, in file order.
    pub actions: Vec<ActionSpec>,
    /// The injections, in file order.
    pub injects: Vec<Inject>,
    /// The random faults.
    pub faults: Faults,
    /// What must hold at the end.
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
    /// Model time (µs) the partition starts.
    pub from_us: u64,
    /// How long (µs) it lasts.
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
    /// The stall before the resend (µs, inclusive range).
    pub duplicate_after_us: (u64, u64),
    /// A message is held back by an extra delay drawn from `delay_us` (reorders messages).
    pub delay: f64,
    /// The extra delay (µs, inclusive range).
    pub delay_us: (u64, u64),
    /// A server process crashes at a step boundary with this probability per step.
    pub crash: f64,
    /// How long (µs) a crashed process stays down before it restarts.
    pub restart_us: u64,
    /// What the client of a crashed process sees: a reset connection at once (a process that
    /// dies: its kernel resets its connections and refuses new ones), or silence until its
    /// timeout (a machine that dies).
    pub crash_signal: CrashSignal,
    /// Period of the key collector (deletes keys older than the model's `retention_us`).
    pub gc_every_us: Option<u64>,
    /// Windows in which a process is cut off from the network.
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
    /// The late answer's extra delay (µs, inclusive range).
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

/// A fault rate's place in [`Faults`], for [`Faults::kinds`] and [`Faults::without`].
type RateField = fn(&mut Faults) -> &mut f64;

/// Every per-message or per-step fault rate, by the name `describe` prints.
const RATE_KINDS: [(&str, RateField); 17] = [
    ("request_drop", |f| &mut f.request_drop),
    ("reply_drop", |f| &mut f.reply_drop),
    ("reply_drop_after_commit", |f| &mut f.reply_drop_after_commit),
    ("duplicate", |f| &mut f.duplicate),
    ("delay", |f| &mut f.delay),
    ("crash", |f| &mut f.crash),
    ("commit_lost", |f| &mut f.commit_lost),
    ("effects.drop", |f| &mut f.effects.drop),
    ("effects.ack_drop", |f| &mut f.effects.ack_drop),
    ("effects.duplicate", |f| &mut f.effects.duplicate),
    ("effects.error_after_success", |f| &mut f.effects.error_after_success),
    ("effects.delay", |f| &mut f.effects.delay),
    ("effects.decline", |f| &mut f.effects.decline),
    ("cache.unavailable", |f| &mut f.cache.unavailable),
    ("cache.evict", |f| &mut f.cache.evict),
    ("cache.restart", |f| &mut f.cache.restart),
    ("cache.reply_drop", |f| &mut f.cache.reply_drop),
];

impl Faults {
    /// The kinds of fault this sim configures, in a fixed order: every nonzero rate (by the
    /// name `describe` prints), `gc` when the key collector runs and `partitions` when there
    /// is a `[[partition]]` window. Scripted `[[inject]]`s and `[[action]]`s are not kinds:
    /// they are the scenario a sim is about, not random faults (swarm testing toggles kinds).
    pub fn kinds(&self) -> Vec<&'static str> {
        let mut f = self.clone();
        let mut v: Vec<&'static str> =
            RATE_KINDS.iter().filter(|(_, r)| *r(&mut f) > 0.0).map(|(n, _)| *n).collect();
        if self.gc_every_us.is_some() {
            v.push("gc");
        }
        if !self.partitions.is_empty() {
            v.push("partitions");
        }
        v
    }

    /// These faults with the named kinds ([`Faults::kinds`]) off: their rates zero, no key
    /// collector (`gc`), no partition windows (`partitions`); unknown names are ignored.
    pub fn without(&self, kinds: &[&str]) -> Faults {
        let mut f = self.clone();
        for (n, r) in RATE_KINDS {
            if kinds.contains(&n) {
                *r(&mut f) = 0.0;
            }
        }
        if kinds.contains(&"gc") {
            f.gc_every_us = None;
        }
        if kinds.contains(&"partitions") {
            f.partitions.clear();
        }
        f
    }

    /// These faults with the named rate kinds ([`Faults::kinds`]) at their top edge, 1.0 (every
    /// draw fires); `gc`, `partitions` and unknown names are left as they are.
    pub fn at_top(&self, kinds: &[&str]) -> Faults {
        let mut f = self.clone();
        for (n, r) in RATE_KINDS {
            if kinds.contains(&n) && *r(&mut f) > 0.0 {
                *r(&mut f) = 1.0;
            }
        }
        f
    }

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

/// The seeds of a sim that names none: 0 to 99.
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

impl Sim {
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
