//! Text from users made safe to print: control characters escaped so that a key or a name
//! cannot forge a line of a trace or a table, and long values cut where messages echo them.
//! A leaf: uses nothing from the crate.

/// How much of a user's value an error message or a report echoes.
const ECHO_CHARS: usize = 60;

/// A user's text made safe to print: control characters escaped (`\n`, `\u{1b}`), so that it
/// cannot forge a line of a trace or a table.
pub fn printable(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    s.chars()
        .map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() })
        .collect()
}

/// A user's value as an error message echoes it: printable, and cut after 60 characters.
pub fn shown(s: &str) -> String {
    let p = printable(s);
    match p.char_indices().nth(ECHO_CHARS) {
        Some((i, _)) => format!("{}… ({} bytes)", &p[..i], s.len()),
        None => p,
    }
}

/// Word-wrap each line of `s` at `width` characters; continuation lines get `indent`.
pub fn wrap(s: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    for line in s.split('\n') {
        let mut col = 0;
        for (i, word) in line.split(' ').enumerate() {
            let w = word.chars().count();
            if i > 0 && col + 1 + w > width {
                out.push('\n');
                out.push_str(indent);
                col = indent.chars().count();
            } else if i > 0 {
                out.push(' ');
                col += 1;
            }
            out.push_str(word);
            col += w;
        }
        out.push('\n');
    }
    out.pop();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_long_values_cut() {
        assert_eq!(printable("k1"), "k1");
        assert_eq!(printable("a\nb\u{1b}[31m"), "a\\nb\\u{1b}[31m");
        let long = "x".repeat(100);
        assert_eq!(shown(&long), format!("{}… (100 bytes)", "x".repeat(60)));
        assert_eq!(shown("é\t"), "é\\t");
    }

    #[test]
    fn wrap_breaks_between_words() {
        assert_eq!(wrap("aa bb cc dd", 5, "  "), "aa bb\n  cc\n  dd");
        assert_eq!(wrap("x\n\ny", 5, ""), "x\n\ny");
    }
}
