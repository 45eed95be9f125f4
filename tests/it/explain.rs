//! Explaining a failure: the shrinker, `explain`, the SVG and HTML pictures, n/a cells.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use idemsim::explain;
use idemsim::model::Model;
use idemsim::picture;
use idemsim::report::ViolationKind;
use idemsim::run::{self, RunOptions};
use idemsim::scenario::Sim;
use idemsim::shrink::{self, ShrinkOptions, Target};
use idemsim::sweep;

use super::{idemsim, model, root, sim, snapshot};

fn shrink_file(rel: &str, m: &str, seed: Option<u64>) -> shrink::Shrunk {
    let path = root().join(rel);
    let src = std::fs::read_to_string(&path).unwrap();
    shrink::shrink(&path, &src, &model(m), seed, &ShrinkOptions::default()).unwrap()
}

/// Case 11 (twenty concurrent copies) shrinks to a scenario no larger than the teaching race
/// (one request, two copies, no fault), and the written file, re-loaded, shows the violation
/// on the seed it names.
#[test]
fn case_11_shrinks_to_the_teaching_race() {
    let s = shrink_file("sims/article/11-twenty-concurrent-one-process.toml", "check-first", None);
    assert_eq!(s.target, Target::Violation(ViolationKind::DuplicateRow));
    let teaching = sim("sims/teaching/check-first-race.toml");
    let copies = |x: &Sim| x.requests.iter().map(|q| q.copies).sum::<u32>();
    assert!(s.sim.requests.len() <= teaching.requests.len(), "{}", s.text);
    assert!(copies(&s.sim) <= copies(&teaching), "{}", s.text);
    assert!(
        s.sim.injects.is_empty() && s.sim.actions.is_empty() && s.sim.faults.partitions.is_empty()
    );
    assert!(s.runs <= ShrinkOptions::default().budget_runs);
    // The file is what it says: a plain sim that fails on its seed.
    let again = Arc::new(Sim::parse(Path::new("shrunk.toml"), &s.text).unwrap());
    let out = run::run(&again, &model("check-first"), s.seed, RunOptions::default()).unwrap();
    assert!(
        out.report.violations.iter().any(|v| v.name == ViolationKind::DuplicateRow && !v.permitted)
    );
    assert!(s.text.starts_with("# Shrunk by `idemsim shrink`"));
}

/// A faulted sim shrinks to something no larger, still failing the same way; the result is
/// the same for the same budget (it is counted in runs).
#[test]
fn shrinking_keeps_the_violation_and_never_grows() {
    let rel = "sims/faults/crash-between-steps.toml";
    let a = shrink_file(rel, "check-first", None);
    let b = shrink_file(rel, "check-first", None);
    assert_eq!(a.text, b.text, "deterministic");
    let original = sim(rel);
    assert!(a.sim.requests.len() <= original.requests.len());
    assert!(a.text.len() <= std::fs::read_to_string(root().join(rel)).unwrap().len() + 400);
    let out = run::run(&a.sim, &model("check-first"), a.seed, RunOptions::default()).unwrap();
    assert!(a.target.hit(&out.report).is_some());
}

/// The models the teaching snapshot compares with: a fixed list, so adding a model to
/// models/ changes no snapshot (the CLI compares with every model:
/// `html_pages_are_self_contained` checks that its text names them all).
const TEACHING_OTHERS: [&str; 8] = [
    "no-key",
    "transactional",
    "claim-first",
    "lease",
    "retry-loop-effect-inside",
    "seed002-redis-get-set",
    "signup-validate-uniqueness",
    "transactional-async",
];

/// The teaching demo: `explain check-first` finds the smallest race, explains it, and shows
/// the same schedule under transactional; snapshotted, and well under a second in release.
#[test]
fn the_teaching_demo_is_snapshotted() {
    let started = Instant::now();
    let opts = explain::ExplainOptions {
        target: None,
        others: Some(TEACHING_OTHERS.iter().map(|m| model(m)).collect()),
        ..Default::default()
    };
    let e = explain::explain_with(&model("check-first"), None, None, &opts).unwrap();
    let took = started.elapsed();
    assert!(e.failed);
    assert!(e.text.contains("Where did the second execution come from?"));
    assert!(e.text.contains("Why did the key not stop it?"));
    assert!(e.text.contains("the same schedule under transactional (no violation)"));
    snapshot("explain__check-first", &e.text);
    // Debug builds are slower; the release bound is checked by a release-mode run in CI's demo.
    assert!(took.as_secs() < 30, "{took:?}");
}

/// A model that passes everything searched says so.
#[test]
fn explaining_a_model_on_a_sim_it_passes_says_so() {
    let e = explain::explain(
        &model("transactional"),
        Some(&sim("sims/teaching/check-first-race.toml")),
        None,
    )
    .unwrap();
    assert!(!e.failed);
    assert!(e.text.contains("nothing to explain"), "{}", e.text);
}

/// The SVG is well-formed XML, has one lane per participant, the race window and the state
/// column; its text is snapshotted.
#[test]
fn svg_has_a_lane_per_participant() {
    let s = sim("sims/teaching/check-first-race.toml");
    let out = run::run(&s, &model("check-first"), 13, RunOptions { keep_history: true }).unwrap();
    let h = out.history.unwrap();
    let svg = picture::svg(&h, &s, "check-first × check-first-race · seed 13", Some("click"));
    let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
    let lanes: Vec<String> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("lane"))
        .map(|n| n.descendants().find(|t| t.is_text()).unwrap().text().unwrap().to_string())
        .collect();
    assert_eq!(lanes, ["client-click", "server-1"], "the control lane (only `quiescent`) dropped");
    assert!(doc.descendants().any(|n| n.attribute("class") == Some("race")), "race window");
    assert!(svg.contains("rows 2 · keys 1 done"), "state column");
    snapshot("svg__check-first-race__check-first__13", &svg);
}

/// HTML pages are self-contained (no script, no external reference) and hold the diagram.
#[test]
fn html_pages_are_self_contained() {
    let dir = std::env::temp_dir().join(format!("idemsim-html-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (run_html, explain_html, matrix_html) =
        (dir.join("run.html"), dir.join("explain.html"), dir.join("matrix.html"));
    let (code, _, _) = idemsim(&[
        "run",
        "check-first-race",
        "--model",
        "check-first",
        "--seed",
        "13",
        "--html",
        run_html.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "the race fails the sim's expectation");
    let (code, text, _) =
        idemsim(&["explain", "check-first", "--html", explain_html.to_str().unwrap()]);
    assert_eq!(code, 0);
    // Without --others, the other models are every model of the catalogue (that the race
    // applies to: its minimal scenario keeps its routes).
    let race = sim("sims/teaching/check-first-race.toml");
    let others = text.split("the other models:").nth(1).unwrap().split("what happened").next();
    let others = others.unwrap().replace('\n', " ");
    for m in idemsim::catalog::all_models().unwrap() {
        let named = others.split([' ', ',', ';', '(']).any(|w| w == m.name);
        let na = run::not_applicable(&race, &m).is_some();
        assert!(m.name == "check-first" || named || na, "{} missing from {others}", m.name);
    }
    let (code, _, _) =
        idemsim(&["matrix", "--sims", "sims/teaching", "--html", matrix_html.to_str().unwrap()]);
    assert!(code == 0 || code == 1);
    for p in [&run_html, &explain_html, &matrix_html] {
        let page = std::fs::read_to_string(p).unwrap();
        assert!(page.starts_with("<!DOCTYPE html>") && page.trim_end().ends_with("</html>"));
        assert!(!page.contains("<script"));
        assert!(!page.contains("src=\"http") && !page.contains("href=\"http"));
        // Every embedded SVG is well-formed.
        let mut rest = page.as_str();
        let mut n = 0;
        while let Some(i) = rest.find("<svg ") {
            let j = rest[i..].find("</svg>").unwrap() + i + 6;
            roxmltree::Document::parse(&rest[i..j]).expect("well-formed SVG in the page");
            rest = &rest[j..];
            n += 1;
        }
        assert!(n >= 1, "{}", p.display());
    }
}

/// A sim that injects at a point the model lacks is n/a: in tables and JSON, and `run` exits 3.
#[test]
fn missing_points_make_a_cell_not_applicable() {
    let m = Arc::new(
        Model::parse(
            Path::new("bare.toml"),
            "program = [\"lookup\", \"insert-row\", \"save-response\"]\n[key]\n",
        )
        .unwrap(),
    );
    let s = sim("sims/article/10-failure-before-commit.toml");
    assert!(run::not_applicable(&s, &m).unwrap().contains("@before-commit"));
    let cells = sweep::run_matrix(
        &[s.clone(), sim("sims/article/01-same-key-same-content.toml")],
        std::slice::from_ref(&m),
        None,
        1,
    )
    .unwrap();
    assert!(!cells[0].applicable && cells[0].runs == 0);
    assert!(cells[1].applicable && cells[1].runs > 0);
    let json = serde_json::to_value(&cells[0]).unwrap();
    assert_eq!(json["applicable"], false);
    assert!(json["reason"].as_str().unwrap().contains("@before-commit"));
    let totals = sweep::totals(std::slice::from_ref(&m), &cells);
    assert_eq!((totals[0].total, totals[0].not_applicable), (1, 1));
    let f = std::env::temp_dir().join(format!("bare-{}.toml", std::process::id()));
    std::fs::write(&f, "program = [\"lookup\", \"insert-row\", \"save-response\"]\n[key]\n")
        .unwrap();
    let (code, out, _) =
        idemsim(&["run", "10-failure-before-commit", "--model", f.to_str().unwrap()]);
    assert_eq!(code, 3, "{out}");
    assert!(out.starts_with("n/a: "), "{out}");
}
