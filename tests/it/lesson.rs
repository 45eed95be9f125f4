//! The lesson page without a browser: self-contained, its embedded per-step state equal to
//! the run's history, escaped, deterministic; the default seed is the first violating one.
//! (`tools/browser-check.py` drives the same page in headless Chromium.)

use std::path::Path;
use std::sync::Arc;

use idemsim::history::StateTrack;
use idemsim::lesson::{self, LessonOptions};
use idemsim::run::{self, RunOptions};
use idemsim::scenario::Sim;

use super::{idemsim, model, root, sim};

const RACE: &str = "sims/teaching/check-first-race.toml";

fn teaching(seed: Option<u64>) -> lesson::Lesson {
    lesson::lesson(&LessonOptions {
        sim: sim(RACE),
        model: model("check-first"),
        vs: Some(model("transactional")),
        seed,
    })
    .unwrap()
}

/// The JSON embedded in the page, read back as the browser reads it.
fn embedded(html: &str) -> serde_json::Value {
    let open = "<script id=\"lesson-data\" type=\"application/json\">";
    let i = html.find(open).expect("the data element") + open.len();
    let j = html[i..].find("</script>").unwrap() + i;
    serde_json::from_str(&html[i..j]).expect("the embedded data is JSON")
}

/// The default seed is the first of the sim's range with a violation, found in order.
#[test]
fn the_default_seed_is_the_first_violating_one() {
    let (s, m) = (sim(RACE), model("check-first"));
    let first = s
        .seeds
        .clone()
        .find(|&x| {
            let r = run::run(&s, &m, x, RunOptions::default()).unwrap().report;
            r.violations.iter().any(|v| !v.permitted)
        })
        .unwrap();
    assert_eq!(lesson::first_violating_seed(&s, &m), Some(first));
    assert_eq!(teaching(None).seed, first);
}

/// Every step's counts are `StateTrack`'s after that event, its tables have as many lines,
/// the last step's rows are the run's rows; the fix's run likewise; the violating step is the
/// second insert and the fix's window is closed, not a race window.
#[test]
fn embedded_state_equals_the_runs_history() {
    let l = teaching(None);
    let data = embedded(&l.html);
    assert_eq!(data, l.json, "the page embeds what --json prints");
    for (key, m) in [("main", "check-first"), ("vs", "transactional")] {
        let out =
            run::run(&sim(RACE), &model(m), l.seed, RunOptions { keep_history: true }).unwrap();
        let h = out.history.unwrap();
        let track = StateTrack::of(&h);
        let steps = data[key]["steps"].as_array().unwrap();
        assert!(steps.len() + 1 >= h.events.len(), "{m}: every event but bookkeeping is a step");
        for s in steps {
            let i = s["event"].as_u64().unwrap() as usize;
            let (rows, done, progress) = track.after[i];
            assert_eq!(s["rows"], rows, "{m} event {i}");
            assert_eq!(s["keys_done"], done, "{m} event {i}");
            assert_eq!(s["keys_in_progress"], progress, "{m} event {i}");
            assert_eq!(s["tables"]["rows"].as_array().unwrap().len() as u64, rows);
            let keys = s["tables"]["keys"].as_array().unwrap();
            assert_eq!(keys.iter().filter(|k| k["state"] == "done").count() as u64, done);
            assert_eq!(s["text"], h.legend.text(&h.events[i]), "{m} event {i}");
        }
        let last = steps.last().unwrap();
        let mut ids: Vec<i64> = last["tables"]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect();
        ids.sort();
        let mut want: Vec<i64> = out.report.rows.iter().map(|r| r.id).collect();
        want.sort();
        assert_eq!(ids, want, "{m}: the last step's rows are the run's");
    }
    let v = &data["main"]["violation"];
    assert_eq!(v["name"], "duplicate-row");
    let at = &data["main"]["steps"][v["step"].as_u64().unwrap() as usize];
    assert!(at["text"].as_str().unwrap().contains("insert-row: row 2"), "{at}");
    assert_eq!(data["main"]["window"]["closed"], false);
    assert_eq!(data["vs"]["window"]["closed"], true);
    assert!(!data["vs"]["window"]["label"].as_str().unwrap().contains("race window"));
    assert!(data["vs"]["fix"]["step"].is_u64(), "the fix's point is marked");
    assert_eq!(data["narrative"].as_array().unwrap().len(), 4, "explain's four paragraphs");
}

/// The tables replay the counts on runs with transactions, claims, crashes and key loss.
#[test]
fn tables_agree_with_the_counts_on_other_runs() {
    let cases = [
        ("sims/faults/dropped-replies.toml", "transactional"),
        ("sims/article/11-twenty-concurrent-one-process.toml", "check-first"),
        ("sims/teaching/check-first-race.toml", "transactional"),
        // The completer finishes an abandoned claim (it has no key of its own).
        ("sims/business/webhook-crash-after-insert.toml", "brandur-atomic-phases"),
    ];
    for (s, m) in cases {
        let (s, m) = (sim(s), model(m));
        for seed in 0..6 {
            let out = run::run(&s, &m, seed, RunOptions { keep_history: true }).unwrap();
            let h = out.history.unwrap();
            let track = StateTrack::of(&h);
            for (i, t) in lesson::state::tables(&h, h.events.len()).iter().enumerate() {
                let (rows, done, progress) = track.after[i];
                let count = |st: &str| t.keys.iter().filter(|k| k.state == st).count() as u64;
                assert_eq!(
                    (t.rows.len() as u64, count("done"), count("in progress")),
                    (rows, done, progress),
                    "{} × {} seed {seed} event {i}",
                    s.name,
                    m.name
                );
            }
        }
    }
}

/// No network: nothing is loaded from anywhere; the page is one file.
#[test]
fn the_page_is_self_contained() {
    let html = teaching(Some(13)).html;
    for bad in
        ["src=\"http", "href=\"http", "src=\"//", "href=\"//", "url(http", "@import", "<link"]
    {
        assert!(!html.contains(bad), "{bad}");
    }
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(html.matches("<script").count(), 2, "the data and the inline script");
}

/// A key holding markup and `</script>` cannot end the data element nor add markup.
#[test]
fn embedded_text_is_escaped() {
    let src = std::fs::read_to_string(root().join(RACE)).unwrap();
    let evil = "</script><b>x</b>&amp;\u{2028}";
    let text = src.replace("key = \"k1\"", &format!("key = \"{evil}\""));
    let dir = std::env::temp_dir().join(format!("idemsim-lesson-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("race.toml");
    std::fs::write(&path, &text).unwrap();
    let s = Arc::new(Sim::load(Path::new(&path)).unwrap());
    let l = lesson::lesson(&LessonOptions {
        sim: s,
        model: model("check-first"),
        vs: None,
        seed: Some(13),
    })
    .unwrap();
    assert_eq!(l.html.matches("</script>").count(), 2, "only the two elements' own ends");
    assert!(!l.html.contains("<b>x"));
    let data = embedded(&l.html);
    let key = data["main"]["steps"][11]["tables"]["keys"][0]["key"].as_str().unwrap().to_string();
    assert!(key.starts_with("</script><b>x</b>&amp;"), "{key}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same arguments give the same bytes, through the binary too.
#[test]
fn same_arguments_same_bytes() {
    assert_eq!(teaching(None).html, teaching(None).html);
    let a = idemsim(&["lesson", "check-first", "-o", "-"]);
    let b = idemsim(&["lesson", "check-first"]);
    assert_eq!(a.0, 0, "{}", a.2);
    assert_eq!(a.1, b.1);
    assert_eq!(a.1, teaching(None).html);
    let j = idemsim(&["lesson", "check-first", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&j.1).unwrap();
    assert_eq!(v["format"], "idemsim-lesson");
    assert_eq!(v["seed"], 8);
}

/// A run longer than a page can step through (more than `picture::MAX_EVENTS` steps) is
/// refused with the shrink command to run first, never drawn cut with a violation marked at
/// a step that is not it.
#[test]
fn a_run_too_long_for_a_page_is_refused() {
    let dir = std::env::temp_dir().join(format!("idemsim-lesson-long-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sim = dir.join("burst.toml");
    std::fs::write(
        &sim,
        "seeds = \"0..5\"\n[world]\nlatency_ms = [0.03, 0.055]\n\
         connect_gap_ms = [0.05, 0.6]\n[[request]]\nid = \"burst\"\nkey = \"k1\"\ncopies = 200\n\
         spread_ms = [0, 1.7]\nexpect = { status = 201, same_id = true }\n[expect]\nrows = 1\n",
    )
    .unwrap();
    let (code, out, err) = super::idemsim(&["lesson", "no-key", "--sim", sim.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("a lesson page steps through at most 400"), "{err}");
    assert!(err.contains("shrink"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
