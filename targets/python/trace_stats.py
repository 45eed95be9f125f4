#!/usr/bin/env python3
"""Summarise server.py's instrumentation lines (IDEMSIM_TRACE) from kept real rounds.

    python3 targets/python/trace_stats.py /tmp/idemsim-real-*/trace.jsonl
    python3 targets/python/trace_stats.py --rates OUT.json...   (idemsim real --json outputs)

Prints p10/p50/p90 (nearest rank, as `idemsim calibrate`) in µs of:
- accept-to-read: `read`.t_us - `read`.accepted_us (thread start + request line and headers);
- handler before the first statement: reply.first_stmt_us - read.t_us, for the first request
  of each process instance (cold) and the later ones (warm), with its parts (body, JSON,
  validation and SHA-256 until sqlite3.connect; the connect; connect to first statement);
- each statement kind's own duration (execute + fetch), as the `stmts` lists give them;
- the thread runtime's stack fields: accept() to the thread's setup (`accept_ms`, cold and
  warm), the setup to sqlite3.connect (`handler_ms`, cold and warm) and the connect itself
  (`connect_ms`, the GIL released);
- accept-to-accept gaps of one process instance's accept loop, split at the moment the loop
  had started the connection's thread (reply.spawned_us).
A process instance is a (trace file, pid); requests are ordered by their read time.
server.mjs's lines (no pid, no stmts) are read too: handler = lookup - read, and the
autocommit INSERT = insert - resume.
"""

import json
import os
import sys
from collections import defaultdict


def q(v, p):
    s = sorted(x for x in v if x is not None and x >= 0)
    if not s:
        return None
    return s[round((len(s) - 1) * p)]


def fmt(name, v):
    v = [x for x in v if x is not None]
    if not v:
        return f"{name:<44} n=0"
    if FULL:
        ps = (0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1)
        knots = ", ".join(f"p{round(p * 100)} = {q(v, p) / 1000:.3f}" for p in ps)
        return f"{name:<44} n={len(v):<5} {{ {knots} }} ms"
    a, b, c = (q(v, p) for p in (0.1, 0.5, 0.9))
    return f"{name:<44} n={len(v):<5} p10 {a:>9.1f}  p50 {b:>9.1f}  p90 {c:>9.1f}"


# --full: every quantile a stack file gives (p0 ... p100), in ms, as a stack writes them.
FULL = "--full" in sys.argv


def main(paths):
    paths = [p for p in paths if p != "--full"]
    acc_read, acc_read_cold, start_read, cold, warm = [], [], [], [], []
    cold_parts, warm_parts = defaultdict(list), defaultdict(list)
    stmts = defaultdict(list)
    gaps, first_gaps = [], []
    loop_start, loop_wait = [], []
    # The thread runtime's stack fields (the GIL held but for the connect): accept() returned
    # to the thread's setup (accept_ms); the setup to its first read of the socket, among
    # requests whose bytes came later (prelude_ms: Thread.start() returned then); the setup to
    # sqlite3.connect among requests whose bytes were there before the setup (handler_ms: it
    # never waited); the connect itself (connect_ms).
    acc_setup, acc_setup_cold, prelude, setup_conn, setup_conn_cold, connects = ([] for _ in range(6))
    for path in paths:
        written = client_writes(path)
        reqs = defaultdict(dict)  # (pid-less) attempt -> {ev: line}
        with open(path) as f:
            for l in f:
                if l.strip():
                    e = json.loads(l)
                    reqs[(e.get("process"), e.get("attempt"))].setdefault(e["ev"], e)
        by_pid = defaultdict(list)
        for r in reqs.values():
            if "read" in r:
                by_pid[r["read"].get("pid", r["read"].get("process"))].append(r)
        for rs in by_pid.values():
            rs.sort(key=lambda r: r["read"]["t_us"])
            acc = sorted({r["read"]["accepted_us"] for r in rs if r["read"].get("accepted_us") is not None})
            g = [b - a for a, b in zip(acc, acc[1:])]
            if g:
                first_gaps.append(g[0])
                gaps.extend(g[1:])
            spawn = {r["read"]["accepted_us"]: r["reply"]["spawned_us"] for r in rs
                     if r.get("reply", {}).get("spawned_us") is not None}
            for a, b in zip(acc, acc[1:]):
                if a in spawn:
                    loop_start.append(spawn[a] - a)
                    loop_wait.append(b - spawn[a])
            first_db = True
            for i, r in enumerate(rs):
                rd = r["read"]
                if rd.get("accepted_us") is not None:
                    (acc_read_cold if i == 0 else acc_read).append(rd["t_us"] - rd["accepted_us"])
                if rd.get("started_us") is not None:
                    start_read.append(rd["t_us"] - rd["started_us"])
                    thread_fields(i, rd, r.get("reply") or {}, written.get(rd.get("attempt")),
                                  acc_setup_cold if i == 0 else acc_setup, prelude,
                                  setup_conn_cold if i == 0 else setup_conn, connects)
                rep = r.get("reply")
                if rep and rep.get("first_stmt_us") is None and "stmts" not in rep:
                    # server.mjs's lines: the lookup event is stamped right before the SELECT,
                    # and insert - resume is the autocommit INSERT (as `idemsim calibrate`).
                    if "lookup" in r:
                        (cold if first_db else warm).append(r["lookup"]["t_us"] - rd["t_us"])
                        first_db = False
                    if "insert" in r and "resume" in r:
                        stmts["insert-row (node: insert - resume)"].append(r["insert"]["t_us"] - r["resume"]["t_us"])
                    continue
                if not rep or rep.get("first_stmt_us") is None:
                    continue
                d = rep["first_stmt_us"] - rd["t_us"]
                parts = cold_parts if first_db else warm_parts
                (cold if first_db else warm).append(d)
                first_db = False
                if rep.get("connect_us") is not None:
                    parts["read -> connect (body, JSON, checks, sha256)"].append(rep["connect_us"] - rd["t_us"])
                    parts["sqlite3.connect"].append(rep["connect_dur_us"])
                    parts["connect end -> first statement"].append(
                        rep["first_stmt_us"] - rep["connect_us"] - rep["connect_dur_us"])
                wrote = False
                for name, _, dur in rep.get("stmts", []):
                    if name in ("insert-row", "save-response"):
                        wrote = True
                    if name == "commit":
                        name = "commit (wrote)" if wrote else "commit (read-only)"
                    stmts[name].append(dur)
    print(f"{len(paths)} trace files; all times in µs")
    print(fmt("accept-to-read, cold (1st request)", acc_read_cold))
    print(fmt("accept-to-read, warm", acc_read))
    print(fmt("  thread start-to-read", start_read))
    print(fmt("handler before 1st statement, cold", cold))
    for k, v in cold_parts.items():
        print(fmt("  " + k, v))
    print(fmt("handler before 1st statement, warm", warm))
    for k, v in warm_parts.items():
        print(fmt("  " + k, v))
    for k in sorted(stmts):
        print(fmt(f"statement {k}", stmts[k]))
    print(fmt("accept_ms: accept() to thread setup", acc_setup))
    print(fmt("first_accept_ms: the same, 1st request", acc_setup_cold))
    print(fmt("prelude_ms: setup to 1st read (bytes later)", prelude))
    print(fmt("handler_ms: setup to connect (bytes there)", setup_conn))
    print(fmt("first_handler_ms: the same, 1st request", setup_conn_cold))
    print(fmt("connect_ms: sqlite3.connect", connects))
    print(fmt("accept gap: 1st to 2nd accept", first_gaps))
    print(fmt("accept gap: later", gaps))
    print(fmt("  accept -> Thread.start() returned", loop_start))
    print(fmt("  Thread.start() returned -> next accept", loop_wait))


def client_writes(path):
    """When the real client finished writing each attempt (client.jsonl beside the trace)."""
    out = {}
    try:
        with open(os.path.join(os.path.dirname(path), "client.jsonl")) as f:
            for l in f:
                if l.strip():
                    c = json.loads(l)
                    out[c["attempt"]] = c.get("written_us")
    except OSError:
        pass
    return out


def thread_fields(i, rd, rep, written, acc_setup, prelude, setup_conn, connects):
    """One request's share of the thread runtime's fields (see main)."""
    setup = rd["started_us"]
    if rd.get("accepted_us") is not None:
        acc_setup.append(setup - rd["accepted_us"])
    if written is None or rep.get("connect_us") is None:
        return
    connects.append(rep["connect_dur_us"])
    if written <= setup:
        setup_conn.append(rep["connect_us"] - setup)
    elif written > setup + 100 and i > 0 and rep.get("spawned_us") is not None:
        prelude.append(rep["spawned_us"] - setup)


def rates(paths):
    """Duplicate rates from `idemsim real --json` outputs: intents with >= 2 and >= 10 rows."""
    for path in paths:
        with open(path) as f:
            d = json.load(f)
        h = {int(k): v for k, v in d["cell"]["rows_per_intent"].items()}
        n = sum(h.values())
        ge2 = sum(v for k, v in h.items() if k >= 2)
        ge10 = sum(v for k, v in h.items() if k >= 10)
        viol = sum(1 for r in d["rounds"] if r["violations"])
        print(f"{d['target']:<16} {d['cell']['sim']:<36} intents {n:>4}  rows>=2 {100 * ge2 / n:5.1f}%"
              f"  rows>=10 {100 * ge10 / n:5.1f}%  max {max(h):>2}  rounds with a violation"
              f" {viol}/{len(d['rounds'])}  load {d['load_before'][0]}->{d['load_after'][0]}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if sys.argv[1] == "--rates":
        rates(sys.argv[2:])
    else:
        main(sys.argv[1:])
