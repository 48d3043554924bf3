#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Trivial command jobs (/bin/true) end to end through one node, side by side in one run
with the bare posix_spawn+wait loop of the same machine (goal: >= 0.5x the bare loop).

End to end = from the first submit until the last job's final state is journaled, taken
from the journaled records (submitted_ms of the first job, updated_ms of the last).
    python3 bench/jobs_throughput.py [N] [ROUNDS]"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/integration"))
from harness import BIN, Cluster, wait_until  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 500
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3


def bare():
    out = subprocess.run([os.path.join(BIN, "spawn_loop"), str(N)], capture_output=True,
                         text=True, check=True).stdout
    return float(out.split(":")[1].split()[0])


def monkey(cpus):
    c = Cluster("bench")
    try:
        c.start("n1", "--cpus", str(cpus))
        c.monkey("submit", "--array", f"0-{N - 1}", "--", "/bin/true")
        jobs = c.wait_all_final(timeout=600)
        assert len(jobs) == N and all(j["state"] == "succeeded" for j in jobs)
        first = min(j["submitted_ms"] for j in jobs)
        last = max(j["updated_ms"] for j in jobs)
        return N / ((last - first) / 1000.0)
    finally:
        c.close()


def main():
    rows = []
    for r in range(ROUNDS):
        b = bare()
        m1 = monkey(1)
        m2 = monkey(2)
        rows.append((b, m1, m2))
        print(f"round {r + 1}: bare loop {b:.0f} jobs/s | monkey --cpus 1 {m1:.0f} jobs/s "
              f"({m1 / b:.2f}x) | monkey --cpus 2 {m2:.0f} jobs/s ({m2 / b:.2f}x)", flush=True)
    med = [statistics.median(x) for x in zip(*rows)]
    print(f"median of {ROUNDS}: bare {med[0]:.0f} jobs/s; monkey 1 slot {med[1]:.0f} jobs/s "
          f"= {med[1] / med[0]:.2f}x; monkey 2 slots {med[2]:.0f} jobs/s = {med[2] / med[0]:.2f}x "
          f"(goal >= 0.5x)")


main()
