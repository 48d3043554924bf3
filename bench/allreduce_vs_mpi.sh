#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue #11's all-reduce benchmark: Monkey's data plane (shm with heap tensors, shm with
# registered tensors from the shared arena: "shm-reg", and TCP) against OpenMPI's
# MPI_Allreduce (its default transports, and --mca btl self,tcp) and gloo (torch.distributed),
# float32 sum of 4 MB and 64 MB, 2 and 4 ranks, all in one run; then point-to-point against
# memcpy (shm with heap tensors: "shm-cma" where they went by address, and "shm-reg":
# registered ones, sent by reference) and a
# plain socket, and TCP wrapped in TLS against plain TCP. Prints every figure
# and the ratios. Installs the peers (apt) the
# first time: openmpi-bin, libopenmpi-dev, and python3-torch unless NO_GLOO=1.
#   bash bench/allreduce_vs_mpi.sh [ITERS]        (build/ must hold a Release-ish build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${MONKEY_BIN_DIR:-$root/build/bin}
iters=${1:-10}
sizes=1048576,16777216
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Debian's python3-torch lives in the system python (a pyenv python3 first on PATH lacks it).
torch_py() {
  for py in /usr/bin/python3 python3; do
    if "$py" -c 'import torch' 2>/dev/null; then echo "$py"; return 0; fi
  done
  return 1
}
need=()
command -v mpicc >/dev/null || need+=(openmpi-bin libopenmpi-dev)
if [ "${NO_GLOO:-0}" != 1 ] && ! torch_py >/dev/null; then need+=(python3-torch); fi
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]} (bench peers only)" >&2
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
mpicc -O2 -o "$work/mpi_allreduce" "$root/bench/mpi_allreduce.c"

"$bin/monkey" certs --dir "$work/certs" >/dev/null
dp() { # world transport mode sizes [dp_ranks flags...]
  local d w=$1 t=$2 m=$3 s=$4; shift 4
  d=$(mktemp -d -p "$work")
  for r in $(seq 0 $((w - 1))); do
    "$bin/dp_ranks" --rank "$r" --world "$w" --dir "$d" --transport "$t" --mode "$m" \
      --sizes "$s" --iters "$iters" "$@" > "$d/out-$r" 2>&1 &
  done
  wait
  cat "$d/out-0" | grep -E "^(allreduce|p2p)" || { cat "$d"/out-*; return 1; }
}
mpi() { # world [mca...]
  local w=$1; shift
  mpirun --allow-run-as-root --oversubscribe -np "$w" "$@" "$work/mpi_allreduce" "$sizes" "$iters" \
    2>/dev/null | sed "s/transport=mpi/transport=mpi${MPI_LABEL:-}/"
}

{
  for w in 2 4; do
    dp "$w" shm bench "$sizes"
    dp "$w" shm bench "$sizes" --registered all
    dp "$w" tcp bench "$sizes"
    dp "$w" tcp bench "$sizes" --tls-dir "$work/certs"
    MPI_LABEL=-default mpi "$w"
    MPI_LABEL=-tcp mpi "$w" --mca pml ob1 --mca btl self,tcp
    if [ "${NO_GLOO:-0}" != 1 ] && py=$(torch_py); then
      "$py" "$root/bench/gloo_allreduce.py" "$w" "$sizes" "$iters" 2>/dev/null || true
    fi
  done
  dp 2 shm p2p 2,1048576,16777216
  dp 2 shm p2p 2,1048576,16777216 --registered all
  dp 2 tcp p2p 2,1048576,16777216
} | tee "$work/figures"

"$bin/dp_p2p" 200 8 4194304 67108864 2>/dev/null | sed 's/^/dp_p2p: /' || true

python3 - "$work/figures" <<'PY'
import re, sys
rows = {}
for line in open(sys.argv[1]):
    if not line.startswith("allreduce"):
        continue
    f = dict(kv.split("=") for kv in line.split()[1:])
    rows[(f["transport"], int(f["ranks"]), int(f["bytes"]))] = float(f["algbw_GBps"])
print("\nall-reduce algorithm bandwidth, GB/s (ratio to the MPI peer named)")
print(f"{'ranks':>5} {'size':>6} {'shm':>7} {'shm-reg':>7} {'tcp':>7} {'tls':>7} {'mpi-def':>8}"
      f" {'mpi-tcp':>8} {'gloo':>7} {'shm/mpi-def':>12} {'reg/mpi-def':>12} {'tcp/mpi-tcp':>12}"
      f" {'tls/tcp':>8} {'shm/gloo':>9}")
for w in (2, 4):
    for b in (4194304, 67108864):
        g = lambda t: rows.get((t, w, b))
        fmt = lambda v: f"{v:7.2f}" if v else "      -"
        ratio = lambda a, c: f"{a / c:12.2f}" if a and c else "           -"
        print(f"{w:>5} {b >> 20:>4}MB {fmt(g('shm'))} {fmt(g('shm-reg'))} {fmt(g('tcp'))} "
              f"{fmt(g('tls'))} {fmt(g('mpi-default')):>8} {fmt(g('mpi-tcp')):>8} {fmt(g('gloo'))} "
              f"{ratio(g('shm'), g('mpi-default'))} {ratio(g('shm-reg'), g('mpi-default'))} "
              f"{ratio(g('tcp'), g('mpi-tcp'))} "
              f"{ratio(g('tls'), g('tcp'))[4:]} {ratio(g('shm'), g('gloo'))[3:]}")
PY
