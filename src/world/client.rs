//! Clients: each `[[request]]` of a sim is a client that waits for its dependencies, then
//! sends its copies' attempts and retries them as its policy says.

use std::sync::Arc;

use super::net::{self, Envelope, Mailbox, Msg};
use super::shared::{World, draw};
use super::{clock, control};
use crate::history::{Actor, Node, What};
use crate::http::Request;
use crate::report::{AttemptOutcome, Outcome};
use crate::scenario::{NextAttempt, RequestSpec};

/// Run one request spec: all copies concurrently, each with its retries.
pub(crate) async fn run_request(world: Arc<World>, req: usize) {
    let spec = &world.sim.requests[req];
    world.wait_for(&spec.after).await;
    if spec.delay_us > 0 {
        clock::sleep_us(spec.delay_us).await;
    }
    let mut copies = Vec::new();
    for copy in 0..spec.copies {
        let copy_task = Box::pin(run_copy(world.clone(), req, copy));
        copies.push(madsim::task::spawn(super::explorer::owned(Some((req, copy)), copy_task)));
    }
    for c in copies {
        let _ = c.await;
    }
    if spec.expect.needs_probe() {
        let req32 = req as u32;
        match control::probe(&world).await {
            Some((rows, keys, responses)) => {
                world.emit(Node::Control, None, What::Probe { req: req32, rows, keys });
                let mut st = world.lock();
                st.outcomes[req].rows_after = Some(rows);
                st.outcomes[req].keys_after = Some(keys);
                st.outcomes[req].responses_after = Some(responses);
            }
            None => world.emit(Node::Control, None, What::ProbeGaveUp { req: req32 }),
        }
    }
    world.lock().outcomes[req].finished = true;
    world.mark_done(&spec.id);
}

/// One copy of a request: its attempts, retried as the policy says.
async fn run_copy(world: Arc<World>, req: usize, copy: u32) {
    let spec = &world.sim.requests[req];
    let policy = &spec.policy;
    let node = Node::Client(req as u32);
    let (lo, hi) = spec.spread_us;
    if hi > 0 {
        clock::sleep_us(draw((lo, hi))).await;
    }
    let first_sent = world.now_us();
    for attempt in 1..=policy.max_attempts {
        let who = Actor::Attempt { req: req as u32, copy, attempt };
        let outcome = send_attempt(&world, req, copy, attempt).await;
        let next = spec.after_attempt(attempt, outcome.status);
        world.record_attempt(req, copy, outcome);
        match next {
            NextAttempt::Stop => return,
            NextAttempt::AtOnce => continue,
            NextAttempt::AfterBackoff => {}
        }
        let mut backoff = policy.backoff_before_us(attempt);
        if policy.jitter && backoff > 0 {
            backoff = draw((backoff / 2, backoff));
        }
        if let Some(h) = policy.horizon_us
            && world.now_us().saturating_add(backoff).saturating_sub(first_sent) > h
        {
            world.emit(node, Some(who), What::GaveUp { horizon_us: h });
            return;
        }
        clock::sleep_us(backoff).await;
    }
}

/// The HTTP request of one attempt (the client's clock sent when it is skewed).
fn attempt_request(world: &World, spec: &RequestSpec, attempt: u32, key: Option<&str>) -> Request {
    let client_time = spec
        .clock_skew_us
        .map(|skew| (world.now_us() as i64).saturating_add(skew).div_euclid(1000));
    spec.request(attempt, key, client_time)
}

/// Send one attempt and wait for its reply (or a reset, or the timeout): what it saw.
async fn send_attempt(world: &Arc<World>, req: usize, copy: u32, attempt: u32) -> AttemptOutcome {
    let spec = &world.sim.requests[req];
    let (node, who) = (Node::Client(req as u32), Actor::Attempt { req: req as u32, copy, attempt });
    let key = spec.attempt_key(attempt);
    let http = attempt_request(world, spec, attempt, key.as_deref());
    let process = world.route(req, copy);
    let mailbox = Mailbox::open(world);
    let (method, path) = (http.method.clone(), http.path.clone());
    let sent = What::Sent { to: process as u32, method, path, key: key.clone() };
    world.emit(node, Some(who), sent);
    let sent_ms = world.now_ms_f();
    let connect_gap_us = draw(world.sim.world.connect_gap_us);
    let env = Envelope {
        reply_tag: mailbox.tag,
        who,
        http,
        connect_gap_us,
        arrived_us: 0,
        held: Default::default(),
    };
    net::send_request(world, node, process, env);
    let timeout_us = spec.attempt_timeout_us(attempt);
    let (reply, reset) = match clock::timeout_us(timeout_us, mailbox.recv()).await {
        Some(Msg::Reply(r)) => (Some(r), false),
        Some(_) => (None, true),
        None => (None, false),
    };
    drop(mailbox);
    let marker =
        world.model.key.as_ref().map(|k| k.replay_marker.as_str()).unwrap_or("Idempotent-Replayed");
    let replayed = reply.as_ref().is_some_and(|r| r.header(marker).is_some());
    let reply_meta = reply.as_ref().map(|r| r.meta).unwrap_or_default();
    let seen = match &reply {
        Some(r) => What::Received { status: r.status, body: r.body.clone(), replayed },
        None if reset => What::ConnectionReset,
        None => What::TransportFailure { timeout_us },
    };
    world.emit(node, Some(who), seen);
    AttemptOutcome {
        outcome: if reply.is_some() { Outcome::Reply } else { Outcome::TransportFailure },
        status: reply.as_ref().map(|r| r.status),
        replayed,
        body: reply.map(|r| r.body),
        key,
        sent_ms,
        done_ms: world.now_ms_f(),
        reason: reply_meta.reason,
        exec: reply_meta.exec,
        row: None,
    }
}
