//! Structured mutants: one forgery per class (runs, covered, counts, seeds, names, n/a,
//! `passed`, shards dropped or doubled, builds, hashes, paths, timing …) and the table of every
//! class with what the judge requires of it (`CLASSES`, `classes`).

use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde_json::{Value, json};

use super::draft::{Draft, Forge, choose, covered_of, has_failures, is_na, key_of, rename_key};
use super::honest::pretty;
use super::{DIR, Expect, MODELS, SEEDS, SIMS};

fn runs_disagree(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    let runs = d.agg(f, c)["runs"].as_u64()?;
    let new = choose(rng, &[runs * 17, runs + 1, runs - 1, 0, u64::MAX]);
    d.agg(f, c)["runs"] = json!(new);
    Some(format!("{}: cell {c}: runs {runs} → {new}", d.name(f)))
}

fn covered_widened(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |c| covered_of(c) != [[SEEDS.start, SEEDS.end]])?;
    d.cell(f, c)["covered"] = json!([[SEEDS.start, SEEDS.end]]);
    Some(format!("{}: cell {c}: covered widened to the whole range", d.name(f)))
}

fn covered_overlapping(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |c| covered_of(c).iter().any(|i| i[1] - i[0] >= 2))?;
    let [a, b] = covered_of(d.cell(f, c))[0];
    let m = (a + b) / 2;
    let new = choose(
        rng,
        &[json!([[a, m], [m - 1, b]]), json!([[a, b], [a, b]]), json!([[m, b], [a, m]])],
    );
    d.cell(f, c)["covered"] = new.clone();
    Some(format!("{}: cell {c}: covered {new}", d.name(f)))
}

fn covered_outside(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    let [a, b] = covered_of(d.cell(f, c))[0];
    let end = SEEDS.end;
    let new = choose(
        rng,
        &[json!([[a + end, b + end]]), json!([[a, b + 1]]), json!([[u64::MAX - 1, u64::MAX]])],
    );
    d.cell(f, c)["covered"] = new.clone();
    Some(format!("{}: cell {c}: covered {new}", d.name(f)))
}

/// Pointers (inside an aggregate) to the counts of `agg`.
fn count_pointers(agg: &Value) -> Vec<String> {
    let mut out: Vec<String> = ["/failed_seeds", "/violating_seeds", "/bounded_runs"]
        .into_iter()
        .chain(["/ambiguous_intents"])
        .map(String::from)
        .collect();
    for h in ["statuses", "rows", "effects", "rows_per_intent", "effects_per_intent"] {
        for k in agg[h].as_object().into_iter().flat_map(|m| m.keys()) {
            out.push(format!("/{h}/{k}"));
        }
    }
    for k in agg["violations"].as_object().into_iter().flat_map(|m| m.keys()) {
        out.push(format!("/violations/{k}/seeds"));
        out.push(format!("/violations/{k}/occurrences"));
    }
    out
}

fn count_near_max(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    let ptr = count_pointers(d.agg(f, c)).choose(rng)?.clone();
    let new = u64::MAX - rng.gen_range(0..3);
    *d.agg(f, c).pointer_mut(&ptr)? = json!(new);
    Some(format!("{}: cell {c}: {ptr} → {new}", d.name(f)))
}

/// Pointers to an aggregate's first seeds: each violation's and the first failing seed's.
fn first_seed_ptrs(agg: &Value) -> Vec<String> {
    let mut ptrs: Vec<String> = agg["violations"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.keys().map(|k| format!("/violations/{k}/first_seed")))
        .collect();
    if !agg["first_failed_seed"].is_null() {
        ptrs.push("/first_failed_seed".into());
    }
    ptrs
}

fn first_seed_outside(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, has_failures)?;
    let ptr = first_seed_ptrs(d.agg(f, c)).choose(rng)?.clone();
    let covered = covered_of(d.cell(f, c));
    let mut outside: Vec<u64> = vec![SEEDS.end, 1000, u64::MAX];
    outside.extend(SEEDS.filter(|s| !covered.iter().any(|i| i[0] <= *s && *s < i[1])).take(1));
    let new = choose(rng, &outside);
    *d.agg(f, c).pointer_mut(&ptr)? = json!(new);
    Some(format!("{}: cell {c}: {ptr} → {new}", d.name(f)))
}

fn seeds_banana(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    let new = choose(rng, &["banana", "", "40..0", "0..18446744073709551615", "0..40\u{1b}[2J"]);
    let ptr = choose(rng, &["/seeds", "/aggregate/seeds"]);
    *d.cell(f, c).pointer_mut(ptr)? = json!(new);
    Some(format!("{}: cell {c}: {ptr} → {new:?}", d.name(f)))
}

fn identity_disagrees(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    let other_sim =
        SIMS.iter().map(|s| s.rsplit('/').next().unwrap_or(s).trim_end_matches(".toml"));
    let sims: Vec<&str> = other_sim.collect();
    let (ptr, new) = match rng.gen_range(0..5) {
        0 => ("/aggregate/model", json!(choose(rng, &MODELS))),
        1 => ("/aggregate/sim", json!(choose(rng, &sims))),
        2 => ("/aggregate/seeds", json!("0..41")),
        3 => ("/sim/name", json!(choose(rng, &sims))),
        _ => ("/model/name", json!(choose(rng, &MODELS))),
    };
    let old = d.cell(f, c).pointer(ptr)?.clone();
    if old == new {
        return None;
    }
    *d.cell(f, c).pointer_mut(ptr)? = new.clone();
    Some(format!("{}: cell {c}: {ptr} {old} → {new}", d.name(f)))
}

fn cells_empty(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let f = rng.gen_range(0..d.files.len());
    d.files[f].1["cells"] = json!([]);
    Some(format!("{}: cells []", d.name(f)))
}

fn only_empty_file(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let f = rng.gen_range(0..d.files.len());
    d.files[f].1["cells"] = json!([]);
    d.given = vec![f];
    Some(format!("{} alone, with cells []", d.name(f)))
}

fn forged_na(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |c| !is_na(c))?;
    let a = d.agg(f, c);
    for k in ["rows", "effects", "statuses", "violations", "rows_per_intent", "effects_per_intent"]
    {
        a[k] = json!({});
    }
    for k in ["runs", "failed_seeds", "bounded_runs", "violating_seeds", "ambiguous_intents"] {
        a[k] = json!(0);
    }
    a["passed"] = json!(true);
    a["first_failed_seed"] = Value::Null;
    a["first_failure"] = json!([]);
    a["applicable"] = json!(false);
    a["reason"] = json!("the sim injects at a point the model does not have");
    Some(format!("{}: cell {c}: applicable false, runs 0, counts emptied", d.name(f)))
}

fn forged_applicable(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = *d.cells_where(is_na).choose(rng)?;
    let runs = SEEDS.end - SEEDS.start;
    d.cell(f, c)["covered"] = json!([[SEEDS.start, SEEDS.end]]);
    let a = d.agg(f, c);
    if let Some(m) = a.as_object_mut() {
        m.remove("applicable");
        m.remove("reason");
    }
    a["runs"] = json!(runs);
    a["rows"] = json!({"1": runs});
    a["effects"] = json!({"0": runs});
    a["rows_per_intent"] = json!({"1": runs});
    a["effects_per_intent"] = json!({"0": runs});
    a["statuses"] = json!({"201": 2 * runs});
    Some(format!("{}: n/a cell {c}: applicable, every seed covered and passed", d.name(f)))
}

fn forged_passed(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    let old = d.agg(f, c)["passed"].as_bool()?;
    d.agg(f, c)["passed"] = json!(!old);
    Some(format!("{}: cell {c}: passed {old} → {}", d.name(f), !old))
}

fn forged_clean(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, has_failures)?;
    let a = d.agg(f, c);
    a["passed"] = json!(true);
    a["failed_seeds"] = json!(0);
    a["first_failed_seed"] = Value::Null;
    a["first_failure"] = json!([]);
    a["violations"] = json!({});
    a["violating_seeds"] = json!(0);
    Some(format!("{}: cell {c}: every failure and violation erased, consistently", d.name(f)))
}

fn violation_renamed(d: &mut Draft, rng: &mut StdRng, names: &[&str]) -> Option<String> {
    let (f, c) =
        d.pick(rng, |c| c["aggregate"]["violations"].as_object().is_some_and(|v| !v.is_empty()))?;
    let from = key_of(d.agg(f, c), "/violations", rng)?;
    let to = choose(rng, names);
    rename_key(&mut d.agg(f, c)["violations"], &from, to);
    Some(format!("{}: cell {c}: violation {from} renamed {to:?}", d.name(f)))
}

fn violation_name_escape(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let names = [
        "duplicate-row\u{1b}[2J\u{1b}[H",
        "duplicate-row\n  transactional × check-first-race: duplicate-row 0/40",
        "\u{1b}]0;pwned\u{7}duplicate-row",
    ];
    violation_renamed(d, rng, &names)
}

fn violation_name_unknown(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    violation_renamed(d, rng, &["banana", "", "DUPLICATE-ROW", "duplicate-row "])
}

fn status_not_status(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    let from = key_of(d.agg(f, c), "/statuses", rng)?;
    let to = choose(rng, &["banana", "\u{1b}[31m201", "", "2011", "20", "reply\nFAKE"]);
    rename_key(&mut d.agg(f, c)["statuses"], &from, to);
    Some(format!("{}: cell {c}: status {from} renamed {to:?}", d.name(f)))
}

fn shard_dropped(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let i = rng.gen_range(0..d.given.len());
    let f = d.given.remove(i);
    Some(format!("{} not given", d.name(f)))
}

fn shard_duplicated(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let f = rng.gen_range(0..d.files.len());
    let copy = (format!("copy-of-{}", d.name(f)), d.files[f].1.clone());
    d.files.push(copy);
    d.raw.push(None);
    d.given.insert(rng.gen_range(0..=d.given.len()), d.files.len() - 1);
    Some(format!("{} given again as a copy", d.name(f)))
}

fn shard_given_twice(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let f = rng.gen_range(0..d.files.len());
    d.given.insert(rng.gen_range(0..=d.given.len()), f);
    Some(format!("{} given twice (the same path)", d.name(f)))
}

fn cell_duplicated(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = *d.cells_where(|_| true).choose(rng)?;
    let cell = d.cell(f, c).clone();
    let cells = d.files[f].1["cells"].as_array_mut()?;
    cells.insert(rng.gen_range(0..=cells.len()), cell);
    Some(format!("{}: cell {c} listed twice", d.name(f)))
}

fn cells_reordered(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let f = rng.gen_range(0..d.files.len());
    let cells = d.files[f].1["cells"].as_array_mut()?;
    let before = cells.clone();
    while *cells == before {
        cells.shuffle(rng);
    }
    Some(format!("{}: its cells in another order than the other files'", d.name(f)))
}

/// A control: honest files given in another order merge to the same report.
fn files_reordered(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let before = d.given.clone();
    while d.given == before {
        d.given.shuffle(rng);
    }
    Some(format!("honest files given in the order {:?}", d.given))
}

fn build_edit(rng: &mut StdRng) -> (&'static str, &'static str) {
    choose(
        rng,
        &[
            ("idemsim", "0.0.0"),
            ("madsim", "0.2.33"),
            ("target", "aarch64-macos"),
            ("profile", "bogus"),
            ("idemsim", ""),
            ("target", "x86_64-linux\u{1b}[2J"),
        ],
    )
}

fn build_changed(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let f = rng.gen_range(0..d.files.len());
    let (k, v) = build_edit(rng);
    d.files[f].1["build"][k] = json!(v);
    Some(format!("{}: build.{k} → {v:?}", d.name(f)))
}

fn build_changed_everywhere(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (k, v) = build_edit(rng);
    for (_, file) in &mut d.files {
        file["build"][k] = json!(v);
    }
    Some(format!("every file: build.{k} → {v:?}"))
}

fn format_or_version(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let f = rng.gen_range(0..d.files.len());
    let (k, v) = choose(
        rng,
        &[
            ("format", json!("idemsim-shard2")),
            ("format", json!("")),
            ("version", json!(2)),
            ("version", json!(0)),
            ("version", json!(u32::MAX)),
        ],
    );
    d.files[f].1[k] = v.clone();
    Some(format!("{}: {k} → {v}", d.name(f)))
}

fn sha_changed(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = *d.cells_where(|_| true).choose(rng)?;
    let which = choose(rng, &["sim", "model"]);
    let old = d.cell(f, c)[which]["sha256"].as_str()?.to_string();
    let flipped = format!("{}{}", if old.starts_with('0') { "1" } else { "0" }, &old[1..]);
    let new = choose(rng, &["0".repeat(64), flipped, String::new(), "zz".into()]);
    d.cell(f, c)[which]["sha256"] = json!(new);
    Some(format!("{}: cell {c}: {which}.sha256 → {new:?}", d.name(f)))
}

fn sha_changed_everywhere(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let which = choose(rng, &["sim", "model"]);
    let names = if which == "sim" { SIMS.to_vec() } else { MODELS.to_vec() };
    let pick = choose(rng, &names);
    let name = pick.rsplit('/').next().unwrap_or(pick).trim_end_matches(".toml").to_string();
    for (f, c) in d.cells_where(|c| c[which]["name"] == name.as_str()) {
        d.cell(f, c)[which]["sha256"] = json!("0".repeat(64));
    }
    Some(format!("every file: {which} {name}'s sha256 → 0…0"))
}

fn histogram_moved(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    let h = choose(rng, &["rows", "effects", "rows_per_intent", "effects_per_intent", "statuses"]);
    let from = key_of(d.agg(f, c), &format!("/{h}"), rng)?;
    let n = d.agg(f, c)[h][&from].as_u64()?;
    let k = rng.gen_range(1..=n.max(1)).min(n);
    let to = match from.parse::<u64>() {
        Ok(x) if h == "statuses" => {
            choose(rng, &["500".to_string(), "409".into(), (x + 1).to_string()])
        }
        Ok(x) => choose(rng, &[(x + 1).to_string(), x.saturating_sub(1).to_string(), "7".into()]),
        Err(_) => "201".into(),
    };
    if to == from {
        return None;
    }
    let m = d.agg(f, c)[h].as_object_mut()?;
    m.insert(from.clone(), json!(n - k));
    let old = m.get(&to).and_then(Value::as_u64).unwrap_or(0);
    m.insert(to.clone(), json!(old + k));
    Some(format!("{}: cell {c}: {h}: {k} moved from {from} to {to}", d.name(f)))
}

fn timing_nonsense(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let f = rng.gen_range(0..d.files.len());
    let t = &mut d.files[f].1["timing"];
    let what = match rng.gen_range(0..8) {
        0 => ("wall_s", json!(-1.0)),
        1 => ("wall_s", json!(1e308)),
        2 => ("jobs", json!(0)),
        3 => ("jobs", json!(u64::MAX)),
        4 => ("jobs", json!(1u64 << 32)),
        5 => ("jobs", json!(-1)),
        _ => {
            let raw = choose(rng, &["NaN", "Infinity", "-Infinity", "1e999"]);
            t["wall_s"] = json!(123_456.5);
            d.replace.push((f, "123456.5".into(), raw.into()));
            return Some(format!("{}: timing.wall_s → {raw}", d.name(f)));
        }
    };
    t[what.0] = what.1.clone();
    Some(format!("{}: timing.{} → {}", d.name(f), what.0, what.1))
}

fn interrupted_forged(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    d.agg(f, c)["interrupted"] = json!(true);
    Some(format!("{}: cell {c}: interrupted true", d.name(f)))
}

fn nondeterministic_forged(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    let new = choose(rng, &[json!([SEEDS.end]), json!([u64::MAX]), json!([1000, 3])]);
    d.agg(f, c)["nondeterministic_seeds"] = new.clone();
    Some(format!("{}: cell {c}: nondeterministic_seeds {new}", d.name(f)))
}

/// A cell's sim or model path set to one of `paths` (None: to a FIFO in the mutant's
/// folder); three times in four in the cell merge reloads the file from (the first naming it
/// in the first file given).
fn path_set(d: &mut Draft, rng: &mut StdRng, paths: &[Option<&str>]) -> Option<String> {
    let (mut f, mut c) = *d.cells_where(|_| true).choose(rng)?;
    let which = choose(rng, &["sim", "model"]);
    if rng.gen_ratio(3, 4) {
        let name = d.cell(f, c)[which]["name"].clone();
        f = d.given[0];
        c = d.cells_where(|x| x[which]["name"] == name).into_iter().find(|p| p.0 == f)?.1;
    }
    let fifo = format!("{DIR}/fifo");
    let new = choose(rng, paths);
    d.fifo = new.is_none();
    let new = new.unwrap_or(&fifo);
    d.cell(f, c)[which]["path"] = json!(new);
    Some(format!("{}: cell {c}: {which}.path → {new:?}", d.name(f)))
}

fn path_changed(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let paths = [
        Some("/etc/passwd"),
        Some(SIMS[1]),
        Some("models/transactional.toml"),
        Some(""),
        Some("../../../../etc/passwd"),
        Some("no/such/file.toml"),
    ];
    path_set(d, rng, &paths)
}

fn path_not_a_file(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    path_set(d, rng, &[None, Some("/dev/zero"), Some("/dev/stdin"), Some("sims")])
}

fn first_failure_text(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) =
        d.pick(rng, |c| c["aggregate"]["first_failure"].as_array().is_some_and(|a| !a.is_empty()))?;
    let field = choose(rng, &["what", "expected", "actual"]);
    let new = choose(
        rng,
        &[
            "\u{1b}[2J\u{1b}[Hall clear".to_string(),
            "x\nFAKE: 6/6 passed".into(),
            "x".repeat(10_000),
        ],
    );
    d.agg(f, c)["first_failure"][0][field] = json!(new);
    Some(format!("{}: cell {c}: first_failure[0].{field} forged", d.name(f)))
}

fn reason_forged(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = *d.cells_where(is_na).choose(rng)?;
    let new = choose(rng, &["\u{1b}[31mforged", "all good", ""]);
    d.agg(f, c)["reason"] = json!(new);
    Some(format!("{}: n/a cell {c}: reason {new:?}", d.name(f)))
}

fn shard_spec_forged(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let f = rng.gen_range(0..d.files.len());
    let new = choose(
        rng,
        &[
            json!({"k": 7, "n": 3, "source": "--shard"}),
            json!({"k": u64::MAX, "n": 0, "source": "\u{1b}[2J"}),
            Value::Null,
        ],
    );
    d.files[f].1["shard"] = new.clone();
    Some(format!("{}: shard → {new}", d.name(f)))
}

fn first_seed_moved(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, has_failures)?;
    let ptr = first_seed_ptrs(d.agg(f, c)).choose(rng)?.clone();
    let seeds: Vec<u64> = covered_of(d.cell(f, c)).iter().flat_map(|i| i[0]..i[1]).collect();
    let new = *seeds.choose(rng)?;
    *d.agg(f, c).pointer_mut(&ptr)? = json!(new);
    Some(format!("{}: cell {c}: {ptr} → {new} (covered)", d.name(f)))
}

/// A count changed within what the other fields allow: only a re-run could tell.
fn counts_within_runs(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = d.pick(rng, |_| true)?;
    let a = d.agg(f, c).clone();
    let runs = a["runs"].as_u64()?;
    let mut options: Vec<(String, u64)> = vec![
        ("/bounded_runs".into(), rng.gen_range(0..=runs)),
        ("/ambiguous_intents".into(), rng.gen_range(0..=2 * runs)),
    ];
    if a["failed_seeds"].as_u64()? > 0 {
        options.push(("/failed_seeds".into(), rng.gen_range(1..=runs)));
    }
    // A violation on at most the seeds with a violation, each seen at least once.
    let violating = a["violating_seeds"].as_u64()?;
    for (k, v) in a["violations"].as_object().into_iter().flatten() {
        if violating > 0 && v["permitted"] == false {
            let seeds = rng.gen_range(1..=violating);
            let occ = v["occurrences"].as_u64()?.max(seeds);
            options.push((format!("/violations/{k}/seeds"), seeds));
            options.push((format!("/violations/{k}/occurrences"), rng.gen_range(seeds..=occ * 2)));
        }
    }
    let (ptr, new) = options.choose(rng)?.clone();
    *d.agg(f, c).pointer_mut(&ptr)? = json!(new);
    Some(format!("{}: cell {c}: {ptr} → {new} (within the runs)", d.name(f)))
}

fn cli_forged(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let (f, c) = *d.cells_where(|_| true).choose(rng)?;
    let new = choose(rng, &["x; rm -rf ~", "$(reboot)", "", "\u{1b}[2J"]);
    d.cell(f, c)["model"]["cli"] = json!(new);
    Some(format!("{}: cell {c}: model.cli → {new:?}", d.name(f)))
}

fn not_json(d: &mut Draft, rng: &mut StdRng) -> Option<String> {
    let f = rng.gen_range(0..d.files.len());
    let whole = pretty(&d.files[f].1);
    let half = whole[..whole.len() / 2].to_vec();
    let new: Vec<u8> = match rng.gen_range(0..7) {
        0 => Vec::new(),
        1 => b"{}".to_vec(),
        2 => b"null".to_vec(),
        3 => b"[]".to_vec(),
        4 => br#"{"format":"idemsim-shard","version":1}"#.to_vec(),
        5 => half,
        _ => [b"\xff\xfe".as_slice(), &whole].concat(),
    };
    let shown = String::from_utf8_lossy(&new[..new.len().min(40)]).into_owned();
    d.raw[f] = Some(new);
    Some(format!("{}: replaced by {shown:?}…", d.name(f)))
}

/// Every structured class: its name, what the judge requires, its forgery.
pub(super) const CLASSES: &[(&str, Expect, Forge)] = &[
    ("runs-disagree", Expect::Strict, runs_disagree),
    ("covered-widened", Expect::Strict, covered_widened),
    ("covered-overlapping", Expect::Strict, covered_overlapping),
    ("covered-outside", Expect::Strict, covered_outside),
    ("count-near-max", Expect::Strict, count_near_max),
    ("first-seed-outside", Expect::Strict, first_seed_outside),
    ("seeds-banana", Expect::Strict, seeds_banana),
    ("identity-disagrees", Expect::Strict, identity_disagrees),
    ("cells-empty", Expect::Strict, cells_empty),
    ("only-empty-file", Expect::Strict, only_empty_file),
    ("forged-na", Expect::Strict, forged_na),
    ("forged-applicable", Expect::Strict, forged_applicable),
    ("forged-passed", Expect::Strict, forged_passed),
    ("forged-clean", Expect::Sane, forged_clean),
    ("violation-name-escape", Expect::Strict, violation_name_escape),
    ("violation-name-unknown", Expect::Strict, violation_name_unknown),
    ("status-not-status", Expect::Strict, status_not_status),
    ("shard-dropped", Expect::Strict, shard_dropped),
    ("shard-duplicated", Expect::Strict, shard_duplicated),
    ("shard-given-twice", Expect::Strict, shard_given_twice),
    ("cell-duplicated", Expect::Strict, cell_duplicated),
    ("cells-reordered", Expect::Strict, cells_reordered),
    ("files-reordered", Expect::Strict, files_reordered),
    ("build-changed", Expect::Strict, build_changed),
    ("build-changed-everywhere", Expect::Strict, build_changed_everywhere),
    ("format-or-version", Expect::Strict, format_or_version),
    ("sha-changed", Expect::Strict, sha_changed),
    ("sha-changed-everywhere", Expect::Strict, sha_changed_everywhere),
    ("histogram-moved", Expect::Sane, histogram_moved),
    ("timing-nonsense", Expect::Sane, timing_nonsense),
    ("interrupted-forged", Expect::Strict, interrupted_forged),
    ("nondeterministic-forged", Expect::Strict, nondeterministic_forged),
    ("path-changed", Expect::Strict, path_changed),
    ("path-not-a-file", Expect::Strict, path_not_a_file),
    ("first-failure-text", Expect::Sane, first_failure_text),
    ("reason-forged", Expect::Strict, reason_forged),
    ("shard-spec-forged", Expect::Strict, shard_spec_forged),
    ("first-seed-moved", Expect::Sane, first_seed_moved),
    ("counts-within-runs", Expect::Sane, counts_within_runs),
    ("cli-forged", Expect::Strict, cli_forged),
    ("not-json", Expect::Strict, not_json),
];

/// Every structured mutant class with what the judge requires of it.
pub fn classes() -> Vec<(&'static str, Expect)> {
    CLASSES.iter().map(|(n, e, _)| (*n, *e)).collect()
}
