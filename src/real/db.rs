//! The real database file of a round, read with the target's own queries: the final rows and
//! key records, a probe between requests, the delete-keys action and a held write lock (the
//! article's busy database).

use std::path::Path;
use std::time::Duration;

use std::collections::BTreeMap;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde_json::Value;

use super::target::{Attribute, RowUser, Target};
use crate::report::{Collected, KeyRecord, RecordState, RowRecord, Scope};
use crate::scenario::Sim;

/// A row as the target's `rows` query returns it: columns by name.
#[derive(Debug, Clone)]
pub struct RawRow {
    id: i64,
    /// The `user` column (None: the query has none).
    user: Option<String>,
    operation: String,
    intent: Option<String>,
    /// Every other column, as JSON: what attribution by body compares with the sim's bodies.
    fields: BTreeMap<String, Value>,
}

/// What the database holds at the end of a round.
pub struct FinalState {
    raw: Vec<RawRow>,
    row_user: RowUser,
    attribute: Attribute,
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

fn json_of(v: ValueRef) -> Value {
    match v {
        ValueRef::Null | ValueRef::Blob(_) => Value::Null,
        ValueRef::Integer(i) => Value::from(i),
        ValueRef::Real(f) => Value::from(f),
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
    }
}

fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// The rows, by the query's column names (`id` required; `user`, `operation`, `intent`
/// optional; the rest compared with bodies). An error says what the query lacks.
fn raw_rows(c: &Connection, t: &Target) -> Result<Vec<RawRow>, String> {
    let mut st = c.prepare(&t.rows_sql).map_err(|e| e.to_string())?;
    let names: Vec<String> = st.column_names().map(|n| n.to_ascii_lowercase()).collect();
    let col = |n: &str| names.iter().position(|c| c == n);
    let id = col("id").ok_or("it returns no `id` column")?;
    let (user, operation, intent) = (col("user"), col("operation"), col("intent"));
    if user.is_none() && t.row_user == RowUser::Column {
        return Err("it returns no `user` column (a schema that keeps no user says \
                    `user = \"none\"` in [database])"
            .into());
    }
    let mut rows = st.query([]).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(|e| e.to_string())? {
        if out.len() as u64 >= t.max_rows {
            return Err(format!("it returned more than {} rows ([database] max_rows)", t.max_rows));
        }
        let get = |i: usize| r.get_ref(i).map(json_of).map_err(|e| e.to_string());
        let id = match get(id)? {
            Value::Number(n) if n.is_i64() => n.as_i64().unwrap_or_default(),
            other => return Err(format!("`id` {other} is not an integer")),
        };
        let text = |c: Option<usize>| c.map(|i| get(i).map(|v| text_of(&v))).transpose();
        let mut fields = BTreeMap::new();
        for (i, n) in names.iter().enumerate() {
            if !matches!(n.as_str(), "id" | "user" | "operation" | "intent") {
                fields.insert(n.clone(), get(i)?);
            }
        }
        out.push(RawRow {
            id,
            user: text(user)?.map(Option::unwrap_or_default),
            operation: text(operation)?.flatten().unwrap_or_default(),
            intent: text(intent)?.flatten(),
            fields,
        });
    }
    // Warm-up requests' rows are not the round's.
    let warm = |r: &RawRow| {
        r.user.as_deref() == Some(super::round::WARMUP_USER)
            || r.intent.as_deref() == Some(super::round::WARMUP_USER)
    };
    Ok(out.into_iter().filter(|r| !warm(r)).collect())
}

fn key_rows(c: &Connection, t: &Target) -> Result<Vec<(Scope, Option<i64>)>, String> {
    let Some(sql) = &t.keys_sql else { return Ok(Vec::new()) };
    let mut st = c.prepare(sql).map_err(|e| e.to_string())?;
    let rows = st
        .query_map([], |r| {
            let scope = Scope {
                user: r.get::<_, Option<String>>(0)?.unwrap_or_default(),
                operation: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                key: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
            };
            Ok((scope, r.get::<_, Option<i64>>(3)?))
        })
        .map_err(|e| e.to_string())?;
    let rows: rusqlite::Result<Vec<(Scope, Option<i64>)>> =
        rows.take(usize::try_from(t.max_rows).unwrap_or(usize::MAX).saturating_add(1)).collect();
    let rows = rows.map_err(|e| e.to_string())?;
    if rows.len() as u64 > t.max_rows {
        return Err(format!(
            "it returned more than {} key records ([database] max_rows)",
            t.max_rows
        ));
    }
    let rows: rusqlite::Result<Vec<(Scope, Option<i64>)>> = Ok(rows);
    Ok(rows
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|(s, _)| s.user != super::round::WARMUP_USER)
        .collect())
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
        row_user: t.row_user,
        attribute: t.attribute,
        keys: keys.into_iter().map(|(s, st)| (s, record(st, String::new()))).collect(),
    })
}

impl FinalState {
    /// Rows as the report's type, each with the intent that wrote it: the target's `intent`
    /// column (attribute = "intent"), else the one intent whose requests' bodies (and user)
    /// the row matches ("" when that is not one intent). Without a user column a row is its
    /// intent's user's.
    pub fn rows(&self, sim: &Sim) -> Vec<RowRecord> {
        self.raw
            .iter()
            .map(|r| {
                let by_intent = r.intent.clone().filter(|_| self.attribute == Attribute::Intent);
                let intent = by_intent.unwrap_or_else(|| by_body(sim, r));
                let user = match (&r.user, self.row_user) {
                    (Some(u), RowUser::Column) => u.clone(),
                    _ => sim
                        .requests
                        .iter()
                        .find(|q| q.intent == intent)
                        .and_then(|q| q.principal())
                        .unwrap_or_default(),
                };
                RowRecord {
                    id: r.id,
                    user,
                    operation: r.operation.clone(),
                    item: r.fields.get("item").and_then(text_of).unwrap_or_default(),
                    qty: r.fields.get("qty").and_then(Value::as_i64).unwrap_or_default(),
                    intent,
                    created_us: 0,
                    exec: 0,
                    processed: false,
                }
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

/// The one intent whose requests sent a body with the row's fields (and were sent by the
/// row's user, where the row has one); "" when none or several intents match. A row column
/// that no body carries is not compared; a row with no column a body carries matches none.
fn by_body(sim: &Sim, r: &RawRow) -> String {
    let mut intents = sim.requests.iter().filter(|q| {
        let Ok(Value::Object(body)) = serde_json::from_str::<Value>(&q.body) else { return false };
        let mut compared = 0;
        for (name, v) in &r.fields {
            if let Some(b) = body.get(name) {
                compared += 1;
                if b != v && text_of(b) != text_of(v) {
                    return false;
                }
            }
        }
        let user_ok = r.user.as_deref().is_none_or(|u| q.user.as_deref() == Some(u));
        compared > 0 && user_ok
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
