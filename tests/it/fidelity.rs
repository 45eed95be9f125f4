//! Fidelity of the simulated world: time finer than a millisecond, simultaneous arrivals,
//! parallel processes, SQLite's transaction and journal modes, connection pools.

use std::path::Path;
use std::sync::Arc;

use idemsim::history::{Node, What};
use idemsim::model::Model;
use idemsim::report::ViolationKind;
use idemsim::run::{self, RunOptions};
use idemsim::scenario::Sim;
use idemsim::sweep;

use super::model;

fn sim(src: &str) -> Arc<Sim> {
    Arc::new(Sim::parse(Path::new("inline.toml"), src).unwrap())
}

fn inline_model(src: &str) -> Arc<Model> {
    Arc::new(Model::parse(Path::new("inline-model.toml"), src).unwrap())
}

/// Two copies of one request, sent together, fixed latency: to two processes or to one.
fn double_send(processes: usize) -> Arc<Sim> {
    let route = if processes > 1 { "process = \"alternate\"" } else { "" };
    sim(&format!(
        "[world]\nprocesses = {processes}\nlatency_ms = [0.05, 0.05]\n\
         [[request]]\nid = \"click\"\nkey = \"k1\"\ncopies = 2\n{route}\n"
    ))
}

fn seeds_with(s: &Arc<Sim>, m: &Arc<Model>, seeds: std::ops::Range<u64>, v: ViolationKind) -> u64 {
    let cells = sweep::run_matrix(std::slice::from_ref(s), std::slice::from_ref(m), Some(seeds), 2)
        .unwrap();
    cells[0].violations.get(v.name()).map_or(0, |x| x.seeds)
}

/// The false "safe" of the fidelity review: check-first on a synchronous driver, no await.
/// Two real processes doing SELECT-then-INSERT race when one's lookup falls inside the
/// other's insert (its statement and the commit's fsync, on the calibrated stack); inside one
/// process a synchronous handler runs to its end before the event loop reads the next.
#[test]
fn sync_check_first_races_only_across_processes() {
    let m = inline_model("program = [\"lookup\", \"insert-row\", \"save-response\"]\n[key]\n");
    assert_eq!(m.stack, "node-sqlite-sync", "no stack named: the calibrated default");
    let across = seeds_with(&double_send(2), &m, 0..100, ViolationKind::DuplicateRow);
    let within = seeds_with(&double_send(1), &m, 0..100, ViolationKind::DuplicateRow);
    assert!(across > 5, "two processes must race: {across}/100");
    assert_eq!(within, 0, "one process must not race");
}

/// A rollback journal's commit holds the EXCLUSIVE lock through both of its syncs (SQLite's
/// `syncJournal` takes it before the journal's): a lookup from another process half a
/// millisecond into a 4 ms commit waits on the busy schedule and then finds the key, where a
/// reader let in during the journal's sync would have missed it and inserted a second row.
#[test]
fn a_reader_waits_out_the_whole_commit_of_another_process() {
    let dir = std::env::temp_dir().join(format!("idemsim-commit-lock-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let zero = "[0, 0]";
    std::fs::write(
        dir.join("slow-commit.toml"),
        format!(
            "[runtime]\nkind = \"event-loop\"\nturn_ms = {zero}\naccept_ms = {zero}\n\
             first_accept_ms = {zero}\nhandler_ms = {zero}\nfirst_handler_ms = {zero}\n\
             [driver]\nawaits = \"explicit\"\njournal = \"rollback\"\nstatement_ms = {zero}\n\
             commit_ms = [4, 4]\nlatency_ms = {zero}\n"
        ),
    )
    .unwrap();
    let m = Arc::new(
        Model::parse(
            &dir.join("m.toml"),
            "stack = \"slow-commit.toml\"\nprogram = [\"lookup\", \"insert-row\", \"save-response\"]\n[key]\n",
        )
        .unwrap(),
    );
    let s = sim(
        "[world]\nprocesses = 2\nlatency_ms = [0.05, 0.05]\nconnect_gap_ms = [0, 0]\nstart = \"warm\"\n\
         [[request]]\nid = \"a\"\nkey = \"k1\"\nprocess = 1\n\
         [[request]]\nid = \"b\"\nintent = \"a\"\nkey = \"k1\"\nprocess = 2\ndelay_ms = 0.5\n",
    );
    let out = run::run(&s, &m, 0, RunOptions { keep_history: true }).unwrap();
    let waited = out
        .history
        .unwrap()
        .events
        .iter()
        .any(|e| matches!(e.what, What::LockWait { stmt: idemsim::history::Stmt::Lookup, .. }));
    assert!(waited, "b's lookup must meet a's commit");
    assert!(out.report.violation_names().is_empty(), "{:?}", out.report.violations);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Requests sent in the same instant arrive together, and the event loop takes them in one
/// connection per iteration (docs/reality.md): the reads are spread out in time, in order,
/// none before the process's cold first accept; a read pass that finds several connections
/// accepted runs each to its first await, so on some seeds several pass the lookup before
/// any saves, and on others the first request has saved before the next one looks (on most:
/// a fresh process's cold first accept lets the first request run alone unless its client was
/// preempted by the woken server, the stack's `wake_preempts`).
#[test]
fn a_burst_is_taken_in_one_connection_per_iteration() {
    let s = sim(
        "[world]\nlatency_ms = [0.05, 0.05]\n[[request]]\nid = \"burst\"\nkey = \"k1\"\ncopies = 20\n",
    );
    let m = model("check-first");
    let first_accept_us = m.loop_times().unwrap().first_accept_us.min();
    let (mut batched, mut alone) = (0, 0);
    for seed in 0..300 {
        let out = run::run(&s, &m, seed, RunOptions { keep_history: true }).unwrap();
        let h = out.history.unwrap();
        let arrived: Vec<u64> = h
            .events
            .iter()
            .filter(|e| e.node == Node::Server(0) && matches!(e.what, What::Arrived))
            .map(|e| e.t_us)
            .collect();
        assert_eq!(arrived.len(), 20, "seed {seed}");
        assert!(arrived.is_sorted(), "seed {seed}: {arrived:?}");
        assert!(arrived[0] >= 50 + first_accept_us, "seed {seed}: {arrived:?}");
        let misses = h.events.iter().filter(|e| matches!(e.what, What::LookupMiss)).count();
        if misses >= 2 {
            batched += 1;
        } else {
            alone += 1;
        }
    }
    assert!(batched > 0 && alone > 0, "batched on {batched} seeds, alone on {alone}");
}

/// Durations accept fractions of a millisecond down to 1 µs; finer ones are refused with a
/// location.
#[test]
fn durations_down_to_a_microsecond() {
    let s = sim("[world]\nlatency_ms = [0.05, 0.2]\n[[request]]\nid = \"a\"\ndelay_ms = 0.001\n");
    assert_eq!(s.world.latency_us, (50, 200));
    assert_eq!(s.requests[0].delay_us, 1);
    let e = Sim::parse(Path::new("s.toml"), "[world]\nlatency_ms = [0.0005, 1]\n")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("s.toml:2:14: world.latency_ms: expected"), "{e}");
    let e = Sim::parse(Path::new("s.toml"), "[[request]]\nid = \"a\"\ntimeout_ms = -1\n")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("s.toml:3:14: timeout_ms = -1: expected milliseconds"), "{e}");
}

/// A deferred transaction that has read and then meets another writer gets SQLITE_BUSY at
/// once: SQLite does not call its busy handler (it would deadlock), so no busy timeout helps.
/// The waits idemsim does in simulated time are exactly the ones SQLite would do.
#[test]
fn deferred_upgrade_fails_at_once_across_processes() {
    let s = super::sim("sims/article/12-twenty-concurrent-two-processes.toml");
    let m = model("transactional-deferred");
    let mut at_once = 0;
    for seed in 0..20 {
        let out = run::run(&s, &m, seed, RunOptions { keep_history: true }).unwrap();
        let h = out.history.unwrap();
        at_once += h
            .events
            .iter()
            .filter(|e| matches!(e.what, What::LockedAtOnce { snapshot: false, .. }))
            .count();
        assert!(out.report.violation_names().is_empty(), "{:?}", out.report.violations);
        let busy = out.report.status_histogram().get("503").copied().unwrap_or(0);
        assert_eq!(
            busy as usize,
            h.events.iter().filter(|e| matches!(e.what, What::LockedAtOnce { .. })).count()
        );
    }
    assert!(at_once > 0, "some deferred upgrade must meet the other process's write lock");
    // The same program with BEGIN IMMEDIATE waits instead, and every attempt succeeds.
    let c = sweep::run_matrix(&[s], &[model("transactional")], Some(0..20), 2).unwrap();
    assert!(c[0].passed && !c[0].statuses.contains_key("503"), "{:?}", c[0].statuses);
}

/// A lock held elsewhere is waited out on SQLite's own busy-handler schedule (1, 2, 5, 10,
/// 15 ms … up to the budget), then 503.
#[test]
fn busy_wait_follows_sqlites_schedule() {
    let s = super::sim("sims/article/13-busy-database-503.toml");
    let out = run::run(&s, &model("transactional"), 0, RunOptions { keep_history: true }).unwrap();
    let h = out.history.unwrap();
    let wait = h.events.iter().find(|e| matches!(e.what, What::LockWait { .. })).unwrap();
    let gave_up = h.events.iter().find(|e| matches!(e.what, What::StillLocked { .. })).unwrap();
    assert_eq!(gave_up.t_us - wait.t_us, 50_000, "1+2+5+10+15 ms, then the last 17 ms");
    assert!(matches!(gave_up.what, What::StillLocked { waited_us: 50_000, .. }));
    assert!(out.report.passed(), "{:?}", out.report.checks);
}

/// An asynchronous driver on one shared connection lets another request's statements into an
/// open transaction; a pool of connections per process removes that hazard.
#[test]
fn a_pool_removes_the_shared_connection_hazard() {
    let s = super::sim("sims/article/11-twenty-concurrent-one-process.toml");
    let shared = seeds_with(&s, &model("transactional-async"), 0..40, ViolationKind::DuplicateRow);
    let pooled =
        sweep::run_matrix(&[s], &[model("transactional-async-pool")], Some(0..40), 2).unwrap();
    assert!(shared > 0);
    assert!(pooled[0].passed && pooled[0].violations.is_empty(), "{:?}", pooled[0].violations);
}

/// In WAL a lookup outside the transaction never waits for a writer; a request that looked
/// while another's transaction was open then clashes on the key inside its own: no duplicate
/// row, a 500. (Two copies to two cold processes rarely overlap: a first request's handler
/// code alone takes 1-6 ms; the article's burst of twenty does.)
#[test]
fn wal_lookup_never_waits_and_the_key_stops_the_duplicate() {
    let m = model("lookup-then-transaction-wal");
    let s = super::sim("sims/article/12-twenty-concurrent-two-processes.toml");
    let cells =
        sweep::run_matrix(std::slice::from_ref(&s), std::slice::from_ref(&m), Some(0..100), 2)
            .unwrap();
    let c = &cells[0];
    assert!(!c.violations.contains_key("duplicate-row"), "{:?}", c.violations);
    assert!(c.statuses.get("500").is_some_and(|n| *n > 0), "{:?}", c.statuses);
    for seed in 0..20 {
        let out = run::run(&s, &m, seed, RunOptions { keep_history: true }).unwrap();
        let h = out.history.unwrap();
        assert!(
            !h.events
                .iter()
                .any(|e| matches!(e.what, What::LockWait { stmt, .. } if stmt.name() == "lookup")),
            "a WAL read never waits"
        );
    }
}

/// `retry.abandon_first_ms`: the client gives up its first attempt after that long and sends
/// the retry at once (no backoff, whatever `retry.on` says); later attempts wait `timeout_ms`.
/// A design whose lookup is an I/O await (a cache GET) lets the retry in beside the first
/// attempt still running; check-first's `setImmediate` await does not.
#[test]
fn an_abandoned_first_attempt_is_retried_at_once() {
    let s = super::sim("sims/clients/abandon-first-attempt.toml");
    let out = run::run(&s, &model("seed002-redis-get-set"), 0, RunOptions::default()).unwrap();
    let attempts = &out.report.requests[0].copies[0];
    assert!(attempts.len() >= 2, "{attempts:?}");
    assert_eq!(attempts[0].outcome, idemsim::report::Outcome::TransportFailure);
    assert_eq!(attempts[0].done_ms, 3.0, "abandoned after 3 ms");
    assert_eq!(attempts[1].sent_ms, 3.0, "retried at once");
    assert!(
        seeds_with(&s, &model("seed002-redis-get-set"), 0..50, ViolationKind::DuplicateRow) > 0
    );
    assert_eq!(seeds_with(&s, &model("check-first"), 0..50, ViolationKind::DuplicateRow), 0);
    // Refused where it cannot apply: a policy with one attempt has no retry to send.
    let e = Sim::parse(
        Path::new("s.toml"),
        "[[request]]\nid = \"a\"\nretry = { max_attempts = 1, abandon_first_ms = 3 }\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("s.toml:3:") && e.contains("abandon_first_ms"), "{e}");
    // ... and one that would wait longer than the request's own timeout.
    let e = Sim::parse(
        Path::new("s.toml"),
        "[[request]]\nid = \"a\"\ntimeout_ms = 1\nretry = { max_attempts = 2, abandon_first_ms = 50 }\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("s.toml:4:") && e.contains("less than the request's timeout"), "{e}");
}
