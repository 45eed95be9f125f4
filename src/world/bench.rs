//! The pieces a run is made of, one at a time, for `benches/runs.rs`: the runtime and a node,
//! the database reset, one SQL statement, one message over the simulated wire. Nothing here is
//! used by a run; each function does exactly what a run does for that piece.

use std::sync::Arc;

use madsim::runtime::{Handle, Runtime};

use super::keystore;
use super::net::{self, Dest, Mailbox, Msg};
use super::shared::{ProcessState, State, World};
use super::{RunError, clock, store};
use crate::model::{Journal, Model};
use crate::report::Scope;
use crate::scenario::Sim;

/// A seeded madsim runtime with one node that sleeps the smallest step (1 µs of model time),
/// as every run starts.
pub fn runtime_setup(seed: u64) {
    let rt = Runtime::with_seed_and_config(seed, madsim::Config::default());
    rt.block_on(async {
        let node = Handle::current().create_node().name("outside").build();
        node.spawn(async { clock::sleep_us(1).await }).await.ok();
    });
}

/// `n` items done in batches of at most 1,000 by `batch(seed, n)`, each batch on a fresh
/// runtime with its own seed (1, 2, …), as the per-wait and per-message pieces are measured: the
/// runtime's cost is spread over its batch. Panics if a batch reports other than `n` done.
pub fn in_batches(n: u64, mut batch: impl FnMut(u64, u64) -> u64) {
    let (mut left, mut seed) = (n, 0);
    while left > 0 {
        let k = left.min(1000);
        seed += 1;
        assert_eq!(batch(seed, k), k, "a batch did fewer items than asked");
        left -= k;
    }
}

/// `n` statement waits on one node: what `Runner::sql` does before every statement reaches
/// SQLite (a yield to the event loop, then the statement's latency as a model-time sleep, here
/// 10 µs), without the statement. Returns the waits done.
pub fn statement_waits(seed: u64, n: u64) -> u64 {
    let rt = Runtime::with_seed_and_config(seed, madsim::Config::default());
    rt.block_on(async move {
        let node = Handle::current().create_node().name("outside").build();
        node.spawn(async move {
            for _ in 0..n {
                clock::yield_now().await;
                clock::sleep_us(10).await;
            }
            n
        })
        .await
        .unwrap_or(0)
    })
}

/// The empty database for the next run on this thread (what every run does first).
pub fn database_reset(journal: Journal) -> Result<(), RunError> {
    store::fresh_run_database(journal).map(|_| ()).map_err(RunError::from)
}

/// A connection to this thread's run database, for [`Statement::lookup`].
pub struct Statement {
    conn: store::Pooled,
    scope: Scope,
}

impl Statement {
    /// This thread's empty run database with `journal`, and a connection checked out of its pool.
    pub fn new(journal: Journal) -> Result<Statement, RunError> {
        let db = store::fresh_run_database(journal)?;
        let conn = store::checkout(&db)?;
        let scope = Scope { user: "u1".into(), operation: "create-order".into(), key: "k1".into() };
        Ok(Statement { conn, scope })
    }

    /// The key lookup every keyed model starts with (a cached prepared `SELECT`).
    pub fn lookup(&self) -> bool {
        keystore::sql_lookup(&self.conn, &self.scope).expect("lookup").is_some()
    }
}

/// `n` messages, each put on the wire by one task and received in a mailbox: the wire's sleep
/// until arrival, its delivery and the receiver's wake-up, as every request and reply pays.
pub fn messages(sim: &Arc<Sim>, model: &Arc<Model>, seed: u64, n: u64) -> Result<u64, RunError> {
    let db = store::fresh_run_database(model.driver.journal)?;
    let rt = Runtime::with_seed_and_config(seed, madsim::Config::default());
    let (sim, model) = (sim.clone(), model.clone());
    Ok(rt.block_on(async move {
        let state = State {
            processes: (0..sim.world.processes).map(|_| ProcessState::default()).collect(),
            ..Default::default()
        };
        let world = Arc::new(World::new(sim, model, db, state, vec![]));
        let node = Handle::current().create_node().name("outside").build();
        node.spawn(net::wire_main(world.clone()));
        let w = world.clone();
        let got = node
            .spawn(async move {
                let mut got = 0;
                for _ in 0..n {
                    let mb = Mailbox::open(&w);
                    let to = Dest::Tag { tag: mb.tag, process: None };
                    w.send(None, to, None, Msg::Ack { ok: true, declined: false }, 10);
                    if matches!(mb.recv().await, Msg::Ack { ok: true, .. }) {
                        got += 1;
                    }
                }
                got
            })
            .await
            .unwrap_or(0);
        Handle::current().kill(node.id());
        got
    }))
}

/// Which VFS [`SqlFloor`] runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloorVfs {
    /// idemsim's in-memory VFS, as every run (the pool's database, reset by the chunk copy).
    Idemsim,
    /// SQLite's own `memdb` VFS (journal in memory), emptied by DELETEs: a yardstick for what
    /// idemsim's VFS adds.
    Memdb,
}

/// The SQL of one `transactional` run of `copies` requests with one key (the race: 2; case 11:
/// 20), without the simulated world: the first request's `BEGIN IMMEDIATE`, key lookup (a
/// miss), row insert, stored response and `COMMIT`; every other request's `BEGIN IMMEDIATE`,
/// lookup (a hit) and `COMMIT`, on the process's one shared connection; the observer's final
/// reads of rows and keys. The same store functions as a run: what SQLite alone costs such a
/// run, whatever the executor and the model code around it cost.
pub struct SqlFloor {
    db: store::Db,
    /// `Memdb`: the server's connection and the observer's.
    memdb: Option<(rusqlite::Connection, rusqlite::Connection)>,
}

impl SqlFloor {
    /// An empty database on `vfs` (idemsim's, or SQLite's memdb with its own server and observer connections).
    pub fn new(vfs: FloorVfs) -> Result<SqlFloor, RunError> {
        let db = store::fresh_run_database(Journal::Rollback)?;
        let memdb = match vfs {
            FloorVfs::Idemsim => None,
            FloorVfs::Memdb => {
                use rusqlite::{Connection, OpenFlags};
                let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
                    | OpenFlags::SQLITE_OPEN_CREATE
                    | OpenFlags::SQLITE_OPEN_URI
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                let name = format!("file:/floor-{}?vfs=memdb", db.name.trim_start_matches('/'));
                let observer = Connection::open_with_flags(&name, flags)?;
                observer.execute_batch(store::SCHEMA)?;
                Some((Connection::open_with_flags(&name, flags)?, observer))
            }
        };
        Ok(SqlFloor { db, memdb })
    }

    /// The empty database, as before every run.
    pub fn reset(&mut self) -> Result<(), RunError> {
        match &self.memdb {
            None => self.db = store::fresh_run_database(Journal::Rollback)?,
            Some((_, o)) => o.execute_batch("DELETE FROM rows; DELETE FROM keys;")?,
        }
        Ok(())
    }

    /// The statements of one run. Returns the rows and keys the observer read (1 and 1).
    pub fn run(&self, copies: u32) -> Result<(usize, usize), RunError> {
        match &self.memdb {
            Some((conn, observer)) => Ok(Self::statements(conn, observer, copies)?),
            None => {
                let conn = store::checkout(&self.db)?;
                Ok(store::with_observer(&self.db, |o| Self::statements(&conn, o, copies))?)
            }
        }
    }

    fn statements(
        conn: &rusqlite::Connection,
        observer: &rusqlite::Connection,
        copies: u32,
    ) -> rusqlite::Result<(usize, usize)> {
        use crate::http::Order;
        use crate::report::{KeyRecord, RecordState};
        let order = Order {
            operation: "create-order",
            user: "u1".into(),
            item: "book".into(),
            qty: 1,
            tenant: None,
            if_match: None,
            client_time: None,
        };
        let scope = Scope { user: "u1".into(), operation: "create-order".into(), key: "k1".into() };
        let record = KeyRecord {
            fingerprint: "f".repeat(64),
            status: Some(201),
            response: Some(order.created_body(1)),
            state: RecordState::Done,
            created_us: 900,
            lease_until_us: None,
            token: Some(1),
            intent: "click".into(),
        };
        for _ in 0..copies {
            store::exec_cached(conn, "BEGIN IMMEDIATE")?;
            if keystore::sql_lookup(conn, &scope)?.is_none() {
                let row = store::NewRow { id: 1, intent: "click", now_us: 900, exec: 1 };
                store::insert_row(conn, &order, &row, None, true)?;
                keystore::sql_insert(conn, &scope, &record, false)?;
            }
            store::exec_cached(conn, "COMMIT")?;
        }
        Ok((store::read_rows(observer)?.len(), store::read_keys(observer)?.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_of_a_run_leaves_one_row_and_one_key_on_either_vfs() {
        for vfs in [FloorVfs::Idemsim, FloorVfs::Memdb] {
            let mut floor = SqlFloor::new(vfs).unwrap();
            // Each run starts from the reset database: one row, however many copies and runs.
            for copies in [2, 20, 2] {
                floor.reset().unwrap();
                assert_eq!(floor.run(copies).unwrap(), (1, 1), "{vfs:?}");
            }
            // Without the reset the first request hits the stored key: still one row.
            assert_eq!(floor.run(2).unwrap(), (1, 1), "{vfs:?}");
        }
    }
}
