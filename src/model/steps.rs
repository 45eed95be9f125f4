//! The step table: every kind of step a program may name, how it is written and what it does,
//! listed once (`STEPS`); the step names of a program parsed against it.

use std::ops::Range;
use std::sync::LazyLock;

use toml::Spanned;

use crate::input::{InputError, Source, is_kebab};

/// One step of a server program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `BEGIN IMMEDIATE`: take the write lock (waited out in simulated time, then 503).
    Begin,
    /// `COMMIT`.
    Commit,
    /// Look the key up: a completed record replays (or answers `on_mismatch` when the
    /// fingerprint differs); an in-progress record answers `in_flight`; a miss goes on.
    Lookup,
    /// Claim the key with a unique insert of an in-progress record; a conflict is handled as a
    /// lookup hit.
    Claim,
    /// Insert the business row: the response becomes 201 `{id, item, qty}`.
    InsertRow,
    /// Record the response under the key: completes this request's claim, or inserts a new
    /// record (a primary-key clash is an error → 500).
    SaveResponse,
    /// The wait an asynchronous driver introduces: other requests run here.
    Await,
    /// Call the external effect receiver (e-mail, payment) for this intent.
    Effect,
    /// Insert an outbox row for this request's effect (in the current transaction); a relay
    /// in the process delivers it later and marks it sent.
    Outbox,
    /// A named point where a sim injects trouble (`@before-commit`, `@after-commit`, ...).
    Point(String),
    /// `recovery-point:NAME`: the claim records the phase reached (and the row inserted), so a
    /// retry that takes the claim over resumes after it instead of starting again.
    RecoveryPoint(String),
    /// `UPDATE stock SET units = units - qty WHERE item = ?` under a `CHECK (units >= 0)`:
    /// sold out is 422, a business refusal the rest of the program stores.
    TakeStock,
    /// A status event (`POST /api/events`): upsert the resource's status; the reply is 200
    /// with the event. `[events] guard = "monotonic"` ignores a status not past the stored one.
    ApplyStatus,
    /// A rate limiter (a token bucket per process, `[limits]`): out of tokens → 429, through
    /// the error path (so `store_outcomes = "all"` stores it under a claim taken before).
    RateLimit,
    /// `UPDATE rows SET processed_us = now WHERE id = <the request's row>`: the event is
    /// handled (`[rows] on_clash = "unprocessed"` then acknowledges its redeliveries).
    MarkProcessed,
    /// `SELECT … FROM rows WHERE <business key> = ?`: a row with the request's business key
    /// exists already → the `[rows] on_clash` answer (a business refusal), else go on. A read,
    /// not a constraint: two requests may both find nothing (`[rows] enforce = "read"`).
    CheckRow,
    /// A document update (`PUT /api/docs/<id>`): `UPDATE docs SET value = ?, version =
    /// version + 1 WHERE id = ?`, with `AND version = ?` (the `If-Match`) when `[updates]
    /// check` asks for it; 0 rows is 412, a business refusal the rest of the program stores.
    UpdateDoc,
    /// Send the pending reply to the client now; the steps after it run after the client has
    /// its answer and cannot change it (a reply sent before the outcome is stored).
    Reply,
}

/// A kind of step: how a program writes it and what it does. `STEPS` lists every kind once.
#[derive(Debug)]
pub struct StepKind {
    /// The step; a named one (`@name`, `recovery-point:name`) with an empty name.
    pub step: Step,
    /// How a program writes it: its whole name, or, for a named step, the prefix of its name.
    pub name: &'static str,
    /// For a named step, the placeholder its name is shown as in the list of steps.
    pub named: Option<&'static str>,
    /// Does the step run an SQL statement (and so await under `awaits = "every-statement"`)?
    pub statement: bool,
    /// Does the step write the request's business state (exactly one per program)?
    pub write: bool,
}

/// A step written by its name alone.
const fn plain(step: Step, name: &'static str, statement: bool, write: bool) -> StepKind {
    StepKind { step, name, named: None, statement, write }
}

/// A step written as a prefix and a kebab-case name.
const fn named(step: Step, prefix: &'static str, shown: &'static str, statement: bool) -> StepKind {
    StepKind { step, name: prefix, named: Some(shown), statement, write: false }
}

/// The step table: every kind of step, in the order the list of steps shows them.
pub const STEPS: &[StepKind] = &[
    //    the step             written as        statement  write
    plain(Step::Begin, "begin", true, false),
    plain(Step::Commit, "commit", true, false),
    plain(Step::Lookup, "lookup", true, false),
    plain(Step::Claim, "claim", true, false),
    plain(Step::InsertRow, "insert-row", true, true),
    plain(Step::SaveResponse, "save-response", true, false),
    plain(Step::Reply, "reply", false, false),
    plain(Step::Await, "await", false, false),
    plain(Step::Effect, "effect", false, false),
    plain(Step::Outbox, "outbox", true, false),
    plain(Step::TakeStock, "take-stock", true, false),
    plain(Step::CheckRow, "check-row", true, false),
    plain(Step::MarkProcessed, "mark-processed", true, false),
    plain(Step::RateLimit, "rate-limit", false, false),
    plain(Step::ApplyStatus, "apply-status", true, true),
    plain(Step::UpdateDoc, "update-doc", true, true),
    named(Step::RecoveryPoint(String::new()), "recovery-point:", "<name>", true),
    named(Step::Point(String::new()), "@", "<point-name>", false),
];

/// Every way to write a step, as an error lists them: `begin, commit, …, @<point-name>`.
pub static STEP_NAMES: LazyLock<String> = LazyLock::new(|| {
    let names: Vec<String> =
        STEPS.iter().map(|k| format!("{}{}", k.name, k.named.unwrap_or(""))).collect();
    names.join(", ")
});

impl Step {
    /// The step's row in the step table.
    pub fn kind(&self) -> &'static StepKind {
        let this = std::mem::discriminant(self);
        let kind = STEPS.iter().find(|k| std::mem::discriminant(&k.step) == this);
        kind.expect("every step kind is in STEPS")
    }

    /// The step as a program writes it (`insert-row`, `@before-commit`).
    pub fn name(&self) -> String {
        let kind = self.kind();
        match self {
            Step::Point(n) | Step::RecoveryPoint(n) => format!("{}{n}", kind.name),
            _ => kind.name.to_string(),
        }
    }

    /// The step a program writes as `written`, if it is one.
    pub fn from_name(written: &str) -> Option<Step> {
        STEPS.iter().find_map(|k| match k.named {
            None => (k.name == written).then(|| k.step.clone()),
            Some(_) => written.strip_prefix(k.name).filter(|n| is_kebab(n)).map(|n| k.with(n)),
        })
    }

    /// The step writes the request's business state (exactly one per program).
    pub fn is_write(&self) -> bool {
        self.kind().write
    }

    /// Does the step run an SQL statement (and so await under `awaits = "every-statement"`)?
    pub fn is_statement(&self) -> bool {
        self.kind().statement
    }
}

impl StepKind {
    /// A named step of this kind with name `n`.
    fn with(&self, n: &str) -> Step {
        match self.step {
            Step::Point(_) => Step::Point(n.to_string()),
            Step::RecoveryPoint(_) => Step::RecoveryPoint(n.to_string()),
            _ => self.step.clone(),
        }
    }
}

/// A step with the span it was written at.
pub(super) type SpannedStep = (Step, Range<usize>);

/// The step names of `program`.
pub(super) fn parse_program(
    file: Source,
    program: &Spanned<Vec<Spanned<String>>>,
) -> Result<Vec<SpannedStep>, InputError> {
    let mut steps = Vec::new();
    for s in program.get_ref() {
        let Some(step) = Step::from_name(s.get_ref()) else {
            return Err(file.err(
                s.span(),
                format!("unknown step `{}`; expected one of: {}", s.get_ref(), *STEP_NAMES),
            ));
        };
        steps.push((step, s.span()));
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_reads_back_from_its_name() {
        for k in STEPS {
            let step = match k.named {
                None => k.step.clone(),
                Some(_) => k.with("x"),
            };
            assert_eq!(Step::from_name(&step.name()), Some(step.clone()), "{k:?}");
            assert_eq!(step.kind().name, k.name, "{k:?}");
        }
    }

    #[test]
    fn the_list_of_steps_is_unchanged() {
        assert_eq!(
            *STEP_NAMES,
            "begin, commit, lookup, claim, insert-row, save-response, reply, await, effect, outbox, \
             take-stock, check-row, mark-processed, rate-limit, apply-status, update-doc, \
             recovery-point:<name>, @<point-name>"
        );
    }
}
