#!/usr/bin/env python3
"""The lesson page in a real browser: headless Chromium driven over WebDriver (HTTP JSON to
chromedriver), Python's standard library only.

Builds the page with the binary (`lesson check-first -o ...`), loads it from file://, steps
through it with the keyboard only and checks, after every step, that the counts shown (rows,
keys done, keys in progress; the fix's too) equal the binary's own per-step state
(`lesson check-first --json`, never read from the page), and that the last step's counts equal
`run --json`'s final rows and keys; that the violating step is highlighted and named; that
`#step-N` loads that step and is updated while stepping; that the figures have text
alternatives; that every lane colour is from the Okabe-Ito palette; and takes a screenshot
(target/browser/lesson.png). Exit 0 all held, 1 a check failed, 2 no browser.

Usage: python3 tools/browser-check.py [--bin target/release/idemsim] [--out target/browser]
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import base64
import urllib.request

OKABE_ITO = {"#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7"}
FAILS = []


def check(ok, what):
    if not ok:
        FAILS.append(what)
        print(f"FAIL  {what}")
    return ok


class Driver:
    """Just enough WebDriver: a session, navigation, scripts, keys, a screenshot."""

    def __init__(self, port, chrome, profile):
        self.base = f"http://127.0.0.1:{port}"
        caps = {
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {
                        "binary": chrome,
                        "args": [
                            "--headless=new", "--no-sandbox", "--disable-gpu",
                            "--disable-background-networking", "--disable-component-update",
                            "--disable-sync", "--disable-dev-shm-usage",
                            f"--user-data-dir={profile}", "--window-size=1500,1100",
                        ],
                    },
                }
            }
        }
        self.sid = self.call("POST", "/session", caps)["sessionId"]

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read() or b"{}").get("value", {})

    def s(self, method, path, body=None):
        return self.call(method, f"/session/{self.sid}{path}", body)

    def go(self, url):
        self.s("POST", "/url", {"url": url})

    def js(self, script, *args):
        return self.s("POST", "/execute/sync", {"script": script, "args": list(args)})

    def keys(self, *names):
        codes = {"Right": "\ue014", "Left": "\ue012", "Home": "\ue011", "End": "\ue010"}
        acts = []
        for n in names:
            acts += [{"type": "keyDown", "value": codes[n]}, {"type": "keyUp", "value": codes[n]}]
        self.s("POST", "/actions", {"actions": [{"type": "key", "id": "kb", "actions": acts}]})

    def screenshot(self, path):
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.s("GET", "/screenshot")))

    def quit(self):
        try:
            self.s("DELETE", "")
        except Exception:
            pass


SHOWN = """
function n(id){var e=document.getElementById(id);return e?parseInt(e.getAttribute('data-count'),10):null;}
return {step: document.getElementById('scrub').value|0, hash: location.hash,
  rows: n('db-main-rows'), keys: n('db-main-keys'), progress: n('db-main-progress'),
  vrows: n('db-vs-rows'), vkeys: n('db-vs-keys'), vprogress: n('db-vs-progress'),
  tablerows: document.querySelectorAll('#db-main table')[0].querySelectorAll('tr').length,
  caption: document.getElementById('caption').className,
  mark: document.getElementById('cap-mark').textContent,
  current: Array.from(document.querySelectorAll('#fig-main .current')).map(e=>e.getAttribute('data-step'))};
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def expected(binary, page):
    subprocess.run([binary, "-q", "lesson", "check-first", "-o", page], check=True)
    data = json.loads(subprocess.run([binary, "lesson", "check-first", "--json"], check=True,
                                     capture_output=True, text=True).stdout)
    run = json.loads(subprocess.run(
        [binary, "run", "check-first-race", "--model", "check-first", "--seed",
         str(data["seed"]), "--json"], capture_output=True, text=True).stdout)
    return data, run


def vs_at(data, t):
    s = None
    for x in (data["vs"] or {}).get("steps", []):
        if x["t_us"] <= t:
            s = x
    return s


def step_through(d, data, run):
    steps = data["main"]["steps"]
    viol = data["main"]["violation"]["step"]
    d.keys("Home")
    for i, want in enumerate(steps):
        if i:
            d.keys("Right")
        got = d.js(SHOWN)
        where = f"step {i + 1}"
        check(got["step"] == i + 1, f"{where}: the scrubber shows step {got['step']}")
        check(got["hash"] == f"#step-{i + 1}", f"{where}: the URL fragment is {got['hash']!r}")
        check((got["rows"], got["keys"], got["progress"])
              == (want["rows"], want["keys_done"], want["keys_in_progress"]),
              f"{where}: shown rows/keys/in progress {got['rows']}/{got['keys']}/{got['progress']}"
              f", the run's {want['rows']}/{want['keys_done']}/{want['keys_in_progress']}")
        check(got["tablerows"] - 1 == max(want["rows"], 1) or (want["rows"] == 0 and got["tablerows"] == 2),
              f"{where}: the rows table has {got['tablerows'] - 1} line(s)")
        v = vs_at(data, want["t_us"])
        vw = (v["rows"], v["keys_done"], v["keys_in_progress"]) if v else (0, 0, 0)
        check((got["vrows"], got["vkeys"], got["vprogress"]) == vw,
              f"{where}: the fix's counts {got['vrows']}/{got['vkeys']}/{got['vprogress']}, want {vw}")
        check(got["current"] == [str(i + 1)], f"{where}: highlighted marker {got['current']}")
        is_v = "violating" in got["caption"].split()
        check(is_v == (i == viol), f"{where}: violating highlight {is_v}")
        if i == viol:
            name = data["main"]["violation"]["name"]
            check(name in got["mark"], f"{where}: the violation is named ({got['mark']!r})")
            check(bool(d.js("return document.querySelector('#fig-main .violation') !== null")),
                  f"{where}: the violating marker is drawn")
    last = steps[-1]
    rows = run["rows"] if isinstance(run["rows"], int) else len(run["rows"])
    check(last["rows"] == rows, f"last step rows {last['rows']} = run --json rows {rows}")
    if isinstance(run["rows"], list):
        ids = sorted(r["id"] for r in run["rows"])
        shown = sorted(r["id"] for r in last["tables"]["rows"])
        check(ids == shown, f"the last step's rows table {shown} = run --json's row ids {ids}")
    keys = run["keys"] if isinstance(run["keys"], int) else len(run["keys"])
    check(last["keys_done"] == keys, f"last step keys {last['keys_done']} = run --json keys {keys}")
    d.keys("Left")
    check(d.js(SHOWN)["step"] == len(steps) - 1, "Left goes back one step")


def static_checks(d, data, url):
    n = len(data["main"]["steps"])
    d.go(url + "#step-5")
    got = d.js(SHOWN)
    check(got["step"] == 5 and got["current"] == ["5"], f"#step-5 loads step 5 (got {got['step']})")
    d.go(url + f"#step-{n + 40}")
    check(d.js(SHOWN)["step"] == n, "a fragment past the end shows the last step")
    d.go(url)
    alts = d.js("return Array.from(document.querySelectorAll('svg')).map(s => {"
                "var id=s.getAttribute('aria-labelledby'); var t=id&&document.getElementById(id);"
                "return [s.getAttribute('role'), t ? t.textContent : ''];})")
    check(len(alts) >= 2, f"{len(alts)} figure(s) drawn (the run and the fix)")
    for role, text in alts:
        check(role == "img" and len(text) > 20, f"a figure has a text alternative ({role!r}, {text[:40]!r})")
    imgs = d.js("return Array.from(document.images).filter(i => !i.alt).length")
    check(imgs == 0, f"{imgs} <img> without alt")
    colors = d.js("return Array.from(document.querySelectorAll('svg .lane .cue')).map(e=>e.getAttribute('fill'))")
    check(bool(colors) and all(c.upper() in OKABE_ITO for c in colors),
          f"lane colours from the Okabe-Ito palette: {colors}")
    copies = [l["color"] for l in data["main"]["lanes"] if l["kind"] == "client copy"]
    check(len(set(copies)) == len(copies), f"each client copy its own colour: {copies}")
    window = d.js("return Array.from(document.querySelectorAll('svg .window')).map(e=>e.getAttribute('class'))")
    check("window race" in window and "window closed" in window, f"windows drawn: {window}")
    labels = d.js("return Array.from(document.querySelectorAll('#fig-vs text')).map(e=>e.textContent)")
    check(not any("race window" in t for t in labels), "the fix's window is not labelled a race window")
    check(bool(d.js("return document.querySelector('#fig-vs .fixpoint') !== null")),
          "the fix's blocking or replaying step is highlighted")
    ext = d.js("return Array.from(document.querySelectorAll('[src],[href]')).map(e=>e.getAttribute('src')||e.getAttribute('href')).filter(u=>/^(https?:)?\\/\\//.test(u))")
    check(ext == [], f"no network references: {ext}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/idemsim")
    ap.add_argument("--out", default="target/browser")
    a = ap.parse_args()
    chrome = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    if not chrome or not driver:
        print("skipped: no chromium (install chromium and chromium-driver)")
        return 2
    started = time.monotonic()
    os.makedirs(a.out, exist_ok=True)
    page = os.path.abspath(os.path.join(a.out, "lesson.html"))
    data, run = expected(a.bin, page)
    port = free_port()
    profile = tempfile.mkdtemp(prefix="idemsim-chromium-")
    proc = subprocess.Popen([driver, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    d = None
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        d = Driver(port, chrome, profile)
        url = "file://" + page
        d.go(url)
        errors = d.js("return window.__lessonErrors || null")
        check(errors is None, f"script errors: {errors}")
        step_through(d, data, run)
        static_checks(d, data, url)
        d.go(url + f"#step-{data['main']['violation']['step'] + 1}")
        d.screenshot(os.path.join(a.out, "lesson.png"))
    finally:
        if d:
            d.quit()
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(profile, ignore_errors=True)
    n = len(data["main"]["steps"])
    took = time.monotonic() - started
    if FAILS:
        print(f"browser check: {len(FAILS)} check(s) failed over {n} steps ({took:.1f} s)")
        return 1
    print(f"browser check: ok, {n} steps stepped by keyboard, counts equal the run's; "
          f"screenshot {a.out}/lesson.png ({took:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
