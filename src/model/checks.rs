//! The checks across a model's parts: the program's structure, where its named points sit,
//! and what its steps, `[rows]`, `[key]`, `[driver]` and `on_error` need of one another.

use std::ops::Range;

use super::file::{ModelFile, RowsFile};
use super::parse::optional_ms;
use super::steps::SpannedStep;
use super::{ClaimCleanup, KeyPolicy, KeyStore, Lease, Step};
use crate::input::{InputError, Source};

/// `check-row` and `[rows]` need each other; `on_clash = "unprocessed"` needs a
/// `mark-processed` step.
pub(super) fn check_rows_steps(
    file: Source,
    program: &[SpannedStep],
    rows: &Option<RowsFile>,
) -> Result<(), InputError> {
    let check_row = program.iter().find(|(s, _)| *s == Step::CheckRow);
    let insert_at = program.iter().position(|(s, _)| *s == Step::InsertRow);
    match (check_row, rows) {
        (Some((_, span)), None) => Err(file.err(
            span.clone(),
            "`check-row` reads rows by their business key: it needs a [rows] section",
        )),
        (Some((_, span)), Some(_))
            if insert_at.is_none_or(|i| program[..i].iter().all(|(s, _)| *s != Step::CheckRow)) =>
        {
            Err(file.err(span.clone(), "`check-row` must come before `insert-row`"))
        }
        (_, Some(RowsFile { on_clash: Some(c), .. }))
            if c.get_ref().as_str() == Some("unprocessed")
                && !program.iter().any(|(s, _)| *s == Step::MarkProcessed) =>
        {
            Err(file.err(
                c.span(),
                "rows.on_clash = \"unprocessed\" re-runs events not yet marked processed: \
                 the program needs a `mark-processed` step",
            ))
        }
        (None, Some(RowsFile { enforce: Some(e), .. })) if e.get_ref() == "read" => Err(file.err(
            e.span(),
            "rows.enforce = \"read\" guards the business key by a `check-row` step: \
             the program has none",
        )),
        _ => Ok(()),
    }
}

/// Structural checks: one insert-row, begin/commit paired, key steps need a key policy.
pub(super) fn check_structure(
    file: Source,
    program: &[SpannedStep],
    program_span: Range<usize>,
    has_key: bool,
) -> Result<(), InputError> {
    check_one_write(file, program, program_span.clone())?;
    check_reply(file, program)?;
    let (mut open, mut inserted, mut claimed) = (false, false, false);
    let mut points: Vec<&str> = Vec::new();
    for (step, span) in program {
        if let Step::RecoveryPoint(p) = step {
            check_recovery_point(file, p, span, claimed, &points)?;
            points.push(p);
        }
        if *step == Step::Claim {
            claimed = true;
        }
        if step.is_write() {
            inserted = true;
        }
        if *step == Step::SaveResponse && !inserted {
            return Err(file.err(
                span.clone(),
                "`save-response` before `insert-row`: there is no response to save yet",
            ));
        }
        open = check_transaction_step(file, step, span, open, has_key)?;
    }
    if open {
        return Err(
            file.err(program_span, "program ends inside a transaction; expected a `commit`")
        );
    }
    Ok(())
}

/// Exactly one step writes the business state.
fn check_one_write(
    file: Source,
    program: &[SpannedStep],
    program_span: Range<usize>,
) -> Result<(), InputError> {
    let inserts = program.iter().filter(|(s, _)| s.is_write()).count();
    if inserts != 1 {
        return Err(file.err(
            program_span,
            format!(
                "a program needs exactly one `insert-row` (or, for status events, one \
                 `apply-status`; for document updates, one `update-doc`) step (found {inserts})"
            ),
        ));
    }
    Ok(())
}

/// `reply` sends the pending answer: at most one, after the business write, outside a
/// transaction (what is sent must not be rolled back), and no `lookup` or `claim` after it
/// (they could only answer a request already answered).
fn check_reply(file: Source, program: &[SpannedStep]) -> Result<(), InputError> {
    let Some(at) = program.iter().position(|(s, _)| *s == Step::Reply) else { return Ok(()) };
    let span = program[at].1.clone();
    if let Some((_, again)) = program[at + 1..].iter().find(|(s, _)| *s == Step::Reply) {
        return Err(file.err(again.clone(), "a second `reply`: the answer is sent once"));
    }
    if !program[..at].iter().any(|(s, _)| s.is_write()) {
        return Err(file.err(span, "`reply` before `insert-row`: there is no answer to send yet"));
    }
    let open = program[..at].iter().fold(false, |open, (s, _)| match s {
        Step::Begin => true,
        Step::Commit => false,
        _ => open,
    });
    if open {
        return Err(file.err(
            span,
            "`reply` inside a transaction: the answer would be sent before its writes commit; \
             expected it after `commit`",
        ));
    }
    if let Some((s, later)) =
        program[at..].iter().find(|(s, _)| matches!(s, Step::Lookup | Step::Claim))
    {
        return Err(file.err(
            later.clone(),
            format!("`{}` after `reply`: the request is already answered", s.name()),
        ));
    }
    Ok(())
}

/// A recovery point comes after a `claim` and is named once (`points`: those before it).
fn check_recovery_point(
    file: Source,
    p: &str,
    span: &Range<usize>,
    claimed: bool,
    points: &[&str],
) -> Result<(), InputError> {
    if !claimed {
        return Err(file.err(
            span.clone(),
            "a recovery point needs a `claim` before it: the claim is what remembers it",
        ));
    }
    if points.contains(&p) {
        return Err(file.err(span.clone(), format!("recovery point `{p}` twice")));
    }
    Ok(())
}

/// `begin` and `commit` pair up; key steps need a `[key]` section. Whether a transaction is
/// open after `step`.
fn check_transaction_step(
    file: Source,
    step: &Step,
    span: &Range<usize>,
    open: bool,
    has_key: bool,
) -> Result<bool, InputError> {
    match step {
        Step::Begin if open => {
            Err(file
                .err(span.clone(), "`begin` inside an open transaction; expected `commit` first"))
        }
        Step::Begin => Ok(true),
        Step::Commit if !open => {
            Err(file.err(span.clone(), "`commit` without a `begin` before it"))
        }
        Step::Commit => Ok(false),
        Step::Lookup | Step::Claim | Step::SaveResponse if !has_key => {
            Err(file.err(span.clone(), format!("step `{}` needs a [key] section", step.name())))
        }
        _ => Ok(open),
    }
}

/// The named points a sim can inject at, each defined by what has happened when it fires.
/// A model places each where its program makes the definition true; the loader checks it.
pub const POINTS: &[(&str, &str)] = &[
    (
        "before-commit",
        "the business write is done; the transaction that holds it (if any) has not committed \
         and the outcome is not saved",
    ),
    (
        "before-effect",
        "the business write is committed; no effect step has run yet (in a design without one, \
         the sim's fallback effect at @after-commit is still to come)",
    ),
    (
        "after-effect",
        "every effect step has run and the business write is done; the outcome is not saved \
         yet (only in a design with an effect step)",
    ),
    (
        "after-commit",
        "the business write, the saved outcome and every effect are done and committed; only \
         the reply is left (not yet sent by a `reply` step)",
    ),
];

/// Where the facts the points are defined by become true in a program: the index of the
/// step after which each holds (None: never).
struct PointFacts {
    write: Option<usize>,
    /// The write is committed (its own index for an autocommit write).
    write_committed: Option<usize>,
    save: Option<usize>,
    save_committed: Option<usize>,
    effects: Vec<usize>,
    /// A `reply` step: the answer is sent there.
    reply: Option<usize>,
}

impl PointFacts {
    fn of(program: &[SpannedStep]) -> PointFacts {
        let mut f = PointFacts {
            write: None,
            write_committed: None,
            save: None,
            save_committed: None,
            effects: Vec::new(),
            reply: None,
        };
        let (mut open, mut pending_write, mut pending_save) = (false, false, false);
        for (i, (step, _)) in program.iter().enumerate() {
            match step {
                Step::Begin => open = true,
                Step::Commit => {
                    open = false;
                    if std::mem::take(&mut pending_write) {
                        f.write_committed = Some(i);
                    }
                    if std::mem::take(&mut pending_save) {
                        f.save_committed = Some(i);
                    }
                }
                s if s.is_write() => {
                    f.write = Some(i);
                    if open { pending_write = true } else { f.write_committed = Some(i) }
                }
                Step::SaveResponse => {
                    f.save = Some(i);
                    if open { pending_save = true } else { f.save_committed = Some(i) }
                }
                Step::Effect => f.effects.push(i),
                Step::Reply => f.reply = Some(i),
                _ => {}
            }
        }
        f
    }

    /// Does point `p`'s definition hold at step index `i` (`open`: inside a transaction)?
    fn hold(&self, p: &str, i: usize, open: bool) -> bool {
        let after = |fact: Option<usize>| fact.is_none_or(|f| f < i);
        let before = |fact: Option<usize>| fact.is_none_or(|f| f > i);
        let wrote = self.write.is_some_and(|w| w < i);
        let effects_after = self.effects.iter().all(|&e| e > i);
        let effects_before = self.effects.iter().all(|&e| e < i);
        match p {
            // An autocommit write commits by itself: only the save is still to come.
            "before-commit" => {
                wrote
                    && (self.write_committed == self.write || before(self.write_committed))
                    && before(self.save)
            }
            "before-effect" => wrote && after(self.write_committed) && effects_after,
            "after-effect" => {
                !self.effects.is_empty() && wrote && effects_before && before(self.save)
            }
            "after-commit" => {
                wrote
                    && !open
                    && after(self.write_committed)
                    && after(self.save_committed)
                    && self.save_committed.is_some() == self.save.is_some()
                    && effects_before
                    && before(self.reply)
            }
            _ => true,
        }
    }
}

/// Each defined point (`POINTS`) sits where its definition holds.
pub(super) fn check_points(file: Source, program: &[SpannedStep]) -> Result<(), InputError> {
    let facts = PointFacts::of(program);
    let mut open = false;
    for (i, (step, span)) in program.iter().enumerate() {
        match step {
            Step::Begin => open = true,
            Step::Commit => open = false,
            _ => {}
        }
        let Step::Point(p) = step else { continue };
        let Some((_, meaning)) = POINTS.iter().find(|(n, _)| n == p) else { continue };
        if !facts.hold(p, i, open) {
            return Err(file.err(
                span.clone(),
                format!("@{p} is where {meaning}; it does not hold at this place in the program"),
            ));
        }
    }
    Ok(())
}

/// `lease_ms = "deadline"` needs `[driver] deadline_ms` and takes it as the lease.
pub(super) fn fill_lease_deadline(
    file: Source,
    f: &ModelFile,
    key: Option<&mut KeyPolicy>,
) -> Result<(), InputError> {
    let driver_deadline = optional_ms(file, "driver.deadline_ms", &f.driver.deadline_ms)?;
    if let Some(k) = key
        && matches!(k.lease, Lease::ToDeadline(_))
    {
        match driver_deadline {
            Some(d) => k.lease = Lease::ToDeadline(d),
            None => {
                let span = f.key.as_ref().and_then(|k| k.lease_ms.as_ref()).map(|l| l.span());
                return Err(file.err(
                    span.unwrap_or(0..0),
                    "key.lease_ms = \"deadline\" needs [driver] deadline_ms (the \
                     execution's time limit)",
                ));
            }
        }
    }
    Ok(())
}

/// Recovery points and a completer resume through a takeover of an expired lease on a SQLite
/// record. Whether the model can resume so.
pub(super) fn check_recovery(
    file: Source,
    f: &ModelFile,
    program: &[SpannedStep],
    key: Option<&KeyPolicy>,
) -> Result<bool, InputError> {
    let resumable = key.is_some_and(|k| k.lease.is_some() && k.store == KeyStore::Sqlite);
    let has_points = program.iter().any(|(s, _)| matches!(s, Step::RecoveryPoint(_)));
    if has_points && !resumable {
        return Err(file.err(
            f.program.span(),
            "recovery points resume through a takeover of the claim: they need [key] \
             lease_ms and store = \"sqlite\"",
        ));
    }
    if let Some(k) = key
        && k.completer_every_us.is_some()
        && !has_points
    {
        return Err(file.err(
            f.program.span(),
            "key.completer_every_ms: a completer resumes abandoned claims at their recovery \
             point; the program has no `recovery-point:<name>` step",
        ));
    }
    Ok(resumable)
}

/// What `on_error`'s claim clean-up needs: `mark-failed` a claim in the SQLite store and no
/// stored failures; `unlock` a resumable model.
pub(super) fn check_claim_cleanup(
    file: Source,
    f: &ModelFile,
    program: &[SpannedStep],
    key: Option<&KeyPolicy>,
    claim: ClaimCleanup,
    resumable: bool,
) -> Result<(), InputError> {
    if claim == ClaimCleanup::MarkFailed {
        let span = f.on_error.iter().find(|e| e.get_ref() == "mark-failed").map(|e| e.span());
        let span = span.unwrap_or(f.program.span());
        let claims = program.iter().any(|(s, _)| *s == Step::Claim);
        if !claims || key.is_none_or(|k| k.store != KeyStore::Sqlite) {
            return Err(file.err(
                span,
                "on_error `mark-failed` marks the request's own claim failed: it needs a \
                 `claim` step and the SQLite key store",
            ));
        }
        if f.store_outcomes.as_ref().is_some_and(|s| s.get_ref() != "success") {
            return Err(file.err(
                span,
                "on_error `mark-failed` keeps a failure as a `failed` record; \
                 store_outcomes would store it as done: choose one",
            ));
        }
    }
    if claim == ClaimCleanup::Unlock && !resumable {
        let span = f.on_error.iter().find(|e| e.get_ref() == "unlock").map(|e| e.span());
        return Err(file.err(
            span.unwrap_or(f.program.span()),
            "on_error `unlock` ends the claim's lease so a retry can take it over: it needs \
             [key] lease_ms and store = \"sqlite\"",
        ));
    }
    Ok(())
}
