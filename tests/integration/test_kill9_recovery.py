# SPDX-License-Identifier: Apache-2.0
"""kill -9 of the runtime mid-run, then a restart on the same data directory: no accepted
job is lost, leftover processes of the old runtime die before anything re-runs, no job
runs twice at once, and requeues are charged to --max-requeues, not to retries."""
import os
import time

from harness import SLOWDOWN, check, pid_alive, run, wait_until


def kill9_recovery(c):
    c.start("n1", "--cpus", "2")
    work = os.path.join(c.home, "work")
    os.makedirs(work)
    # Each job holds a lock for its whole life; a background child inherits it. If an old
    # child survived into the re-run, the lock would be taken: a double run.
    # The child must outlive the checks before the kill: under a sanitizer (SLOWDOWN) each
    # `monkey show` takes a second or more, and a 4 s child had ended before the kill.
    script = (f'cd {work}; exec 9>"$MONKEY_JOB_ID.lock"; '
              'flock -n 9 || { echo "$MONKEY_JOB_ID" >> doubles; exit 9; }; '
              f'sleep {round(4 * SLOWDOWN)} & echo $! >> "$MONKEY_JOB_ID.bg"; wait; '
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
    jobs = c.wait_all_final(timeout=120 * SLOWDOWN)
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


def attempt_ids_unique(c):
    """Attempt ids (node, incarnation, sequence) name one attempt for the life of the data
    directory: after the coordinator is restarted inside the process (`monkey kill`) the
    sequence goes on instead of starting again at 0, and a new process has a new
    incarnation. (Log folders, checkpoint pieces and gang parts are named by them.)"""
    c.start("n1", "--cpus", "2")

    def run_some(n, tag):
        ids = [c.submit("--name", f"{tag}{i}", "--", "true") for i in range(n)]
        for jid in ids:
            check(c.wait_final(jid, 60)["state"] == "succeeded", f"{jid} succeeded")
        return ids

    ids = run_some(3, "a")
    r = c.monkey("kill", "core/coordinator", check_rc=False)
    check(r.returncode == 0, f"kill core/coordinator: {r.stdout} {r.stderr}")
    # The restarted coordinator takes submissions again (the same --key: one job however
    # often it is tried while the coordinator restarts).
    first = wait_until(lambda: _try(lambda: c.submit("--key", "attempt-ids-b0", "--", "true")),
                       30, "the restarted coordinator to take a submission")
    check(c.wait_final(first, 60)["state"] == "succeeded", f"{first} succeeded")
    ids += [first] + run_some(2, "b")
    c.kill9("n1")
    c.start("n1", "--cpus", "2")
    ids += run_some(3, "c")
    attempts = [a["attempt_id"] for jid in ids for a in c.show(jid)["attempts"]]
    check(len(attempts) == 9, f"one attempt per job: {attempts}")
    check(len(set(attempts)) == len(attempts), f"every attempt id differs: {sorted(attempts)}")
    incarnations = {a.split(".")[1] for a in attempts}
    check(len(incarnations) == 2, f"the restarted process has a new incarnation: {attempts}")


def _try(f):
    try:
        return f()
    except Exception:  # noqa: BLE001 - a submission refused while the coordinator restarts
        return None


run(kill9_recovery)
run(attempt_ids_unique)
run(requeue_budget)
