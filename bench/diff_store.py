#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One node's memory and journal after many jobs submitted from a git tree with an
uncommitted diff (issue #40, item 4), side by side with the same jobs submitted from
outside a git tree: the diff is stored once in the cluster, so both should be close
(goal with the defaults: <= 80 MB resident and <= 15 MB of journal from the dirty tree).

    python3 bench/diff_store.py [ARRAYS] [PER_ARRAY] [DIFF_KB]     (defaults: 10 500 40)

Prints the node's VmRSS (from /proc) and journal size (journal.db with its -wal) once
every job ended, for both runs."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/integration"))
from harness import MONKEY, Cluster, git_repo, rss_mb  # noqa: E402

ARRAYS = int(sys.argv[1]) if len(sys.argv) > 1 else 10
PER = int(sys.argv[2]) if len(sys.argv) > 2 else 500
DIFF_KB = int(sys.argv[3]) if len(sys.argv) > 3 else 40


def dirty_tree(base):
    repo, _ = git_repo(base, "print('hello')\n")
    with open(os.path.join(repo, "train.py"), "a") as f:
        line = "# an uncommitted line of the researcher's work, 64 bytes long..\n"
        f.write(line * (DIFF_KB * 1024 // len(line)))
    return repo


def journal_mb(data):
    return sum(os.path.getsize(os.path.join(data, n)) for n in os.listdir(data)
               if n.startswith("journal.db")) / 1e6


def measure(where):
    c = Cluster("diffbench")
    try:
        node = c.start("n1", "--cpus", "2")
        cwd = dirty_tree(c.home) if where == "dirty git tree" else c.home
        before = rss_mb(node["proc"].pid)
        start = time.time()
        for _ in range(ARRAYS):
            r = subprocess.run([MONKEY, "submit", "--array", f"0-{PER - 1}", "--", "true"],
                               cwd=cwd, env=c.env, capture_output=True, text=True,
                               timeout=600)
            if r.returncode != 0:
                raise SystemExit(f"submit failed: {r.stderr}")
        jobs = c.wait_all_final(timeout=1800)
        took = time.time() - start
        ok = sum(1 for j in jobs if j["state"] == "succeeded")
        time.sleep(5)  # the last writes settle; 2 s after them the WAL is truncated
        out = (before, rss_mb(node["proc"].pid), journal_mb(node["data"]), ok, took)
        print(f"{where:>18}: {ok}/{len(jobs)} jobs succeeded in {took:.0f} s; node resident "
              f"{out[0]:.0f} MB at start, {out[1]:.0f} MB after; journal {out[2]:.1f} MB",
              flush=True)
        return out
    finally:
        c.close()


def main():
    print(f"{ARRAYS} arrays of {PER} `true` jobs, a {DIFF_KB} KB uncommitted diff", flush=True)
    plain = measure("outside a git tree")
    dirty = measure("dirty git tree")
    print(f"dirty tree / outside: resident {dirty[1] / plain[1]:.2f}x, journal "
          f"{dirty[2] / max(plain[2], 1e-9):.2f}x (goal: <= 80 MB and <= 15 MB from the dirty "
          f"tree: {'met' if dirty[1] <= 80 and dirty[2] <= 15 else 'NOT met'})")


main()
