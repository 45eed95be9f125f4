//! The event history of one run: simulated time, node, event. Rendered as the `--trace`
//! timeline; hashed to prove determinism (same seed, same build → same bytes).

use std::fmt::Write;

/// One event. `t_us` is simulated time since the run started, in microseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub t_us: u64,
    pub node: String,
    pub text: String,
    /// A message sent from `node` to this node (a request, a reply, an effect call).
    pub to: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    pub events: Vec<Event>,
}

impl History {
    /// The timeline, one line per event: `   12.345ms  server-1   first: lookup → miss`.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(self.events.len() * 64);
        for e in &self.events {
            let _ = write!(
                out,
                "{:>8}.{:03}ms  {:<12} {}",
                e.t_us / 1000,
                e.t_us % 1000,
                e.node,
                e.text
            );
            if let Some(to) = &e.to {
                let _ = write!(out, " → {to}");
            }
            out.push('\n');
        }
        out
    }

    /// The run as a Mermaid sequence diagram: messages as arrows, everything else as notes over
    /// the node it happened on. Client-side receipts are left out (the reply arrow shows them).
    pub fn mermaid(&self) -> String {
        let mut nodes: Vec<&str> = Vec::new();
        for e in &self.events {
            for n in std::iter::once(e.node.as_str()).chain(e.to.as_deref()) {
                if !nodes.contains(&n) {
                    nodes.push(n);
                }
            }
        }
        // Clients first, then servers, then the rest, each in order of appearance.
        let rank = |n: &str| {
            if n.starts_with("client-") {
                0
            } else if n.starts_with("server-") {
                1
            } else {
                2
            }
        };
        nodes.sort_by_key(|n| rank(n));
        let id = |n: &str| format!("P{}", nodes.iter().position(|m| *m == n).unwrap_or(0));
        let clean = |t: &str| t.replace(';', ",").replace('#', "no.").replace('\n', " ");
        let mut out = String::from("sequenceDiagram\n");
        for n in &nodes {
            let _ = writeln!(out, "    participant {} as {n}", id(n));
        }
        for e in &self.events {
            let t = format!("{}.{:03} ms", e.t_us / 1000, e.t_us % 1000);
            match &e.to {
                Some(to) => {
                    let _ =
                        writeln!(out, "    {}->>{}: {} ({t})", id(&e.node), id(to), clean(&e.text));
                }
                None if e.node.starts_with("client-") && e.text.contains(": ← ") => {}
                None => {
                    let _ =
                        writeln!(out, "    Note over {}: {} ({t})", id(&e.node), clean(&e.text));
                }
            }
        }
        out
    }

    /// A hash of every event's fields: equal histories give equal hashes on every machine.
    pub fn hash(&self) -> u64 {
        let mut h = TraceHasher::default();
        for e in &self.events {
            h.write(&e.t_us.to_le_bytes());
            h.write(e.node.as_bytes());
            h.write(&[0]);
            h.write(e.text.as_bytes());
            h.write(&[0]);
            if let Some(to) = &e.to {
                h.write(to.as_bytes());
            }
            h.write(&[0]);
        }
        h.0
    }
}

/// A 64-bit word-at-a-time hash (the FxHash mixing step over little-endian words, with the
/// length folded in): tiny, fast, and the same on every platform and Rust version. Not for
/// adversarial input: it only compares traces of this program.
pub struct TraceHasher(pub u64);

impl Default for TraceHasher {
    fn default() -> Self {
        TraceHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl TraceHasher {
    const K: u64 = 0x517c_c1b7_2722_0a95;

    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::K);
    }

    pub fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.mix(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        self.mix(u64::from_le_bytes(last));
        self.mix(bytes.len() as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_sees_every_field() {
        let e = |t, n: &str, x: &str| Event { t_us: t, node: n.into(), text: x.into(), to: None };
        let a = History { events: vec![e(1, "a", "x")] };
        assert_ne!(a.hash(), History { events: vec![e(2, "a", "x")] }.hash());
        assert_ne!(a.hash(), History { events: vec![e(1, "b", "x")] }.hash());
        assert_ne!(a.hash(), History { events: vec![e(1, "a", "y")] }.hash());
        assert_eq!(a.render(), "       0.001ms  a            x\n");
        let m = History {
            events: vec![Event { to: Some("server-1".into()), ..e(1, "client-a", "POST; #1") }],
        };
        assert_ne!(m.hash(), History { events: vec![e(1, "client-a", "POST; #1")] }.hash());
        assert_eq!(
            m.mermaid(),
            "sequenceDiagram\n    participant P0 as client-a\n    participant P1 as server-1\n    P0->>P1: POST, no.1 (0.001 ms)\n"
        );
    }
}
