#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Gang placement throughput (issue #10): N gangs queued at once on a 3-node cluster of 2
cpus each, every gang 4 workers of 1 cpu running `true` (it spans two whole nodes, so one
gang runs at a time: leases, commit, parts, polls, end, for each), against the same number
of single command jobs of 2 cpus (one whole node each: three at a time). Both measured
from the first submit to the last final state, side by side in one run.
    python3 bench/gang_place.py [N]        (default 100)"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/integration"))
from harness import Cluster, wait_until  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 100


def wait_done(c, ids, timeout):
    finals = {"succeeded", "failed", "cancelled", "timed_out", "lost", "stopped"}
    want = set(ids)

    def done():
        js = [j for j in c.jobs() if j["id"] in want]
        return len(js) == len(want) and all(j["state"] in finals for j in js) and js
    return wait_until(done, timeout, "the jobs to finish", interval=0.5)


def run_batch(c, args_per_job):
    t0 = time.time()
    ids = [c.submit(*a) for a in args_per_job]
    submitted = time.time() - t0
    js = wait_done(c, ids, 1800)
    took = time.time() - t0
    ok = sum(1 for j in js if j["state"] == "succeeded")
    return took, submitted, ok


def main():
    c = Cluster("gang-place")
    try:
        c.start("n1", "--cpus", "2")
        for n in ("n2", "n3"):
            c.start(n, "--cpus", "2", "--join", c.nodes["n1"]["address"])
        wait_until(lambda: len(c.monkey("nodes", "--json").stdout) > 0 and
                   c.monkey("nodes").stdout.count("alive") >= 3, 30, "three members")
        gangs = [("--workers", "4", "--cpus", "1", "--", "true")] * N
        singles = [("--cpus", "2", "--", "true")] * N
        g_took, g_sub, g_ok = run_batch(c, gangs)
        s_took, s_sub, s_ok = run_batch(c, singles)
        print(f"{N} gangs of 4 workers (two nodes each) on 3 nodes: {g_took:.1f} s "
              f"({N / g_took:.1f} gangs/s; submits took {g_sub:.1f} s; {g_ok} succeeded)")
        print(f"{N} single jobs of 2 cpus (one node each) on 3 nodes: {s_took:.1f} s "
              f"({N / s_took:.1f} jobs/s; submits took {s_sub:.1f} s; {s_ok} succeeded)")
        print(f"gang placement: {g_took / s_took:.1f}x the time of single jobs "
              f"(a gang occupies two of the three nodes; a single job one)")
    finally:
        c.close()


if __name__ == "__main__":
    main()
