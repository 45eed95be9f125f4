#!/usr/bin/env python3
"""Keep the outputs quoted in the docs true: regenerate or check every generated block.

A generated block in README.md or docs/*.md looks like

    <!-- gen: SHELL COMMAND -->
    ...whatever the command prints...
    <!-- /gen -->

The command runs with bash in the repository root, with `idemsim` on PATH (the release build)
and two helpers: `fence LANG` wraps its input in a fenced code block, `excerpt` appends a
line `...` (for an excerpt of a longer output).

A figure inside a sentence or a table cell is an inline quote, on one line: tools/quote.py's
arguments, and what it prints (one line) between the two comments:

    check-first duplicates on <!-- q: rate double-submit check-first 0..200 -->14/200<!-- /q --> seeds

A model file (models/*.toml) holds such blocks inside comments, every line starting `# `:

    # <!-- gen: python3 tools/found.py check-first -->
    # ...the command's output, each line commented...
    # <!-- /gen -->

    python3 tools/gen-docs.py           # rewrite every block
    python3 tools/gen-docs.py --check   # exit 1 and show a diff if any block is stale

With GEN_DOCS_TIMES=1 each command's wall time goes to stderr (what CI's step spends). Running
the commands two at a time was measured and gains nothing on 2 cores: the slow ones (matrices,
sweeps) already use every core.
"""

import difflib
import os
import pathlib
import re
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"(<!-- gen: (.*?) -->\n)(.*?)(<!-- /gen -->)", re.S)
INLINE = re.compile(r"(<!-- q: ([^\n]*?) -->)([^\n]*?)(<!-- /q -->)")
COMMENTED = re.compile(r"(# <!-- gen: (.*?) -->\n)(.*?)(# <!-- /gen -->)", re.S)
PRELUDE = r"""
set -euo pipefail
# exit 1 means "the run found a failure", which is the point of most examples
idemsim() { local rc=0; "$IDEMSIM_BIN" "$@" || rc=$?; [ "$rc" -le 1 ] || return "$rc"; }
fence() { echo '```'"${1:-}"; cat; echo '```'; }
excerpt() { cat; echo '...'; }
"""


CACHE: dict = {}


def run(command: str) -> str:
    if command in CACHE:
        return CACHE[command]
    # Replay commands as a reader of the docs runs them, in a checkout.
    env = dict(os.environ, IDEMSIM_BIN=str(ROOT / "target" / "release" / "idemsim"),
               IDEMSIM_INVOKED="cargo run --release --")
    env.pop("RUSTFLAGS", None)
    began = time.monotonic()
    out = subprocess.run(
        ["bash", "-c", PRELUDE + command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    # any other failure (a grep that stopped matching, a crash) must not become an empty block
    if out.returncode != 0 or not out.stdout.strip():
        sys.exit(f"gen-docs: `{command}` failed ({out.returncode}):\n{out.stderr}")
    CACHE[command] = out.stdout
    if os.environ.get("GEN_DOCS_TIMES"):
        print(f"{time.monotonic() - began:7.2f} s  {command[:120]}", file=sys.stderr)
    return out.stdout


def quote(m: re.Match) -> str:
    """An inline quote: tools/quote.py's one line between the comments."""
    out = run("python3 tools/quote.py " + m.group(2)).strip()
    if "\n" in out:
        sys.exit(f"gen-docs: inline quote `{m.group(2)}` printed more than one line")
    return m.group(1) + out + m.group(4)


def main() -> int:
    check = "--check" in sys.argv[1:]
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    models = sorted((ROOT / "models").glob("*.toml"))
    stale = 0
    for path in files + models:
        text = path.read_text()

        def render(m: re.Match) -> str:
            return m.group(1) + run(m.group(2)) + m.group(4)

        def render_commented(m: re.Match) -> str:
            lines = run(m.group(2)).splitlines()
            return m.group(1) + "".join(f"# {l}\n" for l in lines) + m.group(4)

        new = COMMENTED.sub(render_commented, text) if path in models else BLOCK.sub(render, text)
        new = INLINE.sub(quote, new)
        if new == text:
            continue
        if check:
            stale += 1
            rel = path.relative_to(ROOT)
            sys.stdout.writelines(
                difflib.unified_diff(
                    text.splitlines(True), new.splitlines(True), f"{rel} (as committed)", f"{rel} (as generated)"
                )
            )
        else:
            path.write_text(new)
            print(f"gen-docs: rewrote {path.relative_to(ROOT)}")
    if stale:
        print(f"\ngen-docs: {stale} file(s) quote outputs that are no longer true; run python3 tools/gen-docs.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
