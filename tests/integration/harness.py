# SPDX-License-Identifier: Apache-2.0
"""Helpers for Monkey's multi-process integration tests: real monkey-runtime processes,
the real monkey client, real signals. Each test gets its own MONKEY_HOME and free ports."""

import atexit
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

BIN = os.environ.get("MONKEY_BIN_DIR") or os.path.join(os.path.dirname(__file__), "../../build/bin")
RUNTIME = os.path.join(BIN, "monkey-runtime")
MONKEY = os.path.join(BIN, "monkey")
# How much slower than a plain build the binaries run (scripts/sanitize sets it for
# ASan): a test that needs work still running when it acts stretches that work by it.
SLOWDOWN = float(os.environ.get("MONKEY_TEST_SLOWDOWN", "1"))


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def wait_until(pred, timeout, what, interval=0.1):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(interval)
    raise Failure(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


class Cluster:
    """A MONKEY_HOME with its secret; nodes are started on free ports."""

    def __init__(self, name):
        self.home = tempfile.mkdtemp(prefix=f"monkey-it-{name}-")
        self.env = dict(os.environ)
        self.env["MONKEY_HOME"] = self.home
        self.env.pop("MONKEY_ADDRESS", None)
        self.env.pop("MONKEY_SECRET_FILE", None)
        self.nodes = {}
        self.children = []  # clients a test left running in the background: killed at close

    def start(self, name="n1", *args, wait=True, env=None):
        data = os.path.join(self.home, name)
        addr_file = os.path.join(data, "address")
        if os.path.exists(addr_file):
            os.unlink(addr_file)
        port = self.nodes[name]["port"] if name in self.nodes else 0
        log = open(os.path.join(self.home, f"{name}.stderr"), "ab")
        proc = subprocess.Popen([RUNTIME, "--listen", f"127.0.0.1:{port}", "--data-dir", data,
                                 "--no-measure", *args],
                                env=env or self.env, stdout=log, stderr=log,
                                start_new_session=True)
        node = {"proc": proc, "data": data, "port": port, "stderr": log.name}
        self.nodes[name] = node
        if wait:
            wait_until(lambda: os.path.exists(addr_file) or proc.poll() is not None, 30,
                       f"{name} to listen")
            check(proc.poll() is None, f"{name} exited early: {self.stderr(name)}")
            addr = open(addr_file).read().strip()
            node["address"] = addr
            node["port"] = int(addr.rsplit(":", 1)[1])
            self.env["MONKEY_ADDRESS"] = addr
        return node

    def stderr(self, name="n1"):
        with open(self.nodes[name]["stderr"], "rb") as f:
            return f.read().decode(errors="replace")

    def kill9(self, name="n1"):
        proc = self.nodes[name]["proc"]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def stop(self, name="n1", sig=signal.SIGTERM, timeout=60):
        proc = self.nodes[name]["proc"]
        if proc.poll() is None:
            proc.send_signal(sig)
            proc.wait(timeout)
        return proc.returncode

    def monkey(self, *args, check_rc=True, env=None, timeout=120):
        r = subprocess.run([MONKEY, *args], env=env or self.env, capture_output=True,
                           text=True, timeout=timeout)
        if check_rc and r.returncode != 0:
            raise Failure(f"monkey {' '.join(args)} exited {r.returncode}: {r.stderr.strip()}")
        return r

    def submit(self, *args):
        out = self.monkey("submit", *args).stdout.strip().splitlines()
        return out[-1]

    def jobs(self):
        return json.loads(self.monkey("jobs", "--json").stdout)

    def show(self, job):
        return json.loads(self.monkey("show", job, "--json").stdout)

    def wait_final(self, job, timeout=120):
        finals = {"succeeded", "failed", "cancelled", "timed_out", "lost", "stopped"}
        return wait_until(lambda: (lambda s: s if s["state"] in finals else None)(self.show(job)),
                          timeout, f"job {job} to finish")

    def wait_all_final(self, timeout=300):
        finals = {"succeeded", "failed", "cancelled", "timed_out", "lost", "stopped"}
        return wait_until(lambda: (lambda js: js if js and all(j["state"] in finals for j in js)
                                   else None)(self.jobs()), timeout, "all jobs to finish",
                          interval=0.3)

    def close(self):
        for child in self.children:
            if child.poll() is None:
                child.kill()
                child.wait(10)
        # Nodes started by `monkey up` (not in self.nodes): never leave them running.
        up_file = os.path.join(self.home, "up.json")
        if os.path.exists(up_file):
            try:
                for n in json.load(open(up_file)).get("nodes", []):
                    try:
                        os.kill(n["pid"], signal.SIGCONT)
                        os.kill(n["pid"], signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
            except ValueError:
                pass
        for name, node in self.nodes.items():
            proc = node["proc"]
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    pass
            # A node killed with -9 leaves its (empty) cgroup directory behind.
            log = os.path.join(node["data"], "runtime.log")
            if os.path.exists(log):
                for line in open(log, errors="replace"):
                    if " listening on " in line and "] node " in line:
                        node_id = line.split("] node ", 1)[1].split()[0]
                        for base in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
                            try:
                                os.rmdir(os.path.join(base, "monkey-" + node_id))
                            except OSError:
                                pass


def git_repo(base, first="print('MONKEY_METRIC step=1 acc=0.5')\n"):
    """A new git work tree under `base` with train.py (`first`) committed; (its path, a
    function that runs git there and returns its output)."""
    repo = tempfile.mkdtemp(dir=base)
    git = lambda *a: subprocess.run(["git", "-C", repo, *a], check=True, capture_output=True,
                                    text=True).stdout
    git("init", "-q")
    git("config", "user.email", "t@t")
    git("config", "user.name", "t")
    with open(os.path.join(repo, "train.py"), "w") as f:
        f.write(first)
    git("add", "train.py")
    git("commit", "-qm", "first")
    return repo, git


def rss_mb(pid):
    """The resident memory of process `pid` in MB (VmRSS)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def points(c, job, key):
    """The series of metric `key` of `job` (monkey show --metric KEY --json)."""
    return json.loads(c.monkey("show", job, "--metric", key, "--json").stdout)["series"]


def nodes_up(c, n, *args):
    """Nodes n1..nN of 2 cpus (n2.. join n1), started with `args`; waits until all are members."""
    c.start("n1", "--cpus", "2", *args)
    for i in range(2, n + 1):
        c.start(f"n{i}", "--cpus", "2", "--join", c.nodes["n1"]["address"], *args)
    wait_until(lambda: len(json.loads(c.monkey("nodes", "--json").stdout)) == n, 20,
               f"{n} members")


def node_ids(c):
    """harness name -> node id"""
    by_addr = {m["address"]: m["node"] for m in json.loads(c.monkey("nodes", "--json").stdout)}
    return {name: by_addr[n["address"]] for name, n in c.nodes.items() if n["address"] in by_addr}


def kill9_a_part_host(c, show):
    """kill -9 of a node that hosts part of the gang's latest attempt (`show`: the job's
    record) and is not its owner; the client talks to a survivor from then on. The victim."""
    ids = node_ids(c)
    parts = [h.rsplit(":", 1)[0] for h in show["attempts"][-1]["hosts"]]
    victim = next(n for n, nid in ids.items() if nid in parts and nid != show["owner"])
    c.env["MONKEY_ADDRESS"] = c.nodes[next(n for n in ids if n != victim)]["address"]
    c.kill9(victim)
    return victim


def refused_joiner(c, name, args, env=None, timeout=30):
    """Starts a runtime that tries to join with `args` and must be refused: waits until its
    log reports "cannot join through", stops it, and returns (pid, log text)."""
    data = os.path.join(c.home, name)
    log = open(os.path.join(c.home, f"{name}.stderr"), "ab")
    proc = subprocess.Popen([RUNTIME, "--listen", "127.0.0.1:0", "--data-dir", data,
                             "--no-measure", *args],
                            env=env or c.env, stdout=log, stderr=log, start_new_session=True)
    try:
        runtime_log = os.path.join(data, "runtime.log")
        wait_until(lambda: os.path.exists(runtime_log)
                   and "cannot join through" in open(runtime_log).read(), timeout,
                   f"{name} to report its refusal")
        return proc.pid, open(runtime_log).read()
    finally:
        proc.kill()
        proc.wait(10)


def journal_rows(data_dirs, query):
    """(node id, row) for every row `query` returns from each data directory's journal
    (read-only; directories without a journal are skipped)."""
    for d in data_dirs:
        path = os.path.join(d, "journal.db")
        if not os.path.exists(path):
            continue
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            node = db.execute("SELECT value FROM meta WHERE key='node_id'").fetchone()[0]
            for row in db.execute(query):
                yield node, row
        finally:
            db.close()


def final_versions(data_dirs):
    """job id -> set of (version, state) of final transitions, over every journal."""
    out = {}
    for _, (job, version, state) in journal_rows(
            data_dirs, "SELECT job_id, version, state FROM transitions WHERE state >= 2"):
        out.setdefault(job, set()).add((version, state))
    return out


def current_versions(data_dirs):
    """job id -> {node id: (version, state)} of each journal's current record."""
    out = {}
    for node, (job, version, state) in journal_rows(data_dirs,
                                                    "SELECT id, version, state FROM jobs"):
        out.setdefault(job, {})[node] = (version, state)
    return out


_M64 = (1 << 64) - 1


def _fnv1a(text, h=1469598103934665603):
    for c in text.encode():
        h = ((h ^ c) * 1099511628211) & _M64
    return h


def _mix(z):
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & _M64
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & _M64
    return z ^ (z >> 31)


def rendezvous_rank(key, nodes):
    """The nodes in the order runtime/ownership.cpp ranks them for `key` (owner first)."""
    w = lambda n: _mix(_fnv1a(n, _fnv1a(key) ^ 0x9e3779b97f4a7c15))
    return sorted(nodes, key=lambda n: (-w(n), n))


_keys_used = set()


def key_for(nodes, first, second=None):
    """A fresh client key (never returned before: a key names one job cluster-wide) whose
    owner is node `first` (and second holder `second`, if given)."""
    for i in range(1000000):
        key = f"key-{os.getpid()}-{i}"
        if key in _keys_used:
            continue
        r = rendezvous_rank(key, nodes)
        if r[0] == first and (second is None or r[1] == second):
            _keys_used.add(key)
            return key
    raise Failure("no key found")


def descendants_matching(c, pattern):
    """The pids of the processes whose command line holds `pattern` and that descend from one
    of this cluster's nodes: the same program run by another test at the same time (ctest
    runs two at once) is not counted."""
    nodes = {n["proc"].pid for n in c.nodes.values()}
    r = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    found = []
    for pid in (int(p) for p in r.stdout.split()):
        p = pid
        while p > 1 and p not in nodes:
            try:
                with open(f"/proc/{p}/stat") as f:
                    p = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                p = 0
        if p in nodes:
            found.append(pid)
    return found


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead, only not yet reaped
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


_results = []
_reporting = []


def _report():
    failed = [name for name, ok in _results if not ok]
    if _results:
        print(f"scenarios: {len(_results) - len(failed)} passed, {len(failed)} failed"
              + (f" ({', '.join(failed)})" if failed else ""), flush=True)
    if failed:
        sys.stdout.flush()
        os._exit(1)


def run(*tests):
    """Runs every scenario with a fresh cluster, each even after another failed, and prints
    a ctest-friendly verdict per scenario ("PASS name" / "FAIL name: why", with the node
    logs) and a summary line; the process exits 1 when any failed."""
    if not _reporting:
        _reporting.append(True)
        atexit.register(_report)
    only = set(a for a in sys.argv[1:] if not a.startswith("-"))
    for test in tests:
        if only and test.__name__ not in only:
            continue  # `python3 test_x.py SCENARIO...` runs just those
        cluster = Cluster(test.__name__)
        try:
            test(cluster)
            print(f"PASS {test.__name__}", flush=True)
            _results.append((test.__name__, True))
        except Exception as e:  # noqa: BLE001 - report every failure with the node logs
            print(f"FAIL {test.__name__}: {e}", flush=True)
            for name in cluster.nodes:
                print(f"--- {name} stderr ---\n{cluster.stderr(name)[-3000:]}")
                log = os.path.join(cluster.nodes[name]["data"], "runtime.log")
                if os.path.exists(log):
                    print(f"--- {name} runtime.log (tail) ---")
                    print(open(log, errors="replace").read()[-4000:])
            # Nodes started by `monkey up` (MONKEY_HOME/nodes/*): their warnings and errors.
            up_nodes = os.path.join(cluster.home, "nodes")
            for name in sorted(os.listdir(up_nodes)) if os.path.isdir(up_nodes) else []:
                log = os.path.join(up_nodes, name, "runtime.log")
                if os.path.exists(log):
                    lines = [l for l in open(log, errors="replace").read().splitlines()
                             if " warning " in l or " error " in l or " critical " in l]
                    print(f"--- {name} (monkey up) runtime.log warnings ---")
                    print("\n".join(lines[-40:]))
            _results.append((test.__name__, False))
            cluster.close()
            continue
        cluster.close()
        shutil.rmtree(cluster.home, ignore_errors=True)
