//! Campaigns: mutants `0..n` of a seed judged on threads (`campaign`, `Judged`), counted per
//! class and judgement (`tally`), and a judged mutant saved for a human to replay (`save`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::Mutant;
use super::edit::mutant;
use super::honest::{Honest, merge_args};
use super::judge::{Judgement, judge, write_mutant};

/// One mutant and its judgement.
#[derive(Debug, Clone)]
pub struct Judged {
    /// The mutant's index in its campaign.
    pub index: u64,
    /// The mutant.
    pub mutant: Mutant,
    /// What merge made of it.
    pub judgement: Judgement,
    /// How long its merges took (wall-clock ms).
    pub millis: u128,
}

impl Judged {
    /// The defect, if any ([`Judgement::defect`] for the mutant's expectation).
    pub fn defect(&self) -> Option<&'static str> {
        self.judgement.defect(self.mutant.expect)
    }
}

/// Mutants `0..n` of campaign `seed`, judged with `bin` on `threads` threads, each in its own
/// folder under `work` (removed once judged): the same mutants and judgements whatever the
/// thread count, in mutant order.
pub fn campaign(
    bin: &Path,
    h: &Honest,
    seed: u64,
    n: u64,
    threads: u64,
    work: &Path,
    wall: Duration,
) -> Vec<Judged> {
    let threads = threads.max(1);
    let mut out: Vec<Judged> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut out = Vec::new();
                    for index in (t..n).step_by(threads as usize) {
                        let mutant = mutant(h, seed, index);
                        let dir = work.join(format!("mutant-{index}"));
                        let started = Instant::now();
                        let judgement = judge(bin, h, &mutant, &dir, wall);
                        let millis = started.elapsed().as_millis();
                        let _ = std::fs::remove_dir_all(&dir);
                        out.push(Judged { index, mutant, judgement, millis });
                    }
                    out
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("a judging thread")).collect()
    });
    out.sort_by_key(|j| j.index);
    out
}

/// Per (class, judgement kind, defect): how many mutants, and the first one's index.
pub fn tally(
    results: &[Judged],
) -> BTreeMap<(&'static str, &'static str, &'static str), (u64, u64)> {
    let mut out: BTreeMap<_, (u64, u64)> = BTreeMap::new();
    for j in results {
        let key = (j.mutant.class, j.judgement.kind(), j.defect().unwrap_or(""));
        let e = out.entry(key).or_insert((0, j.index));
        e.0 += 1;
    }
    out
}

/// Save a judged mutant for a human: its folder under `dir` with a `README` saying its class,
/// what was done, the judgement and the command that merges it again. The folder's path.
pub fn save(j: &Judged, dir: &Path) -> std::io::Result<PathBuf> {
    let d = dir.join(format!("mutant-{}", j.index));
    let paths = write_mutant(&j.mutant, &d)?;
    let given: Vec<PathBuf> = j.mutant.given.iter().map(|&i| paths[i].clone()).collect();
    let args = merge_args(&given, None, false).join(" ");
    let readme = format!(
        "class: {} ({:?})\nwhat: {}\njudgement: {:?}\ndefect: {}\nreplay (from the repository): idemsim {args}\n",
        j.mutant.class,
        j.mutant.expect,
        crate::text::printable(&j.mutant.what),
        j.judgement,
        j.defect().unwrap_or("none"),
    );
    std::fs::write(d.join("README"), readme)?;
    Ok(d)
}
