//! `idemsim completions SHELL` and `idemsim man`: shell completions and a man page, generated
//! from the same clap definitions that parse the command line (so they never drift from it).

use clap::CommandFactory;

use super::{Cli, EXIT_OK};

/// `idemsim completions`'s argument.
#[derive(clap::Args, Debug)]
#[allow(missing_docs)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell. Install e.g. with
    /// `idemsim completions bash > ~/.local/share/bash-completion/completions/idemsim`.
    shell: clap_complete::Shell,
}

pub(super) fn completions(args: CompletionsArgs) -> anyhow::Result<i32> {
    let mut cmd = Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "idemsim", &mut std::io::stdout());
    Ok(EXIT_OK)
}

/// `idemsim man`'s argument.
#[derive(clap::Args, Debug)]
#[allow(missing_docs)]
pub struct ManArgs {
    /// Write idemsim.1 and one idemsim-COMMAND.1 per command into this folder (default: print
    /// idemsim.1 on stdout: `idemsim man > idemsim.1 && man ./idemsim.1`).
    #[arg(long, value_name = "DIR")]
    dir: Option<std::path::PathBuf>,
}

/// The man pages (roff), generated from the command line's own definitions.
pub(super) fn man(args: ManArgs) -> anyhow::Result<i32> {
    let cmd = Cli::command();
    let page = |c: clap::Command| -> anyhow::Result<Vec<u8>> {
        let mut out = Vec::new();
        clap_mangen::Man::new(c).render(&mut out)?;
        Ok(out)
    };
    let Some(dir) = args.dir else {
        use std::io::Write;
        std::io::stdout().write_all(&page(cmd)?)?;
        return Ok(EXIT_OK);
    };
    std::fs::create_dir_all(&dir).map_err(|e| {
        crate::input::InputError::file(
            &dir,
            format!("cannot make this folder for the man pages: {e}"),
        )
    })?;
    let mut written = vec![("idemsim.1".to_string(), page(cmd.clone())?)];
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("idemsim-{}", sub.get_name());
        written.push((format!("{name}.1"), page(sub.clone().name(name.clone()))?));
    }
    for (file, text) in &written {
        super::out::write_file(&dir.join(file), &String::from_utf8_lossy(text))?;
    }
    super::out::info(&format!(
        "{} man page(s) written to {}",
        written.len(),
        crate::text::printable(&dir.display().to_string())
    ));
    Ok(EXIT_OK)
}
