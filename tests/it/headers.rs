//! Model headers quote no rate typed by hand: a count of runs (`13/100`) or a share (`40.9 %`)
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
