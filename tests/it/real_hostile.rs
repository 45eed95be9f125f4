//! A broken or hostile real server is named, never scored (docs/targets.md): one that dies
//! mid-round, gives a port nothing listens on, never calls the hook a sim's faults need,
//! answers successes that name no row, or writes terminal escapes into its errors.

use std::path::{Path, PathBuf};

use super::idemsim;

/// A target whose server is `behaviour` (Python) inside a minimal article-API server that
/// prints `IDEMSIM_LISTENING`: `behaviour` runs per request with `self` the handler and
/// `n` the request count, and returns the status and body to answer.
fn fake(name: &str, setup: &str, behaviour: &str, database: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("idemsim-hostile-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = format!(
        r#"import json, os, sqlite3, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
db = sqlite3.connect(os.environ["IDEMSIM_DB"], isolation_level=None)
db.execute("CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, user TEXT, operation TEXT, item TEXT, qty INTEGER, intent TEXT)")
db.execute("CREATE TABLE IF NOT EXISTS keys (user TEXT, operation TEXT, key TEXT, status INTEGER)")
count = [0]
{setup}
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        count[0] += 1
        n = count[0]
{behaviour}
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
s = HTTPServer(("127.0.0.1", 0), H)
print("IDEMSIM_LISTENING", PORT if "PORT" in dir() else s.server_address[1], flush=True)
s.serve_forever()
"#
    );
    std::fs::write(dir.join("server.py"), script).unwrap();
    let path = dir.join(format!("{name}.toml"));
    let text = format!(
        "name = \"{name}\"\nmodel = \"check-first\"\ncommand = [\"python3\", {:?}]\n\
         [database]\n{database}\n",
        dir.join("server.py").display().to_string()
    );
    std::fs::write(&path, text).unwrap();
    path
}

const ROWS: &str = "rows = \"SELECT id, user, operation, item, qty, intent FROM rows\"\n\
                    keys = \"SELECT user, operation, key, status FROM keys\"";

/// A row for the request, answered 201 with it.
const INSERT: &str = r#"        o = json.loads(body)
        cur = db.execute("INSERT INTO rows(user, operation, item, qty, intent) VALUES (?, 'orders', ?, ?, ?)", (self.headers.get("X-User"), o["item"], o["qty"], self.headers.get("X-Intent")))
        status, doc = 201, {"id": cur.lastrowid, "item": o["item"], "qty": o["qty"]}"#;

fn real(sim: &str, t: &Path) -> (i32, String, String) {
    let (code, out, err) = idemsim(&["real", sim, "--target", t.to_str().unwrap(), "--runs", "2"]);
    (code, out, err)
}

#[test]
fn a_server_that_dies_or_listens_elsewhere_is_named_not_scored() {
    let exits = fake("exits", "", &format!("{INSERT}\n        if n >= 2: os._exit(3)"), ROWS);
    let (code, out, err) = real("double-submit", &exits);
    assert_eq!(code, 5, "{out}{err}");
    assert!(err.contains("ended on its own during the round (exit status: 3)"), "{err}");
    assert!(!out.contains("unfinished-intent"), "scored as a finding:\n{out}");

    // Every connection reset without an answer, the server alive: its doing, not the design's.
    let reset = "        import socket, struct\n        self.connection.setsockopt(socket.SOL_SOCKET, \
                 socket.SO_LINGER, struct.pack('ii', 1, 0))\n        self.connection.close()\n        return";
    let (code, out, err) = real("double-submit", &fake("resets", "", reset, ROWS));
    assert_eq!(code, 5, "{out}{err}");
    assert!(err.contains("closed or reset") && err.contains("without answering"), "{err}");

    let setup = "import socket\nspare = socket.socket(); spare.bind(('127.0.0.1', 0))\n\
                 PORT = spare.getsockname()[1]";
    let elsewhere = fake("elsewhere", setup, INSERT, ROWS);
    let (code, out, err) = real("double-submit", &elsewhere);
    assert_eq!(code, 5, "{out}{err}");
    assert!(
        err.contains("refused a connection on port") && err.contains("nothing listens"),
        "{err}"
    );
}

#[test]
fn faults_a_server_never_lets_fire_and_answers_without_rows_are_said() {
    // crash-between-steps arms `steps`: a server that never calls the hook runs no crash.
    let (code, out, err) = real("crash-between-steps", &fake("no-hook", "", INSERT, ROWS));
    assert_eq!(code, 5, "{out}{err}");
    assert!(err.contains("never reached its steps (0 of "), "{err}");

    // A server that calls the hook at its steps only: the sim's @before-commit never fires.
    let steps_only = format!(
        "        import urllib.request\n        urllib.request.urlopen(urllib.request.Request(\
         os.environ[\"IDEMSIM_HOOK\"] + \"/point\", data=b'{{\"point\": \"step\"}}')).read()\n{INSERT}"
    );
    let t = fake("steps-only", "", &steps_only, ROWS);
    let (code, out, err) = real("10-failure-before-commit", &t);
    assert_eq!(code, 5, "{out}{err}");
    assert!(err.contains("never reached @before-commit (0 of "), "{err}");

    // 201 {"ok": true}, nothing stored: a success of nothing is a violation, never a pass.
    let nothing = "        status, doc = 201, {\"ok\": True}";
    let (code, out, err) = real("double-submit", &fake("stores-nothing", "", nothing, ROWS));
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("2xx answer(s) named no row") && out.contains("lost-success"), "{out}");
}

#[test]
fn escapes_in_what_a_server_controls_are_printed_escaped() {
    // SQLite's error names the missing table: the server's schema controls that text.
    let rows = "rows = \"SELECT id, user, operation, item, qty, intent FROM \\\"\\u001b]0;owned\\u0007\\\"\"";
    let (code, _, err) = real("double-submit", &fake("escapes", "", INSERT, rows));
    assert_eq!(code, 5, "{err}");
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "raw escapes in: {err:?}");
    assert!(err.contains("\\u{1b}]0;owned"), "{err}");
}

#[test]
fn a_sim_that_does_not_apply_exits_as_run_does() {
    // express-idempotency replies before it saves: it has no @after-commit point to inject at.
    let args = ["real", "16-effect-after-commit-lost", "--target", "express-idempotency-memory"];
    let (code, _, err) = idemsim(&args);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("does not apply to model `express-idempotency-memory`"), "{err}");
}

/// A target whose server starts a child in a session of its own (as a daemon would) and
/// writes its pid to the file returned.
fn daemonizing(name: &str) -> (PathBuf, PathBuf) {
    let pids = std::env::temp_dir().join(format!("idemsim-{}-{name}.pids", std::process::id()));
    let _ = std::fs::remove_file(&pids);
    let setup = format!(
        "import subprocess\np = subprocess.Popen(['setsid', 'sleep', '300'])\n\
         open({:?}, 'a').write(str(p.pid) + '\\n')",
        pids.display().to_string()
    );
    (fake(name, &setup, INSERT, ROWS), pids)
}

/// Every pid in `file` is gone (allowing 3 s for the janitor, which acts once idemsim is gone).
fn all_gone(file: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("no pid file: {e}"))?;
    let pids: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    if pids.is_empty() {
        return Err("no child was started".into());
    }
    let alive = |pid: &&str| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|st| st.rsplit(") ").next().is_some_and(|r| !r.starts_with('Z')))
    };
    for _ in 0..300 {
        if !pids.iter().any(alive) {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Err(format!("left running: {:?}", pids.iter().filter(|p| alive(p)).collect::<Vec<_>>()))
}

/// Start a long real run against `t`, send `signals` (back to back) after 2.5 s, and return
/// its exit code and stdout.
fn signalled(t: &Path, signals: &[i32]) -> (Option<i32>, String) {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_idemsim"))
        .args(["real", "double-submit", "--target", t.to_str().unwrap(), "--runs", "500"])
        .current_dir(super::root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    for sig in signals {
        // SAFETY: a signal to the child this test started.
        unsafe { libc::kill(child.id() as i32, *sig) };
    }
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn sigterm_ends_a_real_run_with_the_rounds_before_it_and_nothing_left_running() {
    let (t, pids) = daemonizing("term");
    let dir = t.parent().unwrap().to_path_buf();
    let (code, stdout) = signalled(&t, &[libc::SIGTERM]);
    assert_eq!(code, Some(130), "{stdout}");
    assert!(stdout.contains("rounds with a violation"), "no partial report:\n{stdout}");
    let left = std::process::Command::new("pgrep")
        .args(["-f", &dir.join("server.py").display().to_string()])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "a server outlived SIGTERM");
    all_gone(&pids).unwrap();
}

#[test]
fn however_idemsim_ends_the_janitor_ends_what_its_rounds_started() {
    // SIGKILL leaves idemsim no clean-up at all, and a second SIGINT's default action ends it
    // before its rounds clean up: the janitor, blocked on a pipe only idemsim holds, ends the
    // servers' children that left their group.
    for (name, signals) in
        [("killed", vec![libc::SIGKILL]), ("twice", vec![libc::SIGINT, libc::SIGINT])]
    {
        let (t, pids) = daemonizing(name);
        let dir = t.parent().unwrap().to_path_buf();
        let _ = signalled(&t, &signals);
        all_gone(&pids).unwrap_or_else(|e| panic!("{name}: {e}"));
        let left = std::process::Command::new("pgrep")
            .args(["-f", &dir.join("server.py").display().to_string()])
            .output()
            .unwrap();
        assert!(left.stdout.is_empty(), "{name}: a server outlived idemsim");
    }
}
