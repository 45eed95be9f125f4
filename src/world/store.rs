//! The real SQLite database the server processes share.
//!
//! Each worker thread has one named in-memory database (`memdb` VFS), kept alive by its
//! observer connection and emptied at the start of every run. Every server process (and
//! action, and collector) gets its own connection from the thread's pool, so locking between
//! processes is SQLite's own. `busy_timeout` is 0 everywhere: a locked database is waited out in
//! *simulated* time by the caller (see `exec::Runner::sql`). Dropping a connection with an open
//! transaction rolls it back, which is how a crashed process loses its work.
//!
//! The `intent` columns are the oracle's instrumentation (a correlation id the client sends in
//! `X-Intent`); no model step reads them.

use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::{Connection, OpenFlags, params};

use crate::http::Order;
use crate::report::{KeyRecord, RecordState, RowRecord, Scope};

pub const SCHEMA: &str = "
CREATE TABLE rows(
  id INTEGER PRIMARY KEY,
  user TEXT NOT NULL,
  operation TEXT NOT NULL,
  item TEXT NOT NULL,
  qty INTEGER NOT NULL,
  intent TEXT NOT NULL,
  created_ms INTEGER NOT NULL
);
CREATE TABLE keys(
  user TEXT NOT NULL,
  operation TEXT NOT NULL,
  key TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  status INTEGER,
  response TEXT,
  state TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  lease_until_ms INTEGER,
  token INTEGER,
  intent TEXT NOT NULL,
  PRIMARY KEY (user, operation, key)
);
CREATE TABLE outbox(
  id INTEGER PRIMARY KEY,
  intent TEXT NOT NULL,
  dedupe TEXT,
  created_ms INTEGER NOT NULL,
  sent INTEGER NOT NULL DEFAULT 0
);
";

static DB_COUNTER: AtomicU64 = AtomicU64::new(0);
static SQLITE_INIT: Once = Once::new();

fn init_sqlite() {
    SQLITE_INIT.call_once(|| {
        // SQLite's default MEMSTATUS takes a global mutex on every malloc; parallel sweeps were
        // slower on two threads than on one until it was off. Must precede the first open.
        unsafe {
            rusqlite::ffi::sqlite3_config(
                rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS,
                0 as std::ffi::c_int,
            );
        }
    });
}

/// Open a connection to a run's database. `busy_timeout` is 0: the caller waits in simulated time.
pub fn open(uri: &str) -> rusqlite::Result<Connection> {
    init_sqlite();
    let conn = Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::ZERO)?;
    Ok(conn)
}

/// A new database: its URI and the connection that keeps it alive (the pool's observer).
/// The name is unique per process (never part of any trace or report).
pub fn new_database() -> rusqlite::Result<(String, Connection)> {
    let n = DB_COUNTER.fetch_add(1, Ordering::Relaxed);
    let uri = format!("file:/idemsim-{}-{n}?vfs=memdb", std::process::id());
    let conn = open(&uri)?;
    conn.execute_batch(SCHEMA)?;
    Ok((uri, conn))
}

/// Run a statement without parameters through the connection's statement cache (BEGIN,
/// COMMIT, ROLLBACK are parsed once per connection, not on every call).
pub fn exec_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// Per worker thread: one run database, reused run after run (emptied at the start of each),
/// its observer connection, and spare connections for server processes. Opening a connection
/// and creating the schema cost more than the rest of a small run; a reused connection also
/// keeps its prepared statements.
struct Pool {
    uri: String,
    observer: Connection,
    spare: Vec<Connection>,
}

thread_local! {
    static POOL: std::cell::RefCell<Option<Pool>> = const { std::cell::RefCell::new(None) };
}

const MAX_SPARE: usize = 64;

/// An empty database for the next run on this thread; returns its URI.
pub fn fresh_run_database() -> rusqlite::Result<String> {
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        if let Some(pool) = p.as_ref() {
            // One transaction for the three deletes: one journal, one lock cycle.
            let o = &pool.observer;
            let wiped = exec_cached(o, "BEGIN IMMEDIATE")
                .and_then(|_| exec_cached(o, "DELETE FROM rows"))
                .and_then(|_| exec_cached(o, "DELETE FROM keys"))
                .and_then(|_| exec_cached(o, "DELETE FROM outbox"))
                .and_then(|_| exec_cached(o, "COMMIT"));
            if wiped.is_err() && !o.is_autocommit() {
                let _ = exec_cached(o, "ROLLBACK");
            }
            if wiped.is_ok() {
                return Ok(pool.uri.clone());
            }
            // Something still holds a lock (it should not): start over with a new database.
        }
        let (uri, observer) = new_database()?;
        *p = Some(Pool { uri: uri.clone(), observer, spare: Vec::new() });
        Ok(uri)
    })
}

/// Run `f` with this thread's observer connection (the one that keeps the database alive).
pub fn with_observer<T>(f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    POOL.with(|p| match p.borrow().as_ref() {
        Some(pool) => f(&pool.observer),
        None => Err(rusqlite::Error::InvalidPath("no run database on this thread".into())),
    })
}

/// A connection checked out of this thread's pool. Dropping it is a crash or a clean stop:
/// an open transaction is rolled back (as when a real connection closes), then the
/// connection goes back to the pool.
pub struct Pooled {
    conn: Option<Connection>,
    uri: String,
}

impl std::ops::Deref for Pooled {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn.as_ref().expect("present until drop")
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        if !conn.is_autocommit() {
            let _ = exec_cached(&conn, "ROLLBACK");
        }
        if !conn.is_autocommit() {
            return; // could not roll back: close it instead
        }
        let _ = POOL.try_with(|p| {
            if let Ok(mut p) = p.try_borrow_mut()
                && let Some(pool) = p.as_mut()
                && pool.uri == self.uri
                && pool.spare.len() < MAX_SPARE
            {
                pool.spare.push(conn);
            }
        });
    }
}

/// A connection to the run database `uri`, from this thread's pool when it has one.
pub fn checkout(uri: &str) -> rusqlite::Result<Pooled> {
    let reused = POOL.with(|p| {
        let mut p = p.borrow_mut();
        match p.as_mut() {
            Some(pool) if pool.uri == uri => pool.spare.pop(),
            _ => None,
        }
    });
    let conn = match reused {
        Some(c) => c,
        None => open(uri)?,
    };
    Ok(Pooled { conn: Some(conn), uri: uri.to_string() })
}

pub fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::SqliteFailure(f, _)
            if f.code == rusqlite::ErrorCode::DatabaseBusy || f.code == rusqlite::ErrorCode::DatabaseLocked
    )
}

pub fn is_constraint(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation)
}

/// The columns [`record_from_row`] reads, in its order.
pub const RECORD_COLUMNS: &str =
    "fingerprint, status, response, state, created_ms, lease_until_ms, token, intent";

/// A [`KeyRecord`] from a row selected with [`RECORD_COLUMNS`] starting at column `at`.
pub fn record_from_row(r: &rusqlite::Row, at: usize) -> rusqlite::Result<KeyRecord> {
    let state: String = r.get(at + 3)?;
    let state = RecordState::parse(&state).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            at + 3,
            rusqlite::types::Type::Text,
            format!("unknown key state `{state}`").into(),
        )
    })?;
    Ok(KeyRecord {
        fingerprint: r.get(at)?,
        status: r.get(at + 1)?,
        response: r.get(at + 2)?,
        state,
        created_ms: r.get::<_, i64>(at + 4)? as u64,
        lease_until_ms: r.get::<_, Option<i64>>(at + 5)?.map(|v| v as u64),
        token: r.get::<_, Option<i64>>(at + 6)?.map(|v| v as u64),
        intent: r.get(at + 7)?,
    })
}

pub fn read_rows(conn: &Connection) -> rusqlite::Result<Vec<RowRecord>> {
    let mut st = conn.prepare_cached(
        "SELECT id, user, operation, item, qty, intent, created_ms FROM rows ORDER BY id",
    )?;
    let rows = st.query_map([], |r| {
        Ok(RowRecord {
            id: r.get(0)?,
            user: r.get(1)?,
            operation: r.get(2)?,
            item: r.get(3)?,
            qty: r.get(4)?,
            intent: r.get(5)?,
            created_ms: r.get(6)?,
        })
    })?;
    rows.collect()
}

/// Every stored key with its record, in scope order.
pub fn read_keys(conn: &Connection) -> rusqlite::Result<Vec<(Scope, KeyRecord)>> {
    let sql = format!(
        "SELECT user, operation, key, {RECORD_COLUMNS} FROM keys ORDER BY user, operation, key"
    );
    let mut st = conn.prepare_cached(&sql)?;
    let rows = st.query_map([], |r| {
        Ok((
            Scope { user: r.get(0)?, operation: r.get(1)?, key: r.get(2)? },
            record_from_row(r, 3)?,
        ))
    })?;
    rows.collect()
}

/// Insert the business row of a validated order; returns its id.
pub fn insert_row(c: &Connection, o: &Order, intent: &str, now_ms: u64) -> rusqlite::Result<i64> {
    c.prepare_cached(
        "INSERT INTO rows(user, operation, item, qty, intent, created_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![o.user, o.operation, o.item, o.qty, intent, now_ms as i64])?;
    Ok(c.last_insert_rowid())
}

/// Queue an outbox message for `intent`'s effect; returns its id.
pub fn insert_outbox(
    c: &Connection,
    intent: &str,
    dedupe: Option<&str>,
    now_ms: u64,
) -> rusqlite::Result<i64> {
    c.prepare_cached("INSERT INTO outbox(intent, dedupe, created_ms) VALUES (?1, ?2, ?3)")?
        .execute(params![intent, dedupe, now_ms as i64])?;
    Ok(c.last_insert_rowid())
}

/// Up to `limit` unsent outbox messages, oldest first: (id, intent, dedupe key).
pub fn unsent_outbox(
    c: &Connection,
    limit: u32,
) -> rusqlite::Result<Vec<(i64, String, Option<String>)>> {
    c.prepare_cached("SELECT id, intent, dedupe FROM outbox WHERE sent = 0 ORDER BY id LIMIT ?1")?
        .query_map([limit], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect()
}

/// Mark an outbox message sent.
pub fn mark_sent(c: &Connection, id: i64) -> rusqlite::Result<usize> {
    c.prepare_cached("UPDATE outbox SET sent = 1 WHERE id = ?1")?.execute(params![id])
}

/// Rows in the business table.
pub fn count_rows(conn: &Connection) -> rusqlite::Result<u64> {
    conn.query_row("SELECT COUNT(*) FROM rows", params![], |r| r.get::<_, i64>(0)).map(|n| n as u64)
}

/// Records in the `keys` table.
pub fn count_keys(conn: &Connection) -> rusqlite::Result<u64> {
    conn.query_row("SELECT COUNT(*) FROM keys", params![], |r| r.get::<_, i64>(0)).map(|n| n as u64)
}

/// Outbox messages not yet marked sent.
pub fn count_unsent(conn: &Connection) -> rusqlite::Result<u64> {
    conn.query_row("SELECT COUNT(*) FROM outbox WHERE sent = 0", [], |r| r.get::<_, i64>(0))
        .map(|n| n as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_connections_share_one_database_and_lock_it() {
        let (uri, keep) = new_database().unwrap();
        let a = open(&uri).unwrap();
        let b = open(&uri).unwrap();
        a.execute_batch("BEGIN IMMEDIATE").unwrap();
        a.execute("INSERT INTO rows(user, operation, item, qty, intent, created_ms) VALUES ('u','o','i',1,'x',0)", []).unwrap();
        let e = b.execute_batch("BEGIN IMMEDIATE").unwrap_err();
        assert!(is_busy(&e), "{e}");
        drop(a); // a crash: the open transaction rolls back
        b.execute_batch("BEGIN IMMEDIATE").unwrap();
        b.execute_batch("COMMIT").unwrap();
        assert_eq!(count_rows(&keep).unwrap(), 0);
    }
}
