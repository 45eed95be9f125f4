//! Random mutants: JSON-level edits of one file, or an edit of its raw bytes (sane only when
//! every change is one a re-run alone could tell), and `mutant`: a campaign's mutant `i`, a
//! structured class in turn or a random edit.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use super::draft::{Draft, choose};
use super::forge::CLASSES;
use super::honest::{Honest, pretty};
use super::{Expect, Mutant};

/// Fields of an aggregate only a re-run of seeds could check (within their bounds).
const SANE_FIELDS: [&str; 13] = [
    "statuses",
    "first_failure",
    "rows_per_intent",
    "effects_per_intent",
    "ambiguous_intents",
    "nondeterministic_seeds",
    "bounded_runs",
    "failed_seeds",
    "violating_seeds",
    "violations",
    "first_failed_seed",
    "rows",
    "effects",
];

/// Whether a change at `ptr` (a JSON pointer in a shard file) can only be told by re-running.
fn sane_path(ptr: &str) -> bool {
    let parts: Vec<&str> = ptr.split('/').collect();
    parts.get(1) == Some(&"timing")
        || (parts.len() >= 5
            && parts[1] == "cells"
            && parts[3] == "aggregate"
            && SANE_FIELDS.contains(&parts[4]))
}

/// The pointers where `a` and `b` differ.
fn diff_paths(a: &Value, b: &Value, here: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let p = format!("{here}/{k}");
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => diff_paths(u, v, &p, out),
                    _ => out.push(p),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                diff_paths(u, v, &format!("{here}/{i}"), out);
            }
        }
        _ if a != b => out.push(here.to_string()),
        _ => {}
    }
}

/// Sane when the bytes parse and every change is one only a re-run could tell; else strict.
fn expectation(before: &Value, after: &[u8]) -> Expect {
    let Ok(after) = serde_json::from_slice::<Value>(after) else { return Expect::Strict };
    let mut diffs = Vec::new();
    diff_paths(before, &after, "", &mut diffs);
    if !diffs.is_empty() && diffs.iter().all(|p| sane_path(p)) {
        Expect::Sane
    } else {
        Expect::Strict
    }
}

/// Values that find bugs in a shard file: bounds, signs, types, text.
fn extreme(rng: &mut StdRng) -> Value {
    choose(
        rng,
        &[
            json!(0),
            json!(1),
            json!(-1),
            json!(40),
            json!(41),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(9_007_199_254_740_993u64),
            json!(1e300),
            json!(-0.5),
            json!(""),
            json!("banana"),
            json!("0..40"),
            json!("\u{1b}[2J"),
            json!("x".repeat(5000)),
            json!(true),
            json!(false),
            Value::Null,
            json!([]),
            json!({}),
            json!([0, 40]),
            json!([[0, 40]]),
        ],
    )
}

fn json_paths(v: &Value, here: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{here}/{k}");
                out.push(p.clone());
                json_paths(x, &p, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let p = format!("{here}/{i}");
                out.push(p.clone());
                json_paths(x, &p, out);
            }
        }
        _ => {}
    }
}

/// One edit of a file's tree at a random place; says what it did.
fn json_edit(root: &mut Value, rng: &mut StdRng) -> Option<String> {
    let mut all = Vec::new();
    json_paths(root, "", &mut all);
    let path = all.choose(rng)?.clone();
    let (parent, last) = path.rsplit_once('/')?;
    match rng.gen_range(0..8) {
        0 => match root.pointer_mut(parent)? {
            Value::Object(m) => m.remove(last).map(|_| format!("{path} removed")),
            Value::Array(a) => {
                let i: usize = last.parse().ok()?;
                (i < a.len()).then(|| a.remove(i)).map(|_| format!("{path} removed"))
            }
            _ => None,
        },
        1 => {
            let names = ["extra", "runs", "seeds", "covered", "cells", "passed", "applicable"];
            let k = choose(rng, &names);
            let v = extreme(rng);
            let m = root.pointer_mut(parent)?.as_object_mut()?;
            m.insert(k.to_string(), v.clone());
            Some(format!("{parent}/{k} = {v:.40}"))
        }
        2 => {
            let a = root.pointer_mut(&path)?.as_array_mut()?;
            match rng.gen_range(0..3) {
                0 => a.clear(),
                1 => a.reverse(),
                _ => {
                    let x = a.first()?.clone();
                    a.extend(std::iter::repeat_n(x, rng.gen_range(1..4)));
                }
            }
            Some(format!("{path}: array emptied, reversed or grown"))
        }
        3 | 4 => {
            let v = root.pointer_mut(&path)?;
            let n = v.as_u64()?;
            *v = json!(choose(rng, &[n + 1, n.saturating_sub(1), n.saturating_mul(1000), 0]));
            Some(format!("{path}: {n} → {v}"))
        }
        _ => {
            let new = extreme(rng);
            let shown = format!("{new:.40}");
            *root.pointer_mut(&path)? = new;
            Some(format!("{path} = {shown}"))
        }
    }
}

/// One edit of a file's raw bytes.
fn raw_edit(bytes: &mut Vec<u8>, rng: &mut StdRng) -> String {
    let at = rng.gen_range(0..=bytes.len());
    if rng.gen_bool(0.5) {
        bytes.truncate(at);
        format!("truncated at byte {at}")
    } else {
        let b = choose(rng, &[b'[', b']', b'"', b',', b'}', b'\n', b'0', b'-', b'9', 0xff, 0x00]);
        bytes.insert(at, b);
        format!("byte {b:#04x} inserted at {at}")
    }
}

fn random(h: &Honest, rng: &mut StdRng) -> Mutant {
    let mut d = Draft::new(h);
    let f = rng.gen_range(0..d.files.len());
    let before = d.files[f].1.clone();
    let what = if rng.gen_ratio(1, 8) {
        let mut bytes = pretty(&before);
        let what = raw_edit(&mut bytes, rng);
        d.raw[f] = Some(bytes);
        what
    } else {
        let edits: Vec<String> =
            (0..rng.gen_range(1..=3)).filter_map(|_| json_edit(&mut d.files[f].1, rng)).collect();
        edits.join("; ")
    };
    let after = d.raw[f].clone().unwrap_or_else(|| pretty(&d.files[f].1));
    let expect = expectation(&before, &after);
    let what = format!("{}: {what}", d.name(f));
    d.into_mutant("random", expect, what)
}

/// Mutant `i` of campaign `seed`: structured class `i/2 mod classes` when `i` is even (a random
/// edit when that class finds nothing to forge), else a random edit.
pub fn mutant(h: &Honest, seed: u64, i: u64) -> Mutant {
    let mut rng = StdRng::seed_from_u64(seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    if i.is_multiple_of(2) {
        let (name, expect, forge) = CLASSES[(i / 2) as usize % CLASSES.len()];
        let mut d = Draft::new(h);
        if let Some(what) = forge(&mut d, &mut rng) {
            return d.into_mutant(name, expect, what);
        }
    }
    random(h, &mut rng)
}
