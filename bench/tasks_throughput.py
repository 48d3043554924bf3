#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Built-in no-op tasks through coordinator -> device proxy -> task worker on one node,
with only the accept record (per batch) and the final records (per range of tasks that
ended alike) journaled, in grouped commits. Goal: >= 100,000 tasks/s on one node.
For scale (not run here: Ray is not packaged for Debian): Ray 2.10 does 8,051 async
tasks/s from one client and 24,773 from many (its published microbenchmarks).

Each row: one runtime (--cpus 2), one client (bench/tasks_client) on one connection.
server = first accept until the last final record is durable (the node's clock);
client = first submit until the client has seen every batch final.
    python3 bench/tasks_throughput.py [ROUNDS]"""
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/integration"))
from harness import BIN, Cluster  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3

# (label, --task-chunk, total tasks, tasks per submit)
CASES = [
    ("1 batch of 1M, chunk 256", 256, 1_000_000, 1_000_000),
    ("100 batches of 10k, chunk 256", 256, 1_000_000, 10_000),
    ("1000 batches of 100, chunk 256", 256, 100_000, 100),
    ("1 batch of 200k, chunk 1 (a message per task)", 1, 200_000, 200_000),
]


def run_case(chunk, total, batch):
    c = Cluster("bench-tasks")
    try:
        c.start("n1", "--cpus", "2", "--task-chunk", str(chunk))
        out = subprocess.run([os.path.join(BIN, "tasks_client"), str(total), str(batch)],
                             env=c.env, capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"tasks_client failed: {out.stderr.strip()}")
        return json.loads(out.stdout)
    finally:
        c.close()


def main():
    results = {label: [] for label, *_ in CASES}
    for r in range(ROUNDS):
        for label, chunk, total, batch in CASES:
            m = run_case(chunk, total, batch)
            server = m["tasks"] / max(m["server_s"], 1e-3)
            client = m["tasks"] / max(m["client_s"], 1e-3)
            results[label].append((server, client))
            print(f"round {r + 1}: {label}: {server:,.0f} tasks/s (node), {client:,.0f} tasks/s "
                  f"(client, submit {m['submit_s']:.3f} s)", flush=True)
    print(f"\nmedian of {ROUNDS} (goal >= 100,000 tasks/s; Ray 2.10: 8,051 from one client):")
    for label, rows in results.items():
        s = statistics.median(x[0] for x in rows)
        cl = statistics.median(x[1] for x in rows)
        print(f"  {label:48s} {s:>12,.0f} tasks/s node  {cl:>12,.0f} tasks/s client "
              f"({cl / 8051:.1f}x Ray one client)")


main()
