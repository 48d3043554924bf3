# SPDX-License-Identifier: Apache-2.0
"""Sweeps (issue #13), the first step: `monkey sweep check FILE` reads a sweep file as a node
will and shows the first trials its algorithm would start; bad files are refused naming the
line and the field, with the usage exit code."""
import json
import os
import subprocess
import tempfile

from harness import MONKEY, check, run


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
    """Each mistake is refused with exit code 2 and FILE:LINE:COL: FIELD: PROBLEM."""
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
    r, _ = sweep_check(GOOD.replace("name: random, seed: 7", "name: pbt, seed: 7, population: 3"))
    check(r.returncode == 2 and "budget.max_t: missing: pbt needs the most steps" in r.stderr,
          r.stderr)
    r = subprocess.run([MONKEY, "sweep", "check", "/nonexistent.yaml"], capture_output=True,
                       text=True, timeout=30)
    check(r.returncode == 2 and "cannot open the sweep file" in r.stderr, r.stderr)


if __name__ == "__main__":
    run(check_shows_the_first_trials, bad_files_name_the_line_and_field)
