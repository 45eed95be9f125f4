//! Structured mutations of sim and model files, and the judge of what the loaders and the
//! world make of them: the fuzz test (`tests/it/fuzz.rs`) and `examples/fuzz.rs` (a report of
//! outcome classes over many mutants) share it. Pure: it runs the tool through [`crate::run`].
//!
//! A mutant is a shipped file with one to three edits drawn from a seeded RNG: a value
//! replaced by an extreme or a value of another type, a key removed or added, an array
//! emptied, reversed or grown, a table duplicated; or, one time in eight, an edit of the raw
//! text (truncated, a byte inserted, a line doubled).
//!
//! [`shard`] does the same for shard files and `merge`: forged and randomly edited shards,
//! judged against an honest merge.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use rand::seq::SliceRandom;
use toml::{Table, Value};

use crate::input::InputError;
use crate::model::Model;
use crate::run::{self, RunOptions};
use crate::scenario::Sim;

pub mod shard;

/// A value of the same type as `v`, at an edge (three times in four), else of any type.
fn edge_like(v: &Value, rng: &mut impl Rng) -> Value {
    if rng.gen_ratio(1, 4) {
        return extreme(rng);
    }
    let ints = [0, 1, -1, 2, 255, 256, 1_000, 1_001, 10_000, 10_001, 100_000, i64::MAX];
    let floats = [0.0, 0.0005, 0.001, -0.001, 0.25, 1e3, 86_400_000.0, 2.6e9, 1e18, f64::NAN];
    match v {
        Value::Integer(_) => Value::Integer(*ints.choose(rng).expect("non-empty")),
        Value::Float(_) => Value::Float(*floats.choose(rng).expect("non-empty")),
        Value::Boolean(b) => Value::Boolean(!b),
        Value::String(s) => Value::String(match rng.gen_range(0..6) {
            0 => String::new(),
            1 => s.repeat(rng.gen_range(2..50)),
            2 => format!("{s}\u{7}\n"),
            3 => s.chars().rev().collect(),
            4 => s.to_uppercase(),
            _ => format!("{s}-x"),
        }),
        Value::Array(a) => Value::Array(a.iter().map(|x| edge_like(x, rng)).collect()),
        _ => extreme(rng),
    }
}

/// Values that find bugs: bounds, signs, sizes, types.
fn extreme(rng: &mut impl Rng) -> Value {
    let ints = [0, 1, -1, 2, 255, 256, 65_535, 65_536, 1_000, 1_001, 10_000, i64::MAX, i64::MIN];
    let floats = [0.0, 0.0005, 0.001, -0.001, 1e9, 2.6e9, 1e300, -1e300, f64::NAN, f64::INFINITY];
    let strings = [
        String::new(),
        "x".repeat(5000),
        "a\nb\u{1b}[31m".into(),
        "Content-Type".into(),
        "é🦀".into(),
        " ".into(),
        "-".into(),
        "0..0".into(),
        "9..3".into(),
    ];
    match rng.gen_range(0..6) {
        0 => Value::Integer(*ints.choose(rng).expect("non-empty")),
        1 => Value::Float(*floats.choose(rng).expect("non-empty")),
        2 => Value::String(strings.choose(rng).expect("non-empty").clone()),
        3 => Value::Boolean(rng.r#gen()),
        4 => Value::Array(vec![Value::Integer(rng.gen_range(-5..1000)); rng.gen_range(0..4)]),
        _ => Value::Table(Table::new()),
    }
}

/// Every path to a value in the tree (keys and array indices).
#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

fn paths(v: &Value, here: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    match v {
        Value::Table(t) => {
            for (k, x) in t {
                here.push(Step::Key(k.clone()));
                out.push(here.clone());
                paths(x, here, out);
                here.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                here.push(Step::Index(i));
                out.push(here.clone());
                paths(x, here, out);
                here.pop();
            }
        }
        _ => {}
    }
}

fn get_mut<'a>(root: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    let mut v = root;
    for s in path {
        v = match (s, v) {
            (Step::Key(k), Value::Table(t)) => t.get_mut(k)?,
            (Step::Index(i), Value::Array(a)) => a.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(v)
}

/// One edit of the tree.
fn edit(root: &mut Value, rng: &mut impl Rng) {
    let mut all = Vec::new();
    paths(root, &mut Vec::new(), &mut all);
    let Some(path) = all.choose(rng).cloned() else { return };
    let (parent_path, last) = path.split_at(path.len() - 1);
    match rng.gen_range(0..10) {
        // Remove the entry.
        0 => {
            if let Some(parent) = get_mut(root, parent_path) {
                match (parent, &last[0]) {
                    (Value::Table(t), Step::Key(k)) => {
                        t.remove(k);
                    }
                    (Value::Array(a), Step::Index(i)) if *i < a.len() => {
                        a.remove(*i);
                    }
                    _ => {}
                }
            }
        }
        // Add an unknown or misplaced key next to it.
        1 => {
            if let Some(Value::Table(t)) = get_mut(root, parent_path) {
                let names = ["extra", "id", "key", "copies", "seeds", "program", "after", "rate"];
                t.insert(names.choose(rng).expect("non-empty").to_string(), extreme(rng));
            }
        }
        // Arrays: empty, reverse, grow.
        2 => {
            if let Some(Value::Array(a)) = get_mut(root, &path) {
                match rng.gen_range(0..3) {
                    0 => a.clear(),
                    1 => a.reverse(),
                    _ => {
                        if let Some(x) = a.first().cloned() {
                            a.extend(std::iter::repeat_n(x, rng.gen_range(1..40)));
                        }
                    }
                }
            } else if let Some(v) = get_mut(root, &path) {
                *v = extreme(rng);
            }
        }
        // Duplicate an element of an array of tables (a request, an inject, a partition).
        3 => {
            if let Some(Value::Array(a)) = get_mut(root, parent_path)
                && let Step::Index(i) = last[0]
                && let Some(x) = a.get(i).cloned()
            {
                for _ in 0..rng.gen_range(1..4) {
                    a.push(x.clone());
                }
            }
        }
        // Scale a number a lot, or flip its sign.
        4 | 5 => {
            if let Some(v) = get_mut(root, &path) {
                let old = v.clone();
                *v = match old {
                    Value::Integer(n) => Value::Integer(match rng.gen_range(0..3) {
                        0 => n.saturating_mul(1000),
                        1 => n.saturating_neg(),
                        _ => n.saturating_add(1),
                    }),
                    Value::Float(x) => Value::Float(match rng.gen_range(0..3) {
                        0 => x * 1e6,
                        1 => -x,
                        _ => x / 1e4,
                    }),
                    other => edge_like(&other, rng),
                };
            }
        }
        // Replace the value with an edge value, mostly of its own type.
        _ => {
            if let Some(v) = get_mut(root, &path) {
                *v = edge_like(&v.clone(), rng);
            }
        }
    }
}

/// A mutant of `src` (a sim or model file's text).
pub fn mutate(src: &str, rng: &mut impl Rng) -> String {
    if rng.gen_ratio(1, 8) {
        let mut bytes = src.as_bytes().to_vec();
        match rng.gen_range(0..3) {
            0 => bytes.truncate(rng.gen_range(0..=bytes.len())),
            1 => {
                let at = rng.gen_range(0..=bytes.len());
                let b = *[b'[', b']', b'"', b'=', b'\n', b'\\', b'#', 0xff, 0x00, b'{']
                    .choose(rng)
                    .expect("non-empty");
                bytes.insert(at, b);
            }
            _ => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let lines: Vec<&str> = text.lines().collect();
                if !lines.is_empty() {
                    let i = rng.gen_range(0..lines.len());
                    let mut out: Vec<&str> = lines.clone();
                    out.insert(i, lines[i]);
                    bytes = out.join("\n").into_bytes();
                }
            }
        }
        return String::from_utf8_lossy(&bytes).into_owned();
    }
    let Ok(table) = src.parse::<Table>() else { return src.to_string() };
    let mut root = Value::Table(table);
    for _ in 0..rng.gen_range(1..=3) {
        edit(&mut root, rng);
    }
    match root {
        Value::Table(t) => toml::to_string(&t).unwrap_or_default(),
        _ => String::new(),
    }
}

/// What became of one mutant.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// Refused at load with file:line:col, and what was expected.
    Refused {
        /// The refusal's class: its message with quoted values and numbers blanked.
        class: String,
    },
    /// Refused without a location (a defect for a file's content).
    RefusedUnlocated {
        /// The error message.
        msg: String,
    },
    /// Loaded and ran to a report: expectations held or not, violations or not, bounds hit.
    Ran {
        /// The sim's expectations held and no bound was hit.
        passed: bool,
        /// The oracle found a violation that is not policy-permitted.
        violations: bool,
        /// The run hit a bound (time, steps).
        bounded: bool,
    },
    /// Loaded, but a run could not be carried out (the harness's own database failed).
    RunError {
        /// The error message.
        msg: String,
    },
    /// A panic: always a defect.
    Panicked {
        /// The panic's message.
        msg: String,
    },
    /// A run took longer than the wall bound: a defect.
    Slow {
        /// How long the run took (wall-clock ms).
        millis: u128,
    },
}

/// The class of a located refusal: its message with quoted values and numbers blanked.
fn class_of(msg: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    for c in msg.chars() {
        match c {
            '`' => {
                quoted = !quoted;
                if quoted {
                    out.push_str("`…`");
                }
            }
            _ if quoted => {}
            d if d.is_ascii_digit() => {
                if !out.ends_with('N') {
                    out.push('N');
                }
            }
            c => out.push(c),
        }
    }
    out.chars().take(90).collect()
}

fn refusal(e: InputError) -> Outcome {
    match e {
        InputError::At { msg, .. } => Outcome::Refused { class: class_of(&msg) },
        InputError::File { msg, .. } => Outcome::RefusedUnlocated { msg },
    }
}

/// Load a mutant (as a sim when `is_sim`, else as a model) and run it on seed 0 against its
/// partner (a model for a sim, a sim for a model), under `catch_unwind` and a wall bound.
pub fn judge(
    text: &str,
    is_sim: bool,
    partner_sim: &Arc<Sim>,
    partner_model: &Arc<Model>,
    wall: Duration,
) -> Outcome {
    let result = std::panic::catch_unwind(|| {
        let (sim, model) = if is_sim {
            match Sim::parse(Path::new("mutant.toml"), text) {
                Ok(s) => (Arc::new(s), partner_model.clone()),
                Err(e) => return refusal(e),
            }
        } else {
            match Model::parse(Path::new("mutant.toml"), text) {
                Ok(m) => (partner_sim.clone(), Arc::new(m)),
                Err(e) => return refusal(e),
            }
        };
        let started = Instant::now();
        let out = run::run(&sim, &model, 0, RunOptions::default());
        let took = started.elapsed();
        if took > wall {
            return Outcome::Slow { millis: took.as_millis() };
        }
        match out {
            Ok(o) => Outcome::Ran {
                passed: o.report.passed(),
                violations: o.report.violations.iter().any(|v| !v.permitted),
                bounded: !o.report.bounds_hit.is_empty(),
            },
            Err(e) => Outcome::RunError { msg: e.to_string() },
        }
    });
    result.unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Outcome::Panicked { msg }
    })
}

impl Outcome {
    /// A panic, a slow run, a refusal without a location or a run error: never acceptable.
    pub fn is_defect(&self) -> bool {
        matches!(
            self,
            Outcome::Panicked { .. }
                | Outcome::Slow { .. }
                | Outcome::RefusedUnlocated { .. }
                | Outcome::RunError { .. }
        )
    }
}

/// Every shipped sim and model file: (text, is it a sim).
pub fn shipped_files() -> std::io::Result<Vec<(String, bool)>> {
    let root = crate::catalog::root();
    let sims = crate::catalog::files_under(&root.join("sims")).into_iter().map(|p| (p, true));
    let models = crate::catalog::all_model_paths().into_iter().map(|p| (p, false));
    sims.chain(models).map(|(p, is_sim)| Ok((std::fs::read_to_string(p)?, is_sim))).collect()
}

/// A sim and a model a mutant of the other kind runs against.
pub type Partner = (Arc<Sim>, Arc<Model>);

/// The partners mutants run against, in turn: a model for sim mutants, a sim for model mutants.
pub fn partners() -> Result<Vec<Partner>, InputError> {
    let pairs = [
        ("article/01-same-key-same-content", "transactional"),
        ("faults/crash-between-steps", "check-first"),
        ("dependencies/payment-provider", "lease"),
        ("dependencies/cache-faults", "ttl-cache-set-nx"),
    ];
    pairs.iter().map(|(s, m)| Ok((crate::catalog::sim(s)?, crate::catalog::model(m)?))).collect()
}

/// Mutants `0..n` of `files` (mutant `i` mutates file `i mod files`, with its own RNG, against
/// partner `i / files mod partners`), judged on `threads` threads: the same mutants and
/// outcomes whatever the thread count. Each outcome with the mutant's text, in mutant order.
pub fn campaign(
    files: &[(String, bool)],
    partners: &[Partner],
    n: u64,
    threads: u64,
    wall: Duration,
) -> Vec<(u64, Outcome, String)> {
    use rand::SeedableRng;
    let threads = threads.max(1);
    let mut out: Vec<(u64, Outcome, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut out = Vec::new();
                    for i in (t..n).step_by(threads as usize) {
                        let mut rng =
                            rand::rngs::StdRng::seed_from_u64(2026 ^ i.wrapping_mul(0x9e37_79b9));
                        let (text, is_sim) = &files[(i as usize) % files.len()];
                        let mutant = mutate(text, &mut rng);
                        let (ps, pm) = &partners[(i as usize / files.len()) % partners.len()];
                        out.push((i, judge(&mutant, *is_sim, ps, pm, wall), mutant));
                    }
                    out
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("the judge catches panics")).collect()
    });
    out.sort_by_key(|(i, _, _)| *i);
    out
}
