# SPDX-License-Identifier: Apache-2.0
"""Membership of a local cluster of real monkey-runtime processes: `monkey up`, gossip,
kill -9 detection and rejoin, a frozen node (SIGSTOP) going suspect then dead and refuting
after SIGCONT, a planned leave, a node with the wrong secret kept out, `monkey down`."""
import json
import os
import signal
import subprocess

from harness import RUNTIME, check, pid_alive, refused_joiner, run, wait_until


def up(c, n):
    r = c.monkey("up", str(n), "--no-measure", "--json", timeout=120)
    nodes = json.loads(r.stdout)["nodes"]
    check(len(nodes) == n, f"up started {n} nodes: {nodes}")
    return nodes


def members(c, address):
    r = c.monkey("nodes", "--json", "--address", address, check_rc=False)
    if r.returncode != 0:
        return None
    return {m["pid"]: m for m in json.loads(r.stdout)}


def state_of(c, address, pid):
    ms = members(c, address)
    return ms.get(pid) if ms else None


def down(c, pids):
    c.monkey("down", timeout=120)
    check(not any(pid_alive(p) for p in pids), "monkey down stopped every node")
    check(not os.path.exists(os.path.join(c.home, "cluster")), "the cluster file is gone")


def up_kill9_rejoin(c):
    nodes = up(c, 3)
    pids = [n["pid"] for n in nodes]
    for n in nodes:
        ms = members(c, n["address"])
        check(ms is not None and sorted(ms) == sorted(pids)
              and all(m["state"] == "alive" for m in ms.values()),
              f"{n['name']} sees all 3 alive: {ms}")
    # Plain `monkey` commands reach the cluster through the cluster file.
    env = dict(c.env)
    env.pop("MONKEY_ADDRESS", None)
    r = c.monkey("nodes", "--json", env=env)
    check(len(json.loads(r.stdout)) == 3, "the cluster file leads to the cluster")
    victim = nodes[2]
    os.kill(victim["pid"], signal.SIGKILL)
    for n in nodes[:2]:
        m = wait_until(lambda: (lambda s: s if s and s["state"] == "dead" else None)(
            state_of(c, n["address"], victim["pid"])), 20, f"{n['name']} to see n3 dead")
        check("refused" in m["reason"], f"kill -9 is confirmed by a refused connection: {m}")
    # Restarted on its data directory, it rejoins with a higher incarnation.
    log = open(os.path.join(victim["data_dir"], "restart.log"), "ab")
    proc = subprocess.Popen([RUNTIME, "--listen", victim["address"], "--data-dir",
                             victim["data_dir"], "--no-measure", "--cpus", "1",
                             "--join", nodes[0]["address"]],
                            env=c.env, stdout=log, stderr=log, start_new_session=True)
    try:
        for n in nodes[:2]:
            m = wait_until(lambda: (lambda s: s if s and s["state"] == "alive" else None)(
                state_of(c, n["address"], proc.pid)), 30, f"{n['name']} to see n3 back")
            check(m["incarnation"].startswith("2."), f"a new incarnation: {m}")
        ms = members(c, nodes[0]["address"])
        check(len(ms) == 3 and victim["pid"] not in ms,
              f"the same node (its id kept in its data directory), not a fourth: {ms}")
    except BaseException:
        proc.kill()
        raise
    # `down` stops what `up` started, also a node restarted by hand on its data directory.
    r = c.monkey("down", timeout=120)
    check("3 nodes stopped" in r.stdout, f"down counts the nodes it stopped: {r.stdout}")
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        check(False, "down stopped the node restarted by hand")
    check(not any(pid_alive(p) for p in pids[:2]), "monkey down stopped every node")


def sigstop_suspect_dead_refute(c):
    nodes = up(c, 3)
    frozen = nodes[1]
    os.kill(frozen["pid"], signal.SIGSTOP)
    try:
        seen = set()

        def progress():
            s = state_of(c, nodes[0]["address"], frozen["pid"])
            if s:
                seen.add(s["state"])
            return s if s and s["state"] == "dead" else None

        m = wait_until(progress, 30, "the frozen node to be declared dead", interval=0.05)
        check("suspect" in seen or "suspect" in m["reason"] or "suspected" in m["reason"],
              f"it went through suspicion first: states {seen}, {m}")
    finally:
        os.kill(frozen["pid"], signal.SIGCONT)
    m = wait_until(lambda: (lambda s: s if s and s["state"] == "alive" else None)(
        state_of(c, nodes[0]["address"], frozen["pid"])), 30, "the resumed node to refute")
    check(m["incarnation"] != "1.0", f"it refuted with a higher incarnation: {m}")
    down(c, [n["pid"] for n in nodes])


def planned_leave(c):
    nodes = up(c, 3)
    os.kill(nodes[2]["pid"], signal.SIGTERM)
    m = wait_until(lambda: (lambda s: s if s and s["state"] in ("left", "dead") else None)(
        state_of(c, nodes[0]["address"], nodes[2]["pid"])), 20, "the leave to be seen")
    check(m["state"] == "left", f"a SIGTERM is a planned leave, not a failure: {m}")
    down(c, [n["pid"] for n in nodes])


def wrong_secret_join(c):
    nodes = up(c, 2)
    other = os.path.join(c.home, "other-secret")
    with open(other, "w") as f:
        f.write("f" * 64 + "\n")
    os.chmod(other, 0o600)
    pid, text = refused_joiner(c, "intruder", ["--secret-file", other, "--join",
                                               nodes[0]["address"]])
    check("secret" in text, f"the refusal names the secret: {text[-800:]}")
    ms = members(c, nodes[0]["address"])
    check(pid not in ms and len(ms) == 2, f"the intruder is not a member: {ms}")
    down(c, [n["pid"] for n in nodes])


def minority_stops(c):
    """A node that cannot see a majority of the cluster refuses submissions and starts no
    new attempts, but keeps running what it runs; with the majority back it goes on."""
    nodes = up(c, 3)
    alone = nodes[0]
    env = dict(c.env)
    env["MONKEY_ADDRESS"] = alone["address"]
    me = [m["node"] for m in json.loads(c.monkey("nodes", "--json", "--address",
                                                 alone["address"]).stdout) if m["self"]][0]
    running = None
    for _ in range(30):  # a job that this node owns (and so runs)
        jid = c.monkey("submit", "--address", alone["address"], "--", "sleep", "8"
                       ).stdout.strip().splitlines()[-1]
        if json.loads(c.monkey("show", jid, "--json", "--address", alone["address"]
                               ).stdout)["owner"] == me:
            running = jid
            break
    check(running is not None, "a job owned by the lone node")
    wait_until(lambda: json.loads(c.monkey("show", running, "--json", "--address",
                                           alone["address"]).stdout)["state"] == "running",
               30, "a job running before the cut")
    others = nodes[1:]
    for n in others:
        os.kill(n["pid"], signal.SIGSTOP)
    try:
        wait_until(lambda: "no majority" in c.monkey("nodes", "--address",
                                                     alone["address"]).stdout,
                   30, "the lone node to see no majority")
        r = c.monkey("submit", "--address", alone["address"], "--", "true", check_rc=False)
        check(r.returncode != 0 and "cannot see a majority" in r.stderr,
              f"a submission is refused with the reason: {r.returncode} {r.stderr}")
        s = json.loads(c.monkey("show", running, "--json", "--address", alone["address"]).stdout)
        check(s["state"] in ("running", "succeeded"), f"what runs goes on: {s['state']}")
    finally:
        for n in others:
            os.kill(n["pid"], signal.SIGCONT)
    wait_until(lambda: "a majority" in c.monkey("nodes", "--address", alone["address"]).stdout
               and "no majority" not in c.monkey("nodes", "--address", alone["address"]).stdout,
               60, "the majority to come back")
    r = wait_until(lambda: (lambda r: r if r.returncode == 0 else None)(
        c.monkey("submit", "--address", alone["address"], "--wait", "--", "true",
                 check_rc=False)), 60, "submissions to be accepted again")
    s = json.loads(c.monkey("show", running, "--json", "--address", alone["address"]).stdout)
    check(s["state"] in ("running", "succeeded"), f"the job that ran went on: {s}")
    down(c, [n["pid"] for n in nodes])


def drain_node(c):
    """`monkey drain NODE`: the node's queued jobs go to other owners at once, its running
    attempts finish there, then it leaves (announced: "left", not dead); no job loses an
    attempt or runs twice."""
    r = c.monkey("up", "3", "--no-measure", "--cpus", "1", "--json", timeout=120)
    nodes = json.loads(r.stdout)["nodes"]
    ids = [c.monkey("submit", "--name", f"d{i}", "--", "sleep", "2").stdout.strip()
           .splitlines()[-1] for i in range(9)]
    victim = nodes[1]
    status = json.loads(c.monkey("status", "--json", "--address", victim["address"]).stdout)
    r = c.monkey("drain", status["node"][:8], "--wait", "--address", nodes[0]["address"],
                 timeout=120)
    check("handed over" in r.stdout and "has left" in r.stdout, f"drain reports: {r.stdout}")
    wait_until(lambda: not pid_alive(victim["pid"]), 30, "the drained node's process to exit")
    m = state_of(c, nodes[0]["address"], victim["pid"])
    check(m and m["state"] == "left", f"a planned leave, not a failure: {m}")
    r = c.monkey("submit", "--address", victim["address"], "--", "true", check_rc=False)
    check(r.returncode != 0, "the drained node accepts nothing any more")
    finals = {"succeeded", "failed", "cancelled", "timed_out", "lost"}
    js = wait_until(lambda: (lambda js: js if len(js) == 9 and all(
        j["state"] in finals for j in js) else None)(
            json.loads(c.monkey("jobs", "--json", "--address", nodes[0]["address"]).stdout)),
        120, "every job to finish")
    check(all(j["state"] == "succeeded" and j["attempts"] == 1 for j in js),
          f"every job succeeded with one attempt (nothing requeued): {js}")
    r = c.monkey("drain", "nonexistent-node", check_rc=False, env=dict(
        c.env, MONKEY_ADDRESS=nodes[0]["address"]))
    check(r.returncode != 0 and "no node" in r.stderr, f"an unknown node is named: {r.stderr}")
    down(c, [n["pid"] for n in nodes if n is not victim])


if __name__ == "__main__":
    run(up_kill9_rejoin)
    run(sigstop_suspect_dead_refute)
    run(planned_leave)
    run(wrong_secret_join)
    run(minority_stops)
    run(drain_node)
