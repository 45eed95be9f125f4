//! The report of one run, and the aggregate of a cell (one sim × one model × a seed range).
//! One report type, serialised as it is: reports carry no wall-clock values.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::store::RowRecord;

/// What the client saw for one attempt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttemptOutcome {
    /// `reply` or `transport-failure`.
    pub outcome: &'static str,
    pub status: Option<u16>,
    pub replayed: bool,
    pub body: Option<String>,
    /// The key sent, if any.
    pub key: Option<String>,
    /// Simulated time the attempt was sent and finished (ms since start).
    pub sent_ms: f64,
    pub done_ms: f64,
}

impl AttemptOutcome {
    pub fn id(&self) -> Option<i64> {
        let body = self.body.as_deref()?;
        serde_json::from_str::<serde_json::Value>(body).ok()?.get("id")?.as_i64()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestReport {
    pub id: String,
    pub intent: String,
    /// Attempts per copy, in order.
    pub copies: Vec<Vec<AttemptOutcome>>,
    /// Rows and stored keys right after the request finished (when the sim asks).
    pub rows_after: Option<u64>,
    pub keys_after: Option<u64>,
    pub finished: bool,
}

impl RequestReport {
    /// The final attempt of every copy.
    pub fn finals(&self) -> impl Iterator<Item = &AttemptOutcome> {
        self.copies.iter().filter_map(|c| c.last())
    }
}

/// One expectation of the sim and whether it held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub what: String,
    pub held: bool,
    pub expected: String,
    pub actual: String,
}

/// The report of one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub seed: u64,
    pub sim: String,
    pub model: String,
    pub requests: Vec<RequestReport>,
    pub rows: Vec<RowRecord>,
    pub keys: u64,
    pub keys_in_progress: u64,
    /// External effects delivered to the receiver, per intent.
    pub effects: BTreeMap<String, u64>,
    pub effects_total: u64,
    /// Deliveries the receiver got, before deduplication.
    pub deliveries: u64,
    pub checks: Vec<Check>,
    /// Invariant violations found by the oracle (bugs and policy-permitted ones).
    pub violations: Vec<crate::oracle::Violation>,
    /// Rows and effects per intent, in intent order.
    pub per_intent: Vec<(u64, u64)>,
    /// Intents whose client never saw a final outcome (the `unfinished-intent` violations).
    pub ambiguous_intents: u64,
    /// Things in the sim that cannot take effect with this model (e.g. an injection at a point
    /// the model's program lacks).
    pub warnings: Vec<String>,
    /// Limits hit (simulated time, steps): reported, never a hang.
    pub bounds_hit: Vec<String>,
    pub end_ms: f64,
    pub events: usize,
    pub trace_hash: String,
}

impl RunReport {
    /// Violation names found (bugs only, not policy-permitted), deduplicated, in order.
    pub fn violation_names(&self) -> Vec<&'static str> {
        let mut v: Vec<&'static str> =
            self.violations.iter().filter(|x| !x.permitted).map(|x| x.name).collect();
        v.dedup();
        v
    }

    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.held) && self.bounds_hit.is_empty()
    }

    /// Count of final statuses (`transport-failure` for no reply), over all attempts.
    pub fn status_histogram(&self) -> BTreeMap<String, u64> {
        let mut h = BTreeMap::new();
        for r in &self.requests {
            for c in &r.copies {
                for a in c {
                    let k = match a.status {
                        Some(s) => s.to_string(),
                        None => a.outcome.to_string(),
                    };
                    *h.entry(k).or_insert(0) += 1;
                }
            }
        }
        h
    }
}
