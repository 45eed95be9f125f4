//! Key-record operations, each written twice side by side: once for the SQLite `keys` table
//! (`sql_*`, transactional and shared by every process) and once for an in-memory map
//! (`map_*`, the TTL cache and process memory, which differ only in round trips and expiry).
//! Plain functions: no awaits, no simulated time of their own. The step interpreter
//! (`exec/keys.rs`) picks the store, waits out locks and pays the round trips.

use std::collections::BTreeMap;

use rusqlite::{Connection, OptionalExtension, params};

use super::store;
use crate::report::{Collected, KeyRecord, RecordState, Scope};

/// A parameter for an optional integer column.
fn opt_i64(v: Option<u64>) -> Option<i64> {
    v.map(|v| v as i64)
}

/// The record under `scope`, if any.
pub(crate) fn sql_lookup(c: &Connection, s: &Scope) -> rusqlite::Result<Option<KeyRecord>> {
    let sql = concat!(
        "SELECT ",
        store::record_columns!(),
        " FROM keys WHERE user = ?1 AND operation = ?2 AND key = ?3"
    );
    c.prepare_cached(sql)?
        .query_row(params![s.user, s.operation, s.key], |r| store::record_from_row(r, 0))
        .optional()
}

pub(crate) fn map_lookup(m: &BTreeMap<Scope, KeyRecord>, s: &Scope) -> Option<KeyRecord> {
    m.get(s).cloned()
}

/// Insert `rec` under `scope`. A claim (`claim`) only succeeds if no record exists (`false`
/// otherwise: SQLite's unique key, the cache's `SET NX`). Without a claim, SQLite's
/// primary-key clash is an error, while a map overwrites (`SET`: the last writer wins).
pub(crate) fn sql_insert(
    c: &Connection,
    s: &Scope,
    rec: &KeyRecord,
    claim: bool,
) -> rusqlite::Result<bool> {
    write_record(c, false, s, rec)
        .map(|_| true)
        .or_else(|e| if claim && store::is_constraint(&e) { Ok(false) } else { Err(e) })
}

/// `claim_conflict = "overwrite"`: `INSERT OR REPLACE` the record (no conflict, ever).
pub(crate) fn sql_replace(c: &Connection, s: &Scope, rec: &KeyRecord) -> rusqlite::Result<bool> {
    write_record(c, true, s, rec).map(|_| true)
}

/// The INSERT of a whole record, with `$verb` (`INSERT` or `INSERT OR REPLACE`).
macro_rules! insert_record {
    ($verb:literal) => {
        concat!(
            $verb,
            " INTO keys(user, operation, key, fingerprint, status, response, state, created_us,
                        lease_until_us, token, intent)
              VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
        )
    };
}

/// Write `rec` under `s` into the keys table: a plain INSERT, or one that replaces a record.
fn write_record(
    c: &Connection,
    replace: bool,
    s: &Scope,
    rec: &KeyRecord,
) -> rusqlite::Result<usize> {
    let sql = if replace { insert_record!("INSERT OR REPLACE") } else { insert_record!("INSERT") };
    c.prepare_cached(sql)?.execute(params![
        s.user,
        s.operation,
        s.key,
        rec.fingerprint,
        rec.status,
        rec.response,
        rec.state.as_str(),
        rec.created_us as i64,
        opt_i64(rec.lease_until_us),
        opt_i64(rec.token),
        rec.intent
    ])
}

pub(crate) fn map_insert(
    m: &mut BTreeMap<Scope, KeyRecord>,
    s: &Scope,
    rec: KeyRecord,
    claim: bool,
) -> bool {
    if claim && m.contains_key(s) {
        return false;
    }
    m.insert(s.clone(), rec);
    true
}

/// A takeover of an in-progress claim whose lease expired: who takes it, until when, the
/// current time and the token of the claim being taken over (compare-and-set on it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Takeover {
    pub me: u64,
    pub until_us: u64,
    pub now_us: u64,
    pub old_token: Option<u64>,
}

pub(crate) fn sql_takeover(c: &Connection, s: &Scope, t: Takeover) -> rusqlite::Result<bool> {
    let n = c
        .prepare_cached(
            "UPDATE keys SET token = ?4, lease_until_us = ?5
             WHERE user = ?1 AND operation = ?2 AND key = ?3 AND state = 'in-progress'
               AND lease_until_us <= ?6 AND token IS ?7",
        )?
        .execute(params![
            s.user,
            s.operation,
            s.key,
            t.me as i64,
            t.until_us as i64,
            t.now_us as i64,
            opt_i64(t.old_token)
        ])?;
    Ok(n == 1)
}

pub(crate) fn map_takeover(m: &mut BTreeMap<Scope, KeyRecord>, s: &Scope, t: Takeover) -> bool {
    match m.get_mut(s) {
        Some(r)
            if r.state == RecordState::InProgress
                && r.lease_until_us.is_some_and(|l| l <= t.now_us)
                && r.token == t.old_token =>
        {
            r.token = Some(t.me);
            r.lease_until_us = Some(t.until_us);
            true
        }
        _ => false,
    }
}

/// Complete a claim with its outcome; with `fencing`, only while `me` still owns it. Returns
/// the number of records updated. SQLite updates the existing record only.
pub(crate) fn sql_complete(
    c: &Connection,
    s: &Scope,
    status: u16,
    body: &str,
    fencing: bool,
    me: u64,
) -> rusqlite::Result<usize> {
    let sql = if fencing {
        "UPDATE keys SET status = ?4, response = ?5, state = 'done', lease_until_us = NULL
         WHERE user = ?1 AND operation = ?2 AND key = ?3 AND state = 'in-progress' AND token = ?6"
    } else {
        "UPDATE keys SET status = ?4, response = ?5, state = 'done', lease_until_us = NULL
         WHERE user = ?1 AND operation = ?2 AND key = ?3 AND ?6 = ?6"
    };
    c.prepare_cached(sql)?.execute(params![s.user, s.operation, s.key, status, body, me as i64])
}

/// The map version is a cache's `SET key value EX ttl` (a compare-and-set script with
/// fencing): without fencing it writes even when the claim is gone, keeping the claim's
/// creation time and intent when there is one.
pub(crate) fn map_complete(
    m: &mut BTreeMap<Scope, KeyRecord>,
    s: &Scope,
    mut rec: KeyRecord,
    fencing: bool,
    me: u64,
) -> usize {
    match m.get(s) {
        Some(r) if fencing && !(r.state == RecordState::InProgress && r.token == Some(me)) => 0,
        None if fencing => 0,
        old => {
            if let Some(r) = old {
                rec.created_us = r.created_us;
                rec.intent = r.intent.clone();
            }
            m.insert(s.clone(), rec);
            1
        }
    }
}

/// `expiry = "on-read"`: delete the record found expired (only if it is still the one read,
/// by its creation time). The number of records deleted.
pub(crate) fn sql_delete_expired(
    c: &Connection,
    s: &Scope,
    created_us: u64,
) -> rusqlite::Result<usize> {
    c.prepare_cached(
        "DELETE FROM keys WHERE user = ?1 AND operation = ?2 AND key = ?3 AND created_us = ?4",
    )?
    .execute(params![s.user, s.operation, s.key, created_us as i64])
}

/// `on_error = ["mark-failed"]`: `me`'s own in-progress claim becomes `failed` (kept, no lease,
/// no owner). The number of records changed.
pub(crate) fn sql_mark_failed(c: &Connection, s: &Scope, me: u64) -> rusqlite::Result<usize> {
    c.prepare_cached(
        "UPDATE keys SET state = 'failed', token = NULL, lease_until_us = NULL
         WHERE user = ?1 AND operation = ?2 AND key = ?3 AND state = 'in-progress' AND token = ?4",
    )?
    .execute(params![s.user, s.operation, s.key, me as i64])
}

/// Take a `failed` record back as `me`'s in-progress claim (compare-and-set on the state: of
/// two retries, one gets it). Whether it did.
pub(crate) fn sql_retake_failed(
    c: &Connection,
    s: &Scope,
    me: u64,
    lease_until_us: Option<u64>,
) -> rusqlite::Result<bool> {
    let n = c
        .prepare_cached(
            "UPDATE keys SET state = 'in-progress', token = ?4, lease_until_us = ?5
             WHERE user = ?1 AND operation = ?2 AND key = ?3 AND state = 'failed'",
        )?
        .execute(params![s.user, s.operation, s.key, me as i64, opt_i64(lease_until_us)])?;
    Ok(n == 1)
}

/// `recovery-point:NAME`: this execution's claim remembers the phase reached and its row.
pub(crate) fn sql_save_recovery(
    c: &Connection,
    s: &Scope,
    me: u64,
    point: &str,
    row: Option<i64>,
) -> rusqlite::Result<usize> {
    c.prepare_cached(
        "UPDATE keys SET recovery_point = ?5, row_id = ?6
         WHERE user = ?1 AND operation = ?2 AND key = ?3 AND state = 'in-progress' AND token = ?4",
    )?
    .execute(params![s.user, s.operation, s.key, me as i64, point, row])
}

/// The recovery point and row a claim remembers, if any.
pub(crate) fn sql_recovery(
    c: &Connection,
    s: &Scope,
) -> rusqlite::Result<Option<(String, Option<i64>)>> {
    c.prepare_cached(
        "SELECT recovery_point, row_id FROM keys
         WHERE user = ?1 AND operation = ?2 AND key = ?3 AND recovery_point IS NOT NULL",
    )?
    .query_row(params![s.user, s.operation, s.key], |r| Ok((r.get(0)?, r.get(1)?)))
    .optional()
}

/// An abandoned claim the completer may finish: in progress, its lease ended, with a recovery
/// point and the row it inserted (and so the order, read back from the row, which holds the
/// principal the order was for).
pub(crate) struct Abandoned {
    pub scope: Scope,
    pub intent: String,
    pub fingerprint: String,
    pub token: Option<u64>,
    pub point: String,
    pub row: i64,
    pub order: crate::http::Order,
    pub created_us: u64,
}

/// Claims the completer may finish (lease ended by `now_us`), at most `limit`, oldest first.
pub(crate) fn sql_abandoned(
    c: &Connection,
    now_us: u64,
    limit: usize,
) -> rusqlite::Result<Vec<Abandoned>> {
    let mut st = c.prepare_cached(
        "SELECT k.user, k.operation, k.key, k.intent, k.fingerprint, k.token, k.recovery_point,
                k.row_id, r.user, r.operation, r.item, r.qty, k.created_us
         FROM keys k JOIN rows r ON r.id = k.row_id
         WHERE k.state = 'in-progress' AND k.recovery_point IS NOT NULL
           AND k.lease_until_us <= ?1
         ORDER BY k.created_us, k.user, k.operation, k.key LIMIT ?2",
    )?;
    let rows = st.query_map(params![now_us as i64, limit as i64], |r| {
        let op: String = r.get(9)?;
        let operation = if op == "return.create" { "return.create" } else { "order.create" };
        Ok(Abandoned {
            scope: Scope { user: r.get(0)?, operation: r.get(1)?, key: r.get(2)? },
            intent: r.get(3)?,
            fingerprint: r.get(4)?,
            token: r.get::<_, Option<i64>>(5)?.map(|t| t as u64),
            point: r.get(6)?,
            row: r.get(7)?,
            order: crate::http::Order {
                operation,
                user: r.get(8)?,
                item: r.get(10)?,
                qty: r.get(11)?,
                tenant: None,
                if_match: None,
                client_time: None,
            },
            created_us: r.get::<_, i64>(12)? as u64,
        })
    })?;
    rows.collect()
}

/// Claims a completer still has to look at: those it may finish (within `horizon_us` of
/// `now_us`) and those whose lease has not ended yet (it will judge them once it has).
pub(crate) fn sql_count_resumable(
    c: &Connection,
    now_us: u64,
    horizon_us: Option<u64>,
) -> rusqlite::Result<u64> {
    let oldest = horizon_us.map_or(i64::MIN, |h| now_us.saturating_sub(h) as i64);
    c.prepare_cached(
        "SELECT count(*) FROM keys WHERE state = 'in-progress' AND recovery_point IS NOT NULL
           AND row_id IS NOT NULL AND (created_us >= ?1 OR lease_until_us > ?2)",
    )?
    .query_row(params![oldest, now_us as i64], |r| r.get::<_, i64>(0))
    .map(|n| n as u64)
}

/// `on_error = ["unlock"]`: end this execution's claim's lease now, keep the record.
pub(crate) fn sql_unlock(c: &Connection, s: &Scope, me: u64) -> rusqlite::Result<usize> {
    c.prepare_cached(
        "UPDATE keys SET lease_until_us = 0
         WHERE user = ?1 AND operation = ?2 AND key = ?3 AND state = 'in-progress' AND token = ?4",
    )?
    .execute(params![s.user, s.operation, s.key, me as i64])
}

pub(crate) fn sql_release(c: &Connection, s: &Scope, me: u64) -> rusqlite::Result<usize> {
    c.prepare_cached(
        "DELETE FROM keys WHERE user = ?1 AND operation = ?2 AND key = ?3
           AND state = 'in-progress' AND token = ?4",
    )?
    .execute(params![s.user, s.operation, s.key, me as i64])
}

/// `on_error = ["release-key"]`: delete the key's record, whoever owns it, in any state.
pub(crate) fn sql_release_any(c: &Connection, s: &Scope) -> rusqlite::Result<usize> {
    c.prepare_cached("DELETE FROM keys WHERE user = ?1 AND operation = ?2 AND key = ?3")?
        .execute(params![s.user, s.operation, s.key])
}

pub(crate) fn map_release(m: &mut BTreeMap<Scope, KeyRecord>, s: &Scope, me: u64) -> usize {
    match m.get(s) {
        Some(r) if r.state == RecordState::InProgress && r.token == Some(me) => {
            m.remove(s);
            1
        }
        _ => 0,
    }
}

/// The collector's read of the keys it deletes. `INDEXED BY`: a range of the index on the
/// creation time, so a pass costs what it deletes, not the whole table (left to itself the
/// planner scans the primary key to skip the sort); SQLite refuses the statement rather than
/// fall back to a scan.
const COLLECT_SELECT: &str = "SELECT intent, key, state = 'done' FROM keys INDEXED BY keys_created
     WHERE created_us <= ?1 ORDER BY user, operation, key";

/// The collector's delete, over the same range of the same index.
const COLLECT_DELETE: &str = "DELETE FROM keys INDEXED BY keys_created WHERE created_us <= ?1";

/// Delete the stored keys created at or before `cutoff_us` (all of them: None) in one
/// transaction; returns each one's (intent, key, done), so that the oracle knows every
/// collected key. Its cost is proportional to the keys it deletes (a range of the index on
/// `created_us`), so a collector ticking often over many young keys stays cheap.
pub(crate) fn sql_collect(
    c: &Connection,
    cutoff_us: Option<u64>,
) -> rusqlite::Result<Vec<(String, String, bool)>> {
    let cutoff = cutoff_us.map_or(i64::MAX, |c| c as i64);
    // BEGIN and COMMIT as cached statements (a `Transaction` parses them anew on every pass);
    // on any error the transaction is rolled back, as a dropped `Transaction` would.
    store::exec_cached(c, "BEGIN")?;
    let pass = || {
        let gone = c
            .prepare_cached(COLLECT_SELECT)?
            .query_map([cutoff], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<Vec<(String, String, bool)>>>()?;
        c.prepare_cached(COLLECT_DELETE)?.execute([cutoff])?;
        store::exec_cached(c, "COMMIT")?;
        Ok(gone)
    };
    let r = pass();
    if r.is_err() && !c.is_autocommit() {
        let _ = store::exec_cached(c, "ROLLBACK");
    }
    r
}

/// Drop the records of a TTL map that expired at `now_us`, appending each to `collected`.
pub(crate) fn map_expire(
    m: &mut BTreeMap<Scope, KeyRecord>,
    ttl_us: u64,
    now_us: u64,
    collected: &mut Vec<Collected>,
) {
    m.retain(|s, r| {
        let live = r.created_us + ttl_us > now_us;
        if !live {
            collected.push(Collected::of(s, r, now_us));
        }
        live
    });
}

#[cfg(test)]
mod tests {
    //! Parity: each operation gives the same answer on SQLite and on a map, where the two are
    //! meant to agree.
    use super::*;

    fn scope(k: &str) -> Scope {
        Scope { user: "u1".into(), operation: "order.create".into(), key: k.into() }
    }

    fn rec(state: RecordState, token: u64, lease: Option<u64>) -> KeyRecord {
        KeyRecord {
            fingerprint: "f".into(),
            status: (state == RecordState::Done).then_some(201),
            response: (state == RecordState::Done).then(|| "{}".into()),
            state,
            created_us: 5,
            lease_until_us: lease,
            token: Some(token),
            intent: "i".into(),
        }
    }

    fn db() -> (Connection, BTreeMap<Scope, KeyRecord>) {
        let (_, c) = store::new_database(crate::model::Journal::Rollback).unwrap();
        (c, BTreeMap::new())
    }

    #[test]
    fn claim_lookup_complete_release_agree() {
        let (c, mut m) = db();
        let s = scope("k1");
        let claim = rec(RecordState::InProgress, 7, Some(100));
        assert!(sql_insert(&c, &s, &claim, true).unwrap());
        assert!(map_insert(&mut m, &s, claim.clone(), true));
        // A second claim loses on both.
        assert!(!sql_insert(&c, &s, &rec(RecordState::InProgress, 8, None), true).unwrap());
        assert!(!map_insert(&mut m, &s, rec(RecordState::InProgress, 8, None), true));
        assert_eq!(sql_lookup(&c, &s).unwrap(), map_lookup(&m, &s));
        // Only the owner releases.
        assert_eq!(sql_release(&c, &s, 8).unwrap(), map_release(&mut m, &s, 8));
        // Takeover before the lease ends fails, after it succeeds, once.
        let early = Takeover { me: 9, until_us: 300, now_us: 50, old_token: Some(7) };
        assert_eq!(sql_takeover(&c, &s, early).unwrap(), map_takeover(&mut m, &s, early));
        let late = Takeover { now_us: 150, ..early };
        assert!(sql_takeover(&c, &s, late).unwrap());
        assert!(map_takeover(&mut m, &s, late));
        assert!(!sql_takeover(&c, &s, late).unwrap());
        assert!(!map_takeover(&mut m, &s, late));
        assert_eq!(sql_lookup(&c, &s).unwrap(), map_lookup(&m, &s));
        // With fencing, the stale owner's completion is refused; the new owner's accepted.
        let done = rec(RecordState::Done, 9, None);
        assert_eq!(sql_complete(&c, &s, 201, "{}", true, 7).unwrap(), 0);
        assert_eq!(map_complete(&mut m, &s, done.clone(), true, 7), 0);
        assert_eq!(sql_complete(&c, &s, 201, "{}", true, 9).unwrap(), 1);
        assert_eq!(map_complete(&mut m, &s, done, true, 9), 1);
        let (a, b) = (sql_lookup(&c, &s).unwrap().unwrap(), map_lookup(&m, &s).unwrap());
        assert_eq!((a.state, a.status, a.created_us), (b.state, b.status, b.created_us));
        // A done record is not released.
        assert_eq!(sql_release(&c, &s, 9).unwrap(), map_release(&mut m, &s, 9));
        assert_eq!(sql_release(&c, &s, 9).unwrap(), 0);
    }

    #[test]
    fn completion_without_a_claim_differs_by_design() {
        // SQLite's UPDATE finds nothing; a cache SET writes the record anyway.
        let (c, mut m) = db();
        let s = scope("gone");
        assert_eq!(sql_complete(&c, &s, 201, "{}", false, 1).unwrap(), 0);
        assert_eq!(map_complete(&mut m, &s, rec(RecordState::Done, 1, None), false, 1), 1);
        // A plain insert over an existing record: SQLite refuses, a map overwrites.
        let done = rec(RecordState::Done, 2, None);
        assert!(sql_insert(&c, &s, &done, false).unwrap());
        assert!(sql_insert(&c, &s, &done, false).is_err());
        assert!(map_insert(&mut m, &s, done, false));
    }

    #[test]
    fn collection_and_expiry_report_intents() {
        let (c, mut m) = db();
        for (k, created) in [("a", 5), ("b", 50)] {
            let r = KeyRecord { created_us: created, ..rec(RecordState::Done, 1, None) };
            sql_insert(&c, &scope(k), &r, false).unwrap();
            map_insert(&mut m, &scope(k), r, false);
        }
        assert_eq!(sql_collect(&c, Some(10)).unwrap(), vec![("i".into(), "a".into(), true)]);
        let mut collected = vec![];
        map_expire(&mut m, 20, 30, &mut collected);
        let a = Collected { intent: "i".into(), key: "a".into(), done: true, at_us: 30 };
        assert_eq!(collected, vec![a]);
        assert_eq!(m.len(), 1);
        assert_eq!(sql_collect(&c, None).unwrap().len(), 1);
    }

    /// A collector pass costs what it deletes: both of its statements search a range of the
    /// index on `created_us`; neither scans the table.
    #[test]
    fn collection_searches_a_range_of_the_creation_index() {
        let (c, _) = db();
        for sql in [COLLECT_SELECT, COLLECT_DELETE] {
            let plan: Vec<String> = c
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .unwrap()
                .query_map([1], |r| r.get::<_, String>(3))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            assert!(plan.iter().any(|p| p.contains("USING INDEX keys_created")), "{plan:?}");
            assert!(!plan.iter().any(|p| p.starts_with("SCAN")), "{plan:?}");
        }
    }
}
