//! The event history of one run: simulated time, node, event. Rendered as the `--trace`
//! timeline; hashed to prove determinism (same seed, same build → same bytes).

use std::fmt::Write;

/// One event. `t_us` is simulated time since the run started, in microseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub t_us: u64,
    pub node: String,
    pub text: String,
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
            let _ = writeln!(out, "{:>8}.{:03}ms  {:<12} {}", e.t_us / 1000, e.t_us % 1000, e.node, e.text);
        }
        out
    }

    /// FNV-1a over every event's fields: equal histories give equal hashes on every machine.
    pub fn hash(&self) -> u64 {
        let mut h = Fnv::default();
        for e in &self.events {
            h.write(&e.t_us.to_le_bytes());
            h.write(e.node.as_bytes());
            h.write(&[0]);
            h.write(e.text.as_bytes());
            h.write(&[0]);
        }
        h.0
    }
}

/// 64-bit FNV-1a: tiny, stable across platforms and Rust versions.
pub struct Fnv(pub u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    pub fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= *b as u64;
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_sees_every_field() {
        let e = |t, n: &str, x: &str| Event { t_us: t, node: n.into(), text: x.into() };
        let a = History { events: vec![e(1, "a", "x")] };
        assert_ne!(a.hash(), History { events: vec![e(2, "a", "x")] }.hash());
        assert_ne!(a.hash(), History { events: vec![e(1, "b", "x")] }.hash());
        assert_ne!(a.hash(), History { events: vec![e(1, "a", "y")] }.hash());
        assert_eq!(a.render(), "       0.001ms  a            x\n");
    }
}
