//! Model headers quote no rate typed by hand (and the docs' prose ever fewer, a ratchet): a count of runs (`13/100`) or a share (`40.9 %`)
//! in a model file's comments must sit in a generated block (`# <!-- gen: ... -->`, rewritten
//! from the sims as they run by tools/gen-docs.py, checked by `gen-docs.py --check` in CI), so a
//! header cannot keep quoting a rate the engine no longer gives.

use super::root;

/// Run counts the sims use: `k/n` with one of these `n` reads as a measured rate.
const RUN_COUNTS: &[u64] =
    &[10, 16, 20, 30, 40, 50, 60, 100, 200, 300, 400, 500, 1000, 2000, 5000, 10000, 20000];

/// The first hand-typed rate in a comment line, if any: `k/n` (n a run count, k ≤ n) or a
/// number followed by `%`.
fn typed_rate(line: &str) -> Option<String> {
    let b = line.as_bytes();
    let number = |mut i: usize| {
        let start = i;
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
            i += 1;
        }
        (i > start).then(|| (line[start..i].to_string(), i))
    };
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) {
            let (k, mut j) = number(i).unwrap();
            let mut after = j;
            while after < b.len() && b[after] == b' ' {
                after += 1;
            }
            if after < b.len() && b[after] == b'%' {
                return Some(format!("{k} %"));
            }
            if j < b.len() && b[j] == b'/' {
                if let Some((n, _)) = number(j + 1) {
                    let (k, n): (u64, u64) =
                        (k.parse().unwrap_or(u64::MAX), n.parse().unwrap_or(0));
                    if RUN_COUNTS.contains(&n) && k <= n {
                        return Some(format!("{k}/{n}"));
                    }
                }
                j += 1;
            }
            i = j;
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
    &["docs/reality.md", "docs/packages.md", "docs/reality-measurements.md"];

/// Rates typed by hand in the prose of README.md and docs/ (outside generated blocks and code
/// fences), per file, as of the last count: the counts may only shrink, toward none (a rate in
/// prose belongs in a `<!-- gen: -->` block, e.g. `python3 tools/quote.py SIM MODEL SEEDS`).
const TYPED_RATES: &[(&str, usize)] = &[
    ("README.md", 20),
    ("docs/calibration.md", 1),
    ("docs/coverage.md", 23),
    ("docs/explain.md", 1),
    ("docs/hunt-benchmark.md", 1),
    ("docs/hunt.md", 8),
    ("docs/models.md", 2),
    ("docs/oracle.md", 8),
    ("docs/sims.md", 3),
];

/// The hand-typed rates of one page's prose.
fn typed_rates_in(text: &str) -> usize {
    let (mut generated, mut fenced, mut n) = (false, false, 0);
    for line in text.lines() {
        if line.trim_start().starts_with("<!-- gen: ")
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
        if !generated && !fenced && typed_rate(line).is_some() {
            n += 1;
        }
    }
    n
}

#[test]
fn rates_typed_into_the_docs_prose_only_shrink() {
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
    let mut problems = Vec::new();
    let mut counts = Vec::new();
    for page in &pages {
        let n = typed_rates_in(&std::fs::read_to_string(root().join(page)).unwrap());
        counts.push(format!("(\"{page}\", {n}),"));
        let was = TYPED_RATES.iter().find(|(p, _)| p == page).map_or(0, |(_, n)| *n);
        if n > was {
            problems.push(format!("{page}: {n} rates typed by hand in prose (was {was})"));
        } else if n < was {
            problems.push(format!("{page}: {n} now (was {was}): lower TYPED_RATES"));
        }
    }
    assert!(problems.is_empty(), "{}\ncounts now:\n{}", problems.join("\n"), counts.join("\n"));
}
