//! The `[[request]]`s: each parsed by named checks, `intents = N` expanded, the bounds that
//! keep a run's memory in check, and references to expanded requests relinked.

use toml::Spanned;

use super::file::{RequestExpectFile, RequestFile, RetryFile, SimFile, default_body};
use super::parse::Names;
use super::*;
use crate::input::{InputError, Source};
use crate::report::Outcome;

/// (written id, id of its last expanded intent) for every request with `intents > 1`.
pub(super) type Expanded = Vec<(String, String)>;

/// Every `[[request]]`, with `intents = N` expanded into N requests.
pub(super) fn parse_requests(
    file: Source,
    f: &SimFile,
    names: &Names,
    world: &WorldSpec,
) -> Result<(Vec<RequestSpec>, Expanded), InputError> {
    let mut requests = Vec::new();
    let mut expanded: Expanded = Vec::new();
    let (mut copies, mut attempts) = (0u64, 0u64);
    for r in &f.requests {
        let (spec, how) = parse_request(file, r, names, world)?;
        let intents = how.n;
        // The bounds that keep a run's memory in check, refused at the request that passes
        // them, before anything is expanded.
        if requests.len() + intents as usize > MAX_REQUESTS {
            return Err(file.err(
                r.id.span(),
                format!(
                    "{} requests after expanding `intents` up to here; at most {MAX_REQUESTS}",
                    requests.len() + intents as usize
                ),
            ));
        }
        copies += intents as u64 * spec.copies as u64;
        if copies > MAX_COPIES {
            return Err(file.err(
                r.id.span(),
                format!(
                    "{copies} copies up to here (copies × intents, summed over requests); at most \
                     {MAX_COPIES}"
                ),
            ));
        }
        attempts += intents as u64 * spec.copies as u64 * spec.policy.max_attempts as u64;
        if attempts > MAX_ATTEMPTS {
            return Err(file.err(
                r.id.span(),
                format!(
                    "{attempts} attempts possible up to here (copies × intents × \
                     retry.max_attempts, summed over requests); at most {MAX_ATTEMPTS}"
                ),
            ));
        }
        if intents > 1 {
            expanded.push((spec.id.clone(), format!("{}-{intents}", spec.id)));
            requests.extend(expand_intents(&spec, &how));
        } else {
            requests.push(spec);
        }
    }
    check_unique_ids(file, f, names, &requests)?;
    Ok((requests, expanded))
}

/// Every id, after expanding `intents`, is used once (by a request or an action).
fn check_unique_ids(
    file: Source,
    f: &SimFile,
    names: &Names,
    requests: &[RequestSpec],
) -> Result<(), InputError> {
    let actions: std::collections::BTreeSet<&str> =
        f.actions.iter().map(|a| a.id.get_ref().as_str()).collect();
    let mut seen = std::collections::BTreeSet::new();
    for q in requests {
        let clash = !seen.insert(q.id.as_str()) || actions.contains(q.id.as_str());
        if clash {
            return Err(file.err(
                names.span_of(&q.group),
                format!("id `{}` is used twice (after expanding `intents`)", q.id),
            ));
        }
    }
    Ok(())
}

/// How a request's `intents = N` expands: N, whether every intent sends the body as written
/// (`same_body`), and the wait before each intent after the first (`gap_ms`, µs).
struct Intents {
    n: u32,
    same_body: bool,
    gap_us: u64,
    /// `concurrent = true`: every intent starts at once (different orders in one burst), not
    /// each after the previous one.
    concurrent: bool,
}

/// One `[[request]]` as written, and how its intents expand.
fn parse_request(
    file: Source,
    r: &RequestFile,
    names: &Names,
    world: &WorldSpec,
) -> Result<(RequestSpec, Intents), InputError> {
    let copies = parse_copies(file, &r.copies)?;
    let route = parse_route(file, &r.process, world.processes)?;
    let policy = match &r.retry {
        None => Policy::default(),
        Some(rt) => parse_retry(file, rt)?,
    };
    let expect = match &r.expect {
        None => RequestExpect::default(),
        Some(e) => parse_request_expect(file, e, names)?,
    };
    let timeout_us = file.ms("timeout_ms", &r.timeout_ms, world.client_timeout_us, 1)?;
    if let (Some(us), Some(rt)) = (policy.abandon_first_us, &r.retry)
        && us >= timeout_us
    {
        let span = rt.abandon_first_ms.as_ref().map_or(0..0, |s| s.span());
        return Err(file.err(
            span,
            format!(
                "retry.abandon_first_ms: expected less than the request's timeout ({} ms): the \
                 first attempt waits this long instead of timeout_ms",
                crate::units::show_ms(timeout_us)
            ),
        ));
    }
    let delay_us = file.ms("delay_ms", &r.delay_ms, 0, 0)?;
    let (how, body) = parse_intents(file, r)?;
    let id = r.id.get_ref().clone();
    let spec = RequestSpec {
        group: id.clone(),
        intent: r.intent.clone().unwrap_or_else(|| id.clone()),
        id,
        user: match r.user.as_deref() {
            None => Some("u1".into()),
            Some("") => None,
            Some(u) => Some(u.into()),
        },
        tenant: r.tenant.clone().filter(|t| !t.is_empty()),
        clock_skew_us: parse_clock_skew(file, &r.clock_skew_ms)?,
        if_match: parse_if_match(file, &r.if_match)?,
        method: r.method.clone().unwrap_or_else(|| "POST".into()),
        path: r.path.clone().unwrap_or_else(|| "/api/orders".into()),
        key: r.key.clone(),
        body,
        copies,
        spread_us: file.ms_range(
            "spread_ms",
            &r.spread_ms,
            (0, 0),
            |lo, hi| lo <= hi,
            "[low, high] with low <= high",
        )?,
        route,
        after: names.after_list(&r.after)?,
        delay_us,
        timeout_us,
        policy,
        expect,
    };
    Ok((spec, how))
}

/// `copies`: 1..=1000 (1 by default).
fn parse_copies(file: Source, copies: &Option<Spanned<u32>>) -> Result<u32, InputError> {
    match copies {
        None => Ok(1),
        Some(c) if (1..=1000).contains(c.get_ref()) => Ok(*c.get_ref()),
        Some(c) => Err(file.err(c.span(), "copies: expected 1..=1000")),
    }
}

/// `process`: a process (1-based), `"alternate"` or `"random"` (the first by default).
fn parse_route(
    file: Source,
    process: &Option<Spanned<toml::Value>>,
    processes: usize,
) -> Result<Route, InputError> {
    let Some(p) = process else { return Ok(Route::Fixed(0)) };
    match p.get_ref() {
        toml::Value::Integer(i) if *i >= 1 && (*i as usize) <= processes => {
            Ok(Route::Fixed(*i as usize - 1))
        }
        toml::Value::String(s) if s == "alternate" => Ok(Route::Alternate),
        toml::Value::String(s) if s == "random" => Ok(Route::Random),
        _ => Err(file.err(
            p.span(),
            format!("process: expected 1..={processes}, \"alternate\" or \"random\""),
        )),
    }
}

/// `intents`, `gap_ms`, `same_body` and `concurrent`: how the request expands, and the body it sends (its
/// intents vary it unless `same_body`, so it must be an order whose qty can vary).
fn parse_intents(file: Source, r: &RequestFile) -> Result<(Intents, String), InputError> {
    let intents = match &r.intents {
        None => 1,
        Some(n) if (1..=1000).contains(n.get_ref()) => *n.get_ref(),
        Some(n) => return Err(file.err(n.span(), "intents: expected 1..=1000")),
    };
    let gap_us = file.ms("gap_ms", &r.gap_ms, 0, 0)?;
    let body = r.body.clone().unwrap_or_else(default_body);
    let same_body = r.same_body.as_ref().is_some_and(|b| *b.get_ref());
    if let Some(n) = &r.intents
        && intents > 1
        && !same_body
        && intent_body(&body, 1).is_none()
    {
        return Err(file.err(
            n.span(),
            format!(
                "intents = {intents}: each intent sends its own order, and this body is not an \
                 order whose qty can be varied ({{\"item\":…,\"qty\":1..=10}}); set \
                 same_body = true to send it to every intent"
            ),
        ));
    }
    let concurrent = r.concurrent.as_ref().is_some_and(|b| *b.get_ref());
    if let (true, Some(g)) = (concurrent, &r.gap_ms) {
        return Err(file.err(
            g.span(),
            "gap_ms: intents that are `concurrent` start at once; a gap is between sequential \
             intents",
        ));
    }
    Ok((Intents { n: intents, same_body, gap_us, concurrent }, body))
}

/// `clock_skew_ms`: this request's client clock offset, within a day either way.
fn parse_clock_skew(file: Source, v: &Option<Spanned<f64>>) -> Result<Option<i64>, InputError> {
    match v {
        None => Ok(None),
        Some(v) if v.get_ref().abs() <= 86_400_000.0 => {
            Ok(Some((v.get_ref() * 1000.0).round() as i64))
        }
        Some(v) => Err(file.err(v.span(), "clock_skew_ms: expected -86400000..=86400000")),
    }
}

/// `if_match`: a version (sent quoted) or the header's text as written.
fn parse_if_match(
    file: Source,
    v: &Option<Spanned<toml::Value>>,
) -> Result<Option<String>, InputError> {
    let Some(v) = v else { return Ok(None) };
    match v.get_ref() {
        toml::Value::Integer(i) if *i >= 1 => Ok(Some(format!("\"{i}\""))),
        toml::Value::String(s) => Ok(Some(s.clone())),
        _ => Err(file.err(v.span(), "if_match: expected a version (1, 2, …) or the header's text")),
    }
}

/// A `retry` table.
fn parse_retry(file: Source, rt: &RetryFile) -> Result<Policy, InputError> {
    let max_attempts = match &rt.max_attempts {
        None => 5,
        Some(m) if (1..=100).contains(m.get_ref()) => *m.get_ref(),
        Some(m) => return Err(file.err(m.span(), "retry.max_attempts: expected 1..=100")),
    };
    let default_on = [
        Spanned::new(0..0, toml::Value::String("transport".into())),
        Spanned::new(0..0, toml::Value::Integer(503)),
    ];
    let mut on = RetryOn::default();
    for o in rt.on.as_deref().unwrap_or(&default_on) {
        match o.get_ref() {
            toml::Value::String(s) if s == "transport" => on.transport = true,
            toml::Value::String(s) if s == "5xx" => on.statuses.extend([500, 502, 503, 504]),
            toml::Value::Integer(s) if [202, 409, 425, 429, 500, 502, 503, 504].contains(s) => {
                on.statuses.insert(*s as u16);
            }
            _ => {
                return Err(file.err(
                    o.span(),
                    "retry.on: expected \"transport\", \"5xx\" (500, 502, 503, 504) or one of \
                     202, 409, 425, 429, 500, 502, 503, 504 (never 400/401/422)",
                ));
            }
        }
    }
    let backoff_us = file.ms("retry.backoff_ms", &rt.backoff_ms, 100_000, 0)?;
    let backoff_cap_us = file.ms("retry.backoff_cap_ms", &rt.backoff_cap_ms, 5_000_000, 0)?;
    let horizon_us = rt
        .horizon_ms
        .is_some()
        .then(|| file.ms("retry.horizon_ms", &rt.horizon_ms, 0, 0))
        .transpose()?;
    let abandon_first_us = rt
        .abandon_first_ms
        .is_some()
        .then(|| file.ms("retry.abandon_first_ms", &rt.abandon_first_ms, 0, 1))
        .transpose()?;
    if abandon_first_us.is_some() && max_attempts < 2 {
        let span = rt.abandon_first_ms.as_ref().map_or(0..0, |s| s.span());
        return Err(file.err(span, "retry.abandon_first_ms: needs max_attempts of 2 or more"));
    }
    Ok(Policy {
        max_attempts,
        on,
        abandon_first_us,
        backoff_us,
        backoff_cap_us: backoff_cap_us.max(backoff_us),
        jitter: rt.jitter.unwrap_or(true),
        horizon_us,
        new_key_per_attempt: rt.new_key.unwrap_or(false),
        retry_body: rt.body.clone(),
    })
}

/// A request's `expect` table.
fn parse_request_expect(
    file: Source,
    e: &RequestExpectFile,
    names: &Names,
) -> Result<RequestExpect, InputError> {
    let outcome = file.choice(
        &e.outcome,
        "expect.outcome",
        &[("reply", Outcome::Reply), ("transport-failure", Outcome::TransportFailure)],
    );
    let outcome = match outcome {
        Ok(o) => o,
        Err(_) => {
            let span = e.outcome.as_ref().map(|o| o.span()).unwrap_or(0..0);
            return Err(
                file.err(span, "expect.outcome: expected \"reply\" or \"transport-failure\"")
            );
        }
    };
    if let Some(s) = &e.status
        && !(100..=599).contains(s.get_ref())
    {
        return Err(
            file.err(s.span(), format!("expect.status {}: expected 100..=599", s.get_ref()))
        );
    }
    Ok(RequestExpect {
        status: e.status.as_ref().map(|s| *s.get_ref()),
        outcome,
        replayed: e.replayed,
        id: e.id,
        same_id_as: e.same_id_as.as_ref().map(|s| names.known_request(s)).transpose()?,
        id_differs_from: e.id_differs_from.as_ref().map(|s| names.known_request(s)).transpose()?,
        same_id: e.same_id,
        rows_after: e.rows_after,
        keys_after: e.keys_after,
        responses_after: e.responses_after,
    })
}

/// `intents = N`: N logical operations one after the other, each with its own intent id, key
/// and order (unless `same_body`), each `gap_ms` after the previous one has finished. Others'
/// `after = "<id>"` waits for the last one.
fn expand_intents(base: &RequestSpec, how: &Intents) -> Vec<RequestSpec> {
    (1..=how.n)
        .map(|n| {
            let mut q = base.clone();
            q.id = format!("{}-{n}", base.id);
            q.intent = format!("{}-{n}", base.intent);
            q.key = base.key.as_ref().map(|k| format!("{k}-{n}"));
            if !how.same_body
                && let Some(b) = intent_body(&base.body, n)
            {
                q.body = b;
            }
            if n > 1 && !how.concurrent {
                q.after = vec![format!("{}-{}", base.id, n - 1)];
                q.delay_us = how.gap_us;
            }
            q
        })
        .collect()
}

/// The order intent `n` (1-based) of an `intents = N` request sends: the body as written for
/// the first, then the next orders after it in a fixed cycle of the 30 valid ones (`qty` 1..=10
/// of each catalogue item, qty first), so N intents send N different orders for N <= 30 and a
/// payload-derived key or dedupe cannot merge them. None when the body is not an order
/// (`{"item": <catalogue item>, "qty": 1..=10}`, nothing else).
pub fn intent_body(body: &str, n: u32) -> Option<String> {
    use crate::http::CATALOGUE;
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let o = v.as_object().filter(|o| o.len() == 2)?;
    let item = CATALOGUE.iter().position(|c| o.get("item").and_then(|i| i.as_str()) == Some(*c))?;
    let qty = o.get("qty").and_then(|q| q.as_i64()).filter(|q| (1..=10).contains(q))?;
    if n <= 1 {
        return Some(body.to_string());
    }
    let cycle = CATALOGUE.len() * 10;
    let k = (item * 10 + (qty as usize - 1) + (n as usize - 1)) % cycle;
    Some(format!(r#"{{"item":"{}","qty":{}}}"#, CATALOGUE[k / 10], k % 10 + 1))
}

/// Point `after` and expectation references at the last of an expanded request.
pub(super) fn link_requests(
    mut requests: Vec<RequestSpec>,
    rename: &impl Fn(&String) -> String,
) -> Vec<RequestSpec> {
    for q in &mut requests {
        q.after = q.after.iter().map(rename).collect();
        q.expect.same_id_as = q.expect.same_id_as.as_ref().map(rename);
        q.expect.id_differs_from = q.expect.id_differs_from.as_ref().map(rename);
    }
    requests
}
