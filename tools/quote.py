#!/usr/bin/env python3
"""Rates quoted in prose, from the engine as it runs now (tools/gen-docs.py rewrites the block
or the inline quote that calls this, so no rate in a doc's prose is typed by hand).

A table (a `<!-- gen: -->` block):

    python3 tools/quote.py SIM MODEL SEEDS [SIM MODEL SEEDS ...]

prints a Markdown table: per cell, the share of seeds with a violation and its Wilson 95 %
interval, as `idemsim sweep --json` gives them.

One figure inside a sentence (an inline quote, `<!-- q: ARGS -->…<!-- /q -->`):

    python3 tools/quote.py rate SIM MODEL SEEDS [WHAT]   # k/n: seeds with WHAT
    python3 tools/quote.py pct SIM MODEL SEEDS [WHAT]    # the same as a whole percent, `23 %`
    python3 tools/quote.py cell SIM MODEL SEEDS [WHAT]   # `23% [17–30]`: the share and its interval
    python3 tools/quote.py first SIM MODEL SEEDS WHAT    # runs until WHAT was first seen: `1,543`
    python3 tools/quote.py article MODEL                 # `11/16 (fails 02, 03, 05, 06, 12)`

`rate`, `pct`, `cell` and `first` take `explore=STRATEGY` after their arguments: the sweep
explored with that strategy (docs/hunt.md), runs to first as the explored sweep counts them.

The hunt table (a `<!-- gen: -->` block): per cell, the runs to its first violation under
calibrated draws and each strategy, and the calibrated rate:

    python3 tools/quote.py hunt SEEDS SIM MODEL WHAT [SIM MODEL WHAT ...]

SEEDS is a range `A..B` or `own` (the sim's own range). WHAT is `any` (a violation of any kind, the default), `failed` (an expectation failed), or a
violation's name (`duplicate-row`, `unfinished-intent` …).
"""
import json, math, os, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("IDEMSIM_BIN", os.path.join(ROOT, "target", "release", "idemsim"))


def idemsim(*args):
    p = subprocess.run([BIN, *args, "--json", "-q"], cwd=ROOT, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        sys.exit(f"quote.py: idemsim {' '.join(args)} failed: {p.stderr.strip()[-300:]}")
    return json.loads(p.stdout)


def sweep(sim, model, seeds, explore=None):
    """`seeds` is a range A..B, or `own`: the sim's own range."""
    return idemsim("sweep", sim, "--model", model, *(() if seeds == "own" else ("--seeds", seeds)),
                   *(("--explore", explore) if explore else ()))


def runs_to_first(d, what):
    """Runs until `what` was first seen in the sweep `d` (None: never): an explored sweep counts
    them (`runs_to_first`); a calibrated one ran its seeds in order from the range's start."""
    if what not in d["violations"]:
        return None
    if "runs_to_first" in d:
        return d["runs_to_first"][what]
    return d["violations"][what]["first_seed"] - int(d["seeds"].split("..")[0]) + 1


def hunt(args):
    """The hunt table of docs/hunt.md."""
    if len(args) < 4 or (len(args) - 1) % 3:
        sys.exit("quote.py hunt: expected SEEDS then SIM MODEL WHAT triplets")
    seeds, strategies = args[0], ["edges", "pct", "pct:d=2", "exhaustive", "swarm", "faults"]
    print("| cell | calibrated | " + " | ".join(strategies) + " |")
    print("|---|---" + "|---" * len(strategies) + "|")
    for i in range(1, len(args), 3):
        sim, model, what = args[i:i + 3]
        base = sweep(sim, model, seeds)
        k, n = share(base, what)[0], base["runs"]
        row = [runs_to_first(base, what)] + [runs_to_first(sweep(sim, model, seeds, s), what)
                                             for s in strategies]
        cells = ["not found" if r is None else f"{r:,}" for r in row]
        print(f"| {sim} × {model}, {what} ({k}/{n} calibrated) | " + " | ".join(cells) + " |")


def share(d, what):
    """(seeds, their Wilson 95 % interval) of the sweep `d` that show `what`, as idemsim gives them."""
    if what in ("any", "failed"):
        r = d["rates"]["violating" if what == "any" else "failed"]
        return r["seeds"], r["ci95"]
    if what not in KNOWN:
        sys.exit(f"quote.py: {what!r} is not `any`, `failed` or a violation's name ({', '.join(KNOWN)})")
    v = d["violations"].get(what)
    if v is None:  # not seen: 0 of n, the interval of `failed` at 0 is the same
        return 0, idemsim_zero(d)
    return v["seeds"], v["ci95"]


def idemsim_zero(d):
    """The interval of 0 of the sweep's runs (every zero share of one sweep has the same)."""
    for r in d["rates"].values():
        if r["seeds"] == 0:
            return r["ci95"]
    sys.exit("quote.py: no zero share in the sweep to take 0's interval from")


def inline(mode, args):
    if mode == "article":
        if len(args) != 1:
            sys.exit("quote.py article: expected MODEL")
        cells = idemsim("matrix", "--sims", "sims/article", "--models", args[0])["cells"]
        fails = [c["sim"][:2] for c in cells if not c["passed"]]
        passed = len(cells) - len(fails)
        return f"{passed}/{len(cells)}" + (f" (fails {', '.join(fails)})" if fails else "")
    explore = [a[len("explore="):] for a in args if a.startswith("explore=")]
    args = [a for a in args if not a.startswith("explore=")]
    if len(args) not in (3, 4) or len(explore) > 1:
        sys.exit(f"quote.py {mode}: expected SIM MODEL SEEDS [WHAT] [explore=STRATEGY]")
    d = sweep(*args[:3], *explore)
    what = args[3] if len(args) == 4 else "any"
    (k, (lo, hi)), n = share(d, what), d["runs"]
    if mode == "first":
        r = runs_to_first(d, what)
        return "not found" if r is None else f"{r:,}"
    if mode == "rate":
        return f"{k}/{n}"
    if mode == "pct":
        return f"{math.floor(100 * k / n + 0.5)} %"
    if mode == "cell":
        # as src/render/mod.rs `share_mark` prints it: bounds rounded outward
        lo, hi = math.floor(100 * lo + 1e-9), math.ceil(100 * hi - 1e-9)
        return f"{math.floor(100 * k / n + 0.5)}% [{lo}–{hi}]"
    sys.exit(f"quote.py: unknown mode {mode!r}")


# The violations' names (src/report.rs, `ViolationKind::name`).
KNOWN = ["duplicate-row", "duplicate-effect", "lost-success", "phantom-success", "false-safe-retry",
         "foreign-reply", "scope-leak", "replay-mismatch", "payload-mismatch-executed",
         "lost-effect", "unacknowledged-effect", "stuck-key", "stuck-outbox", "regressed-state",
         "lost-update", "unfinished-intent", "out-of-retries", "expired-duplicate-row",
         "expired-duplicate-effect", "expired-replay-mismatch"]


def main():
    args = sys.argv[1:]
    if args and args[0] == "hunt":
        hunt(args[1:])
        return
    if args and args[0] in ("rate", "pct", "cell", "first", "article"):
        print(inline(args[0], args[1:]))
        return
    if not args or len(args) % 3:
        sys.exit("quote.py: expected SIM MODEL SEEDS triplets, or rate|pct|cell|first|article|hunt …")
    print("| sim × model | seeds | runs with a violation (95 % CI) |")
    print("|---|---|---|")
    for i in range(0, len(args), 3):
        sim, model, seeds = args[i:i + 3]
        d = sweep(sim, model, seeds)
        r = d["rates"]["violating"]
        lo, hi = r["ci95"]
        print(f"| {sim} × {model} | {seeds} | {d['violating_seeds']}/{d['runs']} "
              f"({100 * r['rate']:.1f} %, {100 * lo:.1f}–{100 * hi:.1f} %) |")


if __name__ == "__main__":
    main()
