# SPDX-License-Identifier: Apache-2.0
"""Issue #13's sweep benchmark, side by side in one run, on two objectives (OBJECTIVE: torch,
fmnist or both): the same training — `torch`: a PyTorch script (bench/sweep_trial.py: an
MLP on Fashion-MNIST, one thread, EPOCHS epochs, test accuracy after each); `fmnist`:
Monkey's own fmnist app (strategy single, one BLAS thread, its test_accuracy per epoch) —
searched over the same space (lr, momentum, hidden size, batch size) with the same number
of trials, trials in parallel and seeds by
  - Monkey `random`, `tpe` and `asha` sweeps on a local 2-node cluster (1 CPU each), the
    trials as command jobs (`torch`) or app jobs (`fmnist`: ASHA counts epochs through the
    app's `epoch` metric, resource_metric, as the batch sets the steps of an epoch);
  - Optuna 3.1 (python3-optuna) TPE, unpruned and with its median pruner, in `parallel`
    threads (n_jobs), each trial running the same training as a process and reading its
    per-epoch accuracy: the same script (`torch`), or fmnist_train (`fmnist`: the app's
    model, data, batch order and optimizer in one process without a cluster).
Prints per method the median over the seeds of the best test accuracy reached and of the
wall time, the accuracy-vs-time curve (best so far, sampled), the time Monkey ASHA needs to
reach Optuna TPE's best accuracy as a share of Optuna TPE's wall time (goal: <= 0.5), and
the optimizer's overhead per trial (suggest + observe) with 1,000 finished trials, Monkey's
TPE (bench/tpe_overhead) against Optuna's (ask + tell).
  python3 bench/sweep_vs_optuna.py BIN_DIR [SEEDS] [TRIALS] [EPOCHS] [PARALLEL] [OBJECTIVE]"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import optuna

BIN = sys.argv[1]
SEEDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
TRIALS = int(sys.argv[3]) if len(sys.argv) > 3 else 10
EPOCHS = int(sys.argv[4]) if len(sys.argv) > 4 else 9
PARALLEL = int(sys.argv[5]) if len(sys.argv) > 5 else 2
OBJECTIVE = sys.argv[6] if len(sys.argv) > 6 else "both"
if OBJECTIVE not in ("torch", "fmnist", "both"):
    sys.exit(f"OBJECTIVE is torch, fmnist or both, not {OBJECTIVE}")
OBJECTIVES = ["torch", "fmnist"] if OBJECTIVE == "both" else [OBJECTIVE]
HERE = os.path.dirname(os.path.abspath(__file__))
TRIAL = os.path.join(HERE, "sweep_trial.py")
PY = "/usr/bin/python3"
MONKEY = os.path.join(BIN, "monkey")


def monkey(*args, timeout=1800):
    r = subprocess.run([MONKEY, *args], capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"monkey {' '.join(args)}: {r.returncode}: {r.stderr[-2000:]}")
    return r


def monkey_sweep(algorithm, seed, work, objective):
    by_epoch = ", resource: epoch, resource_metric: epoch" if objective == "fmnist" else ""
    algo = {"random": f"{{name: random, seed: {seed}}}",
            "tpe": f"{{name: tpe, seed: {seed}, startup: 4}}",
            "asha": f"{{name: asha, seed: {seed}, reduction_factor: 3, grace: 1, "
                    f"max_t: {EPOCHS}{by_epoch}}}"}[algorithm]
    if objective == "fmnist":
        trial = (f"{{app: fmnist, params: {{strategy: single, epochs: {EPOCHS}, "
                 f"seed: {seed}}}}}")
        metric = "test_accuracy"
    else:
        trial = (f"{{command: [{PY}, {TRIAL}, \"{{lr}}\", \"{{momentum}}\", \"{{hidden}}\", "
                 f"\"{{batch}}\", \"{EPOCHS}\", \"{seed}\"]}}")
        metric = "acc"
    path = os.path.join(work, f"{objective}-{algorithm}-{seed}.yaml")
    with open(path, "w") as f:
        f.write(f"""name: {objective}-{algorithm}-{seed}
trial: {trial}
space:
  lr: {{type: loguniform, low: 0.001, high: 0.5}}
  momentum: {{type: uniform, low: 0, high: 0.95}}
  hidden: {{type: choice, values: [32, 64, 128, 256]}}
  batch: {{type: choice, values: [64, 128, 256]}}
metric: {{name: {metric}, goal: maximize}}
algorithm: {algo}
budget: {{trials: {TRIALS}}}
parallel: {PARALLEL}
ship: false
""")
    t0 = time.time()
    sweep = monkey("sweep", "start", path, "--wait").stdout.strip().splitlines()[0]
    wall = time.time() - t0
    start_ms = json.loads(monkey("show", sweep, "--json").stdout)["submitted_ms"]
    status = json.loads(monkey("sweep", "status", sweep, "--json").stdout)
    points = []
    for t in status["trials"]:
        series = json.loads(monkey("show", t["job"], "--metric", metric, "--json").stdout)["series"]
        points += [((p["ts_ms"] - start_ms) / 1000.0, p["value"]) for p in series]
    return wall, sorted(points)


def trial_command(objective, lr, momentum, hidden, batch, seed):
    """The training one Optuna trial runs, and how to read (epoch, accuracy) off a line."""
    if objective == "fmnist":
        return ([os.path.join(BIN, "fmnist_train"), "--epochs", str(EPOCHS), "--hidden",
                 str(hidden), "--batch", str(batch), "--lr", f"{lr:.6g}", "--momentum",
                 f"{momentum:.6g}", "--seed", str(seed), "--threads", "1", "--bound", "off"],
                fmnist_line)
    return ([PY, TRIAL, f"{lr:.6g}", f"{momentum:.6g}", str(hidden), str(batch), str(EPOCHS),
             str(seed)], metric_line)


def metric_line(line):
    if not line.startswith("MONKEY_METRIC"):
        return None
    kv = dict(p.split("=") for p in line.split()[1:])
    return int(kv["step"]), float(kv["acc"])


def fmnist_line(line):  # "epoch 3: train loss 0.41, test accuracy 0.8529, 0.5 s"
    if not line.startswith("epoch ") or "test accuracy" not in line:
        return None
    return (int(line.split()[1].rstrip(":")),
            float(line.split("test accuracy")[1].split(",")[0]))


def optuna_sweep(pruned, seed, training):
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=4)
    pruner = optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0) if pruned \
        else optuna.pruners.NopPruner()
    study = optuna.create_study(direction="maximize", sampler=sampler, pruner=pruner)
    points, lock, t0 = [], threading.Lock(), time.time()

    def objective(trial):
        lr = trial.suggest_float("lr", 0.001, 0.5, log=True)
        momentum = trial.suggest_float("momentum", 0.0, 0.95)
        hidden = trial.suggest_categorical("hidden", [32, 64, 128, 256])
        batch = trial.suggest_categorical("batch", [64, 128, 256])
        argv, parse = trial_command(training, lr, momentum, hidden, batch, seed)
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True,
                                env=dict(os.environ, OMP_NUM_THREADS="1",
                                         OPENBLAS_NUM_THREADS="1"))
        last = None
        for line in proc.stdout:
            got = parse(line)
            if got is None:
                continue
            step, acc = got
            last = acc
            with lock:
                points.append((time.time() - t0, acc))
            trial.report(acc, step)
            if trial.should_prune():
                proc.terminate()
                proc.wait()
                raise optuna.TrialPruned()
        proc.wait()
        return last if last is not None else 0.0

    study.optimize(objective, n_trials=TRIALS, n_jobs=PARALLEL)
    return time.time() - t0, sorted(points)


def best(points):
    return max((v for _, v in points), default=0.0)


def time_to(points, target):
    b = 0.0
    for t, v in points:
        b = max(b, v)
        if b >= target:
            return t
    return None


def curve(points, wall):
    out, b, k = [], 0.0, 0
    for q in range(1, 9):
        t = wall * q / 8
        while k < len(points) and points[k][0] <= t:
            b = max(b, points[k][1])
            k += 1
        out.append(f"{t:5.0f}s:{b:.3f}")
    return " ".join(out)


def overhead():
    """Microseconds per suggest+observe with 1,000 finished trials: Monkey's TPE, Optuna's."""
    m = subprocess.run([os.path.join(BIN, "tpe_overhead"), "1000", "200"], capture_output=True,
                       text=True, check=True).stdout.strip()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize",
                                sampler=optuna.samplers.TPESampler(seed=1, n_startup_trials=10))
    dist = {"lr": optuna.distributions.FloatDistribution(0.001, 0.5, log=True),
            "momentum": optuna.distributions.FloatDistribution(0.0, 0.95),
            "hidden": optuna.distributions.CategoricalDistribution([32, 64, 128, 256]),
            "batch": optuna.distributions.CategoricalDistribution([64, 128, 256])}
    import random
    rnd = random.Random(1)
    for _ in range(1000):
        p = {"lr": 10 ** rnd.uniform(-3, -0.302), "momentum": rnd.uniform(0, 0.95),
             "hidden": rnd.choice([32, 64, 128, 256]), "batch": rnd.choice([64, 128, 256])}
        study.add_trial(optuna.trial.create_trial(params=p, distributions=dist,
                                                  value=rnd.random()))
    n, t0 = 50, time.perf_counter()
    for _ in range(n):
        t = study.ask(dist)
        study.tell(t, rnd.random())
    optuna_us = (time.perf_counter() - t0) / n * 1e6
    return m, optuna_us


def main():
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    work = tempfile.mkdtemp(prefix="sweep-bench-")
    os.environ["MONKEY_HOME"] = os.path.join(work, "home")
    os.makedirs(os.environ["MONKEY_HOME"])
    for k in ("MONKEY_ADDRESS", "MONKEY_SECRET_FILE"):
        os.environ.pop(k, None)
    monkey("up", "2", "--cpus", str(max(1, PARALLEL // 2)), "--no-measure")
    results = {}
    try:
        for objective in OBJECTIVES:
            for seed in range(1, SEEDS + 1):
                for name, run in (
                        ("monkey random", lambda s: monkey_sweep("random", s, work, objective)),
                        ("monkey tpe", lambda s: monkey_sweep("tpe", s, work, objective)),
                        ("monkey asha", lambda s: monkey_sweep("asha", s, work, objective)),
                        ("optuna tpe", lambda s: optuna_sweep(False, s, objective)),
                        ("optuna tpe+median", lambda s: optuna_sweep(True, s, objective))):
                    wall, points = run(seed)
                    results.setdefault(objective, {}).setdefault(name, []).append((wall, points))
                    print(f"{objective} seed {seed} {name:<18} wall {wall:6.1f} s  "
                          f"best {best(points):.4f}  curve {curve(points, wall)}", flush=True)
    finally:
        subprocess.run([MONKEY, "down"], capture_output=True)
    for objective, by_method in results.items():
        print(f"\n{objective}: {TRIALS} trials of {EPOCHS} epochs, {PARALLEL} in parallel, "
              f"seeds 1..{SEEDS}; medians over the seeds")
        print(f"{'method':<18} {'best acc':>9} {'wall s':>8}")
        for name, runs in by_method.items():
            print(f"{name:<18} {statistics.median(best(p) for _, p in runs):>9.4f} "
                  f"{statistics.median(w for w, _ in runs):>8.1f}")
        shares = []
        for (w_o, p_o), (_, p_a) in zip(by_method["optuna tpe"], by_method["monkey asha"]):
            t = time_to(p_a, best(p_o))
            shares.append(t / w_o if t is not None else float("inf"))
        print(f"{objective}: monkey asha: time to optuna tpe's best accuracy / optuna tpe's "
              "wall time, per seed: "
              + ", ".join("never" if s == float("inf") else f"{s:.2f}" for s in shares)
              + f"; median {statistics.median(shares):.2f} (goal <= 0.5)")
    m, o = overhead()
    print(f"optimizer overhead per trial with 1000 finished: {m}; optuna tpe ask+tell "
          f"{o:.0f} us")


if __name__ == "__main__":
    main()
