//! Coverage of dangerous moments (`sweep --coverage`, `matrix --coverage`): named interleavings
//! in the model's own terms, each a pure function of one run's event history (and the keys the
//! run collected), in the spirit of "sometimes" assertions: a sweep counts the seeds that
//! reached each, and a static judgement from the model's program and the sim says which are
//! possible at all, so a clean result says what it covered.
//!
//! An *execution* is one arrival of an attempt at a server (`Arrived` … its `Reply`, dropped
//! connection, lost reply, deadline kill or its process's crash); a network duplicate of an
//! attempt is a second execution of the same actor. Its *key* is (user, tenant, the key the
//! attempt sent). Its *window* opens at its lookup miss (or claim, takeover, retaking a failed
//! record, ignoring one in flight) and closes when its saved response becomes durable (the
//! save outside a transaction, else the `COMMIT` after it), at a rollback, a released,
//! unlocked or failed-marked claim, or when the execution ends. Its effect is *pending* from
//! its effect call (or an injected effect) until its next durable write (a `COMMIT`, or a
//! row, response or claim completion written outside a transaction).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::history::{Actor, Event, History, Node, What};
use crate::model::{ClaimCleanup, Expiry, KeyStore, Model, Step};
use crate::report::{Collected, RunReport};
use crate::run::{self, RunError};
use crate::scenario::{ActionKind, InjectAction, Sim};

/// A named dangerous moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Moment {
    /// A lookup missed while another execution of the same key had its window open.
    LookupMissedInWindow,
    /// A retry (or network duplicate) of an attempt arrived while an attempt of the same
    /// request copy still ran.
    RetryWhileOriginalRan,
    /// Two copies of one intent (copies, or requests sharing the intent) ran at once.
    CopiesRanAtOnce,
    /// A process crashed while one of its executions had called its effect and not yet made
    /// a durable write after it.
    CrashBetweenEffectAndCommit,
    /// A key record of an intent was collected (gc, ttl, delete-keys, on-read expiry) and a
    /// request of that intent sent the key again afterwards.
    KeyCollectedWhileRetrying,
    /// A claim was taken over (lease expired, or the completer) while another execution of
    /// its key still ran.
    ClaimTakenWhileRunning,
    /// A success reply never reached its client (lost after commit, dropped, connection
    /// dropped).
    ReplyLostAfterCommit,
    /// The connection to the database was lost around a COMMIT.
    CommitLost,
}

impl Moment {
    /// Every moment, in report order.
    pub const ALL: [Moment; 8] = [
        Moment::LookupMissedInWindow,
        Moment::RetryWhileOriginalRan,
        Moment::CopiesRanAtOnce,
        Moment::CrashBetweenEffectAndCommit,
        Moment::KeyCollectedWhileRetrying,
        Moment::ClaimTakenWhileRunning,
        Moment::ReplyLostAfterCommit,
        Moment::CommitLost,
    ];

    /// The moment's kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            Moment::LookupMissedInWindow => "lookup-missed-in-window",
            Moment::RetryWhileOriginalRan => "retry-while-original-ran",
            Moment::CopiesRanAtOnce => "copies-ran-at-once",
            Moment::CrashBetweenEffectAndCommit => "crash-between-effect-and-commit",
            Moment::KeyCollectedWhileRetrying => "key-collected-while-retrying",
            Moment::ClaimTakenWhileRunning => "claim-taken-while-running",
            Moment::ReplyLostAfterCommit => "reply-lost-after-commit",
            Moment::CommitLost => "commit-lost",
        }
    }

    /// One line on what the moment is.
    pub fn meaning(self) -> &'static str {
        match self {
            Moment::LookupMissedInWindow => {
                "a lookup missed while another execution of the key was inside its check-to-save \
                 window"
            }
            Moment::RetryWhileOriginalRan => {
                "a retry or network duplicate arrived while an attempt of its request still ran"
            }
            Moment::CopiesRanAtOnce => "two copies of one intent ran on servers at once",
            Moment::CrashBetweenEffectAndCommit => {
                "a process crashed with an execution's effect done and its commit not"
            }
            Moment::KeyCollectedWhileRetrying => {
                "an intent's key record was collected and its client sent the key again"
            }
            Moment::ClaimTakenWhileRunning => {
                "a claim was taken over while another execution of its key still ran"
            }
            Moment::ReplyLostAfterCommit => "a success reply never reached its client",
            Moment::CommitLost => "the database connection was lost around a COMMIT",
        }
    }

    /// The moment named `name`.
    pub fn from_name(name: &str) -> Option<Moment> {
        Moment::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// A key's identity: the request's user and tenant and the key sent.
type KeyId = (Option<String>, Option<String>, String);

/// One running execution (see the module's words).
#[derive(Debug, Clone, Default)]
struct Exec {
    server: u32,
    count: u32,
    window: bool,
    in_tx: bool,
    stored: bool,
    effect_pending: bool,
    /// A 2xx outcome saved (durable once committed, or at once outside a transaction).
    ok_saved: bool,
    /// A 2xx outcome saved and durable: a crash before the reply loses a committed success.
    ok_durable: bool,
}

/// The scan of one history: what runs, and the moments reached.
struct Scan<'a> {
    sim: &'a Sim,
    keys: BTreeMap<Actor, KeyId>,
    running: BTreeMap<Actor, Exec>,
    reached: Vec<Moment>,
}

/// (req, copy) of an attempt.
fn req_copy(a: &Actor) -> Option<(u32, u32)> {
    match a {
        Actor::Attempt { req, copy, .. } => Some((*req, *copy)),
        _ => None,
    }
}

impl Scan<'_> {
    fn mark(&mut self, m: Moment) {
        if !self.reached.contains(&m) {
            self.reached.push(m);
        }
    }

    fn intent(&self, a: &Actor) -> Option<&str> {
        let (req, _) = req_copy(a)?;
        self.sim.requests.get(req as usize).map(|r| r.intent.as_str())
    }

    fn key_id(&self, req: u32, key: &str) -> Option<KeyId> {
        let r = self.sim.requests.get(req as usize)?;
        Some((r.user.clone(), r.tenant.clone(), key.to_string()))
    }

    /// Another running execution of `a`'s key with its window open?
    fn other_window_open(&self, a: &Actor) -> bool {
        let Some(k) = self.keys.get(a) else { return false };
        self.running.iter().any(|(o, e)| o != a && e.window && self.keys.get(o) == Some(k))
    }

    fn arrived(&mut self, a: Actor, server: u32) {
        let (Some(rc), Some(intent)) = (req_copy(&a), self.intent(&a)) else { return };
        let (mut retry, mut copies) = (false, false);
        for o in self.running.keys() {
            if self.intent(o) != Some(intent) {
                continue;
            }
            if req_copy(o) == Some(rc) {
                retry = true;
            } else {
                copies = true;
            }
        }
        if retry {
            self.mark(Moment::RetryWhileOriginalRan);
        }
        if copies {
            self.mark(Moment::CopiesRanAtOnce);
        }
        let e = self.running.entry(a).or_insert_with(|| Exec { server, ..Exec::default() });
        e.count += 1;
    }

    fn end(&mut self, a: &Actor) {
        if let Some(e) = self.running.get_mut(a) {
            e.count -= 1;
            if e.count == 0 {
                self.running.remove(a);
            }
        }
    }

    fn crashed(&mut self, server: u32) {
        if self.running.values().any(|e| e.server == server && e.effect_pending) {
            self.mark(Moment::CrashBetweenEffectAndCommit);
        }
        // A success saved for good and not yet replied: the crash loses its reply.
        if self.running.values().any(|e| e.server == server && e.ok_durable) {
            self.mark(Moment::ReplyLostAfterCommit);
        }
        self.running.retain(|_, e| e.server != server);
    }

    /// A claim taken over by `a` (or the completer, `a` None, for `key`) while another
    /// execution of the key ran.
    fn taken_over(&mut self, a: Option<&Actor>, key: Option<KeyId>) {
        let k = a.and_then(|a| self.keys.get(a).cloned()).or(key);
        let Some(k) = k else { return };
        if self.running.keys().any(|o| Some(o) != a && self.keys.get(o) == Some(&k)) {
            self.mark(Moment::ClaimTakenWhileRunning);
        }
    }

    /// An event of an execution `a` at a server.
    fn step(&mut self, a: &Actor, what: &What) {
        let window_before = self.other_window_open(a);
        let own_intent = self.intent(a).map(str::to_string);
        let Some(e) = self.running.get_mut(a) else { return };
        flags(e, what);
        let lost_success = |s: &u16| (200..300).contains(s);
        match what {
            What::LookupMiss if window_before => self.mark(Moment::LookupMissedInWindow),
            What::TookOver => self.taken_over(Some(a), None),
            What::KeyExpired { intent } if own_intent.as_deref() == Some(intent.as_str()) => {
                self.mark(Moment::KeyCollectedWhileRetrying)
            }
            What::Reply { .. } | What::DeadlineKilled => self.end(a),
            What::ConnectionDropped { status } => {
                if lost_success(status) {
                    self.mark(Moment::ReplyLostAfterCommit);
                }
                self.end(a);
            }
            What::ReplyLostAfterCommit => {
                self.mark(Moment::ReplyLostAfterCommit);
                self.end(a);
            }
            _ => {}
        }
    }

    fn event(&mut self, ev: &Event) {
        match (&ev.node, &ev.who, &ev.what) {
            (Node::Client(_), Some(a @ Actor::Attempt { req, .. }), What::Sent { key, .. }) => {
                if let Some(k) = key.as_deref().and_then(|k| self.key_id(*req, k)) {
                    self.keys.insert(*a, k);
                }
            }
            (_, _, What::CommitLost { .. }) => self.mark(Moment::CommitLost),
            (_, _, What::ReplyDropped { status }) if (200..300).contains(status) => {
                self.mark(Moment::ReplyLostAfterCommit)
            }
            (Node::Server(s), Some(a @ Actor::Attempt { .. }), What::Arrived) => {
                self.arrived(*a, *s)
            }
            (Node::Server(s), _, What::ProcessCrashed) => self.crashed(*s),
            (_, Some(Actor::Completer), What::CompleterTookOver { key, .. }) => {
                let others: Vec<KeyId> =
                    self.keys.values().filter(|k| k.2 == *key).cloned().collect();
                for k in others {
                    self.taken_over(None, Some(k));
                }
            }
            (Node::Server(_), Some(a @ Actor::Attempt { .. }), w) => self.step(a, w),
            _ => {}
        }
    }
}

/// An execution's flags after one of its events (see the module's words).
fn flags(e: &mut Exec, what: &What) {
    match what {
        What::LookupMiss | What::Claimed | What::RetookFailed | What::InFlightIgnored => {
            e.window = true
        }
        What::TookOver => e.window = true,
        What::Begin { .. } => e.in_tx = true,
        What::Commit => {
            e.in_tx = false;
            e.effect_pending = false;
            e.window &= !e.stored;
            e.ok_durable |= e.ok_saved;
        }
        What::CommitNothingWritten => e.in_tx = false,
        What::Rollback => (e.in_tx, e.window, e.ok_saved) = (false, false, false),
        What::Stored { status } | What::ClaimCompleted { status } => {
            e.stored = true;
            e.ok_saved |= (200..300).contains(status);
            if !e.in_tx {
                (e.window, e.effect_pending) = (false, false);
                e.ok_durable |= e.ok_saved;
            }
        }
        What::RowInserted { .. } if !e.in_tx => e.effect_pending = false,
        What::ClaimReleased { .. }
        | What::KeyReleased { .. }
        | What::MarkedFailed { .. }
        | What::ClaimUnlocked { .. } => e.window = false,
        What::EffectCall { .. } | What::Injected { action: "effect", .. } => {
            e.effect_pending = true
        }
        _ => {}
    }
}

/// The moments one run reached, in [`Moment::ALL`] order: from its history and the key
/// records it collected (`collected`, the observation's).
pub fn reached(sim: &Sim, history: &History, collected: &[Collected]) -> Vec<Moment> {
    let mut scan =
        Scan { sim, keys: BTreeMap::new(), running: BTreeMap::new(), reached: Vec::new() };
    for ev in &history.events {
        scan.event(ev);
    }
    let resent = |c: &Collected| {
        history.events.iter().any(|ev| match (&ev.who, &ev.what) {
            (Some(Actor::Attempt { req, .. }), What::Sent { key: Some(k), .. }) => {
                ev.t_us >= c.at_us
                    && *k == c.key
                    && sim.requests.get(*req as usize).is_some_and(|r| r.intent == c.intent)
            }
            _ => false,
        })
    };
    if collected.iter().any(resent) {
        scan.mark(Moment::KeyCollectedWhileRetrying);
    }
    let mut r = scan.reached;
    r.sort_unstable();
    r
}

/// The moments the model's program and the sim make possible (a static judgement), in
/// [`Moment::ALL`] order. Conservative: a moment is left out only when the sim or the program
/// rules it out (no crash fault or crash injection → no crash moment, and so on); "possible"
/// does not mean every seed can reach it.
pub fn possible(sim: &Sim, model: &Model) -> Vec<Moment> {
    let f = &sim.faults;
    let inject = |p: fn(&InjectAction) -> bool| sim.injects.iter().any(|i| p(&i.action));
    let has = |s: Step| model.program.contains(&s);
    let retries = sim.requests.iter().any(|r| r.policy.max_attempts >= 2) || f.duplicate > 0.0;
    let mut intents: Vec<&str> = sim.requests.iter().map(|r| r.intent.as_str()).collect();
    let n = intents.len();
    intents.sort_unstable();
    intents.dedup();
    let copies = sim.requests.iter().any(|r| r.copies >= 2) || intents.len() < n;
    let mut keys: Vec<&str> = sim.requests.iter().filter_map(|r| r.key.as_deref()).collect();
    let keyed = !keys.is_empty() && model.key.is_some();
    let nk = keys.len();
    keys.sort_unstable();
    keys.dedup();
    let same_key_twice = retries || sim.requests.iter().any(|r| r.copies >= 2) || keys.len() < nk;
    let crash = f.crash > 0.0 || inject(|a| matches!(a, InjectAction::Crash { .. }));
    let effect = has(Step::Effect) || inject(|a| matches!(a, InjectAction::Effect { .. }));
    let collects = model.key.as_ref().is_some_and(|k| {
        let ttl = k.retention_us.is_some()
            && (f.gc_every_us.is_some()
                || k.store == KeyStore::Cache
                || k.expiry != Expiry::Collector);
        ttl || (k.store == KeyStore::Memory && crash)
    }) || sim.actions.iter().any(|a| a.kind == ActionKind::DeleteKeys);
    // A claim is taken over only when its lease ends: a lease, `on_error = ["unlock"]`, or
    // the background completer.
    let leased = model.key.as_ref().is_some_and(|k| k.lease.duration_us().is_some())
        || model.on_error.claim == ClaimCleanup::Unlock;
    let claims = (has(Step::Claim) && leased) || model.completer_every_us().is_some();
    let lost_reply = f.reply_drop_after_commit > 0.0
        || f.reply_drop > 0.0
        || inject(|a| matches!(a, InjectAction::DropReply));
    Moment::ALL
        .into_iter()
        .filter(|m| match m {
            Moment::LookupMissedInWindow => has(Step::Lookup) && keyed && same_key_twice,
            Moment::RetryWhileOriginalRan => retries,
            Moment::CopiesRanAtOnce => copies,
            Moment::CrashBetweenEffectAndCommit => crash && effect,
            Moment::KeyCollectedWhileRetrying => keyed && collects && (retries || copies),
            Moment::ClaimTakenWhileRunning => keyed && claims && same_key_twice,
            Moment::ReplyLostAfterCommit => lost_reply || crash,
            Moment::CommitLost => f.commit_lost > 0.0,
        })
        .collect()
}

/// One run with its moments: the report exactly as [`run::run_explored`] makes it, and the
/// moments reached (the run keeps its history, which changes nothing in it: the history is
/// hashed whether kept or not).
pub fn run_with_moments(
    sim: &Arc<Sim>,
    model: &Arc<Model>,
    seed: u64,
    strategy: Option<&crate::explore::Strategy>,
) -> Result<(RunReport, Vec<Moment>), RunError> {
    let (sim, out) = match strategy {
        None => (Arc::clone(sim), crate::world::simulate(sim, model, seed, true, None)?),
        Some(s) => {
            let (sim, out, _) = run::explored_world(sim, model, seed, true, s)?;
            (sim, out)
        }
    };
    let history = out.history.unwrap_or_default();
    let moments = reached(&sim, &history, &out.observation.collected);
    Ok((run::judge(&sim, model, seed, out.observation), moments))
}

/// Per moment of a cell: possible for its (sim, model), and on how many seeds it was reached.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MomentStat {
    /// The program and the sim allow it.
    pub possible: bool,
    /// Seeds on which it happened at least once.
    pub seeds: u64,
}

/// A cell's coverage: every moment by name.
pub type Coverage = BTreeMap<String, MomentStat>;

/// The empty coverage of a (sim, model) cell: every moment, its possibility, no seed.
pub fn empty(sim: &Sim, model: &Model) -> Coverage {
    let p = possible(sim, model);
    Moment::ALL
        .into_iter()
        .map(|m| (m.name().to_string(), MomentStat { possible: p.contains(&m), seeds: 0 }))
        .collect()
}

/// Count one seed's moments.
pub fn add(c: &mut Coverage, reached: &[Moment]) {
    for m in reached {
        let e = c.entry(m.name().to_string()).or_insert(MomentStat { possible: true, seeds: 0 });
        e.seeds = e.seeds.saturating_add(1);
    }
}

/// Fold another part's coverage (other seeds) into `c`.
pub fn merge(c: &mut Coverage, o: Coverage) {
    for (k, v) in o {
        let e = c.entry(k).or_insert(MomentStat { possible: v.possible, seeds: 0 });
        e.possible |= v.possible;
        e.seeds = e.seeds.saturating_add(v.seeds);
    }
}

/// The cell's moments in report order: (moment, stat), possible ones and reached ones.
pub fn in_order(c: &Coverage) -> Vec<(Moment, &MomentStat)> {
    Moment::ALL.into_iter().filter_map(|m| c.get(m.name()).map(|s| (m, s))).collect()
}

/// Possible moments the cell never reached.
pub fn unreached(c: &Coverage) -> Vec<Moment> {
    in_order(c).into_iter().filter(|(_, s)| s.possible && s.seeds == 0).map(|(m, _)| m).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim() -> Arc<Sim> {
        crate::catalog::sim("check-first-race").unwrap()
    }

    fn att(copy: u32, attempt: u32) -> Option<Actor> {
        Some(Actor::Attempt { req: 0, copy, attempt })
    }

    fn at(t_us: u64, node: Node, who: Option<Actor>, what: What) -> Event {
        Event { t_us, node, who, what }
    }

    fn sent(t: u64, copy: u32, attempt: u32) -> Event {
        let what =
            What::Sent { to: 0, method: "POST".into(), path: "/".into(), key: Some("k1".into()) };
        at(t, Node::Client(0), att(copy, attempt), what)
    }

    fn srv(t: u64, copy: u32, what: What) -> Event {
        at(t, Node::Server(0), att(copy, 1), what)
    }

    fn reached_by(events: Vec<Event>, collected: &[Collected]) -> Vec<Moment> {
        reached(&sim(), &History { events, legend: Default::default() }, collected)
    }

    /// Both copies miss the lookup before either saves (the teaching race): the race window
    /// and two copies at once; once the first has saved (autocommit), neither.
    #[test]
    fn lookup_miss_in_window_and_not() {
        let race = vec![
            sent(0, 0, 1),
            sent(0, 1, 1),
            srv(1, 1, What::Arrived),
            srv(2, 1, What::LookupMiss),
            srv(3, 0, What::Arrived),
            srv(4, 0, What::LookupMiss),
        ];
        assert_eq!(
            reached_by(race, &[]),
            vec![Moment::LookupMissedInWindow, Moment::CopiesRanAtOnce]
        );
        let saved_first = vec![
            sent(0, 0, 1),
            sent(0, 1, 1),
            srv(1, 1, What::Arrived),
            srv(2, 1, What::LookupMiss),
            srv(3, 1, What::Stored { status: 201 }),
            srv(4, 0, What::Arrived),
            srv(5, 0, What::LookupMiss),
        ];
        assert_eq!(reached_by(saved_first, &[]), vec![Moment::CopiesRanAtOnce]);
        let replied_first = vec![
            sent(0, 0, 1),
            sent(0, 1, 1),
            srv(1, 1, What::Arrived),
            srv(2, 1, What::LookupMiss),
            srv(3, 1, What::Reply { to: 0, status: 201, body: String::new() }),
            srv(4, 0, What::Arrived),
            srv(5, 0, What::LookupMiss),
        ];
        assert_eq!(reached_by(replied_first, &[]), vec![]);
    }

    /// In a transaction the save is durable only at COMMIT: a miss between the other's save
    /// and its COMMIT is in the window, one after it is not.
    #[test]
    fn window_closes_at_commit_in_a_transaction() {
        let run = |commit_first: bool| {
            let mut ev = vec![
                sent(0, 0, 1),
                sent(0, 1, 1),
                srv(1, 1, What::Arrived),
                srv(1, 1, What::Begin { sql: "BEGIN IMMEDIATE" }),
                srv(2, 1, What::LookupMiss),
                srv(3, 1, What::Stored { status: 201 }),
                srv(4, 0, What::Arrived),
            ];
            if commit_first {
                ev.push(srv(5, 1, What::Commit));
            }
            ev.push(srv(6, 0, What::LookupMiss));
            reached_by(ev, &[]).contains(&Moment::LookupMissedInWindow)
        };
        assert!(run(false));
        assert!(!run(true));
    }

    /// A crash after the effect and before the commit; none after the commit or with no effect.
    #[test]
    fn crash_between_effect_and_commit() {
        let crash = at(9, Node::Server(0), None, What::ProcessCrashed);
        let effect = What::EffectCall { intent: "click".into() };
        let base =
            vec![sent(0, 0, 1), srv(1, 0, What::Arrived), srv(2, 0, What::Begin { sql: "BEGIN" })];
        let mut a = base.clone();
        a.extend([srv(3, 0, effect.clone()), crash.clone()]);
        assert_eq!(reached_by(a, &[]), vec![Moment::CrashBetweenEffectAndCommit]);
        let mut b = base.clone();
        b.extend([srv(3, 0, effect), srv(4, 0, What::Commit), crash.clone()]);
        assert_eq!(reached_by(b, &[]), vec![]);
        let mut c = base;
        c.push(crash);
        assert_eq!(reached_by(c, &[]), vec![]);
    }

    /// A retry arriving while attempt 1 runs; a network duplicate (the same attempt twice)
    /// counts too; a retry after the original ended does not.
    #[test]
    fn retry_while_original_ran() {
        let a2 = |t, what| at(t, Node::Server(0), att(0, 2), what);
        let overlap = vec![srv(1, 0, What::Arrived), a2(2, What::Arrived)];
        assert_eq!(reached_by(overlap, &[]), vec![Moment::RetryWhileOriginalRan]);
        let dup = vec![srv(1, 0, What::Arrived), srv(2, 0, What::Arrived)];
        assert_eq!(reached_by(dup, &[]), vec![Moment::RetryWhileOriginalRan]);
        let after = vec![
            srv(1, 0, What::Arrived),
            srv(2, 0, What::ConnectionDropped { status: 500 }),
            a2(3, What::Arrived),
        ];
        assert_eq!(reached_by(after, &[]), vec![]);
    }

    /// A key collected before the client sends it again; not when every send came before.
    #[test]
    fn key_collected_while_retrying() {
        let gone = Collected { intent: "click".into(), key: "k1".into(), done: true, at_us: 10 };
        let later = vec![sent(0, 0, 1), sent(20, 0, 2)];
        assert_eq!(
            reached_by(later, std::slice::from_ref(&gone)),
            vec![Moment::KeyCollectedWhileRetrying]
        );
        let other_key = Collected { key: "k2".into(), ..gone.clone() };
        assert_eq!(reached_by(vec![sent(0, 0, 1), sent(20, 0, 2)], &[other_key]), vec![]);
        assert_eq!(reached_by(vec![sent(0, 0, 1), sent(5, 0, 2)], &[gone]), vec![]);
    }

    /// Lost replies and lost commits.
    #[test]
    fn lost_replies_and_commits() {
        let lost = vec![srv(1, 0, What::Arrived), srv(2, 0, What::ReplyLostAfterCommit)];
        assert_eq!(reached_by(lost, &[]), vec![Moment::ReplyLostAfterCommit]);
        let refused =
            vec![srv(1, 0, What::Arrived), srv(2, 0, What::ConnectionDropped { status: 500 })];
        assert_eq!(reached_by(refused, &[]), vec![]);
        let cl = vec![srv(1, 0, What::Arrived), srv(2, 0, What::CommitLost { committed: true })];
        assert_eq!(reached_by(cl, &[]), vec![Moment::CommitLost]);
        // A crash after a success was saved for good, before the reply, loses it; a crash
        // before the transaction that saved it committed does not (nothing was saved).
        let crash = at(9, Node::Server(0), None, What::ProcessCrashed);
        let saved =
            vec![srv(1, 0, What::Arrived), srv(2, 0, What::Stored { status: 201 }), crash.clone()];
        assert_eq!(reached_by(saved, &[]), vec![Moment::ReplyLostAfterCommit]);
        let in_tx = vec![
            srv(1, 0, What::Arrived),
            srv(2, 0, What::Begin { sql: "BEGIN" }),
            srv(3, 0, What::Stored { status: 201 }),
            crash.clone(),
        ];
        assert_eq!(reached_by(in_tx, &[]), vec![]);
        let failed = vec![srv(1, 0, What::Arrived), srv(2, 0, What::Stored { status: 500 }), crash];
        assert_eq!(reached_by(failed, &[]), vec![]);
    }

    /// The static judgement: the teaching race allows the race window and two copies, and
    /// nothing that needs a crash, a collector, a claim, a retry or a lost reply.
    #[test]
    fn possible_for_the_teaching_race() {
        let m = crate::catalog::model("check-first").unwrap();
        assert_eq!(
            possible(&sim(), &m),
            vec![Moment::LookupMissedInWindow, Moment::CopiesRanAtOnce]
        );
        let claim_first = crate::catalog::model("claim-first").unwrap();
        assert_eq!(possible(&sim(), &claim_first), vec![Moment::CopiesRanAtOnce]);
        let lease = crate::catalog::model("lease").unwrap();
        assert_eq!(
            possible(&sim(), &lease),
            vec![Moment::CopiesRanAtOnce, Moment::ClaimTakenWhileRunning]
        );
    }

    /// A run with moments is the same run: its report equals `run::run`'s, and seed 13 of the
    /// teaching race (its first violating seed) reaches the race window.
    #[test]
    fn run_with_moments_is_the_same_run() {
        let (s, m) = (sim(), crate::catalog::model("check-first").unwrap());
        let (report, moments) = run_with_moments(&s, &m, 13, None).unwrap();
        let plain = run::run(&s, &m, 13, Default::default()).unwrap().report;
        assert_eq!(report.trace_hash, plain.trace_hash);
        assert_eq!(report.violation_names(), plain.violation_names());
        assert!(moments.contains(&Moment::LookupMissedInWindow), "{moments:?}");
    }

    #[test]
    fn names_round_trip() {
        for m in Moment::ALL {
            assert_eq!(Moment::from_name(m.name()), Some(m));
        }
    }
}
