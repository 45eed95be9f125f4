//! Our network layer over madsim's datagram endpoints: HTTP-shaped messages, and the place
//! where network faults (drops, duplicates, delays) are decided from the seed and recorded.

use std::net::SocketAddr;

use std::sync::Arc;
use std::time::Duration;

use madsim::net::Endpoint;
use madsim::rand::Rng;

use crate::http::{Request, Response};
use crate::world::World;

/// A request in flight: the HTTP request plus the harness's routing data.
#[derive(Debug, Clone)]
pub(crate) struct Envelope {
    /// Tag the reply must carry (unique per attempt).
    pub reply_tag: u64,
    pub reply_to: SocketAddr,
    /// Index of the request in the sim, copy, attempt (1-based): for injections and labels.
    pub req: usize,
    pub label: String,
    /// The client node's name (for the trace and sequence diagrams).
    pub client_node: String,
    pub http: Request,
}

/// An external effect sent to the receiver.
#[derive(Debug, Clone)]
pub(crate) struct EffectMsg {
    pub reply_tag: u64,
    pub reply_to: SocketAddr,
    pub intent: String,
    pub label: String,
    /// The receiver ignores a second delivery with the same key (None: never deduplicated).
    pub dedupe: Option<String>,
}

/// Draw one fault decision from the seed. Rates of 0 draw nothing, so adding a fault kind to
/// a sim does not perturb the schedules of sims without it.
pub(crate) fn hit(rate: f64) -> bool {
    rate > 0.0 && (rate >= 1.0 || madsim::rand::thread_rng().gen_bool(rate))
}

/// Send a request to a server process, through the sim's network faults.
pub(crate) async fn send_request(
    world: &Arc<World>,
    node: &str,
    ep: &Arc<Endpoint>,
    dst: SocketAddr,
    env: Envelope,
) {
    let f = &world.sim.faults;
    if hit(f.request_drop) {
        world.event(node, format!("{}: fault: request dropped in the network", env.label));
        return;
    }
    let copies = if hit(f.duplicate) {
        world.event(node, format!("{}: fault: request duplicated in the network", env.label));
        2
    } else {
        1
    };
    for _ in 0..copies {
        let delay = delay(world, node, &env.label);
        deliver(ep, dst, crate::world::REQ_TAG, Box::new(env.clone()), delay).await;
    }
}

/// Send a reply back to a client, through the sim's network faults.
pub(crate) async fn send_reply(
    world: &Arc<World>,
    node: &str,
    label: &str,
    ep: &Arc<Endpoint>,
    dst: SocketAddr,
    tag: u64,
    resp: Response,
) {
    let f = &world.sim.faults;
    if hit(f.reply_drop) {
        world.event(node, format!("{label}: fault: reply {} dropped in the network", resp.status));
        return;
    }
    let delay = delay(world, node, label);
    deliver(ep, dst, tag, Box::new(resp), delay).await;
}

fn delay(world: &World, node: &str, label: &str) -> Option<Duration> {
    let f = &world.sim.faults;
    if !hit(f.delay) {
        return None;
    }
    let ms = madsim::rand::thread_rng().gen_range(f.delay_ms.0..=f.delay_ms.1);
    world.event(node, format!("{label}: fault: message delayed {ms} ms"));
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

/// Whether a fresh success's reply is lost after the server committed (targeted fault).
pub(crate) fn drop_after_commit(world: &World) -> bool {
    hit(world.sim.faults.reply_drop_after_commit)
}

/// Whether the server process crashes at this step boundary.
pub(crate) fn crash_now(world: &World) -> bool {
    hit(world.sim.faults.crash)
}
