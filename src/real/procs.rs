//! The real server processes of one round: started one after the other from the target's
//! command, each listening on a port it prints; killed (SIGKILL to its process group) on a
//! crash, at the end of the round, on error, and on SIGINT.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::target::Target;

/// Process groups of every live server process, for the SIGINT handler (0: a free slot).
static LIVE: [AtomicI32; 64] = [const { AtomicI32::new(0) }; 64];

fn register(pid: i32) {
    for slot in &LIVE {
        if slot.compare_exchange(0, pid, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            return;
        }
    }
}

fn unregister(pid: i32) {
    for slot in &LIVE {
        let _ = slot.compare_exchange(pid, 0, Ordering::SeqCst, Ordering::SeqCst);
    }
}

/// On SIGINT: kill every live server process group, then mark the run interrupted (the
/// rounds in flight end at once, and no new one starts); a second SIGINT terminates.
pub fn end_servers_on_interrupt() {
    extern "C" fn on_sigint(_: libc::c_int) {
        for slot in &LIVE {
            let pid = slot.load(Ordering::SeqCst);
            if pid > 0 {
                // SAFETY: kill is async-signal-safe.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
            }
        }
        crate::sweep::INTERRUPTED.store(true, Ordering::Relaxed);
    }
    // The handler uses only atomics and kill, both async-signal-safe.
    crate::sweep::on_first_sigint(on_sigint);
}

/// What the processes of a round are given.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The round's folder (database, logs).
    pub dir: PathBuf,
    /// The database file.
    pub db: PathBuf,
    /// `IDEMSIM_BUSY_TIMEOUT_MS`.
    pub busy_timeout_ms: u64,
    /// Base URL of the hook and provider server.
    pub hub_url: String,
    /// `IDEMSIM_POINTS`.
    pub points: String,
    /// `IDEMSIM_TRACE`, when instrumentation is asked for.
    pub trace: Option<PathBuf>,
}

struct Proc {
    child: Child,
    pid: i32,
}

/// Why a server process could not be started.
#[derive(Debug, Clone)]
pub struct StartError(pub String);

/// The server processes of one round, by index (0-based).
pub struct Servers {
    target: Target,
    launch: Launch,
    procs: Mutex<Vec<Option<Proc>>>,
    ports: Mutex<Vec<Option<u16>>>,
    /// Starts so far, per process (a restart is a start).
    starts: Mutex<Vec<u32>>,
}

impl Servers {
    /// Start `n` processes one after the other (each once the previous one listens).
    pub fn start(target: &Target, launch: Launch, n: usize) -> Result<Arc<Servers>, StartError> {
        let servers = Arc::new(Servers {
            target: target.clone(),
            launch,
            procs: Mutex::new((0..n).map(|_| None).collect()),
            ports: Mutex::new(vec![None; n]),
            starts: Mutex::new(vec![0; n]),
        });
        for i in 0..n {
            servers.start_one(i)?;
        }
        Ok(servers)
    }

    /// The port process `i` listens on; None while it is down.
    pub fn port(&self, i: usize) -> Option<u16> {
        self.ports.lock().unwrap().get(i).copied().flatten()
    }

    /// Kill process `i` (SIGKILL to its group); it stays down until [`Servers::start_one`].
    pub fn kill(&self, i: usize) {
        self.ports.lock().unwrap()[i] = None;
        if let Some(mut p) = self.procs.lock().unwrap()[i].take() {
            // SAFETY: kill on the process group we created for this child.
            unsafe { libc::kill(-p.pid, libc::SIGKILL) };
            let _ = p.child.wait();
            unregister(p.pid);
        }
    }

    /// Kill every process.
    pub fn kill_all(&self) {
        let n = self.ports.lock().unwrap().len();
        for i in 0..n {
            self.kill(i);
        }
    }

    /// The tail of process `i`'s stderr, for error messages.
    pub fn stderr_tail(&self, i: usize) -> String {
        tail(&self.stderr_path(i, self.starts.lock().unwrap()[i]))
    }

    fn stderr_path(&self, i: usize, start: u32) -> PathBuf {
        self.launch.dir.join(format!("server-{}.{start}.err", i + 1))
    }

    /// Start (or restart) process `i` and wait until it prints its port.
    pub fn start_one(&self, i: usize) -> Result<(), StartError> {
        let start = {
            let mut s = self.starts.lock().unwrap();
            s[i] += 1;
            s[i]
        };
        let err_path = self.stderr_path(i, start);
        let stderr = std::fs::File::create(&err_path)
            .map_err(|e| StartError(format!("cannot create {}: {e}", err_path.display())))?;
        let mut cmd = self.command(i);
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(stderr);
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| {
            StartError(format!("cannot start `{}`: {e}", self.target.command.join(" ")))
        })?;
        let pid = child.id() as i32;
        register(pid);
        let stdout = child.stdout.take().expect("piped");
        self.procs.lock().unwrap()[i] = Some(Proc { child, pid });
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || read_stdout(stdout, tx));
        let waited = Duration::from_micros(self.target.start_timeout_us);
        let port = match rx.recv_timeout(waited) {
            Ok(Ok(port)) => port,
            Ok(Err(why)) => return Err(self.failed(i, &why)),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let why = format!("printed no `IDEMSIM_LISTENING <port>` within {waited:?}");
                return Err(self.failed(i, &why));
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(self.failed(i, "exited before it printed its port"));
            }
        };
        self.ports.lock().unwrap()[i] = Some(port);
        Ok(())
    }

    fn command(&self, i: usize) -> Command {
        let t = &self.target;
        // Absolute: the program's path is joined to it and the process also runs in it (a
        // relative folder would be looked for again inside itself).
        let dir = t.dir();
        let dir = std::path::absolute(&dir).unwrap_or(dir);
        let program = &t.command[0];
        let program =
            if program.contains('/') { dir.join(program) } else { PathBuf::from(program) };
        let mut cmd = Command::new(program);
        cmd.args(&t.command[1..]).current_dir(&dir).process_group(0);
        cmd.envs(t.env.iter().map(|(k, v)| (k, v)));
        let l = &self.launch;
        cmd.env("IDEMSIM_DB", &l.db)
            .env("IDEMSIM_PROCESS", (i + 1).to_string())
            .env("IDEMSIM_BUSY_TIMEOUT_MS", l.busy_timeout_ms.to_string())
            .env("IDEMSIM_HOOK", &l.hub_url)
            .env("IDEMSIM_PROVIDER", &l.hub_url)
            .env("IDEMSIM_POINTS", &l.points);
        match &l.trace {
            Some(t) => cmd.env("IDEMSIM_TRACE", t),
            None => cmd.env_remove("IDEMSIM_TRACE"),
        };
        cmd
    }

    fn failed(&self, i: usize, why: &str) -> StartError {
        let tail = self.stderr_tail(i);
        self.kill_all();
        let tail =
            if tail.is_empty() { String::new() } else { format!("; its stderr ends:\n{tail}") };
        StartError(format!("process {} of target `{}` {why}{tail}", i + 1, self.target.name))
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// Read a process's stdout: send the port of its `IDEMSIM_LISTENING` line, then drain the
/// rest (so the process never blocks on a full pipe).
fn read_stdout(stdout: std::process::ChildStdout, tx: mpsc::Sender<Result<u16, String>>) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    let mut sent = false;
    loop {
        line.clear();
        // Lines are bounded: a process that prints without newlines is drained in chunks.
        match std::io::Read::take(&mut reader, 64 * 1024).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if sent {
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        if let Some(rest) = text.trim().strip_prefix("IDEMSIM_LISTENING") {
            let port = rest.trim().parse::<u16>().ok().filter(|p| *p > 0);
            let _ = tx.send(port.ok_or_else(|| {
                format!("printed `IDEMSIM_LISTENING{}`, not a port", crate::text::shown(rest))
            }));
            sent = true;
        }
    }
}

/// The last lines of a log file (at most 2 KiB), printable.
pub fn tail(path: &Path) -> String {
    let Ok(bytes) = std::fs::read(path) else { return String::new() };
    let start = bytes.len().saturating_sub(2048);
    let text = String::from_utf8_lossy(&bytes[start..]);
    text.lines()
        .rev()
        .take(8)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .map(crate::text::printable)
        .collect::<Vec<_>>()
        .join("\n")
}
