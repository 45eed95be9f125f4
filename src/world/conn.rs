//! A server process's database connections: the one connection every request of the process
//! shares (`[driver] pool = 0`, as with one `DatabaseSync` per process), or a pool of
//! `pool = N` connections that each request checks out for its whole execution and gives back
//! at the end, waiting (in simulated time, first come first served) while all are in use.
//!
//! The pool lives as long as the process's tasks: a crash drops it, and every connection
//! rolls back its open transaction and returns to the worker thread's spares.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ops::Deref;
use std::rc::{Rc, Weak};
use std::task::{Poll, Waker};

use rusqlite::Connection;

use super::clock;
use super::store::{self, Db, Pooled};

/// The connection an execution uses.
pub(crate) enum Conn {
    /// The process's shared connection.
    Shared(Rc<Pooled>),
    /// A connection of the process's pool, given back when dropped.
    Leased(Lease),
}

impl Conn {
    fn pooled(&self) -> &Pooled {
        match self {
            Conn::Shared(c) => c,
            Conn::Leased(l) => l.conn.as_ref().expect("present until drop"),
        }
    }

    /// The connection's identity (whose commit holds the journal's lock).
    pub fn id(&self) -> u64 {
        self.pooled().id
    }

    /// Note that execution `owner` begins a transaction now (see [`Conn::wrote_since_begin`]).
    pub fn mark_begin(&self, owner: u64) {
        self.pooled().mark_begin(owner);
    }

    /// Is a transaction open on the connection, begun by execution `id`?
    pub fn tx_owned_by(&self, id: u64) -> bool {
        self.pooled().tx_owned_by(id)
    }

    /// Has the connection written since its transaction began (so that its COMMIT syncs the
    /// journal)? Counts every statement on the connection, other requests' included.
    pub fn wrote_since_begin(&self) -> bool {
        self.pooled().wrote_since_begin()
    }
}

impl Deref for Conn {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.pooled()
    }
}

/// A pool of connections of one process.
pub(crate) struct Pool {
    free: RefCell<Vec<Pooled>>,
    waiters: RefCell<VecDeque<Waker>>,
}

impl Pool {
    /// `size` connections to `db`.
    pub fn new(db: &Db, size: u32) -> rusqlite::Result<Rc<Pool>> {
        let free = (0..size).map(|_| store::checkout(db)).collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(Rc::new(Pool { free: RefCell::new(free), waiters: RefCell::new(VecDeque::new()) }))
    }

    /// A free connection, waiting up to `budget_us` of model time for one; None if none came.
    pub async fn lease(self: &Rc<Pool>, budget_us: u64) -> Option<Lease> {
        let take = std::future::poll_fn(|cx| match self.free.borrow_mut().pop() {
            Some(conn) => Poll::Ready(conn),
            None => {
                self.waiters.borrow_mut().push_back(cx.waker().clone());
                Poll::Pending
            }
        });
        let conn = clock::timeout_us(budget_us, take).await?;
        Some(Lease { conn: Some(conn), pool: Rc::downgrade(self) })
    }

    /// Is a connection free now?
    pub fn has_free(&self) -> bool {
        !self.free.borrow().is_empty()
    }
}

/// A connection checked out of a process's pool.
pub(crate) struct Lease {
    conn: Option<Pooled>,
    pool: Weak<Pool>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        let Some(pool) = self.pool.upgrade() else { return }; // the process is gone
        if !conn.is_autocommit() {
            // A request that ends inside a transaction (an error path without rollback, a
            // crash of its task): a pool resets the connection before reusing it.
            let _ = store::exec_cached(&conn, "ROLLBACK");
        }
        pool.free.borrow_mut().push(conn);
        if let Some(w) = pool.waiters.borrow_mut().pop_front() {
            w.wake();
        }
    }
}
