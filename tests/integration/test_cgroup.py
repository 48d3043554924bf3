# SPDX-License-Identifier: Apache-2.0
"""cancel reaches a child that left the job's process group (setsid) through the job's
cgroup. Where no writable cgroup v2 is delegated to the runtime, the node says so in its
log, and this test prints SKIPPED with that reason and exits 77 (ctest: skipped)."""
import os
import sys

from harness import check, pid_alive, run, wait_until

SKIP = 77
skipped = []


def setsid_child_killed(c):
    c.start("n1", "--kill-grace", "1")
    pids = os.path.join(c.home, "pids")
    jid = c.submit("--", "sh", "-c", f"setsid sleep 100 & echo $! >> {pids}; wait")
    wait_until(lambda: os.path.exists(pids) and len(open(pids).read().split()) == 1, 30,
               "the setsid child to start")
    escaped = int(open(pids).read().split()[0])
    log = open(os.path.join(c.nodes["n1"]["data"], "runtime.log")).read()
    if "cgroups under" not in log:
        os.kill(escaped, 9)
        skipped.append("no writable cgroup v2 here: a setsid child can escape the job's group")
        return
    c.monkey("cancel", jid)
    check(c.wait_final(jid)["state"] == "cancelled", "cancelled")
    wait_until(lambda: not pid_alive(escaped), 10, "the setsid child to die (cgroup)")


if __name__ == "__main__":
    run(setsid_child_killed)
    if skipped:
        print(f"SKIPPED setsid_child_killed: {skipped[0]}", flush=True)
        sys.exit(SKIP)
