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
    // The helper that ends what real rounds started once idemsim is gone (src/real/janitor.rs).
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == idemsim::real::janitor::ARG) {
        std::process::exit(idemsim::real::janitor::main(args.next()));
    }
    std::process::exit(idemsim::cli::main());
}
