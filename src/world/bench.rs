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
        let world = empty_world(sim, model, db);
        let node = Handle::current().create_node().name("outside").build();
        node.spawn(net::wire_main(world.clone()));
        let w = world.clone();
        let got = node
            .spawn(async move {
                let mut got = 0;
                for _ in 0..n {
                    got += u64::from(message(&w).await);
                }
                got
            })
            .await
            .unwrap_or(0);
        Handle::current().kill(node.id());
        got
    }))
}

/// What the floor counts in one `transactional` run of `copies` requests with one key: a
/// message for each request and each reply, and a statement wait before each statement (5 for
/// the request that creates, 3 for each that replays: [`FloorStep`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FloorRun {
    /// Requests with the same key.
    pub copies: u32,
    /// Messages on the wire: each request and each reply.
    pub messages: u64,
    /// Statement waits: one before each statement.
    pub waits: u64,
}

impl FloorRun {
    /// The counts of a run of `copies` requests.
    pub const fn of(copies: u32) -> FloorRun {
        let c = copies as u64;
        FloorRun { copies, messages: 2 * c, waits: if c == 0 { 0 } else { 5 + 3 * (c - 1) } }
    }
}

/// The two-client race (`check-first-race`): 4 messages, 8 statement waits.
pub const RACE_RUN: FloorRun = FloorRun::of(2);
/// Case 11 (twenty concurrent requests): 40 messages, 62 statement waits.
pub const CASE_11_RUN: FloorRun = FloorRun::of(20);

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
        let request = FloorRequest::new();
        for _ in 0..copies {
            let mut hit = false;
            for step in FloorStep::ALL {
                if !(hit && step.creates()) {
                    hit |= request.exec(conn, step)?;
                }
            }
        }
        final_reads(observer)
    }
}

/// The observer's reads at the end of a run: the rows and the keys it counts.
fn final_reads(observer: &rusqlite::Connection) -> rusqlite::Result<(usize, usize)> {
    Ok((store::read_rows(observer)?.len(), store::read_keys(observer)?.len()))
}

/// A statement of one `transactional` request in the floor: `BEGIN IMMEDIATE`, the key lookup,
/// then (a miss only) the row insert and the stored response, then `COMMIT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FloorStep {
    Begin,
    Lookup,
    InsertRow,
    InsertKey,
    Commit,
}

impl FloorStep {
    const ALL: [FloorStep; 5] = [
        FloorStep::Begin,
        FloorStep::Lookup,
        FloorStep::InsertRow,
        FloorStep::InsertKey,
        FloorStep::Commit,
    ];

    /// Done only by the request whose lookup missed.
    fn creates(self) -> bool {
        matches!(self, FloorStep::InsertRow | FloorStep::InsertKey)
    }
}

/// The one request every copy of the floor sends, and the key record the first stores.
struct FloorRequest {
    order: crate::http::Order,
    scope: Scope,
    record: crate::report::KeyRecord,
}

impl FloorRequest {
    fn new() -> FloorRequest {
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
        FloorRequest { order, scope, record }
    }

    /// Run `step` on `conn`. True when it was the lookup and it hit.
    fn exec(&self, conn: &rusqlite::Connection, step: FloorStep) -> rusqlite::Result<bool> {
        match step {
            FloorStep::Begin => store::exec_cached(conn, "BEGIN IMMEDIATE")?,
            FloorStep::Lookup => return Ok(keystore::sql_lookup(conn, &self.scope)?.is_some()),
            FloorStep::InsertRow => {
                let row = store::NewRow { id: 1, intent: "click", now_us: 900, exec: 1 };
                store::insert_row(conn, &self.order, &row, None, true)?;
            }
            FloorStep::InsertKey => {
                keystore::sql_insert(conn, &self.scope, &self.record, false)?;
            }
            FloorStep::Commit => store::exec_cached(conn, "COMMIT")?,
        }
        Ok(false)
    }
}

/// The floor of one run of `copies` requests composed into one run, with nothing added: on a
/// fresh seeded runtime with one node (the runtime piece), every request's message, then each
/// request's statements, each after its statement wait (the SQL piece, on the reset database,
/// with its waits), and its reply's message; then the observer's final reads. Its pieces and
/// their counts are the floor's (race: 4 messages, 8 waits; case 11: 40 and 62). It differs
/// from the floor's sum in two ways: it makes the world and its wire task once per run, where
/// the message piece spreads them over 1,000 messages (about 5 % of its instructions); and its
/// pieces follow each other as in a run, with each other's code and data in the caches, where
/// the floor times each alone in a loop of itself. What a run costs above it is the run's own.
/// Returns the rows and keys read (1 and 1) and the statement waits done.
pub fn composed_floor(
    sim: &Arc<Sim>,
    model: &Arc<Model>,
    floor: &mut SqlFloor,
    seed: u64,
    copies: u32,
) -> Result<((usize, usize), u64), RunError> {
    floor.reset()?;
    let db = floor.db.clone();
    let rt = Runtime::with_seed_and_config(seed, madsim::Config::default());
    let (sim, model) = (sim.clone(), model.clone());
    rt.block_on(async move {
        let world = empty_world(sim, model, db.clone());
        let node = Handle::current().create_node().name("outside").build();
        node.spawn(net::wire_main(world.clone()));
        let done = node
            .spawn(async move {
                clock::sleep_us(1).await;
                let conn = store::checkout(&db)?;
                let request = FloorRequest::new();
                let mut waits = 0;
                for _ in 0..copies {
                    message(&world).await;
                }
                for _ in 0..copies {
                    let mut hit = false;
                    for step in FloorStep::ALL {
                        if !(hit && step.creates()) {
                            clock::yield_now().await;
                            clock::sleep_us(10).await;
                            waits += 1;
                            hit |= request.exec(&conn, step)?;
                        }
                    }
                    message(&world).await;
                }
                Ok::<_, RunError>((store::with_observer(&db, final_reads)?, waits))
            })
            .await;
        Handle::current().kill(node.id());
        // A killed task read nothing: the caller's check of (1, 1) fails.
        done.unwrap_or(Ok(((0, 0), 0)))
    })
}

/// A world with every process in its default state, for the wire alone (inside a runtime).
fn empty_world(sim: Arc<Sim>, model: Arc<Model>, db: store::Db) -> Arc<World> {
    let state = State {
        processes: (0..sim.world.processes).map(|_| ProcessState::default()).collect(),
        ..Default::default()
    };
    Arc::new(World::new(sim, model, db, state, vec![]))
}

/// One message over the wire to a mailbox on the same node, as [`messages`] sends each.
async fn message(world: &Arc<World>) -> bool {
    let mb = Mailbox::open(world);
    let to = Dest::Tag { tag: mb.tag, process: None };
    world.send(None, to, None, Msg::Ack { ok: true, declined: false }, 10);
    matches!(mb.recv().await, Msg::Ack { ok: true, .. })
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

    #[test]
    fn the_composed_floor_does_the_floors_statements_and_reads_one_row_and_one_key() {
        let sim = crate::catalog::sim("check-first-race").unwrap();
        let model = crate::catalog::model("transactional").unwrap();
        let mut floor = SqlFloor::new(FloorVfs::Idemsim).unwrap();
        // The waits it did are the statements it ran: 8 and 62, as FloorRun counts them and
        // tools/speed.py's FLOOR sums them.
        for seed in 1..=3 {
            for run in [RACE_RUN, CASE_11_RUN] {
                let done = composed_floor(&sim, &model, &mut floor, seed, run.copies).unwrap();
                assert_eq!(done, ((1, 1), run.waits), "{run:?}, seed {seed}");
            }
        }
    }
}
