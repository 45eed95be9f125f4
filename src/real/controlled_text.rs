//! The text of a controlled run's report (`real --controlled`, docs/controlled.md): the
//! decisions, what escaped control, the replays and where one departed, the command that
//! replays the first violating round, `--shrink`'s result and `--trace`'s listing.

use std::fmt::Write as _;

use super::RealReport;
use super::cmd::percentile;
use super::target::Target;
use crate::scenario::Sim;

/// `--trace`: a round as it ran, at most 400 lines.
pub fn trace_lines(r: &RealReport) -> String {
    let Some(t) = &r.trace else { return String::new() };
    let mut o = format!(
        "\nround {} as it ran: what idemsim released and the server's own lines (µs from the first release; server: process, attempt, event)\n",
        t.round
    );
    for l in t.lines.iter().take(400) {
        let _ = writeln!(o, "{l}");
    }
    if t.lines.len() > 400 {
        let _ = writeln!(o, "… {} more lines (interleaving.txt with --keep)", t.lines.len() - 400);
    }
    for w in &t.why {
        let _ = writeln!(o, "why: {w}");
    }
    if !t.lines.iter().any(|l| l.contains("  server ")) {
        let _ = writeln!(o, "(the target wrote no trace lines: it does not read IDEMSIM_TRACE)");
    }
    if t.unreadable > 0 {
        let _ = writeln!(o, "({} trace line(s) unreadable: not JSON with a t_us)", t.unreadable);
    }
    o
}

/// `--shrink`'s result: the events that must be forced, and the command that replays them.
pub fn shrunk_lines(
    sim: &Sim,
    target: &Target,
    r: &RealReport,
    out: Option<&std::path::Path>,
) -> String {
    let Some(out) = out else { return String::new() };
    let mut o = String::new();
    let Some(s) = &r.shrunk else {
        let path = crate::text::printable(&out.display().to_string());
        let _ = writeln!(o, "\nno round violated: nothing to shrink ({path} not written)");
        return o;
    };
    let _ = writeln!(
        o,
        "\nshrunk round {} ({}): {} forced event(s) of {}, {} real rounds played{}; the shrunk \
         schedule showed {} again on {} of 2 more plays",
        s.round,
        s.violation,
        s.events.len(),
        s.from,
        s.rounds,
        match (&s.stopped, s.bound_hit) {
            (Some(why), _) => format!(
                " (stopped early, smaller but maybe not minimal: {})",
                crate::text::printable(why)
            ),
            (None, true) => " (the shrink's bound: smaller, maybe not minimal)".to_string(),
            (None, false) => String::new(),
        },
        s.violation,
        s.confirmed
    );
    for e in &s.events {
        let _ = writeln!(o, "  {}", crate::text::printable(e));
    }
    let _ = writeln!(
        o,
        "replay it: idemsim real {} --target {} --controlled --schedule {} --seed {} --runs 1",
        crate::text::printable(&sim.name),
        crate::text::printable(&target.name),
        crate::text::printable(&out.display().to_string()),
        s.round
    );
    o
}

/// A controlled run's schedules, what escaped control, the replays, and the command that
/// replays the first violating round.
pub fn controlled_lines(sim: &Sim, target: &Target, r: &RealReport) -> String {
    let Some(summary) = &r.controlled else { return String::new() };
    let mut o = String::new();
    let rounds: Vec<&super::RoundControl> =
        r.rounds.iter().filter_map(|l| l.control.as_ref()).collect();
    let mut decisions: Vec<f64> = rounds.iter().map(|c| c.schedule.len() as f64).collect();
    decisions.sort_by(f64::total_cmp);
    let slowest = rounds.iter().map(|c| c.slowest_ms).fold(0.0, f64::max);
    let escaped: usize = rounds.iter().map(|c| c.escaped.len()).sum();
    let escaping = rounds.iter().filter(|c| !c.escaped.is_empty()).count();
    let cut = rounds.iter().filter(|c| c.cut).count();
    let _ = writeln!(
        o,
        "decisions per round p50 {:.0} · max {:.0} · slowest release to its next event {slowest:.1} ms (quiet bound {} ms)",
        percentile(&decisions, 0.5),
        decisions.last().copied().unwrap_or(0.0),
        summary.quiet_ms
    );
    let _ = writeln!(
        o,
        "escaped control     {escaped} event(s) in {escaping} of {} rounds{}",
        rounds.len(),
        if cut > 0 { format!(" · {cut} round(s) cut by their bound") } else { String::new() }
    );
    let first: Vec<&String> = rounds.iter().flat_map(|c| c.escaped.iter()).collect();
    if !first.is_empty() {
        let _ = writeln!(o, "  went quiet after   {}", excerpt(&first, 3));
    }
    let (replays, same): (u32, u32) =
        rounds.iter().fold((0, 0), |(n, k), c| (n + c.replays, k + c.reproduced));
    if replays > 0 {
        let _ = writeln!(
            o,
            "replays             {same}/{replays} reproduced their round exactly (schedule, answers, rows, effects)"
        );
    }
    if let Some((l, u)) = r.rounds.iter().find_map(|l| {
        let u = &l.control.as_ref()?.unplayed;
        (!u.is_empty()).then_some((l, u))
    }) {
        let _ = writeln!(
            o,
            "  not followed       round {}: the schedule's last {} event(s) never ran; `{}` was never enabled",
            l.round,
            u.len(),
            crate::text::printable(&u[0])
        );
    }
    if let Some((l, d)) =
        r.rounds.iter().find_map(|l| Some((l, l.control.as_ref()?.differs.as_ref()?)))
    {
        let _ = writeln!(
            o,
            "  first departure    round {}'s replay: {}",
            l.round,
            crate::text::printable(d)
        );
    }
    o.push_str(&replay_line(sim, target, r, summary));
    o
}

/// The command that replays the first violating round, and its schedule's first events.
fn replay_line(
    sim: &Sim,
    target: &Target,
    r: &RealReport,
    summary: &super::ControlSummary,
) -> String {
    let mut o = String::new();
    if let Some(bad) = r.rounds.iter().find(|l| !l.violations.is_empty()) {
        let explore = match summary.strategy.as_str() {
            "random" => String::new(),
            "schedule" => format!(
                " --schedule {}",
                crate::text::printable(summary.schedule_file.as_deref().unwrap_or("FILE"))
            ),
            s => format!(" --explore {s}"),
        };
        let _ = writeln!(
            o,
            "replay round {}: idemsim real {} --target {} --controlled{explore} --seed {} --runs 1",
            bad.round,
            crate::text::printable(&sim.name),
            crate::text::printable(&target.name),
            bad.round
        );
        if let Some(c) = &bad.control {
            let events: Vec<&String> = c.schedule.iter().collect();
            let _ = writeln!(o, "  its schedule      {}", excerpt(&events, 8));
        }
    }
    o
}

/// The first `n` of `events`, escaped and joined, and how many more there are.
fn excerpt(events: &[&String], n: usize) -> String {
    let shown: Vec<String> = events.iter().take(n).map(|e| crate::text::printable(e)).collect();
    match events.len().saturating_sub(n) {
        0 => shown.join(" · "),
        more => {
            format!("{} · … {more} more (--json, or schedule.txt with --keep)", shown.join(" · "))
        }
    }
}
