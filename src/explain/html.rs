//! The story as a self-contained HTML page (`story_html`): the verdict, the narrative, the
//! pictures of the run and of the contrasting one, the minimal scenario and the replay.

use super::Story;
use crate::history::History;
use crate::picture::{self, esc};
use crate::shrink::Target;

/// The story as a self-contained HTML page.
pub(super) fn story_html(s: &Story) -> String {
    let shown = &s.shown;
    let intent = shown.intent();
    let mut sections: Vec<(String, String)> = vec![
        ("Verdict".into(), picture::paragraphs(&s.verdict)),
        ("What happened".into(), picture::paragraphs(&s.narrative)),
    ];
    let title = format!("{} × {} · seed {}", s.model, shown.sim.name, shown.seed);
    let fig = |h: &History, title: &str| {
        format!("<div class=\"fig\">{}</div>", picture::svg(h, &shown.sim, title, intent))
    };
    sections.push(("The run".into(), fig(&shown.history, &title)));
    if let Some(c) = &s.contrast
        && let Some(h) = &c.history
    {
        let t = format!("the same schedule under {}", c.model);
        sections.push((t.clone(), fig(h, &t)));
    }
    if let Some(m) = &s.minimal {
        sections.push(("The minimal scenario".into(), picture::pre(&m.shrunk.text)));
        let (pass, fail) = m.lists();
        let mut t = String::from("<table><tr><th>survive</th><th>fail</th></tr><tr><td>");
        t.push_str(
            &pass
                .iter()
                .map(|p| format!("<span class=\"ok\">{}</span>", esc(p)))
                .collect::<Vec<_>>()
                .join("<br>"),
        );
        t.push_str("</td><td>");
        t.push_str(&fail.iter().map(|p| esc(p)).collect::<Vec<_>>().join("<br>"));
        t.push_str("</td></tr></table>");
        sections.push((format!("Models on that scenario (seeds 0..{})", m.shrunk.window), t));
    }
    sections.push(("Replay".into(), picture::pre(&s.replay)));
    let what = match s.target {
        Target::Violation(v) => v.name().to_string(),
        Target::Expectation(k) => format!("expectation {}", k.name()),
    };
    picture::html_page(&format!("Why {} fails: {what}", s.model), &sections)
}
