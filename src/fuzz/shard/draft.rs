//! Structured mutants' workbench: the honest files being forged and merge's arguments
//! (`Draft`), the signature every forgery has (`Forge`), and the small helpers they share.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde_json::Value;

use super::honest::{Honest, pretty};
use super::{Entry, Expect, Mutant};

/// The honest files being forged, and merge's arguments.
pub(super) struct Draft {
    pub(super) files: Vec<(String, Value)>,
    /// A file's raw bytes instead of its value.
    pub(super) raw: Vec<Option<Vec<u8>>>,
    /// Text replaced in a file once serialised: (file, from, to) (JSON cannot say NaN).
    pub(super) replace: Vec<(usize, String, String)>,
    pub(super) given: Vec<usize>,
    pub(super) fifo: bool,
}

impl Draft {
    pub(super) fn new(h: &Honest) -> Draft {
        Draft {
            files: h.files.clone(),
            raw: vec![None; h.files.len()],
            replace: Vec::new(),
            given: (0..h.files.len()).collect(),
            fifo: false,
        }
    }

    pub(super) fn name(&self, f: usize) -> &str {
        &self.files[f].0
    }

    pub(super) fn cell(&mut self, f: usize, c: usize) -> &mut Value {
        &mut self.files[f].1["cells"][c]
    }

    pub(super) fn agg(&mut self, f: usize, c: usize) -> &mut Value {
        &mut self.files[f].1["cells"][c]["aggregate"]
    }

    /// (file, cell) pairs satisfying `pred`.
    pub(super) fn cells_where(&self, pred: impl Fn(&Value) -> bool) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (f, (_, v)) in self.files.iter().enumerate() {
            for (c, cell) in v["cells"].as_array().into_iter().flatten().enumerate() {
                if pred(cell) {
                    out.push((f, c));
                }
            }
        }
        out
    }

    /// A cell some file covers seeds of (so it ran them), satisfying `pred`.
    pub(super) fn pick(
        &self,
        rng: &mut StdRng,
        pred: impl Fn(&Value) -> bool,
    ) -> Option<(usize, usize)> {
        let covering = |c: &Value| c["covered"].as_array().is_some_and(|a| !a.is_empty());
        self.cells_where(|c| covering(c) && pred(c)).choose(rng).copied()
    }

    pub(super) fn into_mutant(self, class: &'static str, expect: Expect, what: String) -> Mutant {
        let mut files: Vec<Entry> = Vec::new();
        for (i, ((name, v), raw)) in self.files.into_iter().zip(self.raw).enumerate() {
            let mut bytes = raw.unwrap_or_else(|| pretty(&v));
            for (_, from, to) in self.replace.iter().filter(|(f, _, _)| *f == i) {
                let text = String::from_utf8_lossy(&bytes).replacen(from.as_str(), to, 1);
                bytes = text.into_bytes();
            }
            files.push(Entry::File { name, bytes });
        }
        if self.fifo {
            files.push(Entry::Fifo { name: "fifo".into() });
        }
        Mutant { class, expect, files, given: self.given, what }
    }
}

/// A structured forgery: edits the draft, says what it did (None: nothing to forge here).
pub(super) type Forge = fn(&mut Draft, &mut StdRng) -> Option<String>;

pub(super) fn covered_of(cell: &Value) -> Vec<[u64; 2]> {
    serde_json::from_value(cell["covered"].clone()).unwrap_or_default()
}

pub(super) fn has_failures(c: &Value) -> bool {
    c["aggregate"]["failed_seeds"].as_u64().is_some_and(|n| n > 0)
        || c["aggregate"]["violations"].as_object().is_some_and(|v| !v.is_empty())
}

pub(super) fn is_na(c: &Value) -> bool {
    c["aggregate"]["applicable"] == false
}

pub(super) fn choose<T: Clone>(rng: &mut StdRng, xs: &[T]) -> T {
    xs.choose(rng).expect("a non-empty choice").clone()
}

/// A key of the object at `ptr` (None if it has none).
pub(super) fn key_of(v: &Value, ptr: &str, rng: &mut StdRng) -> Option<String> {
    let keys: Vec<String> = v.pointer(ptr)?.as_object()?.keys().cloned().collect();
    keys.choose(rng).cloned()
}

pub(super) fn rename_key(obj: &mut Value, from: &str, to: &str) {
    if let Some(m) = obj.as_object_mut()
        && let Some(x) = m.remove(from)
    {
        m.insert(to.to_string(), x);
    }
}
