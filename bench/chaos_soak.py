#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Chaos soak: seeded scenarios back to back on a local cluster of real processes, each
checked for the promises of docs/cluster.md. Outside CI (it runs for hours at --runs 100).

    python3 bench/chaos_soak.py --runs 100 [--seed S] [--jobs 120] [--nodes 5]

Each run starts 5 runtimes behind TCP relays (so a partition is a blackholed relay; no
root needed), submits short jobs through every node (some depend on earlier ones, some
are cancelled, some are gangs of 3 workers that span two nodes), and plays a plan of 3 events picked by the seed: kill -9 (the node is
restarted on its data directory, or not), SIGSTOP for a short or a long time, a partition
of one node; meanwhile CPU hogs and a slowed journal (MONKEY_FAULTS journal_delay) load the
machine. Afterwards every stopped node is resumed and every cut one reconnected, and:
  - every acknowledged job is listed by every survivor (or as unavailable, its dead
    holders named);
  - no job has two final states in any journal's history (dead nodes' journals included);
  - every job with a live holder is final and has min(R, alive) copies.
A run with any anomaly prints it with the seed that replays it (--seed S --runs 1).
Exit status: 0 when every run had 0 anomalies."""
import argparse
import collections
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from test_partition import Relay, free_port  # noqa: E402

FINALS = {"succeeded", "failed", "cancelled", "timed_out", "lost", "stopped"}
REPLICAS = 2


class Soak:
    def __init__(self, bin_dir, n, home, faults):
        self.runtime = os.path.join(bin_dir, "monkey-runtime")
        self.monkey_bin = os.path.join(bin_dir, "monkey")
        self.home = home
        self.env = dict(os.environ, MONKEY_HOME=home)
        for k in ("MONKEY_ADDRESS", "MONKEY_SECRET_FILE", "MONKEY_TOKEN_FILE"):
            self.env.pop(k, None)
        if faults:
            self.env["MONKEY_FAULTS"] = faults
        self.relay = Relay()
        self.n = n
        self.procs, self.addr, self.data, self.port, self.relay_port = {}, {}, {}, {}, {}
        self.state = {}  # name -> up, stopped, dead

    def start(self, name, seed=None):
        data = os.path.join(self.home, name)
        os.makedirs(data, exist_ok=True)
        self.data[name] = data
        addr_file = os.path.join(data, "address")
        if os.path.exists(addr_file):
            os.unlink(addr_file)
        if name not in self.port:
            self.port[name] = free_port()
            self.relay_port[name] = self.relay.add(name, self.port[name])
        argv = [self.runtime, "--listen", f"127.0.0.1:{self.port[name]}", "--advertise",
                f"127.0.0.1:{self.relay_port[name]}", "--data-dir", data, "--no-measure",
                "--cpus", "2"]
        if seed:
            argv += ["--join", seed]
        log = open(os.path.join(self.home, f"{name}.stderr"), "ab")
        p = subprocess.Popen(argv, env=self.env, stdout=log, stderr=log, start_new_session=True)
        self.procs[name] = p
        self.relay.pids[name] = p.pid
        deadline = time.time() + 30
        while not os.path.exists(addr_file) and p.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        if p.poll() is not None or not os.path.exists(addr_file):
            raise RuntimeError(f"{name} did not start: {open(log.name).read()[-1500:]}")
        self.addr[name] = f"127.0.0.1:{self.port[name]}"
        self.state[name] = "up"

    def monkey(self, name, *args, timeout=60):
        try:
            return subprocess.run([self.monkey_bin, "--address", self.addr[name], *args],
                                  env=self.env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def alive(self):
        return [n for n, s in self.state.items() if s == "up"]

    def jobs(self, name, with_warning=False):
        """The rows `jobs --json` on NAME lists (None: no answer); with_warning: also what it
        said on stderr (a partial list names the members that did not answer)."""
        r = self.monkey(name, "jobs", "--json")
        rows = None
        if r is not None and r.returncode == 0:
            try:
                rows = json.loads(r.stdout)
            except ValueError:
                pass
        if with_warning:
            return rows, (r.stderr.strip() if r is not None else "timed out")
        return rows

    def close(self):
        for name, p in self.procs.items():
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                p.kill()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    pass
        self.relay.close()


def journal_rows(data_dirs, query):
    for d in data_dirs:
        path = os.path.join(d, "journal.db")
        if not os.path.exists(path):
            continue
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        try:
            node = db.execute("SELECT value FROM meta WHERE key='node_id'").fetchone()[0]
            for row in db.execute(query):
                yield d, node, row
        finally:
            db.close()


def run_once(args, run_seed, log):
    rng = random.Random(run_seed)
    home = tempfile.mkdtemp(prefix="monkey-soak-")
    delay = rng.choice([0, 0, 100, 300])
    faults = f"journal_delay={delay}ms,journal_jitter=100ms" if delay else ""
    hogs_n = rng.randrange(3)
    s = Soak(args.bin, args.nodes, home, faults)
    hogs = []
    anomalies = []
    try:
        names = [f"n{k}" for k in range(1, args.nodes + 1)]
        s.start(names[0])
        seed_addr = f"127.0.0.1:{s.relay_port[names[0]]}"
        for name in names[1:]:
            s.start(name, seed_addr)
        deadline = time.time() + 60
        while time.time() < deadline:
            r = s.monkey(names[0], "nodes", "--json")
            if r is not None and r.returncode == 0 and sum(
                    m["state"] == "alive" for m in json.loads(r.stdout)) == args.nodes:
                break
            time.sleep(0.2)
        hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True)
                for _ in range(hogs_n)]
        actions = ["kill", "stop_short", "stop_long", "partition"]
        victims = rng.sample(names[1:], 3)
        plan = []
        for k, v in enumerate(victims):
            plan.append((int(args.jobs * (0.2 + 0.25 * k)) + rng.randrange(max(1, args.jobs // 15)),
                         rng.choice(actions), v, rng.random() < 0.6))
        desc = "; ".join(f"{a} {v}{' (restart)' if a == 'kill' and r else ''} after {t}"
                         for t, a, v, r in plan)
        log(f"run seed {run_seed}: faults [{faults or 'none'}], {hogs_n} hogs; {desc}")
        acked, cancel_later = [], []
        refused = collections.Counter()  # why submits were not acknowledged
        pending = list(plan)
        stopped_long, cut = [], []
        done_count = 0
        for i in range(args.jobs):
            entry = rng.choice([n for n in s.alive() if n not in cut] or [names[0]])
            cmd = ["submit", "--name", f"s{i}"]
            if acked and rng.random() < 0.1:
                cmd += ["--after", f"{rng.choice(['ok', 'any'])}:{rng.choice(acked)}"]
            if rng.random() < 0.08:  # a gang of 3 workers of 1 cpu: it spans two nodes
                cmd += ["--workers", "3", "--cpus", "1"]
            cmd += ["--", "sleep", f"{rng.randrange(50, 300) / 1000:.3f}"]
            r = s.monkey(entry, *cmd, timeout=60)
            if r is not None and r.returncode == 0:
                jid = r.stdout.strip().splitlines()[-1]
                acked.append(jid)
                if rng.random() < 0.05:
                    cancel_later.append(jid)
            else:
                why = "no answer" if r is None else (r.stderr.strip().splitlines() or ["?"])[-1]
                refused[re.sub(r"[0-9A-Z]{26}|[0-9a-f]{8,}|\d+", "N", why)[:100]] += 1
            if cancel_later and rng.random() < 0.2:
                s.monkey(entry, "cancel", cancel_later.pop(0), timeout=30)
            # Events by progress (jobs submitted stand in for jobs finished: they are short).
            while pending and i >= pending[0][0]:
                t, action, v, restart = pending.pop(0)
                if s.state.get(v) != "up" or v in cut:
                    continue
                p = s.procs[v]
                log(f"  {action} {v} (pid {p.pid}) at job {i}")
                if action == "kill":
                    os.kill(p.pid, signal.SIGKILL)
                    p.wait(10)
                    s.state[v] = "dead"
                    if restart:
                        time.sleep(rng.uniform(2, 6))
                        s.start(v, seed_addr)
                elif action == "stop_short":
                    os.kill(p.pid, signal.SIGSTOP)
                    time.sleep(rng.uniform(1.5, 3))
                    os.kill(p.pid, signal.SIGCONT)
                elif action == "stop_long":
                    os.kill(p.pid, signal.SIGSTOP)
                    s.state[v] = "stopped"
                    stopped_long.append(v)
                    time.sleep(rng.uniform(6, 9))
                else:
                    s.relay.cut(v)
                    cut.append(v)
                    time.sleep(rng.uniform(4, 8))
        for v in stopped_long:
            os.kill(s.procs[v].pid, signal.SIGCONT)
            s.state[v] = "up"
        for v in cut:
            s.relay.heal(v)
        for h in hogs:
            h.kill()
        hogs = []
        alive = s.alive()
        observer = alive[0]
        # Jobs that no survivor's journal holds: their every holder is dead (at R=2, two
        # nodes killed close together). They cannot be listed as final; a listing must say
        # that dead members may hold jobs it does not show.
        def held_by_survivors():
            return {job for _, _, (job,) in journal_rows([s.data[n] for n in alive],
                                                         "SELECT id FROM jobs")}
        # Wait for the cluster to settle: every acknowledged job final or unavailable.
        deadline = time.time() + args.settle
        listed = None
        while time.time() < deadline:
            js = s.jobs(observer)
            if js is not None:
                by = {j["id"]: j for j in js}
                live = held_by_survivors()
                if all((j in by and (by[j]["state"] in FINALS or by[j]["state"] == "unavailable"))
                       or (j not in by and j not in live) for j in acked):
                    listed = by
                    break
            time.sleep(1)
        dead_only = [j for j in acked if j not in held_by_survivors()]
        if dead_only:
            log(f"  {len(dead_only)} acknowledged jobs held only by dead members: {dead_only[:3]}")
        if listed is None:
            js = s.jobs(observer) or []
            by = {j["id"]: j for j in js}
            stuck = [(j, by.get(j, {}).get("state"), by.get(j, {}).get("reason"))
                     for j in acked if j not in dead_only
                     and (j not in by or by[j]["state"] not in FINALS)]
            anomalies.append(f"{len(stuck)} jobs not final after {args.settle}s: {stuck[:3]}")
        # Every survivor lists every acknowledged job (or names it unavailable). A node just
        # back from a pause may still be syncing or reconnecting: it gets a minute to give a
        # complete list. A list that misses jobs without saying it is partial is an anomaly
        # at once; one still partial after the minute is one too.
        for name in alive:
            deadline = time.time() + 60
            while True:
                js, warning = s.jobs(name, with_warning=True)
                ids = {j["id"] for j in js or []}
                # Jobs only dead members hold may be left out when the listing says so.
                excused = dead_only if "dead member" in warning else []
                missing = [j for j in acked if j not in ids and j not in excused]
                silent = js is not None and missing and "partial" not in warning
                if (js is not None and not missing) or silent or time.time() > deadline:
                    break
                time.sleep(1)
            if js is None:
                anomalies.append(f"{name} did not answer `jobs` within a minute: {warning}")
            elif missing:
                anomalies.append(f"{name} does not list {len(missing)} acknowledged jobs "
                                 f"({'silently' if silent else warning}): {missing[:3]}")
        # A job listed as unavailable names the holders that are down.
        for j in (listed or {}).values():
            if j["id"] in acked and j["state"] == "unavailable" and not j.get("holders"):
                anomalies.append(f"unavailable job {j['id']} names no holder: {j}")
        # Two final states in any journal's history.
        finals = {}
        for _, node, (job, version, reason) in journal_rows(
                s.data.values(), "SELECT job_id, version, reason FROM transitions WHERE state >= 2"):
            finals.setdefault(job, set()).add((version, reason))
        doubles = {j: v for j, v in finals.items() if len(v) > 1}
        if doubles:
            anomalies.append(f"{len(doubles)} jobs with two final states: "
                             f"{dict(list(doubles.items())[:2])}")
        # Copies: every job with a live holder has min(R, alive) copies (after anti-entropy).
        want = min(REPLICAS, len(alive))
        live_dirs = [s.data[n] for n in alive]
        short = {}
        deadline = time.time() + 60
        while time.time() < deadline:
            copies = {}
            for _, node, (job, state) in journal_rows(live_dirs, "SELECT id, state FROM jobs"):
                if state >= 2:
                    copies[job] = copies.get(job, 0) + 1
            short = {j: copies.get(j, 0) for j in acked
                     if 0 < copies.get(j, 0) < want}
            if not short:
                break
            time.sleep(2)
        if short:
            anomalies.append(f"{len(short)} jobs with fewer than {want} final copies on live "
                             f"nodes: {dict(list(short.items())[:3])}")
        if refused:
            log(f"  {sum(refused.values())} submits not acknowledged: "
                + "; ".join(f"{n}x {w}" for w, n in refused.most_common(3)))
        log(f"  {len(acked)} acknowledged jobs; {len(anomalies)} anomalies"
            + "".join(f"\n    ANOMALY {a}" for a in anomalies))
    finally:
        for h in hogs:
            h.kill()
        s.close()
        if not anomalies and not args.keep:
            shutil.rmtree(home, ignore_errors=True)
        elif anomalies:
            log(f"  kept {home} for inspection")
    return anomalies


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=None, help="first run's seed (default: random)")
    ap.add_argument("--jobs", type=int, default=120)
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--settle", type=int, default=240, help="seconds to wait for every job")
    ap.add_argument("--bin", default=os.environ.get("MONKEY_BIN_DIR",
                                                    os.path.join(HERE, "..", "build", "bin")))
    ap.add_argument("--keep", action="store_true", help="keep every run's MONKEY_HOME")
    args = ap.parse_args()
    first = args.seed if args.seed is not None else random.randrange(1 << 30)

    def log(msg):
        print(msg, flush=True)

    total, bad_runs = 0, 0
    t0 = time.time()
    for k in range(args.runs):
        found = run_once(args, first + k, log)
        total += len(found)
        bad_runs += 1 if found else 0
    log(f"chaos soak: {args.runs} runs (seeds {first}..{first + args.runs - 1}), "
        f"{total} anomalies ({bad_runs} runs with any), {time.time() - t0:.0f} s")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
