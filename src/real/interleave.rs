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
    Interleaving { round, lines, unreadable }
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
    }
}
