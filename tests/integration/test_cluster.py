# SPDX-License-Identifier: Apache-2.0
"""Membership of a local cluster of real monkey-runtime processes: `monkey up`, gossip,
kill -9 detection and rejoin, a frozen node (SIGSTOP) going suspect then dead and refuting
after SIGCONT, a planned leave, a node with the wrong secret kept out, `monkey down`."""
import json
import os
import re
import signal
import subprocess
import time

from harness import RUNTIME, Failure, check, journal_rows, pid_alive, refused_joiner, run, wait_until


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
        # The refusal counts members as `nodes` does (the agreed list).
        listed = re.search(r"agreed member list: (\d+), of which alive: (\d+)",
                           c.monkey("nodes", "--address", alone["address"]).stdout)
        said = re.search(r"(\d+) of (\d+) agreed members alive", r.stderr)
        check(listed and said and (said.group(1), said.group(2)) == (listed.group(2),
                                                                     listed.group(1)),
              f"the same member counts in nodes and the refusal: {r.stderr}")
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
    finals = {"succeeded", "failed", "cancelled", "timed_out", "lost", "stopped"}
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


def node_names_restart(c):
    """Every node has a name (`monkey up` passes n1, n2, ...): `nodes`, `jobs` and `show`
    show it, and it is accepted as --address and as drain's NODE. `up --restart NAME`
    starts a killed node again on its data directory; a job no node has room for waits
    queued with the reason; a drain that would leave no majority warns first."""
    nodes = up(c, 3)
    listed = json.loads(c.monkey("nodes", "--json").stdout)
    check(sorted(m["name"] for m in listed) == ["n1", "n2", "n3"], f"names: {listed}")
    table = c.monkey("nodes").stdout
    check(table.splitlines()[0].startswith("NAME") and "n2 " in table, table)
    st = c.monkey("status", "--address", "n2").stdout
    check("this node: n2 " in st and "cluster:" in st, f"--address by name: {st}")
    r = c.monkey("status", "--address", "n9", check_rc=False)
    check(r.returncode != 0 and "n9" in r.stderr and "n1" in r.stderr, r.stderr)
    # The console takes a name as every verb does, and `tree NODE` shows another's tree.
    st = c.monkey("--address", "n3", "console", "-c", "status").stdout
    check("this node: n3 " in st, f"console --address by name: {st}")
    c.monkey("--address", "n2", "kill", "core/router")  # marks n2's tree: restarts 1
    tree = c.monkey("--address", "n1", "console", "-c", "tree n2").stdout
    mine = c.monkey("--address", "n1", "tree").stdout
    check("coordinator" in tree and "restarts 1" in tree and "restarts 1" not in mine,
          f"tree n2 from n1's console shows n2's: {tree} / n1's: {mine}")
    r = c.monkey("tree", "n9", check_rc=False)
    check(r.returncode != 0 and "n9: no node of that name" in r.stderr and "n2" in r.stderr,
          r.stderr)
    jid = c.monkey("submit", "--address", "n2", "--", "true").stdout.strip().splitlines()[-1]
    c.wait_final(jid)
    row = [l for l in c.monkey("jobs").stdout.splitlines() if l.startswith(jid[-10:])]
    check(row and row[0].split()[7] in ("n1", "n2", "n3"), f"jobs names the node: {row}")
    shown = c.monkey("show", jid).stdout
    check(any(f"attempt 1 on {n} " in shown for n in ("n1", "n2", "n3"))
          and "owner n" in shown, f"show names the nodes: {shown}")
    # Unsatisfiable: queued with the reason, not refused (a node with a GPU may join).
    r = c.monkey("submit", "--gpus", "1", "--", "true", check_rc=False)
    check(r.returncode == 0 and "warning: no alive node has" in r.stderr,
          f"accepted with a warning: {r.returncode} {r.stderr}")
    gpu_job = r.stdout.strip().splitlines()[-1]
    why = c.monkey("why", gpu_job).stdout
    check("waits for a node with 1 cpus and 1 gpus" in why, why)
    # kill -9 n3, then `up --restart n3`.
    victim = [n for n in nodes if n["name"] == "n3"][0]
    os.kill(victim["pid"], signal.SIGKILL)
    wait_until(lambda: (lambda s: s and s["state"] == "dead")(
        state_of(c, nodes[0]["address"], victim["pid"])), 20, "n3 to be declared dead")
    r = c.monkey("up", "--restart", "n3", "--json", timeout=120)
    back = json.loads(r.stdout)
    check(back["name"] == "n3" and back["pid"] != victim["pid"], f"restarted: {back}")
    m = wait_until(lambda: (lambda s: s if s and s["state"] == "alive" else None)(
        state_of(c, nodes[0]["address"], back["pid"])), 30, "n1 to see n3 back")
    check(m["incarnation"].startswith("2.") and m["name"] == "n3", f"the same node: {m}")
    r = c.monkey("up", "--restart", "n3", check_rc=False)
    check(r.returncode != 0 and "running" in r.stderr, f"a running node is not restarted: {r.stderr}")
    r = c.monkey("up", "--restart", "n7", check_rc=False)
    check(r.returncode == 2 and "n1, n2, n3" in r.stderr, r.stderr)
    # Drain by name (a majority stays: no warning; the rule's table is in membership.test).
    env = dict(c.env, MONKEY_ADDRESS=[n for n in nodes if n["name"] == "n1"][0]["address"])
    r = c.monkey("drain", "n3", "--wait", env=env, timeout=120)
    check("no majority" not in r.stderr and "n3" in r.stdout and "has left" in r.stdout,
          f"drain by name: {r.stdout} {r.stderr}")
    os.kill(nodes[1]["pid"], signal.SIGKILL)
    r = c.monkey("down", timeout=120)
    check("1 node stopped, 2 already not running" in r.stdout, f"down counts: {r.stdout}")


def metrics_outlive_their_node(c):
    """Metric points go to the job's holders as they come: after the node that ran the job
    is killed, show (answered by another holder) still has the history and the series."""
    nodes = up(c, 3)
    jid = c.submit("--", "sh", "-c",
                   'for i in 1 2 3 4; do echo "MONKEY_METRIC step=$((i * 10)) loss=0.$((10 - i))"; done')
    s = c.wait_final(jid)
    check(s["state"] == "succeeded", f"the job succeeded: {s['state']}")
    ran_on = s["attempts"][0]["attempt_id"].split(".")[0]
    listed = json.loads(c.monkey("nodes", "--json").stdout)
    runner = [m for m in listed if m["node"].startswith(ran_on)][0]
    survivors = [n for n in nodes if n["pid"] != runner["pid"]]
    # Every holder has the points soon (they are sent each tick).
    wait_until(lambda: json.loads(c.monkey("show", jid, "--json", "--address",
                                           survivors[0]["address"]).stdout)
               ["metric_history"].get("loss", {}).get("count") == 4, 20,
               "the points to reach the other holders")
    os.kill(runner["pid"], signal.SIGKILL)
    wait_until(lambda: (lambda m: m and m["state"] == "dead")(
        state_of(c, survivors[0]["address"], runner["pid"])), 20, "the runner to be declared dead")
    shown = json.loads(c.monkey("show", jid, "--json", "--address",
                                survivors[0]["address"]).stdout)
    h = shown["metric_history"].get("loss")
    check(h and h["count"] == 4 and abs(h["first"] - 0.9) < 1e-9 and abs(h["last"] - 0.6) < 1e-9,
          f"the history outlives the node that ran the job: {shown['metric_history']}")
    check([p["step"] for p in json.loads(c.monkey(
        "show", jid, "--json", "--metric", "loss", "--address", survivors[0]["address"]
    ).stdout)["series"]] == [10, 20, 30, 40], "the series keeps each point's step")
    row = json.loads(c.monkey("jobs", "--json", "--address", survivors[0]["address"]).stdout)
    check(any(j["id"] == jid and abs(j["metrics"].get("loss", 0) - 0.6) < 1e-9 for j in row),
          f"jobs --json has the last value too: {row}")
    # Every verb finds the job where `jobs` does, and logs say plainly where they are.
    r = c.monkey("logs", jid, "--address", survivors[0]["address"], check_rc=False)
    check(r.returncode != 0 and "are on node" in r.stderr and "dead" in r.stderr,
          f"logs on a dead node are said to be there: {r.stderr}")
    why = c.monkey("why", jid[-8:], "--address", survivors[0]["address"]).stdout
    check("finished: succeeded" in why, f"why answers from a holder: {why}")
    down(c, [n["pid"] for n in survivors])


def rm_with_tombstones(c):
    """`monkey rm` deletes finished jobs (records, logs, metrics) on every member; a member
    that was down keeps its copy until it returns, and is then told to delete it (the
    tombstone), so the job does not come back. Unfinished jobs are refused."""
    nodes = up(c, 3)
    members = {m["node"]: m for m in json.loads(c.monkey("nodes", "--json").stdout)}
    name_of = {n: m["name"] for n, m in members.items()}
    ids = [c.submit("--", "sh", "-c", "echo out; echo 'MONKEY_METRIC loss=1'") for _ in range(6)]
    for j in ids:
        c.wait_final(j)
    running = c.submit("--", "sleep", "60")
    r = c.monkey("rm", running, check_rc=False)
    check(r.returncode == 1 and "cancel it first" in r.stderr, f"a job not finished is kept: {r.stderr}")
    # A job held by n3, which is then killed: rm reaches the other holder only.
    held = {j: [name_of.get(h) for h in c.show(j)["replicas"]] for j in ids}
    victim_job = [j for j in ids if "n3" in held[j]][0]
    n3 = [n for n in nodes if n["name"] == "n3"][0]
    os.kill(n3["pid"], signal.SIGKILL)
    n1 = [n for n in nodes if n["name"] == "n1"][0]
    wait_until(lambda: (lambda m: m and m["state"] == "dead")(state_of(c, n1["address"], n3["pid"])),
               20, "n3 to be declared dead")
    r = c.monkey("rm", victim_job[-8:])
    check("removed 1 job" in r.stdout and "(dead)" in r.stdout,
          f"rm says who was not reached: {r.stdout}")
    listed = lambda addr=None: [j["id"] for j in json.loads(c.monkey(
        "jobs", "--json", *(["--address", addr] if addr else [])).stdout)]
    check(victim_job not in listed(), "the removed job is gone from the listing")
    r = c.monkey("show", victim_job, check_rc=False)
    check(r.returncode != 0 and "no job" in r.stderr, f"show finds it no more: {r.stderr}")
    # n3 comes back with its copy: told by a member with the tombstone, it deletes it.
    c.monkey("up", "--restart", "n3", timeout=120)
    n3_data = n3["data_dir"]

    def gone_everywhere():
        rows = list(journal_rows([n3_data], f"SELECT id FROM jobs WHERE id='{victim_job}'"))
        return not rows and victim_job not in listed()
    wait_until(gone_everywhere, 30, "the returning node to delete its copy")
    time.sleep(3)
    check(victim_job not in listed(), "and it does not come back")
    check(not os.path.exists(os.path.join(n3_data, "logs", victim_job)), "its logs are gone on n3")
    # --older-than: every finished job; --dry-run removes nothing.
    r = c.monkey("rm", "--older-than", "0s", "--state", "succeeded", "--dry-run")
    check("5 jobs would be removed" in r.stdout, r.stdout)
    r = c.monkey("rm", "--older-than", "0s")
    check("removed 5 jobs" in r.stdout, r.stdout)
    left = [j for j in listed()]
    check(left == [running], f"only the running job is left: {left}")
    for n in nodes:
        data = n["data_dir"]
        check(not list(journal_rows([data], "SELECT job_id FROM metrics WHERE key='loss'")),
              f"no metric of a removed job is left on {n['name']}")
    c.monkey("cancel", running)
    c.monkey("down", timeout=120)


def metrics_follow_new_holders(c):
    """A holder frozen while the job runs misses no point: a batch it does not acknowledge
    is sent again, and a holder that replaces it (the frozen one declared dead) pulls the
    points it never saw. Every holder named in the final record has every point."""
    nodes = up(c, 3)
    by_pid = {n["pid"]: n for n in nodes}
    listed = {m["node"]: by_pid[m["pid"]] for m in json.loads(c.monkey("nodes", "--json").stdout)}
    jid = c.submit("--", "sh", "-c", 'for i in $(seq 1 50); do '
                   'echo "MONKEY_METRIC step=$i loss=$i"; sleep 0.1; done')
    s = wait_until(lambda: (lambda s: s if s["state"] == "running" else None)(c.show(jid)), 30,
                   "the job to run")
    ran_on = s["attempts"][-1]["attempt_id"].split(".")[0]
    runner = [n for node, n in listed.items() if node.startswith(ran_on)][0]
    others = [listed[h] for h in s["replicas"] if listed[h]["pid"] != runner["pid"]]
    check(others, f"the job has a holder besides its runner: {s['replicas']}")
    frozen = others[0]
    time.sleep(0.5)
    os.kill(frozen["pid"], signal.SIGSTOP)
    try:
        time.sleep(3.5)  # past the suspicion timeout: declared dead, replaced as a holder
    finally:
        os.kill(frozen["pid"], signal.SIGCONT)
    final = c.wait_final(jid)
    check(final["state"] == "succeeded", f"the job succeeded: {final['state']}")

    def counts():
        dirs = [listed[h]["data_dir"] for h in c.show(jid)["replicas"]]
        rows = journal_rows(dirs, f"SELECT count(*) FROM metrics WHERE job_id='{jid}'")
        return {node: n for node, (n,) in rows}

    last = {}
    try:
        wait_until(lambda: (lambda got: last.update(got) or
                            (len(got) == len(c.show(jid)["replicas"])
                             and all(n == 50 for n in got.values())))(counts()),
                   30, "every holder to have the 50 points")
    except Exception:
        raise Failure(f"points per holder of the final record: {last} (replicas "
                      f"{c.show(jid)['replicas']}, frozen {frozen['name']})")
    down(c, [n["pid"] for n in nodes])


if __name__ == "__main__":
    run(up_kill9_rejoin)
    run(sigstop_suspect_dead_refute)
    run(planned_leave)
    run(wrong_secret_join)
    run(minority_stops)
    run(drain_node)
    run(node_names_restart)
    run(metrics_outlive_their_node)
    run(rm_with_tombstones)
    run(metrics_follow_new_holders)
