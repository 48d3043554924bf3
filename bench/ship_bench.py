#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Shipping data with a job through a real 3-node cluster (issue #13, docs/shipping.md),
against a plain copy, side by side in one run. For each SIZE: a folder of SIZE MB (random
bytes in 16 MB files) is shipped with `monkey submit --ship-data` to a job placed on
another node (by tag):
  - upload: the submit's wall time (pack + SHA-256, ship_have, chunks over CAF, the node's
    hash check and its copies to two more nodes);
  - again: the same submit once more (the bundle is in the cluster: nothing is sent);
  - start: from the submit's return to the job's first output line (placement, and the
    unpack into the scratch directory of the node that runs it: with 3 nodes every node
    holds a copy, so no fetch);
  - cp: `cp -r` of the same folder plus `sync -f`, the floor of any shipping on one disk.
Medians of ROUNDS; ratios against cp.
    python3 bench/ship_bench.py [ROUNDS] [SIZE_MB ...]      (default: 3 64 512)"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/integration"))
from harness import MONKEY, Cluster, wait_until  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
SIZES = [int(a) for a in sys.argv[2:]] or [64, 512]


def make_folder(root, mb):
    os.makedirs(root)
    left, i = mb, 0
    while left > 0:
        n = min(16, left)
        with open(os.path.join(root, f"part-{i}.bin"), "wb") as f:
            f.write(os.urandom(n << 20))
        left -= n
        i += 1


def timed(c, *args, cwd=None):
    t0 = time.monotonic()
    r = subprocess.run([MONKEY, *args], env=c.env, cwd=cwd, capture_output=True, text=True,
                       timeout=1800)
    if r.returncode != 0:
        raise SystemExit(f"monkey {' '.join(args)}: {r.stderr}")
    return time.monotonic() - t0, r.stdout.strip().splitlines()[-1], r.stderr


def started_s(c, job, since):
    def first_line():
        r = subprocess.run([MONKEY, "logs", job], env=c.env, capture_output=True, text=True)
        return r.returncode == 0 and "ready" in r.stdout
    wait_until(first_line, 600, "the job's first line", interval=0.02)
    return time.monotonic() - since


def main():
    c = Cluster("ship-bench")
    try:
        c.start("n1", "--cpus", "2")
        c.start("n2", "--cpus", "2", "--join", c.nodes["n1"]["address"])
        c.start("n3", "--cpus", "2", "--join", c.nodes["n1"]["address"], "--tags", "far")
        c.env["MONKEY_ADDRESS"] = c.nodes["n1"]["address"]
        wait_until(lambda: len(json.loads(subprocess.run(
            [MONKEY, "nodes", "--json"], env=c.env, capture_output=True, text=True).stdout)) == 3,
            30, "3 members")
        print(f"{'MB':>6} {'upload s':>9} {'MB/s':>7} {'again s':>8} {'start s':>8} {'cp s':>7} "
              f"{'upload/cp':>9}")
        for mb in SIZES:
            ups, agains, starts, cps = [], [], [], []
            for rnd in range(ROUNDS):
                scratch = tempfile.mkdtemp(dir=c.home)
                data = os.path.join(scratch, f"data{mb}-{rnd}")
                make_folder(data, mb)
                t0 = time.monotonic()
                subprocess.run(["cp", "-r", data, data + "-copy"], check=True)
                subprocess.run(["sync", "-f", data + "-copy"], check=True)
                cps.append(time.monotonic() - t0)
                cmd = ["--tag", "far", "--", "sh", "-c", "echo ready; sleep 1"]
                up, job, _ = timed(c, "submit", "--ship-data", data, "--ship-max", f"{mb + 64}M",
                                   *cmd)
                ups.append(up)
                starts.append(started_s(c, job, time.monotonic()))
                again, _, err = timed(c, "submit", "--ship-data", data, "--ship-max",
                                      f"{mb + 64}M", *cmd)
                if "in the cluster already" not in err:
                    raise SystemExit(f"the second submit uploaded again: {err}")
                agains.append(again)
                shutil.rmtree(scratch)
            up, again, start, cp = (statistics.median(x) for x in (ups, agains, starts, cps))
            print(f"{mb:>6} {up:>9.2f} {mb / up:>7.0f} {again:>8.2f} {start:>8.2f} {cp:>7.2f} "
                  f"{up / cp:>9.1f}", flush=True)
    finally:
        c.close()


if __name__ == "__main__":
    main()
