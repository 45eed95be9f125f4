//! HTTP-shaped messages and the service's fixed front half: routing (404), synthetic
//! authentication (401), body validation (400) and the canonical fingerprint input.
//!
//! Bodies travel as raw bytes, so bad JSON and field order are real. Validation happens before
//! any model step runs, so an invalid order never consumes a key.

use serde::Serialize;
use sha2::{Digest, Sha256};

/// The synthetic authentication header: the user a request is from (missing → 401).
pub const USER_HEADER: &str = "X-User";
/// The tenant (organisation, account) the user belongs to, when the service has tenants:
/// user ids are unique only within a tenant.
pub const TENANT_HEADER: &str = "X-Tenant";
/// The header the client's idempotency key travels in.
pub const KEY_HEADER: &str = "Idempotency-Key";
/// The content type header; every reply is `application/json`.
pub const CONTENT_TYPE: &str = "Content-Type";
/// The harness's correlation header: the logical operation (intent) a request belongs to.
/// No model step reads it; the server stores it beside rows and keys for the oracle.
pub const INTENT_HEADER: &str = "X-Intent";
/// A conditional update: the version (an ETag, `"3"`) the client's copy was loaded at.
pub const IF_MATCH_HEADER: &str = "If-Match";
/// The time on the client's clock when it sent the request (ms): what a design that stamps
/// versions with the client's clock compares.
pub const CLIENT_TIME_HEADER: &str = "X-Client-Time";
/// The version a document reply carries (`"3"`).
pub const ETAG_HEADER: &str = "ETag";
/// Where documents live: `PUT /api/docs/<id>` sets one's value.
pub const DOCS_PREFIX: &str = "/api/docs/";

/// The items the service sells. Anything else is an invalid order.
pub const CATALOGUE: &[&str] = &["test-item", "sample-item", "other-item"];

/// The statuses a resource goes through, in order: `POST /api/events` reports one of them.
pub const STATUSES: &[&str] = &["created", "paid", "shipped", "delivered"];

/// A request as the server receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The HTTP method (`POST`, `PUT` …).
    pub method: String,
    /// The request path (routing is by path: unknown → 404).
    pub path: String,
    /// The headers, as (name, value) in the order sent; looked up case-insensitively.
    pub headers: Vec<Header>,
    /// The raw body bytes (bad JSON and field order are real).
    pub body: Vec<u8>,
}

/// An i64 in decimal, as `Display` writes it, on the stack.
pub(crate) struct Decimal {
    buf: [u8; 20],
    start: usize,
}

impl Decimal {
    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[self.start..]).expect("ASCII digits")
    }
    fn len(&self) -> usize {
        self.buf.len() - self.start
    }
}

pub(crate) fn itoa_i64(v: i64) -> Decimal {
    // 20 bytes: the 19 digits of |i64::MIN| and a sign.
    let mut d = Decimal { buf: [0; 20], start: 20 };
    let mut n = v.unsigned_abs();
    loop {
        d.start -= 1;
        d.buf[d.start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        d.start -= 1;
        d.buf[d.start] = b'-';
    }
    d
}

/// The body of [`Response::taken`].
pub const TAKEN_BODY: &str = r#"{"error":"already exists"}"#;

/// A header: (name, value). Names and fixed values are static text (no allocation per message
/// on the simulated wire); values from a sim, a model or a socket are owned.
pub type Header = (std::borrow::Cow<'static, str>, std::borrow::Cow<'static, str>);

/// A reply as the client receives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Response {
    /// The HTTP status.
    pub status: u16,
    /// The headers, as (name, value) (e.g. the model's replay marker on a replay).
    pub headers: Vec<Header>,
    /// The body (JSON).
    pub body: String,
    /// Harness instrumentation, not part of HTTP (like the `X-Intent` header): what the server
    /// meant by the status, and which execution answered. Only the oracle reads it.
    #[serde(skip)]
    pub meta: Meta,
}

/// What a reply means beyond its status, for the oracle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// A 503 that promises nothing was stored (safe to retry).
    SafeToRetry,
    /// The key was used before with a different payload (a final answer).
    Mismatch,
    /// The original request with this key is still in progress (retry later).
    InFlight,
    /// The request with this key was done before; its result is to be looked up elsewhere
    /// (a final answer, not a failure).
    AlreadyDone,
    /// A business rule refused the request: the resource it would create exists already (a
    /// final answer, and a failure for the client).
    Taken,
    /// A conditional update's `If-Match` names a version that is no longer current (412), or
    /// the server requires one and none was sent (428): a final answer.
    Precondition,
    /// The key's record expired and the server says so (410 Gone) instead of executing again:
    /// a final answer.
    Expired,
}

/// Harness instrumentation carried by a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Meta {
    /// What the server meant by the status (safe to retry, mismatch, in flight …), if anything beyond it.
    pub reason: Option<Reason>,
    /// The server execution that answered (its token), if any.
    pub exec: Option<u64>,
}

impl Request {
    /// The value of header `name` (case-insensitive), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_ref())
    }
}

impl Response {
    /// A JSON reply with this status and body, and no instrumentation.
    pub fn new(status: u16, body: impl Into<String>) -> Self {
        Response {
            status,
            headers: vec![(CONTENT_TYPE.into(), "application/json".into())],
            body: body.into(),
            meta: Meta::default(),
        }
    }

    /// A JSON error reply: `{"error": msg}`.
    pub fn error(status: u16, msg: &str) -> Self {
        // What `json!({"error": msg}).to_string()` prints, without building the map.
        let msg = serde_json::to_string(msg).expect("a string serialises");
        Self::new(status, format!("{{\"error\":{msg}}}"))
    }

    /// 409 `{"error":"already exists"}`: a business key is taken (a final answer).
    pub fn taken() -> Self {
        debug_assert_eq!(Self::error(409, "already exists").body, TAKEN_BODY);
        Self::error(409, "already exists").meaning(Reason::Taken)
    }

    /// The same reply with a meaning for the oracle.
    pub fn meaning(mut self, reason: Reason) -> Self {
        self.meta.reason = Some(reason);
        self
    }

    /// The value of header `name` (case-insensitive), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_ref())
    }
}

/// A validated order: the canonical input of the operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    /// The operation's name, from the route (e.g. `doc.update`).
    pub operation: &'static str,
    /// The user it is for (`X-User`; [`Order::principal`] adds the tenant).
    pub user: String,
    /// The ordered item (one of [`CATALOGUE`]), or the document or resource id a document or status operation names.
    pub item: String,
    /// The ordered quantity (a document write's value, a status event's rank; 0 for a delete).
    pub qty: i64,
    /// `X-Tenant`, when sent.
    pub tenant: Option<String>,
    /// A document update's `If-Match` version, when sent.
    pub if_match: Option<i64>,
    /// A document update's `X-Client-Time` (ms), when sent.
    pub client_time: Option<i64>,
}

impl Order {
    /// The validated input in a fixed field order: `{"item":..,"qty":..}`. (`item` is one of
    /// the [`CATALOGUE`]'s plain ASCII names: it needs no JSON escaping.)
    pub fn canonical(&self) -> String {
        if self.operation == "doc.delete" {
            let m = self.if_match.map_or("null".to_string(), |v| v.to_string());
            return format!("{{\"doc\":\"{}\",\"if_match\":{m}}}", self.item);
        }
        if self.operation == "doc.update" {
            // The document, the value and the version it is conditional on.
            let m = self.if_match.map_or("null".to_string(), |v| v.to_string());
            return format!(
                "{{\"doc\":\"{}\",\"if_match\":{m},\"value\":{}}}",
                self.item, self.qty
            );
        }
        // `{"item":"<item>","qty":<qty>}`, what format! wrote, without its machinery (an
        // order's fingerprint input, built on every keyed request).
        let qty = itoa_i64(self.qty);
        let mut s = String::with_capacity(20 + self.item.len() + qty.len());
        s.push_str("{\"item\":\"");
        s.push_str(&self.item);
        s.push_str("\",\"qty\":");
        s.push_str(qty.as_str());
        s.push('}');
        s
    }

    /// The canonical input restricted to `fields` (in canonical order): a fingerprint over
    /// selected elements, or the input a key is derived from. Fields the operation does not
    /// have are left out.
    pub fn selected(&self, fields: &[String]) -> String {
        let all: serde_json::Value =
            serde_json::from_str(&self.canonical()).unwrap_or(serde_json::Value::Null);
        let mut out = serde_json::Map::new();
        if let Some(obj) = all.as_object() {
            for (k, v) in obj.iter().filter(|(k, _)| fields.iter().any(|f| f == *k)) {
                out.insert(k.clone(), v.clone());
            }
        }
        serde_json::Value::Object(out).to_string()
    }

    /// Who the order is for: `tenant/user`, or the user alone without a tenant.
    pub fn principal(&self) -> String {
        match &self.tenant {
            Some(t) => format!("{t}/{}", self.user),
            None => self.user.clone(),
        }
    }

    /// The 200 body of an applied status event: `{"resource":…,"status":…}`.
    pub fn event_body(&self) -> String {
        format!("{{\"resource\":\"{}\",\"status\":\"{}\"}}", self.item, status_name(self.qty))
    }

    /// The 200 of an applied document update, with its new version as the ETag.
    pub fn updated(&self, version: i64) -> Response {
        let body =
            format!("{{\"doc\":\"{}\",\"value\":{},\"version\":{version}}}", self.item, self.qty);
        let mut r = Response::new(200, body);
        r.headers.push((ETAG_HEADER.into(), format!("\"{version}\"").into()));
        r
    }

    /// The 201 body for a created row.
    pub fn created_body(&self, id: i64) -> String {
        format!("{{\"id\":{id},\"item\":\"{}\",\"qty\":{}}}", self.item, self.qty)
    }
}

/// The name of a status rank (1-based), `?` outside [`STATUSES`].
pub fn status_name(rank: i64) -> &'static str {
    usize::try_from(rank - 1).ok().and_then(|i| STATUSES.get(i)).copied().unwrap_or("?")
}

/// SHA-256 in lowercase hex. A sweep hashes the same few inputs (its sims' orders) run after
/// run: each is hashed once per thread (a pure memo, emptied when it grows past a bound).
pub fn sha256_hex(bytes: &[u8]) -> String {
    thread_local! {
        static MEMO: std::cell::RefCell<std::collections::BTreeMap<Vec<u8>, String>> =
            const { std::cell::RefCell::new(std::collections::BTreeMap::new()) };
    }
    MEMO.with(|m| {
        let mut m = m.borrow_mut();
        if let Some(h) = m.get(bytes) {
            return h.clone();
        }
        let h = hex::encode(Sha256::digest(bytes));
        if m.len() >= 256 {
            m.clear();
        }
        m.insert(bytes.to_vec(), h.clone());
        h
    })
}

/// Route, authenticate and validate a request: the fixed front half of every variant.
/// `Err` is the reply the service sends (404, 401 or 400).
pub fn admit(req: &Request) -> Result<Order, Response> {
    let operation = match (req.method.as_str(), req.path.as_str()) {
        ("POST", "/api/orders") => "order.create",
        ("POST", "/api/returns") => "return.create",
        ("POST", "/api/events") => "event.apply",
        ("PUT", p) if p.starts_with(DOCS_PREFIX) => "doc.update",
        ("DELETE", p) if p.starts_with(DOCS_PREFIX) => "doc.delete",
        _ => return Err(Response::error(404, "not found")),
    };
    let user = match req.header(USER_HEADER) {
        Some(u) if !u.is_empty() => u.to_string(),
        _ => return Err(Response::error(401, "unauthenticated")),
    };
    let tenant = req.header(TENANT_HEADER).filter(|t| !t.is_empty()).map(str::to_string);
    let base = Order {
        operation,
        user,
        item: String::new(),
        qty: 0,
        tenant,
        if_match: None,
        client_time: None,
    };
    if operation == "doc.delete" {
        // DELETE /api/docs/<id>, with an optional `If-Match`; the body is not read.
        let (doc, if_match) = (document(req)?, if_match(req)?);
        return Ok(Order { item: doc.to_string(), if_match, ..base });
    }
    if operation == "doc.update" {
        let value = parse_body(&req.body)?;
        return admit_doc_update(req, &value, base);
    }
    let (item, qty) = body_fields(operation == "event.apply", &req.body)?;
    Ok(Order { item, qty, ..base })
}

/// The body as JSON (400 `invalid JSON` when it is not).
fn parse_body(body: &[u8]) -> Result<serde_json::Value, Response> {
    serde_json::from_slice(body).map_err(|_| Response::error(400, "invalid JSON"))
}

/// The (item, qty) an order's or a status event's body validates to, or the 400 it gets: a
/// pure function of the bytes, memoised per thread (a sweep sends the same few bodies on every
/// seed; parsing them into a JSON value is most of what admission costs). Bounded: the memo
/// is emptied when it holds 256 bodies.
fn body_fields(event: bool, body: &[u8]) -> Result<(String, i64), Response> {
    type Memo = std::collections::BTreeMap<Vec<u8>, Result<(String, i64), Response>>;
    thread_local! {
        // Orders' bodies, then status events'.
        static MEMO: std::cell::RefCell<[Memo; 2]> = const {
            std::cell::RefCell::new([std::collections::BTreeMap::new(), std::collections::BTreeMap::new()])
        };
    }
    MEMO.with(|m| {
        let m = &mut m.borrow_mut()[usize::from(event)];
        if let Some(r) = m.get(body) {
            return r.clone();
        }
        let r = parse_body(body)
            .and_then(|value| if event { admit_event(&value) } else { admit_order(&value) });
        if m.len() >= 256 {
            m.clear();
        }
        m.insert(body.to_vec(), r.clone());
        r
    })
}

/// A status event: {"resource": "<id>", "status": "<one of STATUSES>"}, kept in an `Order` as
/// (item = resource, qty = the status's rank, 1-based).
fn admit_event(value: &serde_json::Value) -> Result<(String, i64), Response> {
    let invalid = || Response::error(400, "invalid event");
    let obj = value.as_object().filter(|o| o.len() == 2).ok_or_else(invalid)?;
    let resource = obj.get("resource").and_then(|v| v.as_str()).ok_or_else(invalid)?;
    if !plain_id(resource) {
        return Err(invalid());
    }
    let status = obj.get("status").and_then(|v| v.as_str()).ok_or_else(invalid)?;
    let rank = STATUSES.iter().position(|s| *s == status).ok_or_else(invalid)? as i64 + 1;
    Ok((resource.to_string(), rank))
}

/// A document update: PUT /api/docs/<id> with {"value": 0..=1000000}, and an optional
/// `If-Match: "<version>"`. The value is kept in `qty`, the document's id in `item`.
fn admit_doc_update(
    req: &Request,
    value: &serde_json::Value,
    base: Order,
) -> Result<Order, Response> {
    let doc = document(req)?;
    let invalid = || Response::error(400, "invalid document");
    let obj = value.as_object().filter(|o| o.len() == 1).ok_or_else(invalid)?;
    let v = obj.get("value").and_then(|v| v.as_i64()).ok_or_else(invalid)?;
    if !(0..=1_000_000).contains(&v) {
        return Err(invalid());
    }
    let if_match = if_match(req)?;
    let client_time = match req.header(CLIENT_TIME_HEADER) {
        None => None,
        Some(h) => Some(
            h.trim().parse::<i64>().map_err(|_| Response::error(400, "invalid X-Client-Time"))?,
        ),
    };
    Ok(Order { item: doc.to_string(), qty: v, if_match, client_time, ..base })
}

/// An order: exactly {"item": one of the catalogue, "qty": 1..=10}.
fn admit_order(value: &serde_json::Value) -> Result<(String, i64), Response> {
    let invalid = || Response::error(400, "invalid order");
    let obj = value.as_object().ok_or_else(invalid)?;
    if obj.len() != 2 {
        return Err(invalid());
    }
    let item = obj.get("item").and_then(|v| v.as_str()).ok_or_else(invalid)?;
    if !CATALOGUE.contains(&item) {
        return Err(invalid());
    }
    let qty = obj.get("qty").and_then(|v| v.as_i64()).ok_or_else(invalid)?;
    if !(1..=10).contains(&qty) {
        return Err(invalid());
    }
    Ok((item.to_string(), qty))
}

/// The fields of a validated input that a fingerprint or a derived key may select: an
/// order's, a status event's (kept as item and qty) and a document update's.
pub const INPUT_FIELDS: &[&str] = &["item", "qty", "doc", "value", "if_match"];

/// Is `k` a UUID in its canonical text form (8-4-4-4-12 hexadecimal digits)?
pub fn is_uuid(k: &str) -> bool {
    let b = k.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// The document a `/api/docs/<id>` request names (404 for a malformed id).
fn document(req: &Request) -> Result<&str, Response> {
    let doc = &req.path[DOCS_PREFIX.len()..];
    if !plain_id(doc) {
        return Err(Response::error(404, "not found"));
    }
    Ok(doc)
}

/// A request's `If-Match` version, if sent (400 for a malformed one).
fn if_match(req: &Request) -> Result<Option<i64>, Response> {
    match req.header(IF_MATCH_HEADER) {
        None => Ok(None),
        Some(h) => parse_etag(h).map(Some).ok_or_else(|| Response::error(400, "invalid If-Match")),
    }
}

/// A resource id: 1–64 ASCII letters, digits, `-` or `_` (no JSON escaping needed).
fn plain_id(id: &str) -> bool {
    let plain = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    !id.is_empty() && id.len() <= 64 && id.chars().all(plain)
}

/// An `If-Match` version: `"3"` (a strong ETag) or `3`; 1..=10^9.
pub fn parse_etag(h: &str) -> Option<i64> {
    let h = h.trim();
    let inner = h.strip_prefix('"').and_then(|x| x.strip_suffix('"')).unwrap_or(h);
    if inner.is_empty() || inner.len() > 10 || !inner.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    inner.parse().ok().filter(|v| (1..=1_000_000_000).contains(v))
}

/// The body as JavaScript's `JSON.stringify(JSON.parse(body))` writes it: whitespace gone,
/// the fields of each object in the order a JavaScript object keeps them (array-index keys
/// ascending first, then the others in the order written; a repeated key keeps its first place
/// and its last value), numbers as JavaScript prints them. The `[key] fingerprint = "parsed"`
/// input (express-idempotency, @node-idempotency). None when the body is not JSON.
pub fn js_reserialized(body: &[u8]) -> Option<String> {
    let v: JsValue = serde_json::from_slice(body).ok()?;
    let mut out = String::with_capacity(body.len());
    v.write(&mut out);
    Some(out)
}

/// A JSON value as `JSON.parse` builds it: objects keep their keys' order.
enum JsValue {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<JsValue>),
    Object(Vec<(String, JsValue)>),
}

impl JsValue {
    fn write(&self, out: &mut String) {
        match self {
            JsValue::Null => out.push_str("null"),
            JsValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            JsValue::Number(n) => out.push_str(&js_number(*n)),
            JsValue::String(s) => out.push_str(&serde_json::to_string(s).expect("a string")),
            JsValue::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            JsValue::Object(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::to_string(k).expect("a string"));
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

/// A number as JavaScript's `Number.prototype.toString` prints it (shortest round trip; an
/// exponent below 1e-6 and from 1e21 on).
fn js_number(n: f64) -> String {
    let a = n.abs();
    if a == 0.0 {
        "0".to_string()
    } else if (1e-6..1e21).contains(&a) {
        format!("{n}")
    } else {
        let e = format!("{n:e}");
        match e.split_once('e') {
            Some((m, x)) if !x.starts_with('-') => format!("{m}e+{x}"),
            _ => e,
        }
    }
}

/// Is `k` an array index (a canonical decimal below 2^32 - 1)? JavaScript orders such keys
/// first, ascending.
fn array_index(k: &str) -> Option<u32> {
    let canonical = k == "0" || (!k.starts_with('0') && k.bytes().all(|b| b.is_ascii_digit()));
    k.parse::<u32>().ok().filter(|i| canonical && *i < u32::MAX)
}

impl<'de> serde::Deserialize<'de> for JsValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(JsVisitor)
    }
}

struct JsVisitor;

impl<'de> serde::de::Visitor<'de> for JsVisitor {
    type Value = JsValue;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<JsValue, E> {
        Ok(JsValue::Null)
    }
    fn visit_bool<E>(self, b: bool) -> Result<JsValue, E> {
        Ok(JsValue::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<JsValue, E> {
        Ok(JsValue::Number(n as f64))
    }
    fn visit_u64<E>(self, n: u64) -> Result<JsValue, E> {
        Ok(JsValue::Number(n as f64))
    }
    fn visit_f64<E>(self, n: f64) -> Result<JsValue, E> {
        Ok(JsValue::Number(n))
    }
    fn visit_str<E>(self, s: &str) -> Result<JsValue, E> {
        Ok(JsValue::String(s.to_string()))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<JsValue, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = a.next_element()? {
            items.push(v);
        }
        Ok(JsValue::Array(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<JsValue, A::Error> {
        let mut fields: Vec<(String, JsValue)> = Vec::new();
        while let Some((k, v)) = a.next_entry::<String, JsValue>()? {
            match fields.iter_mut().find(|(f, _)| *f == k) {
                Some(slot) => slot.1 = v,
                None => fields.push((k, v)),
            }
        }
        // Array-index keys first, ascending; the others keep their order (a stable sort).
        fields.sort_by_key(|(k, _)| array_index(k).map_or((1, 0), |i| (0, i)));
        Ok(JsValue::Object(fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(path: &str, user: Option<&str>, body: &str) -> Request {
        let mut headers = vec![];
        if let Some(u) = user {
            headers.push((USER_HEADER.into(), u.to_string().into()));
        }
        Request {
            method: "POST".into(),
            path: path.into(),
            headers,
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn decimals_are_written_as_display_writes_them() {
        for v in [0, 1, 9, 10, -1, -10, 1234567, i64::MAX, i64::MIN, i64::MIN + 1] {
            assert_eq!(itoa_i64(v).as_str(), v.to_string());
        }
        let o = Order {
            operation: "order.create",
            user: "u".into(),
            item: "test-item".into(),
            qty: -3,
            tenant: None,
            if_match: None,
            client_time: None,
        };
        assert_eq!(o.canonical(), format!("{{\"item\":\"{}\",\"qty\":{}}}", o.item, o.qty));
    }

    #[test]
    fn catalogue_names_need_no_json_escaping() {
        for item in CATALOGUE {
            assert_eq!(
                serde_json::Value::String(item.to_string()).to_string(),
                format!("\"{item}\"")
            );
        }
    }

    #[test]
    fn field_order_gives_the_same_canonical_input() {
        let a = admit(&req("/api/orders", Some("u1"), r#"{"item":"test-item","qty":2}"#)).unwrap();
        let b = admit(&req("/api/orders", Some("u1"), r#"{"qty":2,"item":"test-item"}"#)).unwrap();
        assert_eq!(a.canonical(), b.canonical());
        assert_eq!(a.canonical(), r#"{"item":"test-item","qty":2}"#);
    }

    #[test]
    fn front_half_statuses() {
        let ok = r#"{"item":"test-item","qty":2}"#;
        assert_eq!(admit(&req("/api/nope", Some("u1"), ok)).unwrap_err().status, 404);
        assert_eq!(admit(&req("/api/orders", None, ok)).unwrap_err().status, 401);
        let bad_json = admit(&req("/api/orders", Some("u1"), "{")).unwrap_err();
        assert_eq!((bad_json.status, bad_json.body.as_str()), (400, r#"{"error":"invalid JSON"}"#));
        for body in [
            r#"{"item":"test-item","qty":-1}"#,
            r#"{"item":"test-item","qty":11}"#,
            r#"{"item":"nope","qty":1}"#,
            r#"{"item":"test-item","qty":1,"x":1}"#,
            r#"{"item":"test-item","qty":"1"}"#,
            r#"[1,2]"#,
        ] {
            let r = admit(&req("/api/orders", Some("u1"), body)).unwrap_err();
            assert_eq!(
                (r.status, r.body.as_str()),
                (400, r#"{"error":"invalid order"}"#),
                "{body}"
            );
        }
        assert_eq!(admit(&req("/api/returns", Some("u1"), ok)).unwrap().operation, "return.create");
    }

    #[test]
    fn document_updates() {
        let put = |path: &str, body: &str, if_match: Option<&str>| {
            let mut r = req(path, Some("u1"), body);
            r.method = "PUT".into();
            if let Some(m) = if_match {
                r.headers.push((IF_MATCH_HEADER.into(), m.to_string().into()));
            }
            admit(&r)
        };
        let ok = put("/api/docs/doc-1", r#"{"value":7}"#, Some("\"3\"")).unwrap();
        assert_eq!(
            (ok.operation, ok.item.as_str(), ok.qty, ok.if_match),
            ("doc.update", "doc-1", 7, Some(3))
        );
        assert_eq!(ok.canonical(), r#"{"doc":"doc-1","if_match":3,"value":7}"#);
        let blind = put("/api/docs/doc-1", r#"{"value":7}"#, None).unwrap();
        assert_eq!(blind.canonical(), r#"{"doc":"doc-1","if_match":null,"value":7}"#);
        let updated = ok.updated(4);
        assert_eq!((updated.status, updated.header("etag")), (200, Some("\"4\"")));
        assert_eq!(updated.body, r#"{"doc":"doc-1","value":7,"version":4}"#);
        assert_eq!(put("/api/docs/", r#"{"value":7}"#, None).unwrap_err().status, 404);
        assert_eq!(put("/api/docs/a/b", r#"{"value":7}"#, None).unwrap_err().status, 404);
        for (body, m) in [
            (r#"{"value":-1}"#, None),
            (r#"{"value":"7"}"#, None),
            (r#"{"value":7,"x":1}"#, None),
            (r#"{"value":7}"#, Some("W/\"3\"")),
            (r#"{"value":7}"#, Some("\"0\"")),
            (r#"{"value":7}"#, Some("")),
        ] {
            assert_eq!(put("/api/docs/doc-1", body, m).unwrap_err().status, 400, "{body} {m:?}");
        }
        assert_eq!(parse_etag("12"), Some(12));
        // POST to a document is not routed.
        assert_eq!(
            admit(&req("/api/docs/doc-1", Some("u1"), r#"{"value":7}"#)).unwrap_err().status,
            404
        );
    }

    #[test]
    fn a_body_reserialized_as_javascript_keeps_its_field_order_not_its_whitespace() {
        let js = |b: &str| js_reserialized(b.as_bytes());
        assert_eq!(
            js(r#"{ "item": "test-item", "qty": 1 }"#).unwrap(),
            r#"{"item":"test-item","qty":1}"#
        );
        assert_eq!(
            js(r#"{"qty":1,"item":"test-item"}"#).unwrap(),
            r#"{"qty":1,"item":"test-item"}"#
        );
        // JavaScript: a repeated key keeps its first place and its last value; array-index
        // keys come first, ascending; numbers as Number.prototype.toString prints them.
        assert_eq!(js(r#"{"b":1,"a":2,"b":3}"#).unwrap(), r#"{"b":3,"a":2}"#);
        assert_eq!(js(r#"{"x":0,"10":1,"2":2,"02":3}"#).unwrap(), r#"{"2":2,"10":1,"x":0,"02":3}"#);
        assert_eq!(
            js("[1.0, 1.5, -0.0, 1e21, 1e-7, 123e-2]").unwrap(),
            "[1,1.5,0,1e+21,1e-7,1.23]"
        );
        assert_eq!(js(r#""\u0041\n""#).unwrap(), r#""A\n""#);
        assert_eq!(js("{"), None);
    }
}
