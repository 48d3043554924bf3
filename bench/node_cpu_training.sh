#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What training jobs cost the nodes themselves: two fmnist jobs (single, batch 64, 9 epochs:
# 8,400 steps each, every step's metrics reported) side by side on a local 2-node cluster
# of 1 CPU each, three rounds; prints each round's wall time and the CPU time (utime +
# stime) the two monkey-runtime processes spent meanwhile (the jobs' own processes not
# counted), then the same two trainings as plain fmnist_train processes.
#   bash bench/node_cpu_training.sh [ROUNDS=3]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${MONKEY_BIN_DIR:-$root/build/bin}
rounds=${1:-3}
work=$(mktemp -d)
export MONKEY_HOME=$work/home
mkdir -p "$MONKEY_HOME"
unset MONKEY_ADDRESS MONKEY_SECRET_FILE
trap '"$bin/monkey" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
"$bin/monkey" up 2 --cpus 1 --no-measure >/dev/null
pids=$(pgrep -f "$bin/monkey-runtime" | tr '\n' ' ')
ticks() { for p in $pids; do awk '{print $14 + $15}' "/proc/$p/stat"; done | paste -sd+ | bc; }
hz=$(getconf CLK_TCK)
args=(--set strategy=single --set epochs=9 --set hidden=128 --set batch=64 --set lr=0.05)
for r in $(seq "$rounds"); do
  c0=$(ticks); t0=$(date +%s.%N)
  for s in 1 2; do "$bin/monkey" submit --app fmnist "${args[@]}" --seed "$s" --wait >/dev/null 2>&1 & done
  wait
  t1=$(date +%s.%N); c1=$(ticks)
  echo "round $r: 2 fmnist jobs wall $(echo "$t1 - $t0" | bc) s, the nodes' cpu $(echo "scale=2; ($c1 - $c0) / $hz" | bc) s"
done
t0=$(date +%s.%N)
for s in 1 2; do
  "$bin/fmnist_train" --epochs 9 --hidden 128 --batch 64 --lr 0.05 --seed "$s" --bound off >/dev/null &
done
wait
echo "the same as 2 fmnist_train processes: wall $(echo "$(date +%s.%N) - $t0" | bc) s"
