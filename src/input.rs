//! Input: the error type every loader returns (file, line, column and what was expected) and
//! the small parsers the model and sim loaders share. Violations found by a run are *not*
//! errors: they are values in the report. Uses nothing from the crate but [`crate::units`].

use std::ops::Range;
use std::path::Path;

pub use crate::text::{printable, shown};
use crate::units::{MAX_MS, ms_to_us, show_ms};

/// A problem with user input (a sim file, a model file, a command-line value).
#[derive(Debug, Clone, thiserror::Error)]
pub enum InputError {
    /// A located problem inside a file.
    #[error("{file}:{line}:{col}: {msg}")]
    At {
        /// The file's path, made printable.
        file: String,
        /// The line (1-based).
        line: usize,
        /// The column (1-based, in characters).
        col: usize,
        /// What was wrong or expected.
        msg: String,
    },
    /// A problem with a whole file (missing, unreadable) or a value given on the command line.
    #[error("{file}: {msg}")]
    File {
        /// The file's path (made printable) or the command-line label.
        file: String,
        /// What was wrong.
        msg: String,
    },
}

/// The largest file a loader reads.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// The longest string value in a file (a key, a body, a name).
pub const MAX_STRING_BYTES: usize = 4096;

/// Read a sim or model file: a regular file of at most [`MAX_FILE_BYTES`], in UTF-8.
pub fn read_file(path: &Path, what: &str) -> Result<String, InputError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| InputError::file(path, format!("cannot read {what} file: {e}")))?;
    if meta.is_dir() {
        return Err(InputError::file(path, format!("is a folder; expected a {what} file (.toml)")));
    }
    if !meta.is_file() {
        return Err(InputError::file(
            path,
            format!("is not a regular file; expected a {what} file"),
        ));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(InputError::file(
            path,
            format!("is {} bytes; a {what} file may have at most {MAX_FILE_BYTES}", meta.len()),
        ));
    }
    let bytes = std::fs::read(path)
        .map_err(|e| InputError::file(path, format!("cannot read {what} file: {e}")))?;
    String::from_utf8(bytes).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let text = String::from_utf8_lossy(&e.as_bytes()[..valid]).into_owned();
        InputError::at(path, &text, valid, "invalid UTF-8; a file must be UTF-8 text")
    })
}

impl InputError {
    /// An error at a byte offset of `src`.
    pub fn at(file: &Path, src: &str, offset: usize, msg: impl Into<String>) -> Self {
        let (line, col) = line_col(src, offset);
        InputError::At {
            file: printable(&file.display().to_string()),
            line,
            col,
            msg: tidy(msg.into()),
        }
    }

    /// An error at a span of `src` (its start is reported).
    pub fn span(file: &Path, src: &str, span: Range<usize>, msg: impl Into<String>) -> Self {
        Self::at(file, src, span.start, msg)
    }

    /// An error about a whole file (or a command-line value labelled `file`).
    pub fn file(file: &Path, msg: impl Into<String>) -> Self {
        let file = printable(&file.display().to_string());
        let msg = msg.into();
        // A message that already starts with the label (`--shard: …`) says it once.
        let msg = match msg.strip_prefix(file.as_str()) {
            Some(rest) if rest.starts_with(": ") => rest[2..].to_string(),
            _ => msg,
        };
        InputError::File { file, msg: tidy(msg) }
    }

    /// A TOML syntax or shape error, located from its span.
    pub fn from_toml(file: &Path, src: &str, err: &toml::de::Error) -> Self {
        let msg = err.message().trim().to_string();
        match err.span() {
            Some(span) => Self::at(file, src, span.start, msg),
            None => Self::file(file, msg),
        }
    }
}

/// A message made safe to print and bounded (it may quote a user's value, e.g. from TOML).
fn tidy(msg: String) -> String {
    let p = printable(&msg);
    match p.char_indices().nth(400) {
        Some((i, _)) => format!("{}…", &p[..i]),
        None => p,
    }
}

/// A file being loaded: its path and text, for located errors and the loaders' shared parsers.
#[derive(Clone, Copy)]
pub struct Source<'a> {
    /// The file's path, as errors name it.
    pub path: &'a Path,
    /// The file's whole text (spans are byte offsets into it).
    pub src: &'a str,
}

impl<'a> Source<'a> {
    /// The file at `path` with text `src`.
    pub fn new(path: &'a Path, src: &'a str) -> Self {
        Source { path, src }
    }

    /// An error at a span of the file.
    pub fn err(&self, span: Range<usize>, msg: impl Into<String>) -> InputError {
        InputError::span(self.path, self.src, span, msg)
    }

    /// Parse TOML into `T`, locating syntax and shape errors; every string (value or key) is
    /// at most [`MAX_STRING_BYTES`].
    pub fn toml<T: serde::de::DeserializeOwned>(&self) -> Result<T, InputError> {
        let tree = toml::de::DeTable::parse(self.src)
            .map_err(|e| InputError::from_toml(self.path, self.src, &e))?;
        self.check_strings(tree.get_ref())?;
        toml::from_str(self.src).map_err(|e| InputError::from_toml(self.path, self.src, &e))
    }

    fn check_strings(&self, table: &toml::de::DeTable) -> Result<(), InputError> {
        use toml::de::DeValue;
        let too_long = |len: usize, span: Range<usize>| {
            self.err(span, format!("a string of {len} bytes; at most {MAX_STRING_BYTES}"))
        };
        let mut stack: Vec<&toml::Spanned<DeValue>> = Vec::new();
        for (k, v) in table {
            if k.get_ref().len() > MAX_STRING_BYTES {
                return Err(too_long(k.get_ref().len(), k.span()));
            }
            stack.push(v);
        }
        while let Some(v) = stack.pop() {
            match v.get_ref() {
                DeValue::String(s) if s.len() > MAX_STRING_BYTES => {
                    return Err(too_long(s.len(), v.span()));
                }
                DeValue::Array(a) => stack.extend(a.iter()),
                DeValue::Table(t) => {
                    for (k, v) in t {
                        if k.get_ref().len() > MAX_STRING_BYTES {
                            return Err(too_long(k.get_ref().len(), k.span()));
                        }
                        stack.push(v);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// One of a closed set of names (None when absent); otherwise an error at the value:
    /// ``unknown {what} `x`; expected a, b or c``.
    pub fn choice<T: Copy>(
        &self,
        value: &Option<toml::Spanned<String>>,
        what: &str,
        choices: &[(&str, T)],
    ) -> Result<Option<T>, InputError> {
        let Some(v) = value else { return Ok(None) };
        match choices.iter().find(|(name, _)| *name == v.get_ref()) {
            Some((_, t)) => Ok(Some(*t)),
            None => {
                let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
                Err(self.err(
                    v.span(),
                    format!("unknown {what} `{}`; expected {}", v.get_ref(), one_of(&names)),
                ))
            }
        }
    }

    /// A duration written in milliseconds (an integer or a fraction down to 0.001 ms), in
    /// microseconds: `default_us` when absent; otherwise at least `min_us` and at most
    /// [`MAX_MS`] ms, or an error at the value.
    pub fn ms(
        &self,
        field: &str,
        value: &Option<toml::Spanned<f64>>,
        default_us: u64,
        min_us: u64,
    ) -> Result<u64, InputError> {
        let Some(v) = value else { return Ok(default_us) };
        match ms_to_us(*v.get_ref()) {
            Some(us) if us >= min_us => Ok(us),
            _ => Err(self.err(
                v.span(),
                format!(
                    "{field} = {}: expected milliseconds from {} to {MAX_MS} (30 days), in \
                     steps of 0.001",
                    shown_f64(*v.get_ref()),
                    show_ms(min_us)
                ),
            )),
        }
    }

    /// A `[low, high]` range written in milliseconds, in microseconds: `default` when absent,
    /// else it must satisfy `ok(low_us, high_us)`; otherwise an error at the value saying
    /// `field: expected <expected>`.
    pub fn ms_range(
        &self,
        field: &str,
        value: &Option<toml::Spanned<Vec<f64>>>,
        default: (u64, u64),
        ok: impl Fn(u64, u64) -> bool,
        expected: &str,
    ) -> Result<(u64, u64), InputError> {
        let Some(v) = value else { return Ok(default) };
        let parsed = match v.get_ref().as_slice() {
            [lo, hi] => ms_to_us(*lo).zip(ms_to_us(*hi)),
            _ => None,
        };
        match parsed {
            Some((lo, hi)) if ok(lo, hi) => Ok((lo, hi)),
            _ => Err(self.err(
                v.span(),
                format!("{field}: expected {expected} (milliseconds, in steps of 0.001)"),
            )),
        }
    }
}

/// A number as an error shows it: as written when short, in scientific notation when its
/// digits would run past a line (`1e300`, not three hundred digits).
pub(crate) fn shown_f64(v: f64) -> String {
    let plain = v.to_string();
    if plain.len() > 24 { format!("{v:e}") } else { plain }
}

impl Source<'_> {
    /// A signed duration in milliseconds (a clock offset or jump), in microseconds.
    pub fn signed_ms(&self, field: &str, value: &toml::Spanned<f64>) -> Result<i64, InputError> {
        let v = *value.get_ref();
        match ms_to_us(v.abs()) {
            Some(us) => Ok(if v < 0.0 { -(us as i64) } else { us as i64 }),
            None => Err(self.err(
                value.span(),
                format!(
                    "{field} = {}: expected milliseconds from -{MAX_MS} to {MAX_MS} (30 days), \
                     in steps of 0.001",
                    shown_f64(v)
                ),
            )),
        }
    }

    /// A signed `[low, high]` range in milliseconds (low <= high), in microseconds.
    pub fn signed_ms_range(
        &self,
        field: &str,
        value: &toml::Spanned<Vec<f64>>,
    ) -> Result<(i64, i64), InputError> {
        let bad = || {
            self.err(
                value.span(),
                format!(
                    "{field}: expected [low, high] with low <= high, milliseconds from -{MAX_MS} \
                     to {MAX_MS} (30 days)"
                ),
            )
        };
        let [lo, hi] = value.get_ref().as_slice() else { return Err(bad()) };
        let conv =
            |v: f64| ms_to_us(v.abs()).map(|us| if v < 0.0 { -(us as i64) } else { us as i64 });
        match (conv(*lo), conv(*hi)) {
            (Some(lo), Some(hi)) if lo <= hi => Ok((lo, hi)),
            _ => Err(bad()),
        }
    }
}

/// `a`, `a or b`, `a, b or c`.
pub fn one_of(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(src.len());
    let before = &src[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let col = before[line_start..].chars().count() + 1;
    (line, col)
}

/// A name made of lowercase ASCII letters, digits and `-` (ids, point names).
pub fn is_kebab(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Parse `A..B` (half-open) into a seed range.
pub fn parse_seeds(s: &str) -> Result<Range<u64>, String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("seed range `{s}`: expected A..B, e.g. 0..100"))?;
    let a: u64 =
        a.trim().parse().map_err(|_| format!("seed range `{s}`: `{a}` is not a number"))?;
    let b: u64 =
        b.trim().parse().map_err(|_| format!("seed range `{s}`: `{b}` is not a number"))?;
    if a >= b {
        return Err(format!("seed range `{s}` is empty; expected A..B with A < B"));
    }
    Ok(a..b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_from_one() {
        let src = "a = 1\nbb = 2\n";
        assert_eq!(line_col(src, 0), (1, 1));
        assert_eq!(line_col(src, 6), (2, 1));
        assert_eq!(line_col(src, 11), (2, 6));
    }

    #[test]
    fn seeds_parse() {
        assert_eq!(parse_seeds("3..7"), Ok(3..7));
        assert!(parse_seeds("7..3").is_err());
        assert!(parse_seeds("x").is_err());
    }
}
