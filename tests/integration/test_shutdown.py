# SPDX-License-Identifier: Apache-2.0
"""SIGTERM requeues running jobs without charging retries; --drain waits for them."""
from harness import SLOWDOWN, check, run, wait_until


def sigterm_requeues(c):
    c.start("n1", "--kill-grace", "1")
    jid = c.submit("--retries", "0", "--", "sleep", str(3 * SLOWDOWN))
    wait_until(lambda: c.show(jid)["state"] == "running", 30 * SLOWDOWN, "running")
    rc = c.stop("n1")
    check(rc == 0, f"clean exit, got {rc}")
    c.start("n1")
    s = c.show(jid)
    check(s["retries_used"] == 0 and s["requeues_used"] == 0, "nothing charged")
    check(s["attempts"][0]["outcome"] == "requeued", s["attempts"][0]["outcome"])
    s = c.wait_final(jid)
    check(s["state"] == "succeeded" and len(s["attempts"]) == 2, f"re-ran: {s['state']}")


def drain_waits(c):
    c.start("n1", "--drain")
    # It runs long enough for a poll to see it running (a CLI call takes seconds under a
    # sanitizer on a busy machine), so that the stop comes while it runs.
    jid = c.submit("--", "sh", "-c", f"sleep {2 * SLOWDOWN}; echo finished")
    wait_until(lambda: c.show(jid)["state"] == "running", 30 * SLOWDOWN, "running")
    rc = c.stop("n1")
    check(rc == 0, f"clean exit, got {rc}")
    c.start("n1")
    s = c.show(jid)
    check(s["state"] == "succeeded" and len(s["attempts"]) == 1, f"drained: {s['state']}")


run(sigterm_requeues)
run(drain_waits)
