//! Controlled real rounds (`real --controlled`, docs/controlled.md): idemsim releases every
//! request and every hook call of a real server one at a time, in an order its strategy draws
//! from the round's seed. A tiny racing server (check-then-insert, Python's threaded
//! http.server, announcing its `await` at the hook) races on a schedule a strategy finds, a
//! round replays from its seed alone with the same schedule, answers and rows, and a server
//! that never announces where its runtime interleaves is refused, never judged safe.

use std::path::{Path, PathBuf};

use super::idemsim;

/// A check-first server: look the key up, announce `step await` at the hook (when
/// `announces`), insert the row, save the key, answer. One thread per request.
fn racer(name: &str, announces: bool) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("idemsim-racer-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = format!(
        r#"import json, os, sqlite3, threading, time, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
DB = os.environ["IDEMSIM_DB"]
HOOK = os.environ.get("IDEMSIM_HOOK", "")
ANNOUNCES = {announces}
init = sqlite3.connect(DB, isolation_level=None)
init.execute("CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, user TEXT, operation TEXT, item TEXT, qty INTEGER, intent TEXT)")
init.execute("CREATE TABLE IF NOT EXISTS keys (user TEXT, operation TEXT, key TEXT PRIMARY KEY, status INTEGER, body TEXT)")
def trace(ev, attempt):
    if os.environ.get("IDEMSIM_TRACE"):
        with open(os.environ["IDEMSIM_TRACE"], "a") as f:
            f.write(json.dumps({{"t_us": time.time() * 1e6, "process": 1, "attempt": attempt, "ev": ev}}) + "\n")
def hook(step, attempt):
    if ANNOUNCES and HOOK and "step" in os.environ.get("IDEMSIM_POINTS", ""):
        call = json.dumps({{"point": "step", "step": step, "attempt": attempt}}).encode()
        urllib.request.urlopen(urllib.request.Request(HOOK + "/point", data=call)).read()
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        user, key = self.headers.get("X-User"), self.headers.get("Idempotency-Key")
        db = sqlite3.connect(DB, isolation_level=None, timeout=30)
        found = db.execute("SELECT status, body FROM keys WHERE key = ?", (key,)).fetchone()
        trace("lookup", self.headers.get("X-Attempt"))
        if found:
            status, text = found
        else:
            hook("await", self.headers.get("X-Attempt"))
            cur = db.execute("INSERT INTO rows(user, operation, item, qty, intent) VALUES (?, 'orders', ?, ?, ?)",
                             (user, body["item"], body["qty"], self.headers.get("X-Intent")))
            trace("insert", self.headers.get("X-Attempt"))
            text = json.dumps({{"id": cur.lastrowid, "item": body["item"], "qty": body["qty"]}})
            status = 201
            try:
                db.execute("INSERT INTO keys VALUES (?, 'orders', ?, 201, ?)", (user, key, text))
                trace("save", self.headers.get("X-Attempt"))
            except sqlite3.IntegrityError:
                status, text = 500, json.dumps({{"error": "key clash"}})
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print("IDEMSIM_LISTENING", s.server_address[1], flush=True)
s.serve_forever()
"#,
        announces = if announces { "True" } else { "False" }
    );
    std::fs::write(dir.join("server.py"), script).unwrap();
    let path = dir.join(format!("{name}.toml"));
    let text = format!(
        "name = \"{name}\"\nmodel = \"check-first\"\ncommand = [\"python3\", {:?}]\n\
         [database]\nrows = \"SELECT id, user, operation, item, qty, intent FROM rows\"\n\
         keys = \"SELECT user, operation, key, status FROM keys\"\n",
        dir.join("server.py").display().to_string()
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn controlled(target: &Path, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let t = target.to_str().unwrap();
    let mut args = vec!["real", "check-first-race", "--target", t, "--controlled", "--json"];
    args.extend_from_slice(extra);
    let (code, out, err) = idemsim(&args);
    let report = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    (code, report, err)
}

#[test]
fn a_controlled_round_finds_the_race_and_replays_it_from_its_seed() {
    let t = racer("racer", true);
    let (code, r, err) = controlled(&t, &["--runs", "8", "--replays", "1"]);
    assert_eq!(code, 1, "no round raced: {r:#}\n{err}");
    assert_eq!(r["controlled"]["strategy"], "random", "{r:#}");
    let rounds = r["rounds"].as_array().unwrap();
    for round in rounds {
        let c = &round["control"];
        assert_eq!((c["replays"].as_u64(), c["reproduced"].as_u64()), (Some(1), Some(1)), "{r:#}");
        assert_eq!(c["escaped"], serde_json::json!([]), "{r:#}");
    }
    // A racing schedule holds both copies at their await before either inserts.
    let bad = rounds
        .iter()
        .find(|x| x["violations"].as_array().unwrap().iter().any(|v| v == "duplicate-row"))
        .unwrap_or_else(|| panic!("no duplicate-row round: {r:#}"));
    let schedule: Vec<&str> = bad["control"]["schedule"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let held =
        schedule.iter().filter(|s| s.starts_with("resume ") && s.ends_with(" at step await"));
    assert_eq!(held.count(), 2, "{schedule:?}");
    assert_eq!(bad["rows"], 2, "{bad:#}");

    // The round alone, from its seed: the same schedule and outcome.
    let seed = bad["round"].to_string();
    let (code, again, err) = controlled(&t, &["--seed", &seed, "--runs", "1"]);
    assert_eq!(code, 1, "{again:#}\n{err}");
    let one = &again["rounds"][0];
    assert_eq!(one["round"], bad["round"]);
    assert_eq!(one["control"]["schedule"], bad["control"]["schedule"]);
    assert_eq!((&one["rows"], &one["violations"]), (&bad["rows"], &bad["violations"]));
}

#[test]
fn pct_finds_the_race_and_a_passing_round_serialises_the_copies() {
    let t = racer("racer-pct", true);
    let (_, r, err) = controlled(&t, &["--runs", "12", "--explore", "pct:d=2"]);
    assert_eq!(r["controlled"]["strategy"], "pct:d=2", "{err}");
    let rounds = r["rounds"].as_array().unwrap();
    // A round without a violation ran one copy's insert before the other's lookup.
    for round in rounds.iter().filter(|x| x["violations"].as_array().unwrap().is_empty()) {
        assert_eq!(round["rows"], 1, "{round:#}");
    }
    assert!(rounds.iter().any(|x| x["rows"] == 2), "pct:d=2 never raced in 12 rounds: {r:#}");
}

#[test]
fn a_server_that_never_says_where_it_interleaves_is_refused_not_judged_safe() {
    let t = racer("silent", false);
    let (code, out, err) = idemsim(&[
        "real",
        "check-first-race",
        "--target",
        t.to_str().unwrap(),
        "--controlled",
        "--runs",
        "2",
    ]);
    assert_eq!(code, 5, "{out}{err}");
    assert!(err.contains("interleaves at step(s) `await`"), "{err}");
    assert!(!out.contains("expectations held"), "judged: {out}");
}

#[test]
fn controlled_options_are_checked_before_any_round() {
    let t = racer("options", true);
    let t = t.to_str().unwrap();
    let (code, _, err) =
        idemsim(&["real", "check-first-race", "--target", t, "--controlled", "--explore", "edges"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("a controlled round chooses an order, not timings"), "{err}");
    let (code, _, err) = idemsim(&["real", "check-first-race", "--target", t, "--explore", "pct"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--controlled"), "{err}");
    let (code, _, err) = idemsim(&["real", "crash-between-steps", "--target", t, "--controlled"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("controlled rounds do not order crashes"), "{err}");
}

/// `real SIM --target T --controlled` with `extra`, through the shipped Node.js packages.
fn package_round(sim: &str, target: &str, extra: &[&str]) -> serde_json::Value {
    static NODE: std::sync::Once = std::sync::Once::new();
    super::npm_install("targets/node", "express-idempotency", &NODE);
    let mut args = vec!["real", sim, "--target", target, "--controlled", "--json"];
    args.extend_from_slice(extra);
    let (code, out, err) = idemsim(&args);
    assert!(code == 0 || code == 1, "{target} × {sim}: exit {code}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"))
}

#[test]
fn a_redis_reply_is_a_scheduling_point_and_a_package_race_replays() {
    // express-idempotency over Redis: GET, then SET without NX, with no hook inside the
    // package. idemsim's proxy holds every reply Redis gives a request; a burst whose GETs all
    // answer before any SET lets several copies insert, and replays from its seed.
    let r = package_round(
        "11-twenty-concurrent-one-process",
        "express-idempotency-redis",
        &["--runs", "2", "--replays", "1"],
    );
    for round in r["rounds"].as_array().unwrap() {
        let c = &round["control"];
        assert_eq!((c["replays"].as_u64(), c["reproduced"].as_u64()), (Some(1), Some(1)), "{r:#}");
        let schedule: Vec<&str> =
            c["schedule"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
        let gets = schedule.iter().filter(|s| s.ends_with(" at redis GET")).count();
        let sets = schedule.iter().filter(|s| s.ends_with(" at redis SET")).count();
        assert_eq!(gets, 20, "every copy's lookup is held once: {schedule:?}");
        assert!(sets >= 1, "{schedule:?}");
        // Each copy inserted that read its GET before the first claim's SET answered.
        assert!(round["rows"].as_u64().unwrap() >= 2, "{round:#}");
    }
}

#[test]
fn a_proxied_service_the_server_never_talks_to_is_a_target_fault() {
    // The target says its server talks to `cache` (proxied), but the server never connects:
    // no reply is ever held there, so the rounds cannot be judged.
    let t = racer("unproxied", true);
    let text = std::fs::read_to_string(&t).unwrap().replace(
        "[database]",
        "[[service]]\nname = \"cache\"\ncommand = [\"python3\", \"-m\", \"http.server\", \
         \"--bind\", \"127.0.0.1\", \"${port}\"]\nproxy = \"resp\"\n\n[database]",
    );
    std::fs::write(&t, text).unwrap();
    let (code, out, err) =
        idemsim(&["real", "check-first-race", "--target", t.to_str().unwrap(), "--controlled"]);
    assert_eq!(code, 5, "{out}{err}");
    assert!(err.contains("no reply to a request's command ever came through it"), "{err}");
    let bad = std::fs::read_to_string(&t).unwrap().replace("proxy = \"resp\"", "proxy = \"http\"");
    std::fs::write(&t, bad).unwrap();
    let (code, _, err) = idemsim(&["real", "check-first-race", "--target", t.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(":7:9: expected \"resp\" (Redis's protocol)"), "{err}");
}

#[test]
fn a_racing_round_shrinks_to_the_preemption_it_needs_and_replays_from_the_file() {
    let t = racer("racer-shrink", true);
    let out = std::env::temp_dir().join(format!("idemsim-shrunk-{}.txt", std::process::id()));
    let out_s = out.to_str().unwrap();
    let (code, r, err) = controlled(&t, &["--runs", "8", "--shrink", out_s]);
    assert_eq!(code, 1, "no round raced: {r:#}\n{err}");
    let s = &r["shrunk"];
    assert_eq!(s["violation"], "duplicate-row", "{s:#}");
    assert_eq!(s["confirmed"], 2, "{s:#}");
    // Serially (each request runs on until it answers) the second copy finds the key: the
    // race needs both copies sent before the first inserts, and nothing else.
    let events: Vec<&str> =
        s["events"].as_array().unwrap().iter().map(|e| e.as_str().unwrap()).collect();
    assert_eq!(events.len(), 2, "{s:#}");
    assert!(events.iter().all(|e| e.starts_with("send ")), "{events:?}");
    assert!(s["from"].as_u64().unwrap() > 2, "{s:#}");
    let file = std::fs::read_to_string(&out).unwrap();
    assert!(file.starts_with("# idemsim real check-first-race"), "{file}");
    assert!(file.ends_with(&format!("{}\n{}\n", events[0], events[1])), "{file}");

    // Replayed from the file: the same violation. With nothing forced: serial, one row.
    let round = s["round"].to_string();
    let (code, again, err) =
        controlled(&t, &["--schedule", out_s, "--seed", &round, "--runs", "1"]);
    assert_eq!(code, 1, "{again:#}\n{err}");
    assert_eq!(again["controlled"]["strategy"], "schedule");
    assert_eq!(again["rounds"][0]["rows"], 2, "{again:#}");
    std::fs::write(&out, "# nothing forced\n").unwrap();
    let (code, serial, err) = controlled(&t, &["--schedule", out_s, "--runs", "1"]);
    assert_eq!(code, 0, "{serial:#}\n{err}");
    assert_eq!(serial["rounds"][0]["rows"], 1, "{serial:#}");
    std::fs::write(&out, "send 0.0.1\nhold 0.1.1\n").unwrap();
    let (code, _, err) = idemsim(&[
        "real",
        "check-first-race",
        "--target",
        t.to_str().unwrap(),
        "--controlled",
        "--schedule",
        out_s,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(":2:1: expected an event"), "{err}");
}

#[test]
fn swarm_turns_kinds_of_event_off_and_a_send_first_round_races() {
    let t = racer("racer-swarm", true);
    let (_, r, err) = controlled(&t, &["--runs", "10", "--explore", "swarm"]);
    assert_eq!(r["controlled"]["strategy"], "swarm", "{err}");
    let rounds = r["rounds"].as_array().unwrap();
    // A round whose resumes are off sends both copies before either inserts: it races.
    let both_sent_first = |x: &&serde_json::Value| {
        let s = x["control"]["schedule"].as_array().unwrap();
        s.len() >= 2 && s[..2].iter().all(|e| e.as_str().unwrap().starts_with("send "))
    };
    let sent_first: Vec<&serde_json::Value> = rounds.iter().filter(both_sent_first).collect();
    assert!(!sent_first.is_empty(), "{r:#}");
    for x in sent_first {
        assert_eq!(x["rows"], 2, "{x:#}");
    }
}

#[test]
fn trace_shows_the_releases_and_the_servers_lines_in_time_order() {
    let t = racer("racer-trace", true);
    let (_, r, err) = controlled(&t, &["--runs", "8", "--trace"]);
    let tr = &r["trace"];
    let lines: Vec<&str> = tr["lines"]
        .as_array()
        .unwrap_or_else(|| panic!("{r:#}\n{err}"))
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    let first_bad =
        r["rounds"].as_array().unwrap().iter().find(|x| x["violations"] != serde_json::json!([]));
    assert_eq!(
        tr["round"],
        first_bad.map_or(serde_json::json!(0), |x| x["round"].clone()),
        "{r:#}"
    );
    // Each copy's lookup comes after its send and before its resume at the await.
    for copy in ["0.0.1", "0.1.1"] {
        let at = |what: &str| {
            lines
                .iter()
                .position(|l| l.ends_with(what))
                .unwrap_or_else(|| panic!("{what}: {lines:#?}"))
        };
        let sent = at(&format!("idemsim  send {copy}"));
        let looked = at(&format!("server   1 {copy} lookup"));
        let resumed = at(&format!("idemsim  resume {copy} at step await"));
        assert!(sent < looked && looked < resumed, "{lines:#?}");
    }
    assert_eq!(tr["unreadable"], 0, "{tr:#}");
    // The violating round's lines say why: one copy looked up before the other saved.
    assert!(first_bad.is_some(), "no round raced in 8: {r:#}");
    let why = tr["why"].as_array().unwrap();
    assert_eq!(why.len(), 1, "{tr:#}");
    assert!(why[0].as_str().unwrap().contains("both found nothing and both inserted"), "{why:?}");
}
