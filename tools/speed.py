#!/usr/bin/env python3
"""docs/speed/measurements.json: what a run costs against its floor (issue 27), measured on this
machine, and README's Speed tables rendered from it.

    python3 tools/speed.py              # measure (about 5–8 minutes on a 2-core machine),
                                        # write docs/speed/measurements.json
    python3 tools/speed.py --quick      # the same end to end in about a minute (noisy; marked quick)
    python3 tools/speed.py --max-seeds 10000000   # peak memory up to 10^7 seeds (default 10^6)
    python3 tools/speed.py --node-root DIR        # the Node.js suite from another checkout
    python3 tools/speed.py --render     # print README's Speed tables from the saved JSON (no run;
                                        # tools/gen-docs.py runs this for the README block)

Measured: criterion's median of `cargo bench --bench runs` (whole runs, the 1,000-seed sweep, the
floor pieces); `--jobs 2` ÷ `--jobs 1` of the release binary's `sweep --json` speed, interleaved,
median of 3; the peak resident memory (ru_maxrss) of `sweep --jobs 2`; allocations per run from
`cargo bench --bench alloc -- --json`; instructions per piece and per whole run, counted by
valgrind (examples/floor.rs; skipped without valgrind); the article's Node.js suite (tools/node-suite/, if present)
against idemsim's reference experiment. Python 3.11 standard library only.
"""
import json, os, statistics, subprocess, sys, time
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAVED = os.path.join(ROOT, "docs", "speed", "measurements.json")
BIN = os.path.join(ROOT, "target", "release", "idemsim")
RACE = "sims/teaching/check-first-race.toml"
CASE_11 = "11-twenty-concurrent-one-process"
FILTER = "piece/|race/|case-11/transactional|sweep/"
SWEEP = "sweep/race-transactional-1000-seeds"

# The floor of a run: its pieces and how many of each it does (README "Speed"). A race run is
# 2 requests and 2 replies (4 messages) and 8 statements; a case-11 run 20 requests, 20 replies
# and 62 statements (5 for the request that creates, 3 for each of the 19 that replay).
# Each piece's criterion bench and the examples/floor piece whose instructions stand for it
# (None: the reset, which examples/floor counts inside `sql-*`, the run it precedes).
FLOOR = [  # (bench, examples/floor piece, count in a race run, count in a case-11 run)
    ("piece/sql-of-a-race-run-transactional", "sql-race", 1, 0),
    ("piece/sql-of-a-case-11-run-transactional", "sql-case-11", 0, 1),
    ("piece/database-reset-rollback", None, 1, 1),
    ("piece/runtime-setup", "runtime", 1, 1),
    ("piece/message", "message", 4, 40),
    ("piece/statement-wait", "wait", 8, 62),
]
# The floor composed into one run (bench::composed_floor): the same pieces, as many of each, in a
# run's order on one runtime with nothing added. Beside the floor, not in it: what a run with
# nothing above its floor costs, the pieces sharing the caches as they do in a run.
COMPOSED = {"race": "piece/floor-composed-race", "case-11": "piece/floor-composed-case-11"}
# Measured beside the floor, not in it.
YARDSTICKS = [
    "piece/sql-of-a-race-run-transactional-memdb",
    "piece/sql-of-a-case-11-run-transactional-memdb",
    "piece/database-reset-wal",
    "piece/statement-key-lookup",
]
RUNS = [  # (bench id, row label, floor it is divided by, target ratio)
    ("race/no-key", "race (`check-first-race`), no-key", "race", 1.25),
    ("race/check-first", "race, check-first", "race", 1.25),
    ("race/transactional", "race, transactional", "race", 1.25),
    ("case-11/transactional", "case 11, transactional", "case-11", 1.25),
    (SWEEP, "a 1,000-seed sweep of the race, transactional, per run", "race", 1.35),
]


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def sh(*cmd, **kw):
    return subprocess.run(cmd, cwd=kw.pop("cwd", ROOT), check=True, text=True, **kw)


# ---- measuring ----

def criterion(quick):
    """Each bench's median (ns) and its 95 % interval, from criterion's estimates.json."""
    # No HTML report (its plots take longer than the measuring on a small machine).
    extra = ["--noplot"]
    if quick:
        extra += ["--warm-up-time", "0.5", "--measurement-time", "1", "--nresamples", "10000"]
    start = time.time()
    sh("cargo", "bench", "--locked", "--bench", "runs", "--", FILTER, *extra,
       stdout=sys.stderr)
    out = {}
    for bench in [f for f, _, _, _ in FLOOR] + YARDSTICKS + list(COMPOSED.values()) + [r[0] for r in RUNS]:
        p = os.path.join(ROOT, "target", "criterion", *bench.split("/"), "new", "estimates.json")
        if not os.path.exists(p) or os.path.getmtime(p) < start:
            sys.exit(f"speed: criterion wrote no fresh estimate for {bench} ({p})")
        m = json.load(open(p))["median"]
        ci = m["confidence_interval"]
        out[bench] = {"median_ns": m["point_estimate"],
                      "ci95_ns": [ci["lower_bound"], ci["upper_bound"]]}
    return out


def floors(est):
    f = {"race": 0.0, "case-11": 0.0}
    for piece, _, race, case in FLOOR:
        f["race"] += race * est[piece]["median_ns"]
        f["case-11"] += case * est[piece]["median_ns"]
    return f


def sweep_speed(sim, seeds, jobs):
    out = sh(BIN, "sweep", sim, "--model", "transactional", "--seeds", f"0..{seeds}",
             "--jobs", str(jobs), "--json", "--quiet", stdout=subprocess.PIPE).stdout
    return json.loads(out)["speed"]["runs_per_s"]


def two_processes(sim, seeds):
    """The runs/s of two `--jobs 1` sweeps run at once as separate processes, added: what two
    cores of this machine give two workers that share nothing (the ceiling of `--jobs 2`)."""
    cmd = [BIN, "sweep", sim, "--model", "transactional", "--seeds", f"0..{seeds}", "--jobs", "1",
           "--json", "--quiet"]
    ps = [subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    return sum(json.loads(p.communicate()[0])["speed"]["runs_per_s"] for p in ps)


def jobs_ratio(quick):
    """`--jobs 2` ÷ `--jobs 1`, runs/s, each sim's sweeps interleaved (1, 2, 1, 2, …), beside
    two independent `--jobs 1` processes ÷ one: a VM's two vCPUs may not be two whole cores."""
    out = {}
    for name, sim, seeds in [("race", RACE, 10_000 if quick else 100_000),
                             ("case-11", CASE_11, 2_000 if quick else 20_000)]:
        one, two, apart = [], [], []
        for _ in range(3):
            one.append(sweep_speed(sim, seeds, 1))
            two.append(sweep_speed(sim, seeds, 2))
            apart.append(two_processes(sim, seeds))
        m1, m2, ma = (statistics.median(x) for x in (one, two, apart))
        out[name] = {"seeds": seeds, "jobs_1_runs_per_s": one, "jobs_2_runs_per_s": two,
                     "two_processes_runs_per_s": apart, "ratio_of_medians": round(m2 / m1, 3),
                     "two_processes_ratio": round(ma / m1, 3)}
        log(f"  jobs 2 ÷ jobs 1, {name}: {m2 / m1:.2f} (two separate processes ÷ one: {ma / m1:.2f})")
    return out


def peak_memory(sizes):
    """Peak resident set (ru_maxrss) of `sweep --jobs 2` of the race, per seed count."""
    out = []
    for n in sizes:
        t = time.time()
        p = subprocess.Popen([BIN, "sweep", RACE, "--model", "transactional", "--seeds", f"0..{n}",
                              "--jobs", "2", "--json", "--quiet"], cwd=ROOT,
                             stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode not in (0, 1):
            sys.exit(f"speed: sweep of {n} seeds exited {p.returncode}")
        out.append({"seeds": n, "max_rss_kib": usage.ru_maxrss, "wall_s": round(time.time() - t, 2)})
        log(f"  {n} seeds: {usage.ru_maxrss / 1024:.1f} MiB")
    return out


def interleaved(quick):
    """`cargo bench --bench ratio`, three times: whole run, floor composed and the floor's
    pieces timed in interleaved rounds, ratios taken within each round (medians, 95 %)."""
    rounds = "15" if quick else "61"
    out = []
    for _ in range(3):
        o = sh("cargo", "bench", "--locked", "--bench", "ratio", "--", "--json", "--rounds", rounds,
               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
        out.append(json.loads(next(l for l in o.splitlines() if l.startswith("{"))))
    return out


def allocations(quick):
    extra = ["--seeds", "200", "--warm-up", "20"] if quick else []
    out = sh("cargo", "bench", "--locked", "--bench", "alloc", "--", "--json", *extra,
             stdout=subprocess.PIPE).stdout
    return [json.loads(l) for l in out.splitlines() if l.startswith("{")]


FLOOR_BIN = os.path.join(ROOT, "target", "release", "examples", "floor")
# (piece of examples/floor, iterations N; counted at N and 2N). `sql-*` include the reset
# before each run, so the floor is sql-* + runtime + messages + waits (FLOOR's counts).
INSTR_PIECES = [("sql-race", 400), ("sql-case-11", 100), ("reset", 400), ("runtime", 400),
                ("message", 2000), ("wait", 2000), ("composed-race", 400),
                ("composed-case-11", 100), ("race/no-key", 200),
                ("race/check-first", 200), ("race/transactional", 200),
                ("case-11/transactional", 50)]
INSTR_FLOOR = {"race": [(p, n) for _, p, n, _ in FLOOR if p and n],
               "case-11": [(p, n) for _, p, _, n in FLOOR if p and n]}


# Where an instruction runs: C and assembly by their file (SQLite, the allocator, libc's
# memcpy and friends); Rust by the function valgrind names for it, which is the function code
# was inlined into (a madsim helper inlined into an idemsim handler counts as idemsim's).
BY_FILE = [("SQLite", "sqlite3.c"), ("allocator (mimalloc)", "mimalloc"),
           ("memcpy, memset, memcmp", "memmove"), ("memcpy, memset, memcmp", "memset"),
           ("memcpy, memset, memcmp", "memcmp"), ("memcpy, memset, memcmp", "memcpy")]
BY_FUNCTION = [("rusqlite", ("rusqlite::", "hashlink::")),
               ("idemsim's VFS", ("idemsim::world::vfs::",)),
               ("executor and timers (madsim, async-task, naive-timer, tracing)",
                ("madsim::", "async_task::", "naive_timer::", "tracing::")),
               ("idemsim's own code", ("idemsim::", "floor::"))]
OTHER = "other (Rust's std and core, libc)"
COMPONENTS = list(dict.fromkeys([c for c, _ in BY_FILE] + [c for c, _ in BY_FUNCTION] + [OTHER]))


def component(path, function):
    for c, key in BY_FILE:
        if key in path:
            return c
    # The first crate named in the symbol: `<madsim::X as core::Y>::poll` is madsim's.
    first = min(((function.find(k), c) for c, keys in BY_FUNCTION for k in keys
                 if function.find(k) >= 0), default=(0, OTHER))
    return first[1]


def instructions_of(cmd):
    """Instructions a command executes (valgrind's cachegrind, no cache simulation), in all
    and by component."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        r = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no",
                            f"--cachegrind-out-file={out}", *cmd],
                           cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if r.returncode not in (0, 1):
            sys.exit(f"speed: {' '.join(cmd)} under valgrind exited {r.returncode}")
        parts, fl, where = {}, "", OTHER
        with open(out) as f:
            for line in f:
                if line.startswith("fl="):
                    fl = line[3:].strip()
                elif line.startswith("fn="):
                    where = component(fl, line[3:].strip())
                elif line[:1].isdigit():
                    parts[where] = parts.get(where, 0) + int(line.split()[1])
    return parts


def per_iteration(cmd_of, n):
    """Instructions of one iteration, by component: (count at 2n − count at n) ÷ n."""
    a, b = instructions_of(cmd_of(n)), instructions_of(cmd_of(2 * n))
    return {c: (b.get(c, 0) - a.get(c, 0)) / n for c in set(a) | set(b)}


def instructions():
    """Instructions per piece and per whole run, and the ratio of a whole run to its floor:
    the same pieces as criterion's, counted rather than timed (load does not move them); and
    by component, the race's whole run beside its floor."""
    if subprocess.run(["valgrind", "--version"], capture_output=True).returncode != 0:
        return {"measured": False, "note": "valgrind absent: not counted"}
    sh("cargo", "build", "--locked", "--release", "--example", "floor", stderr=subprocess.DEVNULL)
    parts = {}
    for piece, n in INSTR_PIECES:
        parts[piece] = per_iteration(lambda k: [FLOOR_BIN, piece, str(k)], n)
        log(f"  {piece}: {sum(parts[piece].values()) / 1000:.1f}k instructions")
    parts["sweep"] = per_iteration(lambda k: [BIN, "sweep", RACE, "--model", "transactional",
                                              "--seeds", f"0..{k}", "--jobs", "1", "--quiet"], 400)
    per = {k: sum(v.values()) for k, v in parts.items()}
    log(f"  sweep of the race, per run: {per['sweep'] / 1000:.1f}k instructions")
    floor = {g: sum(c * per[p] for p, c in ps) for g, ps in INSTR_FLOOR.items()}
    whole = {"race/no-key": "race", "race/check-first": "race", "race/transactional": "race",
             "case-11/transactional": "case-11", "sweep": "race", "composed-race": "race",
             "composed-case-11": "case-11"}
    by_component = {c: {"floor": round(sum(k * parts[p].get(c, 0) for p, k in INSTR_FLOOR["race"])),
                        "whole": round(parts["race/transactional"].get(c, 0))} for c in COMPONENTS}
    return {"measured": True, "tool": "valgrind --tool=cachegrind --cache-sim=no",
            "per_iteration": {k: round(v) for k, v in per.items()},
            "floor": {k: round(v) for k, v in floor.items()},
            "ratios": {k: round(per[k] / floor[g], 3) for k, g in whole.items()},
            "race_transactional_by_component": by_component}


# The race's floor pieces, its floor composed and its whole run, with cachegrind's cache model
# (this machine's cache sizes): the misses a run pays that the pieces, each alone in a loop,
# do not.
CACHE_PIECES = [("sql-race", 400), ("runtime", 400), ("message", 2000), ("wait", 2000),
                ("composed-race", 400), ("race/transactional", 200)]
CACHE_EVENTS = ["Ir", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw"]


def cache_summary(cmd):
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes",
                        f"--cachegrind-out-file={out}", *cmd], cwd=ROOT,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        lines = open(out).read().splitlines()
    events = next(l for l in lines if l.startswith("events:")).split()[1:]
    counts = [int(x) for x in next(l for l in lines if l.startswith("summary:")).split()[1:]]
    return dict(zip(events, counts))


def cache_misses():
    """Per iteration: instructions and cache misses (cachegrind's model) of the race's floor
    pieces, summed as the floor sums them, of the floor composed into one run, and of a whole
    run. A time ratio above the instruction ratio is these misses."""
    if subprocess.run(["valgrind", "--version"], capture_output=True).returncode != 0:
        return {"measured": False, "note": "valgrind absent: not counted"}
    per = {}
    for piece, n in CACHE_PIECES:
        a, b = (cache_summary([FLOOR_BIN, piece, str(k)]) for k in (n, 2 * n))
        per[piece] = {e: round((b[e] - a[e]) / n) for e in CACHE_EVENTS}
        log(f"  {piece}: {per[piece]['Ir'] / 1000:.1f}k instructions, {per[piece]['I1mr']} I1 misses")
    floor = {e: sum(c * per[p][e] for p, c in INSTR_FLOOR["race"]) for e in CACHE_EVENTS}
    return {"measured": True, "tool": "valgrind --tool=cachegrind --cache-sim=yes",
            "floor": floor, "composed": per["composed-race"], "whole": per["race/transactional"]}


def timed(cmd, cwd):
    t = time.perf_counter()
    rc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    return round(time.perf_counter() - t, 3), rc


ARTICLE = ["matrix", "--models", "no-key,check-first,transactional", "--jobs", "1", "--quiet"]


def node_suite(node_root):
    """The article's Node.js suite's wall time beside idemsim's for the same 16 cases × 3
    variants on one thread (median of 3): over each sim's own seed range (the article's table;
    `idemsim` with no arguments runs every model, not only these three), and one seed per cell
    (as the suite runs each test once)."""
    suite = os.path.join(node_root, "tools", "node-suite")
    if not os.path.isdir(suite):
        return {"measured": False, "note": "tools/node-suite/ absent: not measured"}
    if not os.path.isdir(os.path.join(node_root, "targets", "node", "node_modules")):
        return {"measured": False,
                "note": "targets/node/node_modules absent (npm ci --prefix targets/node): not measured"}
    node_s, rc = timed(["node", "--test", "tools/node-suite/"], node_root)
    own = statistics.median(timed([BIN, *ARTICLE], ROOT)[0] for _ in range(3))
    one = statistics.median(timed([BIN, *ARTICLE, "--seeds", "0..1"], ROOT)[0] for _ in range(3))
    version = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    return {"measured": True, "command": "node --test tools/node-suite/", "exit": rc,
            "node": version, "node_wall_s": node_s, "idemsim_command": "idemsim " + " ".join(ARTICLE),
            "idemsim_own_seeds_wall_s": own, "idemsim_one_seed_per_cell_wall_s": one,
            "ratio_to_own_seeds": round(node_s / own, 1),
            "ratio_to_one_seed_per_cell": round(node_s / one, 1)}


def machine():
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "unknown CPU")
    git = lambda *a: subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    return {"cpu": cpu, "cores": os.cpu_count(), "commit": git("rev-parse", "HEAD"),
            # what the measured build is made of differs from the commit (docs do not count)
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no", "--", "src",
                              "benches", "Cargo.toml", "Cargo.lock", "build.rs", "models", "sims")),
            "rustc": rustc, "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "load_before": [round(x, 2) for x in os.getloadavg()]}


def measure(args):
    quick = args.quick
    max_seeds = args.max_seeds or (100_000 if quick else 1_000_000)
    node_root = os.path.abspath(args.node_root) if args.node_root else ROOT
    t0 = time.time()
    m = {"quick": quick, "machine": machine()}
    if not args.no_build:
        log("build (release binary and both benches; not timed)")
        sh("cargo", "build", "--locked", "--release")
        sh("cargo", "bench", "--locked", "--bench", "runs", "--bench", "alloc", "--bench", "ratio", "--no-run",
           stderr=subprocess.DEVNULL)
    t0 = time.time()
    log(f"criterion: cargo bench --bench runs -- '{FILTER}'")
    est = criterion(quick)
    m["criterion"] = est
    fl = floors(est)
    m["floor_ns"] = fl
    m["ratios"] = {bench: round(est[bench]["median_ns"] / (1000 if bench == SWEEP else 1) / fl[f], 3)
                   for bench, _, f, _ in RUNS}
    log("instructions: examples/floor and sweep under valgrind")
    m["instructions"] = instructions()
    m["composed_ratio"] = {g: round(est[b]["median_ns"] / fl[g], 3) for g, b in COMPOSED.items()}
    log("interleaved rounds: cargo bench --bench ratio -- --json (three times)")
    m["interleaved"] = interleaved(quick)
    log("cache misses: the race's floor, composed and whole, under cachegrind's cache model")
    m["cache"] = cache_misses()
    log("--jobs 2 ÷ --jobs 1")
    m["jobs"] = jobs_ratio(quick)
    sizes = [10 ** k for k in range(4 if quick else 5, 12) if 10 ** k <= max_seeds]
    log(f"peak memory, race, --jobs 2: {sizes} seeds")
    m["memory"] = {"sim": RACE, "model": "transactional", "jobs": 2, "sizes": peak_memory(sizes)}
    log("allocations: cargo bench --bench alloc -- --json")
    m["allocations"] = allocations(quick)
    log("Node.js suite")
    m["node_suite"] = node_suite(node_root)
    m["machine"]["load_after"] = [round(x, 2) for x in os.getloadavg()]
    m["measure_wall_s"] = round(time.time() - t0, 1)
    os.makedirs(os.path.dirname(SAVED), exist_ok=True)
    with open(SAVED, "w") as f:
        json.dump(m, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")
    log(f"wrote {os.path.relpath(SAVED, ROOT)} ({m['measure_wall_s']} s measuring); "
        "now python3 tools/gen-docs.py")


# ---- rendering (README "Speed": `<!-- gen: python3 tools/speed.py --render -->`) ----

def us(ns):
    x = ns / 1000
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


def runs_table(m):
    est, fl = m["criterion"], m["floor_ns"]
    out = ["| run (release, one thread) | whole run µs | floor µs | ratio | floor composed into one run µs (÷ floor) | whole ÷ composed | target |",
           "|---|---|---|---|---|---|---|"]
    for bench, label, f, target in RUNS:
        whole = est[bench]["median_ns"] / (1000 if bench == SWEEP else 1)
        own = bench in ("race/transactional", "case-11/transactional", SWEEP)
        floor = us(fl[f]) if own else f"({us(fl[f])})"
        comp = est[COMPOSED[f]]["median_ns"]
        composed = f"{us(comp)} ({m['composed_ratio'][f]:.2f}×)" if own else f"({us(comp)})"
        out.append(f"| {label} | {us(whole)} | {floor} | {m['ratios'][bench]:.2f}× | {composed} "
                   f"| {whole / comp:.2f}× | ≤ {target}× |")
    return out


def pieces_table(m):
    est, fl = m["criterion"], m["floor_ns"]
    out = ["| piece (`cargo bench --bench runs -- piece/`) | µs (95 % interval) | race, transactional | case 11, transactional |",
           "|---|---|---|---|"]
    for piece, _, race, case in FLOOR:
        e = est[piece]
        lo, hi = e["ci95_ns"]
        cell = lambda n: "" if n == 0 else (us(n * e["median_ns"]) if n == 1 else f"× {n} = {us(n * e['median_ns'])}")
        out.append(f"| `{piece.split('/', 1)[1]}` | {us(e['median_ns'])} ({us(lo)}–{us(hi)}) | {cell(race)} | {cell(case)} |")
    out.append(f"| **floor: the pieces alone** | | **{us(fl['race'])}** | **{us(fl['case-11'])}** |")
    for y in YARDSTICKS:
        out.append(f"| `{y.split('/', 1)[1]}` (beside the floor, not in it) | {us(est[y]['median_ns'])} | | |")
    return out


def times(x):
    return f"{x:.1f}×" if x < 10 else f"{x:,.0f}×"


def others_table(m):
    j, mem, node = m["jobs"], m["memory"], m["node_suite"]
    out = ["| what | measured | target |", "|---|---|---|"]
    for name, label in [("race", "race"), ("case-11", "case 11")]:
        r = j[name]
        one, two = statistics.median(r["jobs_1_runs_per_s"]), statistics.median(r["jobs_2_runs_per_s"])
        out.append(f"| `--jobs 2` ÷ `--jobs 1`, {label}, transactional ({r['seeds']:,} seeds, median of 3) | "
                   f"{r['ratio_of_medians']:.2f} ({one:,.0f} → {two:,.0f} runs/s) | ≥ 1.95 |")
        if "two_processes_ratio" in r:
            apart = statistics.median(r["two_processes_runs_per_s"])
            out.append(f"| the same, two separate `--jobs 1` processes at once ÷ one: what this "
                       f"machine's two cores give work that shares nothing | "
                       f"{r['two_processes_ratio']:.2f} ({apart:,.0f} runs/s) | |")
    sizes = mem["sizes"]
    counts = " · ".join(f"10^{len(str(s['seeds'])) - 1}" for s in sizes)
    peaks = " · ".join(f"{s['max_rss_kib'] / 1024:.1f}" for s in sizes)
    out.append(f"| peak memory (max RSS), race, transactional, `--jobs 2`: {counts} seeds | {peaks} MiB | flat |")
    if node["measured"]:
        out.append(f"| the article's Node.js suite (`{node['command']}`, 16 cases × 3 variants, "
                   f"{node['node_wall_s']:.1f} s) ÷ idemsim on one thread, the same cells "
                   f"(`{node['idemsim_command']}`): each sim's own seeds "
                   f"({node['idemsim_own_seeds_wall_s']:.2f} s) · one seed per cell "
                   f"({node['idemsim_one_seed_per_cell_wall_s']:.3f} s) | "
                   f"{times(node['ratio_to_own_seeds'])} · {times(node['ratio_to_one_seed_per_cell'])} | |")
    else:
        out.append(f"| the article's Node.js suite ÷ idemsim | {node['note']} | |")
    return out


def instr_table(m):
    i = m.get("instructions")
    if not i or not i["measured"]:
        return ["Instructions per run: " + (i["note"] if i else "not counted in this measurement") + "."]
    per, fl, r = i["per_iteration"], i["floor"], i["ratios"]
    k = lambda n: f"{n / 1000:,.1f}k"
    out = ["| instructions (`examples/floor` under valgrind; load does not move them) | whole run | floor | ratio |",
           "|---|---|---|---|"]
    for name, label, g in [("race/no-key", "race, no-key", "race"),
                           ("race/check-first", "race, check-first", "race"),
                           ("race/transactional", "race, transactional", "race"),
                           ("case-11/transactional", "case 11, transactional", "case-11"),
                           ("sweep", "a sweep of the race, transactional, per run", "race"),
                           ("composed-race", "the race's floor composed into one run", "race"),
                           ("composed-case-11", "case 11's floor composed into one run", "case-11")]:
        out.append(f"| {label} | {k(per[name])} | {k(fl[g])} | {r[name]:.2f}× |")
    parts = " + ".join(f"{c} × `{p}` ({k(per[p])})" if c > 1 else f"`{p}` ({k(per[p])})"
                       for p, c in INSTR_FLOOR["race"])
    out += ["", f"The race's floor in instructions is {parts}; `sql-race` includes the database "
            f"reset before it (`reset` alone: {k(per['reset'])}). Each count is (count of 2N "
            "iterations − count of N) ÷ N, so a process's start drops out."]
    comp = i.get("race_transactional_by_component")
    if comp:
        out += ["", "| race, transactional, by where the instructions run | floor | whole run | above the floor |",
                "|---|---|---|---|"]
        for c, v in sorted(comp.items(), key=lambda cv: cv[1]["floor"] - cv[1]["whole"]):
            out.append(f"| {c} | {k(v['floor'])} | {k(v['whole'])} | {k(v['whole'] - v['floor'])} |")
        tf, tw = (sum(v[x] for v in comp.values()) for x in ("floor", "whole"))
        out.append(f"| **all** | **{k(tf)}** | **{k(tw)}** | **{k(tw - tf)}** |")
    return out


def interleaved_table(m):
    runs = m.get("interleaved")
    if not runs:
        return ["Interleaved rounds: not measured in this measurement."]
    x = lambda t: f"{t[0]:.2f}× ({t[1]:.2f}–{t[2]:.2f})"
    out = [f"| interleaved rounds (`cargo bench --bench ratio`, {runs[0]['rounds']} rounds, three runs) "
           "| floor composed ÷ floor | whole ÷ floor | whole ÷ floor composed |", "|---|---|---|---|"]
    for g, label in [("race", "race, transactional"), ("case-11", "case 11, transactional")]:
        cols = [" · ".join(x(r[g][k]) for r in runs)
                for k in ("composed_over_floor", "whole_over_floor", "whole_over_composed")]
        out.append(f"| {label} | " + " | ".join(cols) + " |")
    out += ["", "Each round times every item once, back to back (about 15 ms each), and the ratios "
            "are taken within the round, so the machine's drift over minutes, which moves "
            "criterion's medians by tens of percent between benches, cancels; each cell is the "
            "median of the rounds' ratios with its 95 % interval, for each of the three runs."]
    return out


def cache_table(m):
    c = m.get("cache")
    if not c or not c["measured"]:
        return ["Cache misses: " + (c["note"] if c else "not counted in this measurement") + "."]
    k = lambda n: f"{n / 1000:,.1f}k" if n >= 10000 else f"{n:,}"
    rows = [("the floor: its pieces, each alone in a loop, summed", c["floor"]),
            ("the floor composed into one run (`composed-race`)", c["composed"]),
            ("a whole run (`race/transactional`)", c["whole"])]
    out = ["| race, transactional, per run (cachegrind's cache model) | instructions | L1i misses | L1d misses (read · write) | last-level misses (instr. · read · write) |",
           "|---|---|---|---|---|"]
    for label, v in rows:
        out.append(f"| {label} | {k(v['Ir'])} | {k(v['I1mr'])} | {k(v['D1mr'])} · {k(v['D1mw'])} | "
                   f"{v['ILmr']} · {v['DLmr']} · {v['DLmw']} |")
    return out


def alloc_table(m):
    out = ["| allocations per run (`cargo bench --bench alloc`) | allocations | reallocations | frees | bytes | peak live bytes |",
           "|---|---|---|---|---|---|"]
    for a in m["allocations"]:
        sim = "race" if a["sim"] == "race" else "case 11"
        out.append(f"| {sim}, {a['model']} ({a['runs']:,} seeds) | {a['allocs_per_run']:,.0f} | {a['reallocs_per_run']:,.0f} | "
                   f"{a['frees_per_run']:,.0f} | {a['bytes_per_run']:,.0f} | {a['peak_live_bytes']:,} |")
    out += ["", "Averages per run after a warm-up of the thread's caches; bytes are those asked for "
            "(reallocations' growth included); peak live bytes is the most one run held at once "
            "beyond what was live before it, the largest over the seeds."]
    return out


def render(m):
    mc = m["machine"]
    quick = ("**Quick mode (`--quick`): short criterion times and small seed counts; these "
             "figures only exercise the tooling and are not a measurement.** " if m["quick"] else "")
    head = [f"{quick}Measured {mc['date']} by `python3 tools/speed.py` on {mc['cores']} × {mc['cpu']} "
            f"(load {mc['load_before'][0]} → {mc['load_after'][0]}), commit {mc['commit'][:7]}"
            f"{' with uncommitted changes to the code' if mc['dirty'] else ''}, {mc['rustc'].split(' (')[0]}; "
            "criterion's medians. The ratio is a whole run ÷ the sum of its floor pieces (below), "
            "measured in the same criterion run. There are floor pieces for transactional only: "
            "no-key's and check-first's ratios (floor in parentheses) are to the transactional "
            "race's floor. The sweep's whole run is its time ÷ 1,000. The floor composed into "
            "one run (`piece/floor-composed-*`, `world::bench::composed_floor`) does the floor's "
            "pieces, as many of each, in a run's order on one runtime and nothing else: what a run "
            "with nothing above its floor would cost.", ""]
    return "\n".join(head + runs_table(m) + [""] + pieces_table(m) + [""] + instr_table(m)
                     + [""] + interleaved_table(m) + [""] + cache_table(m) + [""] + others_table(m) + [""] + alloc_table(m)) + "\n"


def main():
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--render", action="store_true",
                    help="print README's Speed tables from the saved JSON (no measurement)")
    ap.add_argument("--quick", action="store_true",
                    help="about a minute end to end: short criterion times, small seed counts")
    ap.add_argument("--max-seeds", type=lambda v: int(float(v)), metavar="N",
                    help="peak memory up to N seeds (default 10^6; 10^5 with --quick)")
    ap.add_argument("--node-root", metavar="DIR", help="run the Node.js suite from this checkout")
    ap.add_argument("--no-build", action="store_true", help="use the binaries already built")
    args = ap.parse_args()
    if args.render:
        sys.stdout.write(render(json.load(open(SAVED))))
        return
    measure(args)


if __name__ == "__main__":
    main()
