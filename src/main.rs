//! The `idemsim` binary: a thin wrapper over [`idemsim::cli`].

fn main() {
    std::process::exit(idemsim::cli::main());
}
