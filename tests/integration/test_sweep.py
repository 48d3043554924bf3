# SPDX-License-Identifier: Apache-2.0
"""Sweeps (issue #13): `monkey sweep check FILE` reads a sweep file as its driver will and
shows the first trials; bad files are refused naming the line and the field. Running sweeps
on a local cluster of real nodes: an ASHA sweep of real command jobs (trials placed on every
node, the weak ones stopped at a rung and ending `stopped`, the progress bar, status and
best), kill -9 and a clean stop of the node running the sweep's optimizer actor (the sweep
finishes with exactly its budget's trials, none repeated; none stopped by the clean stop),
and `sweep stop`."""
import json
import os
import subprocess
import tempfile
import time

from harness import MONKEY, SLOWDOWN, check, node_ids, nodes_up, points, run, wait_until

# A trial: accuracy climbs towards x along 1 - exp(-step/2), one point per step; it saves
# nothing and ends after MAX_T steps (or when stopped: SIGTERM ends it at once).
TRIAL = """import math, sys, time
x = float(sys.argv[1]); max_t = int(sys.argv[2]); pause = float(sys.argv[3])
for step in range(1, max_t + 1):
    time.sleep(pause)
    print(f"MONKEY_METRIC step={step} acc={x * (1 - math.exp(-step / 2)):.6f}", flush=True)
"""


def sweep_files(tmp, algorithm, budget, parallel, pause=0.25, max_t=9, code=None):
    """A trial script (`code`, default TRIAL: its arguments x, max_t, pause) and a sweep file
    over x running it; the file's path."""
    script = os.path.join(tmp, "trial.py")
    with open(script, "w") as f:
        f.write(code or TRIAL)
    path = os.path.join(tmp, "sweep.yaml")
    with open(path, "w") as f:
        f.write(f"""name: it
trial: {{command: [python3, {script}, "{{x}}", "{max_t}", "{pause}"]}}
space:
  x: {{type: uniform, low: 0.1, high: 1.0}}
metric: {{name: acc, goal: maximize}}
algorithm: {algorithm}
budget: {budget}
parallel: {parallel}
ship: false
""")
    return path


# A PBT member: its score grows by x per step, kept in its checkpoint directory and saved
# every step; a continuation (--checkpoint-from) starts from the donor's score and step.
PBT_TRIAL = """import os, sys, time
x = float(sys.argv[1]); max_t = int(sys.argv[2]); pause = float(sys.argv[3])
d = os.environ["MONKEY_CHECKPOINT_DIR"]
start = int(os.environ.get("MONKEY_CHECKPOINT_STEP") or 0)
score = float(open(os.path.join(d, "score")).read()) if start else 0.0
print(f"start {start} score {score} from {os.environ.get('MONKEY_CHECKPOINT_JOB', '-')}", flush=True)
for step in range(start + 1, max_t + 1):
    time.sleep(pause)
    score += x
    with open(os.path.join(d, "score.tmp"), "w") as f:  # replaced whole: a save copying the
        f.write(repr(score))                              # directory never sees it half-written
    os.replace(os.path.join(d, "score.tmp"), os.path.join(d, "score"))
    print(f"MONKEY_METRIC step={step} acc={score:.6f}", flush=True)
    print(f"MONKEY_CHECKPOINT step={step}", flush=True)
"""


def trials_of(c, sweep):
    return [j for j in c.jobs() if j.get("sweep") == sweep]


def sweep_check(text, *args):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(text)
    try:
        return subprocess.run([MONKEY, "sweep", "check", f.name, *args], capture_output=True,
                              text=True, timeout=30), f.name
    finally:
        os.unlink(f.name)


GOOD = """name: lr-search
trial: {command: [python3, train.py, --lr, "{lr}", --opt, "{opt}", --m, "{m}"]}
space:
  lr: {type: loguniform, low: 1.0e-4, high: 1.0}
  opt: {type: choice, values: [sgd, adam]}
  m: {type: uniform, low: 0, high: 0.99, when: {opt: sgd}}
metric: {name: accuracy, goal: maximize}
algorithm: {name: random, seed: 7}
budget: {trials: 60, wall: 30m}
parallel: 4
"""


def check_shows_the_first_trials(c):
    """A good file: a summary and the first trials, the same for the same seed, others for
    another; --json gives them as data; a grid ends with its last point."""
    r, _ = sweep_check(GOOD, "--trials", "6", "--json")
    check(r.returncode == 0, r.stderr)
    out = json.loads(r.stdout)
    check(out["algorithm"] == "random" and out["trials"] == 60 and out["parallel"] == 4, out)
    trials = out["first_trials"]
    check(len(trials) == 6, trials)
    for t in trials:
        p = t["params"]
        check(1e-4 <= float(p["lr"]) <= 1.0, p)
        check(("m" in p) == (p["opt"] == "sgd"), f"m only with sgd: {p}")
        check(t["run"].startswith("python3 train.py --lr " + p["lr"] + " --opt " + p["opt"]), t)
    again, _ = sweep_check(GOOD, "--trials", "6", "--json")
    check(json.loads(again.stdout)["first_trials"] == trials, "the same seed, the same trials")
    other, _ = sweep_check(GOOD.replace("seed: 7", "seed: 8"), "--trials", "6", "--json")
    check(json.loads(other.stdout)["first_trials"] != trials, "another seed, other trials")
    text, _ = sweep_check(GOOD)
    check("sweep lr-search: random (seed 7), maximize accuracy, 60 trials" in text.stdout
          and "m                uniform    [0, 0.99] when opt in {sgd}" in text.stdout, text.stdout)
    # The text form shows each trial's drawn values, also where its command names none.
    bare = GOOD.replace('[python3, train.py, --lr, "{lr}", --opt, "{opt}", --m, "{m}"]',
                        "[python3, train.py]")
    plain, _ = sweep_check(bare)
    first = json.loads(sweep_check(bare, "--json")[0].stdout)["first_trials"][0]["params"]
    check(plain.returncode == 0 and ("  0: lr=" + first["lr"] + " ") in plain.stdout
          and "opt=" + first["opt"] in plain.stdout, f"the drawn values: {plain.stdout}")
    grid, _ = sweep_check("trial: {app: fmnist, workers: 2}\nspace:\n"
                          "  strategy: {type: grid, values: [allreduce, ps-sync]}\n"
                          "  batch: {type: grid, values: [128, 256]}\n"
                          "metric: {name: test_accuracy}\nalgorithm: {name: grid}\n",
                          "--trials", "10", "--json")
    runs = [t["run"] for t in json.loads(grid.stdout)["first_trials"]]
    check(len(runs) == 4 and runs[0] == "monkey submit --app fmnist --workers 2 --set "
          "batch=128 --set strategy=allreduce", runs)
    pbt, _ = sweep_check(GOOD.replace("name: random, seed: 7",
                                      "name: pbt, seed: 7, population: 3, max_t: 9"),
                         "--trials", "10", "--json")
    check(pbt.returncode == 0 and len(json.loads(pbt.stdout)["first_trials"]) == 3,
          f"pbt starts its population and no more: {pbt.stdout} {pbt.stderr}")


def bad_files_name_the_line_and_field(c):
    """Each mistake is refused with exit code 2 and FILE:LINE:COL: FIELD: PROBLEM; a file with
    several is refused with every one of them, in order."""
    for change, want in (
        (("low: 1.0e-4", "low: 0"), ":4:"),
        (("type: choice", "type: pick"), ":5:15: space.opt.type: unknown type 'pick'"),
        (("{opt: sgd}", "{opt: rmsprop}"), "space.m.when.opt: 'rmsprop' is not one of opt's values"),
        (("name: random", "name: bayes"), "algorithm.name: unknown algorithm 'bayes'"),
        (("goal: maximize", "goal: up"), "metric.goal: maximize or minimize"),
        (("\"{m}\"", "\"{momentum}\""), "trial.command: the placeholder {momentum} names no parameter"),
        (("wall: 30m", "wall: soon"), "budget.wall:"),
        (("parallel: 4", "paralel: 4"), ":10:1: paralel: unknown field"),
    ):
        r, path = sweep_check(GOOD.replace(*change))
        check(r.returncode == 2 and r.stderr.startswith("monkey: " + path) and want in r.stderr,
              f"{change}: rc {r.returncode}: {r.stderr}")
    # Every mistake of a file in one run, in the file's order, each at its own place.
    bad = (GOOD.replace("type: choice", "type: pick").replace("goal: maximize", "goal: up")
           .replace("parallel: 4", "paralel: 4"))
    r, path = sweep_check(bad)
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 2 and len(lines) == 4 and lines[-1] == "3 problems"
          and lines[0] == f"monkey: {path}:5:15: space.opt.type: unknown type 'pick' (uniform, "
                          "loguniform, int, choice or grid)"
          and lines[1].startswith(f"{path}:7:") and "metric.goal: maximize or minimize" in lines[1]
          and lines[2].startswith(f"{path}:10:1: paralel: unknown field"), r.stderr)
    r, _ = sweep_check(GOOD.replace("name: random, seed: 7", "name: pbt, seed: 7, population: 3"))
    check(r.returncode == 2 and "budget.max_t: missing: pbt needs the most steps" in r.stderr,
          r.stderr)
    r = subprocess.run([MONKEY, "sweep", "check", "/nonexistent.yaml"], capture_output=True,
                       text=True, timeout=30)
    check(r.returncode == 2 and "cannot open the sweep file" in r.stderr, r.stderr)


def asha_sweep_of_command_jobs(c):
    """ASHA over 9 real command jobs, 4 at a time, on 3 nodes: `sweep start --wait` shows its
    progress bar and the best trial and exits 0; exactly 9 trials, each a job listed with its
    sweep, placed on more than one node; the weak ones stopped at a rung end `stopped`
    (their --wait exit code 122), the others reach max_t; status and best agree with the
    trials' own metrics."""
    nodes_up(c, 3)
    tmp = tempfile.mkdtemp(dir=c.home)
    path = sweep_files(tmp, "{name: asha, seed: 4, reduction_factor: 3, grace: 1, max_t: 9}",
                       "{trials: 9}", 4, 0.25)
    r = c.monkey("sweep", "start", path, "--wait", check_rc=False, timeout=240)
    check(r.returncode == 0, f"sweep start --wait: rc {r.returncode}: {r.stderr}")
    sweep = r.stdout.strip().splitlines()[0]
    check("9/9 trials" in r.stderr and "best: trial " in r.stderr, r.stderr)
    trials = trials_of(c, sweep)
    check(sorted(t["trial"] for t in trials) == list(range(9)), f"trials: {trials}")
    states = [t["state"] for t in trials]
    check("stopped" in states and "succeeded" in states and
          set(states) <= {"stopped", "succeeded"}, f"states: {states}")
    check(len({t["ran_on"] for t in trials}) >= 2, "trials ran on more than one node")
    stopped = next(t for t in trials if t["state"] == "stopped")
    w = c.show(stopped["id"])
    check(w["attempts"][-1]["cause"].startswith("stopped early"), w["attempts"])
    status = json.loads(c.monkey("sweep", "status", sweep, "--json").stdout)
    check(status["state"] == "succeeded" and len(status["trials"]) == 9, status)
    finals = [t["last"] for t in status["trials"] if t["state"] == "succeeded"]
    best = json.loads(c.monkey("sweep", "best", sweep, "--json").stdout)
    check(abs(best["value"] - max(t["last"] for t in status["trials"])) < 1e-9
          and best["value"] in finals, f"best {best} of {status['trials']}")
    check(best["command"].startswith("monkey submit ")
          and f"--set x={best['params']['x']}" in best["command"]
          and best["command"].endswith(" 9 0.25"), best)
    text = c.monkey("sweep", "status", sweep).stdout
    check("[########################] 9/9 trials" in text and "stopped" in text, text)
    by_flag = json.loads(c.monkey("jobs", "--sweep", sweep[-8:], "--json").stdout)
    check(sorted(j["id"] for j in by_flag) == sorted(t["id"] for t in trials), by_flag)
    # The plain listing folds the 9 trials under the sweep's row; --all lists each.
    ended = {}
    for t in trials:
        ended[t["state"]] = ended.get(t["state"], 0) + 1
    table = c.monkey("jobs").stdout.splitlines()
    rows = [l for l in table[1:-1] if l[:10].strip()]
    check(len(rows) == 1 and rows[0].startswith(sweep[-10:]), table)
    fold = [l for l in table if "`- 9 trials: " in l]
    check(len(fold) == 1 and f"(monkey jobs --sweep {sweep[-10:]})" in fold[0]
          and all(f"{n} {st}" in fold[0] for st, n in ended.items())
          and table[-1] == "9 trials of 1 sweep folded: monkey jobs --all lists every one",
          table)
    every = c.monkey("jobs", "--all").stdout
    check(all(t["id"][-10:] in every for t in trials) and "folded" not in every, every)
    listed = json.loads(c.monkey("sweep", "list", "--json").stdout)
    check([s["id"] for s in listed] == [sweep] and listed[0]["trials_done"] == 9, listed)
    not_sweep = c.monkey("sweep", "status", stopped["id"], check_rc=False)
    check(not_sweep.returncode == 1 and "is not a sweep" in not_sweep.stderr, not_sweep.stderr)


def asha_over_app_trials_by_epoch(c):
    """ASHA over fmnist app trials whose batch (64 or 256) sets how many steps an epoch has:
    with resource_metric: epoch every trial is judged at the epoch rungs (1 of max_t 3), the
    stopped ones `stopped` before their epoch 3, the others trained their 3 epochs (judged
    by their steps, the first point, at step 234 or 937, would be past max_t: none stops)."""
    nodes_up(c, 2)
    path = os.path.join(tempfile.mkdtemp(dir=c.home), "fmnist-asha.yaml")
    with open(path, "w") as f:
        f.write("""name: fmnist-asha
trial: {app: fmnist, params: {strategy: single, hidden: "64", epochs: 3, seed: 1,
                              throttle: "0:4"}}
space:
  lr: {type: loguniform, low: 0.0003, high: 0.3}
  batch: {type: choice, values: [64, 256]}
metric: {name: test_accuracy, goal: maximize}
algorithm: {name: asha, seed: 5, reduction_factor: 3, grace: 1, max_t: 3, resource: epoch,
            resource_metric: epoch}
budget: {trials: 6}
parallel: 2
""")
    r = c.monkey("sweep", "start", path, "--wait", check_rc=False, timeout=300)
    check(r.returncode == 0, f"sweep start --wait: rc {r.returncode}: {r.stderr}")
    sweep = r.stdout.strip().splitlines()[0]
    status = json.loads(c.monkey("sweep", "status", sweep, "--json").stdout)
    rows = status["trials"]
    check(len(rows) == 6 and {t["params"]["batch"] for t in rows} == {"64", "256"},
          f"6 trials of both batch sizes: {rows}")
    for t in rows:
        epochs = [p["value"] for p in points(c, t["job"], "epoch")]
        if t["state"] == "stopped":
            cause = c.show(t["job"])["attempts"][-1]["cause"]
            check(cause.startswith("stopped early") and epochs and max(epochs) < 3,
                  f"stopped at the first rung: {t} {cause} {epochs}")
        else:
            check(t["state"] == "succeeded" and epochs == [1, 2, 3], f"3 epochs: {t} {epochs}")
    check(any(t["state"] == "stopped" for t in rows), f"ASHA stopped a weak trial: {rows}")


def sweep_through(c, nodes, seed, trials, max_t, act, what):
    """A random sweep of `trials` trials, 2 in parallel, on `nodes` nodes; once two trials
    have finished, `act(host)` on the node running its optimizer actor; the sweep's final
    record, its trials, and those that had finished before `act`."""
    nodes_up(c, nodes)
    tmp = tempfile.mkdtemp(dir=c.home)
    # The trials pause longer under a sanitizer (SLOWDOWN), whose polls take seconds: else the
    # sweep can end before `act`, and "the optimizer ran again" fails for want of an act.
    path = sweep_files(tmp, f"{{name: random, seed: {seed}}}", f"{{trials: {trials}}}", 2,
                       0.3 * SLOWDOWN, max_t=max_t)
    # Watched as a user does (`sweep start --wait`), through any node: the wait outlives the
    # node it talks to and says where the driver moved.
    watch_env = dict(c.env, MONKEY_ADDRESS=",".join(n["address"] for n in c.nodes.values()))
    said_file = open(os.path.join(c.home, "sweep-wait.stderr"), "w+")
    watcher = subprocess.Popen([MONKEY, "sweep", "start", path, "--wait"], env=watch_env,
                               stdout=subprocess.PIPE, stderr=said_file, text=True)
    c.children.append(watcher)
    sweep = watcher.stdout.readline().strip()
    check(len(sweep) == 26, f"sweep start printed its id: {sweep!r}")
    wait_until(lambda: sum(t["state"] == "succeeded" for t in trials_of(c, sweep)) >= 2,
               90 * SLOWDOWN, "two trials to finish")
    before = {t["trial"]: t["id"] for t in trials_of(c, sweep) if t["state"] == "succeeded"}
    ids = node_ids(c)
    host = next(n for n, i in ids.items() if i == c.show(sweep)["attempts"][-1]["node"])
    act(host)
    end = wait_until(lambda: (lambda s: s if s["state"] in ("succeeded", "failed", "cancelled",
                                                             "lost") else None)(c.show(sweep)),
                     180 * SLOWDOWN, f"the sweep to finish after {what}")
    check(end["state"] == "succeeded", f"driver: {end['state']} {end.get('reason')}")
    check(len(end["attempts"]) >= 2, "the optimizer ran again")
    runs = trials_of(c, sweep)
    numbers = sorted(t["trial"] for t in runs)
    check(numbers == list(range(trials)), f"exactly {trials} trials, none repeated: {numbers}")
    try:
        watcher.communicate(timeout=60 * SLOWDOWN)
    except subprocess.TimeoutExpired:
        watcher.kill()
        watcher.communicate()
    said_file.seek(0)
    said = said_file.read()
    check(watcher.returncode == 0, f"sweep start --wait: rc {watcher.returncode}: {said}")
    check(f"attempt 1 ended {end['attempts'][0]['outcome']}" in said,
          f"the wait says where the driver went and why: {said}")
    return end, runs, before, said


def leave(c, host, how):
    """Stops `host` (`how`: kill9 or stop) and talks to the others from then on."""
    how(host)
    c.env["MONKEY_ADDRESS"] = ",".join(n["address"] for k, n in c.nodes.items() if k != host)


def driver_node_killed(c):
    """kill -9 of the node running the sweep's optimizer actor, mid-sweep: the driver's job is
    adopted by a survivor, goes on from its saved state, and the sweep finishes with exactly
    its 8 trials, each one job (none repeated), the ones finished before the kill kept."""
    _, runs, before, said = sweep_through(c, 3, 9, 8, 5, lambda h: leave(c, h, c.kill9),
                                          "its node died")
    port = c.nodes[next(h for h in c.nodes if c.nodes[h]["proc"].poll() is not None)]["port"]
    check("the sweep's driver moved from " in said and f":{port} to " in said, said)
    for t in runs:
        check(t["state"] in ("succeeded", "lost"), f"trial {t['trial']}: {t['state']}")
    for n, i in before.items():
        check(any(t["id"] == i for t in runs), f"trial {n} finished before the kill is kept")


def driver_node_stopped(c):
    """A clean stop (SIGTERM) of the node running the sweep's optimizer actor, mid-sweep: its
    running jobs are requeued, and the sweep's goes on elsewhere from its saved state — its
    trials are not stopped (a shutdown is not `sweep stop`) and the sweep finishes with
    exactly its 8 trials, none stopped, none repeated."""
    _, runs, _, said = sweep_through(c, 3, 4, 8, 5, lambda h: leave(c, h, c.stop),
                                     "its node stopped")
    port = c.nodes[next(h for h in c.nodes if c.nodes[h]["proc"].poll() is not None)]["port"]
    check("the sweep's driver moved from " in said and f":{port} to " in said, said)
    for t in runs:
        check(t["state"] == "succeeded", f"trial {t['trial']}: {t['state']} (not stopped)")


def optimizer_coordinator_restarted(c):
    """The coordinator of the node running the sweep's optimizer actor is killed (its
    supervisor restarts it, and the checkpoints actor after it): the optimizer actor ends
    with its worker, the attempt says so and is requeued (no retry charged), and the next
    attempt restores the checkpoint on the restarted actors and finishes the sweep with
    exactly its 6 trials."""
    def kill_coordinator(host):
        env = dict(c.env, MONKEY_ADDRESS=c.nodes[host]["address"])
        c.monkey("kill", "core/coordinator", env=env)
    end, _, _, said = sweep_through(c, 2, 5, 6, 4, kill_coordinator,
                                    "its coordinator restarted")
    check("the sweep's driver runs again on" in said or "moved from" in said, said)
    first = end["attempts"][0]
    check("optimizer actor ended" in str(first) and first.get("outcome") == "requeued",
          f"the first attempt says its optimizer ended, and was requeued: {first}")


def pbt_exploits_through_checkpoints(c):
    """PBT over 4 real members on 2 nodes: the bottom member is stopped and continued as a
    new job of the same trial from a top member's checkpoint (--checkpoint-from), with
    explored parameters; the continuation starts at the donor's step with its score; the
    sweep ends with every member finished and exactly 4 trial numbers."""
    nodes_up(c, 2)
    path = sweep_files(tempfile.mkdtemp(dir=c.home),
                       "{name: pbt, seed: 3, population: 4, interval: 3, quantile: 0.25, "
                       "max_t: 12}", "{trials: 4}", 4, pause=0.3, max_t=12, code=PBT_TRIAL)
    r = c.monkey("sweep", "start", path, "--wait", check_rc=False, timeout=240)
    check(r.returncode == 0, f"rc {r.returncode}: {r.stderr}")
    sweep = r.stdout.strip().splitlines()[0]
    jobs = trials_of(c, sweep)
    check(sorted({j["trial"] for j in jobs}) == [0, 1, 2, 3], jobs)
    continued = [c.show(j["id"]) for j in jobs if j["name"].count(".") == 1]
    check(continued, f"no member was exploited: {[j['name'] for j in jobs]}")
    by_id = {j["id"]: j for j in jobs}
    for cont in continued:
        donor = cont["checkpoint_from"]
        check(donor in by_id and by_id[donor]["trial"] != cont["trial"],
              f"{cont['name']} continues from another member's job: {donor}")
        first = cont["attempts"][0]
        check(first["resumed_from"] == donor and first["resumed_step"] > 0, first)
        if first["resumed_step"] >= 12:
            continue  # the donor had finished when it started: nothing left to run
        pts = points(c, cont["id"], "acc")
        donor_pts = {p["step"]: p["value"] for p in points(c, donor, "acc")}
        check(pts and pts[0]["step"] == first["resumed_step"] + 1
              and pts[0]["value"] > donor_pts[first["resumed_step"]],
              f"the continuation goes on from the donor's step and score: {pts[:2]} "
              f"{donor_pts}")
    status = json.loads(c.monkey("sweep", "status", sweep, "--json").stdout)
    check(len(status["trials"]) == 4 and all(t["state"] == "succeeded" for t in status["trials"]),
          status["trials"])


# A trial that reads its parameters as MONKEY_PARAM_* (no placeholder in its command) and
# its seed: the metric is a function of all three, so only a rerun with every parameter and
# the seed gives the same value.
ENV_TRIAL = """import os
x = float(os.environ["MONKEY_PARAM_X"]); scale = float(os.environ.get("MONKEY_PARAM_SCALE", "1"))
seed = int(os.environ.get("MONKEY_SEED", "0"))
print(f"MONKEY_METRIC step=1 acc={x * scale + (seed % 997) * 1e-6:.9f}", flush=True)
"""


def best_command_runs_the_best_trial(c):
    """`sweep best` prints a command that runs the best trial again: with its searched and
    fixed parameters (trial.params) and its seed, so a deterministic trial gives the same
    metric; `reproduce --dry-run` prints the same kind of line."""
    nodes_up(c, 1)
    tmp = tempfile.mkdtemp(dir=c.home)
    script = os.path.join(tmp, "trial.py")
    with open(script, "w") as f:
        f.write(ENV_TRIAL)
    path = os.path.join(tmp, "sweep.yaml")
    with open(path, "w") as f:
        f.write(f"""name: env
trial: {{command: [python3, {script}], params: {{scale: 3}}}}
space:
  x: {{type: uniform, low: 0.1, high: 1.0}}
metric: {{name: acc, goal: maximize}}
algorithm: {{name: random, seed: 5}}
budget: {{trials: 4}}
parallel: 2
ship: false
""")
    r = c.monkey("sweep", "start", path, "--wait", check_rc=False, timeout=240)
    check(r.returncode == 0, f"sweep start --wait: rc {r.returncode}: {r.stderr}")
    sweep = r.stdout.strip().splitlines()[0]
    best = json.loads(c.monkey("sweep", "best", sweep, "--json").stdout)
    trial = c.show(best["job"])
    driver = c.show(sweep)
    check(trial["user"] == driver["user"] != "" and trial["host"] == driver["host"] != "",
          f"a trial records who started the sweep, and where: {trial['user']}@{trial['host']}")
    cmd = best["command"]
    check(cmd.startswith("monkey submit ") and "--set scale=3" in cmd
          and f"--set x={trial['params']['x']}" in cmd and " --seed " in cmd
          and cmd.endswith(f"-- python3 {script}"), f"the printed command: {cmd}")
    # Run the printed command as a user pastes it (with --wait).
    r = subprocess.run(["sh", "-c", cmd.replace("monkey submit", f"'{MONKEY}' submit --wait", 1)],
                       env=c.env, capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"the printed command ran: {r.stderr}")
    rerun = r.stdout.strip().splitlines()[-1]
    again = wait_until(lambda: (lambda s: s if "acc" in s["metrics"] else None)(c.show(rerun)),
                       30, "the rerun's metric")
    check(again["params"] == trial["params"], f"the same parameters: {again['params']} "
          f"against {trial['params']}")
    check(abs(again["metrics"]["acc"] - best["value"]) < 1e-9,
          f"the same final metric: {again['metrics']} against {best['value']}")
    text = c.monkey("sweep", "best", sweep).stdout
    check("run it again:\n  " + cmd in text, text)
    dry = c.monkey("reproduce", best["job"], "--dry-run").stdout
    check(dry.startswith("would run again: monkey submit ") and "--set scale=3" in dry
          and f"--seed {trial['seed']}" in dry, dry)


def failed_trials_fail_the_sweep(c):
    """A sweep whose trials all fail (its script does not exist) counts them, shows the
    first failure's cause (the end of its stderr) at once, and ends failed with --wait
    exiting non-zero; max_failed_trials stops a sweep past that many failures, saying why."""
    nodes_up(c, 1)
    tmp = tempfile.mkdtemp(dir=c.home)
    path = os.path.join(tmp, "sweep.yaml")

    def write(extra, trials, parallel):
        with open(path, "w") as f:
            f.write(f"""name: broken
trial: {{command: [python3, {tmp}/no-such-train.py, "{{x}}"]}}
space:
  x: {{type: uniform, low: 0.1, high: 1.0}}
metric: {{name: acc, goal: maximize}}
algorithm: {{name: random, seed: 3}}
budget: {{trials: {trials}}}
parallel: {parallel}
ship: false
{extra}""")

    write("", 3, 3)
    r = c.monkey("sweep", "start", path, "--wait", check_rc=False, timeout=240)
    check(r.returncode != 0, f"--wait exits non-zero: {r.returncode}: {r.stderr}")
    sweep = r.stdout.strip().splitlines()[0]
    check("3/3 trials, 3 failed" in r.stderr, f"the failures are counted: {r.stderr}")
    check("failed: attempt 1: exit 2; its stderr ends:" in r.stderr
          and "no-such-train.py" in r.stderr, f"the first failure's cause: {r.stderr}")
    check("the sweep failed: no trial succeeded: 3 of 3 failed" in r.stderr, r.stderr)
    status = json.loads(c.monkey("sweep", "status", sweep, "--json").stdout)
    check(status["state"] == "failed" and status["failed"] == 3
          and "no trial succeeded" in status["reason"], status)
    check(len(c.show(sweep)["attempts"]) == 1, "a failed sweep is not retried")
    write("max_failed_trials: 1\n", 6, 1)
    r = c.monkey("sweep", "start", path, "--wait", check_rc=False, timeout=240)
    check(r.returncode != 0, f"--wait exits non-zero: {r.stderr}")
    sweep = r.stdout.strip().splitlines()[0]
    check("2 trials failed, more than max_failed_trials (1)" in r.stderr, r.stderr)
    check(len(trials_of(c, sweep)) == 2, f"no trial started after the bound: {trials_of(c, sweep)}")


def stop_a_sweep(c):
    """`sweep stop`: the driver stops its running trials (they end `stopped`), starts no
    more, and its job ends cancelled."""
    nodes_up(c, 2)
    tmp = tempfile.mkdtemp(dir=c.home)
    path = sweep_files(tmp, "{name: random, seed: 2}", "{trials: 20}", 2, 2.0, max_t=60)
    sweep = c.monkey("sweep", "start", path).stdout.strip()
    wait_until(lambda: sum(t["state"] == "running" for t in trials_of(c, sweep)) == 2, 60,
               "two running trials")
    out = c.monkey("sweep", "stop", sweep[-8:]).stdout
    check("stopping sweep" in out, out)
    c.wait_final(sweep, timeout=60)
    wait_until(lambda: all(t["state"] == "stopped" for t in trials_of(c, sweep)), 60,
               "the trials to end stopped")
    check(len(trials_of(c, sweep)) == 2, "no more trials started")
    check(c.show(sweep)["state"] == "cancelled", "the sweep's driver ends cancelled")


if __name__ == "__main__":
    run(check_shows_the_first_trials, bad_files_name_the_line_and_field,
        asha_sweep_of_command_jobs, asha_over_app_trials_by_epoch, driver_node_killed,
        driver_node_stopped, optimizer_coordinator_restarted, pbt_exploits_through_checkpoints,
        stop_a_sweep, best_command_runs_the_best_trial, failed_trials_fail_the_sweep)
