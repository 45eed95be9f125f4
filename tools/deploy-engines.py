#!/usr/bin/env python3
"""Read the job files in deploy/ the way their engines do, for tools/deploy-check.sh.

    deploy-engines.py k8s SWEEP.yaml MERGE.yaml PVC.yaml
        Check the Indexed Job, the merge Job and the volume fit together (completions = SHARDS,
        the podFailurePolicy rules, one claim, one image...) and print, as bash assignments,
        each Job's container command and its environment as the kubelet would set it
        (fieldRef to the job-name label: the Job's name; resourceFieldRef requests.cpu: the
        request rounded up, as the downward API does with divisor 1).

    deploy-engines.py gh-shards WORKFLOW.yml
        Print the values of the matrix job's `matrix.shard`, one a line.

    deploy-engines.py gh-job WORKFLOW.yml (shard K | merge) ROOT WORKSPACE ARTIFACTS [NAME=VALUE...]
        Run one job of the workflow as a runner would: `actions/checkout` lays out WORKSPACE (the
        repository's top-level entries, linked), `run:` steps run with bash as Actions runs them,
        with `${{ matrix.shard }}` and `${{ strategy.job-total }}` substituted and the
        workflow's env (a scheduled run: each `${{ inputs.X || 'default' }}` is its default)
        overridden by NAME=VALUE; upload-artifact and download-artifact copy files to and from
        ARTIFACTS. Steps with id `build` or `toolchain` are skipped (the caller passes a
        prebuilt binary as IDEMSIM=...); cache steps are no-ops. Exits with the first failing
        step's code.

    deploy-engines.py gh-action ACTION.yml WORKSPACE ARTIFACTS [with.NAME=VALUE | NAME=VALUE...]
        Run a composite action (deploy/github/action/action.yml) as one step of a job whose
        checkout is WORKSPACE: its inputs are its defaults overridden by with.NAME=VALUE, the
        environment the caller's with NAME=VALUE; `${{ ... }}` of inputs, github.action_*,
        runner.* and steps.ID.outputs.* (written to $GITHUB_OUTPUT) substituted, a || b taken
        as Actions does; $GITHUB_PATH honoured; steps with id `install` skipped (put the
        prebuilt idemsim on PATH). A workflow step `uses: ./PATH` runs the same way in gh-job.

    deploy-engines.py gitlab-job TEMPLATE.yml JOB WORKSPACE [NAME=VALUE...]
        Run a GitLab CI job of TEMPLATE (a hidden one such as .idemsim too) as a runner's shell
        would: its variables (overridden by NAME=VALUE; $CI_PROJECT_DIR and other variables
        expanded), then before_script and script in one bash with -eo pipefail, in WORKSPACE
        (CI_PROJECT_DIR). Exits with the script's code.

    deploy-engines.py scripts OUTDIR FILE.yaml...
        Write the shell scripts embedded in Kubernetes manifests (a container's `sh -c SCRIPT`)
        and GitHub workflows (`run:` steps, each `${{ ... }}` made a plain word) to OUTDIR, one
        file each with a shebang for its shell, for shellcheck (tools/lint-deploy.sh); print
        their paths. Composite actions' `run:` steps and GitLab jobs' before_script and script
        too.

Needs PyYAML. Anything it does not understand is an error, so the check cannot silently skip
part of a job file.
"""

import fnmatch
import glob
import math
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import yaml


def die(msg: str) -> None:
    sys.exit(f"deploy-engines: {msg}")


def need(cond: bool, msg: str) -> None:
    if not cond:
        die(msg)


# ---------------------------------------------------------------- Kubernetes


def one_doc(path: str, kind: str) -> dict:
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    found = [d for d in docs if d.get("kind") == kind]
    need(len(found) == 1, f"{path}: expected one {kind}, found {len(found)}")
    return found[0]


def container(job: dict, path: str) -> dict:
    pod = job["spec"]["template"]["spec"]
    need(pod.get("restartPolicy") == "Never", f"{path}: restartPolicy must be Never (podFailurePolicy needs it)")
    cs = pod.get("containers", [])
    need(len(cs) == 1, f"{path}: expected one container")
    return cs[0]


def cpu_ceil(q: str) -> str:
    q = str(q)
    n = float(q[:-1]) / 1000 if q.endswith("m") else float(q)
    return str(max(1, math.ceil(n)))


def env_of(job: dict, c: dict, path: str) -> list:
    out = []
    for e in c.get("env", []):
        name = e["name"]
        if "value" in e:
            out.append(f"{name}={e['value']}")
            continue
        src = e.get("valueFrom", {})
        if "fieldRef" in src:
            fp = src["fieldRef"]["fieldPath"]
            if fp in ("metadata.labels['batch.kubernetes.io/job-name']", "metadata.labels['job-name']"):
                out.append(f"{name}={job['metadata']['name']}")
                continue
            die(f"{path}: env {name}: fieldRef {fp} is not understood")
        if "resourceFieldRef" in src:
            r = src["resourceFieldRef"]
            need(r.get("containerName", c["name"]) == c["name"], f"{path}: env {name}: another container")
            need(str(r.get("divisor", "1")) == "1", f"{path}: env {name}: divisor other than 1")
            kind, _, res = r["resource"].partition(".")
            need(res == "cpu", f"{path}: env {name}: resource {r['resource']} is not understood")
            qty = c.get("resources", {}).get(kind, {}).get("cpu")
            need(qty is not None, f"{path}: env {name}: no {kind}.cpu in the container's resources")
            out.append(f"{name}={cpu_ceil(qty)}")
            continue
        die(f"{path}: env {name}: valueFrom not understood")
    return out


def env_value(env: list, name: str):
    for kv in env:
        k, _, v = kv.partition("=")
        if k == name:
            return v
    return None


def rules(job: dict, path: str, cname: str):
    pfp = job["spec"].get("podFailurePolicy", {}).get("rules", [])
    failjob, ignores_disruption = set(), False
    for r in pfp:
        if r["action"] == "FailJob" and "onExitCodes" in r:
            oc = r["onExitCodes"]
            need(oc.get("operator") == "In", f"{path}: FailJob rule: operator must be In")
            need(oc.get("containerName", cname) == cname, f"{path}: FailJob rule names another container")
            failjob |= set(oc["values"])
        if r["action"] == "Ignore":
            ignores_disruption |= any(p.get("type") == "DisruptionTarget" for p in r.get("onPodConditions", []))
    need(ignores_disruption, f"{path}: no podFailurePolicy rule Ignore on DisruptionTarget")
    return sorted(failjob)


def claim(job: dict, c: dict, path: str, mount: str) -> str:
    vols = {v["name"]: v for v in job["spec"]["template"]["spec"].get("volumes", [])}
    for m in c.get("volumeMounts", []):
        if m["mountPath"] == mount:
            v = vols.get(m["name"], {})
            need("persistentVolumeClaim" in v, f"{path}: {mount} is not a PersistentVolumeClaim")
            return v["persistentVolumeClaim"]["claimName"]
    die(f"{path}: nothing mounted at {mount}")


def k8s(sweep_path: str, merge_path: str, pvc_path: str) -> None:
    sweep = one_doc(sweep_path, "Job")
    merge = one_doc(merge_path, "Job")
    pvc = one_doc(pvc_path, "PersistentVolumeClaim")
    spec = sweep["spec"]
    need(spec.get("completionMode") == "Indexed", f"{sweep_path}: completionMode must be Indexed")
    n = spec.get("completions")
    need(isinstance(n, int) and n > 0, f"{sweep_path}: completions must be a positive number")
    need(isinstance(spec.get("parallelism"), int), f"{sweep_path}: no parallelism")
    need(isinstance(spec.get("backoffLimitPerIndex"), int), f"{sweep_path}: no backoffLimitPerIndex")
    sc, mc = container(sweep, sweep_path), container(merge, merge_path)
    need(sc["image"] == mc["image"], "the sweep and the merge must run the same image (merge reloads its files)")
    s_env, m_env = env_of(sweep, sc, sweep_path), env_of(merge, mc, merge_path)
    need(env_value(s_env, "SHARDS") == str(n), f"{sweep_path}: env SHARDS must equal completions ({n})")
    need(env_value(m_env, "SHARDS") == str(n), f"{merge_path}: env SHARDS must equal the sweep's completions ({n})")
    need(env_value(m_env, "SEEDS") == env_value(s_env, "SEEDS"), f"{merge_path}: env SEEDS differs from the sweep's")
    need(env_value(m_env, "SWEEP_JOB") == sweep["metadata"]["name"], f"{merge_path}: env SWEEP_JOB must name the sweep Job")
    need(env_value(s_env, "RUN") == sweep["metadata"]["name"], f"{sweep_path}: env RUN must be the Job's name")
    name = pvc["metadata"]["name"]
    need(claim(sweep, sc, sweep_path, "/results") == name, f"{sweep_path}: /results is not the claim {name}")
    need(claim(merge, mc, merge_path, "/results") == name, f"{merge_path}: /results is not the claim {name}")
    need("ReadWriteMany" in pvc["spec"].get("accessModes", []), f"{pvc_path}: pods on several nodes need ReadWriteMany")
    s_fail, m_fail = rules(sweep, sweep_path, sc["name"]), rules(merge, merge_path, mc["name"])
    need(2 in s_fail, f"{sweep_path}: no FailJob rule on exit code 2 (bad input)")
    need(3 in s_fail, f"{sweep_path}: no FailJob rule on exit code 3 (the sim does not apply to the model)")
    need(1 not in s_fail, f"{sweep_path}: a shard exits 1 never; FailJob on 1 is a mistake")
    cmd = sc.get("command", []) + sc.get("args", [])
    need(any("--shard" in a and "auto/" in a for a in cmd), f"{sweep_path}: the command runs no --shard auto/N")

    def arr(var: str, items) -> None:
        print(f"{var}=(" + " ".join(shlex.quote(str(x)) for x in items) + ")")

    print(f"k8s_n={n}")
    arr("k8s_sweep_cmd", cmd)
    arr("k8s_sweep_env", s_env)
    arr("k8s_sweep_failjob", s_fail)
    arr("k8s_merge_cmd", mc.get("command", []) + mc.get("args", []))
    arr("k8s_merge_env", m_env)
    arr("k8s_merge_failjob", m_fail)


# ---------------------------------------------------------------- GitHub Actions

EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
ALWAYS = {"${{ !cancelled() }}", "!cancelled()", "${{ always() }}", "always()"}


def load_workflow(path: str) -> dict:
    wf = yaml.safe_load(open(path))
    # YAML 1.1 reads the key `on` as True
    if True in wf:
        wf["on"] = wf.pop(True)
    return wf


def roles(wf: dict, path: str):
    jobs = wf["jobs"]
    shard = [j for j, v in jobs.items() if "shard" in v.get("strategy", {}).get("matrix", {})]
    need(len(shard) == 1, f"{path}: expected one job with strategy.matrix.shard")
    sid = shard[0]
    merge = [j for j, v in jobs.items() if sid in ([v["needs"]] if isinstance(v.get("needs"), str) else v.get("needs", []))]
    need(len(merge) == 1, f"{path}: expected one job that needs {sid}")
    values = jobs[sid]["strategy"]["matrix"]["shard"]
    need(values == list(range(len(values))), f"{path}: matrix.shard must be 0..N-1, is {values}")
    need(len(jobs[sid]["strategy"]["matrix"]) == 1, f"{path}: matrix has other dimensions than shard (job-total would count them)")
    need(jobs[sid]["strategy"].get("fail-fast") is False, f"{path}: the shard matrix needs fail-fast: false")
    return sid, merge[0], values


def workflow_env(wf: dict, path: str) -> dict:
    inputs = (wf["on"].get("workflow_dispatch") or {}).get("inputs", {})
    out = {}
    for k, v in (wf.get("env") or {}).items():
        v = str(v)
        m = EXPR.fullmatch(v)
        if not m:
            need("${{" not in v, f"{path}: env {k}: expression not understood: {v}")
            out[k] = v
            continue
        m2 = re.fullmatch(r"inputs\.([\w-]+)\s*\|\|\s*'([^']*)'", m.group(1))
        need(m2 is not None, f"{path}: env {k}: expression not understood: {v}")
        name, default = m2.groups()
        need(name in inputs, f"{path}: env {k}: no workflow_dispatch input {name}")
        need(str(inputs[name].get("default", "")) == default,
             f"{path}: env {k}: default '{default}' differs from input {name}'s default '{inputs[name].get('default')}'")
        out[k] = default  # a scheduled run has no inputs
    return out


def expr_value(e: str, ctx: dict, where: str) -> str:
    """A context name, a 'literal', or `a || b ...` (the first that is not empty, as Actions
    takes the first truthy operand)."""
    val = ""
    for part in (p.strip() for p in e.split("||")):
        if re.fullmatch(r"'[^']*'", part):
            val = part[1:-1]
        else:
            need(part in ctx, f"{where}: expression not understood: ${{{{ {e} }}}}")
            val = ctx[part]
        if val:
            return val
    return val


def subst(text: str, ctx: dict, where: str) -> str:
    return EXPR.sub(lambda m: expr_value(m.group(1), ctx, where), text)


def checkout(root: pathlib.Path, ws: pathlib.Path) -> None:
    ws.mkdir(parents=True, exist_ok=True)
    for entry in root.iterdir():
        if entry.name in ("target", ".git"):
            continue
        link = ws / entry.name
        if not link.exists():
            link.symlink_to(entry)


def upload(ws: pathlib.Path, arts: pathlib.Path, w: dict, ctx: dict, where: str) -> int:
    name = subst(str(w["name"]), ctx, where)
    dest = arts / name
    need(not dest.exists(), f"{where}: artifact {name} uploaded twice (upload-artifact@v4 refuses that)")
    found = []
    for pat in str(w["path"]).split("\n"):
        pat = pat.strip()
        if pat:
            found += glob.glob(str(ws / pat))
    if not found:
        if w.get("if-no-files-found", "warn") == "error":
            print(f"{where}: upload {name}: no files found", file=sys.stderr)
            return 1
        return 0
    dest.mkdir(parents=True)
    for f in found:
        p = pathlib.Path(f)
        if p.is_dir():
            shutil.copytree(p, dest, dirs_exist_ok=True)
        else:
            shutil.copy(p, dest / p.name)
    return 0


def download(ws: pathlib.Path, arts: pathlib.Path, w: dict, where: str) -> int:
    pattern = str(w.get("pattern", "*"))
    into = ws / str(w.get("path", "."))
    names = sorted(a.name for a in arts.iterdir() if fnmatch.fnmatch(a.name, pattern)) if arts.exists() else []
    for n in names:
        shutil.copytree(arts / n, into if w.get("merge-multiple") else into / n, dirs_exist_ok=True)
    print(f"{where}: downloaded {len(names)} artifact(s) matching {pattern}", file=sys.stderr)
    return 0


def gh_job(path: str, which: str, k: str, root: str, ws_: str, arts_: str, overrides: list) -> int:
    wf = load_workflow(path)
    sid, mid, values = roles(wf, path)
    jid = sid if which == "shard" else mid
    job = wf["jobs"][jid]
    ctx = {}
    if which == "shard":
        need(int(k) in values, f"{path}: shard {k} is not in matrix.shard")
        ctx = {"matrix.shard": k, "strategy.job-total": str(len(values))}
    ws, arts = pathlib.Path(ws_), pathlib.Path(arts_)
    env = {k2: os.environ[k2] for k2 in ("PATH", "HOME", "TMPDIR") if k2 in os.environ}
    env.update(workflow_env(wf, path))
    env.update({str(a): str(b) for a, b in (job.get("env") or {}).items()})
    for kv in overrides:
        a, _, b = kv.partition("=")
        env[a] = b
    env.update(CI="true", GITHUB_ACTIONS="true", GITHUB_WORKSPACE=str(ws),
               GITHUB_STEP_SUMMARY=str(ws.parent / f"{ws.name}.summary.md"))
    shell = ((wf.get("defaults") or {}).get("run") or {}).get("shell")
    where = f"{path}: {jid}{'[' + k + ']' if k else ''}"
    return run_steps(job["steps"], ctx, env, ws, arts, shell, where, root)


BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]  # what a runner runs for `shell: bash`
SKIPPED = ("build", "toolchain", "install")  # the caller passes a prebuilt binary


def run_step(step: dict, ctx: dict, env: dict, ws: pathlib.Path, shell, where: str, tag: str) -> int:
    """One `run:` step: its env and working-directory substituted, $GITHUB_OUTPUT read back into
    ctx as steps.ID.outputs.*, $GITHUB_PATH prepended to env's PATH."""
    need(step.get("shell", shell) in ("bash", None), f"{where}: a shell other than bash")
    # what a runner runs for `shell: bash`, and for no shell at all on Linux
    argv = BASH if step.get("shell", shell) == "bash" else ["bash", "-e"]
    f = ws.parent / f"{ws.name}.{tag}.sh"
    f.write_text(subst(str(step["run"]), ctx, where))
    out, path_file = ws.parent / f"{ws.name}.{tag}.output", ws.parent / f"{ws.name}.{tag}.path"
    out.write_text("")
    path_file.write_text("")
    senv = dict(env, GITHUB_OUTPUT=str(out), GITHUB_PATH=str(path_file))
    senv.update({str(a): subst(str(b), ctx, where) for a, b in (step.get("env") or {}).items()})
    cwd = ws / subst(str(step.get("working-directory", ".")), ctx, where)
    rc = subprocess.run(argv + [str(f)], cwd=cwd, env=senv).returncode
    for line in out.read_text().splitlines():
        name, eq, value = line.partition("=")
        need(bool(eq), f"{where}: $GITHUB_OUTPUT line not understood: {line}")
        if step.get("id"):
            ctx[f"steps.{step['id']}.outputs.{name}"] = value
    added = [p for p in path_file.read_text().splitlines() if p]
    if added:
        env["PATH"] = ":".join(reversed(added)) + ":" + env.get("PATH", "")
    return rc


def run_steps(steps: list, ctx: dict, env: dict, ws: pathlib.Path, arts: pathlib.Path, shell,
              where_job: str, root=None) -> int:
    """A job's steps (root: the repository its checkout links), or a composite action's (None)."""
    in_action = root is None
    failed = 0
    for i, step in enumerate(steps):
        where = f"{where_job} step {i} ({step.get('id') or step.get('uses') or 'run'})"
        cond = step.get("if")
        need(cond is None or str(cond) in ALWAYS, f"{where}: if: {cond} is not understood")
        if failed and cond is None:
            continue
        uses = str(step.get("uses", ""))
        w = {a: subst(str(b), ctx, where) for a, b in (step.get("with") or {}).items()}
        rc = 0
        if "run" in step:
            if step.get("id") in SKIPPED:
                print(f"{where}: skipped (the prebuilt idemsim stands in)", file=sys.stderr)
                continue
            rc = run_step(step, ctx, env, ws, shell, where, f"{'action-' if in_action else ''}step{i}")
        elif uses.startswith("actions/checkout@") and not in_action:
            checkout(pathlib.Path(root), ws)
        elif uses.startswith("actions/cache@"):
            pass
        elif uses == "actions/upload-artifact@v4":
            rc = upload(ws, arts, w, ctx, where)
        elif uses == "actions/download-artifact@v4":
            rc = download(ws, arts, w, where)
        elif uses.startswith("./") and not in_action:
            rc = gh_action(str(ws / uses / "action.yml"), ws, arts, w, env)
        else:
            die(f"{where}: step not understood")
        if rc and not failed:
            print(f"{where}: exit {rc}", file=sys.stderr)
            failed = rc
    return failed


def gh_action(path: str, ws: pathlib.Path, arts: pathlib.Path, with_: dict, env: dict) -> int:
    """A composite action run as one step: its inputs (defaults, then with_) and its steps."""
    act = yaml.safe_load(open(path))
    need((act.get("runs") or {}).get("using") == "composite", f"{path}: not a composite action")
    inputs = act.get("inputs") or {}
    unknown = set(with_) - set(inputs)
    need(not unknown, f"{path}: no input(s) {sorted(unknown)}")
    ctx = {f"inputs.{k}": str(with_.get(k, (v or {}).get("default", ""))) for k, v in inputs.items()}
    temp = ws.parent / f"{ws.name}.runner-temp"
    temp.mkdir(parents=True, exist_ok=True)
    ctx.update({"github.action_path": str(pathlib.Path(path).resolve().parent), "github.action_repository": "",
                "github.action_ref": "", "runner.os": "Linux", "runner.temp": str(temp)})
    return run_steps(act["runs"]["steps"], ctx, env, ws, arts, None, path)


def gh_action_cmd(path: str, ws_: str, arts_: str, args: list) -> int:
    ws, arts = pathlib.Path(ws_), pathlib.Path(arts_)
    env = {k: os.environ[k] for k in ("PATH", "HOME", "TMPDIR") if k in os.environ}
    env.update(CI="true", GITHUB_ACTIONS="true", GITHUB_WORKSPACE=str(ws),
               GITHUB_STEP_SUMMARY=str(ws.parent / f"{ws.name}.summary.md"))
    with_ = {}
    for kv in args:
        a, _, b = kv.partition("=")
        if a.startswith("with."):
            with_[a[5:]] = b
        else:
            env[a] = b
    return gh_action(path, ws, arts, with_, env)


# ---------------------------------------------------------------- GitLab CI

GITLAB_KEYS = {"image", "variables", "cache", "before_script", "script", "artifacts", "extends", "stage"}


def gitlab_vars(job: dict, path: str, name: str) -> dict:
    out = {}
    for k, v in (job.get("variables") or {}).items():
        out[str(k)] = str(v["value"] if isinstance(v, dict) else v)
    return out


def expand(value: str, env: dict) -> str:
    """$NAME and ${NAME} as GitLab expands them in variables (unknown names: empty)."""
    return re.sub(r"\$(?:\{(\w+)\}|(\w+))", lambda m: env.get(m.group(1) or m.group(2), ""), value)


def gitlab_job(path: str, name: str, ws_: str, overrides: list) -> int:
    doc = yaml.safe_load(open(path))
    need(name in doc, f"{path}: no job {name}")
    job = doc[name]
    extra = set(job) - GITLAB_KEYS
    need(not extra, f"{path}: {name}: keys not understood: {sorted(extra)}")
    ws = pathlib.Path(ws_)
    env = {k: os.environ[k] for k in ("PATH", "HOME", "TMPDIR") if k in os.environ}
    env.update(CI="true", GITLAB_CI="true", CI_PROJECT_DIR=str(ws))
    variables = gitlab_vars(job, path, name)
    for kv in overrides:
        a, _, b = kv.partition("=")
        variables[a] = b
    for k, v in variables.items():
        env[k] = expand(v, env)
    lines = [*(job.get("before_script") or []), *(job.get("script") or [])]
    need(bool(lines), f"{path}: {name}: no script")
    f = ws.parent / f"{ws.name}.gitlab.sh"
    f.write_text("\n".join(str(x) for x in lines) + "\n")
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(f)], cwd=ws, env=env).returncode


def scripts(outdir: str, files: list) -> None:
    out = pathlib.Path(outdir)
    out.mkdir(parents=True, exist_ok=True)

    def write(name: str, shebang: str, body: str) -> None:
        f = out / re.sub(r"[^\w.-]+", "_", name)
        f.write_text(f"{shebang}\n# extracted from {name}\n{body}")
        print(f)

    for path in files:
        docs = [d for d in yaml.safe_load_all(open(path)) if d]
        for d in docs:
            if (d.get("runs") or {}).get("using") == "composite":  # a GitHub composite action
                for i, step in enumerate(d["runs"]["steps"]):
                    if "run" in step:
                        need(step.get("shell") == "bash", f"{path}: step {i}: a composite's run step needs shell: bash")
                        names = [*(step.get("env") or {}), "GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT", "GITHUB_PATH"]
                        body = EXPR.sub("__gha_expression__", str(step["run"]))
                        write(f"{path}:{step.get('id', i)}", "#!/usr/bin/env bash", f"export {' '.join(names)}\n{body}")
                continue
            gitlab = {k: v for k, v in d.items() if isinstance(v, dict) and "script" in v}
            if gitlab and "jobs" not in d and "kind" not in d:  # GitLab CI jobs
                for name, job in gitlab.items():
                    names = [*(job.get("variables") or {}), "CI_PROJECT_DIR"]
                    body = "\n".join(str(x) for x in [*(job.get("before_script") or []), *job["script"]])
                    write(f"{path}:{name}", "#!/usr/bin/env bash", f"set -eo pipefail\nexport {' '.join(names)}\n{body}\n")
                continue
            if "jobs" in d:  # a GitHub workflow
                shell = ((d.get("defaults") or {}).get("run") or {}).get("shell")
                for jid, job in d["jobs"].items():
                    for i, step in enumerate(job.get("steps", [])):
                        if "run" in step:
                            need(step.get("shell", shell) in ("bash", None), f"{path}: {jid} step {i}: shell not bash")
                            # the environment the step gets, so that shellcheck knows these are set
                            names = [*(d.get("env") or {}), *(job.get("env") or {}), *(step.get("env") or {})]
                            names += ["GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_WORKSPACE"]
                            body = EXPR.sub("__gha_expression__", str(step["run"]))
                            write(f"{path}:{jid}:{step.get('id', i)}", "#!/usr/bin/env bash",
                                  f"export {' '.join(names)}\n{body}")
                continue
            spec = (d.get("spec") or {}).get("template", {}).get("spec") or d.get("spec") or {}
            for c in spec.get("containers", []):
                cmd = c.get("command", []) + c.get("args", [])
                for j in range(len(cmd) - 2):
                    if cmd[j] in ("/bin/sh", "sh", "/bin/bash", "bash") and cmd[j + 1] == "-c":
                        sh = "sh" if cmd[j].endswith("sh") and not cmd[j].endswith("bash") else "bash"
                        write(f"{path}:{d['metadata']['name']}:{c['name']}", f"#!/bin/{sh}", cmd[j + 2])


def main() -> int:
    a = sys.argv[1:]
    if a[:1] == ["k8s"] and len(a) == 4:
        k8s(*a[1:])
        return 0
    if a[:1] == ["scripts"] and len(a) >= 3:
        scripts(a[1], a[2:])
        return 0
    if a[:1] == ["gh-shards"] and len(a) == 2:
        _, _, values = roles(load_workflow(a[1]), a[1])
        print("\n".join(map(str, values)))
        return 0
    if a[:1] == ["gh-job"] and len(a) >= 7 and a[2] == "shard":
        return gh_job(a[1], "shard", a[3], a[4], a[5], a[6], a[7:])
    if a[:1] == ["gh-action"] and len(a) >= 4:
        return gh_action_cmd(a[1], a[2], a[3], a[4:])
    if a[:1] == ["gitlab-job"] and len(a) >= 4:
        return gitlab_job(a[1], a[2], a[3], a[4:])
    if a[:1] == ["gh-job"] and len(a) >= 6 and a[2] == "merge":
        return gh_job(a[1], "merge", "", a[3], a[4], a[5], a[6:])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
