//! Our message layer over madsim's datagram endpoints: HTTP-shaped messages, and the place
//! where network faults (drops, duplicates, delays) are decided from the seed and recorded.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use madsim::net::Endpoint;
use madsim::rand::Rng;

use super::shared::{REQ_TAG, World, chance};
use crate::history::{Actor, Node, What};
use crate::http::{Request, Response};

/// A request in flight: the HTTP request plus the harness's routing data.
#[derive(Debug, Clone)]
pub(crate) struct Envelope {
    /// Tag the reply must carry (unique per attempt).
    pub reply_tag: u64,
    pub reply_to: SocketAddr,
    /// Which attempt this is (request index, copy, attempt): for injections and labels.
    pub who: Actor,
    pub http: Request,
}

impl Envelope {
    /// Index of the request in the sim.
    pub fn req(&self) -> usize {
        match self.who {
            Actor::Attempt { req, .. } => req as usize,
            _ => unreachable!("requests are sent by attempts"),
        }
    }
}

/// An external effect sent to the receiver.
#[derive(Debug, Clone)]
pub(crate) struct EffectMsg {
    pub reply_tag: u64,
    pub reply_to: SocketAddr,
    pub intent: String,
    /// Who performs the effect (an attempt, or the relay delivering a message).
    pub from: Actor,
    /// The receiver ignores a second delivery with the same key (None: never deduplicated).
    pub dedupe: Option<String>,
}

/// Send a request to a server process, through the sim's network faults.
pub(crate) async fn send_request(
    world: &Arc<World>,
    node: Node,
    ep: &Arc<Endpoint>,
    dst: SocketAddr,
    env: Envelope,
) {
    let f = &world.sim.faults;
    if chance(f.request_drop) {
        world.emit(node, Some(env.who), What::RequestDropped);
        return;
    }
    let copies = if chance(f.duplicate) {
        world.emit(node, Some(env.who), What::RequestDuplicated);
        2
    } else {
        1
    };
    for _ in 0..copies {
        let delay = delay(world, node, env.who);
        deliver(ep, dst, REQ_TAG, Box::new(env.clone()), delay).await;
    }
}

/// Send a reply back to a client, through the sim's network faults.
pub(crate) async fn send_reply(
    world: &Arc<World>,
    node: Node,
    who: Actor,
    ep: &Arc<Endpoint>,
    dst: SocketAddr,
    tag: u64,
    resp: Response,
) {
    let f = &world.sim.faults;
    if chance(f.reply_drop) {
        world.emit(node, Some(who), What::ReplyDropped { status: resp.status });
        return;
    }
    let delay = delay(world, node, who);
    deliver(ep, dst, tag, Box::new(resp), delay).await;
}

fn delay(world: &World, node: Node, who: Actor) -> Option<Duration> {
    let f = &world.sim.faults;
    if !chance(f.delay) {
        return None;
    }
    let ms = madsim::rand::thread_rng().gen_range(f.delay_ms.0..=f.delay_ms.1);
    world.emit(node, Some(who), What::Delayed { ms });
    Some(Duration::from_millis(ms))
}

async fn deliver(
    ep: &Arc<Endpoint>,
    dst: SocketAddr,
    tag: u64,
    msg: madsim::net::Payload,
    delay: Option<Duration>,
) {
    match delay {
        None => {
            let _ = ep.send_to_raw(dst, tag, msg).await;
        }
        Some(d) => {
            // Held back in the network: the sender goes on, the message arrives later.
            let ep = ep.clone();
            madsim::task::spawn_local(async move {
                madsim::time::sleep(d).await;
                let _ = ep.send_to_raw(dst, tag, msg).await;
            });
        }
    }
}
