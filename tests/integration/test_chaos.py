# SPDX-License-Identifier: Apache-2.0
"""Seeded chaos on a local cluster of real processes: 5 nodes, 300 short jobs submitted
through every node (every 12th a gang of 3 workers that spans two nodes); two kill -9 and one SIGSTOP, each triggered by progress (after k jobs
have finished) and spaced by more than detection plus re-replication; the killed nodes are
restarted on their data directories and the stopped one resumed before the final check:
0 jobs lost, 0 jobs with two final states, every job finished.
    MONKEY_CHAOS_SEED=N python3 test_chaos.py       (default: a fresh seed, printed)
    MONKEY_CHAOS_JOBS=N         N jobs (default 300; the plan scales with it)
    MONKEY_CHAOS_HOGS=N         N busy-looping processes compete for the CPUs meanwhile
    MONKEY_CHAOS_FAULTS=SPEC    MONKEY_FAULTS for every node, e.g. journal_delay=300ms
                                (a slow fsync; runtime/faults.hpp)"""
import json
import os
import random
import signal
import sqlite3
import subprocess
import time

from harness import RUNTIME, check, run, wait_until

FINALS = {"succeeded", "failed", "cancelled", "timed_out", "lost", "stopped"}
JOBS = int(os.environ.get("MONKEY_CHAOS_JOBS", "300"))


def jobs_at(c, address):
    r = c.monkey("jobs", "--json", "--address", address, check_rc=False, timeout=60)
    return json.loads(r.stdout) if r.returncode == 0 else None


def current_records(data_dirs):
    """job id -> {node id: (version, state)} of each journal's current record."""
    out = {}
    for d in data_dirs:
        db = sqlite3.connect(f"file:{os.path.join(d, 'journal.db')}?mode=ro", uri=True)
        try:
            node = db.execute("SELECT value FROM meta WHERE key='node_id'").fetchone()[0]
            for job, version, state, reason in db.execute(
                    "SELECT j.id, j.version, j.state, t.reason FROM jobs j LEFT JOIN transitions t"
                    " ON t.job_id = j.id AND t.version = j.version"):
                out.setdefault(job, {})[node] = (version, state, reason or "")
        finally:
            db.close()
    return out


def holders_of(c, address, job):
    r = c.monkey("show", job, "--json", "--address", address, check_rc=False)
    return json.loads(r.stdout).get("replicas", []) if r.returncode == 0 else []


def final_outcomes(data_dirs):
    """job id -> the distinct final transitions (version, reason) in every journal's history.
    One committed final state is copied to every holder with the same version and reason, so
    more than one entry means a second final state was committed (also when both name the
    same attempt number, as a re-run in another ownership term does)."""
    out = {}
    for d in data_dirs:
        db = sqlite3.connect(f"file:{os.path.join(d, 'journal.db')}?mode=ro", uri=True)
        try:
            for job, version, reason in db.execute(
                    "SELECT job_id, version, reason FROM transitions WHERE state >= 2"):
                out.setdefault(job, set()).add((version, reason))
        finally:
            db.close()
    return out


def start_hogs(n):
    """n processes that spin on the CPU until killed (a loaded machine)."""
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True)
            for _ in range(n)]


def chaos(c):
    seed = int(os.environ.get("MONKEY_CHAOS_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    if os.environ.get("MONKEY_CHAOS_FAULTS"):
        c.env["MONKEY_FAULTS"] = os.environ["MONKEY_CHAOS_FAULTS"]
    hogs = start_hogs(int(os.environ.get("MONKEY_CHAOS_HOGS", "0")))
    try:
        run_chaos(c, seed, rng)
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def run_chaos(c, seed, rng):
    nodes = json.loads(c.monkey("up", "5", "--no-measure", "--cpus", "2", "--json",
                                timeout=180).stdout)["nodes"]
    # The plan: which node suffers what, after how many finished jobs.
    victims = rng.sample(nodes[1:], 3)  # n1 stays up: the test asks it
    def at(fraction):  # after this share of the jobs finished, give or take 1/15
        return int(JOBS * fraction) + rng.randrange(max(1, JOBS // 15))
    plan = [(at(0.2), "kill", victims[0]), (at(0.47), "stop", victims[1]),
            (at(0.73), "kill", victims[2])]
    print(f"chaos seed {seed}; faults {c.env.get('MONKEY_FAULTS', 'none')}; plan: "
          + "; ".join(f"after {k} finished: {what} {v['name']}" for k, what, v in plan),
          flush=True)
    ids = []
    for i in range(JOBS):
        n = nodes[i % len(nodes)]
        ms = rng.randrange(50, 400)
        # Every 12th job is a gang of 3 workers of 1 cpu: it spans two nodes of 2 cpus.
        gang = ["--workers", "3", "--cpus", "1"] if i % 12 == 5 else []
        out = c.monkey("submit", "--address", nodes[0]["address"] if n in victims else n["address"],
                       "--name", f"c{i}", *gang, "--", "sleep", f"{ms / 1000:.3f}").stdout
        ids.append(out.strip().splitlines()[-1])
    entry = nodes[0]["address"]
    stopped, restarted = [], []
    for k, what, v in plan:
        wait_until(lambda: (lambda js: js is not None and sum(j["state"] in FINALS for j in js) >= k)(
            jobs_at(c, entry)), 300, f"{k} jobs to finish", interval=0.3)
        print(f"{what} {v['name']} (pid {v['pid']})", flush=True)
        if what == "kill":
            os.kill(v["pid"], signal.SIGKILL)
            restarted.append(v)
        else:
            os.kill(v["pid"], signal.SIGSTOP)
            stopped.append(v)
        time.sleep(4)  # more than detection plus re-replication
    # Before the final check: the killed nodes come back on their data directories, the
    # stopped one resumes.
    procs = []
    for v in restarted:
        log = open(os.path.join(v["data_dir"], "restart.log"), "ab")
        procs.append(subprocess.Popen([RUNTIME, "--listen", v["address"], "--data-dir",
                                       v["data_dir"], "--no-measure", "--cpus", "2", "--join",
                                       entry], env=c.env, stdout=log, stderr=log,
                                      start_new_session=True))
    for v in stopped:
        os.kill(v["pid"], signal.SIGCONT)
    try:
        js = wait_until(lambda: (lambda js: js if js and len(js) == JOBS
                                 and all(j["state"] in FINALS for j in js) else None)(
            jobs_at(c, entry)), 600, "every job to finish", interval=1)
        lost = sorted(set(ids) - {j["id"] for j in js})
        check(not lost, f"{len(lost)} acknowledged jobs are missing from the listing: {lost[:5]}")
        check(all(j["state"] == "succeeded" for j in js),
              f"every job succeeded: {[j for j in js if j['state'] != 'succeeded'][:5]}")
        data_dirs = [n["data_dir"] for n in nodes]
        # Each job's newest record is final and its holders agree on it; no journal's
        # history has a second final outcome (another attempt's) for any job.
        def converged():
            recs = current_records(data_dirs)
            bad = {}
            for j in ids:
                views = recs.get(j, {})
                newest = max(views.values()) if views else (0, 0)
                # The newest record's holders (they are in its record) all have it.
                holders = [n for n, v in views.items() if v == newest]
                if newest[1] != 2 or not holders:
                    bad[j] = views
            return None if bad else recs
        recs = wait_until(converged, 120, "each job's newest record to be final", interval=1)
        # A holder that was stopped or restarted gets the records that name it by its sync
        # and by re-replication, both asynchronous: agreement is awaited (bounded), and what
        # still differs at the deadline is the failure.
        sample = ids[:40]
        holders = {j: holders_of(c, entry, j) for j in sample}
        deadline = time.time() + 60
        while True:
            recs = current_records(data_dirs)
            missing = {}
            for j in sample:  # the newest record's holders all hold its outcome (sampled)
                newest = max(recs[j].values())
                for h in holders[j]:
                    mine = recs[j].get(h)
                    if not mine or mine[1:] != newest[1:]:
                        missing[j] = (h, mine, newest)
            if not missing or time.time() > deadline:
                break
            time.sleep(1)
        check(not missing, f"the holders of each job agree on its final record: {missing}")
        finals = final_outcomes(data_dirs)
        reruns = {j: v for j, v in finals.items() if j in ids and len(v) != 1}
        check(not reruns, f"{len(reruns)} jobs with two final states (seed {seed}): {reruns}")
        print(f"chaos seed {seed}: {JOBS} jobs, 0 lost, 0 with two final states, the holders "
              f"of each agree on its final record", flush=True)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
            p.wait(60)
        c.monkey("down", check_rc=False, timeout=180)


if __name__ == "__main__":
    run(chaos)
