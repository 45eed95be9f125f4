//! What `shrink` and `explain` follow: a named violation of the oracle, or a kind of the sim's
//! expectations that failed (`--target violation:NAME` or `--target expect:KIND`). One
//! mechanism for both: a [`Target`] picks, in a run's report, the [`Hit`] it follows.

use crate::report::{Check, RunReport, Violation, ViolationKind};
use crate::scenario::Sim;

/// A kind of the sim's expectations, as `expect::check` names its checks: the key of a
/// request's `expect` table or of the sim's `[expect]` it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CheckKind {
    /// A copy's last attempt got no answer at all (`X finished`).
    Finished,
    /// `status`: a copy's final status.
    Status,
    /// `outcome`: a copy's final outcome.
    Outcome,
    /// `replayed`: the final answer was (or was not) a replay.
    Replayed,
    /// `id`: the row id of the final answer.
    Id,
    /// `same_id_as`: the same row id as another request's.
    SameIdAs,
    /// `id_differs_from`: another row id than another request's.
    IdDiffersFrom,
    /// `same_id`: every copy got the same row id (or, false, not).
    SameId,
    /// `rows_after`: rows the probe read right after the request.
    RowsAfter,
    /// `keys_after`: stored keys the probe read right after the request.
    KeysAfter,
    /// `responses_after`: stored responses the probe read right after the request.
    ResponsesAfter,
    /// `[expect] rows`: rows at the end.
    Rows,
    /// `[expect] keys`: stored keys at the end.
    Keys,
    /// `[expect] effects`: external effects at the end.
    Effects,
    /// `[expect] row_qty`: the rows' quantities at the end.
    RowQty,
}

impl CheckKind {
    /// Every kind, in the order `expect::check` can report them.
    pub const ALL: [CheckKind; 15] = [
        CheckKind::Finished,
        CheckKind::Status,
        CheckKind::Outcome,
        CheckKind::Replayed,
        CheckKind::Id,
        CheckKind::SameIdAs,
        CheckKind::IdDiffersFrom,
        CheckKind::SameId,
        CheckKind::RowsAfter,
        CheckKind::KeysAfter,
        CheckKind::ResponsesAfter,
        CheckKind::Rows,
        CheckKind::Keys,
        CheckKind::Effects,
        CheckKind::RowQty,
    ];

    /// The kind's name on the command line (`expect:NAME`).
    pub fn name(self) -> &'static str {
        match self {
            CheckKind::Finished => "finished",
            CheckKind::Status => "status",
            CheckKind::Outcome => "outcome",
            CheckKind::Replayed => "replayed",
            CheckKind::Id => "id",
            CheckKind::SameIdAs => "same-id-as",
            CheckKind::IdDiffersFrom => "id-differs-from",
            CheckKind::SameId => "same-id",
            CheckKind::RowsAfter => "rows-after",
            CheckKind::KeysAfter => "keys-after",
            CheckKind::ResponsesAfter => "responses-after",
            CheckKind::Rows => "rows",
            CheckKind::Keys => "keys",
            CheckKind::Effects => "effects",
            CheckKind::RowQty => "row-qty",
        }
    }

    /// The kind of a check, read from the name `expect::check` gives it (`click[0].status`,
    /// `rows after first`, `second.id = first.id`, `rows` …). Request ids are kebab-case, so
    /// the separators below cannot come from an id.
    pub fn of(check: &Check) -> CheckKind {
        let w = check.what.as_str();
        let exact = [
            ("rows", CheckKind::Rows),
            ("stored keys", CheckKind::Keys),
            ("effects", CheckKind::Effects),
            ("row qty", CheckKind::RowQty),
        ];
        if let Some((_, k)) = exact.iter().find(|(n, _)| *n == w) {
            return *k;
        }
        let prefixed = [
            ("rows after ", CheckKind::RowsAfter),
            ("stored keys after ", CheckKind::KeysAfter),
            ("stored responses after ", CheckKind::ResponsesAfter),
        ];
        if let Some((_, k)) = prefixed.iter().find(|(p, _)| w.starts_with(p)) {
            return *k;
        }
        if w.contains(".id = ") {
            return CheckKind::SameIdAs;
        }
        if w.contains(".id ≠ ") {
            return CheckKind::IdDiffersFrom;
        }
        let suffixed = [
            (".status", CheckKind::Status),
            (".outcome", CheckKind::Outcome),
            (".replayed", CheckKind::Replayed),
            (".id", CheckKind::Id),
            (": every copy got the same id", CheckKind::SameId),
        ];
        match suffixed.iter().find(|(s, _)| w.ends_with(s)) {
            Some((_, k)) => *k,
            None => CheckKind::Finished,
        }
    }
}

/// What to follow: an oracle violation by name, or a kind of failed expectation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    /// A violation that is not policy-permitted (`violation:NAME`).
    Violation(ViolationKind),
    /// A failed expectation of this kind (`expect:KIND`).
    Expectation(CheckKind),
}

impl Target {
    /// Read `violation:NAME` or `expect:KIND`; what is wrong lists every valid target.
    pub fn parse(s: &str) -> Result<Target, String> {
        let found = match s.split_once(':') {
            Some(("violation", n)) => {
                ViolationKind::ALL.into_iter().find(|k| k.name() == n).map(Target::Violation)
            }
            Some(("expect", n)) => {
                CheckKind::ALL.into_iter().find(|k| k.name() == n).map(Target::Expectation)
            }
            _ => None,
        };
        found.ok_or_else(|| {
            format!(
                "unknown target `{}`: expected violation:NAME or expect:KIND, where NAME is one \
                 of {} and KIND one of {}",
                crate::text::shown(s),
                ViolationKind::ALL.map(|k| k.name()).join(", "),
                CheckKind::ALL.map(|k| k.name()).join(", ")
            )
        })
    }

    /// As `--target` takes it: `violation:duplicate-row`, `expect:status`.
    pub fn spec(&self) -> String {
        match self {
            Target::Violation(v) => format!("violation:{}", v.name()),
            Target::Expectation(k) => format!("expect:{}", k.name()),
        }
    }

    /// In words: `violation duplicate-row`, `expectation status`.
    pub fn words(&self) -> String {
        match self {
            Target::Violation(v) => format!("violation {}", v.name()),
            Target::Expectation(k) => format!("expectation {}", k.name()),
        }
    }

    /// `violation` or `expectation`.
    pub fn family(&self) -> &'static str {
        match self {
            Target::Violation(_) => "violation",
            Target::Expectation(_) => "expectation",
        }
    }

    /// The first thing in `report` this target follows: its violation (not policy-permitted)
    /// or its first failed check of the kind.
    pub fn hit(&self, report: &RunReport) -> Option<Hit> {
        match *self {
            Target::Violation(v) => report
                .violations
                .iter()
                .find(|x| x.name == v && !x.permitted)
                .map(|x| Hit::Violation(x.clone())),
            Target::Expectation(k) => report
                .checks
                .iter()
                .find(|c| !c.held && CheckKind::of(c) == k)
                .map(|c| Hit::Expectation(k, c.clone())),
        }
    }
}

/// What a run shows of a target: the violation, or the failed check.
#[derive(Debug, Clone, PartialEq)]
pub enum Hit {
    /// A violation that is not policy-permitted.
    Violation(Violation),
    /// A failed expectation and its kind.
    Expectation(CheckKind, Check),
}

impl Hit {
    /// The first hit of `report` for `target`; without one, the first violation that is not
    /// policy-permitted (in report order), else the first failed expectation.
    pub fn first(report: &RunReport, target: Option<Target>) -> Option<Hit> {
        if let Some(t) = target {
            return t.hit(report);
        }
        Hit::first_violation(report).or_else(|| Hit::first_expectation(report))
    }

    /// The first violation of `report` that is not policy-permitted.
    pub fn first_violation(report: &RunReport) -> Option<Hit> {
        report.violations.iter().find(|v| !v.permitted).map(|v| Hit::Violation(v.clone()))
    }

    /// The first failed expectation of `report`.
    pub fn first_expectation(report: &RunReport) -> Option<Hit> {
        report
            .checks
            .iter()
            .find(|c| !c.held)
            .map(|c| Hit::Expectation(CheckKind::of(c), c.clone()))
    }

    /// The same failure in another run's `report`: the same violation (not
    /// policy-permitted), or a failed expectation of the same kind with the same expected and
    /// actual values (the same wrong answer, so a shrunk scenario cannot trade the failure
    /// for another of the kind: a request left alone that gets 201 where it expected 422
    /// instead of the 400 it got beside the first).
    pub fn again(&self, report: &RunReport) -> Option<Hit> {
        match self {
            Hit::Violation(v) => Target::Violation(v.name).hit(report),
            Hit::Expectation(k, c) => report
                .checks
                .iter()
                .find(|x| {
                    !x.held
                        && CheckKind::of(x) == *k
                        && x.expected == c.expected
                        && x.actual == c.actual
                })
                .map(|x| Hit::Expectation(*k, x.clone())),
        }
    }

    /// The target this hit belongs to.
    pub fn target(&self) -> Target {
        match self {
            Hit::Violation(v) => Target::Violation(v.name),
            Hit::Expectation(k, _) => Target::Expectation(*k),
        }
    }

    /// `violation duplicate-row` or `the failed expectation status (`x.status`: expected 201,
    /// got 500)`, for a `following:` line.
    pub fn following(&self) -> String {
        match self {
            Hit::Violation(v) => format!("violation {}", v.name.name()),
            Hit::Expectation(k, c) => format!(
                "the failed expectation {} (`{}`: expected {}, got {})",
                k.name(),
                crate::text::printable(&c.what),
                crate::text::printable(&c.expected),
                crate::text::printable(&c.actual)
            ),
        }
    }

    /// The intent the hit is about: a violation's, or the intent of the request a failed
    /// expectation names (none for the end state's expectations, which are about every
    /// intent).
    pub fn intent<'a>(&'a self, sim: &'a Sim) -> Option<&'a str> {
        match self {
            Hit::Violation(v) => Some(v.intent.as_str()),
            Hit::Expectation(_, c) => request_of(sim, c).map(|i| sim.requests[i].intent.as_str()),
        }
    }
}

/// The request a check is about (its id begins the check's name, or follows `… after `),
/// none for the end state's expectations.
pub fn request_of(sim: &Sim, check: &Check) -> Option<usize> {
    let w = check.what.as_str();
    let subject = ["rows after ", "stored keys after ", "stored responses after "]
        .iter()
        .find_map(|p| w.strip_prefix(p))
        .unwrap_or(w);
    sim.requests.iter().position(|q| {
        subject
            .strip_prefix(q.id.as_str())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[', ':', ' ']))
    })
}
