//! The `[key]` section: one named check per field or pair of fields, run in the order the
//! fields were always checked in, so a bad file's first error stays the same.

use toml::Spanned;

use super::file::KeyFile;
use super::parse::optional_ms;
use super::{
    ClaimConflict, Expiry, Fingerprint, InFlight, KeyPolicy, KeyStore, Lease, MAX_KEY_LEN, Replay,
};
use crate::input::{InputError, Source};

/// Headers the harness's requests and replies carry: not usable as a replay marker.
const RESERVED_HEADERS: &[&str] = &[
    "Content-Type",
    "Content-Length",
    "Idempotency-Key",
    "X-Intent",
    "X-User",
    "X-Tenant",
    "Host",
];

/// The `[key]` section.
pub(super) fn parse_key(file: Source, k: &KeyFile) -> Result<KeyPolicy, InputError> {
    let (scope_user, scope_operation, scope_tenant) = parse_scope(file, &k.scope)?;
    let (fingerprint, fingerprint_fields) = parse_fingerprint(file, k)?;
    let (key_from, min_len, uuid) = parse_key_source(file, k)?;
    let on_mismatch = parse_on_mismatch(file, &k.on_mismatch)?;
    let in_flight = parse_in_flight(file, &k.in_flight)?;
    let store = parse_store(file, &k.store)?;
    let store_latency_us =
        file.ms_dist("key.store_latency_ms", &k.store_latency_ms, (1_000, 3_000).into())?;
    let lease = parse_lease(file, &k.lease_ms)?;
    let retention_us = optional_ms(file, "key.retention_ms", &k.retention_ms)?;
    let replay = parse_replay(file, &k.replay)?;
    let claim_conflict = parse_claim_conflict(file, &k.claim_conflict)?;
    let expiry = parse_expiry(file, k, retention_us, store)?;
    check_store(file, k, store)?;
    let max_len = parse_max_len(file, k, min_len)?;
    let replay_marker = parse_replay_marker(file, &k.replay_marker)?;
    let (on_store_error, keep_on_failed_save) = parse_store_failure(file, k, store)?;
    let store_timeout_us = file.ms("key.store_timeout_ms", &k.store_timeout_ms, 1_000_000, 1)?;
    let (completer_every_us, completer_min_age_us, completer_horizon_us) =
        parse_completer(file, k)?;
    Ok(KeyPolicy {
        on_store_error,
        keep_on_failed_save,
        store,
        store_latency_us,
        store_timeout_us,
        lease,
        completer_every_us,
        completer_min_age_us,
        completer_horizon_us,
        fencing: k.fencing,
        replay,
        claim_conflict,
        required: k.required,
        max_len,
        scope_user,
        scope_tenant,
        scope_operation,
        fingerprint,
        fingerprint_fields,
        key_from,
        min_len,
        uuid,
        local_cache: k.local_cache,
        on_mismatch,
        in_flight,
        replay_marker,
        retention_us,
        expiry,
    })
}

/// The completer's period, minimum age and horizon (`completer_*_ms`), each optional.
type Completer = (Option<u64>, Option<u64>, Option<u64>);

/// `completer_every_ms`, `completer_min_age_ms` and `completer_horizon_ms`.
fn parse_completer(file: Source, k: &KeyFile) -> Result<Completer, InputError> {
    Ok((
        optional_ms(file, "key.completer_every_ms", &k.completer_every_ms)?,
        optional_ms(file, "key.completer_min_age_ms", &k.completer_min_age_ms)?,
        optional_ms(file, "key.completer_horizon_ms", &k.completer_horizon_ms)?,
    ))
}

/// `scope`: which of user, operation and tenant scope the key (default: user and operation).
fn parse_scope(
    file: Source,
    scope: &Option<Vec<Spanned<String>>>,
) -> Result<(bool, bool, bool), InputError> {
    let Some(scope) = scope else { return Ok((true, true, false)) };
    let (mut user, mut operation, mut tenant) = (false, false, false);
    for s in scope {
        match s.get_ref().as_str() {
            "user" => user = true,
            "operation" => operation = true,
            "tenant" => tenant = true,
            other => {
                return Err(file.err(
                    s.span(),
                    format!(
                        "unknown scope field `{}`; expected user, operation, tenant",
                        crate::input::shown(other)
                    ),
                ));
            }
        }
    }
    Ok((user, operation, tenant))
}

/// `fingerprint` and `fingerprint_fields` (which needs the validated fingerprint).
fn parse_fingerprint(
    file: Source,
    k: &KeyFile,
) -> Result<(Fingerprint, Option<Vec<String>>), InputError> {
    let fingerprint = file
        .choice(
            &k.fingerprint,
            "fingerprint",
            &[
                ("validated", Fingerprint::Validated),
                ("raw", Fingerprint::Raw),
                ("none", Fingerprint::None),
                ("parsed", Fingerprint::Parsed),
            ],
        )?
        .unwrap_or(Fingerprint::Validated);
    let fingerprint_fields = parse_fields(file, "fingerprint_fields", &k.fingerprint_fields)?;
    if let (Some(ff), false) = (&k.fingerprint_fields, fingerprint == Fingerprint::Validated) {
        return Err(file.err(
            ff.span(),
            "key.fingerprint_fields selects fields of the validated input: it needs \
             fingerprint = \"validated\"",
        ));
    }
    Ok((fingerprint, fingerprint_fields))
}

/// A list of input fields (`fingerprint_fields`, `key_from`): known, at least one, no repeats.
fn parse_fields(
    file: Source,
    what: &str,
    list: &Option<Spanned<Vec<Spanned<String>>>>,
) -> Result<Option<Vec<String>>, InputError> {
    let Some(list) = list else { return Ok(None) };
    if list.get_ref().is_empty() {
        return Err(file.err(list.span(), format!("key.{what}: expected at least one field")));
    }
    let mut out: Vec<String> = Vec::new();
    for f in list.get_ref() {
        let name = f.get_ref();
        if !crate::http::INPUT_FIELDS.contains(&name.as_str()) {
            return Err(file.err(
                f.span(),
                format!(
                    "unknown key.{what} field `{name}`; expected {}",
                    crate::http::INPUT_FIELDS.join(", ")
                ),
            ));
        }
        if out.contains(name) {
            return Err(file.err(f.span(), format!("key.{what}: `{name}` listed twice")));
        }
        out.push(name.clone());
    }
    Ok(Some(out))
}

/// Where the key comes from: `key_from` (the payload), or the header with its checks
/// `min_len` and `format`, which a derived key cannot have.
fn parse_key_source(
    file: Source,
    k: &KeyFile,
) -> Result<(Option<Vec<String>>, usize, bool), InputError> {
    let key_from = parse_fields(file, "key_from", &k.key_from)?;
    let min_len = match &k.min_len {
        None => 1,
        Some(m) if (1..=MAX_KEY_LEN).contains(m.get_ref()) => *m.get_ref(),
        Some(m) => {
            return Err(file.err(m.span(), format!("key.min_len: expected 1..={MAX_KEY_LEN}")));
        }
    };
    let uuid =
        file.choice(&k.format, "key.format", &[("any", false), ("uuid", true)])?.unwrap_or(false);
    if key_from.is_some() && (k.min_len.is_some() || uuid) {
        let span = k.format.as_ref().map(|f| f.span());
        let span = span.or(k.min_len.as_ref().map(|m| m.span())).unwrap_or(0..0);
        return Err(file.err(
            span,
            "key.min_len and key.format check the Idempotency-Key header; with key_from the key \
             comes from the payload",
        ));
    }
    Ok((key_from, min_len, uuid))
}

/// `on_mismatch`: 400, 409, 417 or 422 (the default).
fn parse_on_mismatch(file: Source, v: &Option<Spanned<u16>>) -> Result<u16, InputError> {
    Ok(match v {
        None => 422,
        Some(s) if [400, 409, 417, 422].contains(s.get_ref()) => *s.get_ref(),
        Some(s) => {
            return Err(file.err(
                s.span(),
                format!("on_mismatch {} not allowed; expected 400, 409, 417 or 422", s.get_ref()),
            ));
        }
    })
}

/// `in_flight`: a status (409, the default; 425; 202), `"wait"` or `"proceed"`.
fn parse_in_flight(file: Source, v: &Option<Spanned<toml::Value>>) -> Result<InFlight, InputError> {
    Ok(match v {
        None => InFlight::Status(409),
        Some(v) => match v.get_ref() {
            toml::Value::String(s) if s == "wait" => InFlight::Wait,
            toml::Value::String(s) if s == "proceed" => InFlight::Proceed,
            toml::Value::Integer(409) => InFlight::Status(409),
            toml::Value::Integer(425) => InFlight::Status(425),
            toml::Value::Integer(202) => InFlight::Status(202),
            _ => {
                return Err(file
                    .err(v.span(), "in_flight: expected 409, 425, 202, \"wait\" or \"proceed\""));
            }
        },
    })
}

/// `store`: where key records live (SQLite by default).
fn parse_store(file: Source, v: &Option<Spanned<String>>) -> Result<KeyStore, InputError> {
    let store = file.choice(
        v,
        "key store",
        &[("sqlite", KeyStore::Sqlite), ("cache", KeyStore::Cache), ("memory", KeyStore::Memory)],
    )?;
    Ok(store.unwrap_or(KeyStore::Sqlite))
}

/// `lease_ms`: milliseconds, or `"deadline"`: the execution's remaining time (`Model::parse`
/// checks the driver has a deadline and fills it in).
fn parse_lease(file: Source, v: &Option<Spanned<toml::Value>>) -> Result<Lease, InputError> {
    Ok(match v {
        None => Lease::None,
        Some(v) => match v.get_ref() {
            toml::Value::String(s) if s == "deadline" => Lease::ToDeadline(0),
            toml::Value::Integer(_) | toml::Value::Float(_) => {
                let ms = v.get_ref().as_float().or(v.get_ref().as_integer().map(|i| i as f64));
                let ms = Some(Spanned::new(v.span(), ms.unwrap_or(0.0)));
                Lease::For(file.ms("key.lease_ms", &ms, 0, 1)?)
            }
            _ => {
                return Err(file.err(
                    v.span(),
                    "key.lease_ms: expected milliseconds or \"deadline\" (the execution's \
                     remaining time, [driver] deadline_ms)",
                ));
            }
        },
    })
}

/// `replay`: `"stored"` (the default) or 409.
fn parse_replay(file: Source, v: &Option<Spanned<toml::Value>>) -> Result<Replay, InputError> {
    Ok(match v {
        None => Replay::Stored,
        Some(v) => match v.get_ref() {
            toml::Value::String(s) if s == "stored" => Replay::Stored,
            toml::Value::Integer(409) => Replay::Status(409),
            _ => return Err(file.err(v.span(), "key.replay: expected \"stored\" or 409")),
        },
    })
}

/// `claim_conflict`: what a losing claim does (a lookup by default).
fn parse_claim_conflict(
    file: Source,
    v: &Option<Spanned<String>>,
) -> Result<ClaimConflict, InputError> {
    let conflict = file.choice(
        v,
        "claim_conflict",
        &[
            ("lookup", ClaimConflict::Lookup),
            ("error", ClaimConflict::Error),
            ("overwrite", ClaimConflict::Overwrite),
        ],
    )?;
    Ok(conflict.unwrap_or(ClaimConflict::Lookup))
}

/// `[key] expiry` and `on_expired`: how a SQLite record's retention is enforced.
fn parse_expiry(
    file: Source,
    k: &KeyFile,
    retention_us: Option<u64>,
    store: KeyStore,
) -> Result<Expiry, InputError> {
    let expire_on_read = file
        .choice(&k.expiry, "key.expiry", &[("collector", false), ("on-read", true)])?
        .unwrap_or(false);
    if expire_on_read && (retention_us.is_none() || store != KeyStore::Sqlite) {
        return Err(file.err(
            k.expiry.as_ref().map(|s| s.span()).unwrap_or(0..0),
            "key.expiry = \"on-read\" checks each SQLite record's age against \
             key.retention_ms: it needs both (a cache's records expire by their TTL already)",
        ));
    }
    let expired_gone = match &k.on_expired {
        None => false,
        Some(v) => match v.get_ref() {
            toml::Value::String(s) if s == "new" => false,
            toml::Value::Integer(410) if expire_on_read => true,
            toml::Value::Integer(410) => {
                return Err(file.err(
                    v.span(),
                    "key.on_expired = 410 answers from the expired record (a tombstone): it \
                     needs key.expiry = \"on-read\"",
                ));
            }
            _ => return Err(file.err(v.span(), "key.on_expired: expected \"new\" or 410")),
        },
    };
    Ok(match (expire_on_read, expired_gone) {
        (false, _) => Expiry::Collector,
        (true, false) => Expiry::OnRead,
        (true, true) => Expiry::OnReadGone,
    })
}

/// What the store allows: no local cache in front of process memory; a cache needs a TTL.
fn check_store(file: Source, k: &KeyFile, store: KeyStore) -> Result<(), InputError> {
    if k.local_cache && store == KeyStore::Memory {
        return Err(file.err(
            k.store.as_ref().map(|s| s.span()).unwrap_or(0..0),
            "key.local_cache keeps records in process memory in front of the store: the store \
             must be \"sqlite\" or \"cache\"",
        ));
    }
    if store == KeyStore::Cache && k.retention_ms.is_none() {
        return Err(file.err(
            k.store.as_ref().map(|s| s.span()).unwrap_or(0..0),
            "key.store = \"cache\" needs key.retention_ms (the cache's TTL)",
        ));
    }
    Ok(())
}

/// `max_len` (255 by default), at least `min_len`.
fn parse_max_len(file: Source, k: &KeyFile, min_len: usize) -> Result<usize, InputError> {
    let max_len = match &k.max_len {
        None => 255,
        Some(m) if (1..=MAX_KEY_LEN).contains(m.get_ref()) => *m.get_ref(),
        Some(m) => {
            return Err(file.err(m.span(), format!("key.max_len: expected 1..={MAX_KEY_LEN}")));
        }
    };
    if let Some(m) = &k.min_len
        && min_len > max_len
    {
        return Err(file.err(m.span(), format!("key.min_len {min_len} is above max_len {max_len}")));
    }
    Ok(max_len)
}

/// `replay_marker`: a header name of its own (`Idempotent-Replayed` by default), or `""`:
/// none.
fn parse_replay_marker(file: Source, m: &Option<Spanned<String>>) -> Result<String, InputError> {
    let Some(m) = m else { return Ok("Idempotent-Replayed".to_string()) };
    let v = m.get_ref();
    if v.is_empty() {
        // No marker: a replay looks like a fresh answer to the client.
        return Ok(String::new());
    }
    let token = !v.is_empty()
        && v.len() <= 64
        && v.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !token {
        return Err(file.err(
            m.span(),
            format!(
                "key.replay_marker `{}`: expected a header name (1 to 64 letters, digits \
                 or !#$%&'*+-.^_`|~), or \"\" for none",
                crate::input::shown(v)
            ),
        ));
    }
    if RESERVED_HEADERS.iter().any(|h| h.eq_ignore_ascii_case(v)) {
        return Err(file.err(
            m.span(),
            format!(
                "key.replay_marker `{v}` is a header every reply or request carries; \
                 expected a header of its own, e.g. Idempotent-Replayed"
            ),
        ));
    }
    Ok(v.clone())
}

/// `on_store_error` and `on_failed_save`: what a failing store means, for a store that can
/// fail.
fn parse_store_failure(
    file: Source,
    k: &KeyFile,
    store: KeyStore,
) -> Result<(u16, bool), InputError> {
    let on_store_error = match &k.on_store_error {
        None => 500,
        Some(v) if [500, 502, 503].contains(v.get_ref()) => *v.get_ref(),
        Some(v) => {
            return Err(file.err(
                v.span(),
                "key.on_store_error: expected 500 (an unhandled error), 502 or 503 (fail closed, \
                 safe to retry)",
            ));
        }
    };
    let keep_on_failed_save = match &k.on_failed_save {
        None => false,
        Some(v) => match v.get_ref().as_str() {
            "clean-up" => false,
            "keep" => true,
            _ => {
                return Err(file.err(
                    v.span(),
                    "key.on_failed_save: expected \"clean-up\" (run on_error) or \"keep\" (leave \
                     the claim as it is)",
                ));
            }
        },
    };
    if (k.on_store_error.is_some() || k.on_failed_save.is_some()) && store == KeyStore::Memory {
        let span = k.on_store_error.as_ref().map(|v| v.span());
        return Err(file.err(
            span.or(k.on_failed_save.as_ref().map(|v| v.span())).unwrap_or(0..0),
            "key.on_store_error and key.on_failed_save are for a store that can fail (\"sqlite\" \
             or \"cache\"); process memory cannot",
        ));
    }
    Ok((on_store_error, keep_on_failed_save))
}
