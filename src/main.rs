//! The `idemsim` binary: a thin wrapper over [`idemsim::cli`].

// Runs allocate and free many small objects (tasks, messages, trace lines); mimalloc made a
// sweep of case 11 about a third faster than glibc's allocator (see README, Speed).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // Die quietly on a closed pipe (`idemsim list | head`) instead of panicking in println!.
    #[cfg(unix)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::exit(idemsim::cli::main());
}
