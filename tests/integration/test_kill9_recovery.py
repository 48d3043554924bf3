# SPDX-License-Identifier: Apache-2.0
"""kill -9 of the runtime mid-run, then a restart on the same data directory: no accepted
job is lost, leftover processes of the old runtime die before anything re-runs, no job
runs twice at once, and requeues are charged to --max-requeues, not to retries."""
import os
import time

from harness import check, pid_alive, run, wait_until


def kill9_recovery(c):
    c.start("n1", "--cpus", "2")
    work = os.path.join(c.home, "work")
    os.makedirs(work)
    # Each job holds a lock for its whole life; a background child inherits it. If an old
    # child survived into the re-run, the lock would be taken: a double run.
    script = (f'cd {work}; exec 9>"$MONKEY_JOB_ID.lock"; '
              'flock -n 9 || { echo "$MONKEY_JOB_ID" >> doubles; exit 9; }; '
              'sleep 4 & echo $! >> "$MONKEY_JOB_ID.bg"; wait; '
              'echo "$MONKEY_ATTEMPT" >> "$MONKEY_JOB_ID.done"')
    ids = [c.submit("--name", f"j{i}", "--", "sh", "-c", script) for i in range(6)]
    running = wait_until(lambda: (lambda js: js if len(js) == 2 else None)(
        [j for j in c.jobs() if j["state"] == "running"]), 30, "two running jobs")
    wait_until(lambda: all(os.path.exists(os.path.join(work, j["id"] + ".bg")) for j in running),
               30, "background children")
    shows = {j["id"]: c.show(j["id"]) for j in running}
    bg = [int(open(os.path.join(work, j + ".bg")).read().split()[0]) for j in shows]
    leaders = [s["attempts"][0]["pid"] for s in shows.values()]
    c.kill9("n1")
    # The job's own process dies with the runtime (PDEATHSIG); its child does not.
    wait_until(lambda: not any(pid_alive(p) for p in leaders), 10, "job leaders to die")
    check(all(pid_alive(p) for p in bg), "background children outlive the runtime (precondition)")
    c.start("n1", "--cpus", "2")
    wait_until(lambda: not any(pid_alive(p) for p in bg), 20,
               "leftover processes of the old runtime to be killed")
    jobs = c.wait_all_final(timeout=120)
    check(len(jobs) == 6, f"all 6 accepted jobs are there: {len(jobs)}")
    check(all(j["state"] == "succeeded" for j in jobs), f"all succeeded: {jobs}")
    check(not os.path.exists(os.path.join(work, "doubles")), "no job ran twice at once")
    for jid in ids:
        done = open(os.path.join(work, jid + ".done")).read().split()
        check(len(done) == 1, f"job {jid} completed exactly once: {done}")
        s = c.show(jid)
        if jid in shows:
            check(s["requeues_used"] == 1 and s["retries_used"] == 0,
                  f"{jid}: one requeue, no retry: {s['requeues_used']}/{s['retries_used']}")
            check(s["attempts"][0]["outcome"] == "lost", "first attempt lost")
            check("runtime restart" in s["attempts"][0]["cause"], s["attempts"][0]["cause"])
            check(len(s["attempts"]) == 2, "two attempts")
        else:
            check(s["requeues_used"] == 0 and len(s["attempts"]) == 1, f"{jid} ran once")


def requeue_budget(c):
    """A job lost more often than --max-requeues ends lost."""
    c.start("n1")
    jid = c.submit("--max-requeues", "1", "--", "sleep", "60")
    for _ in range(2):
        wait_until(lambda: c.show(jid)["state"] == "running" and c.show(jid)["attempts"][-1]["pid"] > 0,
                   30, "running")
        c.kill9("n1")
        c.start("n1")
    s = c.wait_final(jid, timeout=30)
    check(s["state"] == "lost", f"lost after 2 crashes with --max-requeues 1: {s['state']}")
    check(s["requeues_used"] == 1, "one requeue used")
    r = c.monkey("submit", "--wait", "--max-requeues", "0", "--", "sh", "-c", "exit 0")
    check(r.returncode == 0, "a normal job still runs")


run(kill9_recovery)
run(requeue_budget)
