//! The external effect provider (e-mail, payment): the receiver task counts deliveries, and
//! effects per intent after deduplicating by the delivery's key when the model sends one
//! (forgetting a key after its retention). Its faults: a decline (a business refusal,
//! remembered under the key), an error although the effect happened, an answer lost, an
//! answer late.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::net::{self, Dest, EffectMsg, Msg};
use super::shared::{World, chance, draw};
use crate::history::{Node, What};
use crate::report::EffectRecord;

/// What the provider remembers (part of the run's [`State`](super::shared::State)).
#[derive(Default)]
pub(crate) struct Provider {
    /// (intent, µs) of every effect the provider performed (after dedupe), in order.
    pub effect_log: Vec<EffectRecord>,
    /// Every delivery the provider got (before deduplication).
    pub deliveries: u64,
    /// Dedupe keys the provider has seen, with when it first saw each (µs).
    pub dedupe_seen: BTreeMap<String, u64>,
    /// Dedupe keys the provider declined (a retry with one is declined again).
    pub declined: BTreeSet<String>,
}

impl Provider {
    /// Is this delivery declined? A key declined before is declined again; a key seen (and
    /// performed) before is not; otherwise the decline fault is drawn. A decline is counted as
    /// a delivery and remembered under its key.
    fn decline(&mut self, dedupe: Option<&String>, rate: f64) -> bool {
        let again = dedupe.is_some_and(|k| self.declined.contains(k));
        let seen = dedupe.is_some_and(|k| self.dedupe_seen.contains_key(k));
        let now = again || (!seen && chance(rate));
        if now && let Some(k) = dedupe {
            self.declined.insert(k.clone());
        }
        if now {
            self.deliveries += 1;
        }
        now
    }

    /// Count a delivery at `t` (µs) and perform it unless its key was seen within the
    /// retention (None: kept forever). `true`: performed (fresh).
    fn deliver(&mut self, msg: &EffectMsg, t: u64, retention: Option<u64>) -> bool {
        self.deliveries += 1;
        let fresh = match &msg.dedupe {
            // The provider forgets a dedupe key after its retention.
            Some(k) => match self.dedupe_seen.get(k) {
                Some(seen) if retention.is_none_or(|r| t < seen.saturating_add(r)) => false,
                _ => {
                    self.dedupe_seen.insert(k.clone(), t);
                    true
                }
            },
            None => true,
        };
        if fresh {
            let record =
                EffectRecord { intent: msg.intent.clone(), at_us: t, exec: Some(msg.exec) };
            self.effect_log.push(record);
        }
        fresh
    }
}

/// The provider's task: every effect call in its inbox, served in order.
pub(crate) async fn receiver_main(world: Arc<World>) {
    loop {
        for msg in net::accept_effects(&world).await {
            serve(&world, msg);
        }
        // The receiver's queue is work quiescence counts: it is empty now.
        world.work_changed();
    }
}

/// One effect call: declined, or performed (or deduplicated) and answered.
fn serve(world: &World, msg: EffectMsg) {
    let f = &world.sim.faults.effects;
    // A decline (a business refusal) performs nothing; the provider remembers it under the
    // call's dedupe key, so an idempotent retry is declined again.
    let declined = world.lock().provider.decline(msg.dedupe.as_ref(), f.decline);
    if declined {
        world.emit(Node::Receiver, Some(msg.from), What::Declined { intent: msg.intent.clone() });
        let after = world.effect_latency_us();
        let to = Dest::Tag { tag: msg.reply_tag, process: Some(msg.process) };
        world.send(None, to, Some(msg.from), Msg::Ack { ok: false, declined: true }, after);
        return;
    }
    let fresh = {
        let t = world.now_us();
        let retention = world.sim.world.effect_dedupe_retention_us;
        world.lock().provider.deliver(&msg, t, retention)
    };
    let (intent, from) = (msg.intent.clone(), msg.from);
    if fresh {
        world.emit(Node::Receiver, None, What::EffectApplied { intent, from });
    } else {
        world.emit(Node::Receiver, None, What::EffectDeduplicated { intent, from });
    }
    answer(world, &msg, fresh);
}

/// The answer, through the provider's faults: an error although the effect happened, an
/// answer lost, an answer late.
fn answer(world: &World, msg: &EffectMsg, fresh: bool) {
    let f = &world.sim.faults.effects;
    let ok = !(fresh && chance(f.error_after_success));
    if !ok {
        world.emit(Node::Receiver, Some(msg.from), What::ProviderErrorAfterSuccess);
    }
    if chance(f.ack_drop) {
        world.emit(Node::Receiver, Some(msg.from), What::ProviderAnswerLost);
        return;
    }
    let mut after = world.effect_latency_us();
    if chance(f.delay) {
        let us = draw(f.delay_us);
        world.emit(Node::Receiver, Some(msg.from), What::Delayed { us });
        after += us;
    }
    let to = Dest::Tag { tag: msg.reply_tag, process: Some(msg.process) };
    world.send(None, to, Some(msg.from), Msg::Ack { ok, declined: false }, after);
}
