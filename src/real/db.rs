//! The real database file of a round, read with the target's own queries: the final rows and
//! key records, a probe between requests, the delete-keys action and a held write lock (the
//! article's busy database).

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::target::Target;
use crate::report::{Collected, KeyRecord, RecordState, RowRecord, Scope};
use crate::scenario::Sim;

/// A row as the target's `rows` query returns it.
#[derive(Debug, Clone)]
pub struct RawRow {
    id: i64,
    user: String,
    operation: String,
    item: String,
    qty: i64,
    intent: Option<String>,
}

/// What the database holds at the end of a round.
pub struct FinalState {
    raw: Vec<RawRow>,
    /// Key records, as the report's types.
    pub keys: Vec<(Scope, KeyRecord)>,
}

fn open(db: &Path, write: bool) -> rusqlite::Result<Connection> {
    let flags =
        if write { OpenFlags::SQLITE_OPEN_READ_WRITE } else { OpenFlags::SQLITE_OPEN_READ_ONLY };
    let c = Connection::open_with_flags(db, flags | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    c.busy_timeout(Duration::from_secs(5))?;
    Ok(c)
}

fn raw_rows(c: &Connection, t: &Target) -> rusqlite::Result<Vec<RawRow>> {
    let mut st = c.prepare(&t.rows_sql)?;
    let rows = st.query_map([], |r| {
        Ok(RawRow {
            id: r.get(0)?,
            user: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
            operation: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
            item: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
            qty: r.get::<_, Option<i64>>(4)?.unwrap_or_default(),
            intent: r.get::<_, Option<String>>(5).ok().flatten(),
        })
    })?;
    // Warm-up requests' rows are not the round's.
    let rows: rusqlite::Result<Vec<RawRow>> = rows.collect();
    Ok(rows?.into_iter().filter(|r| r.user != super::round::WARMUP_USER).collect())
}

fn key_rows(c: &Connection, t: &Target) -> rusqlite::Result<Vec<(Scope, Option<i64>)>> {
    let mut st = c.prepare(&t.keys_sql)?;
    let rows = st.query_map([], |r| {
        let scope = Scope {
            user: r.get::<_, Option<String>>(0)?.unwrap_or_default(),
            operation: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
            key: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
        };
        Ok((scope, r.get::<_, Option<i64>>(3)?))
    })?;
    let rows: rusqlite::Result<Vec<(Scope, Option<i64>)>> = rows.collect();
    Ok(rows?.into_iter().filter(|(s, _)| s.user != super::round::WARMUP_USER).collect())
}

/// A key record as far as a real target shows it: its status, or a claim without one.
fn record(status: Option<i64>, intent: String) -> KeyRecord {
    KeyRecord {
        fingerprint: String::new(),
        status,
        response: None,
        state: if status.is_some() { RecordState::Done } else { RecordState::InProgress },
        created_us: 0,
        lease_until_us: None,
        token: None,
        intent,
    }
}

/// The intent a key was sent for (the first request that sends it), or "".
fn intent_of_key(sim: Option<&Sim>, s: &Scope) -> String {
    let Some(sim) = sim else { return String::new() };
    sim.requests
        .iter()
        .find(|q| q.key.as_deref() == Some(s.key.as_str()))
        .map(|q| q.intent.clone())
        .unwrap_or_default()
}

/// Read the final rows and keys (after every process was killed).
pub fn read_final(db: &Path, t: &Target) -> Result<FinalState, String> {
    if !db.exists() {
        return Err(format!(
            "no database file at {} (did the server open IDEMSIM_DB?)",
            db.display()
        ));
    }
    let c = open(db, false).map_err(|e| format!("cannot open {}: {e}", db.display()))?;
    let raw = raw_rows(&c, t).map_err(|e| format!("the rows query failed: {e}"))?;
    let keys = key_rows(&c, t).map_err(|e| format!("the keys query failed: {e}"))?;
    Ok(FinalState {
        raw,
        keys: keys.into_iter().map(|(s, st)| (s, record(st, String::new()))).collect(),
    })
}

impl FinalState {
    /// Rows as the report's type: the intent from the target's `intent` column, else the one
    /// request whose user and body the row matches ("" when that is not one intent).
    pub fn rows(&self, sim: &Sim) -> Vec<RowRecord> {
        self.raw
            .iter()
            .map(|r| RowRecord {
                id: r.id,
                user: r.user.clone(),
                operation: r.operation.clone(),
                item: r.item.clone(),
                qty: r.qty,
                intent: r.intent.clone().unwrap_or_else(|| by_body(sim, r)),
                created_us: 0,
                exec: 0,
                processed: false,
            })
            .collect()
    }

    /// Key records with their intents filled in from the sim.
    pub fn keys_for(&self, sim: &Sim) -> Vec<(Scope, KeyRecord)> {
        self.keys
            .iter()
            .map(|(s, r)| {
                (s.clone(), KeyRecord { intent: intent_of_key(Some(sim), s), ..r.clone() })
            })
            .collect()
    }
}

fn by_body(sim: &Sim, r: &RawRow) -> String {
    let mut intents = sim.requests.iter().filter(|q| {
        let body: Option<serde_json::Value> = serde_json::from_str(&q.body).ok();
        let item = body.as_ref().and_then(|b| b.get("item")).and_then(|v| v.as_str());
        let qty = body.as_ref().and_then(|b| b.get("qty")).and_then(|v| v.as_i64());
        q.user.as_deref() == Some(r.user.as_str()) && item == Some(&r.item) && qty == Some(r.qty)
    });
    match intents.next() {
        Some(q) if intents.all(|o| o.intent == q.intent) => q.intent.clone(),
        _ => String::new(),
    }
}

/// Rows, keys and stored responses right now (a probe between requests); None on error.
pub fn probe(db: &Path, t: &Target) -> Option<(u64, u64, u64)> {
    let c = open(db, false).ok()?;
    let rows = raw_rows(&c, t).ok()?.len() as u64;
    let keys = key_rows(&c, t).ok()?;
    let responses = keys.iter().filter(|(_, s)| s.is_some()).count() as u64;
    Some((rows, keys.len() as u64, responses))
}

/// The delete-keys action: read the key records, then delete them, in one transaction.
pub fn delete_keys(db: &Path, t: &Target, at_us: u64) -> Vec<Collected> {
    let Some(delete) = &t.delete_keys_sql else { return Vec::new() };
    let Ok(mut c) = open(db, true) else { return Vec::new() };
    let Ok(tx) = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate) else {
        return Vec::new();
    };
    let keys = key_rows(&tx, t).unwrap_or_default();
    if tx.execute_batch(delete).is_err() || tx.commit().is_err() {
        return Vec::new();
    }
    keys.iter().map(|(s, st)| Collected::of(s, &record(*st, String::new()), at_us)).collect()
}

/// A second connection holding `BEGIN IMMEDIATE` (the write lock) until dropped.
pub struct Lock(Option<Connection>);

impl Lock {
    /// Take the write lock (waiting up to 5 s for it); a Lock of nothing when it cannot.
    pub fn take(db: &Path) -> Lock {
        let c = open(db, true).ok().filter(|c| c.execute_batch("BEGIN IMMEDIATE").is_ok());
        Lock(c)
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        if let Some(c) = &self.0 {
            let _ = c.execute_batch("ROLLBACK");
        }
    }
}
