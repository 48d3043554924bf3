#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Failure detection times of the membership (SWIM-style; docs/cluster.md), on a local
cluster of real monkey-runtime processes (`monkey up 3`):

  kill -9  : from the kill until node n1 declares the victim dead (goal <= 0.5 s)
  SIGSTOP  : from the stop until n1 declares it dead (goal <= 3 s)

The moment of the declaration is read from n1's log line ("member X ... is dead"), whose
clock is this machine's. Median, min and max of TRIALS each; after each trial the victim is
restarted (kill -9) or resumed (SIGSTOP) and must be seen alive again.
For scale: Ray's defaults take 20 s or more to declare a node dead; Akka's detector ~5.5 s.
Runs the same trials on a plain cluster and on a TLS cluster (`monkey up 3 --tls`), side by
side.
    python3 bench/detection.py [TRIALS] [plain|tls|both]"""
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/integration"))
from harness import RUNTIME, Cluster, wait_until  # noqa: E402

TRIALS = int(sys.argv[1]) if len(sys.argv) > 1 else 20
MODES = {"plain": [False], "tls": [True], "both": [False, True]}[
    sys.argv[2] if len(sys.argv) > 2 else "both"]


def log_time(line):
    stamp = line.split(" ", 1)[0]
    return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%f").timestamp()


def declared(log_path, node_id, word, after):
    """Time of the first log line after `after` saying node_id is `word`."""
    with open(log_path, errors="replace") as f:
        for line in f:
            if f"member {node_id} " in line and f" is {word} " in line:
                t = log_time(line)
                if t >= after - 0.002:
                    return t
    return None


def node_ids(c, address):
    out = c.monkey("nodes", "--json", "--address", address).stdout
    return {m["pid"]: m for m in json.loads(out)}


def main(tls):
    c = Cluster("bench-detect")
    try:
        extra = ["--tls"] if tls else []
        nodes = json.loads(c.monkey("up", "3", "--no-measure", "--json", *extra,
                                    timeout=120).stdout)["nodes"]
        tls_args = ["--tls-dir", os.path.join(c.home, "certs")] if tls else []
        n1 = nodes[0]
        log = os.path.join(n1["data_dir"], "runtime.log")
        victim = nodes[2]
        vid = node_ids(c, n1["address"])[victim["pid"]]["node"]
        pid = victim["pid"]
        kill_times, stop_times = [], []
        procs = []
        for i in range(TRIALS):
            t0 = time.time()
            os.kill(pid, signal.SIGKILL)
            t = wait_until(lambda: declared(log, vid, "dead", t0), 30, "dead", interval=0.02)
            kill_times.append(t - t0)
            p = subprocess.Popen([RUNTIME, "--listen", victim["address"], "--data-dir",
                                  victim["data_dir"], "--no-measure", "--cpus", "1", "--join",
                                  n1["address"], *tls_args], env=c.env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
            procs.append(p)
            pid = p.pid
            wait_until(lambda: node_ids(c, n1["address"]).get(pid, {}).get("state") == "alive",
                       30, "rejoin")
            time.sleep(0.3)
        for i in range(TRIALS):
            t0 = time.time()
            os.kill(pid, signal.SIGSTOP)
            t = wait_until(lambda: declared(log, vid, "dead", t0), 30, "dead", interval=0.02)
            stop_times.append(t - t0)
            os.kill(pid, signal.SIGCONT)
            wait_until(lambda: node_ids(c, n1["address"]).get(pid, {}).get("state") == "alive",
                       30, "refutation")
            time.sleep(0.5)
        for name, xs, goal in (("kill -9", kill_times, 0.5), ("SIGSTOP", stop_times, 3.0)):
            print(f"{'TLS' if tls else 'plain':5s} {name:8s} detection: median {statistics.median(xs) * 1000:.0f} ms, "
                  f"min {min(xs) * 1000:.0f} ms, max {max(xs) * 1000:.0f} ms over {len(xs)} "
                  f"trials (goal <= {goal * 1000:.0f} ms)")
        for p in procs:
            p.send_signal(signal.SIGTERM)
    finally:
        try:
            c.monkey("down", check_rc=False, timeout=120)
        finally:
            c.close()


for mode in MODES:
    main(mode)
