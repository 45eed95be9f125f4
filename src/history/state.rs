//! The committed state after each event, as the state column of a diagram shows it.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::{Actor, History, Node, What};

/// The rows and key records committed after each event, as the state column shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateTrack {
    /// After event i: (committed rows, key records done, key records in progress).
    pub after: Vec<(u64, u64, u64)>,
}

impl StateTrack {
    /// Replay `h`'s events: the committed rows and key records after each one (writes inside a transaction count from its COMMIT, or a lost COMMIT that committed).
    pub fn of(h: &History) -> StateTrack {
        #[derive(Default, Clone)]
        struct Pending {
            in_tx: bool,
            rows: u64,
            done: i64,
            claims: i64,
        }
        let (mut rows, mut done, mut claims) = (0u64, 0i64, 0i64);
        let mut pending: BTreeMap<(u32, Option<Actor>), Pending> = BTreeMap::new();
        let mut after = Vec::with_capacity(h.events.len());
        for e in &h.events {
            let node = match e.node {
                Node::Server(p) => p,
                _ => u32::MAX,
            };
            let key = (node, e.who);
            let p = pending.entry(key).or_default();
            match &e.what {
                What::Begin { .. } => *p = Pending { in_tx: true, ..Default::default() },
                What::Commit => {
                    rows += p.rows;
                    done += p.done;
                    claims += p.claims;
                    *p = Pending::default();
                }
                What::Rollback | What::CommitLost { committed: false } => *p = Pending::default(),
                What::CommitLost { committed: true } => {
                    rows += p.rows;
                    done += p.done;
                    claims += p.claims;
                    *p = Pending::default();
                }
                What::RowInserted { .. } if p.in_tx => p.rows += 1,
                What::RowInserted { .. } => rows += 1,
                What::Claimed | What::TookOver | What::RetookFailed if p.in_tx => p.claims += 1,
                What::Claimed | What::RetookFailed => claims += 1,
                What::Stored { .. } if p.in_tx => p.done += 1,
                What::Stored { .. } => done += 1,
                What::ClaimCompleted { .. } if p.in_tx => {
                    p.done += 1;
                    p.claims -= 1;
                }
                What::ClaimCompleted { .. } => {
                    done += 1;
                    claims -= 1;
                }
                What::ClaimReleased { n } | What::MarkedFailed { n } | What::KeyReleased { n } => {
                    claims -= *n as i64
                }
                What::KeysDeleted { .. } => {
                    done = 0;
                    claims = 0;
                }
                What::Collected { n, .. } => done -= *n as i64,
                What::KeyExpired { .. } => done -= 1,
                What::ProcessCrashed => {
                    pending.retain(|(n, _), _| *n != node);
                }
                _ => {}
            }
            after.push((rows, done.max(0) as u64, claims.max(0) as u64));
        }
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
