#!/usr/bin/env bash
# Submit an idemsim sweep as a Slurm array of SHARDS tasks, then the merge that runs once every
# task has succeeded (--dependency=afterok). Run from the repository root:
#
#   deploy/slurm/submit.sh
#   SHARDS=16 SEEDS=0..1000000 MODEL=transactional deploy/slurm/submit.sh
#   MODE=matrix SIMS="sims/article sims/faults" SEEDS=0..10000 FORMAT=markdown deploy/slurm/submit.sh
#
# Every parameter of sweep.sbatch and merge.sbatch (MODE, SIM, MODEL, SIMS, MODELS, SEEDS,
# IDEMSIM, JOBS, FORMAT) is read from the environment and passed on to both jobs, plus:
#   SHARDS=4          the number of array tasks (shards)
#   OUT=$PWD/idemsim-results/<UTC time>   where the shards, the report and merged.json go
#   SBATCH=sbatch     the sbatch command (tools/deploy-check.sh puts a stand-in here)
# Extra arguments go to both sbatch calls (e.g. --partition=batch --account=me).
# Prints the two job ids.

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SBATCH=${SBATCH:-sbatch}
SHARDS=${SHARDS:-4}
if ! [[ $SHARDS =~ ^[1-9][0-9]*$ ]]; then
    echo "submit.sh: SHARDS must be a positive number, not '$SHARDS'" >&2
    exit 2
fi

# One value of each for both jobs, whatever their defaults.
export IDEMSIM_ROOT=${IDEMSIM_ROOT:-$PWD}
export SEEDS=${SEEDS:-0..100000}
export OUT=${OUT:-$IDEMSIM_ROOT/idemsim-results/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"

sweep=$("$SBATCH" --parsable --export=ALL --array="0-$((SHARDS - 1))" "$@" "$here/sweep.sbatch")
sweep=${sweep%%;*} # --parsable prints "id;cluster" on a multi-cluster setup
merge=$("$SBATCH" --parsable --export=ALL --dependency="afterok:$sweep" --kill-on-invalid-dep=yes \
    "$@" "$here/merge.sbatch")
merge=${merge%%;*}

echo "sweep: array job $sweep ($SHARDS tasks), merge: job $merge; results in $OUT" >&2
echo "$sweep $merge"
