# SPDX-License-Identifier: Apache-2.0
"""Only clients that know the cluster's client token (derived from its secret) get in, and
they are told clearly why not; the token file is written beside the secret, 0600."""
import os

from harness import check, run


def wrong_secret(c):
    c.start("n1")
    check(os.stat(os.path.join(c.home, "secret")).st_mode & 0o777 == 0o600, "secret is 0600")
    bad = os.path.join(c.home, "bad-secret")
    with open(bad, "w") as f:
        f.write("this-is-not-the-secret-1234\n")
    os.chmod(bad, 0o600)
    r = c.monkey("--secret-file", bad, "jobs", check_rc=False)
    check(r.returncode != 0, "refused")
    check("does not know this cluster's token" in r.stderr, r.stderr)
    token = os.path.join(c.home, "token")
    check(os.stat(token).st_mode & 0o777 == 0o600, "the client token beside the secret is 0600")
    check(c.monkey("--token-file", token, "jobs").returncode == 0, "the token alone gets in")
    other = os.path.join(c.home, "other-token")
    with open(other, "w") as f:
        f.write("0" * 64 + "\n")
    os.chmod(other, 0o600)
    r = c.monkey("--token-file", other, "jobs", check_rc=False)
    check(r.returncode != 0 and "token" in r.stderr, r.stderr)
    env = dict(c.env)
    env["MONKEY_SECRET_FILE"] = os.path.join(c.home, "missing")
    r = c.monkey("jobs", env=env, check_rc=False)
    check(r.returncode != 0 and "cannot read the cluster secret file" in r.stderr, r.stderr)
    os.chmod(bad, 0o644)
    r = c.monkey("--secret-file", bad, "jobs", check_rc=False)
    check(r.returncode != 0 and "chmod 600" in r.stderr, r.stderr)
    check("refused client session" in open(os.path.join(c.nodes["n1"]["data"], "runtime.log")).read(),
          "the node logs the refusal")
    check(c.monkey("jobs").returncode == 0, "the right secret still works")


run(wrong_secret)
