//! Differential tests: the same schedules on this VFS and on real files (unix VFS) in a
//! temporary folder give the same result for every statement.
use rusqlite::{Connection, OpenFlags};

use super::*;

fn open(path: &str, vfs: Option<&str>, journal: &str) -> Connection {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut c = match vfs {
        Some(v) => Connection::open_with_flags_and_vfs(path, flags, v).unwrap(),
        None => Connection::open_with_flags(path, flags).unwrap(),
    };
    c.busy_handler(Some(note_busy_handler)).unwrap();
    c.pragma_update(None, "journal_mode", journal).unwrap();
    c
}

thread_local! {
    static ASKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A busy handler that only notes that SQLite asked (so that a lock would have been
/// waited for with a busy timeout) and gives up at once.
fn note_busy_handler(_count: i32) -> bool {
    ASKED.with(|a| a.set(true));
    false
}

/// One step of a schedule: connection, statement.
type Step = (usize, &'static str);

const STATEMENTS: &[&str] = &[
    "BEGIN DEFERRED",
    "BEGIN IMMEDIATE",
    "BEGIN EXCLUSIVE",
    "SELECT COUNT(*) FROM t",
    "INSERT INTO t(v) VALUES (1)",
    "COMMIT",
    "ROLLBACK",
];

/// Run a schedule on three connections; the outcome of every step as text.
fn play(conns: &[Connection], steps: &[Step]) -> Vec<String> {
    steps
        .iter()
        .map(|(c, sql)| {
            let conn = &conns[*c];
            ASKED.with(|a| a.set(false));
            let r = if sql.starts_with("SELECT") {
                conn.query_row(sql, [], |r| r.get::<_, i64>(0)).map(|n| n.to_string())
            } else {
                conn.execute_batch(sql).map(|_| "ok".to_string())
            };
            let state = conn.is_autocommit();
            let asked = ASKED.with(|a| a.get());
            match r {
                Ok(v) => format!("{c} {sql}: {v} auto={state}"),
                Err(e) => format!("{c} {sql}: {} auto={state} waits={asked}", code(&e)),
            }
        })
        .collect()
}

fn code(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(f, _) => format!("error {}", f.extended_code),
        other => format!("error {other}"),
    }
}

/// A small deterministic generator (xorshift) for schedules.
fn schedules(seed: u64, n: usize, len: usize) -> Vec<Vec<Step>> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n)
        .map(|_| {
            (0..len)
                .map(|_| {
                    let c = (next() % 3) as usize;
                    (c, STATEMENTS[(next() % STATEMENTS.len() as u64) as usize])
                })
                .collect()
        })
        .collect()
}

fn differential(journal: &str, seed: u64) {
    register();
    let dir = std::env::temp_dir().join(format!("idemsim-vfs-{}-{journal}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (k, steps) in schedules(seed, 150, 40).iter().enumerate() {
        let file = dir.join(format!("db-{k}.db"));
        let file = file.to_str().unwrap();
        let mem = format!("/vfs-test-{}-{journal}-{k}.db", std::process::id());
        let run = |path: &str, vfs: Option<&str>| {
            let setup = open(path, vfs, journal);
            setup.execute_batch("CREATE TABLE IF NOT EXISTS t(v INTEGER)").unwrap();
            let conns: Vec<Connection> = (0..3).map(|_| open(path, vfs, journal)).collect();
            let out = play(&conns, steps);
            drop(conns);
            out
        };
        let real = run(file, None);
        let ours = run(&mem, Some(NAME));
        assert_eq!(real, ours, "{journal} schedule {k}: {steps:?}");

        registry().retain(|n, _| !n.starts_with(&mem));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn differential_rollback_journal() {
    differential("delete", 0x9e37_79b9_7f4a_7c15);
}

#[test]
fn differential_wal() {
    differential("wal", 0x2545_f491_4f6c_dd1d);
}

#[test]
fn wal_reader_keeps_its_snapshot_and_rollback_reader_is_not_blocked_by_reserved() {
    register();
    for (journal, reader_sees) in [("wal", "0"), ("delete", "0")] {
        let name = format!("/vfs-snapshot-{journal}.db");
        let setup = open(&name, Some(NAME), journal);
        setup.execute_batch("CREATE TABLE t(v INTEGER)").unwrap();
        let (w, r) = (open(&name, Some(NAME), journal), open(&name, Some(NAME), journal));
        w.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (1)").unwrap();
        // A reader is let in while the writer holds RESERVED (rollback) or the WAL write lock.
        let n: String =
            r.query_row("SELECT COUNT(*) FROM t", [], |x| x.get::<_, i64>(0)).unwrap().to_string();
        assert_eq!(n, reader_sees, "{journal}");
        w.execute_batch("COMMIT").unwrap();
    }
}

#[test]
fn a_deleted_journal_s_buffer_serves_the_next_file_created_and_that_file_is_empty() {
    register();
    let spare_capacity = || {
        SPARE.with(|s| {
            let v = s.take();
            let c = v.capacity();
            s.set(v);
            c
        })
    };
    let name = format!("/vfs-recycle-{}.db", std::process::id());
    let c = open(&name, Some(NAME), "delete");
    c.execute_batch(
        "CREATE TABLE t(v BLOB);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100)
         INSERT INTO t SELECT randomblob(3000) FROM n",
    )
    .unwrap();
    let sum = "SELECT SUM(length(v)), group_concat(hex(substr(v, 1500, 16))) FROM t";
    let before: (i64, String) = c.query_row(sum, [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    // This transaction's journal holds the ~100 pages it overwrites (over 300 kB); ROLLBACK
    // reads them back, then the journal is deleted and its buffer kept.
    c.execute_batch("BEGIN; UPDATE t SET v = zeroblob(3000); ROLLBACK").unwrap();
    let after: (i64, String) = c.query_row(sum, [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    assert_eq!(before, after);
    assert!(file_bytes(&format!("{name}-journal")).is_none());
    assert!(spare_capacity() >= 300_000, "{}", spare_capacity());
    // The next file created takes that buffer and is an empty file: a new, empty database.
    let other = format!("/vfs-recycle-other-{}.db", std::process::id());
    let d = open(&other, Some(NAME), "delete");
    let tables: i64 = d.query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| r.get(0)).unwrap();
    assert_eq!(tables, 0);
    assert_eq!(file_bytes(&other).map(|b| b.len()), Some(0));
    assert_eq!(spare_capacity(), 0);
    d.execute_batch("CREATE TABLE u(x); INSERT INTO u VALUES (7)").unwrap();
    assert_eq!(d.query_row("SELECT x FROM u", [], |r| r.get::<_, i64>(0)).unwrap(), 7);
    drop((c, d));
    registry().retain(|n, _| !n.starts_with("/vfs-recycle"));
}
