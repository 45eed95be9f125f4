//! The trace hash: a hash of the typed events themselves, the same on every platform.

use std::hash::{Hash, Hasher};

use super::History;

impl History {
    /// The hash of the typed events: equal histories give equal hashes.
    pub fn hash(&self) -> u64 {
        let mut h = TraceHasher::default();
        for e in &self.events {
            e.hash(&mut h);
        }
        h.finish()
    }
}

/// A 64-bit word-at-a-time hash (the FxHash mixing step over little-endian words, with the
/// length folded in): tiny, fast, and the same on every platform (integers are fed as
/// little-endian 64-bit words, whatever their width). It hashes the derived `Hash` of typed
/// events, so a trace hash reproduces on the same build. Not for adversarial input.
#[derive(Debug, Clone)]
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
}

impl Hasher for TraceHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
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

    fn write_u8(&mut self, i: u8) {
        self.mix(i as u64);
    }
    fn write_u16(&mut self, i: u16) {
        self.mix(i as u64);
    }
    fn write_u32(&mut self, i: u32) {
        self.mix(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        self.mix(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.mix(i as u64);
    }
    fn write_i64(&mut self, i: i64) {
        self.mix(i as u64);
    }
    fn write_isize(&mut self, i: isize) {
        self.mix(i as i64 as u64);
    }
}
