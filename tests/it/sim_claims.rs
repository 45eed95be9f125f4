//! The checkable claims of the shipped sims' headers hold for what the sims do: a sim that
//! promises retries has a way to retry and retries, one that promises redeliveries redelivers
//! for every model it applies to, different intents send different orders unless the header
//! says they send the same body, and the claims of single sims about what causes what.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use idemsim::catalog;
use idemsim::model::Model;
use idemsim::run::{self, RunOptions};
use idemsim::scenario::{Sim, intent_body};
use idemsim::sweep;

use super::{all_models, model, root, sim};

/// Every shipped sim: (path relative to the root, its header comment, its text, the sim).
fn shipped() -> Vec<(String, String, String, Arc<Sim>)> {
    catalog::files_under(&root().join("sims"))
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let header: Vec<&str> = text
                .lines()
                .take_while(|l| l.starts_with('#'))
                .map(|l| l.trim_start_matches('#').trim())
                .collect();
            let rel = p.strip_prefix(root()).unwrap().to_string_lossy().into_owned();
            let s = Arc::new(Sim::load(&p).unwrap_or_else(|e| panic!("{e}")));
            (rel, header.join(" "), text, s)
        })
        .collect()
}

/// The `[[request]]` tables as written (before `intents` expansion), by id.
fn written_requests(text: &str) -> BTreeMap<String, toml::Table> {
    let t: toml::Table = toml::from_str(text).unwrap();
    let Some(toml::Value::Array(a)) = t.get("request") else { return BTreeMap::new() };
    a.iter()
        .filter_map(|r| r.as_table())
        .map(|r| (r["id"].as_str().unwrap().to_string(), r.clone()))
        .collect()
}

/// A header that says the client retries or the sender redelivers (and not that it does not).
fn promises_retries(header: &str) -> bool {
    let h = header.to_lowercase();
    let says = h.split(|c: char| !(c.is_alphanumeric() || c == '-')).any(|w| {
        matches!(w, "retry" | "retries" | "retried" | "redelivers" | "redelivered" | "redelivery")
    });
    says && !h.contains("no retries")
}

fn says_same_body(header: &str) -> bool {
    header.to_lowercase().contains("same body")
}

/// `intents = N` gives each intent its own order unless the request says `same_body`; and a
/// request that says `same_body` stands in a sim whose header says so.
#[test]
fn intents_send_different_orders_unless_same_body() {
    let mut expanded = 0;
    for (rel, header, text, s) in shipped() {
        for (id, r) in written_requests(&text) {
            let n = r.get("intents").and_then(|v| v.as_integer()).unwrap_or(1) as usize;
            if n < 2 {
                continue;
            }
            expanded += 1;
            let same = r.get("same_body").and_then(|v| v.as_bool()).unwrap_or(false);
            let bodies: Vec<&str> =
                s.requests.iter().filter(|q| q.group == id).map(|q| q.body.as_str()).collect();
            assert_eq!(bodies.len(), n, "{rel}: {id}");
            let distinct: std::collections::BTreeSet<&&str> = bodies.iter().collect();
            if same {
                assert!(says_same_body(&header), "{rel}: {id} sends one body without saying so");
                assert_eq!(distinct.len(), 1, "{rel}: {id}");
            } else {
                assert_eq!(distinct.len(), n.min(30), "{rel}: {id}: {bodies:?}");
                // The first intent sends the body as written (or the default order).
                let written = r.get("body").and_then(|b| b.as_str());
                assert_eq!(
                    bodies[0],
                    written.unwrap_or(r#"{"item":"test-item","qty":2}"#),
                    "{rel}: {id}"
                );
                // Each is a valid order the front half admits (so no intent is refused 400).
                for b in &bodies {
                    assert!(intent_body(b, 1).is_some(), "{rel}: {id}: {b}");
                }
            }
        }
    }
    assert!(expanded >= 10, "{expanded} sims with intents = N");
}

/// Two different intents of one client (same principal, method and path) send different
/// bodies, unless the header says they send the same body: a key or a dedupe derived from
/// the payload must not merge them by accident of the sim.
#[test]
fn different_intents_of_one_client_send_different_bodies_unless_said() {
    let mut equal_said = Vec::new();
    for (rel, header, _, s) in shipped() {
        // The first request of each intent.
        let mut firsts: Vec<&idemsim::scenario::RequestSpec> = Vec::new();
        for q in &s.requests {
            if !firsts.iter().any(|f| f.intent == q.intent) {
                firsts.push(q);
            }
        }
        for (i, a) in firsts.iter().enumerate() {
            for b in &firsts[i + 1..] {
                let same_client =
                    (a.principal(), &a.method, &a.path) == (b.principal(), &b.method, &b.path);
                if same_client && a.body_for(1) == b.body_for(1) {
                    assert!(
                        says_same_body(&header),
                        "{rel}: intents {} and {} send one body, unsaid",
                        a.intent,
                        b.intent
                    );
                    equal_said.push(rel.clone());
                }
            }
        }
    }
    equal_said.dedup();
    assert!(equal_said.iter().any(|r| r.ends_with("equal-payload-intents.toml")), "{equal_said:?}");
}

/// A sim whose header says its client retries (or its sender redelivers) has a way to: a
/// retry rule with more than one attempt, or a later request with the same key or intent (a
/// retry written out). And a sim with a retry rule says so.
#[test]
fn sims_that_promise_retries_can_retry_and_sims_that_retry_say_so() {
    for (rel, header, _, s) in shipped() {
        let has_rule = s.requests.iter().any(|q| q.policy.max_attempts > 1);
        let written_out = s.requests.iter().enumerate().any(|(i, q)| {
            s.requests[..i]
                .iter()
                .any(|p| p.intent == q.intent || (p.key.is_some() && p.key == q.key))
        });
        if promises_retries(&header) {
            assert!(has_rule || written_out, "{rel}: promises retries and cannot retry");
        }
        if has_rule {
            assert!(promises_retries(&header), "{rel}: retries, and its header does not say so");
        }
    }
}

/// Every attempt after the first of any request, over the seeds.
fn second_attempts(s: &Arc<Sim>, m: &Arc<Model>, seeds: std::ops::Range<u64>) -> usize {
    seeds
        .map(|seed| {
            let r = run::run(s, m, seed, RunOptions::default()).unwrap().report;
            r.requests
                .iter()
                .flat_map(|q| q.copies.iter())
                .map(|c| c.len().saturating_sub(1))
                .sum::<usize>()
        })
        .sum()
}

/// A sim whose header promises redeliveries redelivers, on some seed of its range, for every
/// model it applies to (not only for the models that happen to fail).
#[test]
fn sims_that_promise_redeliveries_redeliver() {
    let models = all_models();
    let mut checked = 0;
    for (rel, header, _, s) in shipped() {
        if !header.to_lowercase().contains("redeliver") {
            continue;
        }
        // A redelivery the sim writes out as its own request needs no run.
        if s.requests.iter().all(|q| q.policy.max_attempts == 1) {
            continue;
        }
        for m in models.iter().filter(|m| run::not_applicable(&s, m).is_none()) {
            let seeds = s.seeds.clone();
            let found = seeds.clone().find(|&seed| second_attempts(&s, m, seed..seed + 1) > 0);
            assert!(found.is_some(), "{rel} × {}: no redelivery on seeds {seeds:?}", m.name);
            checked += 1;
        }
    }
    assert!(checked >= 3, "{checked}");
}

/// webhook-status-events: about three seeds in five redeliver an event, and the redelivery is
/// answered from the event id's record (a replay), not applied again.
#[test]
fn status_events_are_redelivered_and_the_event_id_absorbs_them() {
    let s = sim("sims/catalogue/webhook-status-events.toml");
    for m in ["webhook-status-last-write", "webhook-status-monotonic"] {
        let m = model(m);
        let (mut with, mut replayed) = (0, 0);
        for seed in s.seeds.clone() {
            let r = run::run(&s, &m, seed, RunOptions::default()).unwrap().report;
            let later: Vec<_> = r
                .requests
                .iter()
                .flat_map(|q| q.copies.iter())
                .flat_map(|c| c.iter().skip(1))
                .collect();
            with += !later.is_empty() as u32;
            replayed += later.iter().filter(|a| a.status == Some(200) && a.replayed).count();
        }
        assert!((40..=80).contains(&with), "{}: {with} seeds of 100 redeliver", m.name);
        assert!(replayed > 0, "{}", m.name);
    }
}

/// contention-two-processes: the clients retry, and a design that answers the loser 503 gets
/// its order through on the retry (with no retry it was left unfinished on every seed).
#[test]
fn contention_clients_retry_a_busy_answer() {
    let s = sim("sims/catalogue/contention-two-processes.toml");
    assert!(s.requests.iter().all(|q| q.policy.max_attempts > 1
        && q.policy.on.transport
        && [409, 500, 502, 503, 504].iter().all(|c| q.policy.on.statuses.contains(c))));
    let c = sweep::run_matrix(
        std::slice::from_ref(&s),
        &[model("transactional-deferred")],
        Some(0..20),
        2,
    )
    .unwrap()
    .remove(0);
    assert!(c.statuses.get("503").is_some_and(|n| *n > 0), "{:?}", c.statuses);
    assert!(c.violations.is_empty() && c.passed, "{:?}", c.violations);
    // Two different orders: a business key on the item sees no taken slot.
    assert_ne!(s.requests[0].body, s.requests[1].body);
    let c = sweep::run_matrix(&[s], &[model("booking-transactional")], Some(0..10), 2)
        .unwrap()
        .remove(0);
    assert!(c.passed, "{:?}", c.first_failure);
}

/// partition: the header says the partition also cuts the payment provider; a design that
/// calls it from the cut process waits out its effect timeout.
#[test]
fn the_partition_cuts_the_provider_too() {
    let s = sim("sims/faults/partition.toml");
    let m = model("stripe-v1");
    let cut = (0..20).any(|seed| {
        let out = run::run(&s, &m, seed, RunOptions { keep_history: true }).unwrap();
        let t = out.history.unwrap().render();
        t.lines().any(|l| l.contains("server-1") && l.contains("effect: no acknowledgement"))
    });
    assert!(cut);
}

/// proxy-resend measures the resend, not a rate limiter: the orders are spread so that the
/// shipped limiters (10/s, burst 2) never answer 429, while resends still happen.
#[test]
fn proxy_resend_is_not_rate_limited() {
    let s = sim("sims/faults/proxy-resend.toml");
    for m in ["rate-limit-after-claim", "stripe-v1-rate-limited"] {
        let c = sweep::run_matrix(std::slice::from_ref(&s), &[model(m)], Some(0..100), 2)
            .unwrap()
            .remove(0);
        assert_eq!(c.statuses.get("429"), None, "{m}: {:?}", c.statuses);
    }
    let resent = (0..20).any(|seed| {
        run::run(&s, &model("transactional"), seed, RunOptions { keep_history: true })
            .unwrap()
            .history
            .unwrap()
            .render()
            .contains("request resent by a proxy")
    });
    assert!(resent);
}

/// restart-keeps-key and restart-loses-key: the restart comes back inside every shipped
/// model's key retention, so no second execution there is excused as an expiry.
#[test]
fn client_restarts_come_back_inside_every_retention() {
    let models = all_models();
    let shortest = models.iter().filter_map(|m| m.key.as_ref()?.retention_us).min().unwrap();
    for rel in ["sims/clients/restart-keeps-key.toml", "sims/clients/restart-loses-key.toml"] {
        let s = sim(rel);
        let after = &s.requests[s.request_index("after-restart").unwrap()];
        assert!(after.delay_us < shortest, "{rel}: {} µs", after.delay_us);
        let cells = sweep::run_matrix(&[s], &models, Some(0..10), 2).unwrap();
        for c in cells {
            assert!(c.violations.values().all(|v| !v.permitted), "{rel} × {}", c.model);
        }
    }
}

/// cache-faults: the header says a third attempt can start up to 2.5 s after the first, far
/// inside the cache designs' 24 h TTL.
#[test]
fn cache_faults_header_states_its_retry_window() {
    let (_, header, _, s) =
        shipped().into_iter().find(|(r, ..)| r.ends_with("cache-faults.toml")).unwrap();
    assert_eq!(s.retry_window_us(), 2_500_000);
    assert!(header.contains("up to 2.5 s"), "{header}");
    let ttl = model("ttl-cache-set-nx").key.as_ref().unwrap().retention_us.unwrap();
    assert_eq!(ttl, 86_400_000_000);
    assert!(header.contains("24 h TTL"), "{header}");
}

/// clock-jump: the step decides only the lease designs; every other cell is the same with
/// `jump_ms = 0`, seed by seed.
#[test]
fn clock_jump_moves_only_the_lease_designs() {
    let text = std::fs::read_to_string(root().join("sims/dependencies/clock-jump.toml")).unwrap();
    let no_jump = text.replace("jump_ms = 2000", "jump_ms = 0");
    assert_ne!(text, no_jump);
    let jump = Arc::new(Sim::parse(Path::new("clock-jump.toml"), &text).unwrap());
    let still = Arc::new(Sim::parse(Path::new("clock-jump.toml"), &no_jump).unwrap());
    let models = all_models();
    let a = sweep::run_matrix(&[jump], &models, Some(0..30), 2).unwrap();
    let b = sweep::run_matrix(&[still], &models, Some(0..30), 2).unwrap();
    let mut moved = Vec::new();
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.model, y.model);
        if x.violations != y.violations || x.passed != y.passed {
            moved.push(x.model.as_str());
        }
    }
    assert_eq!(moved, ["lease", "lease-fencing"]);
    // And the cells the header names fail without the step as with it.
    for (x, y) in a.iter().zip(&b) {
        if ["retry-loop-effect-inside", "no-key"].contains(&x.model.as_str()) {
            assert!(!x.violations.is_empty() && x.violations == y.violations, "{}", x.model);
        }
    }
}

/// The signup sims: one person's requests send one form, different people different ones, so
/// a business key on the item is one per account (booking-transactional refuses the second
/// person only when the sim gives it the same form: never here).
#[test]
fn signup_forms_are_one_per_account() {
    let mut checked = 0;
    for (rel, header, _, s) in shipped() {
        if !header.contains("signup form") {
            continue;
        }
        checked += 1;
        for a in &s.requests {
            for b in &s.requests {
                let same_person = a.intent == b.intent;
                assert_eq!(same_person, a.body == b.body, "{rel}: {} / {}", a.id, b.id);
            }
        }
    }
    assert_eq!(checked, 3);
    // Two people, one email: booking-transactional has no key on the email, and now says so.
    let c = sweep::run_matrix(
        &[sim("sims/business/shared-email.toml")],
        &[model("booking-transactional"), model("signup-unique-email")],
        Some(0..5),
        2,
    )
    .unwrap();
    assert!(!c[0].passed && c[1].passed, "{:?} {:?}", c[0].first_failure, c[1].first_failure);
}
