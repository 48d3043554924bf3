#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the cluster benchmarks of two built trees side by side on this machine, interleaved
# (old, new, old, new …) so that both see the same noise: e.g. the commit before a change
# and the change itself.
#   git worktree add /tmp/before <commit> && bash /tmp/before/scripts/build
#   bash bench/before_after.sh /tmp/before .
# Each tree runs its own bench/*.py against its own build/bin (MONKEY_BIN_DIR). Prints each
# benchmark's summary lines under the tree's name; read the ratios, not the absolute times.
#   ROUNDS=2 TRIALS=10 NODES=30 bash bench/before_after.sh OLD NEW
set -uo pipefail
old=$(cd "${1:?usage: before_after.sh OLD_TREE NEW_TREE}" && pwd)
new=$(cd "${2:?usage: before_after.sh OLD_TREE NEW_TREE}" && pwd)
rounds=${ROUNDS:-2}
trials=${TRIALS:-10}
nodes=${NODES:-30}
for tree in "$old" "$new"; do
  for tool in monkey monkey-runtime spawn_loop tasks_client submit_client; do
    [ -x "$tree/build/bin/$tool" ] || {
      echo "before_after: $tree/build/bin/$tool is missing: build that tree first" \
           "(cmake --build $tree/build)" >&2
      exit 2
    }
  done
done
run() { # TREE LABEL SCRIPT ARGS… : the script's lines that carry figures
  local tree=$1 label=$2 script=$3
  shift 3
  echo "--- $label: $script $*"
  MONKEY_BIN_DIR="$tree/build/bin" timeout 1200 python3 "$tree/bench/$script" "$@" 2>&1 \
    | grep -E "[0-9]" | grep -vE "^\s*(#|Traceback)" | tail -n 12
}
for bench in "jobs_throughput.py 500 $rounds" "tasks_throughput.py $rounds" \
             "detection.py $trials plain" "adoption.py $trials" "cluster_scale.py $nodes 300"; do
  # shellcheck disable=SC2086
  run "$old" before $bench
  # shellcheck disable=SC2086
  run "$new" after $bench
done
