#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checkpoint save + replicate through a real 2-node cluster (R = 2), against a plain file
copy on the same disk, side by side in one run (issue #10). A command job writes SIZE MB
into $MONKEY_CHECKPOINT_DIR and prints `MONKEY_CHECKPOINT step=N`; the node copies the
directory into its store (SHA-256, fsync, MANIFEST) and then to the other holder over its
blob server, and logs "stored on 2 node(s) in MS ms": that time is the figure. The copy is
`cp` of the same file plus `sync -f`. Medians of ROUNDS.
    python3 bench/checkpoint_cluster.py [ROUNDS] [SIZE_MB ...]    (default: 3 100 1000)"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/integration"))
from harness import Cluster, wait_until  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
SIZES = [int(a) for a in sys.argv[2:]] or [100, 1000]

JOB = r"""
import os
d = os.environ["MONKEY_CHECKPOINT_DIR"]
mb = int(os.environ["SIZE_MB"])
block = os.urandom(1 << 20)
with open(os.path.join(d, "model.bin"), "wb") as f:
    for _ in range(mb):
        f.write(block)
print("MONKEY_CHECKPOINT step=1", flush=True)
"""


def copy_s(mb, scratch):
    src = os.path.join(scratch, "src.bin")
    with open(src, "wb") as f:
        block = os.urandom(1 << 20)
        for _ in range(mb):
            f.write(block)
    subprocess.run(["sync", "-f", src], check=True)
    t = time.time()
    subprocess.run(["cp", src, os.path.join(scratch, "copy.bin")], check=True)
    subprocess.run(["sync", "-f", os.path.join(scratch, "copy.bin")], check=True)
    took = time.time() - t
    os.unlink(src)
    os.unlink(os.path.join(scratch, "copy.bin"))
    return took


def main():
    c = Cluster("ckpt-bench")
    try:
        c.start("n1", "--cpus", "2")
        c.start("n2", "--cpus", "2", "--join", c.nodes["n1"]["address"])
        wait_until(lambda: "2 alive" in open(os.path.join(c.nodes["n2"]["data"],
                                                          "runtime.log")).read(), 20, "2 members")
        scratch = tempfile.mkdtemp(dir=c.home)
        for mb in SIZES:
            saves, copies = [], []
            for _ in range(ROUNDS):
                copies.append(copy_s(mb, scratch))
                job = c.submit("--env", f"SIZE_MB={mb}", "--", "python3", "-c", JOB)
                pattern = re.compile(r"job (\w+): checkpoint step 1 \(directory, (\d+) bytes\) "
                                     r"stored on (\d+) node\(s\) in (\d+) ms")

                def logged():
                    for n in c.nodes.values():
                        text = open(os.path.join(n["data"], "runtime.log")).read()
                        for m in pattern.finditer(text):
                            if job.endswith(m.group(1)):
                                return m
                    return None
                m = wait_until(logged, 300, f"the {mb} MB checkpoint to be stored")
                if int(m.group(3)) != 2:
                    raise SystemExit(f"stored on {m.group(3)} nodes, not 2")
                saves.append(int(m.group(4)) / 1000)
                c.wait_final(job, 120)
                c.monkey("rm", job, check_rc=False)
            save, copy = statistics.median(saves), statistics.median(copies)
            print(f"{mb:5d} MB: plain copy (cp + sync) {mb / copy:7.1f} MB/s | checkpoint save + "
                  f"replicate to the other holder {mb / save:7.1f} MB/s ({copy / save:.2f}x the "
                  f"copy's speed; median of {ROUNDS})", flush=True)
    finally:
        c.close()


if __name__ == "__main__":
    main()
