# SPDX-License-Identifier: Apache-2.0
"""Checkpoints that survive a node (issue #10, step 3): app ranks save_checkpoint, command
jobs MONKEY_CHECKPOINT lines; pieces are copied to the job's holders over a data plane link
(TLS on a --tls cluster) before they count, and a new attempt resumes at the newest complete checkpoint on any
live node. Real nodes, real app hosts, real kill -9."""
import json
import os

from harness import SLOWDOWN, check, kill9_a_part_host, node_ids, nodes_up, points, run, wait_until

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ckpt_job.py")





def runtime_log(c, name):
    path = os.path.join(c.nodes[name]["data"], "runtime.log")
    return open(path, errors="replace").read() if os.path.exists(path) else ""


def app_gang_resumes_after_kill9(c):
    """hello, 4 workers over two of three nodes, checkpointing every 5 steps: kill -9 of a
    node hosting ranks (not the owner) mid-run; the owner starts the gang again on the
    nodes that live, and every rank resumes at the newest complete checkpoint, not at 0."""
    nodes_up(c, 3)
    job = c.submit("--app", "hello", "--workers", "4", "--set", "steps=40", "--set",
                   "step_ms=150", "--set", "checkpoint_every=5", "--max-requeues", "3")
    s = wait_until(lambda: (lambda s: s if s["state"] == "running"
                            and any(p["step"] >= 12 for p in points(c, job, "pi"))
                            else None)(c.show(job)), 60, "the gang to pass step 12")
    first = s["attempts"][-1]["number"]
    kill9_a_part_host(c, s)
    s = c.wait_final(job, 180)
    check(s["state"] == "succeeded" and len(s["attempts"]) >= 2,
          f"the gang finished in a new attempt after losing a node: {s}")
    resumed = points(c, job, "resumed_at")
    check(resumed, "rank 0 reported where it resumed")
    at = resumed[-1]["value"]
    # A checkpoint of step k is saved once step k - 1 settled (pi reported for it); the
    # points of the last 200 ms may die with the node (2 steps of 150 ms at most).
    reached = max(p["step"] for p in points(c, job, "pi") if p.get("attempt") == first)
    check(at >= 10 and at % 5 == 0 and at <= reached + 3,
          f"resumed at a checkpointed step past 0, one the first attempt reached (got {at}; "
          f"it had reached {reached})")
    last = s["attempts"][-1]["number"]
    later = [p["step"] for p in points(c, job, "pi") if p.get("attempt") == last]
    check(later and min(later) == at,
          f"the new attempt's first step is the checkpoint's: {sorted(later)[:3]} vs {at}")


def gang_policy_across_nodes_resumes(c):
    """A rank killed (console `kill`) in a gang across two nodes: the app's gang policy has
    the owner start the whole gang again as a new attempt (no retry charged), and every
    rank resumes from the newest complete checkpoint."""
    nodes_up(c, 2)
    # Slow enough that the kill lands while it runs (SLOWDOWN: under a sanitizer the polls
    # take seconds, and a 4.5 s gang had ended before the kill).
    job = c.submit("--app", "hello", "--workers", "4", "--set", "steps=30", "--set",
                   f"step_ms={round(150 * SLOWDOWN)}", "--set", "checkpoint_every=5")
    s = wait_until(lambda: (lambda s: s if s["state"] == "running"
                            and any(p["step"] >= 12 for p in points(c, job, "pi"))
                            else None)(c.show(job)), 60 * SLOWDOWN, "the gang to pass step 12")
    at = s["attempts"][-1]
    host = next(h for h in at["hosts"] if h.endswith(":2-3")).rsplit(":", 1)[0]
    ids = node_ids(c)
    name = next(n for n, nid in ids.items() if nid == host)
    env = dict(c.env, MONKEY_ADDRESS=c.nodes[name]["address"])
    r = c.monkey("kill", f"core/coordinator/worker-{job[16:]}-{at['number']}/rank-2", env=env,
                 check_rc=False)
    check(r.returncode == 0 and "whole gang" in r.stdout, f"kill: {r.stdout} {r.stderr}")
    s = c.wait_final(job, 120 * SLOWDOWN)
    check(s["state"] == "succeeded" and len(s["attempts"]) == 2, f"two attempts: {s}")
    first = s["attempts"][0]
    check("gang policy" in first["cause"], f"the first attempt says why it ended: {first}")
    check(s.get("retries_used", 0) == 0, "no retry charged")
    resumed = points(c, job, "resumed_at")
    check(resumed and resumed[-1]["value"] >= 10, f"the gang resumed past 0: {resumed}")


def command_job_resumes_on_another_node(c):
    """A command job that prints MONKEY_CHECKPOINT lines: its directory is copied to the
    job's holders; kill -9 of the node running it, and the next attempt, on another node,
    gets the directory back with MONKEY_CHECKPOINT_STEP (the script checks they agree)."""
    nodes_up(c, 3)
    job = c.submit("--max-requeues", "3", "--env", "STEPS=40", "--env", "STEP_S=0.15", "--",
                   "python3", JOB)
    wait_until(lambda: any(p["value"] >= 12 for p in points(c, job, "progress")), 60,
               "the job to pass step 12")
    s = c.show(job)
    ids = node_ids(c)
    victim = next(n for n, nid in ids.items() if nid == s["attempts"][-1]["node"])
    c.env["MONKEY_ADDRESS"] = c.nodes[next(n for n in ids if n != victim)]["address"]
    c.kill9(victim)
    s = c.wait_final(job, 120)
    check(s["state"] == "succeeded", f"the job finished after its node died: {s}")
    last = s["attempts"][-1]
    check(last["node"] != ids[victim], "the next attempt ran on another node")
    check(last["resumed_step"] >= 10 and last["resumed_step"] % 5 == 0,
          f"it resumed at a checkpointed step: {last}")
    check(f"resumed from checkpoint step {last['resumed_step']}" in c.monkey("show", job).stdout,
          "show says where the attempt resumed")


def retry_restores_and_checkpoint_from(c):
    """One node: a retry gets the failed attempt's checkpoint back; a job submitted
    --checkpoint-from another starts from that one's newest checkpoint; a directory written
    without any MONKEY_CHECKPOINT line is saved when the attempt ends; a piece over
    --checkpoint-max-mb is refused with the limit named and the job goes on."""
    c.start("n1", "--cpus", "2", "--checkpoint-max-mb", "1")
    a = c.submit("--retries", "1", "--env", "STEPS=14", "--env", "FAIL_AT=12", "--",
                 "python3", JOB)
    s = c.wait_final(a, 60)
    check(s["state"] == "succeeded" and len(s["attempts"]) == 2, f"retried once: {s}")
    check(s["attempts"][1]["resumed_step"] == 10, f"the retry resumed at 10: {s['attempts']}")
    b = c.submit("--checkpoint-from", a, "--env", "STEPS=20", "--", "python3", JOB)
    s = c.wait_final(b, 60)
    first = s["attempts"][0]
    check(s["state"] == "succeeded" and first["resumed_step"] == 10
          and first["resumed_from"] == a,
          f"the new job started from the other's newest checkpoint (step 10): {first}")
    check(f"of job {a}" in c.monkey("show", b).stdout, "show names whose checkpoint it was")
    # No MONKEY_CHECKPOINT line: the attempt's end saves the directory (step 0).
    w = c.submit("--", "sh", "-c", 'echo 0 > "$MONKEY_CHECKPOINT_DIR/state.txt"')
    check(c.wait_final(w, 30)["state"] == "succeeded", "the writer ran")
    r = c.submit("--checkpoint-from", w, "--env", "STEPS=1", "--", "python3", JOB)
    s = c.wait_final(r, 30)
    check(s["state"] == "succeeded" and s["attempts"][0]["resumed_step"] == 0,
          f"the directory saved at the attempt's end was restored: {s['attempts']}")
    # Over the limit: said in the node's log, and the job still succeeds.
    big = c.submit("--env", "STEPS=5", "--env", "BIG_MB=2", "--", "python3", JOB)
    check(c.wait_final(big, 60)["state"] == "succeeded", "a job whose checkpoint is too big runs on")
    wait_until(lambda: "over this node's limit of 1048576 bytes (--checkpoint-max-mb)"
               in runtime_log(c, "n1"), 10, "the refusal in the node's log")
    bad = c.monkey("submit", "--checkpoint-from", "nonsense", "--", "true", check_rc=False)
    check(bad.returncode == 2 and "--checkpoint-from nonsense" in bad.stderr,
          f"a --checkpoint-from naming no job is refused: {bad.stderr}")
    # A unique suffix is resolved to the whole id, as --after's.
    d = c.submit("--checkpoint-from", a[-8:], "--env", "STEPS=12", "--", "python3", JOB)
    s = c.wait_final(d, 60)
    check(s["attempts"][0]["resumed_from"] == a and s["attempts"][0]["resumed_step"] == 10,
          f"the suffix named the job: {s['attempts'][0]}")


def holders_get_the_piece(c, tls=False):
    """A checkpoint counts only once the job's holders stored it: with R=2 on two nodes,
    both data directories hold the same piece, byte for byte."""
    if tls:
        certs = os.path.join(c.home, "certs")
        c.monkey("certs", "--dir", certs)
        c.env["MONKEY_TLS_DIR"] = certs
        c.start("n1", "--cpus", "2", "--tls", "--tls-dir", certs)
        c.start("n2", "--cpus", "2", "--tls", "--tls-dir", certs, "--join",
                c.nodes["n1"]["address"])
        wait_until(lambda: len(json.loads(c.monkey("nodes", "--json").stdout)) == 2, 30,
                   "2 members")
    else:
        nodes_up(c, 2)
    for name in ("n1", "n2"):
        want = "(tls)" if tls else "(keyed tcp)"
        check(any("blob server at" in line and want in line
                  for line in runtime_log(c, name).splitlines()),
              f"{name}'s blob server speaks {want}")
    job = c.submit("--env", "STEPS=5", "--", "python3", JOB)
    s = c.wait_final(job, 60)
    check(s["state"] == "succeeded", f"ran: {s}")
    found = {}
    for name, n in c.nodes.items():
        root = os.path.join(n["data"], "checkpoints", job)
        if os.path.isdir(root):
            for piece in os.listdir(root):
                f = os.path.join(root, piece, "state.txt")
                if os.path.exists(f):
                    found.setdefault(name, {})[piece] = open(f).read().strip()
    check(len(found) == 2, f"both holders have the job's checkpoint: {found}")
    check(found["n1"] == found["n2"], f"the same pieces on both: {found}")
    # What `monkey checkpoints` says: the piece, on both nodes, and where a new attempt resumes.
    st = json.loads(c.monkey("checkpoints", job[-8:], "--json").stdout)
    check(st["complete_step"] == 5 and st["answered"] == 2, f"checkpoints: {st}")
    check(st["pieces"][0]["step"] == 5 and len(st["pieces"][0]["nodes"]) == 2
          and st["pieces"][0]["files"][0]["name"] == "state.txt", f"the piece: {st['pieces']}")
    text = c.monkey("checkpoints", job).stdout
    check("a new attempt resumes at step 5" in text and "directory" in text, text)


def holders_get_the_piece_over_tls(c):
    """The same on a --tls cluster: the pieces move over TLS with the nodes' certificates."""
    holders_get_the_piece(c, tls=True)


if __name__ == "__main__":
    run(app_gang_resumes_after_kill9, gang_policy_across_nodes_resumes,
        command_job_resumes_on_another_node,
        retry_restores_and_checkpoint_from, holders_get_the_piece,
        holders_get_the_piece_over_tls)
