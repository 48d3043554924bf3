#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A command job that checkpoints (tests/integration/test_checkpoints.py): counts steps,
writes its state into $MONKEY_CHECKPOINT_DIR every CKPT_EVERY steps and prints
`MONKEY_CHECKPOINT step=N`. A new attempt checks what it was given back: the file's step
must equal $MONKEY_CHECKPOINT_STEP (exit 3 otherwise). Knobs (environment):
STEPS, STEP_S, CKPT_EVERY, FAIL_AT (attempt 1 exits 1 at this step), BIG_MB (a file of
this many MB beside the state)."""
import os
import sys
import time

d = os.environ["MONKEY_CHECKPOINT_DIR"]
steps = int(os.environ.get("STEPS", "20"))
pause = float(os.environ.get("STEP_S", "0.05"))
every = int(os.environ.get("CKPT_EVERY", "5"))
fail_at = int(os.environ.get("FAIL_AT", "-1"))
big = int(os.environ.get("BIG_MB", "0"))
attempt = int(os.environ.get("MONKEY_ATTEMPT", "1"))
given = os.environ.get("MONKEY_CHECKPOINT_STEP")
state = os.path.join(d, "state.txt")

start = 0
if given is not None:
    with open(state) as f:
        saved = int(f.read().strip())
    if saved != int(given):
        print(f"restored state says step {saved}, MONKEY_CHECKPOINT_STEP says {given}")
        sys.exit(3)
    start = saved
    print(f"resumed at step {start} (checkpoint of job {os.environ.get('MONKEY_CHECKPOINT_JOB')})",
          flush=True)
    print(f"MONKEY_METRIC step={start} resumed_at={start}", flush=True)

for step in range(start + 1, steps + 1):
    time.sleep(pause)
    print(f"MONKEY_METRIC step={step} progress={step}", flush=True)
    if attempt == 1 and step == fail_at:
        print(f"failing on purpose at step {step}", flush=True)
        sys.exit(1)
    if every > 0 and step % every == 0:
        if big:
            with open(os.path.join(d, "big.bin"), "wb") as f:
                f.write(os.urandom(big << 20))
        with open(state + ".tmp", "w") as f:
            f.write(str(step))
        os.replace(state + ".tmp", state)
        print(f"MONKEY_CHECKPOINT step={step}", flush=True)
