"""An orders service with an API of its own: the worked example of docs/targets.md.

Not the reference article's API: `POST /v1/orders` with `X-Customer-Id` and a body
`{"product": str, "count": int}`, answered `201 {"data": {"order_id": N, ...}}` in a chunked
body (Transfer-Encoding: chunked, as many frameworks send); `GET /healthz` answers 200.
It listens on 127.0.0.1:$PORT and prints nothing special. The purchases table keeps no
customer and no intent, so the target file counts rows by body (`attribute = "body"`,
`user = "none"`).

Idempotency: one transaction (BEGIN IMMEDIATE) looks the key up (per customer), replays a
stored answer (`Idempotent-Replayed: true`; another body under the key: 422), or inserts the
purchase and the key's answer and commits: the reference article's transactional design.
Python 3.11 standard library only; a thread and a connection per request.
"""

import json
import os
import sqlite3
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DB = os.environ["IDEMSIM_DB"]
# MODE=no-key: the same service without its idempotency (every request inserts): the worked
# example's broken twin, for tests that a duplicate is seen through the target's map.
MODE = os.environ.get("MODE", "")
BUSY_S = float(os.environ.get("IDEMSIM_BUSY_TIMEOUT_MS", "5000")) / 1000.0

SCHEMA = """
CREATE TABLE IF NOT EXISTS purchases (pk INTEGER PRIMARY KEY AUTOINCREMENT, product TEXT NOT NULL,
                                      count INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS idem (customer TEXT NOT NULL, key TEXT NOT NULL, request TEXT NOT NULL,
                                 status INTEGER NOT NULL, body TEXT NOT NULL,
                                 PRIMARY KEY (customer, key));
"""


def connect():
    c = sqlite3.connect(DB, timeout=BUSY_S, isolation_level=None)
    return c


class Orders(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, doc, replayed=False):
        data = json.dumps(doc, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        if replayed:
            self.send_header("Idempotent-Replayed", "true")
        self.end_headers()
        half = len(data) // 2
        for part in (data[:half], data[half:]):
            if part:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
        self.wfile.write(b"0\r\n\r\n")
        self.close_connection = True

    def do_GET(self):
        if self.path == "/healthz":
            return self.answer(200, {"ok": True})
        return self.answer(404, {"error": "not found"})

    def do_POST(self):
        if self.path != "/v1/orders":
            return self.answer(404, {"error": "not found"})
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        customer = self.headers.get("X-Customer-Id")
        key = self.headers.get("Idempotency-Key")
        if not customer:
            return self.answer(401, {"error": "who are you?"})
        if not key:
            return self.answer(400, {"error": "Idempotency-Key required"})
        try:
            order = json.loads(raw)
            product, count = order["product"], order["count"]
            assert isinstance(product, str) and isinstance(count, int) and count > 0
        except Exception:
            return self.answer(400, {"error": "expected {product, count}"})
        request = json.dumps({"product": product, "count": count}, sort_keys=True)
        db = connect()
        if MODE == "no-key":
            cur = db.execute("INSERT INTO purchases(product, count) VALUES (?, ?)", (product, count))
            db.close()
            doc = {"data": {"order_id": cur.lastrowid, "product": product, "count": count}}
            return self.answer(201, doc)
        try:
            db.execute("BEGIN IMMEDIATE")
            hit = db.execute(
                "SELECT request, status, body FROM idem WHERE customer = ? AND key = ?",
                (customer, key),
            ).fetchone()
            if hit is not None:
                db.execute("COMMIT")
                if hit[0] != request:
                    return self.answer(422, {"error": "key reused with another order"})
                return self.answer(hit[1], json.loads(hit[2]), replayed=True)
            cur = db.execute("INSERT INTO purchases(product, count) VALUES (?, ?)", (product, count))
            doc = {"data": {"order_id": cur.lastrowid, "product": product, "count": count}}
            db.execute(
                "INSERT INTO idem(customer, key, request, status, body) VALUES (?, ?, ?, 201, ?)",
                (customer, key, request, json.dumps(doc)),
            )
            db.execute("COMMIT")
            return self.answer(201, doc)
        except sqlite3.OperationalError as e:
            if db.in_transaction:
                db.execute("ROLLBACK")
            busy = "locked" in str(e) or "busy" in str(e)
            return self.answer(503 if busy else 500, {"error": str(e)})
        finally:
            db.close()


def main():
    db = connect()
    db.executescript(SCHEMA)
    db.close()
    server = ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Orders)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
