# SPDX-License-Identifier: Apache-2.0
"""Tasks (the light work kind) end to end through real processes: batches of built-in
tasks run through coordinator -> device proxy -> task worker; each task gets exactly one
final record in the journal, also when a task worker or a device proxy is killed mid-batch
and when the runtime itself is killed with -9 and restarted on its data directory."""
import json
import os
import sqlite3

from harness import SLOWDOWN, check, run, wait_until


def journal_ranges(c, name="n1"):
    """{batch id: sorted [(first, count, ok)]} read straight from the node's journal."""
    db = sqlite3.connect(f"file:{os.path.join(c.home, name, 'journal.db')}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT batch, first, count, ok FROM task_ranges").fetchall()
        counts = dict(db.execute("SELECT id, count FROM task_batches").fetchall())
    finally:
        db.close()
    out = {b: [] for b in counts}
    for b, first, count, ok in rows:
        out.setdefault(b, []).append((first, count, ok))
    return {b: sorted(v) for b, v in out.items()}, counts


def check_exactly_once(c, batch, count):
    ranges, counts = journal_ranges(c)
    check(counts.get(batch) == count, f"batch {batch} accepted with {count} tasks: {counts}")
    cursor = 0
    for first, n, _ in ranges[batch]:
        check(first == cursor, f"batch {batch}: ranges tile the tasks without overlap or gap "
                               f"(expected {cursor}, got {first}): {ranges[batch][:20]}")
        cursor = first + n
    check(cursor == count, f"batch {batch}: every task has a final record ({cursor}/{count})")


def tasks_json(c, *args, check_rc=True):
    return json.loads(c.monkey("tasks", *args, "--json", check_rc=check_rc).stdout)


def progress(c, batch):
    """The batch's progress now (tasks wait --timeout 0 exits 124 while it runs)."""
    r = c.monkey("tasks", "wait", batch, "--timeout", "0", "--json", check_rc=False)
    check(r.returncode in (0, 1, 124), f"tasks wait: {r.returncode} {r.stderr}")
    return json.loads(r.stdout)


def submit(c, *args):
    return tasks_json(c, "submit", *args)["id"]


def batches_end_to_end(c):
    c.start("n1", "--cpus", "2")
    ok = tasks_json(c, "submit", "--kind", "noop", "--count", "50000", "--wait")
    check(ok["succeeded"] == 50000 and ok["failed"] == 0, f"noop batch: {ok}")
    check_exactly_once(c, ok["id"], 50000)
    r = c.monkey("tasks", "submit", "--kind", "fail_every", "--arg", "100", "--count", "1000",
                 "--wait", "--json", check_rc=False)
    check(r.returncode == 1, f"a batch with failed tasks exits 1: {r.returncode} {r.stderr}")
    failed = json.loads(r.stdout)
    check(failed["failed"] == 10 and failed["succeeded"] == 990, f"fail_every: {failed}")
    check("multiple of 100" in failed["first_failure"], failed["first_failure"])
    ranges, _ = journal_ranges(c)
    bad = [x for x in ranges[failed["id"]] if not x[2]]
    check(sorted(f for f, _, _ in bad) == list(range(0, 1000, 100)),
          f"the failed tasks are recorded one by one: {bad}")
    check_exactly_once(c, failed["id"], 1000)
    listed = tasks_json(c, "list")
    check({b["id"] for b in listed} == {ok["id"], failed["id"]}, f"tasks list: {listed}")
    # Bad input: a clear refusal naming the field.
    r = c.monkey("tasks", "submit", "--kind", "nope", check_rc=False)
    check(r.returncode != 0 and "no task kind 'nope'" in r.stderr, r.stderr)
    r = c.monkey("tasks", "submit", "--count", "0", check_rc=False)
    check(r.returncode != 0 and "count: must be between 1" in r.stderr, r.stderr)
    r = c.monkey("tasks", "wait", "ZZZZZZZZ", check_rc=False)
    check(r.returncode != 0 and "no task batch" in r.stderr, r.stderr)


def killed_worker_and_proxy(c):
    """A killed task worker is replaced and a killed device proxy restarted by its
    supervisor; their chunks run again and every task is recorded once."""
    c.start("n1", "--cpus", "2")
    # ~1.5 s on 2 slots (longer where the binaries run slower: the kills must come mid-batch)
    batch = submit(c, "--kind", "sleep", "--arg", str(int(2000 * SLOWDOWN)), "--count", "1500")
    wait_until(lambda: "busy" in c.monkey("tree").stdout, 30, "tasks to run")
    # Every depth answers in the same form: the path as given, then who restarts it.
    out = c.monkey("kill", "core/devices/cpu0/slot0").stdout
    check(out.startswith("killed core/devices/cpu0/slot0 (#") and "its supervisor" in out, out)
    out = c.monkey("kill", "core/devices/cpu0").stdout
    check(out.startswith("killed core/devices/cpu0 (#") and "its supervisor devices" in out, out)
    mid = progress(c, batch)
    check(mid["finished_ms"] == 0, f"the kills came mid-batch: {mid}")
    done = tasks_json(c, "wait", batch)
    check(done["finished_ms"] > 0, f"wait returns once the batch is done: {done}")
    check(done["succeeded"] == 1500 and done["failed"] == 0, f"all tasks succeeded: {done}")
    check_exactly_once(c, batch, 1500)
    tree = c.monkey("tree").stdout
    cpu0 = [l for l in tree.splitlines() if "cpu0" in l]
    check(cpu0 and "restarts 1" in cpu0[0] and "slot1" in tree,
          f"the proxy is back, restarted once, with its slots:\n{tree}")


def kill9_mid_batch(c):
    """kill -9 of the runtime while a batch runs: after a restart on the same data
    directory only the tasks without a final record run, and the batch completes."""
    c.start("n1", "--cpus", "2")
    # ~2 s on 2 slots (longer where the binaries run slower: the crash must come mid-batch)
    batch = submit(c, "--kind", "sleep", "--arg", str(int(1000 * SLOWDOWN)), "--count", "4000")
    wait_until(lambda: progress(c, batch)["succeeded"] >= 500, 60, "500 tasks done")
    c.kill9("n1")
    ranges, counts = journal_ranges(c)
    before = sum(n for _, n, _ in ranges[batch])
    check(0 < before < 4000, f"the crash came mid-batch: {before} tasks final")
    c.start("n1", "--cpus", "2")
    done = tasks_json(c, "wait", batch)
    check(done["succeeded"] == 4000, f"every task succeeded once: {done}")
    check_exactly_once(c, batch, 4000)


if __name__ == "__main__":
    run(batches_end_to_end)
    run(killed_worker_and_proxy)
    run(kill9_mid_batch)
