//! Text from users made safe for where it goes: a terminal (`printable`: control characters
//! escaped so that a key or a name cannot forge a line of a trace or a table), a shell
//! (`shell_arg`: a replay command pastes as the arguments it names), XML (`xml_text`: SVG and
//! HTML; `xml_chars`: a whole document), Markdown table cells (`markdown_cell`) and Mermaid
//! labels (`mermaid_text`); long values cut where messages echo them (`shown`).
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

/// A message of several lines made safe to print: control characters other than the line
/// breaks escaped (a server's error text carrying terminal escapes cannot set a window title,
/// clear the screen or colour what follows).
pub fn printable_lines(s: &str) -> String {
    s.split('\n').map(printable).collect::<Vec<_>>().join("\n")
}

/// A user's value as an error message echoes it: printable, and cut after 60 characters.
pub fn shown(s: &str) -> String {
    let p = printable(s);
    match p.char_indices().nth(ECHO_CHARS) {
        Some((i, _)) => format!("{}… ({} bytes)", &p[..i], s.len()),
        None => p,
    }
}

/// One argument of a command line, written so that a POSIX shell reads it back as exactly
/// that argument (replay commands are pasted into shells):
///
/// - unchanged when it is not empty and made only of characters no shell treats specially
///   (`A-Z a-z 0-9 _ @ % + = : , . / -`, not starting with `=`, which zsh expands), so
///   ordinary paths and names print as they are;
/// - else in single quotes, a `'` written `'\''` (POSIX; nothing inside is expanded);
/// - else, when it holds control characters (a newline, an escape), in ANSI-C quotes `$'…'`
///   with every control character, `'`, `\` and `!` escaped (`\n`, `\t`, `\r`, `\xHH` per
///   UTF-8 byte), so that it stays on one line and prints nothing raw to the terminal. `$'…'`
///   is read by bash, zsh, ksh, busybox sh and POSIX.1-2024 shells; an older shell without it
///   reads a harmless wrong argument (`$` then the quoted text), never a command.
pub fn shell_arg(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !s.is_empty() && !s.starts_with('=') && s.chars().all(plain) {
        return s.to_string();
    }
    if !s.chars().any(char::is_control) {
        return format!("'{}'", s.replace('\'', r"'\''"));
    }
    let mut out = String::from("$'");
    for c in s.chars() {
        match c {
            '\n' => out.push_str(r"\n"),
            '\t' => out.push_str(r"\t"),
            '\r' => out.push_str(r"\r"),
            '\\' => out.push_str(r"\\"),
            // As bytes: `\'` and `!` would confuse bash's history expansion, which reads
            // quotes without knowing `$'…'`.
            c if c.is_control() || c == '\'' || c == '!' => {
                let mut buf = [0; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// Whether XML 1.0 forbids `c` in a document (tab, line feed and carriage return are
/// allowed; surrogates cannot occur in a Rust string), or it is a control character HTML
/// calls an error (U+007F–U+009F): every such character is replaced by the XML functions.
fn xml_forbidden(c: char) -> bool {
    (c.is_control() && !matches!(c, '\t' | '\n' | '\r')) || matches!(c, '\u{fffe}' | '\u{ffff}')
}

/// A user's text as XML character data or an attribute value (SVG, HTML): `& < > " '` as
/// entities, and every character XML 1.0 forbids (and the C1 controls) replaced by its
/// visible escape (`\u{fffe}`, `\u{1b}`), as [`printable`] writes it. Tab, line feed and
/// carriage return are kept (preformatted text has lines); compose with [`printable`] for a
/// single line.
pub fn xml_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if xml_forbidden(c) => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

/// A whole XML or HTML document with every character XML 1.0 forbids replaced by its
/// visible escape (as [`xml_text`] does) and nothing else changed: markup never holds such a
/// character, so this cannot change the structure, only make a document whose text missed
/// [`xml_text`] well-formed.
pub fn xml_chars(doc: &str) -> std::borrow::Cow<'_, str> {
    if !doc.chars().any(xml_forbidden) {
        return std::borrow::Cow::Borrowed(doc);
    }
    let mut out = String::with_capacity(doc.len() + 16);
    for c in doc.chars() {
        if xml_forbidden(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A user's text as one cell of a Markdown table: [`printable`] (one line), and every
/// character Markdown would read as a table border, markup or inline HTML escaped with a
/// backslash (`` \ ` * _ [ ] < > | & ~ $ ``), so it shows as written.
pub fn markdown_cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in printable(s).chars() {
        if "\\`*_[]<>|&~$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A user's text as a Mermaid label (a message or a note of `--mermaid`): [`printable`] (one
/// line: a newline would end the statement), and Mermaid's entity codes for what its parser
/// or renderer would read (`;` ends a statement, `#` starts an entity, `%` a directive, `<`
/// `>` `&` markup, `¶` its own entity placeholder): `#59;` `#35;` `#37;` `#lt;` `#gt;`
/// `#amp;` `#182;`. Mermaid shows each as the character. U+FFFE and U+FFFF, which XML
/// forbids and a diagram pasted into a page would carry, are written `\u{fffe}` `\u{ffff}`.
pub fn mermaid_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in printable(s).chars() {
        match c {
            ';' => out.push_str("#59;"),
            '#' => out.push_str("#35;"),
            '%' => out.push_str("#37;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '&' => out.push_str("#amp;"),
            '¶' => out.push_str("#182;"),
            c if xml_forbidden(c) => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
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

    /// What `shell` reads back from `shell_arg`'s words (None: no such shell here).
    fn reads_back(shell: &str, words: &[String]) -> Option<Vec<String>> {
        let script = format!("printf '%s\\0' {}", words.join(" "));
        let out = std::process::Command::new(shell).arg("-c").arg(&script).output().ok()?;
        assert!(out.status.success(), "{shell}: {script}");
        let text = String::from_utf8(out.stdout).unwrap();
        Some(text.split_terminator('\0').map(str::to_string).collect())
    }

    #[test]
    fn shell_args_are_quoted_only_when_needed_and_read_back_exactly() {
        assert_eq!(shell_arg("sims/article/11-foo.toml"), "sims/article/11-foo.toml");
        assert_eq!(shell_arg("check-first"), "check-first");
        assert_eq!(shell_arg("a b"), "'a b'");
        assert_eq!(shell_arg(""), "''");
        assert_eq!(shell_arg("=x"), "'=x'");
        assert_eq!(shell_arg("it's"), r"'it'\''s'");
        assert_eq!(shell_arg("a\nb"), r"$'a\nb'");
        assert_eq!(shell_arg("a\u{1b}[31m'!\\"), r"$'a\x1b[31m\x27\x21\\'");
        let args = [
            "x; touch pwned",
            "$(touch pwned) `id` $HOME",
            "it's \"q\" \\",
            "a\nb\tc\r\u{1b}[2J\u{85}é!'",
            "*?[a]~{b,c}",
            "-n",
            "",
        ];
        let words: Vec<String> = args.iter().map(|a| shell_arg(a)).collect();
        for w in &words {
            assert!(!w.chars().any(char::is_control), "{w:?}");
        }
        // `$'…'` needs bash (or zsh, ksh); the single quotes any POSIX sh.
        if let Some(read) = reads_back("bash", &words) {
            assert_eq!(read, args);
        }
        let posix: Vec<String> = words.iter().filter(|w| !w.starts_with('$')).cloned().collect();
        let read = reads_back("sh", &posix).expect("sh");
        let expected: Vec<&str> = args.iter().filter(|a| !a.contains('\n')).copied().collect();
        assert_eq!(read, expected);
        // The one `sh` may not read (dash before 0.5.13) gives a wrong word, never a command.
        let old = reads_back("sh", &words[3..4]).expect("sh");
        assert_eq!(old.len(), 1, "{old:?}");
    }

    #[test]
    fn xml_text_escapes_markup_and_replaces_what_xml_forbids() {
        assert_eq!(xml_text("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
        assert_eq!(
            xml_text("k\u{fffe}\u{ffff}\u{0}\u{1b}\u{85}"),
            r"k\u{fffe}\u{ffff}\u{0}\u{1b}\u{85}"
        );
        assert_eq!(xml_text("a\tb\nc\r"), "a\tb\nc\r");
        assert_eq!(xml_text("é \u{fffd} \u{10000}"), "é \u{fffd} \u{10000}");
        assert_eq!(xml_chars("<t>a</t>"), "<t>a</t>");
        assert_eq!(xml_chars("<t a=\"\u{fffe}\">\u{7}</t>\n"), "<t a=\"\\u{fffe}\">\\u{7}</t>\n");
    }

    #[test]
    fn markdown_cells_cannot_break_the_table() {
        assert_eq!(markdown_cell("11-collected-key"), "11-collected-key");
        // The escape `printable` writes for a newline shows as `\n`.
        assert_eq!(markdown_cell("a|b\n| x |"), r"a\|b\\n\| x \|");
        assert_eq!(markdown_cell("<script>*_`[x](y)"), r"\<script\>\*\_\`\[x\](y)");
    }

    #[test]
    fn mermaid_labels_cannot_hold_markup_or_end_a_statement() {
        let m = mermaid_text("<script>alert(1);</script>\nNote over P0: x %%{init}%% #1 &amp;");
        assert_eq!(
            m,
            "#lt;script#gt;alert(1)#59;#lt;/script#gt;\\nNote over P0: x #37;#37;{init}#37;#37; \
             #35;1 #amp;amp#59;"
        );
        assert!(!m.contains('<') && !m.contains('\n'));
        assert_eq!(mermaid_text("reply 201 {\"id\":1}"), "reply 201 {\"id\":1}");
        assert_eq!(mermaid_text("k\u{fffe}"), "k\\u{fffe}");
    }

    #[test]
    fn wrap_breaks_between_words() {
        assert_eq!(wrap("aa bb cc dd", 5, "  "), "aa bb\n  cc\n  dd");
        assert_eq!(wrap("x\n\ny", 5, ""), "x\n\ny");
    }
}
