"""The command line of the real-measurement pages (tools/reality.py, tools/packages.py)."""
import argparse


def options(doc, rounds=False):
    """A run of every cell (the default), of some (--cells), or no run at all (--render,
    --check); with `rounds`, --rounds N plays the cells run with N rounds each instead of their
    own. An unknown option is refused before anything runs: a real run takes tens of minutes
    and overwrites the saved measurements."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--cells", help="comma-separated sims or targets: run only their cells")
    g.add_argument("--render", action="store_true", help="write the pages from the saved results")
    g.add_argument("--check", action="store_true", help="the pages are what the saved results say")
    if rounds:
        p.add_argument("--rounds", type=int, metavar="N",
                       help="rounds per cell run (each side), instead of the cell's own")
    a = p.parse_args()
    if rounds and a.rounds is not None and (a.rounds < 10 or a.rounds > 2000 or a.render or a.check):
        p.error("--rounds: expected 10 to 2000, with a run (not --render or --check)")
    return a
