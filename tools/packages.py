#!/usr/bin/env python3
"""docs/packages.md and README's table: idempotency packages people install, real and simulated.

    python3 tools/packages.py             # `idemsim validate --json` for every cell below (the
                                          # targets of targets/README.md: npm ci --prefix
                                          # targets/node, bash targets/powertools/install.sh,
                                          # redis-server), saved in docs/packages/, then the pages
    python3 tools/packages.py --cells express-idempotency-redis
    python3 tools/packages.py --render    # the pages from the saved results
    python3 tools/packages.py --check     # the pages are what the saved results say

Real runs are not deterministic: the saved JSON is the measurement (with the machine's load and
the package versions), and --check verifies only that the pages render it.
"""
import json, os, re, subprocess, sys

from cellopts import options

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "docs", "packages")
PAGE = os.path.join(ROOT, "docs", "packages.md")
README = os.path.join(ROOT, "README.md")
BIN = os.environ.get("IDEMSIM_BIN", os.path.join(ROOT, "target", "release", "idemsim"))

TARGETS = ["express-idempotency-memory", "express-idempotency-redis", "node-idempotency-memory",
           "node-idempotency-redis", "powertools-redis"]
# (situation, sim, rounds, warm-up requests)
SITUATIONS = [
    ("double click", "double-submit", 40, 5),
    ("double click", "double-submit", 40, 0),
    ("burst of 20", "11-twenty-concurrent-one-process", 40, 5),
    ("burst, two processes", "12-twenty-concurrent-two-processes", 40, 5),
    ("drop + immediate retry", "abandon-first-attempt", 40, 5),
    ("handler throws", "10-failure-before-commit", 10, 0),
    ("crash between steps", "crash-between-steps", 20, 0),
]
CELLS = [(t, s, sim, n, w) for t in TARGETS for (s, sim, n, w) in SITUATIONS]


def path(target, sim, warm):
    return os.path.join(DATA, f"{target}--{sim}{'--warm' if warm else ''}.json")


def run(cells):
    os.makedirs(DATA, exist_ok=True)
    for target, _, sim, n, warm in cells:
        print(f"validate {sim} × {target} ({n} rounds, warm {warm})", file=sys.stderr, flush=True)
        p = subprocess.run([BIN, "validate", sim, "--target", target, "--runs", str(n), "--json",
                            "--warm", str(warm)], cwd=ROOT, capture_output=True, text=True)
        if p.returncode not in (0, 1, 4):
            print(f"  failed (exit {p.returncode}): {p.stderr.strip()[-400:]}", file=sys.stderr)
            continue
        v = json.loads(p.stdout)
        v["machine"] = machine()
        with open(path(target, sim, warm), "w") as f:
            json.dump(v, f, indent=1, sort_keys=True)
            f.write("\n")


def machine():
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except Exception:
        cpu = "unknown CPU"
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    return f"{os.cpu_count()} × {cpu}, Node.js {node}"


from reality import pct, rate_cell as share  # one way of writing a rate, both pages


def answers(rates, status):
    r = next((r for r in rates if r["statistic"] == f"answers {status} (share)"), None)
    if r is None:
        return "— · —"
    return f"{pct(r['sim'][2])} · {pct(r['real'][2])}"


def verdict(v):
    return "**agree**" if v == "agree" else f"**{v}**"


def cells():
    for target, situation, sim, _, warm in CELLS:
        p = path(target, sim, warm)
        if os.path.exists(p):
            yield target, situation, sim, warm, json.load(open(p))


def table():
    out = ["| package target | situation (sim) | processes | runs with a violation: simulated | real | "
           "≥ 2 rows per intent: sim · real | 409 share: sim · real | verdict | parts that disagree |",
           "|---|---|---|---|---|---|---|---|---|"]
    for target, situation, sim, warm, v in cells():
        val = v["validation"]
        rates = val["rates"]
        first = {r["statistic"]: r for r in rates}
        viol, ge2 = first["runs with a violation"], first["intents with ≥ 2 rows"]
        start = f"warm ({warm})" if warm else "cold"
        parts = [r["statistic"] for r in rates + val["histograms"] if r["verdict"] == "disagree"]
        out.append(f"| {target} | {situation} ({sim}) | {start} | {share(viol['sim'])} | "
                   f"{share(viol['real'])} | {ge2['sim'][0]}/{ge2['sim'][1]} · "
                   f"{ge2['real'][0]}/{ge2['real'][1]} | {answers(rates, 409)} | "
                   f"{verdict(val['verdict'])} | {'; '.join(parts) or '—'} |")
    return "\n".join(out)


def page():
    head = open(os.path.join(ROOT, "tools", "packages-head.md")).read().rstrip()
    details = []
    for target, situation, sim, warm, v in cells():
        real = v["real"]
        violations = ", ".join(f"{k} {x['seeds']}" for k, x in sorted(real["cell"]["violations"].items())) or "none"
        sviol = ", ".join(f"{k} {x['seeds']}" for k, x in sorted(v["simulated"]["violations"].items())) or "none"
        details.append(f"- **{target} × {sim}{' (warm)' if warm else ''}**: real violations {violations}; "
                       f"simulated {sviol}; statuses real {real['cell']['statuses']}, simulated "
                       f"{v['simulated']['statuses']}; load {real['load_before'][0]:.1f} → "
                       f"{real['load_after'][0]:.1f} on {v['machine']}")
    tail = os.path.join(ROOT, "tools", "packages-tail.md")
    tail = open(tail).read().rstrip() if os.path.exists(tail) else ""
    return "\n".join([head, "", table(), "", "Per cell (rounds with each violation):", ""] + details
                     + ["", tail]).rstrip() + "\n"


BEGIN, END = "<!-- packages table: tools/packages.py -->", "<!-- end of packages table -->"


def readme(text):
    i, j = text.index(BEGIN), text.index(END)
    return text[:i + len(BEGIN)] + "\n" + table() + "\n" + text[j:]


def main():
    args = options(__doc__)
    if args.check:
        if open(PAGE).read() != page():
            sys.exit("docs/packages.md is not what docs/packages/*.json say: run tools/packages.py --render")
        if open(README).read() != readme(open(README).read()):
            sys.exit("README.md's packages table is not what docs/packages/*.json say: run tools/packages.py --render")
        return
    if not args.render:
        todo = CELLS
        if args.cells is not None:
            want = set(args.cells.split(","))
            todo = [c for c in CELLS if c[0] in want or c[2] in want]
            if not todo:
                sys.exit(f"--cells {args.cells}: no cell has that sim or target")
        run(todo)
    with open(PAGE, "w") as f:
        f.write(page())
    text = open(README).read()
    with open(README, "w") as f:
        f.write(readme(text))


if __name__ == "__main__":
    main()
