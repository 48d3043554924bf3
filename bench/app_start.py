#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""App job start latency against a command job's, on one node (issue #10): the time from
`monkey submit` to every rank running, for 1, 2 and 4 workers of `hello`, and from submit to
a command job's process running. "Running" is read from the node's own records: an app
rank's first log line (written by the rank's actor once the host has connected back,
authenticated and started it), and a command job's output (`date +%s.%N`); both carry wall-clock
times. Side by side in one run, medians of ROUNDS.
    python3 bench/app_start.py [ROUNDS]"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/integration"))
from harness import Cluster, wait_until  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 10


def rank_start_s(c, job, rank):
    """Seconds since the epoch of the rank's first log line (HH:MM:SS.mmm, today)."""
    def first():
        out = c.monkey("logs", job, "--rank", str(rank), check_rc=False).stdout
        return out.splitlines()[0] if out else None
    line = wait_until(first, 60, f"rank {rank} to log")
    hms = line.split()[0]
    h, m, s = hms.split(":")
    lt = time.localtime()
    midnight = time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, 0, 0, 0, 0, 0, -1))
    return midnight + int(h) * 3600 + int(m) * 60 + float(s)


def main():
    c = Cluster("app-start")
    try:
        c.start("n1", "--cpus", "4")
        rows = {"command": [], 1: [], 2: [], 4: []}
        for _ in range(ROUNDS):
            t0 = time.time()
            job = c.submit("--", "date", "+%s.%N")
            out = wait_until(lambda: c.monkey("logs", job).stdout.strip() or None, 60, "output")
            rows["command"].append(float(out.split()[0]) - t0)
            for w in (1, 2, 4):
                t0 = time.time()
                job = c.submit("--app", "hello", "--workers", str(w), "--set", "steps=1",
                               "--set", "samples=1")
                last = max(rank_start_s(c, job, r) for r in range(w))
                rows[w].append(last - t0)
                c.wait_final(job, 60)
        cmd = statistics.median(rows["command"])
        print(f"command job: submit → its process runs: median {cmd * 1000:.0f} ms")
        for w in (1, 2, 4):
            m = statistics.median(rows[w])
            print(f"app hello, {w} worker{'s' if w > 1 else ''}: submit → every rank running: "
                  f"median {m * 1000:.0f} ms ({m / cmd:.1f}x the command job's)")
    finally:
        c.close()


main()
