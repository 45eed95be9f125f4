//! Our network layer over madsim's datagram endpoints: HTTP-shaped messages, and the place
//! where network faults (drops, duplicates, delays) are decided from the seed and recorded.

use std::net::SocketAddr;

use madsim::net::Endpoint;

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
    pub http: Request,
}

/// An external effect sent to the receiver.
#[derive(Debug, Clone)]
pub(crate) struct EffectMsg {
    pub reply_tag: u64,
    pub reply_to: SocketAddr,
    pub intent: String,
    pub label: String,
}

/// Send a request to a server process.
pub(crate) async fn send_request(world: &World, ep: &Endpoint, dst: SocketAddr, env: Envelope) {
    let _ = world;
    let _ = ep.send_to_raw(dst, crate::world::REQ_TAG, Box::new(env)).await;
}

/// Send a reply back to a client.
pub(crate) async fn send_reply(world: &World, ep: &Endpoint, dst: SocketAddr, tag: u64, resp: Response) {
    let _ = world;
    let _ = ep.send_to_raw(dst, tag, Box::new(resp)).await;
}
