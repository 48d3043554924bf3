# SPDX-License-Identifier: Apache-2.0
"""Reproducing jobs (issue #13): a job records the git commit of its working directory, its
uncommitted diff and hash, and the versions it ran with; `monkey reproduce ID` runs it again
as recorded and warns about every difference; for a deterministic app on the CPU (fmnist
with one worker) the reproduced run's metrics equal the original's at every step."""
import json
import os
import subprocess

from harness import MONKEY, check, git_repo, journal_rows, run, wait_until


def fmnist_metrics_equal(c):
    """fmnist (one worker, one BLAS thread, a seed): `reproduce --wait --json` runs it again
    and its loss, train_loss and test_accuracy equal the original's at every step; the new
    job says which job it reproduces."""
    c.start("n1", "--cpus", "2")
    job = c.submit("--app", "fmnist", "--workers", "1", "--set", "strategy=single",
                   "--set", "hidden=64", "--set", "epochs=1", "--seed", "5", "--wait")
    r = c.monkey("reproduce", job, "--wait", "--json", timeout=300)
    out = json.loads(r.stdout)
    check(out["original"] == job and out["state"] == "succeeded", out)
    for key in ("loss", "train_loss", "test_accuracy"):
        check(out["metrics"][key]["equal"] and out["metrics"][key]["points"] > 0,
              f"{key}: {out['metrics'][key]}")
    check("metrics equal to" in r.stderr and "loss" in r.stderr, r.stderr)
    again = c.show(out["id"])
    check(again["provenance"]["reproduces"] == job and again["seed"] == c.show(job)["seed"],
          again["provenance"])
    check(again["name"].endswith("-repro"), again["name"])


def code_changes_are_named(c):
    """A command job in a git tree with an uncommitted change: `show` names the commit and the
    diff, `reproduce --diff` prints the change, and once the change is committed
    `reproduce --dry-run` warns that the code changed and the uncommitted changes are gone."""
    c.start("n1", "--cpus", "2")
    repo, git = git_repo(c.home)
    commit = git("rev-parse", "HEAD").strip()
    with open(os.path.join(repo, "train.py"), "a") as f:
        f.write("print('MONKEY_METRIC step=2 acc=0.75')  # tuned\n")
    r = subprocess.run([MONKEY, "submit", "--wait", "--", "python3", "train.py"], cwd=repo,
                       env=c.env, capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, r.stderr)
    job = r.stdout.strip().splitlines()[-1]
    prov = c.show(job)["provenance"]
    check(prov["git_commit"] == commit and prov["git_dirty"] == "yes"
          and prov["git_diff_stored"] == "yes" and "git_diff" not in prov
          and prov["python"].startswith("Python 3"), prov)
    text = c.monkey("show", job).stdout
    check(f"code      commit {commit[:12]} + uncommitted changes" in text, text)
    diff = c.monkey("reproduce", job, "--diff").stdout
    check("# tuned" in diff and diff.startswith("diff --git"), diff)
    quiet = c.monkey("reproduce", job, "--dry-run")
    check("warning" not in quiet.stderr and "would run again: monkey submit --seed "
          in quiet.stdout and quiet.stdout.rstrip().endswith(" -- python3 train.py"),
          quiet.stderr + quiet.stdout)
    git("commit", "-qam", "tuned")
    moved = c.monkey("reproduce", job, "--dry-run")
    check(f"code changed: it ran at commit {commit[:12]}" in moved.stderr
          and "uncommitted changes that are gone" in moved.stderr, moved.stderr)
    r = subprocess.run([MONKEY, "submit", "--", "true"], cwd=c.home, env=c.env,
                       capture_output=True, text=True, timeout=60)
    plain = r.stdout.strip().splitlines()[-1]
    check("git_commit" not in c.show(plain)["provenance"], "not in a git tree: no commit")
    nodiff = c.monkey("reproduce", plain, "--diff", check_rc=False)
    check(nodiff.returncode == 1 and "ran without uncommitted changes (not in a git tree)"
          in nodiff.stderr, nodiff.stderr)


def fmnist_split_by_speed_replayed(c):
    """fmnist over two workers with split=speed and one worker throttled: the shares move
    with the measured step times (differently from run to run), and are recorded as `share`
    points. `reproduce` gives the new run the same shares at the same steps (`shares=`), so
    its losses equal the original's at every step."""
    c.start("n1", "--cpus", "2")
    job = c.submit("--app", "fmnist", "--workers", "2", "--set", "strategy=allreduce",
                   "--set", "hidden=32", "--set", "epochs=1", "--set", "throttle=1:3",
                   "--seed", "11", "--wait")
    shares = [p for p in points_of(c, job, "share")]
    check(len({p["step"] for p in shares}) >= 2, f"the split moved during the run: {shares}")
    r = c.monkey("reproduce", job, "--wait", "--json", timeout=300)
    out = json.loads(r.stdout)
    check(out["state"] == "succeeded" and out.get("replayed_shares"), out)
    check("the shares of each batch the original recorded" in r.stderr, r.stderr)
    for key in ("loss", "train_loss", "test_accuracy"):
        check(out["metrics"][key]["equal"] and out["metrics"][key]["points"] > 0,
              f"{key}: {out['metrics'][key]}")
    again = {(p["step"], p["rank"]): p["value"] for p in points_of(c, out["id"], "share")}
    first = {}
    for p in sorted(shares, key=lambda p: (p["step"], p.get("ts_ms", 0))):
        first[(p["step"], p["rank"])] = p["value"]
    last_of = lambda d, rank: [v for (s, r), v in sorted(d.items()) if r == rank][-1]
    check(all(last_of(again, r) == last_of(first, r) for r in (0, 1)),
          f"the same final split: {first} vs {again}")


def one_stored_diff_per_tree(c):
    """Jobs submitted from a tree with a 40 KB uncommitted diff keep only its hash: the diff
    is stored once in the cluster (the node logs one store of it for two submits of 20 jobs
    each), no record in the journal carries it, and `reproduce --diff` asked at a node that
    joined later (so it fetches the diff from the one that holds it) prints exactly what
    `git diff HEAD` printed, the untracked file's name after it."""
    c.start("n1", "--cpus", "4")
    repo, git = git_repo(c.home)
    with open(os.path.join(repo, "train.py"), "a") as f:
        for i in range(800):
            f.write(f"# tuning note {i:04d}: a line of the researcher's uncommitted work\n")
    with open(os.path.join(repo, "notes.txt"), "w") as f:
        f.write("untracked\n")
    expected = git("diff", "HEAD", "--binary") + "# untracked files:\nnotes.txt\n"
    check(len(expected) > 40000, f"the diff is {len(expected)} bytes")
    ids = []
    for _ in range(2):
        r = subprocess.run([MONKEY, "submit", "--array", "0-19", "--", "true"], cwd=repo,
                           env=c.env, capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and "could not be stored" not in r.stderr, r.stderr)
        ids += [w for w in r.stdout.split() if len(w) == 26]
    prov = c.show(ids[0])["provenance"]
    check(prov["git_dirty"] == "yes" and prov["git_diff_stored"] == "yes"
          and "git_diff" not in prov, prov)
    log = open(os.path.join(c.nodes["n1"]["data"], "runtime.log")).read()
    stores = [l for l in log.splitlines()
              if f"bundle {prov['git_diff_sha256'][:12]} (diff {repo}" in l]
    check(len(stores) == 1, f"the diff was stored {len(stores)} times: {stores}")
    rows = list(journal_rows([c.nodes["n1"]["data"]],
                             "SELECT max(length(record)), count(*) FROM jobs"))
    biggest, count = rows[0][1]
    check(len(ids) == 40 and count >= 40 and biggest < 8000,
          f"{count} records in the journal, the largest {biggest} bytes")
    c.start("n2", "--join", c.nodes["n1"]["address"])
    wait_until(lambda: len(json.loads(c.monkey("nodes", "--json").stdout)) == 2, 30,
               "n2 to join")
    diff = c.monkey("--address", c.nodes["n2"]["address"], "reproduce", ids[-1],
                    "--diff").stdout
    check(diff == expected, f"reproduce --diff printed {len(diff)} bytes, git diff "
          f"{len(expected)}: {diff[:200]!r}")


def points_of(c, job, key):
    return json.loads(c.monkey("show", job, "--metric", key, "--json").stdout)["series"]


if __name__ == "__main__":
    run(fmnist_metrics_equal, code_changes_are_named, fmnist_split_by_speed_replayed,
        one_stored_diff_per_tree)
