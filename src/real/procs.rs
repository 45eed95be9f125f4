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

use super::target::{Listen, Target};
use super::template::{Mode, Template};

/// Process groups of every live server process, for the SIGINT handler (0: a free slot).
static LIVE: [AtomicI32; 64] = [const { AtomicI32::new(0) }; 64];

pub(super) fn register(pid: i32) {
    for slot in &LIVE {
        if slot.compare_exchange(0, pid, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            return;
        }
    }
}

pub(super) fn unregister(pid: i32) {
    for slot in &LIVE {
        let _ = slot.compare_exchange(pid, 0, Ordering::SeqCst, Ordering::SeqCst);
    }
}

/// On SIGINT, SIGTERM or SIGHUP: kill every live server process group, then mark the run
/// interrupted (the rounds in flight end at once, are not judged, and no new one starts); a
/// second signal terminates. Processes that left their group are ended by the round's clean-up
/// ([`kill_tree`]) as the interrupted round unwinds, or, if idemsim is ended before that, by
/// the janitor ([`super::janitor`]).
pub fn end_servers_on_interrupt() {
    // Whatever ends idemsim, a second signal included, the janitor ends what it started.
    super::janitor::start();
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
    // SIGTERM (what `timeout` and a CI's cancel send) and SIGHUP end a real run the same way: servers
    // killed, the round in flight not judged, the report of the rounds before it printed.
    crate::sweep::on_first(libc::SIGTERM, on_sigint);
    crate::sweep::on_first(libc::SIGHUP, on_sigint);
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
    /// The ports of the round's services, by name (`${service.NAME.port}`).
    pub services: Vec<(String, u16)>,
}

struct Proc {
    child: Child,
    pid: i32,
    /// `IDEMSIM_OWNER`'s value in its environment (and its descendants').
    token: String,
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
            kill_tree(p.pid, &p.token);
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
        let picked = match self.target.listen {
            Listen::Line => None,
            Listen::Port { .. } => Some(free_port().map_err(|e| self.failed(i, &e))?),
        };
        let token = owner_token(&self.launch.dir, &format!("server-{}.{start}", i + 1));
        let mut cmd = self.command(i, picked);
        cmd.env(OWNER, &token);
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(stderr);
        let mut child = spawn(&mut cmd).map_err(|e| {
            let program = cmd.get_program().to_string_lossy().into_owned();
            let dir = cmd.get_current_dir().map(|d| d.display().to_string()).unwrap_or_default();
            StartError(format!(
                "cannot start `{}` (program {program}, in {dir}): {e}",
                crate::text::printable(&self.target.command.join(" "))
            ))
        })?;
        let pid = child.id() as i32;
        register(pid);
        let stdout = child.stdout.take().expect("piped");
        self.procs.lock().unwrap()[i] = Some(Proc { child, pid, token });
        let (tx, rx) = mpsc::channel();
        let waited = Duration::from_micros(self.target.start_timeout_us);
        let port = match (&self.target.listen, picked) {
            (Listen::Port { probe, .. }, Some(port)) => {
                std::thread::spawn(move || drain(stdout));
                self.wait_ready(i, port, probe.as_deref(), waited)?;
                port
            }
            _ => {
                std::thread::spawn(move || read_stdout(stdout, tx));
                match rx.recv_timeout(waited) {
                    Ok(Ok(port)) => port,
                    Ok(Err(why)) => return Err(self.failed(i, &why)),
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        let why =
                            format!("printed no `IDEMSIM_LISTENING <port>` within {waited:?}");
                        return Err(self.failed(i, &why));
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        return Err(self.failed(i, "exited before it printed its port"));
                    }
                }
            }
        };
        if self.launch.hub_url.ends_with(&format!(":{port}")) {
            return Err(self.failed(i, &format!("listens on idemsim's own hook port {port}")));
        }
        self.ports.lock().unwrap()[i] = Some(port);
        Ok(())
    }

    /// Wait until process `i` answers on `port`: a GET of `probe` gets any HTTP answer, or
    /// without one, the port accepts a connection. An exit meanwhile ends the wait.
    fn wait_ready(
        &self,
        i: usize,
        port: u16,
        probe: Option<&str>,
        waited: Duration,
    ) -> Result<(), StartError> {
        let until = std::time::Instant::now() + waited;
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        loop {
            if let Some(status) = self.exited(i) {
                return Err(self.failed(i, &format!("exited ({status}) before it was ready")));
            }
            if ready(addr, probe) {
                return Ok(());
            }
            if std::time::Instant::now() >= until {
                let what = probe.map_or("accepted no connection".to_string(), |p| {
                    format!("answered no GET {p}")
                });
                return Err(self.failed(i, &format!("{what} on port {port} within {waited:?}")));
            }
            if crate::sweep::INTERRUPTED.load(Ordering::Relaxed) {
                return Err(self.failed(i, "was interrupted while starting"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The processes that ended on their own (idemsim killed none of them), with how: a
    /// server that exits, crashes or is killed by a signal mid-round, named as the target's
    /// fault, with the end of its stderr.
    pub fn died(&self) -> Vec<String> {
        let n = self.ports.lock().unwrap().len();
        (0..n)
            .filter_map(|i| {
                let how = self.exited(i)?;
                let tail = self.stderr_tail(i);
                let tail = if tail.is_empty() {
                    String::new()
                } else {
                    format!("; its stderr ends:\n{tail}")
                };
                Some(format!("process {} ended on its own during the round ({how}){tail}", i + 1))
            })
            .collect()
    }

    /// How many times process `i` has been started (a restart after a crash is a start).
    pub fn generation(&self, i: usize) -> u32 {
        self.starts.lock().unwrap()[i]
    }

    /// How process `i` ended, if it has.
    fn exited(&self, i: usize) -> Option<String> {
        let mut procs = self.procs.lock().unwrap();
        let p = procs[i].as_mut()?;
        p.child.try_wait().ok().flatten().map(|s| s.to_string())
    }

    fn command(&self, i: usize, port: Option<u16>) -> Command {
        let t = &self.target;
        let l = &self.launch;
        let process = (i + 1).to_string();
        let value = |n: &str| -> Option<serde_json::Value> {
            let text = match n {
                "process" => process.clone(),
                "db" => l.db.display().to_string(),
                "port" => port?.to_string(),
                _ => {
                    let name = n.strip_prefix("service.")?.strip_suffix(".port")?;
                    l.services.iter().find(|(s, _)| s == name)?.1.to_string()
                }
            };
            Some(serde_json::Value::String(text))
        };
        let line: Vec<String> = t.command.iter().map(|a| fill(a, &value)).collect();
        let mut cmd = program(&t.dir(), &line);
        cmd.envs(t.env.iter().map(|(k, v)| (k.clone(), fill(v, &value))));
        if let (Listen::Port { env: Some(name), .. }, Some(p)) = (&t.listen, port) {
            cmd.env(name, p.to_string());
        }
        cmd.env("IDEMSIM_DB", &l.db)
            .env("IDEMSIM_PROCESS", process.as_str())
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

/// The environment variable that marks every process a round started, and every process
/// those start (a child in its own session, a daemon): what [`kill_tree`] finds them by.
pub const OWNER: &str = "IDEMSIM_OWNER";

/// A token no other process of this machine carries: idemsim's pid, the round's folder and
/// what is started.
pub(super) fn owner_token(dir: &Path, what: &str) -> String {
    let round = dir.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    format!("{}.{round}.{what}", std::process::id())
}

/// Kill a started process's group, then every process left whose environment carries its
/// owner token (children that left the group: `setsid`, a daemon's double fork), until none
/// is found (a few passes: one may fork while the last is killed).
pub(super) fn kill_tree(pgid: i32, token: &str) {
    // SAFETY: kill on the process group created for this child.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    kill_carrying(&format!("{OWNER}={token}\0").into_bytes());
}

/// Kill every process left whose owner token is idemsim process `owner`'s (any round, any
/// process of it), in a few passes: the janitor's work ([`super::janitor`]).
pub(super) fn kill_owned_by(owner: u32) {
    kill_carrying(&format!("{OWNER}={owner}.").into_bytes());
}

/// Kill every process whose environment holds `needle` ([`owned_by`]), until none is found (a
/// few passes: one may fork while the last is killed).
fn kill_carrying(needle: &[u8]) {
    for _ in 0..5 {
        let found = owned_by(needle);
        if found.is_empty() {
            return;
        }
        for pid in found {
            // SAFETY: kill of a process that carries one of idemsim's owner tokens.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The processes whose environment holds `needle` (`NAME=value\0`, or a prefix of an entry); unreadable ones (another
/// user's) are skipped; each environment is read up to 256 KiB.
fn owned_by(needle: &[u8]) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(f) = std::fs::File::open(entry.path().join("environ")) else { continue };
        let mut env = Vec::new();
        if std::io::Read::read_to_end(&mut std::io::Read::take(f, 256 * 1024), &mut env).is_ok()
            && (env.starts_with(needle)
                || env.windows(needle.len() + 1).any(|w| w[0] == 0 && &w[1..] == needle))
        {
            out.push(pid);
        }
    }
    out
}

/// A template from a target file (checked when the file was read) filled in; a placeholder
/// without a value is left empty.
pub(super) fn fill(text: &str, value: &dyn Fn(&str) -> Option<serde_json::Value>) -> String {
    let any = |_: &str| true;
    Template::parse(text, &any)
        .ok()
        .and_then(|t| t.render(Mode::Text, &|n| value(n).or(Some(serde_json::Value::from("")))))
        .unwrap_or_else(|| text.to_string())
}

/// A command in the target's folder: a program path with `/` resolves against it, and the
/// process runs in it, in a process group of its own.
pub(super) fn program(dir: &Path, line: &[String]) -> Command {
    // Absolute: the program's path is joined to it and the process also runs in it (a
    // relative folder would be looked for again inside itself).
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let first = line.first().map(String::as_str).unwrap_or_default();
    let program = if first.contains('/') { dir.join(first) } else { PathBuf::from(first) };
    let mut cmd = Command::new(program);
    cmd.args(line.iter().skip(1)).current_dir(&dir).process_group(0);
    cmd
}

/// Spawn a command that dies with idemsim (PR_SET_PDEATHSIG).
pub(super) fn spawn(cmd: &mut Command) -> std::io::Result<Child> {
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.spawn()
}

/// A free loopback port (the kernel's pick, released for the process to take).
pub(super) fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("could not find a free loopback port: {e}"))
}

/// Is something answering on `addr`: a GET of `probe` gets an HTTP answer, or without a
/// probe, a connection is accepted?
pub(super) fn ready(addr: std::net::SocketAddr, probe: Option<&str>) -> bool {
    let Ok(mut c) = super::wire::connect(addr, Duration::from_millis(200)) else { return false };
    let Some(path) = probe else { return true };
    let get = super::wire::request_bytes("GET", path, &[], b"");
    let deadline = std::time::Instant::now() + Duration::from_millis(500);
    super::wire::send(&mut c, &get)
        && super::wire::read_message(&mut c, deadline).is_ok_and(|m| m.status().is_some())
}

/// Read a process's stdout to its end (so it never blocks on a full pipe).
fn drain(mut stdout: std::process::ChildStdout) {
    let mut sink = [0u8; 8192];
    while matches!(std::io::Read::read(&mut stdout, &mut sink), Ok(n) if n > 0) {}
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
