//! Pictures of one run that people look at: a standalone SVG space-time diagram (a lane per
//! client, server process and dependency that acts, one row per event with time to scale and
//! long idle gaps broken, each client copy in its own Okabe–Ito colour and shape, messages as
//! arrows, dropped ones cut, resends marked, the race window shaded (or drawn closed when no
//! other execution checked inside it), the violation named and ringed, the committed rows and
//! key records as they change) and self-contained HTML pages around it. No JavaScript, no
//! external assets.
//!
//! Pure functions of the typed history and the sim; the state column is derived from the
//! events alone (rows and key records as committed: writes inside a transaction count at its
//! `COMMIT` and vanish at a `ROLLBACK` or a crash).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::history::{Actor, Event, History, Node, StateTrack, What};
use crate::scenario::Sim;

/// Escape text for XML and HTML.
pub fn esc(s: &str) -> String {
    crate::text::xml_text(&crate::text::printable(s))
}

/// The intent an event is about (requests only).
pub fn intent_of<'a>(sim: &'a Sim, e: &Event) -> Option<&'a str> {
    match e.who {
        Some(Actor::Attempt { req, .. }) => {
            sim.requests.get(req as usize).map(|q| q.intent.as_str())
        }
        _ => None,
    }
}

/// The race window: from the first lookup of the intent's first execution that missed to the
/// moment that execution saved its key record, as event indices (a claim is no race window:
/// the claim itself stops a second execution). None when there is no such pair.
pub fn race_window(h: &History, sim: &Sim, intent: &str) -> Option<(usize, usize)> {
    let mine = |e: &Event| intent_of(sim, e) == Some(intent);
    let (start, first) =
        h.events.iter().enumerate().find(|(_, e)| mine(e) && matches!(e.what, What::LookupMiss))?;
    let end = h.events.iter().enumerate().skip(start).find(|(_, e)| {
        e.who == first.who && matches!(e.what, What::Stored { .. } | What::ClaimCompleted { .. })
    })?;
    Some((start, end.0))
}

/// The lanes of the diagram: every node that appears in the first `shown` events (as the
/// node of an event or a message's destination), clients first, then server processes, then
/// the receiver and the control node. Only drawn events make lanes, so a run with ten thousand
/// clients draws the few hundred its first events involve.
fn lanes(h: &History, shown: usize) -> Vec<Node> {
    // `Node`'s order is the lanes' order: clients, servers, the receiver, control.
    let nodes: BTreeSet<Node> = h
        .events
        .iter()
        .take(shown)
        .filter(|e| !bookkeeping(&e.what))
        .flat_map(|e| std::iter::once(e.node).chain(e.to()))
        .collect();
    nodes.into_iter().collect()
}

/// Which kind of message an event sends (0: a request, 1: a reply, 2: an effect call), or
/// which kind it receives: the pairs an arrow joins.
fn sends(w: &What) -> Option<u8> {
    match w {
        What::Sent { .. } => Some(0),
        What::Reply { .. } => Some(1),
        What::EffectCall { .. } => Some(2),
        _ => None,
    }
}

/// See [`sends`].
fn receives(w: &What) -> Option<u8> {
    match w {
        What::Arrived => Some(0),
        What::Received { .. } => Some(1),
        What::EffectApplied { .. } | What::EffectDeduplicated { .. } => Some(2),
        _ => None,
    }
}

/// How events pair into arrows: for each message among the first `shown` events, the row of
/// its arrival (None: it never arrived), which is the first later event on the destination's
/// lane, of the same attempt, that receives that kind of message. One pass over the events:
/// each message waits under (destination, attempt, kind) until an event receives it, so a
/// dropped message costs nothing more than one that arrived.
pub(crate) fn arrivals(h: &History, shown: usize) -> BTreeMap<usize, Option<usize>> {
    type Waiting = BTreeMap<(Node, Option<Actor>, u8), Vec<usize>>;
    let mut out = BTreeMap::new();
    let mut waiting: Waiting = BTreeMap::new();
    for (j, x) in h.events.iter().enumerate() {
        if j >= shown && waiting.is_empty() {
            break;
        }
        if let Some(kind) = receives(&x.what)
            && let Some(senders) = waiting.remove(&(x.node, x.who, kind))
        {
            for i in senders {
                out.insert(i, Some(j));
            }
        }
        let Some(to) = x.to().filter(|_| j < shown) else { continue };
        // A message of another kind (none today) is never received: drawn cut.
        out.insert(j, None);
        if let Some(kind) = sends(&x.what) {
            waiting.entry((to, x.who, kind)).or_default().push(j);
        }
    }
    out
}

const ROW: usize = 24;
/// The least space between two rows (events at one instant); a gap in time adds to it.
const ROW_MIN: usize = 22;
/// Pixels per millisecond of model time between two rows.
const PX_PER_MS: u64 = 60;
/// A gap longer than this (µs) is drawn short, with a break mark naming it.
const BREAK_US: u64 = 4_000;
/// The height of a break.
const BREAK_PX: usize = 36;
const LANE: usize = 190;
const LEFT: usize = 92;
const TOP: usize = 64;
const STATE_W: usize = 300;
/// Room right of the last lane for its events' text, before the state column.
const LABEL_ROOM: usize = 180;
/// Characters of an event's text drawn; the whole text is the event's `<title>` (a tooltip).
const LABEL_CHARS: usize = 46;
/// At most this many events are drawn, with only the lanes they involve; a note in the
/// picture (and [`elided`], on stderr) says how many were left out. This bounds a picture's
/// size, and its building is linear in the run's events.
pub const MAX_EVENTS: usize = 400;

/// The Okabe–Ito palette (colour-blind safe), in the order client copies get it.
pub const OKABE_ITO: [&str; 6] = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"];
/// The shape cue of each copy's colour (as [`OKABE_ITO`]).
pub const SHAPES: [&str; 6] = ["●", "▲", "■", "◆", "✚", "★"];

/// Events that only keep the books (a lane holding nothing else is not drawn).
pub(crate) fn bookkeeping(w: &What) -> bool {
    matches!(w, What::Quiescent | What::Probe { .. })
}

/// Where the diagram puts things: a lane per node, a row per event drawn (time to scale,
/// long idle gaps broken), its size.
struct Layout {
    lanes: Vec<Node>,
    /// Events considered (at most [`MAX_EVENTS`]).
    shown: usize,
    /// The y of each event considered (None: not drawn, its lane holds only bookkeeping).
    ys: Vec<Option<usize>>,
    /// Long idle gaps: the y of the break and the gap (µs).
    breaks: Vec<(usize, u64)>,
    /// Each client copy's colour index, in order of first appearance.
    copies: BTreeMap<(u32, u32), usize>,
    width: usize,
    height: usize,
}

impl Layout {
    fn of(h: &History) -> Layout {
        let shown = h.events.len().min(MAX_EVENTS);
        let lanes = lanes(h, shown);
        let (mut ys, mut breaks, mut copies) = (vec![], vec![], BTreeMap::new());
        let (mut y, mut last_t) = (TOP + 20 - ROW_MIN, None::<u64>);
        for e in h.events.iter().take(shown) {
            if !lanes.contains(&e.node) {
                ys.push(None);
                continue;
            }
            let gap = last_t.map_or(0, |t| e.t_us.saturating_sub(t));
            if gap > BREAK_US {
                breaks.push((y + ROW_MIN / 2 + BREAK_PX / 2, gap));
                y += ROW_MIN + BREAK_PX;
            } else {
                y += ROW_MIN + (gap * PX_PER_MS / 1000) as usize;
            }
            last_t = Some(e.t_us);
            ys.push(Some(y));
            if let Some(Actor::Attempt { req, copy, .. }) = e.who {
                let n = copies.len();
                copies.entry((req, copy)).or_insert(n);
            }
        }
        let width = LEFT + LANE * lanes.len() + LABEL_ROOM + STATE_W;
        let height = y + ROW + 40;
        Layout { lanes, shown, ys, breaks, copies, width, height }
    }

    /// The x of node `n`'s lane.
    fn x(&self, n: Node) -> usize {
        LEFT + LANE / 2 + LANE * self.lanes.iter().position(|m| *m == n).unwrap_or(0)
    }

    /// The y of event `i` (an event not drawn: the next drawn one's, else the bottom).
    fn y(&self, i: usize) -> usize {
        self.ys.iter().skip(i).flatten().next().copied().unwrap_or(self.height - 40)
    }

    /// The x of the committed-state column, right of the lanes.
    fn state_x(&self) -> usize {
        LEFT + LANE * self.lanes.len() + LABEL_ROOM + 10
    }

    /// An event's colour and shape: its client copy's, else dark grey and a dot.
    fn cue(&self, who: Option<Actor>) -> (&'static str, &'static str) {
        match who {
            Some(Actor::Attempt { req, copy, .. }) => {
                let k = self.copies.get(&(req, copy)).copied().unwrap_or(0);
                (OKABE_ITO[k % OKABE_ITO.len()], SHAPES[k % SHAPES.len()])
            }
            _ => ("#333", "●"),
        }
    }
}

/// The run as a standalone SVG space-time diagram. `focus`: the intent whose race window is
/// shaded (the violation's).
pub fn svg(h: &History, sim: &Sim, title: &str, focus: Option<&str>) -> String {
    let l = Layout::of(h);
    let mut o = String::new();
    svg_head(&mut o, &l, title);
    if let Some(intent) = focus {
        race_shading(&mut o, &l, h, sim, intent);
    }
    svg_lanes(&mut o, &l, h);
    svg_breaks(&mut o, &l);
    svg_arrows(&mut o, &l, h);
    svg_events(&mut o, &l, h);
    if let Some(intent) = focus {
        svg_violation(&mut o, &l, h, sim, intent);
    }
    if l.shown < h.events.len() {
        let _ = writeln!(
            o,
            r##"<text x="12" y="{}" fill="#c0392b">… {} more event(s) not drawn (see the trace)</text>"##,
            l.height - 24,
            h.events.len() - l.shown
        );
    }
    o.push_str("</svg>\n");
    o
}

/// What a picture of `h` leaves out, for stderr (None: every event is drawn). The picture
/// draws at most [`MAX_EVENTS`] events and the lanes they involve, so its size has a bound
/// whatever the run.
pub fn elided(h: &History) -> Option<String> {
    let n = h.events.len();
    (n > MAX_EVENTS).then(|| {
        format!(
            "note: the diagram draws the first {MAX_EVENTS} of {n} events and their lanes; \
             {} more are in the trace only",
            n - MAX_EVENTS
        )
    })
}

/// The `<svg>` element, the arrow marker, the background and the title.
fn svg_head(o: &mut String, l: &Layout, title: &str) {
    let (width, height) = (l.width, l.height);
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="ui-monospace, Menlo, Consolas, monospace" font-size="11">"#
    );
    let _ = writeln!(o, "<title>{}</title>", esc(title));
    o.push_str(
        "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" \
         markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" \
         fill=\"#334\"/></marker></defs>\n",
    );
    let _ = writeln!(o, r##"<rect width="{width}" height="{height}" fill="#fff"/>"##);
    let _ = writeln!(
        o,
        r##"<text x="12" y="22" font-size="14" font-weight="bold" fill="#111">{}</text>"##,
        esc(title)
    );
}

/// The race window of `intent`, shaded across every lane (when it starts among the rows
/// drawn).
fn race_shading(o: &mut String, l: &Layout, h: &History, sim: &Sim, intent: &str) {
    let Some((a, b)) = race_window(h, sim, intent) else { return };
    if a >= l.shown {
        return;
    }
    let b = b.min(l.shown - 1);
    let (y0, y1) = (l.y(a) - ROW / 2, l.y(b) + ROW / 2);
    // A race only when another execution of the intent checked the key inside the window;
    // else the design kept it closed (a lock, a transaction, a claim).
    let first = h.events[a].who;
    let raced = h.events[a + 1..=b].iter().any(|e| {
        e.who != first && intent_of(sim, e) == Some(intent) && matches!(e.what, What::LookupMiss)
    });
    let (class, fill, color, label) = if raced {
        ("race", "#f5c542", "#8a6d00", "▲ race window: key checked, not yet saved")
    } else {
        ("closed", "#9ad3bc", "#00543d", "▣ key checked, then saved: no other check in between")
    };
    let _ = writeln!(
        o,
        r##"<rect class="{class}" x="{LEFT}" y="{y0}" width="{}" height="{}" fill="{fill}" fill-opacity="0.22"/>"##,
        LANE * l.lanes.len(),
        y1 - y0
    );
    // Labelled in the state column, where no event text runs.
    let _ = writeln!(
        o,
        r##"<text x="{}" y="{}" fill="{color}" font-size="10">{label}</text>"##,
        l.state_x(),
        y1 + 12
    );
}

/// A dashed lane per node, with its name, and the state column's heading.
fn svg_lanes(o: &mut String, l: &Layout, h: &History) {
    for n in &l.lanes {
        let x = l.x(*n);
        let _ = writeln!(
            o,
            r##"<g class="lane"><text x="{x}" y="{}" text-anchor="middle" font-weight="bold" fill="#222">{}</text><line x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="#bbb" stroke-dasharray="3,3"/></g>"##,
            TOP - 6,
            esc(&h.legend.node(*n)),
            TOP,
            l.height - 30
        );
    }
    let _ = writeln!(
        o,
        r##"<text x="{}" y="{}" font-weight="bold" fill="#222">committed state</text>"##,
        l.state_x(),
        TOP - 6
    );
}

/// The messages as arrows (drawn before the events, which go over them); a message that
/// never arrived is cut.
fn svg_arrows(o: &mut String, l: &Layout, h: &History) {
    for (&i, &end) in &arrivals(h, l.shown) {
        let e = &h.events[i];
        let (x0, y0) = (l.x(e.node), l.y(i));
        let to = e.to().expect("a message");
        let x1 = l.x(to);
        match end {
            Some(j) if j < l.shown => {
                let _ = writeln!(
                    o,
                    r##"<line class="msg" x1="{x0}" y1="{y0}" x2="{x1}" y2="{}" stroke="#334" stroke-width="1.2" marker-end="url(#arrow)"/>"##,
                    l.y(j)
                );
            }
            _ => {
                // Cut: it never arrived (dropped, lost in a partition, to a dead process).
                let xm = (x0 + x1) / 2;
                let _ = writeln!(
                    o,
                    r##"<g class="dropped"><line x1="{x0}" y1="{y0}" x2="{xm}" y2="{}" stroke="#c0392b" stroke-width="1.2" stroke-dasharray="5,3"/><text x="{xm}" y="{}" fill="#c0392b" font-size="14" text-anchor="middle">✕</text></g>"##,
                    y0 + ROW / 2,
                    y0 + ROW / 2 + 5
                );
            }
        }
    }
}

/// Every event drawn: its time, a mark on its lane in its client copy's colour and shape
/// (a fault outlined in red and marked ⚠), its text (cut, the whole in its `<title>`), and
/// the committed state where it changed.
fn svg_events(o: &mut String, l: &Layout, h: &History) {
    let state = StateTrack::of(h);
    for (i, e) in h.events.iter().take(l.shown).enumerate() {
        let Some(yy) = l.ys[i] else { continue };
        let x = l.x(e.node);
        let t = format!("{}.{:03} ms", e.t_us / 1000, e.t_us % 1000);
        let _ = writeln!(
            o,
            r##"<text x="{}" y="{}" fill="#777" text-anchor="end">{t}</text>"##,
            LEFT - 8,
            yy + 4
        );
        let (color, shape) = l.cue(e.who);
        let fault = is_fault(&e.what);
        let mut label = h.legend.text(e);
        if let What::RequestDuplicated { .. } = e.what {
            label = format!("⧉ {label}");
        }
        if fault {
            label = format!("⚠ {label}");
        }
        let full = label.clone();
        if label.chars().count() > LABEL_CHARS {
            label = label.chars().take(LABEL_CHARS - 1).collect::<String>() + "…";
        }
        let ring = if fault { r##" stroke="#c0392b" stroke-width="2""## } else { "" };
        let _ = writeln!(
            o,
            r##"<g class="event"><title>{}</title><text x="{x}" y="{}" text-anchor="middle" font-size="12" fill="{color}"{ring}>{shape}</text><text x="{}" y="{}" fill="{color}">{}</text></g>"##,
            esc(&full),
            yy + 4,
            x + 9,
            yy - 5,
            esc(&label)
        );
        if let Some(s) = state.change(i) {
            let _ = writeln!(
                o,
                r##"<text class="state" x="{}" y="{}" fill="#0a7a3d">{}</text>"##,
                l.state_x(),
                yy + 4,
                esc(&s)
            );
        }
    }
}

/// Long idle gaps: a zigzag across the lanes and the time that passed.
fn svg_breaks(o: &mut String, l: &Layout) {
    let right = LEFT + LANE * l.lanes.len();
    for &(y, gap) in &l.breaks {
        let mut d = format!("M{LEFT},{y}");
        for (k, x) in (LEFT..right).step_by(12).enumerate() {
            let _ = write!(d, " L{},{}", x + 6, if k % 2 == 0 { y - 4 } else { y + 4 });
        }
        let _ = writeln!(
            o,
            r##"<g class="break"><path d="{d}" fill="none" stroke="#999"/><text x="{}" y="{}" fill="#555">≈ {} idle</text></g>"##,
            LEFT + 4,
            y - 7,
            crate::units::show_duration(gap)
        );
    }
}

/// The violation named where it happens: the second execution's row (or effect) of the
/// focused intent, ringed, with words in the state column.
fn svg_violation(o: &mut String, l: &Layout, h: &History, sim: &Sim, intent: &str) {
    let mine = |e: &&Event| intent_of(sim, e) == Some(intent);
    let rows: Vec<usize> = (0..l.shown)
        .filter(|&i| mine(&&h.events[i]) && matches!(h.events[i].what, What::RowInserted { .. }))
        .collect();
    let effects: Vec<usize> = (0..l.shown)
        .filter(
            |&i| matches!(&h.events[i].what, What::EffectApplied { intent: x, .. } if x == intent),
        )
        .collect();
    let (at, name, what) = match (rows.get(1), effects.get(1)) {
        (Some(&i), _) => (i, "duplicate-row", "a second row"),
        (None, Some(&i)) => (i, "duplicate-effect", "the effect a second time"),
        _ => return,
    };
    let (x, y) = (l.x(h.events[at].node), l.y(at));
    let _ = writeln!(
        o,
        r##"<g class="violation"><title>{name}: {what} for intent {}</title><circle cx="{x}" cy="{y}" r="10" fill="none" stroke="#D55E00" stroke-width="2.5"/><text x="12" y="40" fill="#A33F00" font-weight="bold">✖ violation {name}: {what} for intent {}, at {} (ringed)</text></g>"##,
        esc(intent),
        esc(intent),
        crate::units::show_duration(h.events[at].t_us)
    );
}

/// Is the event a fault (drawn in red)?
pub(crate) fn is_fault(w: &What) -> bool {
    matches!(
        w,
        What::RequestDropped
            | What::RequestDuplicated { .. }
            | What::ReplyDropped { .. }
            | What::Delayed { .. }
            | What::LostInPartition
            | What::LostToDownProcess
            | What::ConnectionRefused
            | What::ConnectionReset
            | What::ReplyLostAfterCommit
            | What::ConnectionDropped { .. }
            | What::CrashFault(_)
            | What::ProcessCrashed
            | What::Failed { .. }
            | What::CommitLost { .. }
            | What::CacheRefused
            | What::CacheUnreachable
            | What::CacheRestarted
            | What::CacheEvicted
            | What::CacheReplyLost
            | What::ProviderErrorAfterSuccess
            | What::ProviderAnswerLost
            | What::EffectCallLost
            | What::EffectCallDuplicated
            | What::TransportFailure { .. }
    )
}

/// A self-contained HTML page: a title and sections of HTML (already escaped).
pub fn html_page(title: &str, sections: &[(String, String)]) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n\
         <style>body{{font-family:system-ui,sans-serif;margin:24px;max-width:1600px;color:#111}}\
         h1{{font-size:20px}}h2{{font-size:16px;margin-top:28px}}pre{{background:#f6f6f6;\
         padding:10px;overflow-x:auto;font-size:12px}}table{{border-collapse:collapse;font-size:12px}}\
         td,th{{border:1px solid #ddd;padding:4px 6px;vertical-align:top}}.bar{{display:inline-block;\
         height:9px;background:#c0392b;margin-right:4px}}.ok{{color:#0a7a3d}}.na{{color:#888}}\
         .fig{{overflow-x:auto;border:1px solid #eee}}</style></head><body>\n<h1>{}</h1>\n",
        esc(title),
        esc(title)
    );
    for (heading, body) in sections {
        if !heading.is_empty() {
            let _ = writeln!(o, "<h2>{}</h2>", esc(heading));
        }
        o.push_str(body);
        o.push('\n');
    }
    o.push_str("</body></html>\n");
    o
}

/// Preformatted text as HTML.
pub fn pre(text: &str) -> String {
    format!("<pre>{}</pre>", text.lines().map(esc).collect::<Vec<_>>().join("\n"))
}

/// Paragraphs of plain text as HTML; `code` spans become `<code>`.
pub fn paragraphs(text: &str) -> String {
    text.split("\n\n")
        .map(|p| {
            let escaped = esc(&p.trim().replace('\n', " "));
            let mut out = String::new();
            for (i, part) in escaped.split('`').enumerate() {
                if i % 2 == 1 {
                    let _ = write!(out, "<code>{part}</code>");
                } else {
                    out.push_str(part);
                }
            }
            format!("<p>{out}</p>")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::model::Model;
    use crate::run::{self, RunOptions};

    /// The quadratic pairing the one-pass [`arrivals`] replaced: for each message, a scan
    /// forward to the first event that receives it.
    fn arrivals_by_scan(h: &History) -> BTreeMap<usize, Option<usize>> {
        let mut out = BTreeMap::new();
        for (i, e) in h.events.iter().enumerate() {
            let Some(to) = e.to() else { continue };
            let end = h.events.iter().enumerate().skip(i + 1).find(|(_, x)| {
                x.node == to && x.who == e.who && sends(&e.what) == receives(&x.what)
            });
            out.insert(i, end.map(|(j, _)| j));
        }
        out
    }

    /// One pass pairs every message as the forward scan did, in runs with dropped requests
    /// and replies, resends and a lossy provider, whole and cut at any number of events.
    #[test]
    fn one_pass_arrivals_equal_the_forward_scan() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let model = Arc::new(Model::load(&root.join("models/no-key.toml")).unwrap());
        let mut cut = false;
        for sim in
            ["faults/dropped-replies", "faults/proxy-resend", "dependencies/payment-provider"]
        {
            let sim = Arc::new(Sim::load(&root.join(format!("sims/{sim}.toml"))).unwrap());
            for seed in 0..4 {
                let out = run::run(&sim, &model, seed, RunOptions { keep_history: true }).unwrap();
                let h = out.history.unwrap();
                let all = arrivals_by_scan(&h);
                cut |= all.values().any(Option::is_none);
                for shown in [0, 1, 7, h.events.len() / 2, h.events.len()] {
                    let want: BTreeMap<_, _> =
                        all.iter().filter(|(i, _)| **i < shown).map(|(i, j)| (*i, *j)).collect();
                    assert_eq!(
                        arrivals(&h, shown),
                        want,
                        "{} seed {seed} cut at {shown}",
                        sim.name
                    );
                }
            }
        }
        assert!(cut, "no message was lost: nothing tested the cut ones");
    }
}
