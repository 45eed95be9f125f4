//! The committed state after each event: the tables (rows, key records) as one replay of the
//! history commits them ([`tables`], for the lesson page), and their counts
//! ([`StateTrack`], the state column of a diagram). Writes inside a transaction count from its
//! `COMMIT` and vanish at a `ROLLBACK` or a crash.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use super::{Actor, History, Node, What};

/// The rows and key records committed after each event, as the state column shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateTrack {
    /// After event i: (committed rows, key records done, key records in progress).
    pub after: Vec<(u64, u64, u64)>,
}

impl StateTrack {
    /// Replay `h`'s events ([`Replay`], the one replay the lesson's tables use too): the
    /// committed rows and key records after each one (writes inside a transaction count from
    /// its COMMIT, or a lost COMMIT that committed).
    pub fn of(h: &History) -> StateTrack {
        let mut r = Replay::new(h);
        let after = h
            .events
            .iter()
            .map(|e| {
                r.step(e.node, e.who, &e.what);
                let count = |st: &str| r.now.keys.iter().filter(|k| k.state == st).count() as u64;
                (r.now.rows.len() as u64, count(DONE), count(IN_PROGRESS))
            })
            .collect();
        StateTrack { after }
    }

    /// `rows 1 · keys 1 done` for event i, if it changed the state.
    pub fn change(&self, i: usize) -> Option<String> {
        let now = self.after.get(i)?;
        let before = if i == 0 { &(0, 0, 0) } else { &self.after[i - 1] };
        (now != before).then(|| {
            let mut s = format!("rows {} · keys {} done", now.0, now.1);
            if now.2 > 0 {
                let _ = write!(s, ", {} in progress", now.2);
            }
            s
        })
    }
}

/// One row of the `rows` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RowLine {
    /// The row's id.
    pub id: i64,
    /// The execution that inserted it (`click[1]`).
    pub by: String,
}

/// One record of the `keys` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyLine {
    /// The `Idempotency-Key`.
    pub key: String,
    /// `done` or `in progress`.
    pub state: &'static str,
    /// The execution that wrote it.
    pub by: String,
}

/// The committed tables after one event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Tables {
    /// The `rows` table.
    pub rows: Vec<RowLine>,
    /// The `keys` table.
    pub keys: Vec<KeyLine>,
}

/// What one execution wrote inside its open transaction.
#[derive(Default)]
struct Pending {
    in_tx: bool,
    rows: Vec<RowLine>,
    keys: Vec<KeyLine>,
    completes: Vec<String>,
}

const DONE: &str = "done";
const IN_PROGRESS: &str = "in progress";

/// The replay's state: committed tables and each execution's pending writes.
struct Replay<'a> {
    h: &'a History,
    keys_of: BTreeMap<Actor, String>,
    now: Tables,
    pending: BTreeMap<(u32, Option<Actor>), Pending>,
}

impl<'a> Replay<'a> {
    /// The replay of `h` before its first event (each attempt's key from what it sent).
    fn new(h: &'a History) -> Replay<'a> {
        let keys_of = h
            .events
            .iter()
            .filter_map(|e| match (&e.what, e.who) {
                (What::Sent { key: Some(k), .. }, Some(a)) => Some((a, crate::text::printable(k))),
                _ => None,
            })
            .collect();
        Replay { h, keys_of, now: Tables::default(), pending: BTreeMap::new() }
    }

    fn by(&self, who: Option<Actor>) -> String {
        who.map(|a| self.h.legend.actor(a)).unwrap_or_default()
    }

    fn key(&self, who: Option<Actor>) -> String {
        who.and_then(|a| self.keys_of.get(&a).cloned()).unwrap_or_else(|| "-".into())
    }

    /// The in-progress record of `key` becomes done (a new done line when there is none). An
    /// execution without a key of its own (the completer finishing an abandoned claim) completes
    /// the first in-progress record, as [`Replay::release`] releases one.
    fn complete(now: &mut Tables, key: String, by: String) {
        let mine = now.keys.iter().position(|k| k.key == key && k.state == IN_PROGRESS);
        let any = || now.keys.iter().position(|k| k.state == IN_PROGRESS);
        let at = if key == "-" { mine.or_else(any) } else { mine };
        match at.map(|i| &mut now.keys[i]) {
            Some(k) => k.state = DONE,
            None => now.keys.push(KeyLine { key, state: DONE, by }),
        }
    }

    fn commit(&mut self, slot: (u32, Option<Actor>)) {
        let p = self.pending.remove(&slot).unwrap_or_default();
        self.now.rows.extend(p.rows);
        self.now.keys.extend(p.keys);
        for by in p.completes {
            let key = self.key(slot.1);
            Self::complete(&mut self.now, key, by);
        }
    }

    /// Remove up to `n` in-progress records, `key`'s first.
    fn release(&mut self, key: &str, n: u32) {
        for _ in 0..n {
            let at = self.now.keys.iter().position(|k| k.key == key && k.state == IN_PROGRESS);
            let at = at.or_else(|| self.now.keys.iter().position(|k| k.state == IN_PROGRESS));
            if let Some(i) = at {
                self.now.keys.remove(i);
            }
        }
    }

    fn drop_done(&mut self, key: Option<&str>, n: u32) {
        for _ in 0..n {
            let at =
                key.and_then(|k| self.now.keys.iter().position(|x| x.key == k && x.state == DONE));
            let at = at.or_else(|| self.now.keys.iter().position(|x| x.state == DONE));
            if let Some(i) = at {
                self.now.keys.remove(i);
            }
        }
    }

    fn step(&mut self, node: Node, who: Option<Actor>, what: &What) {
        let slot = (if let Node::Server(p) = node { p } else { u32::MAX }, who);
        let in_tx = self.pending.get(&slot).is_some_and(|p| p.in_tx);
        let (by, key) = (self.by(who), self.key(who));
        let line = |state| KeyLine { key: key.clone(), state, by: by.clone() };
        match what {
            What::Begin { .. } => {
                self.pending.insert(slot, Pending { in_tx: true, ..Default::default() });
            }
            What::Commit | What::CommitLost { committed: true } => self.commit(slot),
            What::Rollback | What::CommitLost { committed: false } => {
                self.pending.remove(&slot);
            }
            What::RowInserted { row } => {
                let r = RowLine { id: *row, by: by.clone() };
                self.target(slot, in_tx, |p| &mut p.rows, |t| &mut t.rows).push(r);
            }
            What::Claimed | What::TookOver | What::RetookFailed if in_tx => {
                self.pending.entry(slot).or_default().keys.push(line(IN_PROGRESS))
            }
            What::Claimed | What::RetookFailed => self.now.keys.push(line(IN_PROGRESS)),
            What::Stored { .. } => {
                let l = line(DONE);
                self.target(slot, in_tx, |p| &mut p.keys, |t| &mut t.keys).push(l);
            }
            What::ClaimCompleted { .. } if in_tx => {
                self.pending.entry(slot).or_default().completes.push(by.clone())
            }
            What::ClaimCompleted { .. } => Self::complete(&mut self.now, key.clone(), by.clone()),
            What::ClaimReleased { n } | What::MarkedFailed { n } | What::KeyReleased { n } => {
                self.release(&key, *n as u32)
            }
            What::KeysDeleted { .. } => self.now.keys.clear(),
            What::Collected { n, .. } => self.drop_done(None, *n as u32),
            What::KeyExpired { .. } => self.drop_done(Some(&key), 1),
            What::ProcessCrashed => self.pending.retain(|(n, _), _| *n != slot.0),
            _ => {}
        }
    }

    /// Where a write goes: the execution's open transaction, or the committed table.
    fn target<T>(
        &mut self,
        slot: (u32, Option<Actor>),
        in_tx: bool,
        pending: impl FnOnce(&mut Pending) -> &mut Vec<T>,
        now: impl FnOnce(&mut Tables) -> &mut Vec<T>,
    ) -> &mut Vec<T> {
        if in_tx { pending(self.pending.entry(slot).or_default()) } else { now(&mut self.now) }
    }
}

/// The committed tables after each of the first `shown` events of `h`.
pub fn tables(h: &History, shown: usize) -> Vec<Tables> {
    let mut r = Replay::new(h);
    let mut out = Vec::with_capacity(shown);
    for e in h.events.iter().take(shown) {
        r.step(e.node, e.who, &e.what);
        out.push(r.now.clone());
    }
    out
}
