//! `Model::parse`: the model file read section by section, each by a named function, in the
//! order the checks were always run, so a bad file's first error stays the same.

use std::path::Path;

use toml::Spanned;

use super::checks::{
    check_claim_cleanup, check_points, check_recovery, check_rows_steps, check_structure,
    fill_lease_deadline,
};
use super::file::{
    DriverFile, EffectsFile, EventsFile, LimitsFile, ModelFile, RowsFile, UpdatesFile,
};
use super::key::parse_key;
use super::steps::{SpannedStep, parse_program};
use super::{
    Awaits, BeginMode, ClaimCleanup, Dist, Driver, EffectDedupe, FailureKind, Journal, MAX_POOL,
    Model, OnClash, OnError, Rollback, RowField, RowsPolicy, Step, StoreOutcomes, VersionCheck,
};
use crate::input::{InputError, Source};

impl Model {
    /// Load a model file.
    pub fn load(path: &Path) -> Result<Model, InputError> {
        let src = crate::input::read_file(path, "model")?;
        Self::parse(path, &src)
    }

    /// Parse model text; `path` names it in errors and gives the default name.
    pub fn parse(path: &Path, src: &str) -> Result<Model, InputError> {
        Self::parse_on(path, src, None)
    }

    /// The same design on another stack (`MODEL@STACK` on a command line, a target's
    /// `stack`): the model file again, with `stack` in place of the one it names; its own
    /// `[driver]` fields still apply over it. Its name becomes `NAME@STACK`.
    pub fn on_stack(&self, spec: &str, stack: super::Stack) -> Result<Model, InputError> {
        let src = crate::input::read_file(&self.path, "model")?;
        Self::parse_on(&self.path, &src, Some((spec, stack)))
    }

    fn parse_on(
        path: &Path,
        src: &str,
        restack: Option<(&str, super::Stack)>,
    ) -> Result<Model, InputError> {
        let file = Source::new(path, src);
        let f: ModelFile = file.toml()?;
        if let Some(r) = &f.runtime {
            return Err(file.err(
                r.span(),
                "runtime: a model does not set how its server takes in work: that is the \
                 runtime of the stack it names (`stack`, a stack file's `[runtime]`, \
                 docs/models.md)",
            ));
        }
        let program = parse_program(file, &f.program)?;
        check_rows_steps(file, &program, &f.rows)?;
        check_structure(file, &program, f.program.span(), f.key.is_some())?;
        check_points(file, &program)?;
        let mut on_error = parse_on_error(file, &f.on_error)?;
        on_error.clean_up_on = parse_clean_up_on(file, &f.clean_up_on, on_error.claim)?;
        let retry_tx = on_error.retry_transaction;
        let mut key = f.key.as_ref().map(|k| parse_key(file, k)).transpose()?;
        fill_lease_deadline(file, &f, key.as_mut())?;
        let resumable = check_recovery(file, &f, &program, key.as_ref())?;
        check_claim_cleanup(file, &f, &program, key.as_ref(), on_error.claim, resumable)?;
        let store_outcomes = parse_store_outcomes(file, &f.store_outcomes)?;
        let (stack, on_stack) = match restack {
            Some((spec, stack)) => (stack, Some(spec.to_string())),
            None => (super::stack::resolve(file, &f.stack)?, None),
        };
        let driver = parse_driver(file, &f.driver, &stack.driver)?;
        let effect_dedupe = parse_effect_dedupe(file, &f.effects)?;
        let relay_every_us =
            file.ms("outbox.relay_every_ms", &f.outbox.relay_every_ms, 50_000, 1)?;
        let wait_budget_us = file.ms("wait_budget_ms", &f.wait_budget_ms, 5_000_000, 0)?;
        let name = parse_name(file, &f.name)?;
        Ok(Model {
            name: match &on_stack {
                Some(spec) => format!("{name}@{}", crate::text::printable(spec)),
                None => name,
            },
            on_stack,
            summary: crate::text::printable(f.summary.as_deref().unwrap_or_default()),
            path: path.to_path_buf(),
            on_error,
            key,
            store_outcomes,
            stack: stack.name,
            runtime: stack.runtime,
            driver,
            wait_budget_us,
            effect_dedupe,
            relay_every_us,
            effect_timeout_us: optional_ms(file, "effects.timeout_ms", &f.effects.timeout_ms)?,
            rows: f.rows.as_ref().map(|r| parse_rows(file, r, f.key.is_some())).transpose()?,
            events_monotonic: parse_events(file, &f.events)?,
            version_check: parse_version_check(file, &f.updates, &program)?,
            rate_limit: parse_limits(file, &f.limits, &program)?,
            delete_missing_ok: parse_delete_missing(file, &f.updates)?,
            notes: parse_notes(file, &f.notes)?,
            transaction_retries: parse_transaction_retries(file, &f.transaction_retries, retry_tx)?,
            program: program.into_iter().map(|(s, _)| s).collect(),
        })
    }
}

/// `[notes]`: sim names (as [`check_model_name`] allows a name) to one line of text each,
/// at most 400 characters, shown escaped.
fn parse_notes(
    file: Source,
    notes: &std::collections::BTreeMap<String, Spanned<String>>,
) -> Result<std::collections::BTreeMap<String, String>, InputError> {
    let mut out = std::collections::BTreeMap::new();
    for (sim, text) in notes {
        let t = text.get_ref();
        let bad = if let Err(why) = check_model_name(sim) {
            Some(format!("notes: a sim name: {why}"))
        } else if t.trim().is_empty() || t.chars().count() > 400 || t.contains('\n') {
            Some(format!("notes.{sim}: expected one line of 1 to 400 characters"))
        } else {
            None
        };
        if let Some(why) = bad {
            return Err(file.err(text.span(), why));
        }
        out.insert(sim.clone(), crate::text::printable(t.trim()));
    }
    Ok(out)
}

/// An optional duration in milliseconds, at least 0.001 ms, in microseconds.
pub(super) fn optional_ms(
    file: Source,
    field: &str,
    value: &Option<Spanned<f64>>,
) -> Result<Option<u64>, InputError> {
    value.is_some().then(|| file.ms(field, value, 0, 1)).transpose()
}

/// A model's name names a column of every table: 1 to 64 characters, no spaces or control
/// characters.
fn check_model_name(n: &str) -> Result<(), String> {
    let bad = |c: char| c.is_whitespace() || c.is_control() || "|`<>&*".contains(c);
    if n.is_empty() || n.chars().count() > 64 || n.chars().any(bad) {
        return Err(format!(
            "`{}`: expected 1 to 64 characters without spaces, control characters or |`<>&*",
            crate::input::shown(n)
        ));
    }
    Ok(())
}

/// `name`, or else the file's stem: a valid model name either way.
fn parse_name(file: Source, name: &Option<Spanned<String>>) -> Result<String, InputError> {
    if let Some(n) = name {
        check_model_name(n.get_ref()).map_err(|m| file.err(n.span(), format!("name: {m}")))?;
        return Ok(n.get_ref().clone());
    }
    let path = file.path;
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    check_model_name(&stem).map_err(|m| {
        InputError::file(path, format!("the file name gives the model's name: {m}; set `name`"))
    })?;
    Ok(stem)
}

/// `store_outcomes`: which outcomes are recorded under the key (success by default).
fn parse_store_outcomes(
    file: Source,
    v: &Option<Spanned<String>>,
) -> Result<StoreOutcomes, InputError> {
    let outcomes = file.choice(
        v,
        "store_outcomes",
        &[
            ("success", StoreOutcomes::Success),
            ("all", StoreOutcomes::All),
            ("refusals", StoreOutcomes::Refusals),
            ("dependency", StoreOutcomes::Dependency),
        ],
    )?;
    Ok(outcomes.unwrap_or(StoreOutcomes::Success))
}

/// `[effects] dedupe`: how the effect receiver deduplicates (not at all by default).
fn parse_effect_dedupe(file: Source, e: &EffectsFile) -> Result<EffectDedupe, InputError> {
    let dedupe = file.choice(
        &e.dedupe,
        "effects.dedupe",
        &[
            ("none", EffectDedupe::None),
            ("key", EffectDedupe::Key),
            ("payload", EffectDedupe::Payload),
            ("row", EffectDedupe::Row),
        ],
    )?;
    Ok(dedupe.unwrap_or(EffectDedupe::None))
}

/// `on_error`: the error path's actions; at most one rollback and one claim clean-up.
fn parse_on_error(file: Source, list: &[Spanned<String>]) -> Result<OnError, InputError> {
    let mut on_error = OnError {
        rollback: Rollback::None,
        claim: ClaimCleanup::Keep,
        retry_transaction: false,
        clean_up_on: None,
    };
    for e in list {
        let (rollback, claim) = match e.get_ref().as_str() {
            "rollback" => (Some(Rollback::Own), None),
            "rollback-any" => (Some(Rollback::Any), None),
            "release-claim" => (None, Some(ClaimCleanup::Release)),
            "release-key" => (None, Some(ClaimCleanup::ReleaseKey)),
            "unlock" => (None, Some(ClaimCleanup::Unlock)),
            "mark-failed" => (None, Some(ClaimCleanup::MarkFailed)),
            "retry-transaction" => {
                on_error.retry_transaction = true;
                (None, None)
            }
            other => {
                return Err(file.err(
                    e.span(),
                    format!(
                        "unknown on_error action `{other}`; expected rollback, rollback-any, \
                         release-claim, release-key, unlock, mark-failed or retry-transaction"
                    ),
                ));
            }
        };
        if let Some(r) = rollback {
            if on_error.rollback != Rollback::None {
                return Err(file.err(
                    e.span(),
                    "on_error: `rollback` ends the request's own transaction, `rollback-any` \
                     whatever is open; choose one",
                ));
            }
            on_error.rollback = r;
        }
        if let Some(c) = claim {
            if on_error.claim != ClaimCleanup::Keep {
                return Err(file.err(
                    e.span(),
                    "on_error: `release-claim` deletes the claim, `release-key` the key's record, \
                     `unlock` keeps it for a takeover, `mark-failed` keeps it as failed; choose one",
                ));
            }
            on_error.claim = c;
        }
    }
    Ok(on_error)
}

/// `clean_up_on`: the kinds of failure after which `on_error`'s claim clean-up runs (known,
/// at least one, no repeats); it needs a claim clean-up to restrict.
fn parse_clean_up_on(
    file: Source,
    list: &Option<Spanned<Vec<Spanned<String>>>>,
    claim: ClaimCleanup,
) -> Result<Option<Vec<FailureKind>>, InputError> {
    let Some(list) = list else { return Ok(None) };
    if claim == ClaimCleanup::Keep {
        return Err(file.err(
            list.span(),
            "clean_up_on says after which failures on_error's claim clean-up runs: on_error \
             has none (release-claim, release-key, unlock or mark-failed)",
        ));
    }
    if list.get_ref().is_empty() {
        return Err(file.err(list.span(), "clean_up_on: expected at least one kind of failure"));
    }
    let mut kinds = Vec::new();
    for e in list.get_ref() {
        let Some((_, kind)) = FailureKind::NAMES.iter().find(|(n, _)| *n == e.get_ref()) else {
            let names: Vec<&str> = FailureKind::NAMES.iter().map(|(n, _)| *n).collect();
            return Err(file.err(
                e.span(),
                format!(
                    "unknown clean_up_on failure `{}`; expected {}",
                    crate::input::shown(e.get_ref()),
                    names.join(", ")
                ),
            ));
        };
        if kinds.contains(kind) {
            return Err(file.err(e.span(), format!("clean_up_on: `{}` listed twice", kind.name())));
        }
        kinds.push(*kind);
    }
    Ok(Some(kinds))
}

/// `[rows]`: `unique` a non-empty set of order fields, `on_clash` 409, 200 or "existing".
fn parse_rows(file: Source, r: &RowsFile, has_key: bool) -> Result<RowsPolicy, InputError> {
    let mut unique = Vec::new();
    for f in r.unique.get_ref() {
        let field = match f.get_ref().as_str() {
            "user" => RowField::User,
            "operation" => RowField::Operation,
            "item" => RowField::Item,
            "key" if !has_key => {
                return Err(file.err(f.span(), "rows.unique: `key` needs a [key] section"));
            }
            "key" => RowField::Key,
            other => {
                return Err(file.err(
                    f.span(),
                    format!(
                        "unknown rows.unique field `{}`; expected one of `user`, `operation`, \
                         `item`, `key`",
                        crate::input::shown(other)
                    ),
                ));
            }
        };
        if unique.contains(&field) {
            return Err(file.err(f.span(), "rows.unique: this field is listed twice"));
        }
        unique.push(field);
    }
    if unique.is_empty() {
        return Err(file.err(
            r.unique.span(),
            "rows.unique: expected at least one of `user`, `operation`, `item`, `key`",
        ));
    }
    let on_clash = match &r.on_clash {
        None => OnClash::Conflict,
        Some(v) => match v.get_ref() {
            toml::Value::Integer(409) => OnClash::Conflict,
            toml::Value::Integer(200) => OnClash::Acknowledge,
            toml::Value::String(s) if s == "existing" => OnClash::Existing,
            toml::Value::String(s) if s == "unprocessed" => OnClash::Unprocessed,
            _ => {
                return Err(file.err(
                    v.span(),
                    "rows.on_clash: expected 409, 200, \"existing\" or \"unprocessed\"",
                ));
            }
        },
    };
    let constraint = file
        .choice(&r.enforce, "rows.enforce", &[("constraint", true), ("read", false)])?
        .unwrap_or(true);
    Ok(RowsPolicy { unique, on_clash, constraint })
}

/// `[events] guard`: `"monotonic"` keeps a status from moving backwards.
fn parse_events(file: Source, events: &Option<EventsFile>) -> Result<bool, InputError> {
    let guard = file.choice(
        &events.as_ref().and_then(|e| e.guard.clone()),
        "events.guard",
        &[("none", false), ("monotonic", true)],
    )?;
    Ok(guard.unwrap_or(false))
}

/// `[updates] check`, for a program with an `update-doc` step.
fn parse_version_check(
    file: Source,
    updates: &Option<Spanned<UpdatesFile>>,
    program: &[SpannedStep],
) -> Result<VersionCheck, InputError> {
    let Some(u) = updates else { return Ok(VersionCheck::None) };
    if !program.iter().any(|(s, _)| *s == Step::UpdateDoc) {
        return Err(file.err(u.span(), "[updates] needs an `update-doc` step"));
    }
    let check = file.choice(
        &u.get_ref().check,
        "updates.check",
        &[
            ("none", VersionCheck::None),
            ("if-match", VersionCheck::IfMatch),
            ("required", VersionCheck::Required),
            ("client-time", VersionCheck::ClientTime),
        ],
    )?;
    Ok(check.unwrap_or_default())
}

/// `[limits]` and a `rate-limit` step need each other: (requests per second, burst).
fn parse_limits(
    file: Source,
    limits: &Option<Spanned<LimitsFile>>,
    program: &[SpannedStep],
) -> Result<Option<(u64, u64)>, InputError> {
    let step = program.iter().find(|(s, _)| *s == Step::RateLimit);
    let l = match (limits, step) {
        (None, None) => return Ok(None),
        (None, Some((_, span))) => {
            return Err(
                file.err(span.clone(), "`rate-limit` needs a [limits] section (per_second, burst)")
            );
        }
        (Some(l), None) => {
            return Err(file.err(l.span(), "[limits] needs a `rate-limit` step"));
        }
        (Some(l), Some(_)) => l.get_ref(),
    };
    let rate = *l.per_second.get_ref();
    if !(1..=1_000_000).contains(&rate) {
        return Err(file.err(l.per_second.span(), "limits.per_second: expected 1..=1000000"));
    }
    let burst = l.burst.as_ref().map_or(rate, |b| *b.get_ref());
    if !(1..=1_000_000).contains(&burst) {
        let span = l.burst.as_ref().map(|b| b.span()).unwrap_or(0..0);
        return Err(file.err(span, "limits.burst: expected 1..=1000000"));
    }
    Ok(Some((rate, burst)))
}

/// `[updates] delete_missing`: 404 (the default) or 204 for a DELETE of a document gone.
fn parse_delete_missing(
    file: Source,
    updates: &Option<Spanned<UpdatesFile>>,
) -> Result<bool, InputError> {
    match updates.as_ref().and_then(|u| u.get_ref().delete_missing.as_ref()) {
        None => Ok(false),
        Some(v) if *v.get_ref() == 404 => Ok(false),
        Some(v) if *v.get_ref() == 204 => Ok(true),
        Some(v) => Err(file.err(v.span(), "updates.delete_missing: expected 404 or 204")),
    }
}

/// `transaction_retries` (5 by default), for `on_error = ["retry-transaction"]`.
fn parse_transaction_retries(
    file: Source,
    retries: &Option<Spanned<u32>>,
    retry_tx: bool,
) -> Result<u32, InputError> {
    match retries {
        None => Ok(5),
        Some(n) if (1..=100).contains(n.get_ref()) && retry_tx => Ok(*n.get_ref()),
        Some(n) if !retry_tx => {
            Err(file
                .err(n.span(), "transaction_retries needs on_error = [\"retry-transaction\", …]"))
        }
        Some(n) => Err(file.err(n.span(), "transaction_retries: expected 1..=100")),
    }
}

/// The `[driver]` section.
/// What a stack profile's `[driver]` leaves out: the engine's base (every stack states its
/// timings, so none of these times is ever used).
pub(super) const DRIVER_BASE: Driver = Driver {
    awaits: Awaits::Explicit,
    latency_us: Dist::Uniform(0, 0),
    statement_us: Dist::Uniform(0, 0),
    commit_us: Dist::Uniform(0, 0),
    begin: BeginMode::Immediate,
    journal: Journal::Rollback,
    pool: 0,
    deadline_us: None,
};

/// A `[driver]` section over `base` (the model's stack, or [`DRIVER_BASE`] for a stack file
/// itself): every field it gives replaces the base's.
pub(super) fn parse_driver(
    file: Source,
    d: &DriverFile,
    base: &Driver,
) -> Result<Driver, InputError> {
    let awaits = file
        .choice(
            &d.awaits,
            "driver.awaits",
            &[("explicit", Awaits::Explicit), ("every-statement", Awaits::EveryStatement)],
        )?
        .unwrap_or(base.awaits);
    let range = |field, value, default| file.ms_dist(field, value, default);
    let latency_us = range("driver.latency_ms", &d.latency_ms, base.latency_us)?;
    let statement_us = range("driver.statement_ms", &d.statement_ms, base.statement_us)?;
    let commit_us = range("driver.commit_ms", &d.commit_ms, base.commit_us)?;
    let begin = file
        .choice(
            &d.begin,
            "driver.begin",
            &[
                ("deferred", BeginMode::Deferred),
                ("immediate", BeginMode::Immediate),
                ("exclusive", BeginMode::Exclusive),
            ],
        )?
        .unwrap_or(base.begin);
    let journal = file
        .choice(
            &d.journal,
            "driver.journal",
            &[("rollback", Journal::Rollback), ("wal", Journal::Wal)],
        )?
        .unwrap_or(base.journal);
    let pool = match &d.pool {
        None => base.pool,
        Some(p) if *p.get_ref() <= MAX_POOL => *p.get_ref(),
        Some(p) => {
            return Err(file.err(p.span(), format!("driver.pool: expected 0..={MAX_POOL}")));
        }
    };
    let deadline_us = match &d.deadline_ms {
        None => base.deadline_us,
        Some(_) => Some(file.ms("driver.deadline_ms", &d.deadline_ms, 0, 1)?),
    };
    Ok(Driver { awaits, latency_us, statement_us, commit_us, begin, journal, pool, deadline_us })
}
