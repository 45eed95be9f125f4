//! How a sim's request becomes the HTTP request a real target's API expects: a target file's
//! `[[request]]` tables (method, path, headers and body as templates over the sim's request),
//! matched by the sim's method and path. A target without them speaks the reference
//! article's API, and gets the sim's request as it is.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

use super::target::Target;
use super::template::{Mode, Template};
use crate::http::{Header, Request};
use crate::input::{InputError, Source};
use crate::scenario::RequestSpec;

/// A `[[request]]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestFile {
    sim: Spanned<String>,
    method: Option<Spanned<String>>,
    path: Option<Spanned<String>>,
    #[serde(default)]
    headers: BTreeMap<String, Spanned<String>>,
    body: Option<Spanned<String>>,
    id: Option<Spanned<String>>,
}

/// How one kind of the sims' requests is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestMap {
    /// The sim's method and path this maps (`POST /api/orders`).
    pub sim_method: String,
    /// The sim's path.
    pub sim_path: String,
    /// The method sent.
    pub method: String,
    /// The path sent (placeholders percent-encoded).
    pub path: Template,
    /// The headers sent, by name; a header whose placeholders have no value is left out
    /// (`Idempotency-Key = "${key}"` on a request without a key).
    pub headers: Vec<(String, Template)>,
    /// The body sent (placeholders written as JSON); None: the sim's body as it is.
    pub body: Option<Template>,
    /// A JSON pointer (RFC 6901) to the created row's id in a 2xx answer (default `/id`).
    pub id: Option<String>,
}

/// The names a request template may use.
fn request_name(n: &str) -> bool {
    matches!(n, "key" | "user" | "tenant" | "intent" | "attempt" | "body" | "method" | "path")
        || n.strip_prefix("body.").is_some_and(|f| !f.is_empty())
}

impl RequestMap {
    /// Check one `[[request]]` table.
    pub fn parse(file: &Source, r: &RequestFile) -> Result<RequestMap, InputError> {
        let tpl = |text: &str, span: Range<usize>| {
            Template::parse(text, &request_name).map_err(|e| file.err(span, e))
        };
        let (sim_method, sim_path) = r
            .sim
            .get_ref()
            .split_once(' ')
            .filter(|(m, p)| !m.is_empty() && p.starts_with('/'))
            .ok_or_else(|| {
                file.err(r.sim.span(), "expected a sim's method and path, `POST /api/orders`")
            })?;
        let method = match &r.method {
            Some(m)
                if m.get_ref().bytes().all(|b| b.is_ascii_uppercase())
                    && !m.get_ref().is_empty() =>
            {
                m.get_ref().clone()
            }
            Some(m) => return Err(file.err(m.span(), "expected an HTTP method, `POST`")),
            None => sim_method.to_string(),
        };
        let path = match &r.path {
            Some(p) if p.get_ref().starts_with('/') => tpl(p.get_ref(), p.span())?,
            Some(p) => return Err(file.err(p.span(), "expected a path starting with `/`")),
            None => tpl(sim_path, r.sim.span())?,
        };
        let mut headers = Vec::new();
        for (name, value) in &r.headers {
            let token = !name.is_empty()
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
            let framing = ["content-length", "transfer-encoding", "host", "connection"]
                .iter()
                .any(|h| name.eq_ignore_ascii_case(h));
            if !token || framing {
                return Err(file.err(
                    value.span(),
                    format!("header `{name}`: expected a header name idemsim does not set itself"),
                ));
            }
            if value.get_ref().contains(['\r', '\n']) {
                return Err(file.err(value.span(), "a header value holds no line break"));
            }
            headers.push((name.clone(), tpl(value.get_ref(), value.span())?));
        }
        let body = r.body.as_ref().map(|b| tpl(b.get_ref(), b.span())).transpose()?;
        let id = match &r.id {
            Some(p) if p.get_ref().is_empty() || p.get_ref().starts_with('/') => {
                Some(p.get_ref().clone())
            }
            Some(p) => return Err(file.err(p.span(), "expected a JSON pointer, `/order/id`")),
            None => None,
        };
        Ok(RequestMap {
            sim_method: sim_method.to_string(),
            sim_path: sim_path.to_string(),
            method,
            path,
            headers,
            body,
            id,
        })
    }
}

/// The map a target has for a sim's request; None when it has maps and none fits.
pub fn map_for<'t>(target: &'t Target, spec: &RequestSpec) -> Option<&'t RequestMap> {
    target.requests.iter().find(|m| m.sim_method == spec.method && m.sim_path == spec.path)
}

/// The sim's requests a target that maps its API cannot send, as `METHOD path`.
pub fn unmapped(target: &Target, sim: &crate::scenario::Sim) -> Vec<String> {
    if target.requests.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<String> = sim
        .requests
        .iter()
        .filter(|q| map_for(target, q).is_none())
        .map(|q| format!("{} {}", q.method, q.path))
        .collect();
    out.dedup();
    out
}

/// Attempt `attempt` of `spec`, sent with `key`, as the target's API wants it; `attempt_id`
/// names the very request (`X-Attempt` for the reference API, `${attempt}` for others).
pub fn request_for(
    target: &Target,
    spec: &RequestSpec,
    attempt: u32,
    key: Option<&str>,
    attempt_id: &str,
) -> Request {
    let mut req = spec.request(attempt, key, None);
    let Some(map) = map_for(target, spec) else {
        req.headers.push(("X-Attempt".into(), attempt_id.to_string().into()));
        return req;
    };
    let body_text = spec.body_for(attempt);
    let parsed: Option<Value> = serde_json::from_str(body_text).ok();
    let value = |n: &str| -> Option<Value> {
        match n {
            "key" => key.map(|k| Value::String(k.to_string())),
            "user" => spec.user.clone().map(Value::String),
            "tenant" => spec.tenant.clone().map(Value::String),
            "intent" => Some(Value::String(spec.intent.clone())),
            "attempt" => Some(Value::String(attempt_id.to_string())),
            "method" => Some(Value::String(spec.method.clone())),
            "path" => Some(Value::String(spec.path.clone())),
            "body" => Some(parsed.clone().unwrap_or_else(|| Value::String(body_text.to_string()))),
            _ => {
                let field = n.strip_prefix("body.")?;
                parsed.as_ref()?.pointer(&format!("/{}", field.replace('.', "/"))).cloned()
            }
        }
    };
    let headers: Vec<Header> =
        std::iter::once(("Content-Type".to_string(), "application/json".to_string()))
            .filter(|_| !map.headers.iter().any(|(h, _)| h.eq_ignore_ascii_case("content-type")))
            .chain(
                map.headers
                    .iter()
                    .filter_map(|(h, t)| Some((h.clone(), t.render(Mode::Text, &value)?))),
            )
            .map(|(h, v)| (h.into(), v.into()))
            .collect();
    let body = match &map.body {
        Some(t) => t.render(Mode::Json, &value).unwrap_or_default().into_bytes(),
        None => req.body,
    };
    Request {
        method: map.method.clone(),
        path: map.path.render(Mode::Path, &value).unwrap_or_else(|| spec.path.clone()),
        headers,
        body,
    }
}

/// The created row's id in an answer's body, where the target's map says it is.
pub fn reply_id(target: &Target, spec: &RequestSpec, body: &str) -> Option<i64> {
    let pointer = map_for(target, spec)?.id.as_deref()?;
    let v: Value = serde_json::from_str(body).ok()?;
    v.pointer(pointer)?.as_i64()
}
