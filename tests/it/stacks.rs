//! Stack profiles (`stacks/`): calibrated timings live once, a model names one, and a model
//! that names none runs on the calibrated default, never on instant SQL.

use std::path::Path;
use std::sync::Arc;

use idemsim::model::{DEFAULT_STACK, Model};
use idemsim::sweep;

use super::{model, root, sim};

/// The shipped check-first model with its `stack` line taken out: what a user writes who has
/// never heard of stacks.
fn check_first_without_stack() -> String {
    let text = std::fs::read_to_string(root().join("models/check-first.toml")).unwrap();
    let kept: Vec<&str> = text.lines().filter(|l| !l.starts_with("stack = ")).collect();
    assert!(kept.len() < text.lines().count(), "check-first names its stack");
    kept.join("\n")
}

#[test]
fn a_model_without_stack_or_driver_gets_the_calibrated_default() {
    let bare = Model::parse(Path::new("mine.toml"), &check_first_without_stack()).unwrap();
    let shipped = model("check-first");
    assert_eq!(bare.stack, DEFAULT_STACK);
    assert_eq!(bare.driver, shipped.driver);
    // Never instant: a statement and a commit take time.
    assert!(
        bare.driver.statement_us.max() > 0 && bare.driver.commit_us.min() > 0,
        "{:?}",
        bare.driver
    );
}

#[test]
fn a_model_without_driver_races_as_the_calibrated_one_does() {
    // Case 12 (two processes): with instant SQL this design looked safe on 300 seeds; on the
    // calibrated default it races like the shipped model, seed for seed.
    let bare =
        Arc::new(Model::parse(Path::new("mine.toml"), &check_first_without_stack()).unwrap());
    let case = [sim("sims/article/12-twenty-concurrent-two-processes.toml")];
    let seeds = Some(0..40);
    let mine = sweep::run_matrix(&case, &[bare], seeds.clone(), 1).unwrap();
    let shipped = sweep::run_matrix(&case, &[model("check-first")], seeds, 1).unwrap();
    assert!(mine[0].violating_seeds > 0, "{:?}", mine[0].rows);
    assert_eq!(mine[0].violating_seeds, shipped[0].violating_seeds);
    assert_eq!(mine[0].rows, shipped[0].rows);
}

#[test]
fn a_models_driver_fields_override_its_stack_one_by_one() {
    let text = format!(
        "{}\n[driver]\ncommit_ms = [5, 6]\n",
        check_first_without_stack()
            .replace("program =", "stack = \"node-sqlite-sync-wal\"\nprogram =")
    );
    let m = Model::parse(Path::new("mine.toml"), &text).unwrap();
    assert_eq!(m.stack, "node-sqlite-sync-wal");
    assert_eq!(m.driver.commit_us, (5_000, 6_000).into());
    // The rest is the WAL stack's.
    assert_eq!(m.driver.journal, idemsim::model::Journal::Wal);
    assert_eq!(m.driver.statement_us, (1, 2).into());
}

#[test]
fn every_shipped_model_names_a_shipped_stack() {
    for entry in std::fs::read_dir(root().join("models")).unwrap() {
        let path = entry.unwrap().path();
        let m = Model::load(&path).unwrap();
        assert!(
            // python-sqlite-threads: powertools-redis, as the Python service it follows runs.
            [
                "node-sqlite-sync",
                "node-sqlite-async",
                "node-sqlite-sync-wal",
                "python-sqlite-threads"
            ]
            .contains(&m.stack.as_str()),
            "{}: {}",
            path.display(),
            m.stack
        );
    }
}

#[test]
fn an_unknown_stack_is_located_and_the_shipped_ones_listed() {
    let text =
        check_first_without_stack().replace("program =", "stack = \"node-sqlite\"\nprogram =");
    let e = Model::parse(Path::new("m.toml"), &text).unwrap_err().to_string();
    assert!(e.starts_with("m.toml:"), "{e}");
    assert!(e.contains("unknown stack `node-sqlite`"), "{e}");
    assert!(e.contains("node-sqlite-async, node-sqlite-sync, node-sqlite-sync-wal"), "{e}");
    // A model cannot set the runtime itself: refused at the table, saying where it lives.
    let text = format!("{}\n[runtime]\nturn_ms = [1, 2]\n", check_first_without_stack());
    let e = Model::parse(Path::new("m.toml"), &text).unwrap_err().to_string();
    assert!(e.starts_with("m.toml:") && e.contains("runtime of the stack it names"), "{e}");
    // A huge number is shown short in the error, so its closing words survive.
    let text =
        check_first_without_stack().replace("program =", "wait_budget_ms = 1e300\nprogram =");
    let e = Model::parse(Path::new("m.toml"), &text).unwrap_err().to_string();
    assert!(e.contains("wait_budget_ms = 1e300: expected milliseconds"), "{e}");
}

#[test]
fn a_stack_file_beside_the_model_is_read_and_must_state_its_timings() {
    let dir = std::env::temp_dir().join(format!("idemsim-stack-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model_text =
        check_first_without_stack().replace("program =", "stack = \"mine.toml\"\nprogram =");
    std::fs::write(dir.join("m.toml"), &model_text).unwrap();
    let runtime = "[runtime]\nkind = \"event-loop\"\nturn_ms = [0.001, 0.002]\n\
                   accept_ms = [0.02, 0.17]\nfirst_accept_ms = [0.18, 0.45]\n\
                   handler_ms = [0.066, 0.241]\nfirst_handler_ms = [1, 2]\n";
    // A stack without a runtime is refused, naming the stack file.
    std::fs::write(dir.join("mine.toml"), "[driver]\nstatement_ms = [0.01, 0.02]\n").unwrap();
    let e = Model::load(&dir.join("m.toml")).unwrap_err().to_string();
    assert!(e.contains("mine.toml") && e.contains("runtime"), "{e}");
    // ... and so is one that leaves out a runtime time, or its commit time.
    let no_turn = runtime.replace("turn_ms = [0.001, 0.002]\n", "");
    std::fs::write(dir.join("mine.toml"), format!("{no_turn}[driver]\n")).unwrap();
    let e = Model::load(&dir.join("m.toml")).unwrap_err().to_string();
    assert!(e.contains("mine.toml") && e.contains("runtime.turn_ms"), "{e}");
    std::fs::write(
        dir.join("mine.toml"),
        format!("{runtime}[driver]\nstatement_ms = [0.01, 0.02]\nlatency_ms = [0.001, 0.002]\n"),
    )
    .unwrap();
    let e = Model::load(&dir.join("m.toml")).unwrap_err().to_string();
    assert!(e.contains("mine.toml") && e.contains("driver.commit_ms"), "{e}");
    // A bad value is located in the stack file.
    std::fs::write(
        dir.join("mine.toml"),
        format!("[driver]\nstatement_ms = [0.01, 0.02]\ncommit_ms = [2, 1]\nlatency_ms = [0, 0]\n{runtime}"),
    )
    .unwrap();
    let e = Model::load(&dir.join("m.toml")).unwrap_err().to_string();
    assert!(e.contains("mine.toml:3:") && e.contains("driver.commit_ms"), "{e}");
    std::fs::write(
        dir.join("mine.toml"),
        format!("description = \"x\"\n{runtime}[driver]\nstatement_ms = [0.01, 0.02]\ncommit_ms = [1, 2]\nlatency_ms = [0, 0]\n"),
    )
    .unwrap();
    let m = Model::load(&dir.join("m.toml")).unwrap();
    assert_eq!(m.driver.commit_us, (1_000, 2_000).into());
    assert_eq!(m.loop_times().unwrap().first_handler_us, (1_000, 2_000).into());
    // No first_statement_ms: no statement runs cold code.
    assert_eq!(m.loop_times().unwrap().first_statement_us, (0, 0).into());
    // A thread runtime has no cold statements (not measured): refused where it is written.
    let threads = "[runtime]\nkind = \"thread-per-request\"\naccept_ms = [0.2, 0.3]\n\
                   first_accept_ms = [0.2, 0.3]\nhandler_ms = [0.3, 0.5]\n\
                   first_handler_ms = [0.3, 0.5]\nfirst_statement_ms = [0.1, 0.2]\n";
    std::fs::write(
        dir.join("mine.toml"),
        format!("{threads}[driver]\nstatement_ms = [0.01, 0.02]\ncommit_ms = [1, 2]\nlatency_ms = [0, 0]\n"),
    )
    .unwrap();
    let e = Model::load(&dir.join("m.toml")).unwrap_err().to_string();
    assert!(
        e.contains("mine.toml:7:") && e.contains("first_statement_ms: only a `event-loop`"),
        "{e}"
    );
    // A missing stack file names the path it tried.
    std::fs::remove_file(dir.join("mine.toml")).unwrap();
    let e = Model::load(&dir.join("m.toml")).unwrap_err().to_string();
    assert!(e.contains("m.toml:") && e.contains("stack:"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `[world] start = "warm"`: no request runs cold code, except the first one a process serves
/// after a crash restarted it (a restarted process is fresh); `"cold"` (the default) runs the
/// first request of each process cold, and the report says which.
#[test]
fn processes_start_cold_or_warm_and_a_restart_is_cold() {
    use idemsim::history::What;
    let text = |start: &str| {
        format!(
            "[world]\nlatency_ms = [0.05, 0.05]\nstart = \"{start}\"\n\
             [[inject]]\npoint = \"before-commit\"\naction = \"crash\"\nrestart_ms = 10\ntimes = 1\n\
             [[request]]\nid = \"order\"\nkey = \"k1\"\ntimeout_ms = 100\n\
             retry = {{ max_attempts = 3, on = [\"transport\"], backoff_ms = 20 }}\n"
        )
    };
    let m = model("transactional");
    let colds = |start: &str| {
        let s = Arc::new(idemsim::scenario::Sim::parse(Path::new("s.toml"), &text(start)).unwrap());
        let out =
            idemsim::run::run(&s, &m, 0, idemsim::run::RunOptions { keep_history: true }).unwrap();
        let events = out.history.unwrap().events;
        let cold: Vec<bool> = events
            .iter()
            .filter_map(|e| match e.what {
                What::HandlerCode { cold, .. } => Some(cold),
                _ => None,
            })
            .collect();
        // Each statement run cold: before the crash or after it.
        let mut crashed = false;
        let mut statements: [Vec<&'static str>; 2] = Default::default();
        for e in &events {
            match &e.what {
                What::ProcessCrashed => crashed = true,
                What::ColdStatement { stmt, .. } => statements[crashed as usize].push(stmt.name()),
                _ => {}
            }
        }
        (cold, crashed, statements)
    };
    let (warm, crashed, statements) = colds("warm");
    assert!(crashed, "the injected crash fired");
    // The first attempt warm; the retry served by the restarted, fresh process cold.
    assert_eq!(warm, [false, true]);
    // A warm process has run every statement's code; the restarted one runs each kind's cold
    // once.
    assert_eq!(statements[0], Vec::<&str>::new());
    let after = &statements[1];
    assert!(
        !after.is_empty() && after.iter().all(|s| after.iter().filter(|t| *t == s).count() == 1)
    );
    let (cold, _, statements) = colds("cold");
    assert_eq!(cold, [true, true]);
    assert!(
        statements[0].contains(&"begin") && statements[0].contains(&"lookup"),
        "{statements:?}"
    );
    assert_eq!(&statements[1], after);
    let e = idemsim::scenario::Sim::parse(Path::new("s.toml"), &text("tepid")).unwrap_err();
    assert!(e.to_string().contains("world.start"), "{e}");
}
