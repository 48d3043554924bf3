# SPDX-License-Identifier: Apache-2.0
"""The Python helper (`import monkey`, docs/writing-jobs-in-python.md) in real command jobs
on a local cluster: parameters, metric points with their step, checkpoints saved and
resumed from, a stop (SIGTERM) handled within the grace period, a bad parameter named."""
import os
import tempfile
import time

from harness import check, nodes_up, points, run, wait_until

SCRIPT = r'''
import sys, time
import monkey
assert monkey.in_monkey()
monkey.should_stop()  # from now on SIGTERM asks instead of killing
lr = monkey.param("lr", 0.5, float)
hidden = monkey.param("hidden", 0, int)
steps = monkey.param("steps", 5, int)
print("params", lr, hidden, monkey.param("nope", 7, int), sorted(monkey.params()), flush=True)
start = monkey.resume_step() or 0
print("starting at", start, "with", open(monkey.checkpoint_dir() + "/state.txt").read()
      if start else "nothing", flush=True)
for step in range(start, steps):
    monkey.report(step, loss=1.0 / (step + 1), lr=lr)
    with open(monkey.checkpoint_dir() + "/state.txt", "w") as f:
        f.write(str(step + 1))
    monkey.checkpoint(step + 1)
    if monkey.should_stop():
        print(f"stopping cleanly after step {step}", flush=True)
        sys.exit(0)
    time.sleep(float(monkey.param("pause", 0.05, float)))
'''


def script(c):
    path = os.path.join(c.home, "train.py")
    with open(path, "w") as f:
        f.write(SCRIPT)
    return path


def helper_reads_params_and_writes_metrics(c):
    """--set lr=0.1 hidden=256 reach monkey.param with their types, an unset one its default;
    monkey.report's points carry their step; monkey.checkpoint saves the directory."""
    nodes_up(c, 1)
    job = c.submit("--set", "lr=0.1", "--set", "hidden=256", "--", "python3", script(c))
    s = c.wait_final(job, 60)
    check(s["state"] == "succeeded", f"the job: {s}")
    out = c.monkey("logs", job).stdout
    check("params 0.1 256 7 ['HIDDEN', 'LR']" in out and "starting at 0 with nothing" in out, out)
    loss = sorted(points(c, job, "loss"), key=lambda p: p["step"])
    check([p["step"] for p in loss] == [0, 1, 2, 3, 4] and loss[-1]["value"] == 0.2, loss)
    check(all(p["value"] == 0.1 for p in points(c, job, "lr")), "lr reported")
    ck = c.monkey("checkpoints", job).stdout
    check("5" in ck, f"the last checkpoint step is stored: {ck}")
    # A new job resumes from this one's checkpoint through the helper.
    nxt = c.submit("--checkpoint-from", job, "--set", "steps=7", "--", "python3", script(c))
    s = c.wait_final(nxt, 60)
    out = c.monkey("logs", nxt).stdout
    check(s["state"] == "succeeded" and "starting at 5 with 5" in out, out)
    check(sorted(p["step"] for p in points(c, nxt, "loss")) == [5, 6], "steps 5 and 6 only")


def helper_stops_cleanly_and_names_bad_values(c):
    """A cancel's SIGTERM makes monkey.should_stop() true: the script saves and exits within
    the grace period (its line in the log). A parameter that is not of its kind fails the
    job with the parameter named."""
    nodes_up(c, 1)
    job = c.submit("--set", "steps=100000", "--set", "pause=0.1", "--", "python3", script(c))
    wait_until(lambda: len(points(c, job, "loss")) >= 3, 60, "a few steps")
    c.monkey("cancel", job)
    s = c.wait_final(job, 60)
    out = c.monkey("logs", job).stdout
    check(s["state"] == "cancelled" and "stopping cleanly after step" in out, f"{s['state']}: {out[-500:]}")
    bad = c.submit("--set", "hidden=abc", "--", "python3", script(c))
    s = c.wait_final(bad, 60)
    err = c.monkey("logs", bad).stdout + c.monkey("logs", bad, "--err").stdout
    check(s["state"] == "failed" and "parameter hidden='abc' is not a int" in err, err[-800:])


if __name__ == "__main__":
    run(helper_reads_params_and_writes_metrics, helper_stops_cleanly_and_names_bad_values)
