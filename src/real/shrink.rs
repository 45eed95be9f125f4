//! Shrinking a controlled round's schedule (`real --controlled --shrink FILE`): the fewest
//! events that must be forced for the round's violation to happen, every other decision left
//! to [`super::conduct::default_choice`] (the flow that moved last runs on). What remains are the
//! preemptions the race needs: for a check-first double click, "send the second copy while
//! the first waits at its await".
//!
//! Delta debugging (Zeller and Hildebrandt, "Simplifying and Isolating Failure-Inducing
//! Input", TSE 2002), complements only: remove a chunk of the forced events, keep the
//! candidate when a real round played with it still shows the violation, and halve the
//! chunks when none can go. Every candidate is one real round; the rounds are bounded.

use std::sync::Arc;

use serde::Serialize;

use super::conduct::Order;
use super::{RealError, RealOptions, Target, round};
use crate::model::Model;
use crate::scenario::Sim;

/// The most candidate rounds a shrink plays (two confirming plays come after).
pub const MAX_ROUNDS: u32 = 400;

/// A shrunk schedule.
#[derive(Debug, Clone, Serialize)]
pub struct Shrunk {
    /// The round whose schedule was shrunk.
    pub round: u64,
    /// The violation kept.
    pub violation: String,
    /// The events that must be forced, in order.
    pub events: Vec<String>,
    /// How many events the round's own schedule had.
    pub from: usize,
    /// Real rounds played to shrink it.
    pub rounds: u32,
    /// The shrink stopped early (the schedule is smaller, maybe not minimal): at
    /// [`MAX_ROUNDS`], on an interrupt, or on a round the target could not play.
    pub bound_hit: bool,
    /// Why it stopped early, when not at its bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// Of two more plays of the shrunk schedule, how many showed the violation again.
    pub confirmed: u32,
}

/// Shrink round `r`'s `schedule`, keeping `violation`.
pub fn shrink(
    (sim, model, target): (&Arc<Sim>, &Arc<Model>, &Target),
    opts: &RealOptions,
    r: u64,
    schedule: &[String],
    violation: &str,
) -> Result<Shrunk, RealError> {
    let mut rounds = 0u32;
    let mut stopped = None;
    let mut fails = |events: &[String]| -> Result<Option<bool>, RealError> {
        if rounds >= MAX_ROUNDS || stopped.is_some() {
            return Ok(None);
        }
        if crate::sweep::INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed) {
            stopped = Some("interrupted".to_string());
            return Ok(None);
        }
        rounds += 1;
        match violates(sim, model, target, opts, r, events, violation) {
            Ok(v) => Ok(Some(v)),
            Err(e) => {
                stopped = Some(e.0);
                Ok(None)
            }
        }
    };
    let mut cur = schedule.to_vec();
    let mut bound_hit = false;
    // Serial, nothing forced: a violation that needs no race (a lost reply's retry) stops here.
    match fails(&[])? {
        Some(true) => cur.clear(),
        Some(false) => {}
        None => bound_hit = true,
    }
    if !bound_hit {
        bound_hit = ddmin(&mut cur, &mut fails)?;
    }
    // (Nothing forced was tried first: a one-event schedule is as small as it gets.)
    let mut confirmed = 0;
    for _ in 0..2 {
        let interrupted = crate::sweep::INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed);
        if stopped.is_none() && !interrupted {
            let again = violates(sim, model, target, opts, r, &cur, violation);
            confirmed += u32::from(again.unwrap_or(false));
        }
    }
    Ok(Shrunk {
        round: r,
        violation: violation.to_string(),
        events: cur,
        from: schedule.len(),
        rounds,
        bound_hit,
        stopped,
        confirmed,
    })
}

/// Delta debugging over `cur`, complements only: keep removing a chunk while `fails` says the
/// rest still fails, halving the chunks when none can go. True when `fails` hit its bound.
fn ddmin<F>(cur: &mut Vec<String>, fails: &mut F) -> Result<bool, RealError>
where
    F: FnMut(&[String]) -> Result<Option<bool>, RealError>,
{
    let mut bound_hit = false;
    let mut n = 2usize;
    while cur.len() >= 2 && !bound_hit {
        let chunk = cur.len().div_ceil(n);
        let mut kept = None;
        for i in 0..n {
            let cand: Vec<String> = cur
                .iter()
                .enumerate()
                .filter(|(k, _)| k / chunk != i)
                .map(|(_, e)| e.clone())
                .collect();
            if cand.len() == cur.len() {
                continue;
            }
            match fails(&cand)? {
                Some(true) => {
                    kept = Some(cand);
                    break;
                }
                Some(false) => {}
                None => {
                    bound_hit = true;
                    break;
                }
            }
        }
        if let Some(cand) = kept {
            *cur = cand;
            n = (n - 1).max(2);
        } else if !bound_hit {
            if n >= cur.len() {
                break;
            }
            n = (n * 2).min(cur.len());
        }
    }
    Ok(bound_hit)
}

/// Whether round `r` played with `events` forced shows `violation`.
fn violates(
    sim: &Arc<Sim>,
    model: &Arc<Model>,
    target: &Target,
    opts: &RealOptions,
    r: u64,
    events: &[String],
    violation: &str,
) -> Result<bool, RealError> {
    let mut o = opts.round.clone();
    o.keep = false;
    if let Some(c) = o.control.as_mut() {
        c.order = Order::Schedule(Arc::new(events.to_vec()));
    }
    let res = round::play(sim, model, target, r, &o)
        .map_err(|e| RealError(format!("round {r} (shrinking): {}", e.0)))?;
    let report = super::judged(sim, model, r, res.observation, res.control.as_ref());
    Ok(report.violation_names().iter().any(|v| v.name() == violation))
}

/// Read a schedule file (`--schedule`): one event per line (`send A`, `resume A at POINT`,
/// `expire A`), blank lines and `#` comments skipped; at most `input::MAX_FILE_BYTES`.
pub fn read_schedule(path: &std::path::Path) -> Result<Vec<String>, crate::input::InputError> {
    if path.is_dir() {
        let why = "is a folder; expected a schedule file (one event per line)";
        return Err(crate::input::InputError::file(path, why));
    }
    let text = crate::input::read_file(path, "schedule")?;
    let mut out = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let event = line.trim();
        let at = offset + line.len() - line.trim_start().len();
        offset += line.len();
        if event.is_empty() || event.starts_with('#') {
            continue;
        }
        let mut words = event.split(' ');
        let verb = words.next().unwrap_or("");
        let flow = words.next().unwrap_or("");
        let flow_ok = !flow.is_empty() && flow.split('.').all(|p| p.parse::<u32>().is_ok());
        let rest: Vec<&str> = words.collect();
        let ok = flow_ok
            && match verb {
                "send" | "expire" => rest.is_empty(),
                "resume" => rest.len() >= 2 && rest[0] == "at",
                _ => false,
            };
        if !ok {
            return Err(crate::input::InputError::at(
                path,
                &text,
                at,
                "expected an event: `send A`, `resume A at POINT` or `expire A` (A: an \
                 attempt such as 0.1.2), as a controlled round's schedule names them",
            ));
        }
        out.push(event.to_string());
    }
    Ok(out)
}

/// The first event of a schedule whose flow the sim cannot have (request, copy or attempt
/// out of range): such an event is never enabled, and the rest of the schedule never runs.
pub fn unknown_flow(events: &[String], sim: &Sim) -> Option<String> {
    events
        .iter()
        .find(|e| {
            let flow = e.split(' ').nth(1).unwrap_or("");
            let n: Vec<u64> = flow.split('.').filter_map(|p| p.parse().ok()).collect();
            let spec = n.first().and_then(|&q| sim.requests.get(usize::try_from(q).ok()?));
            !matches!((spec, n.as_slice()), (Some(q), [_, c, a])
                if *c < u64::from(q.copies) && (1..=u64::from(q.policy.max_attempts)).contains(a))
        })
        .map(|e| {
            format!(
                "schedule event `{}` names an attempt the sim cannot make (request.copy.attempt: \
                 requests from 0, copies from 0, attempts from 1)",
                crate::text::printable(e)
            )
        })
}

/// The text a schedule file holds: a header comment, then one event per line.
pub fn schedule_text(s: &Shrunk, sim: &str, target: &str) -> String {
    let mut o = format!(
        "# idemsim real {sim} --target {target} --controlled: round {}'s schedule shrunk to the \
         events that must be forced for {} ({} of {}); every other decision runs the flow that \
         moved last\n",
        s.round,
        s.violation,
        s.events.len(),
        s.from
    );
    for e in &s.events {
        o.push_str(e);
        o.push('\n');
    }
    o
}

#[cfg(test)]
mod tests {
    #[test]
    fn delta_debugging_keeps_only_what_the_failure_needs_within_its_bound() {
        let all: Vec<String> = "a b c d e f g h".split(' ').map(String::from).collect();
        let needs = |v: &[String]| v.iter().any(|e| e == "c") && v.iter().any(|e| e == "g");
        let (mut cur, mut tries) = (all.clone(), 0);
        let hit = super::ddmin(&mut cur, &mut |v: &[String]| {
            tries += 1;
            Ok(Some(needs(v)))
        })
        .unwrap();
        assert_eq!((cur, hit), (vec!["c".to_string(), "g".to_string()], false));
        assert!(tries <= 20, "{tries}");
        // A bound of three tries: smaller, flagged.
        let (mut cur, mut left) = (all, 3);
        let hit = super::ddmin(&mut cur, &mut |v: &[String]| {
            if left == 0 {
                return Ok(None);
            }
            left -= 1;
            Ok(Some(needs(v)))
        })
        .unwrap();
        assert!(hit && cur.len() < 8 && needs(&cur), "{cur:?}");
    }

    #[test]
    fn a_schedule_file_names_its_bad_line() {
        let dir = std::env::temp_dir().join(format!("idemsim-sched-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("s.txt");
        std::fs::write(&p, "# a comment\nsend 0.0.1\n\nresume 0.0.1 at step await\nexpire 0.1.1\n")
            .unwrap();
        let got = super::read_schedule(&p).unwrap();
        assert_eq!(got, ["send 0.0.1", "resume 0.0.1 at step await", "expire 0.1.1"]);
        std::fs::write(&p, "send 0.0.1\n  jump 0.0.2\n").unwrap();
        let e = super::read_schedule(&p).unwrap_err().to_string();
        assert!(e.contains("s.txt:2:3: expected an event"), "{e}");
        std::fs::write(&p, "resume 0.x.1 at redis GET\n").unwrap();
        assert!(super::read_schedule(&p).is_err());
        let e = super::read_schedule(&dir).unwrap_err().to_string();
        assert!(e.contains("is a folder; expected a schedule file (one event per line)"), "{e}");
    }
}
