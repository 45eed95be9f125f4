//! The janitor: a helper process that outlives idemsim by a moment and ends whatever idemsim's
//! real rounds started, however idemsim ended. A round's clean-up ([`super::procs::kill_tree`])
//! runs only while idemsim runs; a second Ctrl-C (whose default action ends idemsim at once), a
//! SIGKILL or a crash would leave a server's child that left its process group (`setsid`, a
//! daemon) running. The janitor holds the read end of a pipe whose write end only idemsim holds:
//! when idemsim is gone, for whatever reason, the read ends, and the janitor kills every process
//! whose environment carries an owner token of idemsim's ([`super::procs::OWNER`], which every
//! process a round starts inherits). It runs in a session of its own and ignores the signals a
//! terminal or `timeout` send, so the Ctrl-C that ends idemsim does not end it too.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// The hidden argument that makes the binary a janitor (`idemsim __idemsim-janitor PID`).
pub const ARG: &str = "__idemsim-janitor";

/// The write end of the janitor's pipe, never closed while idemsim lives.
static PIPE: OnceLock<Mutex<Option<ChildStdin>>> = OnceLock::new();

/// Start the janitor once for this process (idemsim's own binary, in janitor mode). Without it
/// (no binary to run) the rounds' own clean-up is all there is, as before.
pub fn start() {
    PIPE.get_or_init(|| {
        let Ok(exe) = std::env::current_exe() else { return Mutex::new(None) };
        let mut cmd = Command::new(exe);
        cmd.arg(ARG)
            .arg(std::process::id().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: setsid is async-signal-safe; between fork and exec nothing else runs.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        Mutex::new(cmd.spawn().ok().and_then(|mut c| c.stdin.take()))
    });
}

/// The janitor's whole life, for the binary's `main` when its first argument is [`ARG`]:
/// `owner` is idemsim's pid. Exit code 2 without one.
pub fn main(owner: Option<std::ffi::OsString>) -> i32 {
    let Some(owner) = owner.and_then(|p| p.to_str()?.parse::<u32>().ok()) else { return 2 };
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: ignoring a signal in this single-threaded helper.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
    // Nothing is ever written: the read ends when idemsim is gone.
    let mut sink = [0u8; 64];
    while matches!(std::io::stdin().read(&mut sink), Ok(n) if n > 0) {}
    super::procs::kill_owned_by(owner);
    0
}
