//! The judge: a mutant's folder written, merged by the binary (text with `--out`, then
//! `--json`) and judged (`Judgement`): refused with a location, merged to a report, or a
//! panic, a hang or a crash.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::honest::{Honest, Merged, merge_args, run_merge};
use super::impossible::impossible;
use super::{DIR, Entry, Expect, Mutant};

/// What became of one mutant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// Exit 2.
    Refused {
        /// The message names a shard file given (or a file in the mutant's folder) or a cell
        /// (`model × sim`).
        located: bool,
        /// The message holds control characters (a forged name printed raw).
        raw_text: bool,
        /// `--out` was written although the merge was refused.
        out_written: bool,
        /// The message's first line.
        msg: String,
    },
    /// Exit 0 or 1: a report.
    Merged {
        /// Text, JSON and exit code equal the honest merge's.
        honest: bool,
        /// The first impossible thing in the report, if any.
        impossible: Option<String>,
        /// The first line that differs from the honest merge's report.
        diff: String,
    },
    /// Exit 101 or a panic message.
    Panicked {
        /// The panic's line.
        msg: String,
    },
    /// Killed at the wall bound.
    Hung {
        /// The bound (ms).
        millis: u128,
    },
    /// Killed by a signal or another exit code.
    Crashed {
        /// What happened.
        msg: String,
    },
}

impl Judgement {
    /// The defect, if the judgement breaks the rule for a mutant that expects `expect`.
    pub fn defect(&self, expect: Expect) -> Option<&'static str> {
        match self {
            Judgement::Refused { out_written: true, .. } => Some("refused after writing --out"),
            Judgement::Refused { located: false, .. } => {
                Some("refused without naming a shard file or a cell")
            }
            Judgement::Refused { raw_text: true, .. } => {
                Some("refused, printing raw control characters")
            }
            Judgement::Refused { .. } => None,
            Judgement::Merged { impossible: Some(_), .. } => Some("merged to an impossible report"),
            Judgement::Merged { honest: false, .. } if expect == Expect::Strict => {
                Some("merged to a report other than the honest merge's")
            }
            Judgement::Merged { .. } => None,
            Judgement::Panicked { .. } => Some("panic"),
            Judgement::Hung { .. } => Some("hang"),
            Judgement::Crashed { .. } => Some("crash"),
        }
    }

    /// The judgement's kind in a few words (for counts).
    pub fn kind(&self) -> &'static str {
        match self {
            Judgement::Refused { .. } => "refused",
            Judgement::Merged { honest: true, .. } => "merged: the honest report",
            Judgement::Merged { impossible: Some(_), .. } => "merged: an impossible report",
            Judgement::Merged { .. } => "merged: another possible report",
            Judgement::Panicked { .. } => "panic",
            Judgement::Hung { .. } => "hang",
            Judgement::Crashed { .. } => "crash",
        }
    }
}

/// Write a mutant's folder (`dir`, emptied first): its files with [`DIR`] replaced, its FIFO.
/// The paths of its entries, in order.
pub fn write_mutant(m: &Mutant, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let shown = dir.display().to_string();
    let mut paths = Vec::new();
    for e in &m.files {
        match e {
            Entry::File { name, bytes } => {
                let p = dir.join(name);
                let text = String::from_utf8_lossy(bytes);
                if text.contains(DIR) {
                    std::fs::write(&p, text.replace(DIR, &shown))?;
                } else {
                    std::fs::write(&p, bytes)?;
                }
                paths.push(p);
            }
            Entry::Fifo { name } => {
                let p = dir.join(name);
                let made = Command::new("mkfifo").arg(&p).status()?;
                if !made.success() {
                    return Err(std::io::Error::other("mkfifo failed"));
                }
                paths.push(p);
            }
        }
    }
    Ok(paths)
}

/// Merge mutant `m` with `bin` in folder `dir` (text with `--out`, then `--json`) and judge it.
pub fn judge(bin: &Path, h: &Honest, m: &Mutant, dir: &Path, wall: Duration) -> Judgement {
    let paths = write_mutant(m, dir).expect("the mutant's folder is writable");
    let given: Vec<PathBuf> = m.given.iter().map(|&i| paths[i].clone()).collect();
    let out = dir.join("merged-out.json");
    let text = run_merge(bin, &merge_args(&given, Some(&out), false), dir, "text", wall);
    if let Some(j) = abnormal(&text, wall) {
        return j;
    }
    if text.code == Some(2) {
        // A cell is named `model × sim`; a file by its path (in the mutant's folder).
        let located =
            text.stderr.contains(" × ") || text.stderr.contains(&dir.display().to_string());
        return Judgement::Refused {
            located,
            raw_text: text.stderr.chars().any(|c| c.is_control() && c != '\n'),
            out_written: out.exists(),
            msg: text.stderr.lines().next().unwrap_or_default().chars().take(300).collect(),
        };
    }
    let json = run_merge(bin, &merge_args(&given, None, true), dir, "json", wall);
    if let Some(j) = abnormal(&json, wall) {
        return j;
    }
    let honest = text == h.text && json == h.json;
    let diff = first_diff(&h.text.stdout, &text.stdout)
        .or_else(|| first_diff(&h.json.stdout, &json.stdout))
        .unwrap_or_else(|| format!("exit {:?} (honest: {:?})", text.code, h.text.code));
    let impossible = if json.code != text.code {
        Some(format!("exit {:?} with --json, {:?} without", json.code, text.code))
    } else {
        impossible(h, &text.stdout, &json.stdout, text.code.unwrap_or(-1))
    };
    Judgement::Merged { honest, impossible, diff: if honest { String::new() } else { diff } }
}

/// A hang, a panic or a crash; None for exit 0, 1 or 2.
fn abnormal(r: &Merged, wall: Duration) -> Option<Judgement> {
    if r.timed_out {
        return Some(Judgement::Hung { millis: wall.as_millis() });
    }
    if r.code == Some(101) || r.stderr.contains("panicked at") {
        let line = r.stderr.lines().find(|l| l.contains("panicked")).unwrap_or_default();
        let next = r.stderr.lines().skip_while(|l| !l.contains("panicked")).nth(1);
        return Some(Judgement::Panicked { msg: format!("{line} {}", next.unwrap_or_default()) });
    }
    match r.code {
        Some(0..=2) => None,
        code => Some(Judgement::Crashed {
            msg: format!("exit {code:?}: {}", r.stderr.lines().last().unwrap_or_default()),
        }),
    }
}

fn first_diff(want: &str, got: &str) -> Option<String> {
    if want == got {
        return None;
    }
    let (mut w, mut g) = (want.lines(), got.lines());
    loop {
        match (w.next(), g.next()) {
            (Some(a), Some(b)) if a == b => continue,
            (a, b) => {
                let cut =
                    |s: Option<&str>| s.unwrap_or("<end>").chars().take(160).collect::<String>();
                return Some(format!("honest {:?}, got {:?}", cut(a), cut(b)));
            }
        }
    }
}
