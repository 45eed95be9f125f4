//! `real --controlled --trace`: a controlled round's schedule (what idemsim released, and
//! when) merged with the server's own instrumentation lines (`IDEMSIM_TRACE`, docs/targets.md)
//! on their common clock, so that what the server did between two releases can be read.

use std::io::Read as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The most of a target's trace file read (a round's lines are a few KiB).
const MAX_TRACE_BYTES: u64 = 16 << 20;

/// A round's merged listing.
#[derive(Debug, Clone, Serialize)]
pub struct Interleaving {
    /// The round.
    pub round: u64,
    /// One line per released event or server line, in time order: µs since the round's first
    /// release, who (`idemsim` or `server`), what.
    pub lines: Vec<String>,
    /// Lines of the target's trace file that could not be read (not JSON, no `t_us`).
    pub unreadable: u64,
    /// Why rows were duplicated, read off the server's lines ([`why`]).
    pub why: Vec<String>,
}

#[derive(Deserialize)]
struct ServerLine {
    t_us: f64,
    #[serde(default)]
    process: Option<u64>,
    #[serde(default)]
    attempt: Option<String>,
    #[serde(default)]
    ev: Option<String>,
}

/// Merge `schedule` (released events and their wall-clock µs since the Unix epoch) with the
/// lines of the target's trace file `trace` (absent: only the schedule).
pub fn merge(round: u64, schedule: &[(String, u64)], trace: &Path) -> Interleaving {
    let mut text = String::new();
    if let Ok(f) = std::fs::File::open(trace) {
        let _ = f.take(MAX_TRACE_BYTES).read_to_string(&mut text);
    }
    let mut unreadable = 0;
    let mut steps: Vec<Step> = Vec::new();
    let mut items: Vec<(u64, u8, String)> = schedule
        .iter()
        .map(|(e, t)| (*t, 0, format!("idemsim  {}", crate::text::printable(e))))
        .collect();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<ServerLine>(line) {
            Ok(l) if l.t_us.is_finite() && l.t_us >= 0.0 => {
                let what = format!(
                    "server   {} {} {}",
                    l.process.map_or("-".into(), |p| p.to_string()),
                    crate::text::printable(l.attempt.as_deref().unwrap_or("-")),
                    crate::text::printable(l.ev.as_deref().unwrap_or("?"))
                );
                if let (Some(a), Some(ev)) = (&l.attempt, &l.ev) {
                    steps.push(Step { t: l.t_us as u64, attempt: a.clone(), ev: ev.clone() });
                }
                items.push((l.t_us as u64, 1, what));
            }
            _ => unreadable += 1,
        }
    }
    // Stable: a release and a server line at the same µs keep the release first.
    items.sort_by_key(|(t, who, _)| (*t, *who));
    let origin = schedule.first().map_or(0, |(_, t)| *t);
    let lines = items
        .into_iter()
        .map(|(t, _, what)| {
            let rel = t as i64 - origin as i64;
            format!("{rel:>9}  {what}")
        })
        .collect();
    let why = why(&steps, schedule, origin);
    Interleaving { round, lines, unreadable, why }
}

/// One server line: when, which attempt, what.
struct Step {
    t: u64,
    attempt: String,
    ev: String,
}

/// Why two attempts both inserted, from the server's lines (docs/targets.md's vocabulary:
/// `lookup`, `insert`, `save`): the second looked the key up after the first had and before
/// the first saved it, so both found nothing. The release that let the second in is named.
/// Empty when the lines do not say (no lookups, or no two inserts).
fn why(steps: &[Step], schedule: &[(String, u64)], origin: u64) -> Vec<String> {
    let at = |a: &str, ev: &str| steps.iter().find(|s| s.attempt == a && s.ev == ev).map(|s| s.t);
    let mut inserted: Vec<&str> = Vec::new();
    for s in steps.iter().filter(|s| s.ev == "insert") {
        if !inserted.contains(&s.attempt.as_str()) {
            inserted.push(&s.attempt);
        }
    }
    let rel = |t: u64| t.saturating_sub(origin);
    let mut out = Vec::new();
    for (i, first) in inserted.iter().enumerate() {
        for second in &inserted[i + 1..] {
            let (Some(l1), Some(l2)) = (at(first, "lookup"), at(second, "lookup")) else {
                continue;
            };
            let (early, late, late_lookup) =
                if l1 <= l2 { (first, second, l2) } else { (second, first, l1) };
            let saved = at(early, "save");
            if saved.is_some_and(|t| t <= late_lookup) {
                continue;
            }
            let by =
                schedule.iter().rev().find(|(_, t)| *t <= late_lookup).map(|(e, _)| e.as_str());
            out.push(format!(
                "{late} looked the key up at {} µs, after {early} had ({} µs) and before {early} saved it ({}): both found nothing and both inserted{}",
                rel(late_lookup),
                rel(l1.min(l2)),
                saved.map_or("never".to_string(), |t| format!("{} µs", rel(t))),
                by.map_or(String::new(), |e| format!("; the release before it: `{}`", crate::text::printable(e)))
            ));
        }
    }
    out.truncate(10);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn releases_and_server_lines_are_merged_in_time_order() {
        let dir = std::env::temp_dir().join(format!("idemsim-interleave-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let trace = dir.join("trace.jsonl");
        std::fs::write(
            &trace,
            "{\"t_us\": 1000150, \"process\": 1, \"attempt\": \"0.0.1\", \"ev\": \"read\"}\n\
             not json\n{\"t_us\": 1000400, \"process\": 1, \"attempt\": \"0.1.1\", \"ev\": \"lookup\"}\n",
        )
        .unwrap();
        let schedule =
            [("send 0.0.1".to_string(), 1_000_000), ("send 0.1.1".to_string(), 1_000_300)];
        let m = super::merge(3, &schedule, &trace);
        assert_eq!(m.unreadable, 1);
        let shown: Vec<String> =
            m.lines.iter().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect();
        assert_eq!(
            shown,
            [
                "0 idemsim send 0.0.1",
                "150 server 1 0.0.1 read",
                "300 idemsim send 0.1.1",
                "400 server 1 0.1.1 lookup"
            ]
        );
        assert_eq!(super::merge(3, &schedule, &dir.join("absent")).lines.len(), 2);
        assert!(m.why.is_empty(), "{:?}", m.why);
    }

    #[test]
    fn two_inserts_whose_lookups_overlap_are_explained() {
        let line = |t: u64, a: &str, ev: &str| super::Step { t, attempt: a.into(), ev: ev.into() };
        let schedule = [("send 0.1.1".to_string(), 1000), ("send 0.0.1".to_string(), 1300)];
        // 0.0.1 looks up after 0.1.1 did and before 0.1.1 saves: both insert.
        let steps = [
            line(1100, "0.1.1", "lookup"),
            line(1400, "0.0.1", "lookup"),
            line(1500, "0.0.1", "insert"),
            line(1600, "0.0.1", "save"),
            line(1700, "0.1.1", "insert"),
        ];
        let why = super::why(&steps, &schedule, 1000);
        assert_eq!(
            why,
            ["0.0.1 looked the key up at 400 µs, after 0.1.1 had (100 µs) and before 0.1.1 saved \
              it (never): both found nothing and both inserted; the release before it: `send 0.0.1`"]
        );
        // Had 0.1.1 saved before 0.0.1 looked up, the lines would not explain a race.
        let mut serial = steps;
        serial[4] = line(1200, "0.1.1", "save");
        assert!(super::why(&serial, &schedule, 1000).is_empty());
    }
}
