#!/usr/bin/env python3
"""The reference article's service as a real idemsim target, thread-per-request.

docs/targets.md is the contract, docs/article-cases.md the service, targets/node/server.mjs
the first implementation (same routes, validation order, statuses, bodies, schema, hook
points). This one is Python 3.11 stdlib only: http.server.ThreadingHTTPServer (one thread
per connection, daemon threads) + the sqlite3 module, each request opening its own
connection on the file IDEMSIM_DB with SQLite's defaults (rollback journal, synchronous =
FULL) and busy_timeout = IDEMSIM_BUSY_TIMEOUT_MS, autocommit mode (isolation_level=None), so
BEGIN IMMEDIATE / COMMIT / ROLLBACK are issued exactly as in the Node variants.

VARIANT = no-key | check-first | transactional (the model of the same name). No outbox.

Faithfulness notes:
- check-first: the article's `await` has no Python equivalent in a synchronous handler: the
  lookup is followed by the insert with no artificial sleep. The window between them is what
  thread scheduling (the GIL, the OS) and SQLite's locking give; the `await` step is still
  announced to the hook when `steps` is armed (the model's crash sites), and a `resume` trace
  event marks where the await was. Concurrency inside one process is real: every request has
  its own connection, so requests of one process contend for the file's locks (busy handler
  sleeps) exactly as requests of two processes do.
- Hook calls (urllib.request, no proxy) happen only at armed points; each is an HTTP round
  trip the real server would not have (docs/targets.md). It blocks only its own thread.
- `stall`: the whole process is stopped (SIGSTOP to itself) and a small `sh` helper sends
  SIGCONT after stall_ms once it sees the process stopped: nothing of the process runs
  meanwhile (a GC pause), as Atomics.wait blocks Node's only thread. A thread-per-request
  server's blocking call would block only its own thread; the contract asks for the process.
- `drop`: the request carries on; at its reply the socket is closed without an answer.
- X-Tenant is ignored. `qty` is accepted when it is a JSON number with an integral value
  (2.0 counts as 2, as Number.isInteger does); booleans are refused. NaN/Infinity are invalid
  JSON (JSON.parse refuses them). Duplicate headers are joined with ", " as Node does.
- listen backlog: 128 (PY_BACKLOG overrides; socketserver's default is 5, which drops SYNs of
  a burst of 20 and so adds 1 s SYN retransmits that Node, with 511, never shows).
- Answers are written with one send (head and body together, TCP_NODELAY), HTTP/1.1 with
  Content-Length, `Connection: close` when the client asked for it.

Instrumentation (IDEMSIM_TRACE): per request the events read, lookup, resume, insert, commit,
save, reply are kept in memory and appended with one os.write on an O_APPEND descriptor just
before the request's answer is sent (or its connection dropped): `reply` is that moment.
t_us is wall-clock µs since the Unix epoch, taken as (time.time_ns() at start -
time.monotonic_ns() at start) + time.monotonic_ns(), so every stamp of a process is
monotonic and on the same base. Extra fields beyond the contract:
- read: `accepted_us` (when accept() returned in the server's accept loop), `thread` (the
  connection's handler thread: 1, 2, ... in accept order, per process), `started_us` (when
  that thread started running), `threads` (threading.active_count() at the read), `pid` (to
  tell a restarted process from the one before it).
- lookup, insert, save, commit: `dur_us`, the statement's own duration (execute + fetch).
- reply: `status` (0 = dropped), `spawned_us` (when the accept loop's Thread.start() for this
  connection returned: the loop is free for the next accept), `connect_us`/`connect_dur_us`
  (sqlite3.connect of this request), `first_stmt_us` (when its first SQL statement started), `stmts` (every statement
  as [name, start_us, dur_us]: begin, lookup, insert-row, save-response, commit, rollback).
"""

import hashlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import traceback
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VARIANT = os.environ.get("VARIANT", "")
VARIANTS = ("no-key", "check-first", "transactional")
if VARIANT not in VARIANTS:
    print(f"server.py: VARIANT must be one of {', '.join(VARIANTS)}, not \"{VARIANT}\"", file=sys.stderr)
    sys.exit(2)
DB_PATH = os.environ.get("IDEMSIM_DB", "")
if not DB_PATH:
    print("server.py: IDEMSIM_DB is not set", file=sys.stderr)
    sys.exit(2)


def _num(name, default):
    try:
        return float(os.environ.get(name, ""))
    except ValueError:
        return default


PROCESS = int(_num("IDEMSIM_PROCESS", 1)) or 1
BUSY_MS = max(0.0, _num("IDEMSIM_BUSY_TIMEOUT_MS", 5000.0))
HOOK = os.environ.get("IDEMSIM_HOOK", "")
PROVIDER = os.environ.get("IDEMSIM_PROVIDER", "")
TRACE = os.environ.get("IDEMSIM_TRACE", "")
ARMED = {s.strip() for s in os.environ.get("IDEMSIM_POINTS", "").split(",") if s.strip()}
STEPS = "steps" in ARMED
BACKLOG = int(_num("PY_BACKLOG", 128))
CATALOGUE = ("test-item", "sample-item", "other-item")
ROUTES = {"/api/orders": "order.create", "/api/returns": "return.create"}
KEY_MAX_LEN = 255
MAX_BODY = 1 << 20

# ---- clock ----------------------------------------------------------------------------------
_BASE_NS = time.time_ns() - time.monotonic_ns()


def now_us():
    """Wall-clock µs since the epoch, on the monotonic clock (one base per process)."""
    return (_BASE_NS + time.monotonic_ns()) // 1000


# ---- database -------------------------------------------------------------------------------
SCHEMA = """
CREATE TABLE IF NOT EXISTS rows(id INTEGER PRIMARY KEY, user TEXT, operation TEXT, item TEXT,
  qty INTEGER, intent TEXT);
CREATE TABLE IF NOT EXISTS keys(user TEXT, operation TEXT, key TEXT, fingerprint TEXT,
  status INTEGER, response TEXT, PRIMARY KEY (user, operation, key));
"""
SQL_BEGIN = "BEGIN IMMEDIATE"
SQL_COMMIT = "COMMIT"
SQL_ROLLBACK = "ROLLBACK"
SQL_LOOKUP = "SELECT fingerprint, status, response FROM keys WHERE user = ? AND operation = ? AND key = ?"
SQL_INSERT_ROW = "INSERT INTO rows(user, operation, item, qty, intent) VALUES (?, ?, ?, ?, ?)"
SQL_SAVE_KEY = "INSERT INTO keys(user, operation, key, fingerprint, status, response) VALUES (?, ?, ?, ?, ?, ?)"


def connect():
    return sqlite3.connect(DB_PATH, timeout=BUSY_MS / 1000.0, isolation_level=None)


def create_schema():
    db = connect()
    try:
        db.executescript(SCHEMA)
    finally:
        db.close()


# ---- instrumentation ------------------------------------------------------------------------
_trace_fd = None
if TRACE:
    _trace_fd = os.open(TRACE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


def ev(ctx, name, **extra):
    """Record an event (returned, so a field can be added once known, e.g. a duration)."""
    if not TRACE:
        return None
    line = {"t_us": now_us(), "process": PROCESS, "attempt": ctx.attempt, "ev": name}
    line.update(extra)
    ctx.events.append(line)
    return line


def flush_trace(ctx):
    if not TRACE or not ctx.events:
        return
    data = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in ctx.events).encode()
    ctx.events = []
    try:
        os.write(_trace_fd, data)
    except OSError as e:
        print(f"server.py: trace write failed: {e}", file=sys.stderr)


# ---- hook and provider ----------------------------------------------------------------------
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def post_json(base, path, body, timeout):
    req = urllib.request.Request(
        base.rstrip("/") + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    # urllib raises HTTPError on a status outside 2xx (an error, as in server.mjs).
    with _opener.open(req, timeout=timeout) as res:
        text = res.read().decode("utf-8")
    return json.loads(text) if text else {}


class HookFail(Exception):
    pass


def stall(ms):
    """Block the whole process for `ms` (SIGSTOP; a helper sends SIGCONT): nothing else runs."""
    if ms <= 0:
        return
    pid = os.getpid()
    # The helper waits until this process is stopped, so the stall is not cut short.
    script = (
        f'while ! grep -q "^State:[[:space:]]*T" /proc/{pid}/status 2>/dev/null; do :; done; '
        f"sleep {ms / 1000.0:.6f}; kill -CONT {pid}"
    )
    try:
        helper = subprocess.Popen(["sh", "-c", script], stdin=subprocess.DEVNULL)
    except OSError:
        time.sleep(ms / 1000.0)  # no helper: this thread only
        return
    os.kill(pid, signal.SIGSTOP)
    helper.wait()


def effect(ctx):
    if not PROVIDER:
        raise RuntimeError("effect: IDEMSIM_PROVIDER is not set")
    post_json(PROVIDER, "/effect", {"intent": ctx.intent, "key": ctx.key}, 10)


def hook(ctx, point, step=None):
    """Call the hook at `point` (already known to be armed) and do what it answers."""
    if not HOOK:
        return
    # No timeout: idemsim may kill this process instead of answering (a crash at this point).
    a = post_json(HOOK, "/point", {"point": point, "process": PROCESS, "key": ctx.key,
                                   "intent": ctx.intent, "attempt": ctx.attempt, "step": step}, None)
    if a.get("effect") is True:
        effect(ctx)
    then = a.get("then")
    if then == "fail":
        raise HookFail(f"{point}: fail (hook)")
    if then == "drop":
        ctx.drop_reply = True  # the request carries on; its reply is never sent
    elif then == "stall":
        try:
            stall(float(a.get("stall_ms") or 0))
        except (TypeError, ValueError):
            pass


# ---- one request ------------------------------------------------------------------------------
class Ctx:
    __slots__ = ("handler", "attempt", "intent", "key", "user", "operation", "item", "qty",
                 "fingerprint", "events", "in_tx", "replied", "drop_reply", "conn",
                 "connect_us", "connect_dur_us", "first_stmt_us", "stmts")

    def __init__(self, handler, attempt, intent):
        self.handler = handler
        self.attempt = attempt
        self.intent = intent
        self.key = None
        self.user = self.operation = self.item = self.qty = self.fingerprint = None
        self.events = []
        self.in_tx = False
        self.replied = False
        self.drop_reply = False
        self.conn = None
        self.connect_us = self.connect_dur_us = self.first_stmt_us = None
        self.stmts = []


def run(ctx, name, sql, params=(), fetch=False, line=None):
    """Run one statement on the request's connection, timing it; returns (cursor, row)."""
    t0 = time.monotonic_ns()
    if ctx.first_stmt_us is None:
        ctx.first_stmt_us = (_BASE_NS + t0) // 1000
    try:
        cur = ctx.conn.execute(sql, params)
        row = cur.fetchone() if fetch else None
    finally:
        if TRACE:
            dur = round((time.monotonic_ns() - t0) / 1000, 1)
            ctx.stmts.append([name, (_BASE_NS + t0) // 1000, dur])
            if line is not None:
                line["dur_us"] = dur
    return cur, row


def reply(ctx, status, body_text, replayed=False):
    if ctx.replied:
        return
    ctx.replied = True
    h = ctx.handler
    extra = {}
    if TRACE:
        extra = {"connect_us": ctx.connect_us, "connect_dur_us": ctx.connect_dur_us,
                 "first_stmt_us": ctx.first_stmt_us, "stmts": ctx.stmts,
                 "spawned_us": getattr(h.client_address, "spawned_us", None)}
    if ctx.drop_reply:
        ev(ctx, "reply", status=0, **extra)
        flush_trace(ctx)
        h.close_connection = True
        h.dropped = True
        try:
            h.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        return
    # The trace is written first: idemsim may SIGKILL the process as soon as the last answer
    # arrives, and this thread's lines would be lost (the reply event is the moment before).
    ev(ctx, "reply", status=status, **extra)
    flush_trace(ctx)
    h.send_json(status, body_text, replayed)


def error(ctx, status, msg):
    reply(ctx, status, json.dumps({"error": msg}, separators=(",", ":")))


def is_busy(e):
    return isinstance(e, sqlite3.Error) and str(getattr(e, "sqlite_errorname", "")).startswith("SQLITE_BUSY")


def is_constraint(e):
    return isinstance(e, sqlite3.Error) and str(getattr(e, "sqlite_errorname", "")).startswith("SQLITE_CONSTRAINT")


def fail(ctx, e):
    """The error path: ROLLBACK this request's own open transaction, then 503 (busy) or 500."""
    if ctx.in_tx and ctx.conn is not None and ctx.conn.in_transaction:
        try:
            run(ctx, "rollback", SQL_ROLLBACK)
        except Exception:
            pass  # already ended
    ctx.in_tx = False
    if not isinstance(e, HookFail) and not is_busy(e) and not is_constraint(e):
        print(f"server.py[{PROCESS}] {VARIANT}: " + "".join(traceback.format_exception(e)), file=sys.stderr, end="")
    if is_busy(e):
        error(ctx, 503, "database busy, safe to retry")
    else:
        error(ctx, 500, "internal error")


def hit(ctx, rec):
    """A stored record found: 422 on another fingerprint, else the stored reply."""
    fingerprint, status, response = rec
    if fingerprint != ctx.fingerprint:
        return error(ctx, 422, "Idempotency-Key reused with a different payload")
    return reply(ctx, status, response, True)


# ---- the front half: body and key -----------------------------------------------------------
def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def admit(ctx, body, key):
    try:
        value = json.loads(body.decode("utf-8", errors="replace"), parse_constant=_no_constant)
    except ValueError:
        return error(ctx, 400, "invalid JSON")
    qty = value.get("qty") if isinstance(value, dict) else None
    if isinstance(qty, float) and qty.is_integer():
        qty = int(qty)
    ok = (
        isinstance(value, dict)
        and len(value) == 2
        and isinstance(value.get("item"), str)
        and value["item"] in CATALOGUE
        and isinstance(qty, int)
        and not isinstance(qty, bool)
        and 1 <= qty <= 10
    )
    if not ok:
        return error(ctx, 400, "invalid order")
    ctx.item = value["item"]
    ctx.qty = qty
    if VARIANT != "no-key":
        if key is None or key == "":
            return error(ctx, 400, "missing Idempotency-Key")
        if len(key) > KEY_MAX_LEN:
            return error(ctx, 400, "Idempotency-Key too long")
        ctx.key = key
        fp = json.dumps({"item": ctx.item, "qty": ctx.qty}, separators=(",", ":"))
        ctx.fingerprint = hashlib.sha256(fp.encode("utf-8")).hexdigest()
    return True


# ---- the variants ---------------------------------------------------------------------------
def created(ctx, id_):
    return json.dumps({"id": id_, "item": ctx.item, "qty": ctx.qty}, separators=(",", ":"))


def insert_row(ctx):
    """The insert-row step (and the before-commit point after it): the new row's id."""
    if STEPS:
        hook(ctx, "step", "insert-row")
    cur, _ = run(ctx, "insert-row", SQL_INSERT_ROW, (ctx.user, ctx.operation, ctx.item, ctx.qty, ctx.intent))
    id_ = cur.lastrowid
    ev(ctx, "insert", dur_us=ctx.stmts[-1][2] if ctx.stmts else None)
    if "before-commit" in ARMED:
        hook(ctx, "before-commit")
    return id_


def answer_created(ctx, body):
    """The points after the commit, then 201 with `body`."""
    if "before-effect" in ARMED:
        hook(ctx, "before-effect")
    if "after-commit" in ARMED:
        hook(ctx, "after-commit")
    if STEPS:
        hook(ctx, "step", "reply")  # a crash after the last step, before the answer
    reply(ctx, 201, body)


def commit_and_answer(ctx, body):
    """COMMIT the request's transaction, then the points after it, then 201 with `body`."""
    if STEPS:
        hook(ctx, "step", "commit")
    run(ctx, "commit", SQL_COMMIT)
    ctx.in_tx = False
    ev(ctx, "commit", dur_us=ctx.stmts[-1][2] if ctx.stmts else None)
    answer_created(ctx, body)


def no_key(ctx):
    if STEPS:
        hook(ctx, "step", "begin")
    run(ctx, "begin", SQL_BEGIN)
    ctx.in_tx = True
    id_ = insert_row(ctx)
    commit_and_answer(ctx, created(ctx, id_))


def check_first(ctx):
    if STEPS:
        hook(ctx, "step", "lookup")
    line = ev(ctx, "lookup")
    _, rec = run(ctx, "lookup", SQL_LOOKUP, (ctx.user, ctx.operation, ctx.key), fetch=True, line=line)
    if rec:
        return hit(ctx, rec)
    if STEPS:
        hook(ctx, "step", "await")  # the model's step; no await here (see the header)
    ev(ctx, "resume")
    id_ = insert_row(ctx)  # autocommit in check-first: durable here
    if STEPS:
        hook(ctx, "step", "save-response")
    body = created(ctx, id_)
    run(ctx, "save-response", SQL_SAVE_KEY, (ctx.user, ctx.operation, ctx.key, ctx.fingerprint, 201, body))  # PK clash → 500
    ev(ctx, "save", dur_us=ctx.stmts[-1][2] if ctx.stmts else None)
    answer_created(ctx, body)


def transactional(ctx):
    if STEPS:
        hook(ctx, "step", "begin")
    run(ctx, "begin", SQL_BEGIN)
    ctx.in_tx = True
    if STEPS:
        hook(ctx, "step", "lookup")
    line = ev(ctx, "lookup")
    _, rec = run(ctx, "lookup", SQL_LOOKUP, (ctx.user, ctx.operation, ctx.key), fetch=True, line=line)
    if rec:
        run(ctx, "commit", SQL_COMMIT)
        ctx.in_tx = False
        return hit(ctx, rec)
    id_ = insert_row(ctx)
    if STEPS:
        hook(ctx, "step", "save-response")
    body = created(ctx, id_)
    run(ctx, "save-response", SQL_SAVE_KEY, (ctx.user, ctx.operation, ctx.key, ctx.fingerprint, 201, body))
    ev(ctx, "save", dur_us=ctx.stmts[-1][2] if ctx.stmts else None)
    commit_and_answer(ctx, body)


PROGRAM = {"no-key": no_key, "check-first": check_first, "transactional": transactional}[VARIANT]


# ---- the server -----------------------------------------------------------------------------
class Accepted(tuple):
    """A client address that also carries when it was accepted, its thread's number and when
    the accept loop had started that thread (Thread.start() returned)."""
    accepted_us = None
    thread = None
    spawned_us = None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "idemsim-python"
    sys_version = ""

    def setup(self):
        self.started_us = now_us()
        super().setup()
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        self.dropped = False

    def log_message(self, format, *args):  # no access log (server.mjs has none)
        pass

    def __getattr__(self, name):
        # Every method reaches the router (server.mjs answers 404 to any non-POST).
        if name.startswith("do_"):
            return self.serve
        raise AttributeError(name)

    def header(self, name):
        values = self.headers.get_all(name)
        return None if values is None else ", ".join(values)

    def read_body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            out = bytearray()
            while True:
                size = int(self.rfile.readline(1024).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                if len(out) + size > MAX_BODY:
                    raise ValueError("body too large")
                out += self.rfile.read(size)
                self.rfile.readline(1024)
        n = int(self.headers.get("Content-Length") or 0)
        if n < 0 or n > MAX_BODY:
            raise ValueError("body too large")
        return self.rfile.read(n) if n else b""

    def send_json(self, status, body_text, replayed):
        body = body_text.encode("utf-8")
        reason = self.responses.get(status, ("",))[0]
        head = [f"HTTP/1.1 {status} {reason}", "Content-Type: application/json",
                f"Content-Length: {len(body)}", f"Date: {self.date_time_string()}"]
        if replayed:
            head.append("Idempotent-Replayed: true")
        head.append("Connection: close" if self.close_connection else "Connection: keep-alive")
        data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
        if self.command != "HEAD":
            data += body
        try:
            self.wfile.write(data)
        except OSError:
            self.close_connection = True

    def serve(self):
        ctx = Ctx(self, self.header("X-Attempt"), self.header("X-Intent"))
        if TRACE:
            a = self.client_address
            ev(ctx, "read", accepted_us=getattr(a, "accepted_us", None), thread=getattr(a, "thread", None),
               started_us=self.started_us, threads=threading.active_count(), pid=os.getpid())
        try:
            body = self.read_body()
        except (ValueError, OSError):
            self.close_connection = True
            body = None
        path = self.path.split("?")[0]
        operation = ROUTES.get(path) if self.command == "POST" else None
        if not operation:
            return error(ctx, 404, "not found")
        user = self.header("X-User")
        if not user:
            return error(ctx, 401, "unauthenticated")
        ctx.operation = operation
        ctx.user = user
        if body is None:
            return error(ctx, 400, "invalid JSON")
        if admit(ctx, body, self.header("Idempotency-Key")) is not True:
            return
        try:
            if TRACE:
                ctx.connect_us = now_us()
            ctx.conn = connect()
            if TRACE:
                ctx.connect_dur_us = now_us() - ctx.connect_us
            PROGRAM(ctx)
        except Exception as e:  # noqa: BLE001 (the service's error path)
            fail(ctx, e)
        finally:
            if ctx.conn is not None:
                try:
                    ctx.conn.close()
                except Exception:
                    pass
            if not ctx.replied:  # cannot happen; never leave a client hanging
                error(ctx, 500, "internal error")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = BACKLOG

    def __init__(self, *a, **kw):
        self.accepted = 0
        super().__init__(*a, **kw)

    def get_request(self):
        sock, addr = self.socket.accept()
        stamped = Accepted(addr)
        stamped.accepted_us = now_us()
        self.accepted += 1
        stamped.thread = self.accepted
        return sock, stamped

    def process_request(self, request, client_address):
        super().process_request(request, client_address)  # starts the thread, waits until it runs
        if TRACE and isinstance(client_address, Accepted):
            client_address.spawned_us = now_us()


def main():
    create_schema()
    server = Server(("127.0.0.1", 0), Handler)
    sys.stdout.write(f"IDEMSIM_LISTENING {server.server_address[1]}\n")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
