# SPDX-License-Identifier: Apache-2.0
"""The monkey CLI against a real node: spec files and their errors, --wait exit codes,
dependencies and arrays, logs, why, and cancel of a whole process group."""
import json
import os
import time

from harness import SLOWDOWN, check, pid_alive, run, wait_until


def spec_files_and_errors(c):
    c.start("n1")
    spec = os.path.join(c.home, "job.yaml")
    with open(spec, "w") as f:
        f.write("name: from-file\ncommand: [sh, -c, 'echo lr=$MONKEY_PARAM_LR {lr}']\n"
                "params: {lr: '0.5'}\nretries: 1\n")
    jid = c.submit("--file", spec, "--set", "lr=0.25")
    s = c.wait_final(jid)
    check(s["name"] == "from-file" and s["retries"] == 1, "fields from the file")
    check(c.monkey("logs", jid).stdout == "lr=0.25 0.25\n", "flags override the file")
    with open(spec, "w") as f:
        f.write("command: [true]\nretries: lots\n")
    r = c.monkey("submit", "--file", spec, check_rc=False)
    check(r.returncode == 2 and f"{spec}:2:10: retries: expected an integer" in r.stderr, r.stderr)
    with open(spec, "w") as f:
        f.write("command: [true]\nresource: {cpus: 2}\n")
    r = c.monkey("submit", "--file", spec, check_rc=False)
    check(f"{spec}:2:1: resource: unknown field" in r.stderr, r.stderr)
    r = c.monkey("frobnicate", check_rc=False)
    check(r.returncode != 0 and "frobnicate" in r.stderr, r.stderr)
    r = c.monkey("submit", "--set", "rate=1", "--", "train", "{lr}", check_rc=False)
    check(r.returncode == 2 and "{lr} names no parameter" in r.stderr, r.stderr)
    r = c.monkey("show", "NOSUCHJOB", check_rc=False)
    check(r.returncode != 0 and "no job" in r.stderr, r.stderr)
    r = c.monkey("submit", "--", "/no/such/program", check_rc=False)
    jid = r.stdout.strip().splitlines()[-1]
    s = c.wait_final(jid)
    check(s["state"] == "failed" and "not found" in s["attempts"][0]["cause"], s["attempts"][0]["cause"])
    r = c.monkey("submit", "--workdir", "/no/such/dir", "--wait", "--", "true", check_rc=False)
    check(r.returncode == 1, "a missing working directory fails the job")


def wait_exit_codes(c):
    c.start("n1", "--kill-grace", "1")
    check(c.monkey("submit", "--wait", "--", "sh", "-c", "exit 7", check_rc=False).returncode == 7,
          "exit code passes through")
    check(c.monkey("submit", "--wait", "--", "sh", "-c", "kill -TERM $$",
                   check_rc=False).returncode == 128 + 15, "128 + signal")
    check(c.monkey("submit", "--wait", "--timeout", "1", "--", "sleep", "30",
                   check_rc=False).returncode == 124, "timeout exits 124")
    check(c.monkey("submit", "--wait", "--", "true").returncode == 0, "success exits 0")
    # --wait says on stderr how the job ended: a mistyped program or a timeout is not silent.
    r = c.monkey("submit", "--wait", "--", "/no/such/program", check_rc=False)
    check(r.returncode != 0 and "failed" in r.stderr and "not found" in r.stderr,
          f"--wait names the state and the cause: {r.stderr}")
    r = c.monkey("submit", "--wait", "--timeout", "1", "--", "sleep", "30", check_rc=False)
    check("timed_out" in r.stderr, f"--wait names a timeout: {r.stderr}")


def dependencies_and_arrays(c):
    c.start("n1", "--cpus", "2")
    out = os.path.join(c.home, "out")
    # The first job waits for a file the test writes once `why` has been asked: the
    # dependency is still pending then, however slowly the binaries run.
    gate = os.path.join(c.home, "go")
    first = c.submit("--", "sh", "-c",
                     f"while [ ! -e {gate} ]; do sleep 0.05; done; echo first >> {out}")
    second = c.submit("--after", f"ok:{first}", "--", "sh", "-c", f"echo second >> {out}")
    # --after takes a unique suffix, as every verb does.
    third = c.submit("--after", f"ok:{second[-10:]}", "--", "sh", "-c", f"echo third >> {out}")
    r = c.monkey("submit", "--after", "ok:ZZZZZZZZZZ", "--", "true", check_rc=False)
    check(r.returncode != 0 and "--after ok:ZZZZZZZZZZ" in r.stderr and "no job" in r.stderr,
          f"an unknown suffix is named: {r.stderr}")
    w = c.monkey("why", second).stdout
    check("waits for job" in w, f"why names the dependency: {w}")
    open(gate, "w").close()
    ids = c.monkey("submit", "--array", "0-9:3", "--", "sh", "-c",
                   'echo $MONKEY_ARRAY_INDEX').stdout.split()[-4:]
    check(len(ids) == 4, "4 array elements")
    c.wait_final(third)
    check(open(out).read() == "first\nsecond\nthird\n", "order kept")
    logs = sorted(c.monkey("logs", i).stdout.strip() for i in ids)
    check(logs == ["0", "3", "6", "9"], f"indices {logs}")
    gpu = c.submit("--gpus", "2", "--", "true")
    why = c.monkey("why", gpu).stdout
    check("needs 2 gpus; this node has 0" in why and "waits for a node with" in why, why)
    c.monkey("cancel", gpu)


def logs_follow(c):
    c.start("n1")
    jid = c.submit("--", "sh", "-c", "for i in 1 2 3; do echo line $i; sleep 0.3; done")
    r = c.monkey("logs", "-f", jid)
    check(r.stdout == "line 1\nline 2\nline 3\n", f"followed output: {r.stdout!r}")
    jid = c.submit("--retries", "1", "--", "sh", "-c", 'echo try $MONKEY_ATTEMPT; sleep 1; exit 1')
    r = c.monkey("logs", "-f", jid)
    check(r.stdout == "try 1\ntry 2\n", f"follows into the retry: {r.stdout!r}")


def cancel_whole_group(c):
    """cancel kills the job's whole process group (a setsid child, which leaves the group,
    is test_cgroup.py's: only a cgroup reaches it)."""
    c.start("n1", "--kill-grace", "1")
    pids = os.path.join(c.home, "pids")
    jid = c.submit("--", "sh", "-c", f"sleep 100 & echo $! >> {pids}; wait")
    wait_until(lambda: os.path.exists(pids) and len(open(pids).read().split()) == 1, 30,
               "the child to start")
    child = int(open(pids).read().split()[0])
    c.monkey("cancel", jid)
    s = c.wait_final(jid)
    check(s["state"] == "cancelled", "cancelled")
    wait_until(lambda: not pid_alive(child), 10, "the group's child to die")


def bounded_queue(c):
    """The coordinator's queue is bounded: beyond --max-queued a submission is answered
    busy, naming the limit, and nothing is created; an array that does not fit is refused
    whole."""
    c.start("n1", "--cpus", "1", "--max-queued", "2")
    ids = [c.submit("--", "sleep", "30") for _ in range(3)]  # one runs, two queued
    wait_until(lambda: c.show(ids[0])["state"] == "running", 30, "the first job running")
    r = c.monkey("submit", "--", "true", check_rc=False)
    check(r.returncode != 0 and "queue is full" in r.stderr and "--max-queued 2" in r.stderr,
          f"busy, naming the limit: {r.stderr}")
    check(len(c.jobs()) == 3, "nothing was created")
    c.monkey("cancel", ids[2])
    r = c.monkey("submit", "--array", "0-1", "--", "true", check_rc=False)
    check(r.returncode != 0 and "queue is full" in r.stderr, f"the array is refused: {r.stderr}")
    c.submit("--", "true")  # one fits again
    for j in ids[:2]:
        c.monkey("cancel", j)


def sweep_columns_and_metrics(c):
    """A hand-made sweep compared in one command: names with their placeholders filled,
    jobs filtered by name and parameter, parameter and metric columns sorted on; show's
    metric history and series; the command shown filled in and pasteable."""
    c.start("n1", "--cpus", "2")
    ids = {}
    for lr in ("0.3", "0.1", "0.2"):
        ids[lr] = c.submit("--name", "sweep-lr{lr}-bs{bs}", "--set", f"lr={lr}", "--set", "bs=32",
                           "--", "awk", "-v", "lr={lr}",
                           'BEGIN { for (i = 1; i <= 3; i++) printf "MONKEY_METRIC loss=%g\\n", lr * 10 / i }')
    other = c.submit("--name", "other", "--set", "who=bob", "--", "sh", "-c", 'echo "hi {who}"')
    for j in list(ids.values()) + [other]:
        check(c.wait_final(j)["state"] == "succeeded", f"job {j} succeeded")
    listed = json.loads(c.monkey("jobs", "--name", "sweep-*", "--json").stdout)
    check(sorted(j["name"] for j in listed)
          == ["sweep-lr0.1-bs32", "sweep-lr0.2-bs32", "sweep-lr0.3-bs32"],
          f"names filled, filtered by glob: {[j['name'] for j in listed]}")
    check(all(j["params"]["bs"] == "32" and abs(j["metrics"]["loss"] - float(j["params"]["lr"]) * 10 / 3) < 1e-6
              for j in listed), f"--json carries params and the last metric values: {listed}")
    one = json.loads(c.monkey("jobs", "--param", "lr=0.2", "--json").stdout)
    check([j["id"] for j in one] == [ids["0.2"]], f"--param filters: {one}")
    table = c.monkey("jobs", "--name", "sweep-*", "--columns", "lr,loss", "--sort", "loss").stdout
    lines = table.splitlines()
    check("LR" in lines[0] and "LOSS" in lines[0], f"column headers: {lines[0]}")
    order = [l.split()[1] for l in lines[1:]]
    check(order == ["sweep-lr0.1-bs32", "sweep-lr0.2-bs32", "sweep-lr0.3-bs32"],
          f"sorted by loss: {table}")
    desc = c.monkey("jobs", "--name", "sweep-*", "--columns", "lr", "--sort", "-lr").stdout
    check([l.split()[1] for l in desc.splitlines()[1:]][0] == "sweep-lr0.3-bs32",
          f"-COLUMN sorts descending: {desc}")
    shown = c.monkey("show", ids["0.3"]).stdout
    check("metric    loss: last 1 (3 points; first 3, min 1, max 3)" in shown,
          f"show prints the metric's history: {shown}")
    out = c.monkey("show", ids["0.3"], "--metric", "loss").stdout
    series, summary = out.split("\n\n", 1)
    series = series.splitlines()
    check(len(series) == 4 and series[1].split()[-1] == "3" and series[3].split()[-1] == "1",
          f"show --metric prints the series: {series}")
    check("rank 0    3 points; first 3, min 1, max 3, last 1 (step 3, attempt 1)" in summary
          and "last      1 is rank 0's (step 3, attempt 1)" in summary,
          f"then a summary per rank and where the last value comes from: {summary}")
    # monkey metrics: every point, one row each, in the export schema.
    csv_rows = c.monkey("metrics", ids["0.3"], "--csv").stdout.splitlines()
    check(csv_rows[0] == "job,attempt,rank,step,time,key,value" and len(csv_rows) == 4,
          f"metrics --csv: a header and 3 rows: {csv_rows}")
    fields = [r.split(",") for r in csv_rows[1:]]
    check([f[3] for f in fields] == ["1", "2", "3"] and [f[6] for f in fields] == ["3", "1.5", "1"]
          and all(f[0] == c.show(ids["0.3"])["id"] and f[5] == "loss" and f[4].endswith("Z")
                  for f in fields), f"metrics --csv rows: {fields}")
    lines = [json.loads(l) for l in c.monkey("metrics", ids["0.3"], "--jsonl", "--key", "loss")
             .stdout.splitlines()]
    check([sorted(l) for l in lines] == [sorted(["job", "attempt", "rank", "step", "time", "key",
                                                 "value"])] * 3
          and [l["value"] for l in lines] == [3, 1.5, 1], f"metrics --jsonl: {lines}")
    r = c.monkey("metrics", ids["0.3"], "--key", "nope", check_rc=False)
    check(r.returncode != 0 and "no metric 'nope'" in r.stderr and "loss" in r.stderr, r.stderr)
    r = c.monkey("show", ids["0.3"], "--metric", "nope", check_rc=False)
    check(r.returncode != 0 and "no metric 'nope'" in r.stderr and "loss" in r.stderr, r.stderr)
    shown = c.monkey("show", other).stdout
    check("command   sh -c 'echo \"hi bob\"'" in shown,
          f"the command filled in, quoting kept: {shown}")
    running = c.submit("--", "sleep", "5")
    wait_until(lambda: c.show(running)["state"] == "running", 30, "a running job")
    shown = c.monkey("show", running).stdout
    check("running: ;" not in shown and "running: since" in shown,
          f"a running attempt shows no empty cause: {shown}")


def retry_backoff(c):
    """Retries wait a doubling backoff, and why says when the next one starts."""
    c.start("n1")
    r = c.monkey("submit", "--retry-backoff", "soon", "--", "true", check_rc=False)
    check(r.returncode == 2 and "--retry-backoff" in r.stderr, r.stderr)
    # The first wait outlasts a `why` poll under a sanitizer (SLOWDOWN: a CLI call takes
    # seconds there), else the poll sees only the second one.
    first = SLOWDOWN
    jid = c.submit("--retries", "2", "--retry-backoff", f"{first}s..{10 * first}s", "--", "sh",
                   "-c", "exit 1")
    why = wait_until(lambda: (lambda w: w if "backoff" in w else None)(
        c.monkey("why", jid).stdout), 30 * SLOWDOWN, "why to name the backoff")
    check("retry 1 of 2 waits for its backoff" in why and "starts at" in why, why)
    s = c.wait_final(jid)
    a = s["attempts"]
    check(s["state"] == "failed" and len(a) == 3, f"three attempts: {s['state']} {len(a)}")
    gap1 = a[1]["started_ms"] - a[0]["ended_ms"]
    gap2 = a[2]["started_ms"] - a[1]["ended_ms"]
    check(gap1 >= first * 1000 - 50 and gap2 >= 2 * first * 1000 - 50,
          f"waits of {first} s, then {2 * first} s: {gap1} ms, {gap2} ms")


def mem_limit(c):
    """--mem is enforced (cgroup memory.max, else the runtime's memory watch) and the kill
    is reported as out of memory."""
    c.start("n1")
    jid = c.submit("--mem", "64M", "--", "python3", "-c",
                   "import time\nb = b'x' * (400 * 1024 * 1024)\ntime.sleep(30)")
    s = c.wait_final(jid, timeout=60)
    cause = s["attempts"][-1]["cause"]
    check(s["state"] == "failed" and "--mem limit of 64 MB" in cause, f"{s['state']}: {cause}")
    ok = c.submit("--mem", "256M", "--", "python3", "-c", "b = b'x' * (16 * 1024 * 1024)")
    check(c.wait_final(ok)["state"] == "succeeded", "a job within its limit runs")


def unsatisfiable_waits(c):
    """A job no node has room for is queued with the reason (such a node may join), and
    submit warns."""
    c.start("n1", "--cpus", "2", "--gpus", "none")
    r = c.monkey("submit", "--gpus", "1", "--", "true")
    jid = r.stdout.strip().splitlines()[-1]
    check("warning: no alive node has 1 cpus and 1 gpus" in r.stderr, f"submit warns: {r.stderr}")
    why = c.monkey("why", jid).stdout
    check("waits for a node with 1 cpus and 1 gpus" in why and "joins" in why, why)
    check(c.show(jid)["state"] == "queued", "it stays queued")
    # Each worker fits a node, but not all at once: the same warning for a gang.
    r = c.monkey("submit", "--workers", "3", "--cpus", "1", "--", "true")
    check("warning: 3 workers of 1 cpus: the alive nodes have room for 2 at once" in r.stderr,
          f"submit warns about --workers: {r.stderr}")
    r = c.monkey("submit", "--workers", "2", "--cpus", "1", "--", "true")
    check("warning" not in r.stderr, f"two fit: no warning: {r.stderr}")


def messages_point_to_the_fix(c):
    """A newcomer's slips get a message that names the fix (no node is needed for these)."""
    r = c.monkey(check_rc=False)
    check(r.returncode == 2 and "Subcommands:" in r.stderr and "submit" in r.stderr
          and "console" in r.stderr, f"no verb: the verbs are listed: {r.stderr}")
    r = c.monkey("sumbit", "--", "true", check_rc=False)
    check(r.returncode == 2 and "did you mean submit?" in r.stderr, r.stderr)
    r = c.monkey("submit", "--cpu", "2", "--", "true", check_rc=False)
    check(r.returncode == 2 and "'--cpu'" in r.stderr and "did you mean --cpus?" in r.stderr,
          r.stderr)
    r = c.monkey("submit", "echo", "hi", check_rc=False)
    check(r.returncode == 2 and "after '--'" in r.stderr, f"a forgotten -- is explained: {r.stderr}")
    r = c.monkey("submit", "--cpus", "abc", "--", "true", check_rc=False)
    check(r.returncode == 2 and "--cpus" in r.stderr and "whole number" in r.stderr
          and "'abc'" in r.stderr, f"a number is expected: {r.stderr}")
    r = c.monkey("submit", "--cpus", "0", "--", "true", check_rc=False)
    check(r.returncode == 2 and "from 1 to 4096" in r.stderr, f"the range is named: {r.stderr}")
    r = c.monkey("jobs", check_rc=False)
    check(r.returncode != 0 and "monkey up" in r.stderr and "monkey-runtime" in r.stderr,
          f"before any node runs: how to start one: {r.stderr}")


run(messages_point_to_the_fix)
run(spec_files_and_errors)
run(wait_exit_codes)
run(dependencies_and_arrays)
run(logs_follow)
run(cancel_whole_group)
run(bounded_queue)
run(sweep_columns_and_metrics)
run(retry_backoff)
run(mem_limit)
run(unsatisfiable_waits)
