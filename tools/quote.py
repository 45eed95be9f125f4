#!/usr/bin/env python3
"""Rates quoted in prose, from the engine as it runs now (tools/gen-docs.py rewrites the block
that calls this, so no rate in a doc's prose is typed by hand):

    python3 tools/quote.py SIM MODEL SEEDS [SIM MODEL SEEDS ...]

prints a Markdown table: per cell, the share of seeds with a violation and its Wilson 95 %
interval, as `idemsim sweep --json` gives them.
"""
import json, os, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("IDEMSIM_BIN", os.path.join(ROOT, "target", "release", "idemsim"))


def main():
    args = sys.argv[1:]
    if not args or len(args) % 3:
        sys.exit("quote.py: expected SIM MODEL SEEDS triplets")
    print("| sim × model | seeds | runs with a violation (95 % CI) |")
    print("|---|---|---|")
    for i in range(0, len(args), 3):
        sim, model, seeds = args[i:i + 3]
        p = subprocess.run([BIN, "sweep", sim, "--model", model, "--seeds", seeds, "--json", "-q"],
                           cwd=ROOT, capture_output=True, text=True)
        if p.returncode not in (0, 1):
            sys.exit(f"quote.py: sweep {sim} --model {model} failed: {p.stderr.strip()[-300:]}")
        d = json.loads(p.stdout)
        r = d["rates"]["violating"]
        lo, hi = r["ci95"]
        print(f"| {sim} × {model} | {seeds} | {d['violating_seeds']}/{d['runs']} "
              f"({100 * r['rate']:.1f} %, {100 * lo:.1f}–{100 * hi:.1f} %) |")


if __name__ == "__main__":
    main()
