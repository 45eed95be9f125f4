#!/usr/bin/env python3
"""An orders service made idempotent by Powertools for AWS Lambda (Python) 3.37.0 + Redis.

Thread-per-request (http.server.ThreadingHTTPServer, daemon threads) + sqlite3, run outside
Lambda. Idempotency is entirely Powertools': `idempotent_function` around the function that
inserts the order, `IdempotencyConfig(event_key_jmespath=..., payload_validation_jmespath=...)`,
and its Redis persistence layer (`CachePersistenceLayer`, an alias of the deprecated
`RedisCachePersistenceLayer`, persistence/redis.py). README.md says what is configured and why.

Environment:
  PORT                      listen on 127.0.0.1:PORT (0 or unset: any free port, printed on stderr)
  IDEMSIM_DB                absolute path of the SQLite file (table created at start)
  IDEMSIM_BUSY_TIMEOUT_MS   sqlite3.connect(timeout=...) in ms, default 5000
  REDIS_URL                 e.g. redis://127.0.0.1:6390 (default redis://127.0.0.1:6379)
  PT_INPROGRESS_MS          what the stand-in Lambda context answers to
                            get_remaining_time_in_millis() (default 30000): an INPROGRESS
                            record older than this is taken over by the next request with its
                            key. "none": no context registered, so INPROGRESS records carry no
                            in-progress expiry and block their key until PT_EXPIRES_S.
  PT_EXPIRES_S              IdempotencyConfig(expires_after_seconds=...), default 3600
  PT_VALIDATE_PAYLOAD       1: payload_validation_jmespath="order" (default 0; see below)
  PY_BACKLOG                listen backlog, default 128 (socketserver's default of 5 drops
                            SYNs of a burst of 20)

API: GET /health -> 200 {"ok":true}. POST /orders with `Authorization: Bearer <customer>`
(else 401), `Idempotency-Key: <key>`, JSON body {"sku": non-empty string, "quantity": integer
>= 1} (else 400) -> 201 {"order": {"id", "sku", "quantity"}}; a replay answers the stored body
with `Idempotent-Replayed: true`. Errors are JSON {"error": ..., "message": ...}: see STATUS.

idemsim's hook (docs/targets.md "Points (the hook)"; IDEMSIM_HOOK, IDEMSIM_POINTS,
IDEMSIM_PROCESS, IDEMSIM_PROVIDER), only at armed points, all inside the idempotent function
(after Powertools wrote the INPROGRESS record, before it saves the result): `step insert-row`
before the INSERT; `before-commit` right after it, before conn.commit() (sqlite3's implicit
transaction: here the INSERT is not yet durable); `before-effect` (+ the provider when the hook
answers effect: true), `after-effect`, `after-commit`, `step reply` after the commit, the last
as the function's final act before it returns its result. `fail` raises an ordinary exception
inside the function: sqlite3 rolls back an uncommitted INSERT when the connection closes,
Powertools deletes the INPROGRESS record and re-raises, and the server answers 500 `internal`
(a retry runs afresh). `drop`: the function carries on and Powertools saves the result; the
server then shuts the socket down instead of answering. `stall`: the whole process is stopped
(SIGSTOP to itself, a `sh` helper sends SIGCONT after stall_ms), as targets/python/server.py
does: sleeping would block only this request's thread. Each hook call is an HTTP round trip
(urllib, no proxy) that blocks only its own thread; with IDEMSIM_POINTS empty none is made.
"""

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyInconsistentStateError,
    IdempotencyKeyError,
    IdempotencyPersistenceLayerError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.cache import CachePersistenceLayer

DB_PATH = os.environ.get("IDEMSIM_DB", "")
if not DB_PATH:
    print("server.py: IDEMSIM_DB is not set", file=sys.stderr)
    sys.exit(2)
PORT = int(os.environ.get("PORT") or 0)
BUSY_S = float(os.environ.get("IDEMSIM_BUSY_TIMEOUT_MS") or 5000) / 1000.0
REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379"
INPROGRESS_MS = os.environ.get("PT_INPROGRESS_MS") or "30000"
EXPIRES_S = int(os.environ.get("PT_EXPIRES_S") or 3600)
VALIDATE = (os.environ.get("PT_VALIDATE_PAYLOAD") or "0") not in ("", "0", "false", "no")
BACKLOG = int(os.environ.get("PY_BACKLOG") or 128)
MAX_BODY = 1 << 20
PROCESS = int(os.environ.get("IDEMSIM_PROCESS") or 1)
HOOK = os.environ.get("IDEMSIM_HOOK", "")
PROVIDER = os.environ.get("IDEMSIM_PROVIDER", "")
ARMED = {s.strip() for s in os.environ.get("IDEMSIM_POINTS", "").split(",") if s.strip()}
STEPS = "steps" in ARMED

# --- idemsim's hook and provider (only at armed points) -------------------------------------
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_hook_local = threading.local()  # .ctx: the HookCtx of this thread's request (only when armed)


class HookCtx:
    """What the hook needs of a request: its headers, and whether its answer is to be dropped."""

    def __init__(self, key, intent, attempt):
        self.key = key
        self.intent = intent
        self.attempt = attempt
        self.drop_reply = False


class HookFail(Exception):
    """What the hook's `fail` raises: an ordinary exception, as any unexpected failure."""


def post_json(base, path, body, timeout):
    req = urllib.request.Request(
        base.rstrip("/") + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    # urllib raises HTTPError on a status outside 2xx.
    with _opener.open(req, timeout=timeout) as res:
        text = res.read().decode("utf-8")
    return json.loads(text) if text else {}


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


def hook(point, step=None):
    """Call the hook at `point` (already known to be armed) and do what it answers."""
    ctx = getattr(_hook_local, "ctx", None)
    if not HOOK or ctx is None:
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
        ctx.drop_reply = True  # the request carries on; its answer never reaches the client
    elif then == "stall":
        try:
            stall(float(a.get("stall_ms") or 0))
        except (TypeError, ValueError):
            pass


# --- Powertools -----------------------------------------------------------------------------

# The data keyword argument is {"customer", "idempotency_key", "order": {"sku", "quantity"}}.
# Key: the Idempotency-Key header scoped by the customer (a JMESPath multi-select, as the docs'
# `["user_id", "product_id"]` example), guarded with `&&` so that a request without the header
# yields null: Powertools then skips idempotency for it (raise_on_no_idempotency_key=False,
# persistence/base.py _get_hashed_idempotency_key) instead of sharing one key [customer, null].
# Payload validation (the docs' payload_validation_jmespath="order") is OFF by default: in
# 3.37.0 the Redis layer's _update_record (persistence/redis.py:489-502) rewrites the record on
# success without the `validation` attribute that _put_in_progress_record wrote, so with
# validation on every replay of a COMPLETED record fails with IdempotencyValidationError (422)
# even for an identical body. PT_VALIDATE_PAYLOAD=1 turns it on (to show that); off, a reused
# key with another body replays the first order's response.
# X-Intent is passed as a separate keyword argument, so it is neither in the key nor in the
# validation hash.
config = IdempotencyConfig(
    event_key_jmespath="idempotency_key && [customer, idempotency_key]",
    payload_validation_jmespath="order" if VALIDATE else "",
    expires_after_seconds=EXPIRES_S,
)


class ServerContext:
    """Stand-in for the Lambda context, registered once (config.register_lambda_context), as
    the docs ask of idempotent_function users. Powertools reads only
    get_remaining_time_in_millis() (base.py _get_remaining_time_in_millis) to stamp
    in_progress_expiration = now + that. It is stateless, so one object serves every thread
    (the config is shared; registering a per-request context would race)."""

    def __init__(self, ms):
        self.ms = ms

    def get_remaining_time_in_millis(self):
        return self.ms


if INPROGRESS_MS.lower() != "none":
    config.register_lambda_context(ServerContext(int(INPROGRESS_MS)))

with warnings.catch_warnings():
    # RedisCachePersistenceLayer (and so its alias CachePersistenceLayer) is marked
    # @deprecated("... will be removed in v4.0.0") in 3.37.0 (persistence/redis.py:213).
    warnings.simplefilter("ignore", DeprecationWarning)
    persistence = CachePersistenceLayer(url=REDIS_URL)


class Replayed:
    """What response_hook returns: marks a response read back from Redis."""

    def __init__(self, response):
        self.response = response


def mark_replay(response, data_record):
    # IdempotencyConfig(response_hook=...): called only when the response comes from the store
    # (base.py _handle_for_status), never on a fresh run.
    return Replayed(response)


config.response_hook = mark_replay


@idempotent_function(data_keyword_argument="request", persistence_store=persistence, config=config)
def create_order(*, request, intent):
    order = request["order"]
    conn = sqlite3.connect(DB_PATH, timeout=BUSY_S)
    try:
        if STEPS:
            hook("step", "insert-row")
        cur = conn.execute(
            "INSERT INTO orders (customer, sku, quantity, intent) VALUES (?, ?, ?, ?)",
            (request["customer"], order["sku"], order["quantity"], intent),
        )
        if "before-commit" in ARMED:
            hook("before-commit")  # a raise here: close() below rolls the INSERT back
        conn.commit()
        if "before-effect" in ARMED:
            hook("before-effect")
        if "after-effect" in ARMED:
            hook("after-effect")
        if "after-commit" in ARMED:
            hook("after-commit")
        if STEPS:
            hook("step", "reply")  # a crash after the last step, before the answer
        return {"order": {"id": cur.lastrowid, "sku": order["sku"], "quantity": order["quantity"]}}
    finally:
        conn.close()


# exception class -> (status, error code); first match wins
STATUS = [
    (IdempotencyAlreadyInProgressError, 409, "in_progress"),
    (IdempotencyInconsistentStateError, 409, "inconsistent_state"),  # still racing after 3 tries
    (IdempotencyValidationError, 422, "key_reused"),  # same key, another body (PT_VALIDATE_PAYLOAD=1)
    (IdempotencyKeyError, 400, "no_idempotency_key"),  # unreachable: raise_on_no_... is False
    (IdempotencyPersistenceLayerError, 503, "idempotency_store"),  # Redis failed
]


def create_schema():
    conn = sqlite3.connect(DB_PATH, timeout=BUSY_S)
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY AUTOINCREMENT, "
            "customer TEXT, sku TEXT, quantity INTEGER, intent TEXT)"
        )
        conn.commit()
    finally:
        conn.close()


# --- HTTP -----------------------------------------------------------------------------------


def parse_order(raw):
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(body, dict):
        return None
    sku, qty = body.get("sku"), body.get("quantity")
    if not isinstance(sku, str) or not sku:
        return None
    if not isinstance(qty, int) or isinstance(qty, bool) or qty < 1:
        return None
    return {"sku": sku, "quantity": qty}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass

    def log_message(self, format, *args):  # no access log
        pass

    def __getattr__(self, name):
        if name.startswith("do_"):
            return self.serve
        raise AttributeError(name)

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

    def send_json(self, status, obj, replayed=False):
        if ARMED and self.hook_ctx is not None and self.hook_ctx.drop_reply:
            # idemsim `drop`: the answer never reaches the client (whatever is stored stays).
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        body = json.dumps(obj, separators=(",", ":"), sort_keys=True).encode("utf-8")  # as Powertools stores it (base.py:302)
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
            self.wfile.write(data)  # one send: head and body together
        except OSError:
            self.close_connection = True

    def error(self, status, code, message=None):
        obj = {"error": code}
        if message:
            obj["message"] = message
        self.send_json(status, obj)

    def serve(self):
        if ARMED:
            self.hook_ctx = _hook_local.ctx = HookCtx(
                self.headers.get("Idempotency-Key") or None,
                self.headers.get("X-Intent"),
                self.headers.get("X-Attempt"),
            )
        try:
            raw = self.read_body()
        except (ValueError, OSError):
            self.close_connection = True
            raw = None
        path = self.path.split("?")[0]
        if path == "/health" and self.command in ("GET", "HEAD"):
            return self.send_json(200, {"ok": True})
        if path != "/orders":
            return self.error(404, "not_found")
        if self.command != "POST":
            return self.error(405, "method_not_allowed")
        auth = self.headers.get("Authorization") or ""
        scheme, _, customer = auth.partition(" ")
        customer = customer.strip()
        if scheme.lower() != "bearer" or not customer:
            return self.error(401, "unauthenticated")
        order = parse_order(raw) if raw is not None else None
        if order is None:
            return self.error(400, "invalid_body", 'expected {"sku": string, "quantity": integer >= 1}')
        request = {"customer": customer, "idempotency_key": self.headers.get("Idempotency-Key"), "order": order}
        try:
            result = create_order(request=request, intent=self.headers.get("X-Intent"))
        except Exception as e:  # noqa: BLE001 (the service's error path)
            for cls, status, code in STATUS:
                if isinstance(e, cls):
                    return self.error(status, code, str(e))
            if isinstance(e, sqlite3.OperationalError) and "locked" in str(e):
                return self.error(503, "database_busy", str(e))
            return self.error(500, "internal", f"{type(e).__name__}: {e}")
        if isinstance(result, Replayed):
            return self.send_json(201, result.response, replayed=True)
        return self.send_json(201, result)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = BACKLOG


def main():
    create_schema()
    server = Server(("127.0.0.1", PORT), Handler)
    if not PORT:
        print(f"server.py: listening on 127.0.0.1:{server.server_address[1]}", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
