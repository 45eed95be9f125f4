//! Verdicts I: the simulated world does only what the designs and the scenarios say. One test
//! per cause fixed (issue 19): a request ends only the transaction it began; an outbox relay
//! reads committed rows only, at its own phase; a `stall` freezes a process where a `pause` is
//! an await; what a design answers on a failed dependency is the model's; named points sit
//! where their definitions hold.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use idemsim::history::{Actor, Event, Node, What};
use idemsim::http::Reason;
use idemsim::model::{self, Model};
use idemsim::report::ViolationKind as V;
use idemsim::run::{self, RunOptions};
use idemsim::scenario::Sim;

use super::{model, root, sim};

fn inline_sim(src: &str) -> Arc<Sim> {
    Arc::new(Sim::parse(Path::new("inline.toml"), src).unwrap())
}

fn inline_model(src: &str) -> Result<Model, String> {
    Model::parse(Path::new("inline-model.toml"), src).map_err(|e| e.to_string())
}

fn history(s: &Arc<Sim>, m: &Arc<Model>, seed: u64) -> (idemsim::report::RunReport, Vec<Event>) {
    let out = run::run(s, m, seed, RunOptions { keep_history: true }).unwrap();
    (out.report, out.history.unwrap().events)
}

fn shipped_models() -> Vec<Arc<Model>> {
    let mut names: Vec<String> = std::fs::read_dir(root().join("models"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names.iter().map(|n| model(n)).collect()
}

/// On a process's one shared connection, every COMMIT and ROLLBACK is by the execution whose
/// BEGIN opened the transaction. Checked on the sims where another request of the process
/// runs while a transaction is open (a stalled original, retries in flight, bursts, crashes).
/// (A design whose error path is `rollback-any` ends others' transactions by its own code,
/// and its later COMMIT may then commit another's: that is its hazard, not the engine's.)
#[test]
fn a_request_ends_only_the_transaction_it_began() {
    let sims = [
        "sims/faults/slow-server-short-timeout.toml",
        "sims/catalogue/pause-past-lease.toml",
        "sims/catalogue/pause-past-deadline.toml",
        "sims/article/11-twenty-concurrent-one-process.toml",
        "sims/faults/crash-between-steps.toml",
        "sims/faults/double-submit.toml",
    ];
    let mut transactions = 0;
    for m in shipped_models()
        .iter()
        .filter(|m| m.driver.pool == 0 && m.on_error.rollback != model::Rollback::Any)
    {
        for path in sims {
            let s = sim(path);
            if run::not_applicable(&s, m).is_some() {
                continue;
            }
            for seed in 0..4 {
                let (_, events) = history(&s, m, seed);
                let mut owner: BTreeMap<Node, Actor> = BTreeMap::new();
                for e in &events {
                    let who = e.who;
                    match &e.what {
                        What::ProcessCrashed | What::RollbackOthers => {
                            owner.remove(&e.node);
                        }
                        What::Begin { .. } => {
                            transactions += 1;
                            let before = owner.insert(e.node, who.expect("a request begins"));
                            assert!(
                                before.is_none(),
                                "{} × {path} seed {seed}: BEGIN inside a transaction succeeded",
                                m.name
                            );
                        }
                        What::Commit | What::CommitNothingWritten | What::Rollback => {
                            let o = owner.remove(&e.node);
                            assert_eq!(
                                o, who,
                                "{} × {path} seed {seed}: {:?} at {} µs by {:?} ends a transaction begun by {:?}",
                                m.name, e.what, e.t_us, who, o
                            );
                        }
                        What::CommitLost { .. }
                        | What::DeadlineKilled
                        | What::TransactionRetried { .. }
                            if owner.get(&e.node) == who.as_ref() =>
                        {
                            owner.remove(&e.node);
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    assert!(transactions > 1000, "the sims ran transactions ({transactions})");
}

/// The outbox relay delivers a message only once the transaction that queued it committed,
/// also while that transaction is held open by a stalled process.
#[test]
fn a_relay_reads_only_committed_rows() {
    let s = sim("sims/faults/slow-server-short-timeout.toml");
    let mut delivered = 0;
    for m in [model("outbox"), model("outbox-dedupe")] {
        for seed in 0..20 {
            let (_, events) = history(&s, &m, seed);
            // message id → (the execution that queued it, whether it has committed since)
            let mut queued: BTreeMap<i64, (Actor, bool)> = BTreeMap::new();
            for e in &events {
                match (&e.what, e.who) {
                    (What::OutboxQueued { message }, Some(who)) => {
                        queued.insert(*message, (who, false));
                    }
                    (What::Commit, Some(who)) => {
                        for q in queued.values_mut().filter(|q| q.0 == who) {
                            q.1 = true;
                        }
                    }
                    (What::EffectCall { .. }, Some(Actor::RelayMessage(id))) => {
                        delivered += 1;
                        let q = queued.get(&id).expect("the relay delivers a queued message");
                        assert!(
                            q.1,
                            "{} seed {seed}: message {id} delivered at {} µs before {:?} committed",
                            m.name, e.t_us, q.0
                        );
                    }
                    _ => {}
                }
            }
        }
    }
    assert!(delivered > 40, "the relays delivered ({delivered})");
}

/// Two processes' relays wake at phases of their own, not in lockstep: on the seeds where
/// both relays deliver, their first deliveries are more than 1 ms apart nearly always (a
/// relay that finds the outbox already delivered by the other leaves no trace).
#[test]
fn relays_of_two_processes_have_their_own_phases() {
    let s = sim("sims/catalogue/contention-two-processes.toml");
    let m = model("outbox");
    let (mut both, mut apart) = (0, 0);
    for seed in 0..40 {
        let (_, events) = history(&s, &m, seed);
        let first = |p: u32| {
            events
                .iter()
                .find(|e| {
                    e.node == Node::Server(p) && matches!(e.who, Some(Actor::RelayMessage(_)))
                })
                .map(|e| e.t_us)
        };
        if let (Some(a), Some(b)) = (first(0), first(1)) {
            both += 1;
            apart += usize::from(a.abs_diff(b) > 1_000);
        }
    }
    assert!(both >= 5, "both relays delivered on {both} of 40 seeds");
    assert!(apart * 10 >= both * 8, "relays more than 1 ms apart on {apart} of {both} seeds");
}

/// A `stall` stops the whole process: nothing happens on it until it runs again. A `pause`
/// is an await: the process serves others meanwhile.
#[test]
fn a_stall_freezes_the_process_and_a_pause_does_not() {
    let src = |action: &str| {
        format!(
            "[world]\nlatency_ms = [0.05, 0.05]\n\
             [[inject]]\npoint = \"before-commit\"\naction = \"{action}\"\n{action}_ms = 50\n\
             request = \"first\"\n\
             [[request]]\nid = \"first\"\nkey = \"k1\"\n\
             [[request]]\nid = \"second\"\nkey = \"k2\"\nafter = \"first\"\ndelay_ms = 0\n\
             [[request]]\nid = \"third\"\nkey = \"k3\"\ndelay_ms = 10\n"
        )
    };
    let m = model("check-first");
    let (_, events) = history(&inline_sim(&src("stall")), &m, 0);
    let from = events.iter().position(|e| matches!(e.what, What::ProcessStalled { .. })).unwrap();
    let to = events.iter().position(|e| e.what == What::ProcessResumed).unwrap();
    assert!(events[to].t_us - events[from].t_us >= 50_000);
    let during: Vec<_> =
        events[from + 1..to].iter().filter(|e| e.node == Node::Server(0)).collect();
    assert!(during.is_empty(), "events on the stalled process: {during:?}");

    let (_, events) = history(&inline_sim(&src("pause")), &m, 0);
    let third_served = events.iter().any(|e| {
        e.node == Node::Server(0)
            && e.t_us < 50_000
            && matches!(e.what, What::RowInserted { .. })
            && matches!(e.who, Some(Actor::Attempt { req: 2, .. }))
    });
    assert!(third_served, "a pause is an await: the third request runs meanwhile");
}

/// The article's synchronous transactional variant under a stalled process: the stall holds
/// its transaction; nothing else commits or rolls it back, so it loses nothing.
#[test]
fn a_stalled_transaction_is_not_ended_by_another_request() {
    let s = sim("sims/catalogue/pause-past-lease.toml");
    for name in ["transactional", "stripe-v1"] {
        let m = model(name);
        for seed in 0..20 {
            let (r, _) = history(&s, &m, seed);
            let bad: Vec<_> = r
                .violations
                .iter()
                .filter(|v| matches!(v.name, V::LostSuccess | V::PhantomSuccess))
                .collect();
            assert!(bad.is_empty(), "{name} seed {seed}: {bad:?}");
        }
    }
}

/// What a design answers when its key store fails is in its model file: by default an
/// unhandled error (500, no promise), 503 "safe to retry" only where the model says so; a
/// failed save of the outcome keeps the claim where the model says so.
#[test]
fn a_failed_dependency_is_answered_as_the_model_says() {
    let refused = inline_sim(
        "[world]\nlatency_ms = [0.05, 0.05]\n[faults.cache]\nunavailable = 1.0\n\
         [[request]]\nid = \"order\"\nkey = \"k1\"\n",
    );
    let base = std::fs::read_to_string(root().join("models/ttl-cache-set-nx.toml")).unwrap();
    let with = |extra: &str| {
        Arc::new(inline_model(&base.replacen("[key]\n", &format!("[key]\n{extra}"), 1)).unwrap())
    };
    let (r, _) = history(&refused, &with(""), 0);
    let a = &r.requests[0].copies[0][0];
    assert_eq!((a.status, a.reason), (Some(500), None), "default: an unhandled error");
    let (r, _) = history(&refused, &with("on_store_error = 503\n"), 0);
    let a = &r.requests[0].copies[0][0];
    assert_eq!((a.status, a.reason), (Some(503), Some(Reason::SafeToRetry)));

    // The save of the outcome fails: Powertools leaves the record in progress; a design
    // that cleans up on error deletes its claim.
    let save_fails = inline_sim(
        "[world]\nlatency_ms = [0.05, 0.05]\n[faults.cache]\nunavailable = 0.5\n\
         [[request]]\nid = \"order\"\nkey = \"k1\"\n",
    );
    let (mut kept, mut released) = (0, 0);
    for seed in 0..40 {
        let (_, events) = history(&save_fails, &model("powertools-approx"), seed);
        kept += events.iter().filter(|e| e.what == What::ClaimKept).count();
        let (_, events) = history(&save_fails, &with(""), seed);
        released += events.iter().filter(|e| matches!(e.what, What::ClaimReleased { .. })).count();
    }
    assert!(kept > 0 && released > 0, "kept {kept}, released {released}");

    let e = inline_model(&base.replacen("[key]\n", "[key]\non_store_error = 404\n", 1));
    assert!(e.unwrap_err().contains("key.on_store_error: expected 500"));
}

/// Every shipped model places the defined points where their definitions hold (the loader
/// checks it); a point out of place is refused with its location and its definition.
#[test]
fn points_sit_where_their_definitions_hold() {
    for m in shipped_models() {
        for p in m.points() {
            assert!(
                model::POINTS.iter().any(|(n, _)| *n == p),
                "{}: @{p} is not a defined point",
                m.name
            );
        }
    }
    // store-2xx-only as it was: its before-commit came after its COMMIT and its effect.
    let e = inline_model(
        "name = \"x\"\nprogram = [\"claim\", \"begin\", \"insert-row\", \"commit\", \"effect\", \
         \"@before-commit\", \"save-response\", \"@after-commit\"]\n[key]\n",
    )
    .unwrap_err();
    assert!(e.contains("inline-model.toml:2:") && e.contains("@before-commit is where"), "{e}");
    // claim-first-release as it was: its after-commit came before its save.
    let e = inline_model(
        "name = \"x\"\nprogram = [\"claim\", \"insert-row\", \"effect\", \"@after-commit\", \
         \"save-response\"]\n[key]\n",
    )
    .unwrap_err();
    assert!(e.contains("@after-commit is where"), "{e}");
    // A design with no effect step has no @after-effect; a sim that needs one is n/a for it.
    let e = inline_model(
        "name = \"x\"\nprogram = [\"begin\", \"insert-row\", \"@after-effect\", \"commit\"]\n",
    )
    .unwrap_err();
    assert!(e.contains("@after-effect is where"), "{e}");
    let s = sim("sims/catalogue/exception-after-effect.toml");
    assert!(run::not_applicable(&s, &model("transactional")).is_some());
    assert!(run::not_applicable(&s, &model("claim-first-release")).is_none());
}

/// The error path's exclusive choices are one each (`model::Rollback`, `model::ClaimCleanup`):
/// a model that names two gets a located error at the second.
#[test]
fn exclusive_error_paths_are_one_choice() {
    let two = |list: &str| {
        inline_model(&format!(
            "name = \"x\"\nprogram = [\"claim\", \"begin\", \"insert-row\", \"commit\"]\n\
             on_error = [{list}]\n[key]\nlease_ms = 10\n"
        ))
        .unwrap_err()
    };
    let e = two("\"rollback\", \"rollback-any\"");
    assert!(e.starts_with("inline-model.toml:3:25:") && e.contains("choose one"), "{e}");
    let e = two("\"release-claim\", \"unlock\"");
    assert!(e.starts_with("inline-model.toml:3:30:") && e.contains("choose one"), "{e}");
    let m = inline_model(
        "name = \"x\"\nprogram = [\"claim\", \"begin\", \"insert-row\", \"commit\"]\n\
         on_error = [\"rollback-any\", \"release-key\", \"retry-transaction\"]\n[key]\n",
    )
    .unwrap();
    assert_eq!(m.on_error.rollback, model::Rollback::Any);
    assert_eq!(m.on_error.claim, model::ClaimCleanup::ReleaseKey);
    assert!(m.on_error.retry_transaction);
}
