//! The narrative: a failure's story in plain words, told on one run (where the second execution
//! came from and why the key did not stop it, or what the client saw against what happened).

use std::fmt::Write as _;

use super::Failure;
use crate::history::{Actor, Event, History, What};
use crate::model::Model;
use crate::picture::intent_of;
use crate::report::{Check, Outcome, Violation, ViolationKind};
use crate::shrink::{CheckKind, Hit};
use crate::units::show_ms;

/// The executions (attempt labels) of an intent that did what `pick` selects, in order.
fn doers(f: &Failure, pick: impl Fn(&What) -> bool) -> Vec<&Event> {
    f.history
        .events
        .iter()
        .filter(|e| intent_of(&f.sim, e) == f.intent() && pick(&e.what))
        .collect()
}

fn ms(t_us: u64) -> String {
    format!("{} ms", show_ms(t_us))
}

/// Events of one actor.
fn of_actor(h: &History, a: Option<Actor>) -> impl Iterator<Item = &Event> {
    h.events.iter().filter(move |e| e.who == a)
}

/// *Where did the second execution come from?*
fn origin(f: &Failure, first: &Event, second: &Event) -> String {
    let h = &f.history;
    let name = |e: &Event| e.who.map(|a| h.legend.actor(a)).unwrap_or_default();
    let (
        Some(Actor::Attempt { req: r1, copy: c1, attempt: a1 }),
        Some(Actor::Attempt { req: r2, copy: c2, attempt: a2 }),
    ) = (first.who, second.who)
    else {
        return match second.who {
            Some(Actor::RelayMessage(id)) => {
                format!("The outbox relay delivered message {id} again.")
            }
            _ => format!("{} ran it again.", name(second)),
        };
    };
    if first.who == second.who {
        if let Some(d) = of_actor(h, second.who).find_map(|e| match e.what {
            What::RequestDuplicated { after_us } => Some(after_us),
            _ => None,
        }) {
            return format!(
                "The same attempt reached the server twice: a proxy resent `{}` {} after the \
                 first copy (the client gets the second copy's reply).",
                name(second),
                ms(d)
            );
        }
        return format!("`{}` ran twice on the server.", name(second));
    }
    let req = &f.sim.requests[r2 as usize];
    if r1 == r2 && c1 == c2 && a2 > a1 {
        let prev = f.report.requests[r2 as usize]
            .copies
            .get(c2 as usize)
            .and_then(|c| c.get(a2 as usize - 2));
        let why = match prev {
            Some(p) if p.outcome == Outcome::TransportFailure => {
                format!("got no reply (attempt {} timed out or its connection failed)", a2 - 1)
            }
            Some(p) => format!("got {} to attempt {}", p.status.unwrap_or(0), a2 - 1),
            None => "gave up on the previous attempt".into(),
        };
        return format!(
            "The client retried: `{}` is attempt {a2} of `{}`, sent because the client {why}, \
             with the same key.",
            name(second),
            req.id
        );
    }
    if r1 == r2 {
        return format!(
            "A second copy of the same request: the sim sends `{}` as {} concurrent copies \
             (a double submit), and `{}` is another copy than `{}`.",
            req.id,
            req.copies,
            name(second),
            name(first)
        );
    }
    format!(
        "A later request for the same order: `{}` (request `{}`) carries intent `{}` too.",
        name(second),
        req.id,
        req.intent
    )
}

/// *Why did the key not stop it?*
fn why_not_stopped(f: &Failure, model: &Model, first: &Event, second: &Event) -> String {
    let h = &f.history;
    let name = |e: &Event| e.who.map(|a| h.legend.actor(a)).unwrap_or_default();
    if let Some(Actor::RelayMessage(id)) = second.who {
        return relay_sent_again(f, model, id, second);
    }
    if model.key.is_none() {
        return format!(
            "Model {} reads no Idempotency-Key: nothing on the server can tell a repeat from a \
             new order, so every execution inserts.",
            model.name
        );
    }
    let key_of = |who: Option<Actor>| {
        of_actor(h, who).find_map(|e| match &e.what {
            What::Sent { key, .. } => key.clone(),
            _ => None,
        })
    };
    let (k1, k2) = (key_of(first.who), key_of(second.who));
    if k1 != k2 {
        return format!(
            "The client sent another key: `{}` used `{}`, `{}` used `{}`. A new key is a new \
             order to the server; only counting rows per intent catches it.",
            name(first),
            k1.unwrap_or_else(|| "-".into()),
            name(second),
            k2.unwrap_or_else(|| "-".into())
        );
    }
    key_missed(f, model, first, second)
}

/// Why the outbox relay delivered message `id` a second time.
fn relay_sent_again(f: &Failure, model: &Model, id: i64, second: &Event) -> String {
    let h = &f.history;
    let mut nodes: Vec<_> = h
        .events
        .iter()
        .filter(|e| e.who == second.who && matches!(e.what, What::EffectCall { .. }))
        .map(|e| e.node)
        .collect();
    nodes.sort_by_key(|n| format!("{n:?}"));
    nodes.dedup();
    let two_relays = nodes.len() > 1;
    let crash = h.events.iter().find(|e| {
        matches!(&e.what, What::CrashFault(crate::history::CrashSite::BetweenSendAndMark))
            || matches!(&e.what, What::Injected { point, .. } if point == "relay-after-send")
    });
    let why = if let Some(c) = crash {
        format!(
            "the relay's process crashed between sending message {id} and marking it sent (at {}), so the next pass sent it again",
            ms(c.t_us)
        )
    } else if two_relays {
        format!("the relays of two processes both read message {id} before either marked it sent")
    } else {
        format!(
            "the relay did not see its first delivery of message {id} acknowledged and sent it again"
        )
    };
    format!(
        "The outbox delivers at least once: {why}. The receiver counts every delivery: model \
         {} does not deduplicate effects (effects.dedupe = none).",
        model.name
    )
}

/// What the second execution found when it checked the key (its last check before acting),
/// and when the first saved it.
pub(crate) fn check_and_save<'a>(
    h: &'a History,
    first: &Event,
    second: &Event,
) -> (Option<&'a Event>, Option<&'a Event>) {
    let checked = of_actor(h, second.who)
        .filter(|e| e.t_us <= second.t_us)
        .filter(|e| matches!(e.what, What::LookupMiss | What::Claimed | What::TookOver))
        .last();
    let saved = of_actor(h, first.who).find(|e| {
        matches!(e.what, What::Stored { .. } | What::ClaimCompleted { .. } | What::Claimed)
    });
    (checked, saved)
}

/// The event that took the first execution's saved key record away before the check.
fn record_gone<'a>(
    h: &'a History,
    first: &Event,
    second: &Event,
    checked: Option<&Event>,
    saved: Option<&Event>,
) -> Option<&'a Event> {
    h.events
        .iter()
        .filter(|e| e.t_us <= checked.map_or(second.t_us, |c| c.t_us))
        .filter(|e| saved.is_some_and(|s| e.t_us >= s.t_us))
        .find(|e| {
            matches!(
                e.what,
                What::KeysDeleted { .. }
                    | What::Collected { .. }
                    | What::CacheEvicted
                    | What::CacheRestarted
                    | What::ClaimReleased { .. }
                    | What::ProcessCrashed
                    | What::Rollback
                    | What::CommitLost { committed: false }
            ) && (e.who.is_none() || e.who == first.who || matches!(e.what, What::ProcessCrashed))
        })
}

/// Both executions sent the same key: why its check did not stop the second.
fn key_missed(f: &Failure, model: &Model, first: &Event, second: &Event) -> String {
    let h = &f.history;
    let name = |e: &Event| e.who.map(|a| h.legend.actor(a)).unwrap_or_default();
    let (checked, saved) = check_and_save(h, first, second);
    let gone = record_gone(h, first, second, checked, saved);
    match (checked, saved) {
        (Some(c), _) if matches!(c.what, What::TookOver) => format!(
            "`{}` found `{}`'s claim still in progress but its lease expired by the clock of the \
             process that judged it (at {}), took it over and ran the request again.",
            name(second),
            name(first),
            ms(c.t_us)
        ),
        (Some(c), Some(s)) if s.t_us > c.t_us => format!(
            "`{}` checked the key at {}, before `{}` had saved it (at {}): the check and the \
             write that would have stopped it are separate steps, and another execution ran \
             between them (the shaded race window).",
            name(second),
            ms(c.t_us),
            name(first),
            ms(s.t_us)
        ),
        (Some(c), None) => format!(
            "`{}` checked the key at {} and found nothing: `{}` never saved it (it failed, crashed \
             or rolled back before saving).",
            name(second),
            ms(c.t_us),
            name(first)
        ),
        (Some(c), Some(_)) => match gone {
            Some(g) => format!(
                "`{}`'s key record was gone when `{}` checked it at {}: {} at {}.",
                name(first),
                name(second),
                ms(c.t_us),
                h.legend.text(g),
                ms(g.t_us)
            ),
            None => format!(
                "`{}` checked the key at {} and did not find a record that stopped it.",
                name(second),
                ms(c.t_us)
            ),
        },
        (None, _) => format!(
            "`{}` never checked the key before it acted (model {}'s program acts first).",
            name(second),
            model.name
        ),
    }
}

/// The failure's story in plain words: two executions and where they came from, or (for
/// other violations and failed expectations) what the client saw against what happened.
pub(crate) fn narrative(f: &Failure, model: &Model) -> String {
    match &f.hit {
        Hit::Violation(v) => {
            let did = duplicated(f, v);
            if did.len() >= 2 {
                return two_executions(f, v, model, &did[0], &did[1]);
            }
            attempts_told(f, v)
        }
        Hit::Expectation(k, c) => expectation_told(f, *k, c),
    }
}

/// The executions that did the duplicated thing (inserted the row, or had the effect
/// performed), in order; empty for other violations.
pub(crate) fn duplicated(f: &Failure, v: &Violation) -> Vec<Event> {
    match v.name {
        ViolationKind::DuplicateRow | ViolationKind::ExpiredDuplicateRow => {
            doers(f, |w| matches!(w, What::RowInserted { .. })).into_iter().cloned().collect()
        }
        // Effects as the provider counted them, each with the execution that asked for it
        // (an attempt, or the outbox relay delivering a message).
        ViolationKind::DuplicateEffect | ViolationKind::ExpiredDuplicateEffect => f
            .history
            .events
            .iter()
            .filter_map(|e| match &e.what {
                What::EffectApplied { intent, from } if *intent == v.intent => {
                    Some(Event { who: Some(*from), ..e.clone() })
                }
                _ => None,
            })
            .collect(),
        _ => vec![],
    }
}

/// The story of two executions `a` and `b` of one intent.
fn two_executions(f: &Failure, v: &Violation, model: &Model, a: &Event, b: &Event) -> String {
    let mut s = String::new();
    // Two deliveries by one relay message would read the same: number them.
    let same = a.who == b.who;
    let name = |e: &Event| {
        let n = e.who.map(|x| f.history.legend.actor(x)).unwrap_or_default();
        match (same, std::ptr::eq(e, a)) {
            (false, _) => n,
            (true, true) => format!("{n} (first time)"),
            (true, false) => format!("{n} (second time)"),
        }
    };
    let act = if matches!(a.what, What::RowInserted { .. }) {
        "inserted a row"
    } else {
        "had its effect performed"
    };
    let _ = writeln!(
        s,
        "Let `{}` and `{}` be two executions of intent `{}`: `{}` {act} at {}, `{}` at {}.",
        name(a),
        name(b),
        v.intent,
        name(a),
        ms(a.t_us),
        name(b),
        ms(b.t_us)
    );
    let _ = writeln!(s, "\nWhere did the second execution come from? {}", origin(f, a, b));
    let _ = writeln!(s, "\nWhy did the key not stop it? {}", why_not_stopped(f, model, a, b));
    let _ = writeln!(s, "\nSo: {} ({}).", v.name.name(), v.detail);
    s
}

/// Other violations: what the client saw against what happened, per attempt.
fn attempts_told(f: &Failure, v: &Violation) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}: {}.", v.name.meaning(), v.detail);
    let _ = writeln!(s, "\nThe attempts of intent `{}`:", v.intent);
    s.push_str(&attempts_and_end(f, Some(&v.intent)));
    s
}

/// A failed expectation: what the sim expected against what the run gave, then what the
/// client saw (the request's intent, or every request for the end state) and the end state.
fn expectation_told(f: &Failure, k: CheckKind, c: &Check) -> String {
    use crate::text::printable;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "The sim expects `{}` to be {}; the run gave {} (a failed expectation of kind {}: the \
         design answered otherwise than the sim specifies).",
        printable(&c.what),
        printable(&c.expected),
        printable(&c.actual),
        k.name()
    );
    match f.intent() {
        Some(i) => {
            let _ = writeln!(s, "\nThe attempts of intent `{i}`:");
        }
        None => {
            let _ = writeln!(s, "\nThe attempts of every request:");
        }
    }
    s.push_str(&attempts_and_end(f, f.intent()));
    s
}

/// Every attempt of `intent` (or of every request) with its answer, and the end state.
fn attempts_and_end(f: &Failure, intent: Option<&str>) -> String {
    let mut s = String::new();
    let mine = |i: &str| intent.is_none_or(|x| x == i);
    for (qi, q) in f.sim.requests.iter().enumerate().filter(|(_, q)| mine(&q.intent)) {
        for (c, attempts) in f.report.requests[qi].copies.iter().enumerate() {
            for (n, a) in attempts.iter().enumerate() {
                let label = crate::history::attempt_label(&q.id, q.copies, c as u32, n as u32 + 1);
                let what = match a.status {
                    Some(st) => format!("{st} {}", a.body.as_deref().unwrap_or("")),
                    None => "no reply (transport failure)".into(),
                };
                let _ = writeln!(
                    s,
                    "  {label}: sent at {} ms, {what}",
                    crate::units::show_ms((a.sent_ms * 1000.0) as u64)
                );
            }
        }
    }
    let rows = f.report.rows.iter().filter(|r| mine(&r.intent)).count();
    let effects: u64 = f.report.effects.iter().filter(|(i, _)| mine(i)).map(|(_, n)| *n).sum();
    let writes = f.report.writes.iter().filter(|w| mine(&w.intent)).count();
    let whose = if intent.is_some() { "for the intent" } else { "in all" };
    if writes > 0 || !f.report.writes.is_empty() {
        let _ = writeln!(
            s,
            "\nIn the end: {writes} document write(s) and {effects} effect(s) {whose}."
        );
    } else {
        let _ = writeln!(s, "\nIn the end: {rows} row(s) and {effects} effect(s) {whose}.");
    }
    s
}
