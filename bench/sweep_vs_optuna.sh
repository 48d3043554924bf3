#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue #13's benchmark: Monkey's random, tpe and asha sweeps against Optuna's TPE (unpruned,
# and with its median pruner) on the same Fashion-MNIST training — a PyTorch script as a
# command job (OBJECTIVE torch), the fmnist app (fmnist), or both — in one run
# (bench/sweep_vs_optuna.py says what is measured). Installs the peers (python3-optuna, and
# python3-torch for torch) the first time; needs a build (bash scripts/build).
#   bash bench/sweep_vs_optuna.sh [SEEDS=3] [TRIALS=10] [EPOCHS=9] [PARALLEL=2] [OBJECTIVE=both]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${MONKEY_BIN_DIR:-$root/build/bin}
need=()
/usr/bin/python3 -c 'import optuna' 2>/dev/null || need+=(python3-optuna)
[ "${5:-both}" = fmnist ] || /usr/bin/python3 -c 'import torch' 2>/dev/null || need+=(python3-torch)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]} (bench peers only)" >&2
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
[ -x "$bin/tpe_overhead" ] && [ -x "$bin/fmnist_train" ] || { echo "build first: bash scripts/build" >&2; exit 1; }
exec /usr/bin/python3 "$root/bench/sweep_vs_optuna.py" "$bin" "$@"
