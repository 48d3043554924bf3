# SPDX-License-Identifier: Apache-2.0
"""Shipping code and data with jobs (issue #13): `--ship-workdir` and `--ship-data` pack the
working directory (a git tree with its uncommitted changes) and data folders into bundles
named by their SHA-256, stored on three nodes; the node that runs the job unpacks them in a
scratch directory, runs the job there and removes it after. The submitting directory is
moved away before the jobs run, so they can only have used the shipped copy. Real nodes,
real kill -9."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

from harness import MONKEY, check, node_ids, nodes_up, run, wait_until

SCRIPT = """import os, sys
print("cwd", os.getcwd())
print("helper", open("lib/helper.py").read().strip())
print("train", open("train.py").read().splitlines()[-1])
print("rel-data", open("data/labels.csv").read().strip())
ext = os.path.join(os.environ["MONKEY_DATA_DIR"], "ext", "weights.txt")
print("abs-data", open(ext).read().strip())
print("ignored-present", os.path.exists("run.log"))
print("MONKEY_METRIC step=1 ok=1", flush=True)
# last line: changed after the commit
"""


def git(repo, *args):
    subprocess.run(["git", "-C", repo, "-c", "user.email=t@t", "-c", "user.name=t", *args],
                   check=True, capture_output=True)


def project(c):
    """A git project with a committed script changed since, an untracked helper, an ignored
    log and an ignored data folder; plus a data folder outside it. (project, outside)"""
    root = tempfile.mkdtemp(dir=c.home, prefix="proj-")
    os.makedirs(os.path.join(root, "lib"))
    os.makedirs(os.path.join(root, "data"))
    with open(os.path.join(root, ".gitignore"), "w") as f:
        f.write("*.log\ndata/\n")
    with open(os.path.join(root, "train.py"), "w") as f:
        f.write(SCRIPT.replace("# last line: changed after the commit", "# committed"))
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    with open(os.path.join(root, "train.py"), "w") as f:
        f.write(SCRIPT)
    with open(os.path.join(root, "lib", "helper.py"), "w") as f:
        f.write("untracked helper\n")
    with open(os.path.join(root, "run.log"), "w") as f:
        f.write("ignored\n")
    with open(os.path.join(root, "data", "labels.csv"), "w") as f:
        f.write("a,b\n")
    outside = tempfile.mkdtemp(dir=c.home, prefix="ext-")
    ext = os.path.join(outside, "ext")
    os.makedirs(ext)
    with open(os.path.join(ext, "weights.txt"), "w") as f:
        f.write("w=0.5\n")
    return root, ext


def monkey_in(c, cwd, *args, check_rc=True, timeout=120):
    r = subprocess.run([MONKEY, *args], env=c.env, cwd=cwd, capture_output=True, text=True,
                       timeout=timeout)
    if check_rc:
        check(r.returncode == 0, f"monkey {' '.join(args)}: rc {r.returncode}: {r.stderr}")
    return r


def bundles_on(c):
    """harness node name -> the shipped bundles (sha256) in its store"""
    out = {}
    for name, n in c.nodes.items():
        root = os.path.join(n["data"], "checkpoints")
        out[name] = sorted(d[5:] for d in os.listdir(root) if d.startswith("ship-")) \
            if os.path.isdir(root) else []
    return out


def output_of(c, job):
    return c.monkey("logs", job).stdout


def workdir_and_data_run_elsewhere(c):
    """A job submitted with --ship-workdir and two --ship-data paths runs on a node tagged for
    it (not the one it was submitted to) from the shipped copy: the uncommitted change and
    the untracked helper are there, the ignored log is not, the relative data folder is at
    its place and the outside one under $MONKEY_DATA_DIR. Each bundle is on three nodes;
    submitting the same files again uploads nothing; the scratch directory is gone after."""
    c.start("n1", "--cpus", "2")
    c.start("n2", "--cpus", "2", "--join", c.nodes["n1"]["address"], "--tags", "runner")
    c.start("n3", "--cpus", "2", "--join", c.nodes["n1"]["address"])
    wait_until(lambda: len(json.loads(c.monkey("nodes", "--json").stdout)) == 3, 20, "3 members")
    root, ext = project(c)
    r = monkey_in(c, root, "submit", "--ship-workdir", "--ship-data", "data", "--ship-data",
                  ext, "--tag", "runner", "--", "python3", "train.py")
    job = r.stdout.strip().splitlines()[-1]
    check("stored as bundle" in r.stderr and "git tree: 3 files" in r.stderr,
          f"submit says what it shipped: {r.stderr}")
    moved = root + "-moved"
    os.rename(root, moved)  # the jobs can only use the shipped copy now
    s = c.wait_final(job, 120)
    check(s["state"] == "succeeded", f"the job ran: {s}")
    out = output_of(c, job)
    check("helper untracked helper" in out, f"the untracked helper was shipped: {out}")
    check("train # last line: changed after the commit" in out, f"the uncommitted change: {out}")
    check("rel-data a,b" in out and "abs-data w=0.5" in out, f"both data paths: {out}")
    check("ignored-present False" in out, f"the ignored log stayed home: {out}")
    cwd = next(l for l in out.splitlines() if l.startswith("cwd "))[4:]
    check(cwd.startswith(c.nodes["n2"]["data"] + "/scratch/"), f"ran in n2's scratch: {cwd}")
    check(not os.path.exists(cwd), f"the scratch directory was removed after: {cwd}")
    shas = [b["sha256"] for b in s["ship"]]
    check(len(shas) == 3 and [b["kind"] for b in s["ship"]] == ["workdir", "data", "data"],
          f"the record names the bundles: {s['ship']}")
    on = bundles_on(c)
    for sha in shas:
        check(sum(sha in v for v in on.values()) == 3, f"bundle {sha[:12]} on 3 nodes: {on}")
    text = c.monkey("show", job).stdout
    check("shipped   workdir" in text and shas[0][:12] in text, text)
    # The same files again: nothing to upload; the job runs (on n2 again) from the stores.
    os.rename(moved, root)
    r = monkey_in(c, root, "submit", "--ship-workdir", "--ship-data", "data", "--ship-data",
                  ext, "--tag", "runner", "--", "python3", "train.py")
    check(r.stderr.count("is in the cluster already") == 3 and "stored as" not in r.stderr,
          f"no upload the second time: {r.stderr}")
    s = c.wait_final(r.stdout.strip().splitlines()[-1], 120)
    check(s["state"] == "succeeded", f"the second job ran: {s}")
    # The code changes locally; `reproduce` runs the shipped bundle again, without a word
    # about the code, and prints what the original printed.
    with open(os.path.join(root, "train.py"), "a") as f:
        f.write("print('a later change')\n")
    r = monkey_in(c, root, "reproduce", job, "--wait", "--json", timeout=180)
    again = json.loads(r.stdout)
    check(again["state"] == "succeeded" and "code" not in r.stderr.lower().replace("exit code", ""),
          f"reproduced without a code warning: {r.stderr}")
    out2 = output_of(c, again["id"])
    check("a later change" not in out2 and "train # last line: changed after the commit" in out2,
          f"the reproduction ran the shipped code: {out2}")


def bundle_outlives_the_node_it_was_sent_to(c):
    """The node a bundle was uploaded to is killed -9 before the job runs: the job waits for
    a node with its tag, which joins later and fetches the bundle from a surviving copy."""
    nodes_up(c, 3)
    root, _ = project(c)
    r = monkey_in(c, root, "submit", "--ship-workdir", "--ship-data", "data", "--tag", "late",
                  "--retries", "0", "--", "python3", "-c",
                  "print(open('lib/helper.py').read().strip(), open('data/labels.csv').read().strip())")
    job = r.stdout.strip().splitlines()[-1]
    shutil.rmtree(root)
    c.kill9("n1")
    c.env["MONKEY_ADDRESS"] = c.nodes["n2"]["address"]
    c.start("n4", "--cpus", "2", "--join", c.nodes["n2"]["address"], "--tags", "late")
    s = c.wait_final(job, 180)
    check(s["state"] == "succeeded", f"the job ran on the late node: {s}")
    check("untracked helper a,b" in output_of(c, job), output_of(c, job))
    log = open(os.path.join(c.nodes["n4"]["data"], "runtime.log"), errors="replace").read()
    check("2 bundle(s) fetched from other nodes" in log, "n4 fetched both bundles")


def unused_bundles_and_checkpoints_are_collected(c):
    """--store-keep 2s: a shipped bundle, the job's stored uncommitted diff and a job's
    checkpoints stay in the stores while a job refers to them; once the job is removed
    (`monkey rm`), every node removes its copies of the bundle and the diff, and an entry no
    record refers to (what retention leaves behind) goes too."""
    nodes_up(c, 3, "--store-keep", "2s")
    root, _ = project(c)
    r = monkey_in(c, root, "submit", "--ship-workdir", "--", "true")
    shipped = r.stdout.strip().splitlines()[-1]
    ckpt = c.submit("--env", "STEPS=10", "--env", "CKPT_EVERY=5", "--", "python3",
                    os.path.join(os.path.dirname(os.path.abspath(__file__)), "ckpt_job.py"))
    for job in (shipped, ckpt):
        check(c.wait_final(job, 60)["state"] == "succeeded", f"{job} ran")
    bundle = c.show(shipped)["ship"][0]["sha256"]
    diff = c.show(shipped)["provenance"]["git_diff_sha256"]  # the project has changes
    stores = [os.path.join(n["data"], "checkpoints") for n in c.nodes.values()]
    orphan = os.path.join(stores[0], "01M00000000000000000000000")
    os.makedirs(os.path.join(orphan, "piece"))
    with open(os.path.join(orphan, "piece", "state.txt"), "w") as f:
        f.write("left behind\n")
    with_bundle = lambda: [s for s in stores if os.path.isdir(os.path.join(s, "ship-" + bundle))]
    with_diff = lambda: [s for s in stores if os.path.isdir(os.path.join(s, "ship-" + diff))]
    with_ckpt = lambda: [s for s in stores if os.path.isdir(os.path.join(s, ckpt))]
    check(len(with_bundle()) == 3 and len(with_diff()) == 3 and with_ckpt(),
          f"stored: {bundles_on(c)}")
    wait_until(lambda: not os.path.exists(orphan), 30, "the entry no job refers to to go")
    time.sleep(3)  # rounds each second; both entries have been unwritten for over 2 s
    check(len(with_bundle()) == 3 and len(with_diff()) == 3,
          f"a job refers to the bundle and the diff: kept ({bundles_on(c)})")
    check(with_ckpt(), "a job refers to its checkpoints: kept")
    c.monkey("rm", shipped)
    wait_until(lambda: not with_bundle() and not with_diff(), 30,
               "every copy of the bundle and of the diff to go")
    check(with_ckpt(), "the other job's checkpoints stay")
    logs = "".join(open(os.path.join(n["data"], "runtime.log"), errors="replace").read()
                   for n in c.nodes.values())
    check(re.search(r"and [12] shipped bundle\(s\) that no job in the cluster refers to", logs),
          logs[-2000:])


def bad_shipping_is_refused_with_the_reason(c):
    """A missing data path, a working directory over --ship-max, shipping with an app: each
    is refused before anything is submitted, naming what is wrong."""
    nodes_up(c, 1)
    root, _ = project(c)
    r = monkey_in(c, root, "submit", "--ship-data", "nope", "--", "true", check_rc=False)
    check(r.returncode != 0 and "--ship-data nope" in r.stderr
          and "no such file or directory" in r.stderr, r.stderr)
    with open(os.path.join(root, "big.bin"), "wb") as f:
        f.write(os.urandom(1_500_000))
    r = monkey_in(c, root, "submit", "--ship-workdir", "--ship-max", "1M", "--", "true",
                  check_rc=False)
    check(r.returncode != 0 and "more than the" in r.stderr and "big.bin" in r.stderr
          and "--ship-max" in r.stderr, r.stderr)
    r = monkey_in(c, root, "submit", "--ship-workdir", "--app", "hello", check_rc=False)
    check(r.returncode == 2 and "shipping is for command jobs" in r.stderr, r.stderr)
    check(c.jobs() == [], "nothing was submitted")
    # A spec file's keys: ship and data.
    spec = os.path.join(root, "job.yaml")
    with open(spec, "w") as f:
        f.write("command: [python3, train.py]\nship: maybe\n")
    r = monkey_in(c, root, "submit", "--file", spec, check_rc=False)
    check(r.returncode == 2 and "ship: expected true or false" in r.stderr, r.stderr)
    with open(spec, "w") as f:
        f.write("command: [python3, -c, \"print(open('data/labels.csv').read())\"]\n"
                "ship: true\ndata: [data]\n")
    os.remove(os.path.join(root, "big.bin"))
    r = monkey_in(c, root, "submit", "--file", spec, "--wait", check_rc=False)
    check(r.returncode == 0 and "a,b" in output_of(c, r.stdout.strip().splitlines()[-1]),
          f"a spec file ships: {r.stderr}")


def scratch_of_a_killed_node_is_removed(c):
    """kill -9 of a node while a shipped job runs leaves its scratch directory behind; the
    node removes it when it starts again (the attempt is requeued: a new one unpacks
    afresh)."""
    c.start("n1", "--cpus", "2")
    root, _ = project(c)
    r = monkey_in(c, root, "submit", "--ship-workdir", "--", "python3", "-c",
                  "import time; time.sleep(120)")
    job = r.stdout.strip().splitlines()[-1]
    scratch = os.path.join(c.nodes["n1"]["data"], "scratch")
    first = os.path.join(scratch, f"{job}-1")
    wait_until(lambda: os.path.isdir(os.path.join(first, "work", "lib")), 30,
               "the first attempt's scratch directory")
    c.kill9("n1")
    check(os.path.isdir(first), "kill -9 left the scratch directory")
    c.start("n1", "--cpus", "2")
    wait_until(lambda: not os.path.exists(first), 30, "the leftover scratch directory to go")
    log = open(os.path.join(c.nodes["n1"]["data"], "runtime.log"), errors="replace").read()
    check("removed 1 scratch directory of attempts that no longer run here" in log,
          "the node says so")


TRIAL = """import os, sys, time
from lib.helper import score
x = float(sys.argv[1]) * float(open(os.path.join(os.environ["MONKEY_DATA_DIR"], "ext", "k.txt")).read())
for step in range(1, 4):
    time.sleep(0.1)
    print(f"MONKEY_METRIC step={step} acc={score(x) * step:.6f}", flush=True)
"""


def sweep_ships_its_directory(c):
    """`ship: true` (the default): `sweep start` ships the directory it ran in once, and a
    data folder outside it (`data:`), and every trial, wherever it runs, imports its code
    from the shipped copy and reads the data there (both are gone by the time they run)."""
    nodes_up(c, 3)
    ext = os.path.join(tempfile.mkdtemp(dir=c.home, prefix="sweepdata-"), "ext")
    os.makedirs(ext)
    with open(os.path.join(ext, "k.txt"), "w") as f:
        f.write("1.0\n")
    root = tempfile.mkdtemp(dir=c.home, prefix="sweep-")
    os.makedirs(os.path.join(root, "lib"))
    with open(os.path.join(root, "lib", "__init__.py"), "w") as f:
        f.write("")
    with open(os.path.join(root, "lib", "helper.py"), "w") as f:
        f.write("def score(x):\n    return 1.0 - (x - 0.3) ** 2\n")
    with open(os.path.join(root, "trial.py"), "w") as f:
        f.write(TRIAL)
    with open(os.path.join(root, "sweep.yaml"), "w") as f:
        f.write("""name: shipped
trial: {command: [python3, trial.py, "{x}"]}
space:
  x: {type: uniform, low: 0.0, high: 1.0}
metric: {name: acc, goal: maximize}
algorithm: {name: random, seed: 3}
budget: {trials: 6}
parallel: 3
data: [{ext}]
""".replace("{ext}", ext))
    r = monkey_in(c, root, "sweep", "start", "sweep.yaml")
    sweep = r.stdout.strip().splitlines()[0]
    check(r.stderr.count("stored as bundle") == 2, r.stderr)
    shutil.rmtree(root)
    shutil.rmtree(ext)
    status = wait_until(lambda: (lambda s: s if s["state"] in ("succeeded", "failed") else None)(
        json.loads(c.monkey("sweep", "status", sweep, "--json").stdout)), 180, "the sweep")
    check(status["state"] == "succeeded", f"the sweep finished: {status}")
    trials = [j for j in c.jobs() if j.get("sweep") == sweep]
    check(len(trials) == 6 and all(t["state"] == "succeeded" for t in trials),
          f"every trial ran from the shipped copy: {trials}")
    check(len({t["ran_on"] for t in trials}) >= 2, "trials ran on more than one node")
    best = c.monkey("sweep", "best", sweep).stdout
    check("its shipped directory" in best and "monkey reproduce " in best, best)


if __name__ == "__main__":
    run(workdir_and_data_run_elsewhere, bundle_outlives_the_node_it_was_sent_to,
        unused_bundles_and_checkpoints_are_collected, bad_shipping_is_refused_with_the_reason,
        scratch_of_a_killed_node_is_removed, sweep_ships_its_directory)
