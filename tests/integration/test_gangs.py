# SPDX-License-Identifier: Apache-2.0
"""Gangs across nodes (issue #10, step 2): an app job or a command job of N workers that
does not fit one node is placed by leases on several, all or none, and keeps one owner.
Real nodes, real app hosts that reach each other's ranks over CAF, real kill -9."""
import json
import os
import subprocess
import time

from harness import SLOWDOWN, check, descendants_matching, node_ids, points, run, wait_until

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gang_check.py")


def hosts_running(c, pattern="monkey-app-hello --host"):
    """The processes matching `pattern` that this test's nodes started."""
    return len(descendants_matching(c, pattern))


def two_nodes(c, cpus="2"):
    c.start("n1", "--cpus", cpus)
    c.start("n2", "--cpus", cpus, "--join", c.nodes["n1"]["address"])
    wait_until(lambda: len(json.loads(c.monkey("nodes", "--json").stdout)) == 2, 20,
               "two members")



def app_gang_over_two_nodes(c):
    """4 workers of 1 cpu on two nodes of 2 cpus: two app hosts, whose ranks exchange their
    counts every step across the nodes; every rank reports; the placement is in the record;
    the owner stays the owner."""
    two_nodes(c)
    job = c.submit("--app", "hello", "--workers", "4", "--set", "steps=6", "--set",
                   "samples=20000", "--seed", "5")
    s = c.wait_final(job, 90)
    check(s["state"] == "succeeded" and len(s["attempts"]) == 1, f"the gang succeeded: {s}")
    hosts = s["attempts"][-1]["hosts"]
    check(len(hosts) == 2 and {h.rsplit(":", 1)[1] for h in hosts} == {"0-1", "2-3"},
          f"two parts of two ranks: {hosts}")
    check(s["owner"] == s["attempts"][-1]["node"], f"one owner: {s['owner']}")
    inside = points(c, job, "inside")
    check(sorted({p["rank"] for p in inside}) == [0, 1, 2, 3] and len(inside) == 24,
          f"every rank reports each step, from both nodes: {inside}")
    pi = points(c, job, "pi")
    check(len(pi) == 6 and all(abs(p["value"] - 3.14159) < 0.1 for p in pi),
          f"rank 0 got every rank's counts each step: {pi}")
    text = c.monkey("show", job).stdout
    check("ranks 0-1 on " in text and "ranks 2-3 on " in text, text)
    for r in (0, 3):  # one part's node is not the owner: its logs are read there
        log = c.monkey("logs", job, "--rank", str(r)).stdout
        check(f"rank {r}: started: rank {r} of 4" in log, f"rank {r}'s log: {log}")
    # The same seed on one node gives the same estimate: the ranks' messages crossed nodes.
    c.env["MONKEY_ADDRESS"] = c.nodes["n1"]["address"]
    c.stop("n2")
    one = c.submit("--app", "hello", "--workers", "2", "--set", "steps=6", "--set",
                   "samples=20000", "--seed", "5")
    check(c.wait_final(one, 60)["state"] == "succeeded", "a gang on one node")


def command_gang_over_two_nodes(c):
    """`--workers 4 -- python3 gang_check.py` over two nodes: torchrun's variables per
    part (LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK), rank 0's MASTER_ADDR:MASTER_PORT
    reached from both nodes (a DDP step over gloo when torch is installed); a failing rank
    on one node stops the part on the other."""
    two_nodes(c)
    # Rank 3 lingers: its part ends 3 s after rank 0's; the attempt waits for it.
    # With python3-torch installed this is a DDP step over gloo across the two nodes.
    job = c.submit("--workers", "4", "--env", "GANG_LINGER_RANK=3", "--", "python3", SCRIPT)
    s = c.wait_final(job, 90)
    check(s["state"] == "succeeded" and len(s["attempts"]) == 1,
          f"the gang succeeded in one attempt, its parts ending apart: {s}")
    met = points(c, job, "met")
    check(sorted(p["rank"] for p in met) == [0, 1, 2, 3] and all(p["value"] == 4 for p in met),
          f"every rank met the others: {met}")
    out = c.monkey("logs", job).stdout
    check("local rank 0 of 2, group 0" in out, f"rank 0's part: {out}")
    log = c.monkey("logs", job, "--rank", "3").stdout
    check("rank 3 of 4" in log and "local rank 1 of 2, group 1" in log, f"rank 3's log: {log}")
    # A gang with a dependency is placed across nodes once it is met.
    dep = c.submit("--workers", "4", "--env", "GANG_NO_TORCH=1", "--after", f"ok:{job}",
                   "--", "python3", SCRIPT)
    s = c.wait_final(dep, 90)
    check(s["state"] == "succeeded" and len(s["attempts"][-1]["hosts"]) == 2,
          f"the dependent gang ran on two nodes: {s}")
    bad = c.submit("--workers", "4", "--env", "GANG_FAIL_RANK=3", "--env", "GANG_NO_TORCH=1",
                   "--", "python3", SCRIPT)
    t0 = time.time()
    s = c.wait_final(bad, 90)
    check(s["state"] == "failed", f"failed: {s}")
    cause = s["attempts"][-1]["cause"]
    check("ranks 2-3 on " in cause and "exit 5" in cause, f"the failing part is named: {cause}")
    check(time.time() - t0 < 50, "the other part was stopped, not left to sleep its 60 s")
    wait_until(lambda: hosts_running(c, SCRIPT) == 0, 20, "every rank to be gone")


def more_workers_than_nodes_wait(c):
    """A gang that the live nodes cannot hold waits, saying so; it starts when a node
    joins."""
    two_nodes(c)
    job = c.submit("--app", "hello", "--workers", "6", "--set", "steps=2")
    why = wait_until(lambda: (lambda w: w if "more workers than the live nodes have" in w
                              else None)(c.monkey("why", job).stdout), 20, "the reason")
    check("room for 4" in why, why)
    c.start("n3", "--cpus", "2", "--join", c.nodes["n1"]["address"])
    # Asked through n1: a node that joined a moment ago may not resolve ids yet.
    c.env["MONKEY_ADDRESS"] = c.nodes["n1"]["address"]
    s = c.wait_final(job, 90)
    check(s["state"] == "succeeded" and len(s["attempts"][-1]["hosts"]) == 3,
          f"placed on the three nodes once the third joined: {s}")


def cancel_stops_every_part(c):
    """Cancelling a gang across nodes stops the app host on every node."""
    two_nodes(c)
    job = c.submit("--app", "hello", "--workers", "4", "--set", "steps=100000", "--set",
                   "step_ms=100")
    wait_until(lambda: hosts_running(c) == 2, 30, "both hosts to run")
    wait_until(lambda: points(c, job, "pi"), 30, "the gang to assemble and step")
    c.monkey("cancel", job)
    s = c.wait_final(job, 60)
    check(s["state"] == "cancelled", f"cancelled: {s}")
    wait_until(lambda: hosts_running(c) == 0, 20, "both hosts to be gone")


def executor_killed_gang_restarts(c):
    """kill -9 of a node that hosts part of a gang: the owner (another node) sees it
    declared dead, requeues the gang without charging a retry and places it again on the
    nodes that live; it succeeds."""
    c.start("n1", "--cpus", "2")
    for n in ("n2", "n3"):
        c.start(n, "--cpus", "2", "--join", c.nodes["n1"]["address"])
    wait_until(lambda: len(json.loads(c.monkey("nodes", "--json").stdout)) == 3, 20,
               "three members")
    job = c.submit("--app", "hello", "--workers", "4", "--set", "steps=40", "--set",
                   "step_ms=150", "--max-requeues", "3")
    s = wait_until(lambda: (lambda s: s if s["state"] == "running" and points(c, job, "pi")
                            else None)(c.show(job)), 40, "the gang to run")
    ids = node_ids(c)
    owner = s["owner"]
    parts = [h.rsplit(":", 1)[0] for h in s["attempts"][-1]["hosts"]]
    victim = next(name for name, nid in ids.items() if nid in parts and nid != owner)
    c.env["MONKEY_ADDRESS"] = c.nodes[next(n for n in ids if n != victim)]["address"]
    c.kill9(victim)
    s = c.wait_final(job, 120)
    check(s["state"] == "succeeded", f"the gang finished after losing a node: {s}")
    first, last = s["attempts"][0], s["attempts"][-1]
    check(first["outcome"] == "lost" and "hosting ranks" in first["cause"],
          f"the first attempt was lost with the node named: {first}")
    check(ids[victim] not in "".join(last["hosts"]), f"placed on living nodes: {last['hosts']}")
    check(s["retries_used"] == 0 if "retries_used" in s else True, "no retry charged")


def competing_gangs_in_order(c):
    """Gangs that each need the whole cluster run one after the other in the gang order:
    the higher priority first, then the earlier submitted; every one finishes."""
    two_nodes(c)
    # The first gang must still run when the last of the others is queued: each submit
    # takes a second or more under a sanitizer (SLOWDOWN), and a 2 s gang had ended first
    # (an 8 s one too, with other tests beside it).
    first = c.submit("--app", "hello", "--workers", "4", "--set", "steps=10", "--set",
                     f"step_ms={round(500 * SLOWDOWN)}")
    wait_until(lambda: c.show(first)["state"] == "running", 30 * SLOWDOWN, "the first gang to run")
    low = c.submit("--app", "hello", "--workers", "4", "--set", "steps=3")
    time.sleep(0.3)
    high = c.submit("--app", "hello", "--workers", "4", "--set", "steps=3", "--priority", "5")
    time.sleep(0.3)
    later = c.submit("--app", "hello", "--workers", "4", "--set", "steps=3")
    check(c.show(first)["state"] == "running", "precondition: the first gang still runs")
    jobs = [first, low, high, later]
    for j in jobs:
        check(c.wait_final(j, 180)["state"] == "succeeded", f"gang {j} finished")
    start = {j: c.show(j)["attempts"][-1]["started_ms"] for j in jobs}
    order = sorted(jobs, key=lambda j: start[j])
    check(order == [first, high, low, later],
          f"started in the gang order (priority, then submit time): {order} vs "
          f"{[first, high, low, later]}")


def time_estimate_backfills(c):
    """EASY backfill on a node with the job's runtime estimate: behind a waiting job that
    holds the reservation, a job with --time-estimate that ends before it starts at once;
    one with neither a timeout nor an estimate waits, saying why."""
    c.start("n1", "--cpus", "2")
    # The first job runs until `why` has asked about the plain one (SLOWDOWN: the CLI calls
    # take seconds under a sanitizer, and a 5 s job had ended by then).
    first = c.submit("--cpus", "1", "--timeout", f"{round(8 * SLOWDOWN)}s", "--", "sleep",
                     str(round(5 * SLOWDOWN)))
    wait_until(lambda: c.show(first)["state"] == "running", 20 * SLOWDOWN, "the first job to run")
    big = c.submit("--cpus", "2", "--", "sleep", "1")
    short = c.submit("--cpus", "1", "--time-estimate", "2s", "--", "sleep", "1")
    plain = c.submit("--cpus", "1", "--", "sleep", "1")
    s = c.wait_final(short, 30 * SLOWDOWN)
    check(s["state"] == "succeeded", f"the estimated job ran: {s}")
    why = c.monkey("why", plain).stdout
    check("backfill needs a timeout or a time estimate" in why, f"why: {why}")
    for j in (first, big, plain):
        check(c.wait_final(j, 60 * SLOWDOWN)["state"] == "succeeded", f"{j} finished")
    at = {j: c.show(j)["attempts"][-1] for j in (first, big, short, plain)}
    check(at[short]["started_ms"] < at[first]["ended_ms"],
          "the job with an estimate backfilled while the first one ran")
    check(at[plain]["started_ms"] >= at[big]["started_ms"],
          "the job without one waited behind the reservation")


if __name__ == "__main__":
    run(app_gang_over_two_nodes, command_gang_over_two_nodes, more_workers_than_nodes_wait,
        cancel_stops_every_part, executor_killed_gang_restarts, competing_gangs_in_order,
        time_estimate_backfills)
