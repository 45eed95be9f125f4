//! Model headers and the docs' prose quote no rate typed by hand: a count of runs (`13/100`) or a share (`40.9 %`)
//! in a model file's comments must sit in a generated block (`# <!-- gen: ... -->`, rewritten
//! from the sims as they run by tools/gen-docs.py, checked by `gen-docs.py --check` in CI), so a
//! header cannot keep quoting a rate the engine no longer gives. In README.md and docs/ a rate
//! is a generated block or an inline quote (`<!-- q: ARGS -->…<!-- /q -->`, tools/quote.py).

use super::root;

/// Run counts the sims use: `k/n` with one of these `n` reads as a measured rate.
const RUN_COUNTS: &[u64] =
    &[10, 16, 20, 30, 40, 50, 60, 100, 200, 300, 400, 500, 1000, 2000, 5000, 10000, 20000];

/// The first hand-typed rate in a line, if any: `k/n` (n a run count, k ≤ n) or a number
/// followed by `%`. A confidence level (`95 %` before "CI", "interval", "Wilson" or
/// "confidence") is not a rate; a sentence's full stop is not part of a number.
fn typed_rate(line: &str) -> Option<String> {
    let b = line.as_bytes();
    let number = |mut i: usize| {
        let start = i;
        while i < b.len()
            && (b[i].is_ascii_digit()
                || (b[i] == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)))
        {
            i += 1;
        }
        (i > start).then(|| (line[start..i].to_string(), i))
    };
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) {
            let (k, j) = number(i).unwrap();
            let mut after = j;
            while after < b.len() && b[after] == b' ' {
                after += 1;
            }
            if after < b.len() && b[after] == b'%' {
                let next: String = line[after + 1..].chars().take(24).collect();
                let level = k == "95"
                    && ["CI", "interval", "Wilson", "confidence"].iter().any(|w| next.contains(w));
                if !level {
                    return Some(format!("{k} %"));
                }
            } else if j < b.len()
                && b[j] == b'/'
                && let Some((n, _)) = number(j + 1)
            {
                let (k, n): (u64, u64) = (k.parse().unwrap_or(u64::MAX), n.parse().unwrap_or(0));
                if RUN_COUNTS.contains(&n) && k <= n {
                    return Some(format!("{k}/{n}"));
                }
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    None
}

#[test]
fn model_headers_quote_rates_only_in_generated_blocks() {
    assert_eq!(typed_rate("# case 12 on 41/100 seeds"), Some("41/100".into()));
    assert_eq!(typed_rate("# about 40.9 % of seeds"), Some("40.9 %".into()));
    assert_eq!(typed_rate("# return 409/202 (the article)"), None);
    assert_eq!(typed_rate("# lines 131-157, PR #72, :98-118"), None);
    assert_eq!(typed_rate("fails on every seed: 12/16."), Some("12/16".into()));
    assert_eq!(typed_rate("its 95 % Wilson interval, and 95% CI"), None);
    assert_eq!(typed_rate("a 95 % interval; 95 % of seeds"), Some("95 %".into()));
    let mut found = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(root().join("models"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let mut generated = false;
        for (n, line) in text.lines().enumerate() {
            if line.starts_with("# <!-- gen: ") {
                generated = true;
            } else if line.starts_with("# <!-- /gen -->") {
                generated = false;
            } else if line.starts_with('#')
                && !generated
                && let Some(rate) = typed_rate(line)
            {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                found.push(format!("models/{name}:{}: `{rate}`: {line}", n + 1));
            }
        }
    }
    assert!(found.is_empty(), "rates typed by hand in model headers:\n{}", found.join("\n"));
}

/// Pages that are records of real measurements (rendered from saved data by tools/reality.py and
/// tools/packages.py, each run dated): their rates are what was measured, not the matrix's.
const MEASUREMENT_RECORDS: &[&str] =
    &["docs/reality.md", "docs/packages.md", "docs/reality-measurements.md", "docs/controlled.md"];

/// Figures in the prose that read as rates and are not the matrix's, each with what keeps it
/// true: a parameter a sim or a strategy sets, a threshold, a format or a statistic that a unit
/// test asserts, a figure another document reported. Each phrase must still be on its page.
const NOT_MATRIX_RATES: &[(&str, &str, &str)] = &[
    ("README.md", "`dup-row 23% [17–30]`", "a format example: render::share_mark(46, 200)'s test"),
    ("README.md", "10/200 → 14/200 is noise", "baseline::tests::readme_fisher_example"),
    ("README.md", "10/200 → 60/200 is not", "baseline::tests::readme_fisher_example"),
    ("docs/oracle.md", "0.0 %–3.7 %", "render::tests::the_docs_examples_of_each_form"),
    (
        "docs/oracle.md",
        "`45/200 (22.5%, 95% CI 17.3%–28.8%)`",
        "render::tests::the_docs_examples_of_each_form",
    ),
    ("docs/oracle.md", "`dup-row 23% [17–29]`", "render::tests::the_docs_examples_of_each_form"),
    ("docs/coverage.md", "(review: 84/200)", "the review's own figure, quoted"),
    ("docs/coverage.md", "(review: 159–194/200)", "the review's own figure, quoted"),
    ("docs/hunt.md", "within 1 % of the low or high end", "the edges strategy's definition"),
    ("docs/hunt.md", "delayed at 30 %", "a fault rate the example sets"),
    (
        "docs/hunt.md",
        "delays 30 % of messages",
        "webhook-redelivery's [faults] (duplicate, delay = 0.3)",
    ),
    ("docs/hunt.md", "crashes a step at 3 %", "webhook-redelivery's [faults] (crash = 0.03)"),
    ("docs/hunt-benchmark.md", "below 5 %", "the benchmark's definition of a rare cell"),
    ("docs/sims.md", "90 % of the replies dropped", "the bound test's sim (reply_drop = 0.9)"),
    ("docs/sims.md", "around 5 % of COMMITs", "commit-lost's [faults] (commit_lost = 0.05)"),
];

/// The prose of one page, outside generated blocks, inline quotes (`<!-- q: … -->…<!-- /q -->`),
/// measurement records (`<!-- measured: … -->` to `<!-- end of measured -->`) and code fences,
/// with the phrases of `NOT_MATRIX_RATES` taken out: its rates typed by hand.
fn typed_rates_in(page: &str, text: &str) -> Vec<String> {
    let (mut generated, mut fenced, mut found) = (false, false, Vec::new());
    for (n, line) in text.lines().enumerate() {
        let open = line.trim_start();
        if open.starts_with("<!-- gen: ")
            || open.starts_with("<!-- measured: ")
            || (line.contains("table: tools/") && line.contains("<!--"))
        {
            generated = true;
        }
        if line.contains("<!-- /gen -->") || line.contains("<!-- end of") {
            generated = false;
            continue;
        }
        if line.starts_with("```") {
            fenced = !fenced;
        }
        if generated || fenced {
            continue;
        }
        let mut prose = line.to_string();
        while let (Some(a), Some(b)) = (prose.find("<!-- q: "), prose.find("<!-- /q -->")) {
            if b < a {
                break;
            }
            prose.replace_range(a..b + "<!-- /q -->".len(), "");
        }
        for (p, phrase, _) in NOT_MATRIX_RATES {
            if *p == page {
                prose = prose.replace(phrase, "");
            }
        }
        if let Some(rate) = typed_rate(&prose) {
            found.push(format!("{page}:{}: `{rate}`: {line}", n + 1));
        }
    }
    found
}

#[test]
fn the_docs_prose_types_no_rate() {
    let mut pages = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| format!("docs/{}", p.file_name().unwrap().to_string_lossy()))
        .filter(|p| !MEASUREMENT_RECORDS.contains(&p.as_str()))
        .collect();
    docs.sort();
    pages.extend(docs);
    let mut found = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(root().join(page)).unwrap();
        found.extend(typed_rates_in(page, &text));
    }
    for (page, phrase, _) in NOT_MATRIX_RATES {
        let text = std::fs::read_to_string(root().join(page)).unwrap();
        if !text.contains(phrase) {
            found.push(format!("{page}: NOT_MATRIX_RATES lists {phrase:?}, no longer there"));
        }
    }
    assert!(
        found.is_empty(),
        "rates typed by hand in the docs' prose (quote them: `<!-- q: rate SIM MODEL SEEDS WHAT \
         -->` … `<!-- /q -->`, tools/quote.py):\n{}",
        found.join("\n")
    );
}
