"""The command line of the real-measurement pages (tools/reality.py, tools/packages.py)."""
import argparse


def options(doc):
    """A run of every cell (the default), of some (--cells), or no run at all (--render,
    --check). An unknown option is refused before anything runs: a real run takes tens of
    minutes and overwrites the saved measurements."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--cells", help="comma-separated sims or targets: run only their cells")
    g.add_argument("--render", action="store_true", help="write the pages from the saved results")
    g.add_argument("--check", action="store_true", help="the pages are what the saved results say")
    return p.parse_args()
