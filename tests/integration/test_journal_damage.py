# SPDX-License-Identifier: Apache-2.0
"""A garbled WAL tail is dropped with a warning and every committed job survives;
corruption in the middle of the journal refuses to start with a clear message."""
import os

from harness import check, run


def crashed_with_jobs(c, n):
    """A node that finished n jobs and was then killed with -9; returns its WAL path."""
    node = c.start("n1")
    for i in range(n):
        c.submit("--name", f"j{i}", "--", "true")
    c.wait_all_final()
    c.kill9("n1")
    return os.path.join(node["data"], "journal.db-wal")


def garbled_tail(c):
    wal = crashed_with_jobs(c, 20)
    check(os.path.getsize(wal) > 0, "the WAL holds the commits after kill -9")
    with open(wal, "ab") as f:
        f.write(os.urandom(3000))
    c.start("n1")
    check("garbled WAL tail" in c.stderr("n1"), "a warning names the garbled tail")
    jobs = c.jobs()
    check(len(jobs) == 20 and all(j["state"] == "succeeded" for j in jobs),
          f"all 20 jobs survive: {len(jobs)}")
    check(c.submit("--", "true"), "the node accepts work again")


def corrupt_middle(c):
    wal = crashed_with_jobs(c, 30)
    with open(wal, "r+b") as f:
        f.seek(32 + 24 + 200)  # inside the first frame: later frames are committed data
        f.write(b"\x00\xff\x13\x37")
    node = c.start("n1", wait=False)
    rc = node["proc"].wait(30)
    check(rc == 2, f"exit code 2 for a corrupt journal, got {rc}")
    err = c.stderr("n1")
    check("corrupt in the middle" in err and "refuses to start" in err, err)


run(garbled_tail)
run(corrupt_middle)
