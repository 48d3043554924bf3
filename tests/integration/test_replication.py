# SPDX-License-Identifier: Apache-2.0
"""Jobs in a cluster without a master (real processes): any node accepts a submission and
forwards it to the job's owner; jobs run across all nodes; `monkey jobs` on any node shows
each job once; kill -9 of the owner of running jobs loses none of them and gives none a
second final state; the old owner, restarted on its data directory, hands over."""
import datetime
import json
import os
import signal
import subprocess
import time

from harness import MONKEY, RUNTIME, SLOWDOWN, Failure, check, journal_rows, final_versions, run, wait_until

FINALS = {"succeeded", "failed", "cancelled", "timed_out", "lost", "stopped"}


def up(c, n):
    nodes = json.loads(c.monkey("up", str(n), "--no-measure", "--cpus", "2", "--json",
                                timeout=120).stdout)["nodes"]
    check(len(nodes) == n, f"{n} nodes up")
    return nodes


def jobs_at(c, address):
    r = c.monkey("jobs", "--json", "--address", address, check_rc=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def all_final(c, address, count):
    js = jobs_at(c, address)
    if js and len(js) == count and all(j["state"] in FINALS for j in js):
        return js
    return None


def one_final_each(c, data_dirs, ids):
    """Waits until every job's final transition is in a journal, then checks that each
    has exactly one final state (one version) across all journals."""
    finals = wait_until(lambda: (lambda f: f if all(f.get(j) for j in ids) else None)(
        final_versions(data_dirs)), 30, "the final transitions in the journals")
    for jid in ids:
        versions = {v for v, _ in finals[jid]}
        check(len(versions) == 1, f"job {jid}: exactly one final state: {finals[jid]}")


def spread_and_list(c):
    nodes = up(c, 3)
    ids = []
    for n in nodes:
        for i in range(3):
            out = c.monkey("submit", "--address", n["address"], "--name", f"{n['name']}-{i}",
                           "--", "sh", "-c", "echo from $MONKEY_JOB_ID").stdout
            ids.append(out.strip().splitlines()[-1])
    for n in nodes:
        js = wait_until(lambda: all_final(c, n["address"], 9), 60, f"{n['name']} to list 9 final")
        check(sorted(j["id"] for j in js) == sorted(ids), f"{n['name']} lists each job once")
        check(all(j["state"] == "succeeded" for j in js), f"all succeeded: {js}")
    ran_on = {j["ran_on"] for j in jobs_at(c, nodes[0]["address"])}
    check(len(ran_on) >= 2, f"jobs ran on several nodes: {ran_on}")
    # Any node answers show and logs, whoever owns the job.
    for jid in ids[:3]:
        for n in nodes:
            s = json.loads(c.monkey("show", jid, "--json", "--address", n["address"]).stdout)
            check(s["state"] == "succeeded", f"show through {n['name']}: {s['state']}")
            out = c.monkey("logs", jid, "--address", n["address"]).stdout
            check(f"from {jid}" in out, f"logs through {n['name']}: {out!r}")
    c.monkey("down", timeout=120)


def owner_kill9(c):
    nodes = up(c, 3)
    entry = nodes[0]
    # Long enough that a job still runs on another node when the list shows it, also
    # under a sanitizer, where every `monkey` call takes longer.
    ids = [c.monkey("submit", "--address", entry["address"], "--name", f"s{i}", "--",
                    "sleep", str(round(2 * SLOWDOWN))).stdout.strip().splitlines()[-1]
           for i in range(8)]
    by_node = {n["pid"]: n for n in nodes}
    members = json.loads(c.monkey("nodes", "--json", "--address", entry["address"]).stdout)
    node_of = {m["node"]: m["pid"] for m in members}
    entry_node = [m["node"] for m in members if m["pid"] == entry["pid"]][0]

    def running_elsewhere():
        js = jobs_at(c, entry["address"]) or []
        owners = [j["owner"] for j in js if j["state"] == "running" and j["owner"] != entry_node]
        return owners[0] if owners else None

    victim_node = wait_until(running_elsewhere, 30, "a job running on another node")
    victim = by_node[node_of[victim_node]]
    os.kill(victim["pid"], signal.SIGKILL)
    killed_ms = int(time.time() * 1000)
    js = wait_until(lambda: all_final(c, entry["address"], 8), 120,
                    "every acknowledged job to finish")
    check(sorted(j["id"] for j in js) == sorted(ids), "no accepted job lost")
    check(all(j["state"] == "succeeded" for j in js), f"all succeeded: {js}")
    # Every job that had not ended was adopted. A record that was final before the death
    # keeps its owner (its holders keep custody of it, cluster.md), and under a sanitizer
    # jobs of the victim often end before the kill. Which ones did is read from the records
    # themselves: the owner stamps updated_ms when it makes a transition, before the holders
    # store it, so a job the dead node still owns must have ended before the kill. (A list
    # taken before the kill missed the jobs that ended between the list and the kill.)
    late = [j for j in js if j["owner"] == victim_node and j["updated_ms"] > killed_ms]
    check(not late, f"the dead node owns no job that ended after its death ({killed_ms}): {late}")
    one_final_each(c, [n["data_dir"] for n in nodes if n is not victim], ids)
    # The old owner comes back on its data directory: it learns its jobs were adopted and
    # runs none of them again.
    log = open(os.path.join(victim["data_dir"], "restart.log"), "ab")
    proc = subprocess.Popen([RUNTIME, "--listen", victim["address"], "--data-dir",
                             victim["data_dir"], "--no-measure", "--cpus", "2", "--join",
                             entry["address"]], env=c.env, stdout=log, stderr=log,
                            start_new_session=True)
    try:
        runtime_log = os.path.join(victim["data_dir"], "runtime.log")
        wait_until(lambda: "every recovered job heard from its other holders"
                   in open(runtime_log).read()
                   or "0 jobs wait to hear" in open(runtime_log).read().split("incarnation 2")[-1],
                   30, "the restarted node to sync")
        js = wait_until(lambda: all_final(c, entry["address"], 8), 30, "the list after the return")
        check(all(j["state"] == "succeeded" for j in js), f"still all succeeded once: {js}")
        one_final_each(c, [n["data_dir"] for n in nodes], ids)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    c.monkey("down", timeout=120)


def owner_sigstop_fenced(c):
    """SIGSTOP of an owner of running jobs: alive -> suspect -> dead; the holders adopt
    and re-run its jobs; after SIGCONT it kills its stale job processes before it rejoins
    with a new incarnation, and no job gets a second final state."""
    nodes = up(c, 3)
    entry = nodes[0]
    ids = [c.monkey("submit", "--address", entry["address"], "--name", f"f{i}", "--",
                    "sleep", "10").stdout.strip().splitlines()[-1] for i in range(6)]
    members = json.loads(c.monkey("nodes", "--json", "--address", entry["address"]).stdout)
    node_of = {m["node"]: m["pid"] for m in members}
    entry_node = [m["node"] for m in members if m["pid"] == entry["pid"]][0]

    def running_elsewhere():
        js = jobs_at(c, entry["address"]) or []
        owners = [j["owner"] for j in js if j["state"] == "running" and j["owner"] != entry_node]
        return owners[0] if owners else None

    victim_node = wait_until(running_elsewhere, 30 * SLOWDOWN, "a job running on another node")
    victim = [n for n in nodes if n["pid"] == node_of[victim_node]][0]
    owned = [j["id"] for j in jobs_at(c, entry["address"]) if j["owner"] == victim_node]
    stopped_ms = time.time() * 1000
    os.kill(victim["pid"], signal.SIGSTOP)
    try:
        wait_until(lambda: (lambda ms: ms and ms[victim["pid"]]["state"] == "dead")(
            {m["pid"]: m for m in json.loads(c.monkey("nodes", "--json", "--address",
                                                       entry["address"]).stdout)}),
            30 * SLOWDOWN, "the stopped owner to be declared dead")
        wait_until(lambda: all(j["owner"] != victim_node
                               for j in jobs_at(c, entry["address"]) or [{"owner": victim_node}]
                               if j["id"] in owned),
                   30 * SLOWDOWN, "its jobs to be adopted")
    finally:
        os.kill(victim["pid"], signal.SIGCONT)
    runtime_log = os.path.join(victim["data_dir"], "runtime.log")
    wait_until(lambda: "fenced: killed" in open(runtime_log).read(), 30 * SLOWDOWN,
               "the resumed node to fence its jobs")
    text = open(runtime_log).read()
    killed = int(text.split("fenced: killed ", 1)[1].split()[0])
    check(killed >= 1, f"it killed its stale job processes: {killed}")
    m = wait_until(lambda: (lambda ms: ms.get(victim["pid"]) if ms and ms.get(victim["pid"], {}).get("state") == "alive" else None)(
        {m["pid"]: m for m in json.loads(c.monkey("nodes", "--json", "--address",
                                                   entry["address"]).stdout)}),
        30 * SLOWDOWN, "the fenced node to rejoin")
    check(m["incarnation"] != "1.0", f"it rejoined with a new incarnation: {m}")
    js = wait_until(lambda: all_final(c, entry["address"], 6), 120, "every job to finish")
    check(all(j["state"] == "succeeded" for j in js), f"all succeeded: {js}")
    one_final_each(c, [n["data_dir"] for n in nodes], ids)
    # The fenced node started nothing between its resume and the end of its sync: an
    # attempt there after the pause began only once it had heard from the cluster (a job
    # adopted elsewhere may come back to it later by a reservation, as to any node).
    text = open(runtime_log).read()
    synced_line = [l for l in text.split("fenced: killed", 1)[1].splitlines()
                   if "every recovered job heard from the cluster" in l]
    check(synced_line, "the fenced node finished its sync")
    synced_ms = datetime.datetime.strptime(synced_line[0].split()[0],
                                           "%Y-%m-%dT%H:%M:%S.%f").timestamp() * 1000
    for jid in owned:
        s = json.loads(c.monkey("show", jid, "--json", "--address", entry["address"]).stdout)
        here = [a for a in s["attempts"] if a["attempt_id"].startswith(victim_node[:8])]
        early = [a for a in here if stopped_ms < a["started_ms"] < synced_ms]
        check(not early, f"job {jid} started on the fenced node before its sync ended "
                         f"({synced_ms:.0f}): {s['attempts']}")
        check(s["owner"] != victim_node or any(a["started_ms"] >= synced_ms for a in here),
              f"job {jid} stays with its adopter unless placed back after the sync: {s}")
    c.monkey("down", timeout=120)


def replicas_down(c):
    """Losing R nodes at once: the jobs they alone held are listed as "unavailable (replicas
    down)", never silently missing, and come back when a holder restarts on its data."""
    nodes = up(c, 5)
    entry = nodes[0]
    node_ids = {}
    for n in nodes:
        r = c.monkey("status", "--json", "--address", n["address"])
        node_ids[n["name"]] = json.loads(r.stdout)["node"]
    doomed = {node_ids["n4"], node_ids["n5"]}
    ids, theirs, listed = [], [], None
    for i in range(60):
        out = c.monkey("submit", "--address", nodes[i % 5]["address"], "--name", f"d{i}", "--",
                       "sleep", "60").stdout
        ids.append(out.strip().splitlines()[-1])
        if i >= 9:
            # Queued jobs may still move to a node with a free slot (a reservation): the
            # jobs held only by n4 and n5 are those of the listing right before the kill.
            listed = jobs_at(c, entry["address"])
            theirs = [j["id"] for j in listed or [] if set(j["holders"]) <= doomed]
            if theirs:
                break
    check(theirs, "some job is held only by n4 and n5")
    check(len(listed) == len(ids), f"n1 lists all {len(ids)} jobs")  # n1 has seen every job
    for n in nodes[3:]:
        os.kill(n["pid"], signal.SIGKILL)
    last = {}

    def all_of_theirs_unavailable():
        js = jobs_at(c, entry["address"])
        last["rows"] = js
        if js and all(j["state"] == "unavailable" for j in js if j["id"] in theirs) \
                and len(js) == len(ids):
            return js
        return None

    try:
        rows = wait_until(all_of_theirs_unavailable, 60, "the jobs of n4 and n5 unavailable")
    except Failure:
        js = last.get("rows")
        if js is None:
            print("  the last listing at n1 failed")
        else:
            print(f"  the last listing at n1: {len(js)} of {len(ids)} jobs")
            for j in js:
                if j["id"] in theirs and j["state"] != "unavailable":
                    print(f"  still {j['state']}: {j}")
        raise
    for j in rows:
        if j["id"] in theirs:
            check("replicas down" in j["reason"], f"the reason says why: {j}")
        else:
            check(j["state"] != "unavailable", f"jobs with a live holder stay available: {j}")
    text = c.monkey("jobs", "--address", entry["address"]).stdout
    check("unavailable" in text, "the table shows them too")
    # n4 restarts on its data directory: its jobs come back.
    n4 = nodes[3]
    log = open(os.path.join(n4["data_dir"], "restart.log"), "ab")
    proc = subprocess.Popen([RUNTIME, "--listen", n4["address"], "--data-dir", n4["data_dir"],
                             "--no-measure", "--cpus", "2", "--join", entry["address"]],
                            env=c.env, stdout=log, stderr=log, start_new_session=True)
    try:
        wait_until(lambda: (lambda js: js if js and not any(
            j["state"] == "unavailable" for j in js) else None)(jobs_at(c, entry["address"])),
                   60, "the jobs back after n4 restarted")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    c.monkey("down", timeout=120)


def placement_by_reservation(c):
    """Queued jobs whose owner is busy run on other nodes: the owner asks another node for
    a reservation, the node grants it only when its own placement would start the job now
    (it then owns the job), or refuses; every job runs once, with one final state."""
    n1 = c.start("n1", "--cpus", "1")
    # n1 alone would take 16 s (x SLOWDOWN): n2 and n3 join well before (they start in
    # seconds under a sanitizer and a busy machine).
    ids = [c.submit("--name", f"r{i}", "--", "sleep", str(2 * SLOWDOWN)) for i in range(8)]
    for name in ("n2", "n3"):
        c.start(name, "--cpus", "1", "--join", n1["address"])
    c.env["MONKEY_ADDRESS"] = n1["address"]
    js = wait_until(lambda: all_final(c, n1["address"], 8), 120, "the 8 jobs to finish")
    check(all(j["state"] == "succeeded" and j["attempts"] == 1 for j in js),
          f"every job succeeded with one attempt: {js}")
    ran_on = {j["ran_on"] for j in js}
    check(len(ran_on) >= 2, f"jobs ran on other nodes than their busy owner: {ran_on}")
    log = open(os.path.join(n1["data"], "runtime.log")).read()
    check("by reservation" in log, "n1 placed jobs by reservation")
    one_final_each(c, [c.nodes[n]["data"] for n in ("n1", "n2", "n3")], ids)


def own_jobs_always_listed(c):
    """`monkey jobs` on the node a job was submitted to lists it even while its owner (the
    only holder, R=1) does not answer: the last known row, and the list flagged partial."""
    nodes = json.loads(c.monkey("up", "3", "--no-measure", "--json", "--", "--replicas", "1",
                                timeout=120).stdout)["nodes"]
    entry = nodes[0]
    me = json.loads(c.monkey("status", "--json", "--address", entry["address"]).stdout)["node"]
    job = None
    for i in range(30):
        jid = c.monkey("submit", "--address", entry["address"], "--name", f"own{i}", "--",
                       "sleep", "60").stdout.strip().splitlines()[-1]
        owner = json.loads(c.monkey("show", jid, "--json", "--address",
                                    entry["address"]).stdout)["owner"]
        if owner != me:
            job = (jid, owner)
            break
    check(job is not None, "a job owned by another node")
    by_id = {json.loads(c.monkey("status", "--json", "--address", n["address"]).stdout)["node"]:
             n for n in nodes}
    frozen = by_id[job[1]]
    os.kill(frozen["pid"], signal.SIGSTOP)
    try:
        def listed():
            r = c.monkey("jobs", "--json", "--address", entry["address"], check_rc=False)
            if r.returncode != 0:
                return None
            rows = [j for j in json.loads(r.stdout) if j["id"] == job[0]]
            return (rows[0], r.stderr) if rows else None
        # Suspect (the list is partial): the last known row; once declared dead: the row
        # says its holders are down. Never silently missing.
        seen = set()
        deadline = time.time() + 30
        while time.time() < deadline and len(seen) < 2:
            got = listed()
            check(got is not None, "the job is listed while its owner is frozen")
            row, err = got
            if "last known" in row["reason"]:
                check("partial list" in err, f"the list says it is partial: {err}")
                seen.add("last known")
            elif row["state"] == "unavailable":
                seen.add("unavailable")
            time.sleep(0.2)
        check(seen, f"the row is marked as last known or unavailable: {row}")
    finally:
        os.kill(frozen["pid"], signal.SIGCONT)
    c.monkey("down", timeout=120)


def holder_killed_before_submit(c):
    """A submission whose chosen holder was just killed (not yet declared dead) is
    acknowledged once a live member holds its copy instead, within failure detection plus a
    retry: never answered "under-replicated" while enough members live to hold it."""
    nodes = up(c, 3)
    entry, victim = nodes[0], nodes[2]
    victim_id = json.loads(c.monkey("status", "--json", "--address",
                                    victim["address"]).stdout)["node"]
    os.kill(victim["pid"], signal.SIGKILL)
    started = time.monotonic()
    procs = [subprocess.Popen([MONKEY, "submit", "--address", entry["address"],
                               "--name", f"k{i}", "--", "true"], env=c.env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(8)]
    ids = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        check(p.returncode == 0, f"the submit is acknowledged: rc {p.returncode}: {err.strip()}")
        ids.append(out.strip().splitlines()[-1])
    print(f"  8 submits right after a kill -9 acknowledged in {time.monotonic() - started:.1f} s")
    js = wait_until(lambda: all_final(c, entry["address"], 8), 60, "the 8 jobs to finish")
    for j in js:
        check(j["state"] == "succeeded", f"the job ran: {j}")
        check(len(j["holders"]) == 2 and victim_id not in j["holders"],
              f"two live holders, not the killed one: {j['holders']}")
    c.monkey("down", timeout=120)


def custody_after_two_deaths(c):
    """A finished job's owner dies: its holder gives the record a new holder, and that copy
    names it; when the first holder dies too, the new one restores the copies (every job
    with a live holder keeps min(R, alive) copies)."""
    nodes = up(c, 5)  # 3 survivors: still a majority
    ids = {n["name"]: json.loads(c.monkey("status", "--json", "--address",
                                          n["address"]).stdout)["node"] for n in nodes}
    by_id = {ids[n["name"]]: n for n in nodes}
    jid = c.monkey("submit", "--address", nodes[0]["address"], "--", "true"
                   ).stdout.strip().splitlines()[-1]
    show = lambda n: json.loads(c.monkey("show", jid, "--json", "--address", n["address"]
                                         ).stdout)
    s = wait_until(lambda: (lambda s: s if s["state"] in FINALS else None)(show(nodes[0])), 30,
                   "the job to finish")
    owner, holder = by_id[s["owner"]], by_id[[h for h in s["replicas"] if h != s["owner"]][0]]
    os.kill(owner["pid"], signal.SIGKILL)
    rest = [n for n in nodes if n is not owner and n is not holder]

    def copies(among):
        return {node for node, (job,) in journal_rows([n["data_dir"] for n in among],
                                                      "SELECT id FROM jobs") if job == jid}
    wait_until(lambda: copies(rest), 30, "the holder to give the record a new holder")
    os.kill(holder["pid"], signal.SIGKILL)
    got = wait_until(lambda: (lambda h: h if len(h) == 2 else None)(copies(rest)), 30,
                     "two copies on the survivors")
    check(len(got) == 2, f"min(R, alive) = 2 copies: {got}")
    c.monkey("down", timeout=120)


def joining_node_answers_for_the_cluster(c):
    """A node started with --join answers its clients once it has joined: a `show` sent to
    it while its seed is frozen (SIGSTOP) waits for the join and finds the job the others
    hold, instead of answering from the new node alone that there is no such job."""
    c.start("n1", "--cpus", "2")
    c.start("n2", "--cpus", "2", "--join", c.nodes["n1"]["address"])
    wait_until(lambda: len(json.loads(c.monkey("nodes", "--json").stdout)) == 2, 20, "2 members")
    jid = c.submit("--", "true")
    check(c.wait_final(jid, 30)["state"] == "succeeded", "the job ran")
    seed = c.nodes["n1"]["proc"].pid
    os.kill(seed, signal.SIGSTOP)
    try:
        c.start("n3", "--cpus", "2", "--join", c.nodes["n1"]["address"])
        show = subprocess.Popen([MONKEY, "show", jid, "--json", "--address",
                                 c.nodes["n3"]["address"]], env=c.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        check(show.poll() is None, "the show waits while n3 cannot join: "
              f"{show.poll()} {show.stderr.read() if show.poll() is not None else ''}")
    finally:
        os.kill(seed, signal.SIGCONT)
    out, err = show.communicate(timeout=30)
    check(show.returncode == 0, f"show through the joining node: {err.strip()}")
    s = json.loads(out)
    check(s["id"] == jid and s["state"] == "succeeded", f"the job as the others hold it: {s}")
    log = open(os.path.join(c.nodes["n3"]["data"], "runtime.log"), errors="replace").read()
    check("joined the cluster through" in log, log[-1500:])


if __name__ == "__main__":
    run(spread_and_list)
    run(owner_kill9)
    run(owner_sigstop_fenced)
    run(replicas_down)
    run(placement_by_reservation)
    run(own_jobs_always_listed)
    run(holder_killed_before_submit)
    run(custody_after_two_deaths)
    run(joining_node_answers_for_the_cluster)
