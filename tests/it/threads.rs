//! The thread-per-request runtime (a stack's `kind = "thread-per-request"`): each request on
//! its own thread with its own connection, its code under one GIL when the stack says so, and
//! `MODEL@STACK`, the same design on another stack.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use idemsim::history::{Actor, Node, What};
use idemsim::scenario::Sim;

use super::model;

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("idemsim-threads-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A thread-per-request stack whose every time is fixed: handler code 10 ms, nothing else.
fn stack(extra: &str) -> String {
    format!(
        "[runtime]\nkind = \"thread-per-request\"\naccept_ms = [0, 0]\nfirst_accept_ms = [0, 0]\n\
         handler_ms = [10, 10]\nfirst_handler_ms = [10, 10]\n{extra}\n\
         [driver]\nstatement_ms = [0, 0]\ncommit_ms = [0, 0]\nlatency_ms = [0, 0]\n"
    )
}

/// The history of `sim_text` run on the transactional design on `stack_text` (seed 0).
fn history(d: &Path, stack_text: &str, sim_text: &str) -> Vec<idemsim::history::Event> {
    std::fs::write(d.join("s.toml"), stack_text).unwrap();
    let m = Arc::new(
        model("transactional")
            .on_stack("s.toml", idemsim::model::named_stack("s.toml", d).unwrap())
            .unwrap(),
    );
    let sim = Arc::new(Sim::parse(Path::new("sim.toml"), sim_text).unwrap());
    let out =
        idemsim::run::run(&sim, &m, 0, idemsim::run::RunOptions { keep_history: true }).unwrap();
    out.history.unwrap().events
}

/// `n` requests with keys of their own, sent at once to one process whose clients write
/// `gap_ms` after connecting.
fn requests(n: usize, gap_ms: u32) -> String {
    let mut t =
        format!("[world]\nlatency_ms = [0.01, 0.01]\nconnect_gap_ms = [{gap_ms}, {gap_ms}]\n");
    for i in 0..n {
        t.push_str(&format!("[[request]]\nid = \"r{i}\"\nkey = \"k{i}\"\n"));
    }
    t
}

/// Three requests sent at once to one process, on the transactional design on `stack`: when
/// each request's first statement ran (ms), earliest first.
fn first_statements(d: &Path, stack_text: &str) -> Vec<u64> {
    statements_after_code(&history(d, stack_text, &requests(3, 0)))
}

/// When each request's first server event after its handler's code came (ms), earliest first.
fn statements_after_code(events: &[idemsim::history::Event]) -> Vec<u64> {
    let mut firsts = std::collections::BTreeMap::new();
    let mut coded = std::collections::BTreeSet::new();
    for e in events {
        let Some(Actor::Attempt { req, .. }) = e.who else { continue };
        match &e.what {
            What::HandlerCode { .. } => {
                coded.insert(req);
            }
            What::Arrived => {}
            _ if coded.contains(&req) && matches!(e.node, Node::Server(_)) => {
                firsts.entry(req).or_insert(e.t_us / 1000);
            }
            _ => {}
        }
    }
    let mut at: Vec<u64> = firsts.into_values().collect();
    at.sort_unstable();
    at
}

/// When each request's reply left the server (ms), earliest first.
fn replies(events: &[idemsim::history::Event]) -> Vec<u64> {
    let mut at: Vec<u64> = events
        .iter()
        .filter(|e| matches!(e.what, What::Reply { .. }))
        .map(|e| e.t_us / 1000)
        .collect();
    at.sort_unstable();
    at
}

/// When the accept thread handed each request to its thread (ms), earliest first.
fn arrivals(events: &[idemsim::history::Event]) -> Vec<u64> {
    let mut at: Vec<u64> =
        events.iter().filter(|e| matches!(e.what, What::Arrived)).map(|e| e.t_us / 1000).collect();
    at.sort_unstable();
    at
}

#[test]
fn threads_run_their_code_side_by_side_and_a_gil_takes_turns_by_switch_interval() {
    let d = dir("gil");
    // No GIL: three threads' 10 ms of code run at once; each statement at 10 ms.
    assert_eq!(first_statements(&d, &stack("")), [10, 10, 10]);
    // A GIL with a 5 ms switch interval: slices in turn, the accept thread in line too, behind
    // each thread it started. The 1st thread holds the lock 0-5 while the accept thread waits
    // for it; the accept thread takes it at 5, starts the 2nd and queues behind it; the 1st
    // runs 5-10 (done), the 2nd 10-15, the accept thread starts the 3rd at 15, the 2nd runs
    // 15-20 (done), the 3rd 20-25 and, the accept thread having nothing more, 25-30 (done).
    assert_eq!(first_statements(&d, &stack("gil = true")), [10, 20, 30]);
    // A longer interval than the code: one after the other.
    assert_eq!(first_statements(&d, &stack("gil = true\nswitch_interval_ms = 50")), [10, 20, 30]);
    // A pool of one thread: one request at a time, whole.
    assert_eq!(first_statements(&d, &stack("threads = 1")), [10, 20, 30]);
    std::fs::remove_dir_all(&d).unwrap();
}

/// A thread back from SQLite (or from opening its connection) runs on only once it holds the
/// GIL again: it waits while another thread runs its code. Without a GIL it runs on at once.
#[test]
fn a_thread_back_from_a_blocking_call_waits_in_line_for_the_gil() {
    let d = dir("back");
    let timed = |extra: &str| {
        stack(&format!("gil = true\nswitch_interval_ms = 50\n{extra}"))
            .replace("statement_ms = [0, 0]", "statement_ms = [2, 2]")
    };
    // The 1st thread's code 0-10, the 2nd's 10-20. The 1st runs its five statements (BEGIN,
    // lookup, insert, save, COMMIT) of 2 ms from 10: back from BEGIN at 12, it waits for the
    // lock until 20, then runs the other four 20-28. (The 2nd's BEGIN waits on SQLite's busy
    // schedule meanwhile and answers last.)
    let ev = history(&d, &timed(""), &requests(2, 0));
    assert_eq!(replies(&ev)[0], 28);
    // No GIL: the 1st's statements run 10-20 beside the 2nd's code.
    let free = stack("").replace("statement_ms = [0, 0]", "statement_ms = [2, 2]");
    assert_eq!(replies(&history(&d, &free, &requests(2, 0)))[0], 20);
    // Opening the connection (3 ms, the lock given up) comes first: the 1st, back from it at 13,
    // waits for the 2nd's code until 20 and answers at 30.
    let ev = history(&d, &timed("connect_ms = [3, 3]"), &requests(2, 0));
    assert_eq!(replies(&ev)[0], 30);
    std::fs::remove_dir_all(&d).unwrap();
}

/// A new thread runs its code up to its first read of the socket (`prelude_ms`) before the
/// accept thread can start another; a read whose bytes have not arrived gives the lock up
/// until they do.
#[test]
fn a_thread_gives_the_gil_up_only_at_a_read_that_must_wait_for_its_bytes() {
    let d = dir("prelude");
    let with = |extra: &str| stack(&format!("gil = true\nswitch_interval_ms = 50\n{extra}"));
    // Bytes 5 ms after connecting. The 1st thread's prelude runs 0-2, then its read waits and
    // gives the lock up: the accept thread starts the 2nd at 2.
    let ev = history(&d, &with("prelude_ms = [2, 2]"), &requests(2, 5));
    assert_eq!(arrivals(&ev), [0, 2]);
    // No prelude: it reads at once, so the accept thread starts the 2nd at once.
    let ev = history(&d, &with(""), &requests(2, 5));
    assert_eq!(arrivals(&ev), [0, 0]);
    // Bytes already there: the 1st thread's read returns at once and it keeps the lock for its
    // whole 10 ms before the accept thread starts the 2nd.
    let ev = history(&d, &with("prelude_ms = [2, 2]"), &requests(2, 0));
    assert_eq!(arrivals(&ev), [0, 10]);
    // Refused where it means nothing: without a GIL, and on prefork workers.
    std::fs::write(d.join("s.toml"), stack("prelude_ms = [1, 1]")).unwrap();
    let e = idemsim::model::named_stack("s.toml", &d).unwrap_err().to_string();
    assert!(e.contains("runtime.prelude_ms: only a runtime with `gil = true`"), "{e}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_threads_stack_refuses_the_other_kinds_fields_at_their_location() {
    let d = dir("errors");
    let write = |text: &str| std::fs::write(d.join("s.toml"), text).unwrap();
    let err = || idemsim::model::named_stack("s.toml", &d).unwrap_err().to_string();
    write(&stack("turn_ms = [0.001, 0.002]"));
    let e = err();
    assert!(e.contains("s.toml:7:") && e.contains("runtime.turn_ms: only a `event-loop`"), "{e}");
    write(&stack("switch_interval_ms = 5"));
    assert!(err().contains("only a runtime with `gil = true`"), "{}", err());
    write(&stack("threads = 0"));
    assert!(err().contains("runtime.threads: expected 1..=1024"), "{}", err());
    write(&stack("").replace(
        "kind = \"thread-per-request\"",
        "kind = \"event-loop\"\nturn_ms = [0, 0]\ngil = true",
    ));
    assert!(err().contains("runtime.gil: only a `thread-per-request`"), "{}", err());
    write(&stack("").replace("kind = \"thread-per-request\"", "kind = \"fibers\""));
    assert!(err().contains("thread-per-request"), "{}", err());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn model_at_stack_is_the_same_design_on_another_stack_and_replays_by_that_name() {
    let on = idemsim::catalog::model("check-first@node-sqlite-sync-wal").unwrap();
    let plain = model("check-first");
    assert_eq!(on.name, "check-first@node-sqlite-sync-wal");
    assert_eq!(on.stack, "node-sqlite-sync-wal");
    assert_eq!(on.program, plain.program);
    assert_eq!(on.driver.journal, idemsim::model::Journal::Wal);
    let sim = super::sim("sims/article/11-twenty-concurrent-one-process.toml");
    let replay = idemsim::catalog::replay_for(&sim, &on, 3);
    assert!(replay.contains("--model check-first@node-sqlite-sync-wal --seed 3"), "{replay}");
    // The model's own [driver] fields still apply over the other stack.
    let pooled = model("transactional-async-pool");
    let moved = idemsim::catalog::model("transactional-async-pool@node-sqlite-sync").unwrap();
    assert_eq!(moved.driver.pool, pooled.driver.pool);
    let e = idemsim::catalog::model("check-first@no-such-stack").unwrap_err().to_string();
    assert!(e.contains("unknown stack `no-such-stack`"), "{e}");
}

/// A commit that syncs a rollback journal holds SQLite's EXCLUSIVE lock from its journal's sync
/// to the database's (`syncJournal` takes it first): another connection's lookup then waits on
/// the busy schedule. In WAL mode readers read their snapshot and never wait.
#[test]
fn a_rollback_commit_holds_readers_off_while_it_syncs_the_database() {
    let d = dir("sync");
    let lookup_of_b = |journal: &str| {
        let stack = format!(
            "[runtime]\nkind = \"thread-per-request\"\naccept_ms = [0, 0]\n\
             first_accept_ms = [0, 0]\nhandler_ms = [0, 0]\nfirst_handler_ms = [0, 0]\n\
             [driver]\nstatement_ms = [0, 0]\ncommit_ms = [10, 10]\nlatency_ms = [0, 0]\n\
             journal = \"{journal}\"\n"
        );
        std::fs::write(d.join("s.toml"), stack).unwrap();
        let m = Arc::new(
            model("check-first")
                .on_stack("s.toml", idemsim::model::named_stack("s.toml", &d).unwrap())
                .unwrap(),
        );
        // a's insert syncs from 0.01 ms (its journal, then the database) until 10.01.
        let sim = Arc::new(
            Sim::parse(
                Path::new("two.toml"),
                "[world]\nlatency_ms = [0.01, 0.01]\nconnect_gap_ms = [0, 0]\n\
                 [[request]]\nid = \"a\"\nkey = \"ka\"\n\
                 [[request]]\nid = \"b\"\nkey = \"kb\"\ndelay_ms = 6.5\n",
            )
            .unwrap(),
        );
        let out = idemsim::run::run(&sim, &m, 0, idemsim::run::RunOptions { keep_history: true })
            .unwrap();
        let events = out.history.unwrap().events;
        let b = |e: &&idemsim::history::Event| {
            matches!(e.who, Some(Actor::Attempt { req: 1, .. }))
                && matches!(e.node, Node::Server(_))
        };
        let waited = events
            .iter()
            .filter(b)
            .any(|e| matches!(e.what, What::LockWait { stmt: idemsim::history::Stmt::Lookup, .. }));
        let looked = events
            .iter()
            .filter(b)
            .find(|e| matches!(e.what, What::LookupMiss))
            .map(|e| e.t_us)
            .unwrap();
        (waited, looked)
    };
    // b's lookup at 6.51 ms meets a's commit: it waits 1 ms, 2, 5 (SQLite's schedule), meets
    // a's next commit (its save-response, 10.01 to 20.01) at 14.51, waits 10 more and reads at
    // 24.51.
    assert_eq!(lookup_of_b("rollback"), (true, 24_510));
    assert_eq!(lookup_of_b("wal"), (false, 6_510));
    std::fs::remove_dir_all(&d).unwrap();
}

/// Prefork: worker processes share the server's socket, each serving one request at a time with
/// memory of its own. A process-memory key store then remembers a key only in the worker that
/// served it: a retry that an idle worker of the other kind takes is a new request to it. Each
/// worker also runs its own first request cold.
#[test]
fn prefork_workers_keep_their_own_memory_and_their_own_cold_start() {
    let d = dir("prefork");
    let stack = |runtime: &str| {
        format!(
            "[runtime]\n{runtime}\naccept_ms = [0, 0]\nfirst_accept_ms = [0, 0]\n\
             handler_ms = [10, 10]\nfirst_handler_ms = [10, 10]\n\
             [driver]\nstatement_ms = [0, 0]\ncommit_ms = [0, 0]\nlatency_ms = [0, 0]\n"
        )
    };
    // a takes worker 1 for 10 ms; b, a millisecond later, worker 2; c repeats b's key once
    // both are done, and the lowest idle worker (1) takes it.
    let sim = Arc::new(
        Sim::parse(
            Path::new("three.toml"),
            "[world]\nlatency_ms = [0.01, 0.01]\nconnect_gap_ms = [0, 0]\n\
             [[request]]\nid = \"a\"\nkey = \"ka\"\n\
             [[request]]\nid = \"b\"\nkey = \"kb\"\ndelay_ms = 1\n\
             [[request]]\nid = \"c\"\nintent = \"b\"\nkey = \"kb\"\nafter = [\"a\", \"b\"]\n",
        )
        .unwrap(),
    );
    let run = |runtime: &str| {
        std::fs::write(d.join("s.toml"), stack(runtime)).unwrap();
        let m = Arc::new(
            model("inbox-memory")
                .on_stack("s.toml", idemsim::model::named_stack("s.toml", &d).unwrap())
                .unwrap(),
        );
        let out = idemsim::run::run(&sim, &m, 0, idemsim::run::RunOptions { keep_history: true })
            .unwrap();
        let colds: Vec<bool> = out
            .history
            .unwrap()
            .events
            .iter()
            .filter_map(|e| match e.what {
                What::HandlerCode { cold, .. } => Some(cold),
                _ => None,
            })
            .collect();
        let rows_of_b = out.report.rows.iter().filter(|r| r.intent == "b").count();
        (rows_of_b, colds, m.runtime.describe())
    };
    let (rows, colds, said) = run("kind = \"prefork\"\nworkers = 2");
    assert_eq!((rows, colds.as_slice()), (2, &[true, true, false][..]));
    assert!(said.starts_with("2 prefork worker process(es)"), "{said}");
    // The same two at once as threads of one process share its memory: the retry is a replay.
    let (rows, colds, _) = run("kind = \"thread-per-request\"\nthreads = 2");
    assert_eq!((rows, colds.as_slice()), (1, &[true, false, false][..]));
    // A prefork stack states its workers, and has no threads or GIL.
    std::fs::write(d.join("s.toml"), stack("kind = \"prefork\"")).unwrap();
    let e = idemsim::model::named_stack("s.toml", &d).unwrap_err().to_string();
    assert!(e.contains("runtime.workers: a prefork runtime states its worker processes"), "{e}");
    std::fs::write(d.join("s.toml"), stack("kind = \"prefork\"\nworkers = 2\ngil = true")).unwrap();
    let e = idemsim::model::named_stack("s.toml", &d).unwrap_err().to_string();
    assert!(e.contains("runtime.gil: a prefork runtime's workers are processes"), "{e}");
    std::fs::remove_dir_all(&d).unwrap();
}
