//! Input errors: every problem in a sim or model file names file, line, column and what was
//! expected. Violations found by a run are *not* errors: they are values in the report.

use std::ops::Range;
use std::path::Path;

/// A problem with user input (a sim file, a model file, a command-line value).
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// A located problem inside a file.
    #[error("{file}:{line}:{col}: {msg}")]
    At { file: String, line: usize, col: usize, msg: String },
    /// A problem with a whole file (missing, unreadable) or a value given on the command line.
    #[error("{file}: {msg}")]
    File { file: String, msg: String },
}

impl InputError {
    /// An error at a byte offset of `src`.
    pub fn at(file: &Path, src: &str, offset: usize, msg: impl Into<String>) -> Self {
        let (line, col) = line_col(src, offset);
        InputError::At { file: file.display().to_string(), line, col, msg: msg.into() }
    }

    /// An error at a span of `src` (its start is reported).
    pub fn span(file: &Path, src: &str, span: Range<usize>, msg: impl Into<String>) -> Self {
        Self::at(file, src, span.start, msg)
    }

    pub fn file(file: &Path, msg: impl Into<String>) -> Self {
        InputError::File { file: file.display().to_string(), msg: msg.into() }
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

/// A `[low, high]` range of milliseconds from a file: `default` when absent, else it must
/// satisfy `ok(low, high)`; otherwise an error at the value saying `field: expected <expected>`.
pub fn ms_range(
    file: &Path,
    src: &str,
    field: &str,
    value: &Option<toml::Spanned<Vec<u64>>>,
    default: (u64, u64),
    ok: impl Fn(u64, u64) -> bool,
    expected: &str,
) -> Result<(u64, u64), InputError> {
    match value {
        None => Ok(default),
        Some(v) => match v.get_ref().as_slice() {
            [lo, hi] if ok(*lo, *hi) => Ok((*lo, *hi)),
            _ => {
                Err(InputError::span(file, src, v.span(), format!("{field}: expected {expected}")))
            }
        },
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
}
