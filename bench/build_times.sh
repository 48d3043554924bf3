#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Where the build's time goes: builds from scratch without ccache into a scratch folder,
# timing every compile and link, then prints the wall time, the compile and link seconds,
# the slowest translation units and links, and the seconds per folder.
#   bash bench/build_times.sh                          everything (what scripts/test builds)
#   bash bench/build_times.sh monkey_demo_binaries     only what scripts/demo builds
#   BUILD_TYPE=Release JOBS=2 bash bench/build_times.sh [TARGET...]
# Extra cmake arguments: CMAKE_ARGS="-DCMAKE_CXX_FLAGS=-ftime-report" and the like.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(mktemp -d /tmp/monkey-build-times.XXXXXX)
log="$build/times.log"
wrap="$build/timed"
cat >"$wrap" <<'WRAP'
#!/usr/bin/env bash
# timed KIND CMD...: runs CMD and appends "seconds KIND output-file" to $MONKEY_TIMES_LOG.
kind=$1; shift
out=""; prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out=$a; prev=$a; done
t0=$(date +%s.%N)
status=0
"$@" || status=$?
t1=$(date +%s.%N)
case $out in /*) ;; *) out="$PWD/$out" ;; esac
echo "$(awk "BEGIN { print $t1 - $t0 }") $kind ${out#"$MONKEY_BUILD_ROOT"/}" >>"$MONKEY_TIMES_LOG"
exit $status
WRAP
chmod +x "$wrap"
export MONKEY_TIMES_LOG="$log" MONKEY_BUILD_ROOT="$build"
export CCACHE_DISABLE=1
: >"$log"
# shellcheck disable=SC2086
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
  -DMONKEY_BUILD_TESTS=ON "-DCMAKE_CXX_COMPILER_LAUNCHER=$wrap;compile" \
  "-DCMAKE_CUDA_COMPILER_LAUNCHER=$wrap;compile" "-DCMAKE_CXX_LINKER_LAUNCHER=$wrap;link" \
  ${CMAKE_ARGS:-} >/dev/null
t0=$(date +%s)
# shellcheck disable=SC2068
cmake --build "$build" -j "${JOBS:-2}" ${@:+--target $@} >"$build/build.log" 2>&1 || {
  tail -n 30 "$build/build.log"; echo "build_times: the build failed ($build/build.log)" >&2; exit 1; }
wall=$(( $(date +%s) - t0 ))
python3 - "$log" "$wall" "${JOBS:-2}" <<'PY'
import collections, sys
log, wall, jobs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = []
for line in open(log):
    sec, kind, out = (line.rstrip("\n").split(" ", 2) + [""])[:3]
    rows.append((float(sec), kind, out))
comp = [r for r in rows if r[1] == "compile"]
link = [r for r in rows if r[1] == "link"]
def name(out):  # CMakeFiles/<target>.dir/<source>.o -> <source>
    return out.split(".dir/", 1)[1][:-2] if ".dir/" in out else out
def folder(out):
    parts = out.split("/CMakeFiles/", 1)
    return parts[0] if len(parts) == 2 and parts[0] else "."
cs, ls = sum(r[0] for r in comp), sum(r[0] for r in link)
print(f"build_times: wall {wall} s on {jobs} jobs; {len(comp)} compiles {cs:.0f} s, "
      f"{len(link)} links {ls:.0f} s (sum {cs + ls:.0f} s)")
print("slowest compiles:")
for s, _, o in sorted(comp, reverse=True)[:20]:
    print(f"  {s:6.1f} s  {folder(o)}/{name(o)}")
print("slowest links:")
for s, _, o in sorted(link, reverse=True)[:8]:
    print(f"  {s:6.1f} s  {o}")
by = collections.defaultdict(lambda: [0.0, 0])
for s, _, o in comp:
    by[folder(o)][0] += s
    by[folder(o)][1] += 1
print("compile seconds per folder:")
for f, (s, n) in sorted(by.items(), key=lambda kv: -kv[1][0]):
    print(f"  {s:7.1f} s  {n:3d} TUs  {f}")
PY
echo "build_times: the build and its log are in $build (rm -rf it when done)"
