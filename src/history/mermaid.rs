//! `--mermaid`: the run as a Mermaid sequence diagram. Every label goes through
//! [`crate::text::mermaid_text`]: one line, no markup, no `;` or `#` or `%` that the parser
//! would read, so a key or a body cannot end a statement, add one or inject HTML.

use std::fmt::Write;

use super::{History, Node, StateTrack, What};

impl History {
    /// The run as a Mermaid sequence diagram: messages as arrows, everything else as notes over
    /// the node it happened on. Client-side receipts are left out (the reply arrow shows them).
    pub fn mermaid(&self) -> String {
        let mut nodes: Vec<Node> = Vec::new();
        for e in &self.events {
            for n in std::iter::once(e.node).chain(e.to()) {
                if !nodes.contains(&n) {
                    nodes.push(n);
                }
            }
        }
        // Clients first, then servers, then the rest, each in order of appearance.
        let rank = |n: &Node| match n {
            Node::Client(_) => 0,
            Node::Server(_) => 1,
            _ => 2,
        };
        nodes.sort_by_key(rank);
        let id = |n: Node| format!("P{}", nodes.iter().position(|m| *m == n).unwrap_or(0));
        let clean = crate::text::mermaid_text;
        let mut out = String::from("sequenceDiagram\n");
        for n in &nodes {
            let _ = writeln!(out, "    participant {} as {}", id(*n), clean(&self.legend.node(*n)));
        }
        let state = StateTrack::of(self);
        let _ = writeln!(out, "    participant S as committed state");
        for (i, e) in self.events.iter().enumerate() {
            let t = format!("{}.{:03} ms", e.t_us / 1000, e.t_us % 1000);
            let text = clean(&self.legend.text(e));
            match e.to() {
                Some(to) => {
                    let _ = writeln!(out, "    {}->>{}: {text} ({t})", id(e.node), id(to));
                }
                // Receipts are the ends of arrows already drawn.
                None if matches!(e.what, What::Received { .. } | What::Arrived) => {}
                None => {
                    let _ = writeln!(out, "    Note over {}: {text} ({t})", id(e.node));
                }
            }
            if let Some(s) = state.change(i) {
                let _ = writeln!(out, "    Note over S: {}", clean(&s));
            }
        }
        out
    }
}
