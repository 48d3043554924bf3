#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What a running sweep's driver costs the nodes while its trials report nothing: a local
# 3-node cluster (4 CPUs each) settles for 25 s, then the CPU ticks (utime + stime, 1/100 s)
# of each monkey-runtime over 15 s idle, then over 15 s of four `sleep 40` plain jobs, then over
# 15 s of a sweep of four `sleep 40` trials (from 4 s after `monkey sweep start`; its
# optimizer actor runs inside the node that holds the sweep, whose ticks include it), and the
# driver's count of rounds and reads.
#   bash bench/sweep_idle_cpu.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${MONKEY_BIN_DIR:-$root/build/bin}
work=$(mktemp -d)
export MONKEY_HOME=$work/home PATH=$bin:$PATH
mkdir -p "$MONKEY_HOME"
unset MONKEY_ADDRESS MONKEY_SECRET_FILE
trap 'monkey down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
monkey up 3 --cpus 4 --no-measure >/dev/null
sleep 25
pids=$(pgrep -f "$bin/monkey-runtime" | tr '\n' ' ')
ticks() { for p in $pids; do awk '{print $14 + $15}' "/proc/$p/stat"; done; }
over15() {
  local a b
  a=($(ticks)); sleep 15; b=($(ticks))
  for i in "${!a[@]}"; do printf '%s ' $((b[i] - a[i])); done
}
echo "nodes idle, ticks per 15 s:         $(over15)"
# The same four sleeping processes as plain jobs: what running them costs, sweep or not
# (the nodes sample each attempt's resources and store the points).
jobs=()
for i in 1 2 3 4; do jobs+=("$(monkey submit -- sh -c "sleep 40")"); done
sleep 4
echo "nodes with four plain jobs:         $(over15)"
for j in "${jobs[@]}"; do monkey cancel "$j" >/dev/null 2>&1 || true; done
sleep 3
cat >"$work/s.yaml" <<'YAML'
name: idle
trial: {command: [sh, -c, "sleep 40; echo MONKEY_METRIC step=1 acc={x}"]}
space:
  x: {type: uniform, low: 0, high: 1}
metric: {name: acc, goal: maximize}
algorithm: {name: random, seed: 1}
budget: {trials: 4}
parallel: 4
ship: false
YAML
sweep=$(cd "$work" && monkey sweep start s.yaml)
sleep 4
echo "nodes with the sweep (four trials): $(over15)"
monkey sweep stop "$sweep" >/dev/null 2>&1 || true
sleep 2
monkey logs --err "$sweep" 2>&1 | grep "sweep: finished" || true
