//! The CI gate every command that judges many seeds shares (`sweep`, `matrix`, `merge`):
//! `--baseline FILE` compares the run with a committed baseline ([`crate::baseline`]) and
//! decides the exit code from its regressions alone; `--update-baseline` writes the baseline
//! instead; without one, `--fail-on-violation` makes any violation that is not
//! policy-permitted fail as a failed expectation does.

use std::path::PathBuf;

use super::out::write_file;
use super::{EXIT_FAILED, EXIT_OK};
use crate::baseline::{self, Baseline};
use crate::sweep::Cell;

/// How a many-seed command's exit code is decided.
#[derive(clap::Args, Debug, Clone, Default)]
#[allow(missing_docs)]
pub struct GateArgs {
    /// Exit 1 when any cell has a violation that is not policy-permitted, even if every
    /// expectation held (a baseline decides instead when one is given).
    #[arg(long = "fail-on-violation", conflicts_with = "baseline")]
    pub fail_on_violation: bool,
    /// Compare with this baseline (JSON, written by --update-baseline) and exit 1 only on a
    /// regression: a cell that stopped passing or applying, a new violation, a rate worse
    /// beyond what the seed counts explain (Fisher's exact test, p < 0.01). The comparison is
    /// printed after the report (on stderr with --json).
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Write the run's verdicts and rates to the --baseline file instead of comparing (exit 0).
    #[arg(long = "update-baseline", requires = "baseline")]
    pub update_baseline: bool,
}

impl GateArgs {
    /// Before any run: the baseline to compare with is read and checked (a missing or bad file
    /// is refused now, not after the whole run), and one to write is a file destination (`-`
    /// is refused: a baseline is a file, and stdout holds the report).
    pub fn preflight(&self) -> anyhow::Result<()> {
        let Some(path) = &self.baseline else { return Ok(()) };
        if path.as_os_str() == "-" {
            anyhow::bail!(
                "--baseline: `-` is not a file: a baseline is read from and written to a file"
            );
        }
        if self.update_baseline {
            crate::outfile::destination(path)?;
        } else {
            Baseline::read(path)?;
        }
        Ok(())
    }

    /// The exit code of a finished, uninterrupted run of `cells` whose own verdict is
    /// `failed`: the baseline's when one is given (printing the comparison, or writing the
    /// baseline), else `failed` or, with `--fail-on-violation`, any violation.
    pub fn exit(&self, cells: &[Cell], failed: bool, json: bool) -> anyhow::Result<i32> {
        let Some(path) = &self.baseline else {
            let violated =
                self.fail_on_violation && cells.iter().any(|c| c.violating().next().is_some());
            return Ok(if failed || violated { EXIT_FAILED } else { EXIT_OK });
        };
        let now = Baseline::of(cells).map_err(anyhow::Error::msg)?;
        if self.update_baseline {
            write_file(path, &now.to_json())?;
            super::out::info(&format!(
                "baseline written to {}: {} cell(s)",
                crate::text::printable(&path.display().to_string()),
                now.cells.len()
            ));
            return Ok(EXIT_OK);
        }
        let diff = baseline::compare(&Baseline::read(path)?, &now);
        let text = diff.text(&path.display().to_string());
        if json {
            eprint!("{text}");
        } else {
            print!("\n{text}");
        }
        Ok(if diff.regressions() > 0 { EXIT_FAILED } else { EXIT_OK })
    }
}
