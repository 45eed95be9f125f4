#!/usr/bin/env bash
# Sensitivity of the README's headline rates to their main knobs: each row re-runs one cell
# with one knob changed (all else as shipped) and prints the share of seeds with a violation.
# Run from the repository root after `cargo build --release`:
#   bash tools/calibrate/sensitivity.sh > /tmp/sensitivity.md
set -euo pipefail
BIN=${BIN:-./target/release/idemsim}
SEEDS=${SEEDS:-0..200}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# rate SIM MODEL: "k/n (p%)" of seeds with a violation that is not policy-permitted.
rate() {
  "$BIN" sweep "$1" --model "$2" --seeds "$SEEDS" --json 2>/dev/null | python3 -c '
import json, sys
c = json.load(sys.stdin)
k, n = c["violating_seeds"], c["runs"]
print(f"{k}/{n} ({100 * k / n:.0f}%)")' || true
}

# variant FILE SED-EXPR: a copy of FILE with one line changed.
variant() {
  local out="$TMP/$(basename "$1" .toml)-$RANDOM.toml"
  sed "$2" "$1" > "$out"
  echo "$out"
}

# with_driver MODEL LINE: a copy of MODEL whose [driver] sets LINE over its stack's value.
with_driver() {
  local out="$TMP/$(basename "$1" .toml)-$RANDOM.toml"
  { cat "$1"; printf '\n[driver]\n%s\n' "$2"; } > "$out"
  echo "$out"
}

# on_stack MODEL SED-EXPR: a copy of MODEL on a copy of its stack (node-sqlite-sync) with one
# line changed.
on_stack() {
  local stack
  stack=$(variant stacks/node-sqlite-sync.toml "$2")
  variant "$1" "s|^stack = .*|stack = \"$stack\"|"
}

case11=sims/article/11-twenty-concurrent-one-process.toml
case12=sims/article/12-twenty-concurrent-two-processes.toml

echo "### check-first × 11-twenty-concurrent-one-process: arrival window of the burst (spread_ms)"
echo
echo "| spread_ms | seeds with a violation |"
echo "|---|---|"
for s in "0, 0" "0, 0.1" "0, 0.5" "0, 1.7" "0, 2.8" "0, 10"; do
  f=$(variant $case11 "s/^spread_ms = .*/spread_ms = [$s]/")
  mark=""; [ "$s" = "0, 1.7" ] && mark=" (shipped)"
  echo "| [$s]$mark | $(rate "$f" check-first) |"
done
echo
echo "### check-first × 11-twenty-concurrent-one-process: the client's write after connecting (world.connect_gap_ms)"
echo
echo "| connect_gap_ms | seeds with a violation |"
echo "|---|---|"
for g in "0.01, 0.1" "0.05, 0.6" "0.2, 1" "1, 5"; do
  f=$(variant $case11 "s/^connect_gap_ms = .*/connect_gap_ms = [$g]/")
  mark=""; [ "$g" = "0.05, 0.6" ] && mark=" (shipped)"
  echo "| [$g]$mark | $(rate "$f" check-first) |"
done
echo
echo "### check-first × 11-twenty-concurrent-one-process: the first connection's accept (the stack's runtime.first_accept_ms)"
echo
echo "| first_accept_ms | seeds with a violation |"
echo "|---|---|"
echo "| measured quantiles, p50 1.68 (shipped: a fresh process) | $(rate $case11 check-first) |"
for h in "0.02, 0.17" "0.18, 0.45" "1, 2"; do
  m=$(on_stack models/check-first.toml "s/^first_accept_ms = .*/first_accept_ms = [$h]/")
  mark=""; [ "$h" = "0.18, 0.45" ] && mark=" (shipped until 2026-12-06: stamped after the accept's work)"
  [ "$h" = "0.02, 0.17" ] && mark=" (as warm as any other accept)"
  echo "| [$h]$mark | $(rate $case11 "$m") |"
done
echo
echo "### check-first × 11 and × 12: a connection that wakes the idle loop preempts its client (the stack's runtime.wake_preempts)"
echo
echo "| wake_preempts | case 11 (one process) | case 12 (two processes) |"
echo "|---|---|---|"
for w in 0 0.05 0.157 0.3 0.6 1; do
  m=$(on_stack models/check-first.toml "s/^wake_preempts = .*/wake_preempts = $w/")
  mark=""; [ "$w" = "0.157" ] && mark=" (shipped: 47 of 300 measured)"
  [ "$w" = "0" ] && mark=" (never: the world before 2026-12-06)"
  echo "| $w$mark | $(rate $case11 "$m") | $(rate $case12 "$m") |"
done
echo
echo "### check-first × 11 and × 12: the commit's journal sync (driver.commit_ms)"
echo
echo "| driver.commit_ms | case 11 (one process) | case 12 (two processes) |"
echo "|---|---|---|"
for c in "0, 0" "0.006, 0.013" "0.71, 0.87" "5, 10"; do
  m=$(with_driver models/check-first.toml "commit_ms = [$c]")
  mark=""; [ "$c" = "0.71, 0.87" ] && mark=" (shipped)"
  [ "$c" = "0.006, 0.013" ] && mark=" (WAL, synchronous = NORMAL)"
  echo "| [$c]$mark | $(rate $case11 "$m") | $(rate $case12 "$m") |"
done
echo
echo "### check-first × double-submit: network latency (world.latency_ms)"
echo
echo "| world.latency_ms | seeds with a violation |"
echo "|---|---|"
for l in "0.03, 0.055" "0.05, 0.25" "0.5, 2" "1, 10"; do
  a=$(variant sims/faults/double-submit.toml "s/^latency_ms = .*/latency_ms = [$l]/")
  mark=""; [ "$l" = "0.05, 0.25" ] && mark=" (shipped)"
  echo "| [$l]$mark | $(rate "$a" check-first) |"
done
echo
echo "### check-first and no-key × proxy-resend: when the resent copy leaves (faults.duplicate_after_ms)"
echo
echo "| faults.duplicate_after_ms | check-first | no-key |"
echo "|---|---|---|"
for d in "0, 0" "0, 0.1" "0, 1" "0, 24" "100, 250"; do
  f=$(variant sims/faults/proxy-resend.toml "s/^duplicate_after_ms = .*/duplicate_after_ms = [$d]/")
  mark=""; [ "$d" = "0, 24" ] && mark=" (shipped)"
  echo "| [$d]$mark | $(rate "$f" check-first) | $(rate "$f" no-key) |"
done
echo
echo "### lease × clock-skew: how far the two processes' clocks disagree (world.clock_skew_ms)"
echo
echo "| world.clock_skew_ms | lease | lease-fencing |"
echo "|---|---|---|"
for k in "0, 0" "-2, 2" "-50, 50" "-250, 250" "-500, 500" "-1000, 1000"; do
  f=$(variant sims/dependencies/clock-skew.toml "s/^clock_skew_ms = .*/clock_skew_ms = [$k]/")
  mark=""; [ "$k" = "-1000, 1000" ] && mark=" (shipped)"
  [ "$k" = "-2, 2" ] && mark=" (EC2 with Amazon Time Sync)"
  [ "$k" = "-50, 50" ] && mark=" (internet NTP)"
  echo "| [$k]$mark | $(rate "$f" lease) | $(rate "$f" lease-fencing) |"
done
