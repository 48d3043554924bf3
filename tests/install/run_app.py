# SPDX-License-Identifier: Apache-2.0
"""Runs the app built against the install as a job of the installed binaries: a node with
--app-dir at the app's build folder, `monkey submit --app greet --workers 3 --wait`, then
its metrics and a rank's log.  python3 run_app.py PREFIX APP_DIR"""
import json
import os
import subprocess
import sys
import tempfile
import time

prefix, app_dir = sys.argv[1], sys.argv[2]
home = tempfile.mkdtemp(prefix="monkey-install-")
env = dict(os.environ, MONKEY_HOME=home)
for k in ("MONKEY_ADDRESS", "MONKEY_SECRET_FILE"):
    env.pop(k, None)
data = os.path.join(home, "node")
node = subprocess.Popen([f"{prefix}/bin/monkey-runtime", "--listen", "127.0.0.1:0", "--data-dir",
                         data, "--no-measure", "--cpus", "3", "--app-dir", app_dir],
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
    print(f"the out-of-tree app ran as job {job}: 3 ranks, lr 0.25")
finally:
    node.kill()
    node.wait()
