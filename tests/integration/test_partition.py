# SPDX-License-Identifier: Apache-2.0
"""A real network partition. Three nodes, each in its own network namespace with one veth
on a bridge (the bridge in a namespace of its own, so the host's network is untouched).
n3, which runs jobs, is cut off by taking its bridge port down, and later reconnected:
the majority (n1, n2) declares it dead and re-runs its jobs; n3 sees no majority, refuses
submissions and starts no attempt; after the heal n3 learns it was declared dead, kills
its stale job processes, rejoins with a new incarnation, and every job has exactly one
final state in every journal.

Where namespaces are not permitted (`unshare -n true` fails, or `ip netns` does), the same
scenario runs with each node reached through a TCP relay that the test blackholes, and the
namespace variant reports SKIPPED with the reason (exit 77, which ctest shows as skipped).
MONKEY_PARTITION_MODE=relay forces the relay variant."""
import json
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time

from harness import (MONKEY, RUNTIME, Cluster, check, current_versions, final_versions,
                     wait_until)

FINALS = {"succeeded", "failed", "cancelled", "timed_out", "lost", "stopped"}
SKIP = 77


def sh(*args, check_rc=True):
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=60)
    if check_rc and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r


def namespaces_permitted():
    """'' when network namespaces, veth pairs and a bridge can be made here, else why not."""
    if shutil.which("ip") is None:
        return "iproute2 (`ip`) is not installed"
    r = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True)
    if r.returncode != 0:
        return f"`unshare -n true` failed: {r.stderr.strip() or r.returncode}"
    probe = f"mkp{os.getpid() % 100000}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"`ip netns add` failed: {r.stderr.strip()}"
    try:
        r = subprocess.run(["ip", "netns", "exec", probe, "ip", "link", "add", "b0", "type",
                            "bridge"], capture_output=True, text=True)
        if r.returncode != 0:
            return f"cannot create a bridge in a namespace: {r.stderr.strip()}"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return ""


class Netns:
    """n namespaces on one bridge; node k at 10.77.<net>.k."""

    def __init__(self, n):
        tag = os.getpid() % 10000
        self.net = tag % 250 + 1
        self.sw = f"mk{tag}sw"
        self.ns = [f"mk{tag}n{k}" for k in range(1, n + 1)]
        self.ports = [f"mk{tag}p{k}" for k in range(1, n + 1)]
        sh("ip", "netns", "add", self.sw)
        sh("ip", "netns", "exec", self.sw, "ip", "link", "add", "br0", "type", "bridge")
        sh("ip", "netns", "exec", self.sw, "ip", "link", "set", "br0", "up")
        for k, (ns, port) in enumerate(zip(self.ns, self.ports), start=1):
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", f"{port}a", "type", "veth", "peer", "name", port)
            sh("ip", "link", "set", f"{port}a", "netns", ns)
            sh("ip", "link", "set", port, "netns", self.sw)
            sh("ip", "netns", "exec", self.sw, "ip", "link", "set", port, "master", "br0")
            sh("ip", "netns", "exec", self.sw, "ip", "link", "set", port, "up")
            sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{self.ip(k)}/24", "dev",
               f"{port}a")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", f"{port}a", "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")

    def ip(self, k):
        return f"10.77.{self.net}.{k}"

    def wrap(self, k, argv):
        return ["ip", "netns", "exec", self.ns[k - 1], *argv]

    def cut(self, k):
        sh("ip", "netns", "exec", self.sw, "ip", "link", "set", self.ports[k - 1], "down")

    def heal(self, k):
        sh("ip", "netns", "exec", self.sw, "ip", "link", "set", self.ports[k - 1], "up")

    def close(self):
        for ns in [*self.ns, self.sw]:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


class Relay:
    """A TCP relay in front of each node's port. Every node advertises its relay, so every
    node-to-node connection runs through one. The dialing node is recognised by its process
    id in CAF's handshake (node ids carry it, big-endian), so a connection is blackholed
    when either end is cut off: its bytes are read and dropped, the sockets stay open."""

    def __init__(self):
        self.targets = {}   # relay port -> (node port, node name)
        self.pids = {}      # node name -> pid
        self.cut_off = set()
        self.conns = []     # [client socket, upstream socket, target name, dialer name]
        self.lock = threading.Lock()
        self.listeners = {}
        self.stop = False
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def add(self, name, node_port):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        s.setblocking(False)
        with self.lock:
            self.listeners[s] = name
            self.targets[name] = node_port
        return s.getsockname()[1]

    def blocked(self, conn):
        return conn[2] in self.cut_off or conn[3] in self.cut_off

    def dialer_of(self, data):
        for name, pid in self.pids.items():
            if struct.pack(">I", pid) in data[:400]:
                return name
        return None

    def loop(self):
        while not self.stop:
            with self.lock:
                socks = list(self.listeners) + [s for c in self.conns for s in c[:2]]
            if not socks:
                time.sleep(0.05)
                continue
            try:
                ready, _, _ = select.select(socks, [], [], 0.05)
            except (OSError, ValueError):  # a socket closed meanwhile
                continue
            for s in ready:
                with self.lock:
                    name = self.listeners.get(s)
                if name is not None:
                    try:
                        client, _ = s.accept()
                        up = socket.create_connection(("127.0.0.1", self.targets[name]))
                    except OSError:
                        continue
                    with self.lock:
                        self.conns.append([client, up, name, None])
                    continue
                with self.lock:
                    conn = next((c for c in self.conns if s in c[:2]), None)
                if conn is None:
                    continue
                try:
                    data = s.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    with self.lock:
                        if conn in self.conns:
                            self.conns.remove(conn)
                    for x in conn[:2]:
                        try:
                            x.close()
                        except OSError:
                            pass
                    continue
                if s is conn[0] and conn[3] is None:  # the dialer's handshake names it
                    conn[3] = self.dialer_of(data) or "?"
                    if os.environ.get("MONKEY_RELAY_DEBUG"):
                        print(f"relay: {conn[3]} -> {conn[2]} ({len(data)} bytes first)", flush=True)
                if self.blocked(conn):
                    continue  # the blackhole: read and dropped
                try:
                    (conn[1] if s is conn[0] else conn[0]).sendall(data)
                except OSError:
                    pass

    def cut(self, name):
        self.cut_off.add(name)

    def heal(self, name):
        self.cut_off.discard(name)

    def close(self):
        self.stop = True
        self.thread.join(5)


class Nodes:
    """Three runtimes under one MONKEY_HOME, either in namespaces or behind relays."""

    def __init__(self, c, mode):
        self.c, self.mode = c, mode
        self.net = Netns(3) if mode == "netns" else None
        self.relay = Relay() if mode == "relay" else None
        self.procs, self.addr, self.data = {}, {}, {}

    def start(self, k, seed=None):
        name = f"n{k}"
        data = os.path.join(self.c.home, name)
        self.data[name] = data
        os.makedirs(data, exist_ok=True)
        addr_file = os.path.join(data, "address")
        if os.path.exists(addr_file):
            os.unlink(addr_file)
        args = ["--data-dir", data, "--no-measure", "--cpus", "2",
                "--suspicion-timeout", "1500ms"]
        if seed:
            args += ["--join", seed]
        if self.mode == "netns":
            listen = f"{self.net.ip(k)}:4700"
            argv = self.net.wrap(k, [RUNTIME, "--listen", listen, *args])
        else:
            port = free_port()
            relay_port = self.relay.add(name, port)
            listen = f"127.0.0.1:{port}"
            argv = [RUNTIME, "--listen", listen, "--advertise", f"127.0.0.1:{relay_port}",
                    *args]
        log = open(os.path.join(self.c.home, f"{name}.stderr"), "ab")
        proc = subprocess.Popen(argv, env=self.c.env, stdout=log, stderr=log,
                                start_new_session=True)
        self.procs[name] = proc
        if self.relay:
            self.relay.pids[name] = proc.pid
        wait_until(lambda: os.path.exists(addr_file) or proc.poll() is not None, 30,
                   f"{name} to listen")
        check(proc.poll() is None, f"{name} exited early: {open(log.name).read()[-2000:]}")
        self.addr[name] = listen
        # What the others dial (the relay in relay mode): seeds too, or a join would
        # open a connection that bypasses the relay.
        return listen if self.mode == "netns" else argv[4]

    def monkey(self, name, *args, check_rc=True, timeout=60):
        argv = [MONKEY, "--address", self.addr[name], *args]
        if self.mode == "netns":
            argv = self.net.wrap(int(name[1:]), argv)
        r = subprocess.run(argv, env=self.c.env, capture_output=True, text=True,
                           timeout=timeout)
        if check_rc and r.returncode != 0:
            raise RuntimeError(f"monkey {' '.join(args)} on {name}: {r.stderr.strip()}")
        return r

    def nodes_json(self, name):
        r = self.monkey(name, "nodes", "--json", check_rc=False)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def jobs(self, name):
        r = self.monkey(name, "jobs", "--json", check_rc=False)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def cut(self, name):
        (self.net or self.relay).cut(int(name[1:]) if self.net else name)

    def heal(self, name):
        (self.net or self.relay).heal(int(name[1:]) if self.net else name)

    def close(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    pass
        if self.net:
            self.net.close()
        if self.relay:
            self.relay.close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def holders_agree_detail(nodes, ids):
    recs = current_versions(nodes.data.values())
    return {j: recs.get(j) for j in ids}


def state_of(nodes, observer, target_pid):
    ms = nodes.nodes_json(observer)
    for m in ms or []:  # not answering: None, which the callers' waits time out on
        if m["pid"] == target_pid:
            return m
    return None


def scenario(c, mode):
    nodes = Nodes(c, mode)
    try:
        seed = nodes.start(1)
        nodes.start(2, seed)
        nodes.start(3, seed)
        pid3 = nodes.procs["n3"].pid
        wait_until(lambda: all(
            (lambda ms: ms and len(ms) == 3 and all(m["state"] == "alive" for m in ms))(
                nodes.nodes_json(n)) for n in ("n1", "n2", "n3")), 60, "3 alive everywhere")
        # Jobs through every node; some run on n3 when it is cut off.
        ids = []
        for i in range(12):
            out = nodes.monkey(f"n{i % 3 + 1}", "submit", "--name", f"p{i}", "--", "sleep",
                               "4").stdout
            ids.append(out.strip().splitlines()[-1])
        wait_until(lambda: (lambda js: js if js and any(
            j["state"] == "running" and j["ran_on"] == state_of(nodes, "n1", pid3)["node"]
            for j in js) else None)(nodes.jobs("n1")), 60, "a job running on n3")
        cut_ms = int(time.time() * 1000)
        nodes.cut("n3")
        print(f"[{mode}] n3 cut off", flush=True)

        # The majority declares n3 dead; n3 sees no majority.
        wait_until(lambda: (lambda m: m and m["state"] == "dead")(
            state_of(nodes, "n1", pid3)), 60, "n1 to declare n3 dead")
        wait_until(lambda: "no majority" in nodes.monkey("n3", "nodes", check_rc=False).stdout,
                   60, "n3 to see that it has no majority")
        r = nodes.monkey("n3", "submit", "--", "true", check_rc=False)
        check(r.returncode != 0 and "majority" in r.stderr,
              f"the minority refuses submissions, saying why: {r.stderr}")
        r = nodes.monkey("n1", "submit", "--name", "during", "--", "true")
        ids.append(r.stdout.strip().splitlines()[-1])
        # The majority re-runs what n3 ran; meanwhile n3 starts no attempt.
        time.sleep(6)
        n3_id = state_of(nodes, "n1", pid3)["node"]
        minority_view = nodes.jobs("n3")
        check(minority_view, f"the minority still answers its listing: {minority_view}")
        shown = 0
        for j in minority_view:
            r = nodes.monkey("n3", "show", j["id"], "--json", check_rc=False)
            if r.returncode != 0:
                # A job it does not hold: listed from memory, its holders out of reach.
                check("holder" in r.stderr or "unavailable" in r.stderr,
                      f"the minority says why it cannot show {j['id']}: {r.stderr}")
                continue
            shown += 1
            s = json.loads(r.stdout)
            started = [a for a in s["attempts"]
                       if a["started_ms"] > cut_ms + 1000]
            check(not started, f"the minority started no attempt after the cut: {s}")
        check(shown > 0, f"the minority shows the jobs it holds: {minority_view}")
        print(f"[{mode}] majority carries on; the minority starts nothing", flush=True)

        nodes.heal("n3")
        print(f"[{mode}] healed", flush=True)
        m = wait_until(lambda: (lambda m: m if m and m["state"] == "alive" else None)(
            state_of(nodes, "n1", pid3)), 90, "n3 alive again after the heal")
        log3 = open(os.path.join(nodes.data["n3"], "runtime.log")).read()
        check("this node was declared dead" in log3,
              "n3 learned it was declared dead and fenced")
        js = wait_until(lambda: (lambda js: js if js and len(js) == len(ids) and all(
            j["state"] in FINALS for j in js) else None)(nodes.jobs("n1")), 180,
            "every job final")
        check(sorted(j["id"] for j in js) == sorted(ids), "every job listed once")
        check(all(j["state"] == "succeeded" for j in js), f"every job succeeded: {js}")
        finals = wait_until(lambda: (lambda f: f if all(f.get(j) for j in ids) else None)(
            final_versions(nodes.data.values())), 60, "the finals in the journals")
        for jid in ids:
            versions = {v for v, _ in finals[jid]}
            check(len(versions) == 1, f"job {jid}: exactly one final state: {finals[jid]}")
        # Anti-entropy: every holder of each job converges on the newest record.
        def holders_agree():
            recs = current_versions(nodes.data.values())
            bad = {}
            for jid in ids:
                views = recs.get(jid, {})
                newest = max(views.values()) if views else None
                holders = json.loads(nodes.monkey("n1", "show", jid, "--json").stdout)["replicas"]
                for h in holders:
                    if views.get(h) != newest:
                        bad[jid] = (h, views.get(h), newest)
            return None if bad else True
        try:
            wait_until(lambda: holders_agree() or None, 60, "the holders of every job to agree",
                       interval=1)
        except Exception:
            raise RuntimeError(f"holders disagree: {holders_agree_detail(nodes, ids)}")
        ae = sum(open(os.path.join(d, "runtime.log")).read().count("anti-entropy with")
                 for d in nodes.data.values())
        print(f"[{mode}] holders agree ({ae} anti-entropy exchanges moved records)", flush=True)
        print(f"[{mode}] {len(ids)} jobs, each with exactly one final state; n3 rejoined as "
              f"incarnation {m['incarnation']} ({n3_id})", flush=True)
    finally:
        nodes.close()


def main():
    forced = os.environ.get("MONKEY_PARTITION_MODE", "")
    why = namespaces_permitted() if forced != "relay" else "MONKEY_PARTITION_MODE=relay"
    mode = "netns" if not why else "relay"
    c = Cluster(f"partition_{mode}")
    try:
        scenario(c, mode)
        print(f"PASS partition ({mode})")
    except Exception as e:  # noqa: BLE001
        print(f"FAIL partition ({mode}): {e}")
        for f in sorted(os.listdir(c.home)):
            log = os.path.join(c.home, f, "runtime.log")
            if os.path.exists(log):
                print(f"--- {f} runtime.log (tail) ---\n{open(log, errors='replace').read()[-3000:]}")
        sys.exit(1)
    shutil.rmtree(c.home, ignore_errors=True)
    if why:
        print(f"SKIPPED partition in network namespaces: {why} (the same scenario passed "
              "through a TCP relay)")
        sys.exit(SKIP)


if __name__ == "__main__":
    main()
