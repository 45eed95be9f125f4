//! The control tasks: the sim's actions (a connection holding the write lock, a wipe of the key
//! stores), the key collector, partition windows, and process crashes with their restarts.
//! Also the observer's probe and the busy-retry helper they share.

use std::sync::Arc;

use madsim::runtime::Handle;
use rusqlite::Connection;

use super::keystore;
use super::net::{Dest, Msg};
use super::shared::World;
use super::{clock, store};
use crate::history::{Node, What};
use crate::report::Collected;
use crate::scenario::{ActionKind, CrashSignal, Partition};

/// How long the harness's own connections (the observer, actions, the collector) wait between
/// tries on a locked database (µs).
const HARNESS_RETRY_US: u64 = 1_000;

/// Run `f` until it is not refused for a locked database, [`HARNESS_RETRY_US`] of model time
/// apart, at most `tries` times (then the last busy error).
pub(crate) async fn retry_busy<T>(
    tries: u32,
    mut f: impl FnMut() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    let mut r = f();
    for _ in 1..tries {
        match r {
            Err(e) if store::is_busy(&e) => clock::sleep_us(HARNESS_RETRY_US).await,
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
pub(crate) async fn probe(world: &World) -> Option<(u64, u64, u64)> {
    retry_busy(1000, || {
        store::with_observer(&world.db, |c| {
            Ok((store::count_rows(c)?, store::count_keys(c)?, store::count_responses(c)?))
        })
    })
    .await
    .ok()
}

/// Run the sim's action `i`.
pub(crate) async fn run_action(world: Arc<World>, i: usize, kind: ActionKind) {
    let spec = &world.sim.actions[i];
    world.wait_for(&spec.after).await;
    if spec.delay_us > 0 {
        clock::sleep_us(spec.delay_us).await;
    }
    let action = i as u32;
    let conn = match store::checkout(&world.db) {
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
        ActionKind::HoldLock { until, for_us } => {
            if wait_statement(&conn, "BEGIN IMMEDIATE").await {
                world.emit(Node::Control, None, What::LockHeld { action });
                if let Some(u) = &until {
                    world.wait_for(std::slice::from_ref(u)).await;
                }
                if let Some(us) = for_us {
                    clock::sleep_us(us).await;
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
    let deleted = retry_busy(100_000, || keystore::sql_collect(conn, None)).await.map(|gone| {
        let at_us = world.now_us();
        let n = gone.len();
        let gone =
            gone.into_iter().map(|(intent, key, done)| Collected { intent, key, done, at_us });
        world.lock().collected.extend(gone);
        n
    });
    match deleted {
        Err(e) => {
            world.emit(Node::Control, None, What::DeleteKeysFailed { action, error: e.to_string() })
        }
        Ok(mut n) => {
            // Cache records already past their TTL are gone and do not count.
            let now = world.now_us();
            let ttl = world.model.key.as_ref().and_then(|k| k.retention_us);
            {
                let mut st = world.lock();
                let st = &mut *st;
                let mut wiped: Vec<Collected> = st
                    .cache
                    .iter()
                    .filter(|(_, r)| ttl.is_none_or(|t| r.created_us.saturating_add(t) > now))
                    .map(|(s, r)| Collected::of(s, r, now))
                    .collect();
                st.cache.clear();
                for p in &mut st.processes {
                    wiped.extend(p.take_memory().iter().map(|(s, r)| Collected::of(s, r, now)));
                }
                n += wiped.len();
                st.collected.extend(wiped);
            }
            world.emit(Node::Control, None, What::KeysDeleted { action, n });
        }
    }
}

fn finish_action(world: &World, i: usize) {
    world.lock().quiet.actions_running -= 1;
    world.work_changed();
    world.mark_done(&world.sim.actions[i].id);
}

/// The key collector: every `every_us`, delete keys older than `retention_us`.
pub(crate) async fn collector(world: Arc<World>, every_us: u64, retention_us: u64) {
    let Ok(conn) = store::checkout(&world.db) else { return };
    loop {
        clock::sleep_us(every_us).await;
        if !world.spend() {
            return;
        }
        let now = world.now_us();
        // Keys carry the writing process's wall clock; the collector reads the database's.
        let cutoff = world.db_clock_us().saturating_sub(retention_us);
        match keystore::sql_collect(&conn, Some(cutoff)) {
            Ok(gone) if !gone.is_empty() => {
                world.emit(Node::Control, None, What::Collected { n: gone.len(), retention_us });
                let mut st = world.lock();
                for (intent, key, done) in gone {
                    st.collected.push(Collected { intent, key, done, at_us: now });
                }
            }
            _ => {} // nothing expired, or the database is busy: try at the next tick
        }
    }
}

/// A partition window: cut process `p.process` off the network, then reconnect it.
pub(crate) async fn partition(world: Arc<World>, p: Partition) {
    clock::sleep_us(p.from_us).await;
    let process = p.process as u32;
    world.lock().processes[p.process].partitioned = true;
    world.emit(Node::Control, None, What::Partitioned { process });
    clock::sleep_us(p.for_us).await;
    world.lock().processes[p.process].partitioned = false;
    world.emit(Node::Control, None, What::Reconnected { process });
}

/// Kill server process `idx` now; it restarts after `restart_us`. Never returns: the caller is
/// one of the process's tasks and is dropped with it.
/// Stop process `idx` for `us` of model time (an injected `stall`): madsim parks every task of
/// its node, so nothing it runs (requests, relay, completer, accept loop) moves until the
/// outside node resumes it; messages sent to it wait in its inbox. The caller is parked at
/// its next scheduling point and continues after the stall.
pub(crate) async fn stall_process(world: &Arc<World>, idx: usize, us: u64) {
    let id = world.server_nodes.lock().unwrap()[idx];
    let node = Node::Server(idx as u32);
    world.emit(node, None, What::ProcessStalled { us });
    let outside = world.outside.lock().unwrap().clone().expect("outside node");
    let w = world.clone();
    outside.spawn(async move {
        clock::sleep_us(us).await;
        // A process that crashed meanwhile has been restarted or is down: nothing to resume.
        if w.lock().processes[idx].up {
            Handle::current().resume(id);
            w.emit(node, None, What::ProcessResumed);
        }
    });
    Handle::current().pause(id);
    clock::yield_now().await;
}

pub(crate) async fn crash_process(world: &Arc<World>, idx: usize, restart_us: u64) {
    let (already, serving) = {
        let mut st = world.lock();
        let p = &mut st.processes[idx];
        let already = std::mem::replace(&mut p.crashing, true);
        p.up = false;
        // Its memory dies with it (also when the run ends before it restarts).
        p.forget_memory();
        // Requests delivered but not yet admitted die with the process too.
        let mut queued: Vec<(u64, crate::history::Actor)> =
            p.inbox.queue.drain(..).map(|e| (e.reply_tag, e.who)).collect();
        queued.extend(p.phases.accepted.drain(..).map(|(e, _)| (e.reply_tag, e.who)));
        let mut serving: Vec<_> = std::mem::take(&mut p.serving).into_iter().collect();
        serving.extend(queued);
        (already, serving)
    };
    // A process that dies has its connections reset by its kernel: every client it was
    // serving sees the failure at once (unless the sim models silence).
    if world.sim.faults.crash_signal == CrashSignal::Reset {
        for (tag, who) in serving {
            let to = Dest::Tag { tag, process: None };
            world.send(Some(idx), to, Some(who), Msg::Reset, world.latency_us());
        }
    }
    if already {
        // Another request of this process already crashed it; it is going down.
        std::future::pending::<()>().await;
    }
    let id = world.server_nodes.lock().unwrap()[idx];
    let node = Node::Server(idx as u32);
    world.emit(node, None, What::ProcessCrashed);
    let outside = world.outside.lock().unwrap().clone().expect("outside node");
    let w = world.clone();
    outside.spawn(async move {
        clock::sleep_us(restart_us).await;
        w.lock().processes[idx].crashing = false;
        Handle::current().restart(id);
        w.emit(node, None, What::ProcessRestarted);
    });
    Handle::current().kill(id);
    std::future::pending::<()>().await;
}
