//! The event history of one run: typed events in simulated time. `--trace` renders them as a
//! timeline, `--mermaid` as a sequence diagram; the determinism hash is computed from the typed
//! events themselves, so a sweep that only needs counts formats no text at all. Imports
//! nothing from the crate but [`crate::units`]: names (request ids, copies) come with the
//! [`Legend`]. Durations are microseconds of model time, shown as milliseconds.

mod events;
mod hash;
mod mermaid;
pub mod state;
mod text;

pub use events::{Actor, CrashSite, Event, Node, Refusal, Stmt, What};
pub use hash::TraceHasher;
pub use state::StateTrack;
pub use text::{Legend, attempt_label, save_refused};

/// The typed events of one run, with the names they refer to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    /// The events, in the order they happened.
    pub events: Vec<Event>,
    /// The names the events refer to by index: request ids (with their copies) and action ids.
    pub legend: Legend,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn legend() -> Legend {
        Legend { requests: vec![("a".into(), 1), ("b".into(), 2)], actions: vec![] }
    }

    fn ev(t_us: u64, node: Node, what: What) -> Event {
        Event { t_us, node, who: None, what }
    }

    #[test]
    fn hash_sees_every_field() {
        let h = |events: Vec<Event>| History { events, legend: legend() }.hash();
        let a = h(vec![ev(1, Node::Server(0), What::LookupMiss)]);
        assert_ne!(a, h(vec![ev(2, Node::Server(0), What::LookupMiss)]));
        assert_ne!(a, h(vec![ev(1, Node::Server(1), What::LookupMiss)]));
        assert_ne!(a, h(vec![ev(1, Node::Server(0), What::Claimed)]));
        let who = Some(Actor::Attempt { req: 0, copy: 0, attempt: 1 });
        assert_ne!(a, h(vec![Event { who, ..ev(1, Node::Server(0), What::LookupMiss) }]));
        assert_ne!(
            h(vec![ev(1, Node::Server(0), What::RowInserted { row: 1 })]),
            h(vec![ev(1, Node::Server(0), What::RowInserted { row: 2 })])
        );
    }

    #[test]
    fn render_and_mermaid() {
        let sent = Event {
            t_us: 1,
            node: Node::Client(1),
            who: Some(Actor::Attempt { req: 1, copy: 1, attempt: 2 }),
            what: What::Sent {
                to: 0,
                method: "POST".into(),
                path: "/api/orders".into(),
                key: Some("k;1".into()),
            },
        };
        let h = History { events: vec![sent], legend: legend() };
        assert_eq!(
            h.render(),
            "       0.001ms  client-b     b[1]/2: POST /api/orders key=k;1 → server-1\n"
        );
        assert_eq!(
            h.mermaid(),
            "sequenceDiagram\n    participant P0 as client-b\n    participant P1 as server-1\n    \
             participant S as committed state\n    \
             P0->>P1: b[1]/2: POST /api/orders key=k#59;1 (0.001 ms)\n"
        );
    }
}
