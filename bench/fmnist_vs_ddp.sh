#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue #12's training benchmark, side by side in one run on this machine: the fmnist app
# (784-512-256-10, global batch 256, SGD lr 0.05 momentum 0.9, one BLAS thread per worker)
# on a local 2-node Monkey cluster, every strategy on 1 worker, `allreduce`, `ps-sync` and
# `ps-async` (2 servers, colocated) on 2 workers, and the heterogeneous case (worker 1
# throttled to half speed: split=speed against split=equal, with allreduce and ps-async),
# against
# PyTorch (python3-torch: one process, and DistributedDataParallel over gloo with 2
# processes; one thread per process; the same model, data, batch and optimizer), plus the
# compute bound (GEMM FLOP/s ÷ FLOPs per sample, bench of fmnist_train with 1 thread).
# Prints training throughput (median samples/s), time to 85 % test accuracy and the ratios.
# Installs python3-torch (bench peer only) the first time.
#   bash bench/fmnist_vs_ddp.sh [EPOCHS_FOR_THROUGHPUT]
# The BLAS kernels follow the environment (OPENBLAS_CORETYPE; fmnist_train prints which).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${MONKEY_BIN_DIR:-$root/build/bin}
epochs=${1:-2}
torch_py() {
  for py in /usr/bin/python3 python3; do
    if "$py" -c 'import torch' 2>/dev/null; then echo "$py"; return 0; fi
  done
  return 1
}
if ! torch_py >/dev/null; then
  echo "installing python3-torch (bench peer only)" >&2
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch >/dev/null
fi
py=$(torch_py)
work=$(mktemp -d)
export MONKEY_HOME=$work/home
mkdir -p "$MONKEY_HOME"
unset MONKEY_ADDRESS MONKEY_SECRET_FILE
trap '"$bin/monkey" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
"$bin/monkey" up 2 >/dev/null

# One Monkey run: prints "train impl=monkey-NAME workers=W samples_per_s=… time_to_target_s=…".
monkey_run() { # name workers epochs target [--set k=v ...]
  local job name=$1 workers=$2 epochs=$3 target=$4
  shift 4
  job=$("$bin/monkey" submit --app fmnist --workers "$workers" --cpus 1 \
        --set epochs="$epochs" --set target_accuracy="$target" --seed 1 "$@" --wait 2>/dev/null | tail -1)
  "$py" - "$bin/monkey" "$job" "$name" "$workers" <<'PY'
import json, statistics, subprocess, sys
monkey, job, name, workers = sys.argv[1:]
def series(key):
    out = subprocess.run([monkey, "show", job, "--metric", key, "--json"], capture_output=True,
                         text=True, check=True).stdout
    return [p["value"] for p in json.loads(out)["series"] if p.get("rank", 0) == 0]
rates = series("samples_per_s")[5:]
ttt = series("time_to_target_s")
acc = series("test_accuracy")
print(f"train impl=monkey-{name} workers={workers} samples_per_s={statistics.median(rates):.0f} "
      f"time_to_target_s={ttt[0]:.1f}" if ttt else
      f"train impl=monkey-{name} workers={workers} samples_per_s={statistics.median(rates):.0f} "
      f"time_to_target_s=none", f"final_accuracy={acc[-1]:.4f}" if acc else "")
PY
}
ps2=(--set servers=2)

{
  "$bin/fmnist_train" --epochs 1 --threads 1 | sed -n '1p;$p'
  echo "-- throughput ($epochs epochs), 1 worker"
  monkey_run single 1 "$epochs" 0 --set strategy=single
  monkey_run allreduce 1 "$epochs" 0 --set strategy=allreduce
  monkey_run ps-sync 1 "$epochs" 0 --set strategy=ps-sync
  monkey_run ps-async 1 "$epochs" 0 --set strategy=ps-async
  "$py" "$root/bench/ddp_fmnist.py" 1 "$epochs" | grep '^train'
  echo "-- throughput ($epochs epochs), 2 workers (parameter servers: 2, colocated)"
  monkey_run allreduce 2 "$epochs" 0 --set strategy=allreduce
  monkey_run ps-sync 2 "$epochs" 0 --set strategy=ps-sync "${ps2[@]}"
  monkey_run ps-async 2 "$epochs" 0 --set strategy=ps-async "${ps2[@]}"
  "$py" "$root/bench/ddp_fmnist.py" 2 "$epochs" | grep '^train'
  echo "-- heterogeneous: worker 1 throttled to half speed (allreduce, 2 workers)"
  monkey_run hetero-speed 2 "$epochs" 0 --set strategy=allreduce --set throttle=1:2 --set split=speed
  monkey_run hetero-equal 2 "$epochs" 0 --set strategy=allreduce --set throttle=1:2 --set split=equal
  echo "-- heterogeneous: the same with ps-async (2 servers, colocated, staleness 4)"
  monkey_run hetero-async-speed 2 "$epochs" 0 --set strategy=ps-async "${ps2[@]}" --set throttle=1:2 --set split=speed
  monkey_run hetero-async-equal 2 "$epochs" 0 --set strategy=ps-async "${ps2[@]}" --set throttle=1:2 --set split=equal
  echo "-- time to 85 % test accuracy (at most 10 epochs)"
  monkey_run single 1 10 0.85 --set strategy=single
  "$py" "$root/bench/ddp_fmnist.py" 1 10 0.85 | grep '^train'
  monkey_run allreduce 2 10 0.85 --set strategy=allreduce
  monkey_run ps-sync 2 10 0.85 --set strategy=ps-sync "${ps2[@]}"
  monkey_run ps-async 2 10 0.85 --set strategy=ps-async "${ps2[@]}"
  "$py" "$root/bench/ddp_fmnist.py" 2 10 0.85 | grep '^train'
} | tee "$work/out.txt"

"$py" - "$work/out.txt" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
bound = next((float(m.group(1)) for l in lines if (m := re.search(r"bound_samples_per_s=(\d+)", l))), None)
rows = [dict(kv.split("=") for kv in l.split()[1:] if "=" in kv) for l in lines if l.startswith("train impl=")]
thr, ttt = rows[:13], rows[13:]
def rate(rs, impl, workers):
    return next(float(r["samples_per_s"]) for r in rs if r["impl"] == impl and r["workers"] == str(workers))
def time(rs, impl, workers):
    v = next(r["time_to_target_s"] for r in rs if r["impl"] == impl and r["workers"] == str(workers))
    return None if v == "none" else float(v)
print("\nratios (same run):")
for s in ("single", "allreduce", "ps-sync", "ps-async"):
    print(f"  {s:9}, 1 worker:  monkey / pytorch = {rate(thr, 'monkey-' + s, 1) / rate(thr, 'pytorch', 1):.2f}"
          + (f";  vs the compute bound ({bound:.0f} samples/s, 1 thread) = "
             f"{rate(thr, 'monkey-' + s, 1) / bound:.2f}   (goal >= 0.9)" if bound else ""))
for s in ("allreduce", "ps-sync", "ps-async"):
    print(f"  {s:9}, 2 workers: monkey / pytorch-ddp = "
          f"{rate(thr, 'monkey-' + s, 2) / rate(thr, 'pytorch-ddp', 2):.2f}"
          + ("   (goal >= 1.3)" if s == "allreduce" else ""))
print(f"  heterogeneous (worker 1 at half speed): split=speed / split=equal = "
      f"{rate(thr, 'monkey-hetero-speed', 2) / rate(thr, 'monkey-hetero-equal', 2):.2f}   (goal >= 1.3)")
print(f"  the same with ps-async: split=speed / split=equal = "
      f"{rate(thr, 'monkey-hetero-async-speed', 2) / rate(thr, 'monkey-hetero-async-equal', 2):.2f}")
for a, w, b in (("monkey-single", 1, "pytorch"), ("monkey-allreduce", 2, "pytorch-ddp"),
                ("monkey-ps-sync", 2, "pytorch-ddp"), ("monkey-ps-async", 2, "pytorch-ddp")):
    ta, tb = time(ttt, a, w), time(ttt, b, w)
    print(f"  time to 85 %: {a} {ta if ta else float('nan'):.1f} s, {b} {tb if tb else float('nan'):.1f} s"
          + (f": speed-up {tb / ta:.2f}x" if ta and tb else ""))
PY
