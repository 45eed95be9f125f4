//! The `idemsim` binary: a thin wrapper over [`idemsim::cli`].

fn main() {
    // Die quietly on a closed pipe (`idemsim list | head`) instead of panicking in println!.
    #[cfg(unix)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::exit(idemsim::cli::main());
}
