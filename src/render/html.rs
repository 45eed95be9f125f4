//! The HTML renderings: one run as a page (`run_html`) and the survival table as a page
//! (`matrix_html`) with a diagram for every failing cell. Pure functions of their inputs, except
//! that `matrix_html` reruns each failing cell's first failing seed to draw it. Every text from
//! a file is escaped ([`esc`] here, `picture`'s helpers for sections), and each page as a whole
//! holds no character XML forbids ([`crate::text::xml_chars`]).

use std::fmt::Write as _;
use std::sync::Arc;

use super::{
    SURVIVAL_LEGEND, interrupted_note, ranked_by_safety, share_mark, short, verdict_marks,
};
use crate::catalog;
use crate::model::Model;
use crate::run::{self, RunOutput};
use crate::scenario::Sim;
use crate::sweep::{self, Cell};
use crate::text::{printable, xml_chars, xml_text};

/// A user's text in HTML: one line ([`printable`]), markup escaped and what XML forbids
/// replaced ([`xml_text`]).
fn esc(s: &str) -> String {
    xml_text(&printable(s))
}

/// One run as a self-contained HTML page: verdict, diagram, attempts, trace, replay.
pub fn run_html(
    sim: &Sim,
    model: &Model,
    out: &RunOutput,
    history: &crate::history::History,
    replay: &str,
) -> String {
    use crate::picture;
    let r = &out.report;
    let hard: Vec<&crate::report::Violation> =
        r.violations.iter().filter(|v| !v.permitted).collect();
    let verdict = if !r.passed() {
        "FAIL: an expectation of the sim did not hold.".to_string()
    } else if hard.is_empty() {
        "PASS: every expectation held and the oracle named no violation.".to_string()
    } else {
        format!("PASS · {} violation(s) found by the oracle.", hard.len())
    };
    let mut sections = vec![("Verdict".to_string(), picture::paragraphs(&verdict))];
    if !r.violations.is_empty() {
        let list: Vec<String> = r
            .violations
            .iter()
            .map(|v| {
                format!(
                    "{}{}: intent {}: {} ({})",
                    v.name.name(),
                    if v.permitted { " (policy-permitted)" } else { "" },
                    printable(&v.intent),
                    printable(&v.detail),
                    v.name.meaning()
                )
            })
            .collect();
        sections.push(("Violations".into(), picture::pre(&list.join("\n"))));
    }
    let focus = hard.first().map(|v| v.intent.as_str());
    let title = format!("{} × {} · seed {}", model.name, sim.name, r.seed);
    sections.push((
        "The run".into(),
        format!("<div class=\"fig\">{}</div>", picture::svg(history, sim, &title, focus)),
    ));
    let checks: Vec<String> = r.checks.iter().map(super::check_line).collect();
    if !checks.is_empty() {
        sections.push(("Expectations".into(), picture::pre(&checks.join("\n"))));
    }
    sections.push(("Trace".into(), picture::pre(&history.render())));
    sections.push(("Replay".into(), picture::pre(replay)));
    xml_chars(&picture::html_page(&title, &sections)).into_owned()
}

/// The survival table as a self-contained HTML page: rates as bars, and for every failing
/// cell its first failing seed's diagram.
pub fn matrix_html(sims: &[Arc<Sim>], models: &[Arc<Model>], cells: &[Cell]) -> String {
    use crate::picture;
    /// At most this many diagrams in one page.
    const MAX_DIAGRAMS: usize = 60;
    let mut t =
        String::from("<table><tr><th>rank</th><th>design</th><th>safe in</th><th>refused</th>");
    for s in sims {
        let _ = write!(t, "<th>{}</th>", esc(&s.name));
    }
    t.push_str("</tr>\n");
    let mut figs: Vec<(String, String)> = Vec::new();
    let mut anchor = 0;
    for r in ranked_by_safety(sims, models, cells) {
        let mi = r.model;
        let m = &models[mi];
        let _ = write!(
            t,
            "<tr><td>{}</td><th>{}</th><td>{}/{}</td><td>{}</td>",
            r.rank_label(),
            esc(&m.name),
            r.safe,
            r.applicable,
            r.refused_label()
        );
        for (si, s) in sims.iter().enumerate() {
            let c = sweep::cell(cells, models.len(), si, mi);
            let mut td = html_cell(c);
            if figs.len() < MAX_DIAGRAMS
                && let Some((seed, fig)) = failing_diagram(s, m, c, anchor + 1)
            {
                anchor += 1;
                let _ = write!(td, "<div><a href=\"#f{anchor}\">seed {seed}</a></div>");
                figs.push(fig);
            }
            let _ = write!(t, "<td>{td}</td>");
        }
        t.push_str("</tr>\n");
    }
    t.push_str("</table>");
    let mut sections = vec![(
        String::new(),
        format!(
            "{}<p>{} Bars: the share of seeds; * policy-permitted. Failing cells link to \
             their first failing seed's diagram.</p>{t}",
            esc(interrupted_note(cells).trim()),
            code_spans(&esc(&SURVIVAL_LEGEND.replace('*', "")))
        ),
    )];
    if figs.len() == MAX_DIAGRAMS {
        sections.push((
            String::new(),
            format!("<p>Diagrams of the first {MAX_DIAGRAMS} failing cells only.</p>"),
        ));
    }
    sections.extend(figs);
    xml_chars(&picture::html_page("Which design survives which fault", &sections)).into_owned()
}

/// One cell of the HTML survival table, before its diagram link: ✓ or n/a, a bar per
/// violation (the share of seeds, with its 95 % interval), the verdict marks.
fn html_cell(c: &Cell) -> String {
    let mut td = String::new();
    if !c.applicable {
        td.push_str("<span class=\"na\">n/a</span>");
    } else if c.runs == 0 {
        let _ = write!(td, "<span class=\"na\">{}</span>", super::NOT_RUN);
    } else if c.verdict().is_some_and(|v| v.safe && v.as_specified) {
        td.push_str("<span class=\"ok\">✓</span>");
    }
    for (n, v) in c.violations_in_order() {
        let pct = 100.0 * v.seeds as f64 / c.runs.max(1) as f64;
        let _ = write!(
            td,
            "<div><span class=\"bar\" style=\"width:{:.0}px{}\"></span>{}{} {}</div>",
            (pct * 0.6).max(1.0),
            if v.permitted { ";background:#e0b84c" } else { "" },
            esc(short(n)),
            if v.permitted { "*" } else { "" },
            share_mark(v.seeds, c.runs)
        );
    }
    for (label, share) in verdict_marks(c) {
        let _ = write!(td, "<div>{} {}</div>", esc(&label), esc(&share));
    }
    td
}

/// The diagram of a failing cell's first failing seed (its first violation that is not
/// policy-permitted, else its first failed expectation), as section `f{anchor}` of the page:
/// the seed and the (title, body) section; None for a cell that did not fail.
fn failing_diagram(
    s: &Arc<Sim>,
    m: &Arc<Model>,
    c: &Cell,
    anchor: usize,
) -> Option<(u64, (String, String))> {
    use crate::picture;
    let seed = c
        .violations
        .values()
        .filter(|v| !v.permitted)
        .map(|v| v.first_seed)
        .min()
        .or(c.first_failed_seed)?;
    let o = run::run(s, m, seed, run::RunOptions { keep_history: true }).ok()?;
    let h = o.history.as_ref()?;
    let focus = o.report.violations.iter().find(|v| !v.permitted).map(|v| v.intent.as_str());
    let title = format!("{} × {} · seed {seed}", m.name, s.name);
    let body = format!(
        "<div id=\"f{anchor}\" class=\"fig\">{}</div><pre>{}</pre>",
        picture::svg(h, s, &title, focus),
        esc(&catalog::replay_for(s, m, seed))
    );
    Some((seed, (title, body)))
}

/// Markdown's code spans (`` `x` ``) in already escaped text as `<code>x</code>` (a legend
/// shared with the Markdown table); an unpaired backtick stays as it is.
fn code_spans(escaped: &str) -> String {
    let parts: Vec<&str> = escaped.split('`').collect();
    let mut out = String::new();
    for (i, p) in parts.iter().enumerate() {
        let last_unpaired = i == parts.len() - 1 && i % 2 == 1;
        match (i % 2, last_unpaired) {
            (1, false) => out.push_str(&format!("<code>{p}</code>")),
            (1, true) => out.push_str(&format!("`{p}")),
            _ => out.push_str(p),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn code_spans_become_code_elements_and_an_unpaired_backtick_stays() {
        assert_eq!(super::code_spans("a `b` c `d` e"), "a <code>b</code> c <code>d</code> e");
        assert_eq!(super::code_spans("a `b"), "a `b");
        assert_eq!(super::code_spans("none"), "none");
    }
}
