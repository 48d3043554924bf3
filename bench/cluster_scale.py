#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Cluster figures on one machine, real processes:

1. `monkey up NODES` (default 50): seconds until every node sees NODES alive, and the RSS
   of each idle node after 10 s (goal <= 30 MB per node).
2. Submit throughput from one client with R=2 versus R=1 (3 nodes each time): jobs
   acknowledged per second, each ack meaning the record is durable on its R holders.
    python3 bench/cluster_scale.py [NODES] [SUBMITS]"""
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/integration"))
from harness import BIN, Cluster, rss_mb  # noqa: E402

NODES = int(sys.argv[1]) if len(sys.argv) > 1 else 50
SUBMITS = int(sys.argv[2]) if len(sys.argv) > 2 else 300


def scale():
    c = Cluster("bench-scale")
    try:
        t0 = time.time()
        out = c.monkey("up", str(NODES), "--no-measure", "--cpus", "1", "--timeout", "600",
                       "--json", timeout=900)
        took = time.time() - t0
        nodes = json.loads(out.stdout)["nodes"]
        time.sleep(10)
        rss = [rss_mb(n["pid"]) for n in nodes]
        print(f"{NODES} nodes: every node sees {NODES} alive {took:.1f} s after `monkey up` "
              f"started; idle RSS per node median {statistics.median(rss):.1f} MB, max "
              f"{max(rss):.1f} MB (goal <= 30 MB)", flush=True)
    finally:
        c.monkey("down", check_rc=False, timeout=300)
        c.close()


def submits(replicas):
    c = Cluster(f"bench-submit-r{replicas}")
    try:
        c.monkey("up", "3", "--no-measure", "--cpus", "4", "--", "--replicas", str(replicas),
                 timeout=120)
        env = dict(c.env)
        env.pop("MONKEY_ADDRESS", None)  # the cluster file: the first node is the entry
        out = subprocess.run([os.path.join(BIN, "submit_client"), str(SUBMITS)], env=env,
                             capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            raise RuntimeError(out.stderr)
        return json.loads(out.stdout)["per_second"]
    finally:
        c.monkey("down", check_rc=False, timeout=120)
        c.close()


def main():
    scale()
    rows = []
    for r in range(3):
        r1 = submits(1)
        r2 = submits(2)
        rows.append((r1, r2))
        print(f"round {r + 1}: submits acknowledged per second from one client: R=1 {r1:.0f}, "
              f"R=2 {r2:.0f} ({r2 / r1:.2f}x)", flush=True)
    m1 = statistics.median(x[0] for x in rows)
    m2 = statistics.median(x[1] for x in rows)
    print(f"median of 3: R=1 {m1:.0f}/s, R=2 {m2:.0f}/s = {m2 / m1:.2f}x of R=1")


main()
