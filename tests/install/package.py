# SPDX-License-Identifier: Apache-2.0
"""ctest package.deb: `cpack -G DEB` of the build makes the two Debian packages; `monkey`
installs at most 60 MB of stripped files with Depends from dpkg-shlibdeps and Recommends
dataset-fashion-mnist, `monkey-dev` depends on it and on libcaf-dev. Both are unpacked
(`dpkg-deb -x`) into a scratch folder, which then works as an install: `monkey up 2` from
it (the built-in apps offered from lib/monkey/apps), a command job, and the app of
docs/writing-apps.md built against the unpacked SDK and run as a job next to them.
    python3 package.py BUILD_DIR SOURCE_DIR WORK_DIR"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

build, src, work = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


def run(*cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r.stdout


run("cpack", "-G", "DEB", "-B", os.path.join(work, "debs"), cwd=build)
debs = {os.path.basename(p).split("_")[0]: p for p in glob.glob(os.path.join(work, "debs", "*.deb"))}
if set(debs) != {"monkey", "monkey-dev"}:
    sys.exit(f"cpack made {sorted(debs)}, not monkey and monkey-dev")
field = lambda deb, f: run("dpkg-deb", "-f", debs[deb], f).strip()
size_mb = int(field("monkey", "Installed-Size")) / 1024
depends = field("monkey", "Depends")
if size_mb > 60:
    sys.exit(f"the monkey package installs {size_mb:.0f} MB (at most 60)")
if "libc6" not in depends or "libcaf" not in depends:
    sys.exit(f"monkey's Depends is not dpkg-shlibdeps': {depends!r}")
if "dataset-fashion-mnist" not in field("monkey", "Recommends"):
    sys.exit("monkey does not recommend dataset-fashion-mnist")
dev_depends = field("monkey-dev", "Depends")
if "monkey (=" not in dev_depends or "libcaf-dev" not in dev_depends:
    sys.exit(f"monkey-dev's Depends: {dev_depends!r}")
root = os.path.join(work, "root")
for deb in debs.values():
    run("dpkg-deb", "-x", deb, root)
usr = os.path.join(root, "usr")
for f in ("bin/monkey", "bin/monkey-runtime", "lib/monkey/apps/monkey-app-fmnist",
          "lib/libmonkey_app.so", "share/monkey/python/monkey/__init__.py",
          "include/monkey/app.hpp", "lib/cmake/Monkey/MonkeyConfig.cmake"):
    if not os.path.exists(os.path.join(usr, f)):
        sys.exit(f"the unpacked packages lack usr/{f}")
for f in ("bin/monkey-runtime", "lib/monkey/apps/monkey-app-fmnist"):
    sections = run("readelf", "-S", "-W", os.path.join(usr, f))
    if ".debug_info" in sections or ".symtab" in sections:
        sys.exit(f"usr/{f} is not stripped")

# The doc's app against the unpacked SDK.
run(sys.executable, os.path.join(src, "tests/install/doc_app.py"),
    os.path.join(src, "docs/writing-apps.md"), os.path.join(work, "doc-src"))
run("cmake", "-S", os.path.join(work, "doc-src"), "-B", os.path.join(work, "doc-app"),
    f"-DCMAKE_PREFIX_PATH={usr}", "-DCMAKE_BUILD_TYPE=Release")
run("cmake", "--build", os.path.join(work, "doc-app"))

home = tempfile.mkdtemp(prefix="monkey-deb-", dir=work)
env = dict(os.environ, MONKEY_HOME=home)
for k in ("MONKEY_ADDRESS", "MONKEY_SECRET_FILE", "MONKEY_BIN_DIR"):
    env.pop(k, None)
monkey = os.path.join(usr, "bin", "monkey")
try:
    run(monkey, "up", "2", "--no-measure", "--cpus", "2", "--", "--app-dir",
        os.path.join(work, "doc-app"), "--app-dir", os.path.join(usr, "lib/monkey/apps"),
        env=env, timeout=120)
    nodes = json.loads(run(monkey, "nodes", "--json", env=env, timeout=60))
    apps = {a["name"] for n in nodes for a in n.get("apps", [])}
    if not {"scale", "hello", "fmnist", "allreduce"} <= apps:
        sys.exit(f"the unpacked cluster offers {sorted(apps)}")
    out = run(monkey, "submit", "--wait", "--", "sh", "-c", "echo from-the-package",
              env=env, timeout=120)
    job = out.strip().splitlines()[-1]
    if "from-the-package" not in run(monkey, "logs", job, env=env, timeout=60):
        sys.exit("the command job's log")
    out = run(monkey, "submit", "--app", "scale", "--workers", "2", "--set", "n=1000", "--wait",
              env=env, timeout=180)
    job = out.strip().splitlines()[-1]
    wrong = json.loads(run(monkey, "show", job, "--metric", "wrong", "--json", env=env,
                           timeout=60))["series"]
    if sorted(p["rank"] for p in wrong) != [0, 1] or any(p["value"] != 0 for p in wrong):
        sys.exit(f"the doc's app on the unpacked cluster: {wrong}")
    print(f"monkey {size_mb:.1f} MB installed; Depends: {depends}; unpacked: a 2-node cluster "
          f"ran a command job and the doc's app (built against monkey-dev)")
finally:
    subprocess.run([monkey, "down"], env=env, capture_output=True, timeout=120)
