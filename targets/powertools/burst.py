#!/usr/bin/env python3
"""Double-click / burst client for the powertools target (stdlib only).

    python3 burst.py PORT COPIES ROUNDS [DB]

DB defaults to $IDEMSIM_DB. First WARMUP (env, default 5) sequential POSTs warm the server
(customer "warmup", keys of their own). Then ROUNDS rounds, each with a fresh Idempotency-Key:
COPIES fresh TCP connections are opened, then the same request is written on each back to back
(one send per connection, nothing read in between), then every answer is read. Each round's
requests carry X-Intent = the round's key, so the orders table (opened read-only) tells how many
rows each key made. Prints the status counts per copy position and overall, the replay header
count, and how many rounds made 0, 1, 2, ... rows.
"""

import collections
import json
import os
import socket
import sqlite3
import sys
import time
import uuid


def request(key, customer="alice", sku="A1", quantity=1, intent=None):
    body = json.dumps({"sku": sku, "quantity": quantity}).encode()
    head = (
        f"POST /orders HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {customer}\r\nIdempotency-Key: {key}\r\n"
        f"X-Intent: {intent or key}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


def read_answer(sock, timeout=30.0):
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError as e:
        if not data:
            return f"error:{type(e).__name__}", False, b""
    if not data:
        return "error:empty", False, b""
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ")[1] if len(lines[0].split(" ")) > 1 else "error:badline"
    replayed = any(l.lower().startswith("idempotent-replayed:") and "true" in l.lower() for l in lines[1:])
    return status, replayed, body


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    port, copies, rounds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    db = sys.argv[4] if len(sys.argv) > 4 else os.environ.get("IDEMSIM_DB", "")
    if not db:
        print("burst.py: give DB or set IDEMSIM_DB", file=sys.stderr)
        sys.exit(2)
    addr = ("127.0.0.1", port)
    run = uuid.uuid4().hex[:8]

    for i in range(int(os.environ.get("WARMUP", "5"))):
        s = socket.create_connection(addr)
        s.sendall(request(f"warm-{run}-{i}", customer="warmup"))
        read_answer(s)
        s.close()

    overall = collections.Counter()
    by_pos = [collections.Counter() for _ in range(copies)]
    replays = 0
    keys = []
    t0 = time.monotonic()
    for r in range(rounds):
        key = f"burst-{run}-{r}"
        keys.append(key)
        msg = request(key)
        socks = [socket.create_connection(addr) for _ in range(copies)]
        for s in socks:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for s in socks:  # written together
            s.sendall(msg)
        for i, s in enumerate(socks):
            status, replayed, _ = read_answer(s)
            s.close()
            overall[status] += 1
            by_pos[i][status] += 1
            replays += replayed
    wall = time.monotonic() - t0

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = dict(conn.execute(
            f"SELECT intent, COUNT(*) FROM orders WHERE intent IN ({','.join('?' * len(keys))}) GROUP BY intent",
            keys,
        ).fetchall())
    finally:
        conn.close()
    per_key = collections.Counter(rows.get(k, 0) for k in keys)
    dup = sum(n for c, n in per_key.items() if c >= 2)

    print(f"port {port} copies {copies} rounds {rounds} run {run} wall {wall:.2f}s")
    print("rows per key: " + ", ".join(f"{c} row(s): {n} rounds" for c, n in sorted(per_key.items())))
    print(f"rounds with >=2 rows: {dup}/{rounds}")
    print("statuses: " + ", ".join(f"{s}: {n}" for s, n in sorted(overall.items())))
    print(f"Idempotent-Replayed: true on {replays} answers")
    if copies <= 4:
        for i, c in enumerate(by_pos):
            print(f"  copy {i + 1}: " + ", ".join(f"{s}: {n}" for s, n in sorted(c.items())))


if __name__ == "__main__":
    main()
