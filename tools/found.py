#!/usr/bin/env python3
"""What a model fails, from the sims as they run now: the lines of a model header's generated
`Found` block (tools/gen-docs.py rewrites every `# <!-- gen: ... -->` block of models/*.toml).

    python3 tools/found.py MODEL [SIM-FOLDER ...]   # default: every shipped sim folder

One line per sim where the model has a violation or a failed expectation:
`sim: violation seeds/runs, ...` (a `*` marks a policy-permitted violation), then one line
with the sims it passes. Numbers are never typed into a header by hand: this prints them.
"""
import json, os, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("IDEMSIM_BIN", os.path.join(ROOT, "target", "release", "idemsim"))


def main():
    model, folders = sys.argv[1], sys.argv[2:] or ["sims"]
    p = subprocess.run([BIN, "matrix", "--quiet", "--models", model, "--sims", *folders, "--json"],
                       cwd=ROOT, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        sys.exit(f"found.py: idemsim matrix failed ({p.returncode}): {p.stderr.strip()[-400:]}")
    cells = json.loads(p.stdout)["cells"]
    passes, n_a = [], 0
    for c in sorted(cells, key=lambda c: c["sim"]):
        if c.get("applicable") is False or c.get("passed") is None:
            n_a += 1
            continue
        v = c.get("violations", {})
        parts = [f"{k}{'*' if x.get('permitted') else ''} {x['seeds']}/{c['runs']}"
                 for k, x in sorted(v.items())]
        if c.get("failed_seeds"):
            parts.append(f"expectations failed {c['failed_seeds']}/{c['runs']}")
        if parts:
            print(f"{c['sim']}: {', '.join(parts)}")
        else:
            passes.append(c["sim"])
    print(f"passes {len(passes)} sims" + (f"; {n_a} do not apply" if n_a else "")
          + (": " + ", ".join(passes) if len(passes) <= 12 else ""))


if __name__ == "__main__":
    main()
