#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Latency of an acknowledged submit (p50/p99), one client over one connection, submits one
after the other: R=1 (one node: journaled) and R=2 (a 3-node cluster: journaled by the
owner and stored by its second holder before the ack), entry node = node 1.
    python3 bench/submit_latency.py [N] [ROUNDS]"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/integration"))
from harness import BIN, Cluster  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 400
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3


def measure(nodes):
    c = Cluster("latency")
    try:
        c.start("n1", "--cpus", "1")
        for i in range(2, nodes + 1):
            c.start(f"n{i}", "--cpus", "1", "--join", c.nodes["n1"]["address"])
        env = dict(c.env, MONKEY_ADDRESS=c.nodes["n1"]["address"])
        import subprocess
        out = subprocess.run([os.path.join(BIN, "submit_client"), str(N)], env=env,
                             capture_output=True, text=True, check=True, timeout=600).stdout
        return json.loads(out)
    finally:
        c.close()


def main():
    rows = {1: [], 2: []}
    for r in range(ROUNDS):
        for R, nodes in ((1, 1), (2, 3)):
            m = measure(nodes)
            rows[R].append(m)
            print(f"round {r + 1}: R={R} ({nodes} node{'s' if nodes > 1 else ''}): p50 "
                  f"{m['p50_ms']:.2f} ms, p99 {m['p99_ms']:.2f} ms, {m['per_second']:.0f} "
                  f"submits/s", flush=True)
    for R in (1, 2):
        p50 = statistics.median(m["p50_ms"] for m in rows[R])
        p99 = statistics.median(m["p99_ms"] for m in rows[R])
        print(f"median of {ROUNDS}: R={R}: acknowledged submit p50 {p50:.2f} ms, p99 {p99:.2f} ms")


main()
