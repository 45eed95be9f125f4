#!/usr/bin/env bash
# Runs the job files in deploy/ the way their engines would, with no scheduler installed, and
# checks that each engine's merged report is byte for byte what one unsharded run prints (and
# exits the same), and that a shard given bad input exits 2 (what the Kubernetes Job's
# podFailurePolicy fails the Job on, and what no scheduler should retry).
#
#   tools/deploy-check.sh                       # with target/release/idemsim
#   IDEMSIM=/path/to/idemsim tools/deploy-check.sh
#
#   Slurm:      deploy/slurm/submit.sh with a stand-in sbatch (this script, --as-sbatch)
#               that runs sweep.sbatch with bash once per array index, with the SLURM_ARRAY_*
#               variables Slurm sets, then merge.sbatch if every task succeeded (afterok);
#               and sweep.sbatch/merge.sbatch run directly with an array that starts at 5.
#   Kubernetes: the container command and env of deploy/k8s/sweep-job.yaml, run once per
#               completion index with JOB_COMPLETION_INDEX, then merge-job.yaml's
#               (tools/deploy-engines.py reads the YAML and checks the files fit together).
#   GitHub:     the jobs of deploy/github/nightly-sweep.yml, step by step (deploy-engines.py):
#               one job per matrix.shard, artifacts up and down, then the merge job.
#   AWS Batch, GitLab: the CLI with AWS_BATCH_JOB_ARRAY_INDEX/SIZE, CI_NODE_INDEX/TOTAL.
#   The CI gate: deploy/github/action/action.yml's steps and deploy/gitlab/idemsim.gitlab-ci.yml's
#               script (deploy-engines.py) on copies of examples/project: its committed
#               baseline passes (exit 0), a design that regressed fails (exit 1), a baseline
#               written by update-baseline is the committed one byte for byte, bad input exits 2.
#
# Needs bash, python3 with PyYAML (else the venv of tools/lint-deploy.sh), diff. Takes a few
# seconds: small sims over 600 seeds. Prints "N passed, N failed"; exits 1 on any failure.

set -euo pipefail

# ---------------------------------------------------------------- the stand-in sbatch
# Called as `deploy-check.sh --as-sbatch` (from $tmp/bin/sbatch, which submit.sh gets as
# SBATCH): runs the job at once, synchronously, as Slurm would
# (a copy of the script, in the submit directory, with Slurm's variables), records its state
# in $FAKE_SLURM_STATE and prints the job id as --parsable does.
fake_sbatch() {
    local state=${FAKE_SLURM_STATE:?} array='' dep='' script
    while (($#)); do
        case $1 in
        --parsable | --export=ALL | --kill-on-invalid-dep=yes) ;;
        --array=*) array=${1#--array=} ;;
        --dependency=*) dep=${1#--dependency=} ;;
        -*)
            echo "sbatch (stand-in): option $1 not understood" >&2
            return 1
            ;;
        *) break ;;
        esac
        shift
    done
    script=$1
    # the #SBATCH lines count where the command line says nothing
    [[ -n $array ]] || array=$(sed -n 's/^#SBATCH --array=//p' "$script")
    local cpus
    cpus=$(sed -n 's/^#SBATCH --cpus-per-task=//p' "$script")
    local id
    id=$(cat "$state/next" 2>/dev/null || echo 1000)
    echo $((id + 100)) >"$state/next"
    mkdir -p "$state/spool/$id"
    cp "$script" "$state/spool/$id/slurm_script" # Slurm runs a copy, from its spool folder
    echo "$id"
    if [[ -n $dep ]]; then
        [[ $dep =~ ^afterok:([0-9]+)$ ]] || {
            echo "sbatch (stand-in): dependency $dep not understood" >&2
            return 1
        }
        if [[ $(cat "$state/${BASH_REMATCH[1]}.state") != COMPLETED ]]; then
            echo DEPENDENCY_NEVER_SATISFIED >"$state/$id.state"
            return 0
        fi
    fi
    local -a senv=(SLURM_SUBMIT_DIR="$PWD" SLURM_CPUS_PER_TASK="$cpus")
    local st=COMPLETED rc
    if [[ -n $array ]]; then
        [[ $array =~ ^([0-9]+)-([0-9]+)(%[0-9]+)?$ ]] || {
            echo "sbatch (stand-in): --array=$array not understood" >&2
            return 1
        }
        local min=${BASH_REMATCH[1]} max=${BASH_REMATCH[2]} t
        for ((t = min; t <= max; t++)); do
            rc=0
            env "${senv[@]}" SLURM_JOB_ID=$((id + 1 + t - min)) SLURM_ARRAY_JOB_ID="$id" \
                SLURM_ARRAY_TASK_ID="$t" SLURM_ARRAY_TASK_MIN="$min" SLURM_ARRAY_TASK_MAX="$max" \
                SLURM_ARRAY_TASK_COUNT=$((max - min + 1)) SLURM_ARRAY_TASK_STEP=1 \
                bash "$state/spool/$id/slurm_script" >"$state/${id}_$t.out" 2>"$state/${id}_$t.err" || rc=$?
            echo "$rc" >"$state/${id}_$t.rc"
            ((rc == 0)) || st=FAILED
        done
    else
        rc=0
        env "${senv[@]}" SLURM_JOB_ID="$id" bash "$state/spool/$id/slurm_script" \
            >"$state/$id.out" 2>"$state/$id.err" || rc=$?
        echo "$rc" >"$state/$id.rc"
        ((rc == 0)) || st=FAILED
    fi
    echo "$st" >"$state/$id.state"
}

if [[ ${1:-} == --as-sbatch ]]; then
    shift
    fake_sbatch "$@"
    exit
fi

# ---------------------------------------------------------------- set-up

started=$SECONDS
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IDEMSIM=${IDEMSIM:-$root/target/release/idemsim}
[[ $IDEMSIM == /* ]] || IDEMSIM=$PWD/$IDEMSIM
if [[ ! -x $IDEMSIM ]]; then
    echo "deploy-check: no idemsim binary at $IDEMSIM (cargo build --release, or set IDEMSIM)" >&2
    exit 2
fi
python=''
for py in "${PYTHON:-python3}" "${IDEMSIM_LINT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/idemsim-lint}/venv/bin/python"; do
    if command -v "$py" >/dev/null && "$py" -c 'import yaml' 2>/dev/null; then
        python=$py
        break
    fi
done
if [[ -z $python ]]; then
    echo "deploy-check: needs python3 with PyYAML (pip install pyyaml, or run tools/lint-deploy.sh once)" >&2
    exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/deploy-check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The project as a job sees it: sims/ and models/ at its root, nothing else needed.
work=$tmp/work
mkdir -p "$work" "$tmp/ref" "$tmp/bin"
ln -s "$root/sims" "$work/sims"
ln -s "$root/models" "$work/models"
printf '#!/bin/sh\nexec bash "%s" --as-sbatch "$@"\n' "$root/tools/deploy-check.sh" >"$tmp/bin/sbatch"
chmod +x "$tmp/bin/sbatch"

# Every job runs in a clean environment: no engine variable of the caller's leaks in (a CI job
# may well have CI_NODE_INDEX set).
clean=(env -i "PATH=$PATH" "HOME=$HOME" "TMPDIR=${TMPDIR:-/tmp}" "IDEMSIM=$IDEMSIM")

passed=0
failed=0
ok() {
    passed=$((passed + 1))
    echo "ok   $*"
}
bad() {
    failed=$((failed + 1))
    echo "FAIL $*"
}

# The two runs every engine shards: one sweep (3 shards) and one matrix (4 shards, 2 × 2 cells).
sweep_cfg=(MODE=sweep SIM=sims/teaching/check-first-race.toml MODEL=check-first SEEDS=0..600)
sweep_args=(sweep sims/teaching/check-first-race.toml --model check-first --seeds 0..600)
matrix_cfg=(MODE=matrix "SIMS=sims/teaching sims/faults/double-submit.toml"
    "MODELS=check-first transactional" SEEDS=0..600)
matrix_args=(matrix --sims sims/teaching --sims sims/faults/double-submit.toml
    --models check-first --models transactional --seeds 0..600)

# reference KEY JOBS ARGS...: the unsharded run's stdout and exit code, as $tmp/ref/KEY.{out,rc}
# (JOBS matters: a sweep's first line names its worker threads).
reference() {
    local key=$1 jobs=$2 rc=0
    shift 2
    [[ ! -f $tmp/ref/$key.rc ]] || return 0
    (cd "$work" && "${clean[@]}" "$IDEMSIM" "$@" ${jobs:+--jobs "$jobs"}) \
        >"$tmp/ref/$key.out" 2>"$tmp/ref/$key.err" || rc=$?
    echo "$rc" >"$tmp/ref/$key.rc"
    if ((rc > 1)) || [[ ! -s $tmp/ref/$key.out ]]; then
        echo "deploy-check: the unsharded run $key failed ($rc):" >&2
        cat "$tmp/ref/$key.err" >&2
        exit 2
    fi
}

# same WHAT KEY FILE RC: FILE and RC are the unsharded run KEY's stdout and exit code
same() {
    local what=$1 key=$2 got=$3 rc=$4 want
    want=$(cat "$tmp/ref/$key.rc")
    if [[ ! -f $got ]]; then
        bad "$what: no output file $got"
    elif ! diff -u "$tmp/ref/$key.out" "$got" >"$tmp/diff"; then
        bad "$what: the report differs from the unsharded run's ($key)"
        head -40 "$tmp/diff" | sed 's/^/    /'
    elif [[ $rc != "$want" ]]; then
        bad "$what: exit $rc, the unsharded run exits $want"
    else
        ok "$what: byte-identical to the unsharded run, exit $rc"
    fi
}

# exits WHAT WANT RC [ERRFILE]
exits() {
    if [[ $3 == "$2" ]]; then
        ok "$1: exit $3"
    else
        bad "$1: exit $3, expected $2"
        [[ -z ${4:-} ]] || sed 's/^/    /' "$4"
    fi
}

# files WHAT DIR N: DIR holds exactly shard-0-of-N.json .. shard-(N-1)-of-N.json
files() {
    local want='' got='' k names
    for ((k = 0; k < $3; k++)); do want+=" shard-$k-of-$3.json"; done
    shopt -s nullglob
    names=("$2"/shard-*.json)
    shopt -u nullglob
    if ((${#names[@]})); then
        got=" $(printf '%s\n' "${names[@]##*/}" | sort -t- -k2,2n | paste -sd' ')"
    fi
    if [[ $got == "$want" ]]; then
        ok "$1: shard-0-of-$3.json .. shard-$(($3 - 1))-of-$3.json written"
    else
        bad "$1: shard files${got:- none}, expected$want"
    fi
}

# in_list LIST... VALUE: is VALUE one of LIST
in_list() {
    local v=${*: -1} x
    for x in "${@:1:$#-1}"; do [[ $x == "$v" ]] && return 0; done
    return 1
}

echo "deploy-check: $IDEMSIM, $($IDEMSIM --version)"
reference sweep "" "${sweep_args[@]}"
reference sweep-j4 4 "${sweep_args[@]}"
reference matrix "" "${matrix_args[@]}"
reference matrix-md "" "${matrix_args[@]}" --markdown
for key in sweep matrix; do
    # the check is only worth something if the merge has failures to carry over
    [[ $(cat "$tmp/ref/$key.rc") == 1 ]] || bad "the unsharded $key run finds nothing: pick a failing one"
done

# ---------------------------------------------------------------- Slurm

slurm=$tmp/slurm
mkdir -p "$slurm/state"
# submit LOG VAR=VALUE...: deploy/slurm/submit.sh from the project root, with the stand-in
submit() {
    local log=$1
    shift
    (cd "$work" && "${clean[@]}" SBATCH="$tmp/bin/sbatch" FAKE_SLURM_STATE="$slurm/state" "$@" \
        bash "$root/deploy/slurm/submit.sh") >"$log" 2>"$log.err"
}
slurm_job() { # ID FIELD: the stand-in's record of a job
    cat "$slurm/state/$1.$2" 2>/dev/null || echo "(none)"
}

for cfg in sweep matrix; do
    if [[ $cfg == sweep ]]; then
        n=3
        vars=("${sweep_cfg[@]}" "SHARDS=$n" FORMAT=text)
        key=sweep-j4 # sweep.sbatch passes SLURM_CPUS_PER_TASK (#SBATCH --cpus-per-task=4) as --jobs
        ext=txt
        flags=()
    else
        n=4
        vars=("${matrix_cfg[@]}" "SHARDS=$n" FORMAT=markdown)
        key=matrix-md
        ext=md
        flags=(--markdown)
    fi
    out=$slurm/$cfg
    if ! submit "$slurm/$cfg.ids" "${vars[@]}" OUT="$out"; then
        bad "slurm $cfg: submit.sh failed"
        sed 's/^/    /' "$slurm/$cfg.ids.err"
        continue
    fi
    read -r sweep_id merge_id <"$slurm/$cfg.ids"
    if [[ $(slurm_job "$sweep_id" state) == COMPLETED ]]; then
        ok "slurm $cfg: every array task of job $sweep_id exits 0"
    else
        bad "slurm $cfg: the array job is $(slurm_job "$sweep_id" state): $(cat "$slurm/state/${sweep_id}"_*.err)"
    fi
    files "slurm $cfg: \$OUT" "$out" "$n"
    same "slurm $cfg: merge.sbatch (afterok:$sweep_id), its output" "$key" "$slurm/state/$merge_id.out" "$(slurm_job "$merge_id" rc)"
    same "slurm $cfg: merge.sbatch's \$OUT/report.$ext" "$key" "$out/report.$ext" "$(slurm_job "$merge_id" rc)"
    rc=0
    (cd "$work" && "${clean[@]}" "$IDEMSIM" merge "$out/merged.json" "${flags[@]}") \
        >"$slurm/$cfg.remerge" 2>&1 || rc=$?
    same "slurm $cfg: \$OUT/merged.json merged again" "$key" "$slurm/$cfg.remerge" "$rc"
done

# Bad input: every task exits 2, and the merge never runs.
submit "$slurm/bad.ids" "${sweep_cfg[@]}" SIM=sims/teaching/no-such-sim.toml SHARDS=2 OUT="$slurm/bad" || true
read -r sweep_id merge_id <"$slurm/bad.ids" || true
exits "slurm: a task with a missing sim" 2 "$(slurm_job "${sweep_id}_0" rc)" "$slurm/state/${sweep_id}_0.err"
exits "slurm: the other task" 2 "$(slurm_job "${sweep_id}_1" rc)"
if [[ $(slurm_job "$merge_id" state) == DEPENDENCY_NEVER_SATISFIED ]]; then
    ok "slurm: after a failed task the merge never runs (afterok)"
else
    bad "slurm: after a failed task the merge is $(slurm_job "$merge_id" state)"
fi

# sweep.sbatch run directly with bash, as a task of `--array=5-7`, then merge.sbatch.
direct=$slurm/direct
for t in 5 6 7; do
    rc=0
    (cd "$work" && "${clean[@]}" "${sweep_cfg[@]}" OUT="$direct" SLURM_ARRAY_JOB_ID=77 SLURM_ARRAY_TASK_ID=$t \
        SLURM_ARRAY_TASK_MIN=5 SLURM_ARRAY_TASK_MAX=7 SLURM_ARRAY_TASK_COUNT=3 SLURM_ARRAY_TASK_STEP=1 \
        bash "$root/deploy/slurm/sweep.sbatch") 2>"$slurm/direct-$t.err" || rc=$?
    exits "slurm: sweep.sbatch as task $t of --array=5-7" 0 "$rc" "$slurm/direct-$t.err"
done
files "slurm: --array=5-7" "$direct" 3
rc=0
(cd "$work" && "${clean[@]}" SEEDS=0..600 OUT="$direct" bash "$root/deploy/slurm/merge.sbatch") \
    >"$slurm/direct.out" 2>"$slurm/direct.err" || rc=$?
same "slurm: merge.sbatch of --array=5-7" sweep "$slurm/direct.out" "$rc"
rm -f "$direct/shard-1-of-3.json"
rc=0
(cd "$work" && "${clean[@]}" SEEDS=0..600 OUT="$direct" bash "$root/deploy/slurm/merge.sbatch") \
    >/dev/null 2>"$slurm/missing.err" || rc=$?
exits "slurm: merge.sbatch with a shard missing" 2 "$rc" "$slurm/missing.err"
# ...run again by itself, outside the array (SHARD=1/3), as sweep.sbatch's comment says
rc=0
(cd "$work" && "${clean[@]}" "${sweep_cfg[@]}" OUT="$direct" SHARD=1/3 SLURM_JOB_ID=79 \
    bash "$root/deploy/slurm/sweep.sbatch") 2>"$slurm/again.err" || rc=$?
exits "slurm: sweep.sbatch with SHARD=1/3, not in an array" 0 "$rc" "$slurm/again.err"
rc=0
(cd "$work" && "${clean[@]}" SEEDS=0..600 OUT="$direct" bash "$root/deploy/slurm/merge.sbatch") \
    >"$slurm/again.out" 2>"$slurm/again.err" || rc=$?
same "slurm: merge.sbatch after the shard ran again" sweep "$slurm/again.out" "$rc"
rc=0
(cd "$work" && "${clean[@]}" "${sweep_cfg[@]}" OUT="$direct" SLURM_ARRAY_JOB_ID=78 SLURM_ARRAY_TASK_ID=2 \
    SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_COUNT=2 SLURM_ARRAY_TASK_STEP=2 \
    bash "$root/deploy/slurm/sweep.sbatch") >/dev/null 2>"$slurm/step.err" || rc=$?
exits "slurm: sweep.sbatch in an array with a step of 2 (--array=0-2:2)" 2 "$rc" "$slurm/step.err"

# ---------------------------------------------------------------- Kubernetes

k8s=$tmp/k8s
mkdir -p "$k8s"
k8s_n=0 k8s_sweep_cmd=() k8s_sweep_env=() k8s_sweep_failjob=() k8s_merge_cmd=() k8s_merge_env=() k8s_merge_failjob=()
if "$python" "$root/tools/deploy-engines.py" k8s "$root/deploy/k8s/sweep-job.yaml" \
    "$root/deploy/k8s/merge-job.yaml" "$root/deploy/k8s/pvc.yaml" >"$k8s/jobs.sh" 2>"$k8s/jobs.err"; then
    ok "k8s: the Indexed Job, the merge Job and the volume fit together ($(grep -c . "$k8s/jobs.sh") settings read)"
    # shellcheck source=/dev/null
    source "$k8s/jobs.sh"
else
    bad "k8s: $(cat "$k8s/jobs.err")"
fi
jobs_env=$(printf '%s\n' "${k8s_sweep_env[@]}" | sed -n 's/^JOBS=//p')
# pod K: the container's command and env, with the image's paths pointed here; run from
# elsewhere, so that the script's own cd is what finds sims/ and models/
pod() { # OUTFILE ERRFILE VAR=VALUE... (then the command)
    local o=$1 e=$2
    shift 2
    (cd "$tmp" && "${clean[@]}" "${k8s_sweep_env[@]}" IDEMSIM_ROOT="$work" "$@") >"$o" 2>"$e"
}
# the pods' JOBS is their CPU request: the unsharded sweep gets the same --jobs
reference "sweep-j$jobs_env" "$jobs_env" "${sweep_args[@]}"
for cfg in sweep matrix; do
    ((k8s_n > 0)) || break
    if [[ $cfg == sweep ]]; then
        vars=("${sweep_cfg[@]}") key=sweep-j$jobs_env fmt=text ext=txt
    else
        vars=("${matrix_cfg[@]}") key=matrix-md fmt=markdown ext=md
    fi
    results=$k8s/$cfg
    for ((i = 0; i < k8s_n; i++)); do
        rc=0
        pod /dev/null "$k8s/$cfg-$i.err" "${vars[@]}" RESULTS="$results" JOB_COMPLETION_INDEX=$i \
            "${k8s_sweep_cmd[@]}" || rc=$?
        exits "k8s $cfg: pod with JOB_COMPLETION_INDEX=$i" 0 "$rc" "$k8s/$cfg-$i.err"
    done
    files "k8s $cfg: /results/idemsim-sweep" "$results/idemsim-sweep" "$k8s_n"
    rc=0
    (cd "$tmp" && "${clean[@]}" "${k8s_merge_env[@]}" SEEDS=0..600 FORMAT=$fmt IDEMSIM_ROOT="$work" \
        RESULTS="$results" "${k8s_merge_cmd[@]}") >"$k8s/$cfg.out" 2>"$k8s/$cfg.err" || rc=$?
    same "k8s $cfg: the merge Job's log" "$key" "$k8s/$cfg.out" "$rc"
    same "k8s $cfg: the merge Job's report on the volume" "$key" "$results/idemsim-sweep/report.$ext" "$rc"
    if ((rc != 0)); then
        if in_list "${k8s_merge_failjob[@]}" "$rc"; then
            ok "k8s $cfg: the merge's exit $rc is a FailJob code (not retried)"
        else
            bad "k8s $cfg: the merge's exit $rc would be retried (FailJob codes: ${k8s_merge_failjob[*]})"
        fi
    fi
done
if ((k8s_n > 0)); then
    for bad_case in "JOB_COMPLETION_INDEX=$k8s_n" "JOB_COMPLETION_INDEX=0 SIM=sims/teaching/no-such-sim.toml" \
        "JOB_COMPLETION_INDEX=0 MODE=sweeep" "JOB_COMPLETION_INDEX=0 SEEDS=9..3" \
        "JOB_COMPLETION_INDEX=0 SIM=sims/catalogue/relay-crash.toml"; do
        read -ra extra <<<"$bad_case"
        rc=0
        pod /dev/null "$k8s/bad.err" "${sweep_cfg[@]}" RESULTS="$k8s/bad" "${extra[@]}" "${k8s_sweep_cmd[@]}" || rc=$?
        # 3: the sim injects at a point check-first lacks (does not apply); 2: bad input
        exits "k8s: a pod with $bad_case" "$([[ $bad_case == *relay-crash* ]] && echo 3 || echo 2)" "$rc" "$k8s/bad.err"
        in_list "${k8s_sweep_failjob[@]}" "$rc" || bad "k8s: exit $rc is not a FailJob code of the sweep Job"
    done
    rm -f "$k8s/sweep/idemsim-sweep/shard-2-of-$k8s_n.json"
    rc=0
    (cd "$tmp" && "${clean[@]}" "${k8s_merge_env[@]}" SEEDS=0..600 IDEMSIM_ROOT="$work" \
        RESULTS="$k8s/sweep" "${k8s_merge_cmd[@]}") >/dev/null 2>"$k8s/missing.err" || rc=$?
    exits "k8s: the merge Job with a shard missing" 2 "$rc" "$k8s/missing.err"
    in_list "${k8s_merge_failjob[@]}" "$rc" || bad "k8s: the merge's exit $rc is not a FailJob code"
fi

# ---------------------------------------------------------------- GitHub Actions

gh=$tmp/gh
wf=$root/deploy/github/nightly-sweep.yml
mkdir -p "$gh"
mapfile -t gh_shards < <("$python" "$root/tools/deploy-engines.py" gh-shards "$wf" 2>"$gh/shards.err" || true)
((${#gh_shards[@]} > 0)) || bad "github: $(cat "$gh/shards.err")"
for cfg in sweep matrix; do
    ((${#gh_shards[@]} > 0)) || break
    if [[ $cfg == sweep ]]; then vars=("${sweep_cfg[@]}"); else vars=("${matrix_cfg[@]}"); fi
    arts=$gh/$cfg/artifacts
    for k in "${gh_shards[@]}"; do
        rc=0
        "${clean[@]}" "$python" "$root/tools/deploy-engines.py" gh-job "$wf" shard "$k" "$root" \
            "$gh/$cfg/shard-$k" "$arts" "${vars[@]}" "IDEMSIM=$IDEMSIM" >/dev/null 2>"$gh/$cfg-$k.err" || rc=$?
        exits "github $cfg: matrix job shard=$k" 0 "$rc" "$gh/$cfg-$k.err"
    done
    rc=0
    "${clean[@]}" "$python" "$root/tools/deploy-engines.py" gh-job "$wf" merge "$root" \
        "$gh/$cfg/merge" "$arts" "${vars[@]}" "IDEMSIM=$IDEMSIM" >"$gh/$cfg.out" 2>"$gh/$cfg.err" || rc=$?
    files "github $cfg: the merge job's shards/ (downloaded)" "$gh/$cfg/merge/shards" "${#gh_shards[@]}"
    same "github $cfg: the merge job's report.txt" "$cfg" "$gh/$cfg/merge/report.txt" "$rc"
    summary=$gh/$cfg/merge.summary.md
    if [[ $cfg == matrix ]]; then
        same "github $cfg: report.md (a merge of merged.json)" matrix-md "$gh/$cfg/merge/report.md" "$rc"
        want=$tmp/ref/matrix-md.out
    else
        want=$tmp/ref/sweep.out
    fi
    if [[ -f $summary ]] && [[ $(grep -cxF -f "$want" "$summary") -ge $(wc -l <"$want") ]]; then
        ok "github $cfg: \$GITHUB_STEP_SUMMARY has the report"
    else
        bad "github $cfg: \$GITHUB_STEP_SUMMARY lacks the report"
    fi
done
if ((${#gh_shards[@]} > 0)); then
    rc=0
    "${clean[@]}" "$python" "$root/tools/deploy-engines.py" gh-job "$wf" shard 0 "$root" "$gh/bad/shard-0" \
        "$gh/bad/artifacts" "${sweep_cfg[@]}" MODEL=no-such-model "IDEMSIM=$IDEMSIM" >/dev/null 2>"$gh/bad.err" || rc=$?
    exits "github: a matrix job with a missing model" 2 "$rc" "$gh/bad.err"
fi

# ---------------------------------------------------------------- AWS Batch and GitLab

cli=$tmp/cli
mkdir -p "$cli"
# shard ENGINE_VARS... -- ARGS...: one array child, run from the project root
shard() {
    local -a vars=()
    while [[ $1 != -- ]]; do
        vars+=("$1")
        shift
    done
    shift
    (cd "$work" && "${clean[@]}" "${vars[@]}" "$IDEMSIM" "$@") >/dev/null 2>>"$cli/shards.err"
}
merge() { # OUT ARGS...: merge, run from the project root
    local o=$1
    shift
    (cd "$work" && "${clean[@]}" "$IDEMSIM" merge "$@") >"$o" 2>>"$cli/merge.err"
}
allok=1
for i in 0 1 2; do
    shard AWS_BATCH_JOB_ARRAY_INDEX=$i AWS_BATCH_JOB_ARRAY_SIZE=3 -- "${sweep_args[@]}" \
        --shard auto --out-dir "$cli/aws" || allok=0
done
if ((allok)); then
    ok "aws batch: 3 array children (AWS_BATCH_JOB_ARRAY_INDEX) exit 0"
else
    bad "aws batch: a child failed: $(cat "$cli/shards.err")"
fi
files "aws batch: --out-dir" "$cli/aws" 3
rc=0
merge "$cli/aws.out" "$cli"/aws/*.json --expect-seeds 0..600 || rc=$?
same "aws batch: merge" sweep "$cli/aws.out" "$rc"
# a merge of merges: shards 0 and 1 first (--out), then that with shard 2
merge /dev/null "$cli/aws/shard-0-of-3.json" "$cli/aws/shard-1-of-3.json" --out "$cli/part.json" --allow-partial || true
rc=0
merge "$cli/mom.out" "$cli/part.json" "$cli/aws/shard-2-of-3.json" --expect-seeds 0..600 || rc=$?
same "aws batch: a merge of (0+1) with 2" sweep "$cli/mom.out" "$rc"
rc=0
shard AWS_BATCH_JOB_ARRAY_INDEX=3 AWS_BATCH_JOB_ARRAY_SIZE=3 -- "${sweep_args[@]}" --shard auto --out-dir "$cli/bad" || rc=$?
exits "aws batch: AWS_BATCH_JOB_ARRAY_INDEX=3 of 3" 2 "$rc"

allok=1
for i in 1 2 3 4; do
    shard CI_NODE_INDEX=$i CI_NODE_TOTAL=4 -- "${matrix_args[@]}" --shard auto --out-dir "$cli/gitlab" || allok=0
done
if ((allok)); then
    ok "gitlab: 4 parallel jobs (CI_NODE_INDEX 1..4) exit 0"
else
    bad "gitlab: a job failed: $(cat "$cli/shards.err")"
fi
files "gitlab: --out-dir" "$cli/gitlab" 4
rc=0
merge "$cli/gitlab.out" "$cli"/gitlab/*.json --expect-seeds 0..600 --markdown || rc=$?
same "gitlab: merge --markdown" matrix-md "$cli/gitlab.out" "$rc"
rc=0
shard CI_NODE_INDEX=0 CI_NODE_TOTAL=4 -- "${matrix_args[@]}" --shard auto --out-dir "$cli/bad" || rc=$?
exits "gitlab: CI_NODE_INDEX=0 (it counts from 1)" 2 "$rc"

# ---------------------------------------------------------------- the CI gate recipe

# deploy/github/action (composite) and deploy/gitlab/idemsim.gitlab-ci.yml, their own steps
# (deploy-engines.py gh-action, gitlab-job) with the binary on PATH as an installed one is,
# on copies of examples/project (a user's checkout): its committed baseline passes, a design
# that regressed fails, a baseline is written, bad input is refused.
recipe=$tmp/recipe
mkdir -p "$recipe/bin"
ln -s "$IDEMSIM" "$recipe/bin/idemsim"
action=$root/deploy/github/action/action.yml
gitlab=$root/deploy/gitlab/idemsim.gitlab-ci.yml
# the example project's gate, as docs/ci.md's snippets set it
gate_with=(with.sims=sims "with.models=orders-api check-first" with.baseline=ci/baseline.json)
gate_vars=(IDEMSIM_SIMS=sims "IDEMSIM_MODELS=orders-api check-first" IDEMSIM_BASELINE=ci/baseline.json)
project() { # NAME: a fresh copy of examples/project, as $recipe/NAME (no artifacts yet)
    rm -rf "${recipe:?}/$1" "$recipe/$1.artifacts"
    cp -R "$root/examples/project" "$recipe/$1"
}
regress() { # NAME: orders-api becomes check-first under its name (a lookup before the write)
    sed 's/^name = "check-first"$/name = "orders-api"/' "$root/models/check-first.toml" \
        >"$recipe/$1/models/orders-api.toml"
}
gh_action() { # NAME with.INPUT=VALUE...: the action as a step of a job checked out in $recipe/NAME
    local name=$1
    shift
    "${clean[@]}" PATH="$recipe/bin:$PATH" "$python" "$root/tools/deploy-engines.py" gh-action "$action" \
        "$recipe/$name" "$recipe/$name.artifacts" "$@" >"$recipe/$name.out" 2>"$recipe/$name.err"
}
gl_job() { # NAME VAR=VALUE...: the template's .idemsim job in $recipe/NAME
    local name=$1
    shift
    "${clean[@]}" PATH="$recipe/bin:$PATH" "$python" "$root/tools/deploy-engines.py" gitlab-job "$gitlab" \
        .idemsim "$recipe/$name" "$@" >"$recipe/$name.out" 2>"$recipe/$name.err"
}
has() { # WHAT FILE TEXT: FILE holds TEXT
    if grep -qF -- "$3" "$2" 2>/dev/null; then ok "$1"; else bad "$1: no '$3' in ${2#"$recipe"/}"; fi
}

project gh-ok
rc=0
gh_action gh-ok "${gate_with[@]}" || rc=$?
exits "action: examples/project against its committed baseline" 0 "$rc" "$recipe/gh-ok.err"
report=$recipe/gh-ok.artifacts/idemsim-report
has "action: the report artifact says no regression" "$report/report.txt" "0 regression(s)"
has "action: replay commands name the installed idemsim" "$report/report.txt" "idemsim run "
if [[ -s $report/matrix.html ]]; then ok "action: matrix.html in the artifact"; else bad "action: no matrix.html in the artifact"; fi
has "action: the step summary" "$recipe/gh-ok.summary.md" "## idemsim matrix: exit 0"

project gh-bad
regress gh-bad
rc=0
gh_action gh-bad "${gate_with[@]}" || rc=$?
exits "action: a design that regressed fails the gate" 1 "$rc" "$recipe/gh-bad.err"
has "action: the report names the regression" "$recipe/gh-bad.artifacts/idemsim-report/report.txt" "REGRESSION orders-api"

project gh-new
rm "$recipe/gh-new/ci/baseline.json"
rc=0
gh_action gh-new "${gate_with[@]}" || rc=$?
exits "action: no baseline committed yet is bad input" 2 "$rc"
has "action: ... saying how to make one" "$recipe/gh-new.out" "update-baseline: true"
rc=0
gh_action gh-new "${gate_with[@]}" with.update-baseline=true with.report-name=new || rc=$?
exits "action: update-baseline: true writes it" 0 "$rc" "$recipe/gh-new.err"
if [[ -f $recipe/gh-new.artifacts/new/baseline.json ]]; then
    ok "action: the written baseline is in the artifact"
else
    bad "action: no baseline.json in the artifact"
fi
if cmp -s "$recipe/gh-new/ci/baseline.json" "$root/examples/project/ci/baseline.json"; then
    ok "action: examples/project/ci/baseline.json is what this build writes"
else
    bad "action: examples/project/ci/baseline.json is not what this build writes (regenerate it: docs/ci.md)"
fi

project gh-sweep
rc=0
gh_action gh-sweep with.command=sweep with.sims=checkout-double-click with.models=orders-api \
    with.baseline= with.seeds=0..100 || rc=$?
exits "action: command: sweep, no baseline (orders-api holds)" 0 "$rc" "$recipe/gh-sweep.err"
for bad_case in with.command=sweeep "with.command=sweep|with.models=a b" with.sims=no-such-sim "with.args=--jobs 0"; do
    IFS='|' read -ra extra <<<"$bad_case"
    project gh-input
    rc=0
    gh_action gh-input "${gate_with[@]}" "${extra[@]}" || rc=$?
    exits "action: $bad_case" 2 "$rc" "$recipe/gh-input.err"
done

project gl-ok
rc=0
gl_job gl-ok "${gate_vars[@]}" || rc=$?
exits "gitlab template: examples/project against its committed baseline" 0 "$rc" "$recipe/gl-ok.err"
has "gitlab template: the report artifact says no regression" "$recipe/gl-ok/idemsim-report/report.txt" "0 regression(s)"
project gl-bad
regress gl-bad
rc=0
gl_job gl-bad "${gate_vars[@]}" || rc=$?
exits "gitlab template: a design that regressed fails the gate" 1 "$rc" "$recipe/gl-bad.err"
has "gitlab template: the report names the regression" "$recipe/gl-bad/idemsim-report/report.txt" "REGRESSION orders-api"
project gl-input
rc=0
gl_job gl-input "${gate_vars[@]}" IDEMSIM_COMMAND=sweeep || rc=$?
exits "gitlab template: IDEMSIM_COMMAND=sweeep" 2 "$rc"

echo "deploy-check: $((SECONDS - started)) s"
echo "deploy-check: $passed passed, $failed failed"
((failed == 0))
