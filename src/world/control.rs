//! The control node: the sim's actions (a connection holding the write lock, a wipe of the key
//! stores), the key collector, partition windows, and process crashes with their restarts.
//! Also the observer's probe and the busy-retry helper they share.

use std::sync::Arc;
use std::time::Duration;

use madsim::runtime::Handle;
use madsim::time::sleep;
use rusqlite::Connection;

use super::keystore;
use super::shared::World;
use super::store;
use crate::history::{Node, What};
use crate::scenario::{ActionKind, Partition};

/// Run `f` until it is not refused for a locked database, 1 ms of simulated time apart, at
/// most `tries` times (then the last busy error).
pub(crate) async fn retry_busy<T>(
    tries: u32,
    mut f: impl FnMut() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    let mut r = f();
    for _ in 1..tries {
        match r {
            Err(e) if store::is_busy(&e) => sleep(Duration::from_millis(1)).await,
            _ => break,
        }
        r = f();
    }
    r
}

async fn wait_statement(conn: &Connection, sql: &str) -> bool {
    retry_busy(100_000, || store::exec_cached(conn, sql)).await.is_ok()
}

/// Count rows and keys now, as the observer (retrying in simulated time while locked).
pub(crate) async fn probe() -> Option<(u64, u64)> {
    retry_busy(1000, || {
        store::with_observer(|c| Ok((store::count_rows(c)?, store::count_keys(c)?)))
    })
    .await
    .ok()
}

/// Run the sim's action `i` on the control node.
pub(crate) async fn run_action(world: Arc<World>, i: usize, kind: ActionKind) {
    let spec = &world.sim.actions[i];
    world.wait_for(&spec.after).await;
    if spec.delay_ms > 0 {
        sleep(Duration::from_millis(spec.delay_ms)).await;
    }
    let action = i as u32;
    let conn = match store::checkout(&world.db_uri) {
        Ok(c) => c,
        Err(e) => {
            world.emit(
                Node::Control,
                None,
                What::ActionNoDatabase { action, error: e.to_string() },
            );
            finish_action(&world, i);
            return;
        }
    };
    match kind {
        ActionKind::HoldLock { until, for_ms } => {
            if wait_statement(&conn, "BEGIN IMMEDIATE").await {
                world.emit(Node::Control, None, What::LockHeld { action });
                if let Some(u) = &until {
                    world.wait_for(std::slice::from_ref(u)).await;
                }
                if let Some(ms) = for_ms {
                    sleep(Duration::from_millis(ms)).await;
                }
                let _ = store::exec_cached(&conn, "COMMIT");
                world.emit(Node::Control, None, What::LockReleased { action });
            } else {
                world.emit(Node::Control, None, What::LockNotTaken { action });
            }
        }
        ActionKind::DeleteKeys => delete_keys(&world, action, &conn).await,
    }
    finish_action(&world, i);
}

/// Wipe every key store: the `keys` table (read the intents and delete in one transaction,
/// retrying while the database is locked, so that every collected key is known to the
/// oracle), the TTL cache and every process's memory.
async fn delete_keys(world: &World, action: u32, conn: &Connection) {
    let deleted = retry_busy(100_000, || keystore::sql_collect(conn, None)).await.map(|intents| {
        let now = world.now_ms();
        let n = intents.len();
        world.lock().collected.extend(intents.into_iter().map(|i| (i, now)));
        n
    });
    match deleted {
        Err(e) => {
            world.emit(Node::Control, None, What::DeleteKeysFailed { action, error: e.to_string() })
        }
        Ok(mut n) => {
            // Cache records already past their TTL are gone and do not count.
            let now = world.now_ms();
            let ttl = world.model.key.as_ref().and_then(|k| k.retention_ms);
            {
                let mut st = world.lock();
                let st = &mut *st;
                let mut wiped: Vec<String> = st
                    .cache
                    .values()
                    .filter(|r| ttl.is_none_or(|t| r.created_ms + t > now))
                    .map(|r| r.intent.clone())
                    .collect();
                st.cache.clear();
                for p in &mut st.processes {
                    wiped.extend(p.memory.values().map(|r| r.intent.clone()));
                    p.memory.clear();
                }
                n += wiped.len();
                st.collected.extend(wiped.into_iter().map(|i| (i, now)));
            }
            world.emit(Node::Control, None, What::KeysDeleted { action, n });
        }
    }
}

fn finish_action(world: &World, i: usize) {
    world.lock().actions_running -= 1;
    world.mark_done(&world.sim.actions[i].id);
}

/// The key collector: every `every` ms, delete keys older than `retention` ms.
pub(crate) async fn collector(world: Arc<World>, every: u64, retention: u64) {
    let Ok(conn) = store::checkout(&world.db_uri) else { return };
    loop {
        sleep(Duration::from_millis(every)).await;
        let now = world.now_ms();
        let Some(cutoff) = now.checked_sub(retention) else { continue };
        match keystore::sql_collect(&conn, Some(cutoff)) {
            Ok(intents) if !intents.is_empty() => {
                world.emit(
                    Node::Control,
                    None,
                    What::Collected { n: intents.len(), retention_ms: retention },
                );
                let mut st = world.lock();
                for i in intents {
                    st.collected.push((i, now));
                }
            }
            _ => {} // nothing expired, or the database is busy: try at the next tick
        }
    }
}

/// A partition window: cut process `p.process` off the network, then reconnect it.
pub(crate) async fn partition(world: Arc<World>, p: Partition) {
    sleep(Duration::from_millis(p.from_ms)).await;
    let id = world.server_nodes.lock().unwrap()[p.process];
    let net = madsim::net::NetSim::current();
    net.clog_node(id);
    let process = p.process as u32;
    world.emit(Node::Control, None, What::Partitioned { process });
    sleep(Duration::from_millis(p.for_ms)).await;
    net.unclog_node(id);
    world.emit(Node::Control, None, What::Reconnected { process });
}

/// Kill server process `idx` now; the control node restarts it after `restart_ms`. Never
/// returns: the caller is one of the process's tasks and is dropped with it.
pub(crate) async fn crash_process(world: &Arc<World>, idx: usize, restart_ms: u64) {
    if std::mem::replace(&mut world.lock().processes[idx].crashing, true) {
        // Another request of this process already crashed it; it is going down.
        std::future::pending::<()>().await;
    }
    let id = world.server_nodes.lock().unwrap()[idx];
    let node = Node::Server(idx as u32);
    world.emit(node, None, What::ProcessCrashed);
    let control = world.control.lock().unwrap().clone().expect("control node");
    let w = world.clone();
    control.spawn(async move {
        sleep(Duration::from_millis(restart_ms)).await;
        w.lock().processes[idx].crashing = false;
        Handle::current().restart(id);
        w.emit(node, None, What::ProcessRestarted);
    });
    Handle::current().kill(id);
    std::future::pending::<()>().await;
}
