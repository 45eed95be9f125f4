//! The lesson page: one self-contained HTML file (inline CSS and JavaScript, no network, works
//! from a `file://` URL). The lesson's data is embedded as JSON, escaped so that no text in it
//! can close the `<script>` element; the script (`page.js`) only draws and steps through it.

use std::fmt::Write as _;

use crate::picture::esc;

const CSS: &str = include_str!("page.css");
const JS: &str = include_str!("page.js");

/// JSON made safe inside `<script type="application/json">`: `<`, `>` and `&` as `\u` escapes
/// (so `</script>` and `<!--` cannot appear), and the two line separators JavaScript once
/// treated as line ends. These characters occur only inside JSON strings, where the escape
/// means the same character.
pub fn script_json(v: &serde_json::Value) -> String {
    let s = serde_json::to_string(v).unwrap_or_else(|_| "null".into());
    let mut out = String::with_capacity(s.len() + 64);
    for c in s.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// The page: the controls, the figures, the tables and the narrative, filled by the script.
pub fn html(title: &str, data: &serde_json::Value) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{t}</title>\n<style>{CSS}</style></head>\n<body>\n<h1>{t}</h1>\n",
        t = esc(title)
    );
    o.push_str(BODY);
    let _ = write!(
        o,
        "<script id=\"lesson-data\" type=\"application/json\">{}</script>\n<script>{JS}</script>\n\
         </body></html>\n",
        script_json(data)
    );
    o
}

/// The page's fixed structure (every text in it is ours; the run's text is set by the script
/// as text, never as markup).
const BODY: &str = r##"<noscript><p>This page steps through the run with JavaScript; the same data is printed by <code>idemsim lesson --json</code>.</p></noscript>
<p id="verdict" class="verdict"></p>
<div class="controls" role="group" aria-label="Step through the run">
<button id="prev" type="button" aria-label="previous step" title="previous step (Left arrow)">◀ prev</button>
<button id="play" type="button" aria-label="play" title="play / pause (Space)">▶ play</button>
<button id="next" type="button" aria-label="next step" title="next step (Right arrow)">next ▶</button>
<label for="scrub">step</label> <input id="scrub" type="range" min="1" max="1" value="1" aria-label="step">
<span id="stepno" aria-live="polite"></span>
<label for="zoom">zoom</label> <input id="zoom" type="range" min="1" max="60" value="1" aria-label="time zoom">
<span id="zoomno"></span>
</div>
<p class="keys">Keys: ← → step · Home / End · Space play · the scrubber jumps · a step's link: <a id="permalink" href="#step-1">#step-1</a></p>
<div id="caption" class="caption" aria-live="polite"><span id="cap-time"></span> <b id="cap-lane"></b> <span id="cap-text"></span><div id="cap-mark"></div></div>
<div class="layout">
<div class="figs">
<section id="run-main" class="run"><h2 id="main-h"></h2><div class="fig" id="fig-main"></div><div class="legend" id="legend-main"></div></section>
<section id="run-vs" class="run" hidden><h2 id="vs-h"></h2><div class="fig" id="fig-vs"></div><div class="legend" id="legend-vs"></div></section>
</div>
<aside class="side">
<h2>The database after this step</h2>
<div id="db-main" class="db"></div>
<div id="db-vs" class="db" hidden></div>
<h2>What happened (explain)</h2>
<ol id="story" class="story"></ol>
<h2>Replay</h2><pre id="replay"></pre>
</aside>
</div>
"##;
