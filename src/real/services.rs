//! A round's helper processes (a target's `[[service]]`: a Redis server, say), each on a free
//! loopback port of its own, ready once that port accepts a connection; then the target's
//! `reset` commands. Ended (SIGKILL to the process group) when the round ends, on error and
//! on SIGINT, like the servers.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::procs::{
    OWNER, fill, free_port, kill_tree, owner_token, program, ready, register, spawn, tail,
    unregister,
};
use super::target::Target;

/// The running services of one round.
pub struct Services {
    /// Name, port, process, process group, owner token.
    running: Vec<(String, u16, Child, i32, String)>,
}

impl Services {
    /// Start every service of `target`, one after the other, each ready before the next;
    /// then run the target's reset commands. An error names the service or command.
    pub fn start(target: &Target, dir: &Path) -> Result<Services, String> {
        let mut me = Services { running: Vec::new() };
        for s in &target.services {
            let port = free_port()?;
            let value = |n: &str| (n == "port").then(|| serde_json::Value::from(port.to_string()));
            let line: Vec<String> = s.command.iter().map(|a| fill(a, &value)).collect();
            let err_path = dir.join(format!("service-{}.err", s.name));
            let stderr = std::fs::File::create(&err_path)
                .map_err(|e| format!("cannot create {}: {e}", err_path.display()))?;
            let token = owner_token(dir, &format!("service-{}", s.name));
            let mut cmd = program(&target.dir(), &line);
            cmd.env(OWNER, &token).stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr);
            let child = spawn(&mut cmd).map_err(|e| {
                let program = cmd.get_program().to_string_lossy().into_owned();
                format!(
                    "service `{}`: cannot start `{}` (program {program}): {e}",
                    s.name,
                    line.join(" ")
                )
            })?;
            let pid = child.id() as i32;
            register(pid);
            me.running.push((s.name.clone(), port, child, pid, token));
            let until = Instant::now() + Duration::from_micros(s.start_timeout_us);
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            while !ready(addr, None) {
                let exited = me.running.last_mut().and_then(|r| r.2.try_wait().ok().flatten());
                let why = match exited {
                    Some(status) => format!("exited ({status}) before it listened"),
                    None if Instant::now() >= until => {
                        format!("accepted no connection on port {port} in time")
                    }
                    None => {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    }
                };
                let t = tail(&err_path);
                let t =
                    if t.is_empty() { String::new() } else { format!("; its stderr ends:\n{t}") };
                return Err(format!("service `{}` ({}) {why}{t}", s.name, line.join(" ")));
            }
        }
        me.reset(target, dir)?;
        Ok(me)
    }

    /// The ports by service name.
    pub fn ports(&self) -> Vec<(String, u16)> {
        self.running.iter().map(|(n, p, ..)| (n.clone(), *p)).collect()
    }

    /// Run the target's reset commands, each within 10 s; a failure names the command and
    /// what it printed on stderr.
    fn reset(&self, target: &Target, dir: &Path) -> Result<(), String> {
        let ports = self.ports();
        let value = |n: &str| -> Option<serde_json::Value> {
            let name = n.strip_prefix("service.")?.strip_suffix(".port")?;
            let port = ports.iter().find(|(s, _)| s == name)?.1;
            Some(serde_json::Value::from(port.to_string()))
        };
        for (i, c) in target.reset.iter().enumerate() {
            let line: Vec<String> = c.iter().map(|a| fill(a, &value)).collect();
            let err_path = dir.join(format!("reset-{}.err", i + 1));
            let stderr = std::fs::File::create(&err_path)
                .map_err(|e| format!("cannot create {}: {e}", err_path.display()))?;
            let mut cmd = program(&target.dir(), &line);
            cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr);
            let shown = crate::text::printable(&line.join(" "));
            let token = owner_token(dir, &format!("reset-{}", i + 1));
            cmd.env(OWNER, &token);
            let mut child = spawn(&mut cmd).map_err(|e| format!("reset `{shown}`: {e}"))?;
            let until = Instant::now() + Duration::from_secs(10);
            let status = loop {
                if let Some(s) = child.try_wait().ok().flatten() {
                    break Some(s);
                }
                if Instant::now() >= until {
                    kill_tree(child.id() as i32, &token);
                    let _ = child.wait();
                    break None;
                }
                std::thread::sleep(Duration::from_millis(5));
            };
            // What it left behind (a child in its own session) goes with it.
            kill_tree(child.id() as i32, &token);
            match status {
                Some(s) if s.success() => {}
                other => {
                    let why = other
                        .map_or("did not end within 10 s".to_string(), |s| format!("ended {s}"));
                    let t = tail(&err_path);
                    let t = if t.is_empty() {
                        String::new()
                    } else {
                        format!("; its stderr ends:\n{t}")
                    };
                    return Err(format!("reset `{shown}` {why}{t}"));
                }
            }
        }
        Ok(())
    }
}

impl Drop for Services {
    fn drop(&mut self) {
        for (_, _, child, pid, token) in &mut self.running {
            kill_tree(*pid, token);
            let _ = child.wait();
            unregister(*pid);
        }
    }
}
