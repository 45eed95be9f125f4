//! The real SQLite database the server processes share.
//!
//! Each worker thread has one database per journal mode (rollback or WAL) in the `idemsim`
//! VFS (in memory, with the unix VFS's locking: `vfs.rs`), kept alive by its observer
//! connection and emptied at the start of every run. Every server process (and action, and
//! collector) gets its own connections from the thread's pool, so locking between them is
//! SQLite's own. No connection has a busy timeout: a busy handler only notes whether SQLite
//! would wait, and the caller waits in *simulated* time on SQLite's own schedule (see
//! `runner::Runner::sql`). Dropping a connection with an open transaction rolls it back, which
//! is how a crashed process loses its work.
//!
//! The `intent` columns are the oracle's instrumentation (a correlation id the client sends in
//! `X-Intent`); no model step reads them.

use std::cell::{Cell, RefCell};
use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::{Connection, OpenFlags, params};

use super::vfs;
use crate::model::Journal;

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
  created_us INTEGER NOT NULL,
  exec INTEGER NOT NULL,
  natural TEXT,
  natural_read TEXT,
  processed_us INTEGER
);
CREATE UNIQUE INDEX rows_natural ON rows(natural) WHERE natural IS NOT NULL;
CREATE TABLE resources(
  id TEXT PRIMARY KEY,
  status INTEGER NOT NULL,
  intent TEXT NOT NULL
);
CREATE TABLE docs(
  id TEXT PRIMARY KEY,
  version INTEGER NOT NULL,
  value INTEGER NOT NULL,
  intent TEXT NOT NULL,
  deleted INTEGER NOT NULL DEFAULT 0,
  stamp INTEGER
);
CREATE TABLE writes(
  doc TEXT NOT NULL,
  version INTEGER NOT NULL,
  intent TEXT NOT NULL
);
CREATE TRIGGER docs_written AFTER UPDATE OF version ON docs BEGIN
  INSERT INTO writes(doc, version, intent) VALUES (new.id, new.version, new.intent);
END;
CREATE TABLE stock(
  item TEXT PRIMARY KEY,
  units INTEGER NOT NULL CHECK (units >= 0)
);
CREATE TABLE keys(
  user TEXT NOT NULL,
  operation TEXT NOT NULL,
  key TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  status INTEGER,
  response TEXT,
  state TEXT NOT NULL,
  created_us INTEGER NOT NULL,
  lease_until_us INTEGER,
  token INTEGER,
  intent TEXT NOT NULL,
  recovery_point TEXT,
  row_id INTEGER,
  PRIMARY KEY (user, operation, key)
);
CREATE INDEX keys_created ON keys(created_us);
CREATE TABLE outbox(
  id INTEGER PRIMARY KEY,
  intent TEXT NOT NULL,
  dedupe TEXT,
  created_us INTEGER NOT NULL,
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
        vfs::register();
    });
}

thread_local! {
    /// Set when SQLite called the busy handler during the current statement.
    static BUSY_ASKED: Cell<bool> = const { Cell::new(false) };
}

/// The busy handler of every connection: it notes that SQLite *would* wait for the lock (with
/// a busy timeout, SQLite's own default handler would sleep and retry here) and gives up at
/// once, so that the caller waits in simulated time instead. When SQLite returns
/// `SQLITE_BUSY` without calling it (a transaction that has read cannot take the write lock;
/// a stale WAL snapshot), a real application gets the error at once, whatever its timeout.
fn note_busy(_count: i32) -> bool {
    BUSY_ASKED.with(|a| a.set(true));
    false
}

/// Forget whether SQLite asked to wait (before a statement).
pub fn busy_reset() {
    BUSY_ASKED.with(|a| a.set(false));
}

/// Did SQLite call its busy handler since [`busy_reset`]?
pub fn busy_asked() -> bool {
    BUSY_ASKED.with(|a| a.get())
}

/// SQLite's default busy handler (`sqliteDefaultBusyCallback`): before the `count`-th retry
/// (0-based) it sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50 ms, then 100 ms each time,
/// and gives up once the timeout would be passed. The sleep in µs, or None to give up.
pub fn default_busy_delay_us(count: u32, timeout_us: u64) -> Option<u64> {
    const DELAYS: [u64; 12] = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100];
    const TOTALS: [u64; 12] = [0, 1, 3, 8, 18, 33, 53, 78, 103, 128, 178, 228];
    let (delay, prior) = match DELAYS.get(count as usize) {
        Some(d) => (*d, TOTALS[count as usize]),
        None => (100, 228 + 100 * (count as u64 - 11)),
    };
    let (delay, prior) = (delay * 1000, prior * 1000);
    if prior + delay > timeout_us {
        let rest = timeout_us.saturating_sub(prior);
        return (rest > 0).then_some(rest);
    }
    Some(delay)
}

/// Open a connection to a run's database (`idemsim` VFS, the given journal mode). No busy
/// timeout: the busy handler only notes that SQLite would wait (see [`note_busy`]).
pub fn open(name: &str, journal: Journal) -> rusqlite::Result<Connection> {
    init_sqlite();
    let mut conn = Connection::open_with_flags_and_vfs(
        name,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        vfs::NAME,
    )?;
    conn.busy_handler(Some(note_busy))?;
    let mode = match journal {
        Journal::Rollback => "DELETE",
        Journal::Wal => "WAL",
    };
    conn.pragma_update(None, "journal_mode", mode)?;
    Ok(conn)
}

/// A new database: its name and the connection that keeps it alive (the pool's observer).
/// The name is unique per process (never part of any trace or report).
pub fn new_database(journal: Journal) -> rusqlite::Result<(String, Connection)> {
    let n = DB_COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = format!("/idemsim-{}-{n}-{}.db", std::process::id(), journal.name());
    let conn = open(&name, journal)?;
    conn.execute_batch(SCHEMA)?;
    Ok((name, conn))
}

/// Run a statement without parameters through the connection's statement cache (BEGIN,
/// COMMIT, ROLLBACK are parsed once per connection, not on every call).
pub fn exec_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// A run's database: its name and journal mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Db {
    pub name: String,
    pub journal: Journal,
}

/// Per worker thread and journal mode: one run database, reused run after run (emptied at
/// the start of each), its observer connection, and spare connections for server processes.
/// Opening a connection and creating the schema cost more than the rest of a small run; a
/// reused connection also keeps its prepared statements.
struct Pool {
    db: Db,
    observer: Connection,
    spare: Vec<Connection>,
    /// The VFS keeps the empty database's file, to put back before each run (rollback
    /// journal only).
    image: bool,
}

thread_local! {
    static POOLS: RefCell<Vec<Pool>> = const { RefCell::new(Vec::new()) };
    /// The next [`Pooled::id`].
    static NEXT_CONN: Cell<u64> = const { Cell::new(1) };
}

const MAX_SPARE: usize = 64;

/// An empty database with this journal mode for the next run on this thread.
pub fn fresh_run_database(journal: Journal) -> rusqlite::Result<Db> {
    POOLS.with(|p| {
        let mut pools = p.borrow_mut();
        if let Some(i) = pools.iter().position(|p| p.db.journal == journal) {
            // The empty database's bytes put back: a memcpy, no statement.
            if pools[i].image && vfs::restore(&pools[i].db.name) {
                return Ok(pools[i].db.clone());
            }
            // Otherwise one transaction for the deletes: one journal, one lock cycle.
            let o = &pools[i].observer;
            let wiped = exec_cached(o, "BEGIN IMMEDIATE")
                .and_then(|_| exec_cached(o, "DELETE FROM rows"))
                .and_then(|_| exec_cached(o, "DELETE FROM keys"))
                .and_then(|_| exec_cached(o, "DELETE FROM outbox"))
                .and_then(|_| exec_cached(o, "DELETE FROM stock"))
                .and_then(|_| exec_cached(o, "DELETE FROM resources"))
                .and_then(|_| exec_cached(o, "DELETE FROM docs"))
                .and_then(|_| exec_cached(o, "DELETE FROM writes"))
                .and_then(|_| exec_cached(o, "COMMIT"));
            if wiped.is_err() && !o.is_autocommit() {
                let _ = exec_cached(o, "ROLLBACK");
            }
            if wiped.is_ok() {
                return Ok(pools[i].db.clone());
            }
            // Something still holds a lock (it should not): start over with a new database.
            pools.remove(i);
        }
        let (name, observer) = new_database(journal)?;
        let image = journal == Journal::Rollback && vfs::snapshot(&name);
        let db = Db { name, journal };
        pools.push(Pool { db: db.clone(), observer, spare: Vec::new(), image });
        Ok(db)
    })
}

/// Run `f` with this thread's observer connection of `db` (the one that keeps it alive).
pub fn with_observer<T>(
    db: &Db,
    f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    POOLS.with(|p| match p.borrow().iter().find(|p| p.db == *db) {
        Some(pool) => f(&pool.observer),
        None => Err(rusqlite::Error::InvalidPath("no run database on this thread".into())),
    })
}

/// A connection checked out of this thread's pool. Dropping it is a crash or a clean stop:
/// an open transaction is rolled back (as when a real connection closes), then the
/// connection goes back to the pool.
pub struct Pooled {
    /// Unique among the connections checked out on this thread (the run's).
    pub id: u64,
    conn: Option<Connection>,
    db: Db,
    /// `total_changes` when the connection's current transaction began.
    begin_changes: Cell<u64>,
    /// The execution whose BEGIN (explicit, or the implicit one of an autocommit write) last
    /// opened a transaction on this connection: the owner of the open transaction, if any.
    owner: Cell<Option<u64>>,
}

impl Pooled {
    /// Note that a transaction begins now, opened by execution `owner`.
    pub fn mark_begin(&self, owner: u64) {
        self.begin_changes.set(self.total_changes());
        self.owner.set(Some(owner));
    }

    /// Is a transaction open on this connection, and did execution `id` open it?
    pub fn tx_owned_by(&self, id: u64) -> bool {
        !self.is_autocommit() && self.owner.get() == Some(id)
    }

    /// Has the connection changed rows since [`Pooled::mark_begin`]?
    pub fn wrote_since_begin(&self) -> bool {
        self.total_changes() > self.begin_changes.get()
    }
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
        let _ = POOLS.try_with(|p| {
            if let Ok(mut pools) = p.try_borrow_mut()
                && let Some(pool) = pools.iter_mut().find(|p| p.db == self.db)
                && pool.spare.len() < MAX_SPARE
            {
                pool.spare.push(conn);
            }
        });
    }
}

/// A connection to the run database `db`, from this thread's pool when it has one.
pub fn checkout(db: &Db) -> rusqlite::Result<Pooled> {
    let reused = POOLS.with(|p| {
        p.borrow_mut().iter_mut().find(|p| p.db == *db).and_then(|pool| pool.spare.pop())
    });
    let conn = match reused {
        Some(c) => c,
        None => open(&db.name, db.journal)?,
    };
    Ok(Pooled {
        id: NEXT_CONN.with(|n| {
            let id = n.get();
            n.set(id + 1);
            id
        }),
        conn: Some(conn),
        db: db.clone(),
        begin_changes: Cell::new(0),
        owner: Cell::new(None),
    })
}

/// `SQLITE_BUSY_SNAPSHOT`: a WAL read transaction whose snapshot is stale tried to write.
pub fn is_busy_snapshot(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.extended_code == rusqlite::ffi::SQLITE_BUSY_SNAPSHOT)
}

/// SQLite's `SQLITE_BUSY` as rusqlite gives it: what a statement gets when the database is
/// locked by a commit the engine models outside SQLite (its journal sync).
pub fn busy_error() -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
        Some("database is locked".to_string()),
    )
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

/// The columns [`record_from_row`] reads, in its order: a literal, so that the queries
/// built on it are literals too (no formatting per statement).
macro_rules! record_columns {
    () => {
        "fingerprint, status, response, state, created_us, lease_until_us, token, intent"
    };
}
pub(crate) use record_columns;

/// A [`KeyRecord`] from a row selected with [`record_columns!`] starting at column `at`.
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
        created_us: r.get::<_, i64>(at + 4)? as u64,
        lease_until_us: r.get::<_, Option<i64>>(at + 5)?.map(|v| v as u64),
        token: r.get::<_, Option<i64>>(at + 6)?.map(|v| v as u64),
        intent: r.get(at + 7)?,
    })
}

pub fn read_rows(conn: &Connection) -> rusqlite::Result<Vec<RowRecord>> {
    let mut st = conn.prepare_cached(
        "SELECT id, user, operation, item, qty, intent, created_us, exec, processed_us IS NOT NULL
         FROM rows ORDER BY id",
    )?;
    let rows = st.query_map([], |r| {
        Ok(RowRecord {
            id: r.get(0)?,
            user: r.get(1)?,
            operation: r.get(2)?,
            item: r.get(3)?,
            qty: r.get(4)?,
            intent: r.get(5)?,
            created_us: r.get(6)?,
            exec: r.get(7)?,
            processed: r.get(8)?,
        })
    })?;
    rows.collect()
}

/// Every stored key with its record, in scope order.
pub fn read_keys(conn: &Connection) -> rusqlite::Result<Vec<(Scope, KeyRecord)>> {
    let sql = concat!(
        "SELECT user, operation, key, ",
        record_columns!(),
        " FROM keys ORDER BY user, operation, key"
    );
    let mut st = conn.prepare_cached(sql)?;
    let rows = st.query_map([], |r| {
        Ok((
            Scope { user: r.get(0)?, operation: r.get(1)?, key: r.get(2)? },
            record_from_row(r, 3)?,
        ))
    })?;
    rows.collect()
}

/// What `insert-row` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowInsert {
    Inserted(i64),
    /// The UNIQUE business key (`natural`) is held by this row: (id, item, qty, marked
    /// processed).
    Clash(i64, String, i64, bool),
}

/// Insert the business row of a validated order, with its business key (`natural`, None:
/// no uniqueness); a clash on that key reads the row that holds it.
/// A row to insert: its id (the engine's, never reused in a run), its intent, when, by whom.
pub struct NewRow<'a> {
    pub id: i64,
    pub intent: &'a str,
    pub now_us: u64,
    pub exec: u64,
}

pub fn insert_row(
    c: &Connection,
    o: &Order,
    row: &NewRow,
    natural: Option<&str>,
    constraint: bool,
) -> rusqlite::Result<RowInsert> {
    let sql = if constraint {
        "INSERT INTO rows(id, user, operation, item, qty, intent, created_us, exec, natural)
         VALUES (?9, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
    } else {
        "INSERT INTO rows(id, user, operation, item, qty, intent, created_us, exec, natural_read)
         VALUES (?9, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
    };
    let inserted = c.prepare_cached(sql)?.execute(params![
        o.principal(),
        o.operation,
        o.item,
        o.qty,
        row.intent,
        row.now_us as i64,
        row.exec as i64,
        natural,
        row.id
    ]);
    match inserted {
        Ok(_) => Ok(RowInsert::Inserted(row.id)),
        Err(e) if natural.is_some() && is_constraint(&e) => c
            .prepare_cached(
                "SELECT id, item, qty, processed_us IS NOT NULL FROM rows WHERE natural = ?1",
            )?
            .query_row([natural], |r| {
                Ok(RowInsert::Clash(r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            }),
        Err(e) => Err(e),
    }
}

/// `mark-processed`: the row's event is handled. The number of rows marked.
pub fn mark_processed(c: &Connection, row: i64, now_us: u64) -> rusqlite::Result<usize> {
    c.prepare_cached("UPDATE rows SET processed_us = ?2 WHERE id = ?1")?
        .execute(params![row, now_us as i64])
}

/// `check-row`: the first row holding the business key, enforced or not: (id, item, qty).
pub fn find_row(c: &Connection, natural: &str) -> rusqlite::Result<Option<(i64, String, i64)>> {
    use rusqlite::OptionalExtension;
    c.prepare_cached(
        "SELECT id, item, qty FROM rows WHERE natural = ?1 OR natural_read = ?1 ORDER BY id LIMIT 1",
    )?
    .query_row([natural], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
    .optional()
}

/// Queue an outbox message for `intent`'s effect; returns its id.
pub fn insert_outbox(
    c: &Connection,
    intent: &str,
    dedupe: Option<&str>,
    now_us: u64,
) -> rusqlite::Result<i64> {
    c.prepare_cached("INSERT INTO outbox(intent, dedupe, created_us) VALUES (?1, ?2, ?3)")?
        .execute(params![intent, dedupe, now_us as i64])?;
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
/// Key records holding a completed outcome (a stored response a retry would be answered with).
pub fn count_responses(conn: &Connection) -> rusqlite::Result<u64> {
    conn.query_row("SELECT COUNT(*) FROM keys WHERE state = 'done'", params![], |r| {
        r.get::<_, i64>(0)
    })
    .map(|n| n as u64)
}

pub fn count_keys(conn: &Connection) -> rusqlite::Result<u64> {
    conn.query_row("SELECT COUNT(*) FROM keys", params![], |r| r.get::<_, i64>(0)).map(|n| n as u64)
}

/// Outbox messages not yet marked sent.
/// `apply-status`: one statement, an upsert of the resource's status; with `monotonic`, an
/// event whose status is not past the stored one changes nothing. Whether it changed a row.
pub fn apply_status(
    c: &Connection,
    resource: &str,
    rank: i64,
    intent: &str,
    monotonic: bool,
) -> rusqlite::Result<bool> {
    let sql = if monotonic {
        "INSERT INTO resources(id, status, intent) VALUES (?1, ?2, ?3)
         ON CONFLICT(id) DO UPDATE SET status = excluded.status, intent = excluded.intent
         WHERE excluded.status > resources.status"
    } else {
        "INSERT INTO resources(id, status, intent) VALUES (?1, ?2, ?3)
         ON CONFLICT(id) DO UPDATE SET status = excluded.status, intent = excluded.intent"
    };
    Ok(c.prepare_cached(sql)?.execute(params![resource, rank, intent])? == 1)
}

/// Every resource's final status, by id.
pub fn read_resources(conn: &Connection) -> rusqlite::Result<Vec<(String, i64)>> {
    let mut st = conn.prepare_cached("SELECT id, status FROM resources ORDER BY id")?;
    let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

/// The documents the sim's requests update, each at version 1 with value 0.
pub fn fill_docs<'a>(
    conn: &Connection,
    docs: impl IntoIterator<Item = &'a str>,
) -> rusqlite::Result<()> {
    for doc in docs {
        conn.prepare_cached(
            "INSERT OR IGNORE INTO docs(id, version, value, intent) VALUES (?1, 1, 0, '')",
        )?
        .execute(params![doc])?;
    }
    Ok(())
}

/// What `update-doc` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocWrite {
    /// Written; the document is now at this version.
    Updated(i64),
    /// `If-Match` named another version: the current one.
    Stale(i64),
    /// No such document.
    Missing,
}

/// `update-doc`: one statement, `UPDATE docs SET value = ?, version = version + 1 WHERE id = ?`
/// with `AND version = ?` when `if_match` is given (a trigger logs the write for the oracle).
/// When it changed nothing, a read of the current version tells a stale `If-Match` from a
/// missing document.
pub fn update_doc(
    c: &Connection,
    doc: &str,
    value: i64,
    intent: &str,
    if_match: Option<i64>,
) -> rusqlite::Result<DocWrite> {
    use rusqlite::OptionalExtension;
    let written: Option<i64> = c
        .prepare_cached(
            "UPDATE docs SET value = ?2, version = version + 1, intent = ?3 \
             WHERE id = ?1 AND deleted = 0 AND (?4 IS NULL OR version = ?4) RETURNING version",
        )?
        .query_row(params![doc, value, intent, if_match], |r| r.get(0))
        .optional()?;
    if let Some(v) = written {
        return Ok(DocWrite::Updated(v));
    }
    current_version(c, doc)
}

/// `update-doc` under `check = "client-time"`: one statement that writes only if the
/// client's stamp is newer than the stored one (`Stale(current)` otherwise: ignored).
pub fn update_doc_stamped(
    c: &Connection,
    doc: &str,
    value: i64,
    intent: &str,
    stamp: i64,
) -> rusqlite::Result<DocWrite> {
    use rusqlite::OptionalExtension;
    let written: Option<i64> = c
        .prepare_cached(
            "UPDATE docs SET value = ?2, version = version + 1, intent = ?3, stamp = ?4 \
             WHERE id = ?1 AND deleted = 0 AND (stamp IS NULL OR stamp < ?4) RETURNING version",
        )?
        .query_row(params![doc, value, intent, stamp], |r| r.get(0))
        .optional()?;
    match written {
        Some(v) => Ok(DocWrite::Updated(v)),
        None => current_version(c, doc),
    }
}

/// After a conditional write changed nothing: a stale `If-Match` (the current version) or a
/// document that does not exist (never did, or deleted).
fn current_version(c: &Connection, doc: &str) -> rusqlite::Result<DocWrite> {
    use rusqlite::OptionalExtension;
    let current: Option<i64> = c
        .prepare_cached("SELECT version FROM docs WHERE id = ?1 AND deleted = 0")?
        .query_row(params![doc], |r| r.get(0))
        .optional()?;
    Ok(current.map_or(DocWrite::Missing, DocWrite::Stale))
}

/// `update-doc` for a DELETE: one statement, a soft delete that makes a new version (`UPDATE
/// docs SET deleted = 1, version = version + 1 …`, logged like any write), with `AND version
/// = ?` when `if_match` is given.
pub fn delete_doc(
    c: &Connection,
    doc: &str,
    intent: &str,
    if_match: Option<i64>,
) -> rusqlite::Result<DocWrite> {
    use rusqlite::OptionalExtension;
    let written: Option<i64> = c
        .prepare_cached(
            "UPDATE docs SET deleted = 1, version = version + 1, intent = ?2 \
             WHERE id = ?1 AND deleted = 0 AND (?3 IS NULL OR version = ?3) RETURNING version",
        )?
        .query_row(params![doc, intent, if_match], |r| r.get(0))
        .optional()?;
    match written {
        Some(v) => Ok(DocWrite::Updated(v)),
        None => current_version(c, doc),
    }
}

/// Every write to a document, by document and version.
pub fn read_writes(conn: &Connection) -> rusqlite::Result<Vec<crate::report::DocWriteRecord>> {
    let mut st =
        conn.prepare_cached("SELECT doc, version, intent FROM writes ORDER BY doc, version")?;
    let rows = st.query_map([], |r| {
        Ok(crate::report::DocWriteRecord { doc: r.get(0)?, version: r.get(1)?, intent: r.get(2)? })
    })?;
    rows.collect()
}

/// Put the sim's stock in (the run's database is empty).
pub fn fill_stock(conn: &Connection, stock: &[(String, i64)]) -> rusqlite::Result<()> {
    for (item, units) in stock {
        conn.prepare_cached("INSERT INTO stock(item, units) VALUES (?1, ?2)")?
            .execute(params![item, units])?;
    }
    Ok(())
}

/// `take-stock`: one statement, `UPDATE stock SET units = units - qty`; the CHECK refuses
/// to go below zero. Ok(false): sold out.
pub fn take_stock(conn: &Connection, item: &str, qty: i64) -> rusqlite::Result<bool> {
    match conn
        .prepare_cached("UPDATE stock SET units = units - ?2 WHERE item = ?1")?
        .execute(params![item, qty])
    {
        Ok(_) => Ok(true),
        Err(e) if is_constraint(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The intent of every outbox message not yet sent, in id order.
pub fn unsent_intents(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut st = conn.prepare_cached("SELECT intent FROM outbox WHERE sent = 0 ORDER BY id")?;
    let rows = st.query_map([], |r| r.get(0))?;
    rows.collect()
}

pub fn count_unsent(conn: &Connection) -> rusqlite::Result<u64> {
    conn.query_row("SELECT COUNT(*) FROM outbox WHERE sent = 0", [], |r| r.get::<_, i64>(0))
        .map(|n| n as u64)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod busy_tests {
    use super::*;

    #[test]
    fn default_busy_schedule_is_sqlites() {
        let delays: Vec<u64> = (0..14).map_while(|c| default_busy_delay_us(c, 5_000_000)).collect();
        assert_eq!(
            delays.iter().map(|d| d / 1000).collect::<Vec<_>>(),
            [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100, 100, 100]
        );
        // A 50 ms budget: 1 + 2 + 5 + 10 + 15 = 33, then the last 17 ms, then give up.
        let short: Vec<u64> = (0..10).map_while(|c| default_busy_delay_us(c, 50_000)).collect();
        assert_eq!(short, [1_000, 2_000, 5_000, 10_000, 15_000, 17_000]);
        assert_eq!(default_busy_delay_us(0, 0), None);
    }
}
