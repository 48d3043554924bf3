# SPDX-License-Identifier: Apache-2.0
"""200 jobs through one node: every one finishes in the right state with exactly the
attempts its retries allow."""
from harness import check, run


def many_jobs(c):
    c.start("n1", "--cpus", "2")
    c.submit("--array", "0-149", "--", "true")
    c.submit("--array", "0-29", "--retries", "1", "--", "sh", "-c", "exit 2")
    c.submit("--array", "0-19", "--retries", "3", "--", "sh", "-c",
             '[ "$MONKEY_ATTEMPT" -ge 2 ]')
    jobs = c.wait_all_final(timeout=400)
    check(len(jobs) == 200, f"200 jobs listed, got {len(jobs)}")
    by = {}
    for j in jobs:
        by.setdefault((j["name"].split("[")[0], j["state"], j["attempts"]), []).append(j)
    counts = {k: len(v) for k, v in by.items()}
    check(counts.get(("true", "succeeded", 1)) == 150, f"150 true jobs succeeded once: {counts}")
    check(counts.get(("sh", "failed", 2)) == 30, f"30 failing jobs ran twice: {counts}")
    check(counts.get(("sh", "succeeded", 2)) == 20, f"20 jobs succeeded on retry: {counts}")
    failed = [j for j in jobs if j["state"] == "failed"]
    check(all(j["exit_code"] == 2 for j in failed), "failed jobs report exit 2")
    status = c.monkey("status", "--json").stdout
    check('"succeeded":170' in status.replace(" ", ""), f"status counts: {status}")


run(many_jobs)
