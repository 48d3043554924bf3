# SPDX-License-Identifier: Apache-2.0
"""Runs the apps built against the install as jobs of the installed binaries: a node with
--app-dir at each app's build folder and at the installed built-in apps; `monkey submit
--app greet --workers 3 --wait`, then its metrics and a rank's log; the doc's `scale` app
(docs/writing-apps.md) on 3 ranks, each finding its all-reduced tensor right; and the
built-in `hello` from the same node.  python3 run_app.py PREFIX APP_DIR DOC_APP_DIR"""
import json
import os
import subprocess
import sys
import tempfile
import time

prefix, app_dir, doc_app_dir = sys.argv[1], sys.argv[2], sys.argv[3]
home = tempfile.mkdtemp(prefix="monkey-install-")
env = dict(os.environ, MONKEY_HOME=home)
for k in ("MONKEY_ADDRESS", "MONKEY_SECRET_FILE"):
    env.pop(k, None)
data = os.path.join(home, "node")
node = subprocess.Popen([f"{prefix}/bin/monkey-runtime", "--listen", "127.0.0.1:0", "--data-dir",
                         data, "--no-measure", "--cpus", "3", "--app-dir", app_dir,
                         "--app-dir", doc_app_dir, "--app-dir", f"{prefix}/lib/monkey/apps"],
                        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(300):
        if os.path.exists(os.path.join(data, "address")):
            break
        time.sleep(0.1)
    env["MONKEY_ADDRESS"] = open(os.path.join(data, "address")).read().strip()

    def monkey(*args):
        return subprocess.run([f"{prefix}/bin/monkey", *args], env=env, capture_output=True,
                              text=True, timeout=120)
    r = monkey("submit", "--app", "greet", "--workers", "3", "--set", "lr=0.25", "--wait")
    if r.returncode != 0:
        sys.exit(f"the app job did not succeed: {r.stdout} {r.stderr}")
    job = r.stdout.strip().splitlines()[-1]
    series = json.loads(monkey("show", job, "--metric", "lr", "--json").stdout)["series"]
    if sorted(p["rank"] for p in series) != [0, 1, 2] or any(p["value"] != 0.25 for p in series):
        sys.exit(f"metrics per rank: {series}")
    log = monkey("logs", job, "--rank", "2").stdout
    if "hello from rank 2 of job" not in log:
        sys.exit(f"rank 2's log: {log}")
    r = monkey("submit", "--app", "scale", "--workers", "3", "--set", "n=5000", "--wait")
    if r.returncode != 0:
        sys.exit(f"the doc's app did not succeed: {r.stdout} {r.stderr}")
    doc_job = r.stdout.strip().splitlines()[-1]
    wrong = json.loads(monkey("show", doc_job, "--metric", "wrong", "--json").stdout)["series"]
    last = json.loads(monkey("show", doc_job, "--metric", "last", "--json").stdout)["series"]
    if sorted(p["rank"] for p in wrong) != [0, 1, 2] or any(p["value"] != 0 for p in wrong) \
            or any(p["value"] != 6 * 5000 for p in last):
        sys.exit(f"the doc's app: wrong elements {wrong}, last elements {last}")
    r = monkey("submit", "--app", "hello", "--workers", "2", "--set", "steps=2", "--wait")
    if r.returncode != 0:
        sys.exit(f"the built-in hello beside them did not succeed: {r.stdout} {r.stderr}")
    print(f"the out-of-tree app ran as job {job}: 3 ranks, lr 0.25; the doc's app as job "
          f"{doc_job}: 3 ranks, sums right; the built-in hello beside them")
finally:
    node.kill()
    node.wait()
