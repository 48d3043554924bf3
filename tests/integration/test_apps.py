# SPDX-License-Identifier: Apache-2.0
"""Actor apps (issue #10, first step: the SDK and apps on one node). Real app hosts
(`monkey-app-hello`) started by real nodes, connected back over CAF with their attempt's
key: a gang of ranks runs and reports metrics per rank; a failing rank is restarted by the
app's policy, also when `monkey kill` kills it; a segfault fails the job with the signal
named and leaves the node healthy; cancel stops the host; placement uses only nodes that
have the app; bad input gets an error naming the field; a gang command job runs N copies
of a script with torchrun's variables."""
import json
import os
import shutil
import subprocess
import time

from harness import BIN, SLOWDOWN, check, pid_alive, run, wait_until

HELLO = os.path.join(BIN, "monkey-app-hello")


def metric_points(c, job, key):
    return json.loads(c.monkey("show", job, "--metric", key, "--json").stdout)["series"]


def describe_and_bad_input(c):
    """The app describes itself; a submit is checked against what the nodes have."""
    d = json.loads(subprocess.run([HELLO, "--describe"], capture_output=True, text=True,
                                  check=True).stdout)
    check(d["app"] == "hello" and d["actors"] == ["pi_rank"], f"describe: {d}")
    check({p["name"] for p in d["params"]} >= {"samples", "steps", "fail_rank"}, f"params: {d}")
    r = subprocess.run([HELLO], capture_output=True, text=True)
    check(r.returncode == 2 and "monkey submit --app hello" in r.stderr, f"bare run: {r.stderr}")
    c.start("n1", "--cpus", "2")
    members = json.loads(c.monkey("nodes", "--json").stdout)
    check(any(a["name"] == "hello" for m in members for a in m["apps"]),
          f"the node gossips its apps: {members}")
    check("app hello (" in c.monkey("nodes").stdout, "`monkey nodes` lists the apps")

    def refused(*args):
        r = c.monkey("submit", *args, check_rc=False)
        check(r.returncode != 0, f"submit {args} refused")
        return r.stderr
    err = refused("--app", "nosuch")
    check("no node of the cluster has an app 'nosuch'" in err and "known apps: " in err and "hello" in err.split("known apps: ")[1], err)
    err = refused("--app", "hello", "--workers", "0")
    check("--workers" in err, err)
    err = refused("--app", "hello", "--set", "workers=2")
    check("use --workers 2" in err, err)
    err = refused("--app", "hello", "--set", "steps=abc")
    check("--set steps=abc" in err and "integer" in err, err)
    err = refused("--app", "hello", "--set", "steps=0")
    check("below its minimum 1" in err, err)
    err = refused("--app", "hello", "--set", "batch=3")
    check("no parameter 'batch'" in err, err)
    err = refused("--app", "hello", "--", "true")
    check("either a command or an app" in err, err)
    check(c.jobs() == [], "nothing was accepted")


def gang_runs_and_reports(c):
    """4 ranks in one host on one node: they exchange their counts each step (an app
    message type of the app's own), rank 0 reports pi, every rank reports `inside`, and each
    rank writes its own log."""
    c.start("n1", "--cpus", "4")
    job = c.submit("--app", "hello", "--workers", "4", "--set", "steps=6", "--set",
                   "samples=20000", "--seed", "3")
    s = c.wait_final(job, 60)
    check(s["state"] == "succeeded", f"the app job succeeded: {s}")
    pi = metric_points(c, job, "pi")
    check(len(pi) == 6 and all(p["rank"] == 0 for p in pi), f"rank 0 reports pi each step: {pi}")
    check(all(abs(p["value"] - 3.14159) < 0.1 for p in pi), f"pi estimates: {pi}")
    inside = metric_points(c, job, "inside")
    check(sorted({p["rank"] for p in inside}) == [0, 1, 2, 3] and len(inside) == 24,
          f"every rank reports each step: {inside}")
    log = c.monkey("logs", job, "--rank", "2").stdout
    check("rank 2: started: rank 2 of 4" in log and "done: pi is about" in log, f"rank log: {log}")
    r = c.monkey("logs", job, "--rank", "7", check_rc=False)
    check(r.returncode != 0 and "ranks 0 to 3" in r.stderr, r.stderr)
    text = c.monkey("show", job).stdout
    check("ranks 0-3 on " in text and "app hello (build " in text, text)
    # The same seed gives the same points whatever the run.
    again = c.submit("--app", "hello", "--workers", "4", "--set", "steps=6", "--set",
                     "samples=20000", "--seed", "3")
    check(c.wait_final(again, 60)["state"] == "succeeded", "the second run succeeded")
    check([p["value"] for p in metric_points(c, again, "pi")] == [p["value"] for p in pi],
          "deterministic for a seed")


def failing_rank_restarted(c):
    """A rank's actor that fails is restarted by the app's policy (gang: the host's ranks
    start again) and the job still succeeds; the rank's log says so."""
    c.start("n1", "--cpus", "2")
    job = c.submit("--app", "hello", "--workers", "2", "--set", "steps=5", "--set",
                   "fail_rank=1", "--set", "fail_step=2", "--set", "samples=1000")
    s = c.wait_final(job, 60)
    check(s["state"] == "succeeded", f"succeeded after the restart: {s}")
    log = c.monkey("logs", job, "--rank", "1").stdout
    check("failing on purpose at step 2" in log and "restart 1" in log, f"rank 1 log: {log}")
    err = c.monkey("logs", job, "--err").stdout
    check("rank 1 failed" in err, f"the host's stderr names the rank: {err}")


def kill_rank_from_console(c):
    """`monkey kill core/coordinator/worker-ID-1/rank-1` kills that rank's actor in its host;
    the policy restarts it and the job goes on to succeed."""
    c.start("n1", "--cpus", "2")
    job = c.submit("--app", "hello", "--workers", "2", "--set", "steps=30", "--set",
                   f"step_ms={int(100 * SLOWDOWN)}", "--set", "samples=1000")
    short = c.show(job)["id"][-8:]

    def rank_in_tree():
        t = c.monkey("tree").stdout
        return t if "rank-1" in t else None
    tree = wait_until(rank_in_tree, 30, "the app's ranks in the tree")
    worker = next(w for w in tree.split() if w.startswith("worker-"))
    r = c.monkey("kill", f"core/coordinator/{worker}/rank-1", check_rc=False)
    check(r.returncode == 0 and "rank 1" in r.stdout, f"kill: {r.stdout} {r.stderr}")
    s = c.wait_final(job, 90)
    check(s["state"] == "succeeded", f"succeeded after the kill: {s}")
    log = c.monkey("logs", job, "--rank", "1").stdout
    check("restart 1" in log, f"rank 1 was started again: {log}")
    check(short in worker, f"the worker is the job's: {worker}")


def segfault_fails_job_node_healthy(c):
    """A segfault in app code kills its host only: the job fails with the signal named,
    and the node runs the next job."""
    c.start("n1", "--cpus", "2")
    job = c.submit("--app", "hello", "--workers", "2", "--set", "crash=segfault", "--set",
                   "crash_step=1", "--set", "samples=1000")
    s = c.wait_final(job, 60)
    check(s["state"] == "failed", f"failed: {s}")
    cause = json.loads(c.monkey("show", job, "--json").stdout)["attempts"][-1]["cause"]
    check("SIGSEGV" in cause, f"the cause names the signal: {cause}")
    check(c.nodes["n1"]["proc"].poll() is None, "the node lives")
    ok = c.submit("--", "true")
    check(c.wait_final(ok, 30)["state"] == "succeeded", "the node runs the next job")


def cancel_stops_host(c):
    """Cancelling an app job stops its host process."""
    c.start("n1", "--cpus", "2")
    job = c.submit("--app", "hello", "--workers", "2", "--set", "steps=100000", "--set",
                   "step_ms=100", "--set", "samples=100")
    wait_until(lambda: c.show(job)["state"] == "running" and c.show(job)["attempts"][-1]["pid"],
               30, "the host to run")
    pid = c.show(job)["attempts"][-1]["pid"]
    check(pid_alive(pid), "the host runs")
    c.monkey("cancel", job)
    s = c.wait_final(job, 30)
    check(s["state"] == "cancelled", f"cancelled: {s}")
    wait_until(lambda: not pid_alive(pid), 15, "the host to be gone")


def placed_where_the_app_is(c):
    """A node without the app never runs it: the job goes to a node that has it; a gang
    larger than any node waits, saying why."""
    empty = os.path.join(c.home, "no-apps")
    os.makedirs(empty)
    c.start("n1", "--cpus", "4", "--app-dir", empty)
    c.start("n2", "--cpus", "2", "--join", c.nodes["n1"]["address"])
    wait_until(lambda: len(json.loads(c.monkey("nodes", "--json").stdout)) == 2, 30,
               "two members")
    env = dict(c.env, MONKEY_ADDRESS=c.nodes["n1"]["address"])
    r = c.monkey("submit", "--app", "hello", "--workers", "2", "--set", "steps=3", env=env)
    job = r.stdout.strip().splitlines()[-1]
    s = c.wait_final(job, 60)
    check(s["state"] == "succeeded", f"succeeded: {s}")
    ran = json.loads(c.monkey("show", job, "--json").stdout)["attempts"][-1]
    n2 = json.loads(c.monkey("status", "--json", "--address", c.nodes["n2"]["address"]).stdout)
    check(ran["hosts"] and all(h.startswith(n2["node"] + ":") for h in ran["hosts"]),
          f"ran on n2, the node with the app: {ran}")
    big = c.submit("--app", "hello", "--workers", "3", "--set", "steps=3")
    time.sleep(1)
    why = c.monkey("why", big).stdout
    check("app 'hello'" in why and "3 workers" in why and "1 live node that can host them"
          in why, f"why: {why}")
    c.monkey("cancel", big)


def gang_command_job(c):
    """`--workers 3 -- python3 gang_check.py`: 3 processes with torchrun's variables meet at
    MASTER_ADDR:MASTER_PORT (a DDP step over gloo when torch is installed), report a metric
    each, and write a log each; when one rank fails the others are stopped and the job fails
    with that rank's exit code."""
    c.start("n1", "--cpus", "3")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gang_check.py")
    job = c.submit("--workers", "3", "--", "python3", script)
    s = c.wait_final(job, 120)
    check(s["state"] == "succeeded", f"the gang succeeded: {s} {c.monkey('logs', job, '--err').stdout}")
    met = metric_points(c, job, "met")
    check(sorted(p["rank"] for p in met) == [0, 1, 2] and all(p["value"] == 3 for p in met),
          f"every rank met the others: {met}")
    log = c.monkey("logs", job, "--rank", "1").stdout
    check("rank 1 of 3, master 127.0.0.1:" in log, f"rank 1's log: {log}")
    check("ranks 0-2 on " in c.monkey("show", job).stdout, "show names the ranks")
    bad = c.submit("--workers", "3", "--env", "GANG_FAIL_RANK=2", "--env", "GANG_NO_TORCH=1",
                   "--", "python3", script)
    s = c.wait_final(bad, 120)
    check(s["state"] == "failed", f"failed: {s}")
    cause = json.loads(c.monkey("show", bad, "--json").stdout)["attempts"][-1]["cause"]
    check(cause == "exit 5", f"the failing rank's exit code: {cause}")
    err = c.monkey("logs", bad, "--err").stdout
    check("rank 2 exited 5; stopping the other ranks" in err, f"the runner says why: {err}")


def app_dirs_in_order(c):
    """--app-dir given twice: the node offers the apps of both folders; an app of a name
    that an earlier folder offers already is skipped, and the log says which one stands."""
    mine = os.path.join(c.home, "my-apps")
    os.makedirs(mine)
    shutil.copy(os.path.join(BIN, "monkey-app-hello"), mine)
    c.start("n1", "--cpus", "2", "--app-dir", mine, "--app-dir", BIN)
    apps = {a["name"] for a in json.loads(c.monkey("nodes", "--json").stdout)[0]["apps"]}
    check({"hello", "allreduce", "fmnist"} <= apps, f"the apps of both folders: {apps}")
    log = open(os.path.join(c.nodes["n1"]["data"], "runtime.log")).read()
    check(f"app hello in {BIN} not offered: {mine}/monkey-app-hello offers it already" in log
          and f"apps from {mine}: hello (" in log, log[-2000:])
    job = c.submit("--app", "hello", "--workers", "1", "--set", "steps=2", "--wait")
    check(c.show(job)["state"] == "succeeded", c.show(job))


if __name__ == "__main__":
    run(describe_and_bad_input, gang_runs_and_reports, failing_rank_restarted,
        kill_rank_from_console, segfault_fails_job_node_healthy, cancel_stops_host,
        placed_where_the_app_is, gang_command_job, app_dirs_in_order)
