#!/usr/bin/env bash
# Checks the runtime stage of deploy/Dockerfile with a binary built on this machine: the image
# lists the shipped library from the binary (used in place, no cache written), runs as any user
# on a read-only root, checks a mounted project of its own (examples/project) against its
# committed baseline, and prints replay commands that start with `docker run`.
#
#   bash tools/image-check.sh [BINARY]      # default: target/release/idemsim
#
# The build stage (rust:1-bookworm, BuildKit cache mounts) is replaced by COPY of BINARY (built
# in its checkout, target/release/: the stage's /idemsim becomes that checkout's path), so
# this needs only a Docker daemon and a `debian:bookworm-slim` image (pulled, or imported from
# a debootstrap folder where Docker Hub is out of reach). BINARY must run on Debian bookworm's
# glibc. Without a daemon or that image it says so and exits 0 (CI machines have no daemon;
# .ci/run calls it all the same). Prints one line per check and "N passed, N failed"; exits 1 if any check failed.

set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${1:-$root/target/release/idemsim}
if ! docker info >/dev/null 2>&1; then
    echo "image-check: no Docker daemon here: skipped"
    exit 0
fi
if ! docker image inspect debian:bookworm-slim >/dev/null 2>&1 \
    && ! docker pull -q debian:bookworm-slim >/dev/null 2>&1; then
    echo "image-check: no debian:bookworm-slim image and none can be pulled: skipped"
    exit 0
fi
[[ -x $bin ]] || { echo "image-check: $bin: not an executable" >&2; exit 2; }

tag=idemsim-image-check
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$bin" "$ctx/idemsim"
cp -r "$root/sims" "$root/models" "$root/calibration" "$ctx/"
# The runtime stage as written, its binary copied in instead of built. The real build runs in
# /idemsim, the folder the runtime stage copies the library to (so the binary finds it there,
# byte for byte, and uses it in place); this binary was built in its checkout, so the stage's
# /idemsim becomes that folder.
built=$(cd "$(dirname "$bin")/../.." && pwd)
sed -n '/^FROM debian/,$p' "$root/deploy/Dockerfile" \
    | sed -e 's|^COPY --from=build /usr/local/bin/idemsim |COPY idemsim |' \
        -e "s|^WORKDIR /idemsim\$|WORKDIR $built|" >"$ctx/Dockerfile"
grep -q "^WORKDIR $built\$" "$ctx/Dockerfile" \
    || { echo "image-check: the runtime stage no longer works in /idemsim" >&2; exit 2; }
grep -q '^COPY idemsim /usr/local/bin/idemsim' "$ctx/Dockerfile" \
    || { echo "image-check: the runtime stage no longer copies the binary as expected" >&2; exit 2; }
docker build -q -t "$tag" "$ctx" >/dev/null

passed=0 failed=0
check() {
    local what=$1; shift
    if "$@"; then echo "ok   $what"; passed=$((passed + 1)); else echo "FAIL $what"; failed=$((failed + 1)); fi
}
run() { docker run --rm --read-only --user 4242:4242 "$@"; }
project=$(mktemp -d)
cp -r "$root/examples/project/." "$project/"
chmod -R a+rX "$project"

check "list: the shipped library from the binary, as any user on a read-only root" \
    bash -c "$(declare -f run); run $tag list | grep -q '^  check-first ' "
check "a mounted project passes its committed baseline" \
    bash -c "$(declare -f run); run -v '$project:/project' -w /project $tag -q matrix --sims sims \
        --models orders-api,check-first --baseline ci/baseline.json >/dev/null"
check "a project's own model is found by name" \
    bash -c "$(declare -f run); run -v '$project:/project' -w /project $tag list | grep -q '^  orders-api '"
check "replay commands start with docker run" \
    bash -c "$(declare -f run); run -v '$project:/project' -w /project $tag sweep check-first-race \
        --model check-first --seeds 0..50 2>/dev/null | grep -q 'replay: docker run --rm -v \"\$PWD:/project\" -w /project idemsim run '"
rm -rf "$project"
docker image rm -f "$tag" >/dev/null
echo "image-check: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
