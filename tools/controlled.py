#!/usr/bin/env python3
"""Measure controlled real rounds (docs/controlled.md) and print the page's tables.

    python3 tools/controlled.py [--bin target/release/idemsim] [--rounds 40] [--plain 300]
                                [--part all|determinism|luck]

Two measurements, both through the real binary against the shipped targets:

1. Determinism: per target and sim, `real SIM --target T --controlled --runs N --replays 2
   --json`; each round is played three times, and a replay counts when its schedule, every
   attempt's answer, the rows and the effects equal the first play's. Failing and passing
   rounds are counted apart, with the events that escaped control.
2. Found faster than by luck: on the article's check-first server and on express-idempotency
   over Redis, case 11's burst of 20, the first round with at least 2, at least 10 and all 20
   rows, plain (`real`, the machine's own schedule) and controlled (random walk, PCT of depth 3,
   swarm), rounds from 0.

Nothing here is deterministic on the plain side: the plain column is one run on this machine,
dated by the page.
"""

import argparse
import json
import os
import subprocess
import sys

DETERMINISM = [
    ("check-first-race", "check-first"),
    ("check-first-race", "no-key"),
    ("check-first-race", "transactional"),
    ("check-first-race", "node24-check-first"),
    ("check-first-race", "py-check-first"),
    ("check-first-race", "py-transactional"),
    ("11-twenty-concurrent-one-process", "check-first"),
    ("11-twenty-concurrent-one-process", "node24-check-first"),
    ("11-twenty-concurrent-one-process", "py-check-first"),
    ("11-twenty-concurrent-one-process", "py-transactional"),
    ("12-twenty-concurrent-two-processes", "check-first"),
    ("double-submit", "express-idempotency-redis"),
    ("11-twenty-concurrent-one-process", "express-idempotency-redis"),
    ("double-submit", "node-idempotency-redis"),
    ("11-twenty-concurrent-one-process", "node-idempotency-redis"),
    ("double-submit", "powertools-redis"),
]

# Where luck is measured: the article's check-first server, and express-idempotency over Redis
# (GET, then SET without NX), whose races happen at Redis's replies.
LUCK_TARGETS = ["check-first", "express-idempotency-redis"]

BURST = "11-twenty-concurrent-one-process"


def real(binary, args):
    out = subprocess.run([binary, "real", *args, "--json"], capture_output=True, text=True)
    if out.returncode not in (0, 1):
        return None, out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"
    return json.loads(out.stdout), None


def determinism(binary, rounds, cells=None):
    print("| sim | target | rounds failing · passing | replays reproduced: failing · passing | escaped events (rounds) | slowest release → next event |")
    print("|---|---|---|---|---|---|")
    for sim, target in cells or DETERMINISM:
        r, err = real(binary, [sim, "--target", target, "--controlled", "--runs", str(rounds), "--replays", "2"])
        if r is None:
            print(f"| {sim} | {target} | refused: {err} | | | |")
            continue
        fail = [x for x in r["rounds"] if x["violations"]]
        ok = [x for x in r["rounds"] if not x["violations"]]

        def share(xs):
            n = sum(x["control"]["replays"] for x in xs)
            k = sum(x["control"]["reproduced"] for x in xs)
            return f"{k}/{n}" if n else "–"

        escaped = sum(len(x["control"]["escaped"]) for x in r["rounds"])
        escaping = sum(1 for x in r["rounds"] if x["control"]["escaped"])
        slowest = max(x["control"]["slowest_ms"] for x in r["rounds"])
        print(f"| {sim} | {target} | {len(fail)} · {len(ok)} | {share(fail)} · {share(ok)} | {escaped} ({escaping}) | {slowest:.1f} ms |")
        sys.stdout.flush()


def first_round(report, rows):
    for x in report["rounds"]:
        if x["rows"] >= rows:
            return x["round"]
    return None


def luck(binary, target, plain_rounds, controlled_rounds):
    print(f"Target `{target}`, sim `{BURST}`.\n")
    print("| how | rounds played | first round with ≥ 2 rows | rounds with ≥ 2 rows | first round with ≥ 10 rows | rounds with ≥ 10 rows | first round with 20 rows | rounds with 20 rows |")
    print("|---|---|---|---|---|---|---|---|")
    runs = [
        ("plain `real` (this machine's schedule)", [BURST, "--target", target, "--runs", str(plain_rounds)]),
        ("`--controlled` (random walk)", [BURST, "--target", target, "--controlled", "--runs", str(controlled_rounds)]),
        ("`--controlled --explore pct:d=3`", [BURST, "--target", target, "--controlled", "--explore", "pct:d=3", "--runs", str(controlled_rounds)]),
        ("`--controlled --explore swarm`", [BURST, "--target", target, "--controlled", "--explore", "swarm", "--runs", str(controlled_rounds)]),
    ]
    for name, args in runs:
        r, err = real(binary, args)
        if r is None:
            print(f"| {name} | refused: {err} | | | | | | |")
            continue
        n = len(r["rounds"])
        show = lambda v: "none" if v is None else str(v)
        cells = []
        for rows in (2, 10, 20):
            k = sum(1 for x in r["rounds"] if x["rows"] >= rows)
            cells += [show(first_round(r, rows)), f"{k}/{n}"]
        print(f"| {name} | {n} | " + " | ".join(cells) + " |")
        sys.stdout.flush()
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="target/release/idemsim")
    ap.add_argument("--rounds", type=int, default=40, help="controlled rounds per cell")
    ap.add_argument("--plain", type=int, default=300, help="plain rounds of the burst")
    ap.add_argument("--part", choices=["all", "determinism", "luck"], default="all")
    ap.add_argument("--cells", help="determinism cells to measure, SIM:TARGET,... (default: all)")
    ap.add_argument("--luck-targets", help="targets for the luck part, T,... (default: all)")
    a = ap.parse_args()
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    print(f"<!-- python3 tools/controlled.py --rounds {a.rounds} --plain {a.plain} -->\n")
    if a.part in ("all", "determinism"):
        cells = [tuple(c.split(":", 1)) for c in a.cells.split(",")] if a.cells else None
        determinism(a.bin, a.rounds, cells)
        print()
    if a.part in ("all", "luck"):
        for t in a.luck_targets.split(",") if a.luck_targets else LUCK_TARGETS:
            luck(a.bin, t, a.plain, a.rounds)


if __name__ == "__main__":
    main()
