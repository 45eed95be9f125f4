//! Coverage of dangerous moments (`--coverage`, docs/coverage-moments.md): the teaching race
//! under check-first reaches the race window, under transactional it does not; a sim without
//! crashes marks the crash moment impossible; the counts are the same for any `--jobs` and for
//! shards merged; the JSON matches its schema; without the flag no `coverage` appears.

use idemsim::moments::{self, Moment};
use idemsim::sweep::{self, Cell, SweepOptions};

use super::{idemsim, model, root, sim};

const RACE: &str = "sims/teaching/check-first-race.toml";

fn cells(rel: &str, models: &[&str], seeds: std::ops::Range<u64>, jobs: usize) -> Vec<Cell> {
    let ms: Vec<_> = models.iter().map(|m| model(m)).collect();
    let opts = SweepOptions { jobs, coverage: true, ..Default::default() };
    sweep::run_cells(&[sim(rel)], &ms, Some(seeds), &opts, |_, _| {}).unwrap()
}

fn seeds_of(c: &Cell, m: Moment) -> (bool, u64) {
    let s = &c.coverage.as_ref().expect("coverage counted")[m.name()];
    (s.possible, s.seeds)
}

/// The teaching race: check-first reaches the race window on exactly the seeds that wrote a
/// duplicate row (the window is the bug); transactional's BEGIN IMMEDIATE never lets a lookup
/// miss inside another's window, though the moment is possible for its program.
#[test]
fn teaching_race_reaches_the_window_under_check_first_only() {
    let cs = cells(RACE, &["check-first", "transactional"], 0..50, 2);
    let (possible, reached) = seeds_of(&cs[0], Moment::LookupMissedInWindow);
    assert!(possible && reached > 0, "{reached}");
    assert_eq!(reached, cs[0].violations["duplicate-row"].seeds);
    assert_eq!(seeds_of(&cs[1], Moment::LookupMissedInWindow), (true, 0));
    let unreached = moments::unreached(cs[1].coverage.as_ref().unwrap());
    assert!(unreached.contains(&Moment::LookupMissedInWindow), "{unreached:?}");
    // No crash fault, no crash injection: impossible, and never counted.
    for c in &cs {
        assert_eq!(seeds_of(c, Moment::CrashBetweenEffectAndCommit), (false, 0));
    }
}

/// A sim with crash faults and a model with an effect before its save: the crash moment is
/// possible, and reached.
#[test]
fn crashes_reach_the_crash_moment() {
    let cs =
        cells("sims/faults/crash-between-steps.toml", &["claim-first", "check-first"], 0..40, 2);
    let (possible, reached) = seeds_of(&cs[0], Moment::CrashBetweenEffectAndCommit);
    assert!(possible && reached > 0, "{reached}");
    // check-first has no effect step: nothing to crash between.
    assert_eq!(seeds_of(&cs[1], Moment::CrashBetweenEffectAndCommit), (false, 0));
}

/// The counts do not depend on the number of workers, and shards merged equal one run.
#[test]
fn counts_equal_across_jobs_and_shards() {
    let rel = "sims/faults/crash-two-processes.toml";
    let one = cells(rel, &["lease", "check-first"], 0..24, 1);
    let two = cells(rel, &["lease", "check-first"], 0..24, 2);
    assert_eq!(one, two);
    let ms = vec![model("lease"), model("check-first")];
    let mut merged: Option<Vec<Cell>> = None;
    for k in 0..3 {
        let opts =
            SweepOptions { jobs: 1, coverage: true, shard: Some((k, 3)), ..Default::default() };
        let part = sweep::run_cells(&[sim(rel)], &ms, Some(0..24), &opts, |_, _| {}).unwrap();
        match merged.as_mut() {
            None => merged = Some(part),
            Some(m) => m.iter_mut().zip(part).for_each(|(a, b)| a.merge(b)),
        }
    }
    let merged = merged.unwrap();
    for (a, b) in merged.iter().zip(&one) {
        assert_eq!(a.coverage, b.coverage, "{} × {}", a.sim, a.model);
        assert_eq!(a.runs, b.runs);
    }
    let reached: u64 =
        one.iter().flat_map(|c| c.coverage.as_ref().unwrap().values()).map(|s| s.seeds).sum();
    assert!(reached > 0);
}

fn validator(kind: &str) -> jsonschema::Validator {
    let path = root().join(format!("schemas/{kind}.v1.schema.json"));
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    jsonschema::draft202012::new(&schema).unwrap()
}

/// `--coverage --json` (sweep and matrix) matches the schemas, with a `coverage` object per
/// cell; without the flag there is none; the text names the moments never reached.
#[test]
fn coverage_json_matches_schema_and_text_says_what_was_not_reached() {
    let sweep_args = ["sweep", RACE, "--model", "transactional", "--seeds", "0..10", "-q"];
    let (code, out, err) = idemsim(&[&sweep_args[..], &["--coverage", "--json"]].concat());
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(validator("sweep").is_valid(&v), "{out}");
    assert_eq!(v["coverage"]["lookup-missed-in-window"]["possible"], true);
    assert_eq!(v["coverage"]["lookup-missed-in-window"]["seeds"], 0);
    let mut bad = v.clone();
    bad["coverage"]["lookup-missed-in-window"]["seeds"] = (-1).into();
    assert!(!validator("sweep").is_valid(&bad));
    let (_, plain, _) = idemsim(&[&sweep_args[..], &["--json"]].concat());
    let plain: serde_json::Value = serde_json::from_str(&plain).unwrap();
    assert!(plain.get("coverage").is_none());
    let (code, text, err) = idemsim(&[&sweep_args[..], &["--coverage"]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("this sweep never reached: lookup-missed-in-window, copies-ran-at-once"),
        "{text}"
    );
    let m = ["matrix", "--sims", RACE, "--models", "check-first,transactional", "--seeds", "0..20"];
    let (code, out, err) = idemsim(&[&m[..], &["--coverage", "--json", "-q"]].concat());
    assert!(code <= 1, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(validator("matrix").is_valid(&v), "{out}");
    assert!(v["cells"][0]["coverage"]["lookup-missed-in-window"]["seeds"].as_u64().unwrap() > 0);
    let (_, text, _) = idemsim(&[&m[..], &["--coverage", "-q"]].concat());
    assert!(text.contains("check-first-race × transactional"), "{text}");
    assert!(text.contains("lookup-missed-in-window"), "{text}");
}
