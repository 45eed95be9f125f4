#!/usr/bin/env python3
"""Measure controlled real rounds (docs/controlled.md) and print the page's tables.

    python3 tools/controlled.py [--bin target/release/idemsim] [--rounds 40] [--plain 300]
                                [--part all|determinism|luck]

Two measurements, both through the real binary against the shipped targets:

1. Determinism: per target and sim, `real SIM --target T --controlled --runs N --replays 2
   --json`; each round is played three times, and a replay counts when its schedule, every
   attempt's answer, the rows and the effects equal the first play's. Failing and passing
   rounds are counted apart, with the events that escaped control.
2. Found faster than by luck: on the article's check-first server, case 11's burst of 20, the
   first round with at least 2 and at least 10 rows, plain (`real`, the machine's own
   schedule) and controlled (random walk, then PCT of depth 3), rounds from 0.

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
]

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


def luck(binary, plain_rounds, controlled_rounds):
    print("| how | rounds played | first round with ≥ 2 rows | rounds with ≥ 2 rows | first round with ≥ 10 rows | rounds with ≥ 10 rows |")
    print("|---|---|---|---|---|---|")
    runs = [
        ("plain `real` (this machine's schedule)", [BURST, "--target", "check-first", "--runs", str(plain_rounds)]),
        ("`--controlled` (random walk)", [BURST, "--target", "check-first", "--controlled", "--runs", str(controlled_rounds)]),
        ("`--controlled --explore pct:d=3`", [BURST, "--target", "check-first", "--controlled", "--explore", "pct:d=3", "--runs", str(controlled_rounds)]),
    ]
    for name, args in runs:
        r, err = real(binary, args)
        if r is None:
            print(f"| {name} | refused: {err} | | | | |")
            continue
        n = len(r["rounds"])
        two = sum(1 for x in r["rounds"] if x["rows"] >= 2)
        ten = sum(1 for x in r["rounds"] if x["rows"] >= 10)
        show = lambda v: "none" if v is None else str(v)
        print(f"| {name} | {n} | {show(first_round(r, 2))} | {two}/{n} | {show(first_round(r, 10))} | {ten}/{n} |")
        sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="target/release/idemsim")
    ap.add_argument("--rounds", type=int, default=40, help="controlled rounds per cell")
    ap.add_argument("--plain", type=int, default=300, help="plain rounds of the burst")
    ap.add_argument("--part", choices=["all", "determinism", "luck"], default="all")
    ap.add_argument("--cells", help="determinism cells to measure, SIM:TARGET,... (default: all)")
    a = ap.parse_args()
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    print(f"<!-- python3 tools/controlled.py --rounds {a.rounds} --plain {a.plain} -->\n")
    if a.part in ("all", "determinism"):
        cells = [tuple(c.split(":", 1)) for c in a.cells.split(",")] if a.cells else None
        determinism(a.bin, a.rounds, cells)
        print()
    if a.part in ("all", "luck"):
        luck(a.bin, a.plain, a.rounds)


if __name__ == "__main__":
    main()
