# SPDX-License-Identifier: Apache-2.0
"""Monkey's helper for Python jobs (docs/writing-jobs-in-python.md): no dependencies, on the
PYTHONPATH of every job a node starts. A command job never needs it: environment variables
and `MONKEY_METRIC` / `MONKEY_CHECKPOINT` lines on stdout keep working; this module writes
and reads exactly those.

    import monkey
    lr = monkey.param("lr", 0.01, float)          # --set lr=0.1 (MONKEY_PARAM_LR)
    start = monkey.resume_step() or 0              # the checkpoint this attempt starts from
    for epoch in range(start, 10):
        ...
        monkey.report(epoch, loss=loss, accuracy=acc)   # a metric point at step `epoch`
        torch.save(state, monkey.checkpoint_dir() + "/model.pt")
        monkey.checkpoint(epoch + 1)                     # the directory holds step epoch+1
        if monkey.should_stop():                         # SIGTERM: cancelled, or stopped early
            break
"""
import os
import re
import signal

__all__ = ["param", "params", "report", "checkpoint", "checkpoint_dir", "resume_step",
           "should_stop", "job_id", "attempt", "seed", "rank", "world_size", "in_monkey"]

_PREFIX = "MONKEY_PARAM_"
_stop = False


def _env_name(name):
    """The variable a parameter arrives in: MONKEY_PARAM_ and the name in capitals, every
    character but letters and digits an underscore (the node's rule)."""
    return _PREFIX + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def in_monkey():
    """True when this process runs as a Monkey job."""
    return "MONKEY_JOB_ID" in os.environ


def param(name, default=None, kind=str):
    """The job's parameter `name` (`--set name=value`), converted by `kind` (str, int,
    float, or bool: true/false/1/0/yes/no); `default` when the job does not set it. A value
    `kind` cannot read raises ValueError naming the parameter."""
    text = os.environ.get(_env_name(name))
    if text is None:
        return default
    try:
        if kind is bool:
            low = text.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        return kind(text)
    except ValueError:
        raise ValueError(f"parameter {name}={text!r} is not a {kind.__name__}") from None


def params():
    """Every parameter the job sets, as {NAME: text} (names as the variables have them:
    capitals, underscores)."""
    return {k[len(_PREFIX):]: v for k, v in os.environ.items() if k.startswith(_PREFIX)}


def report(step, **metrics):
    """Metric points at `step`: one `MONKEY_METRIC step=N key=value ...` line on stdout
    (flushed). Values must be numbers; names up to 64 characters, no spaces or '='."""
    parts = [f"step={int(step)}"]
    for key, value in metrics.items():
        if not key or len(key) > 64 or any(c in key for c in " \t=\n"):
            raise ValueError(f"metric name {key!r}: up to 64 characters, no spaces or '='")
        parts.append(f"{key}={float(value)!r}")
    print("MONKEY_METRIC " + " ".join(parts), flush=True)


def checkpoint_dir():
    """The attempt's checkpoint directory (MONKEY_CHECKPOINT_DIR), or None outside Monkey.
    At the start it holds the checkpoint the attempt resumes from, if any."""
    return os.environ.get("MONKEY_CHECKPOINT_DIR")


def checkpoint(step):
    """Says that checkpoint_dir() holds the state at `step`: its files are saved and copied
    to the job's holders (a `MONKEY_CHECKPOINT step=N` line). Call it once the files are
    written and closed. The copy is made a moment later, while the job goes on: replace
    files whole afterwards (write NAME.tmp, then os.replace(NAME.tmp, NAME)) rather than
    rewriting them in place, or a copy may catch one half-written."""
    print(f"MONKEY_CHECKPOINT step={int(step)}", flush=True)


def resume_step():
    """The step of the checkpoint this attempt starts from, or None (from scratch)."""
    text = os.environ.get("MONKEY_CHECKPOINT_STEP")
    return int(text) if text else None


def _on_term(signum, frame):  # noqa: ARG001 - a signal handler's signature
    global _stop
    _stop = True


def should_stop():
    """True once the job was asked to stop (SIGTERM: cancelled, stopped early by a sweep,
    its node shutting down): save what matters and exit within the grace period. The first
    call installs the handler — from then on SIGTERM no longer kills the process at once, so
    call it once at the start and then in the training loop."""
    if signal.getsignal(signal.SIGTERM) is not _on_term:
        signal.signal(signal.SIGTERM, _on_term)
    return _stop


def job_id():
    return os.environ.get("MONKEY_JOB_ID")


def attempt():
    return int(os.environ.get("MONKEY_ATTEMPT", "0"))


def seed():
    return int(os.environ.get("MONKEY_SEED", "0"))


def rank():
    """This process's rank in a gang (`--workers N`: torchrun's RANK), else 0."""
    return int(os.environ.get("RANK", "0"))


def world_size():
    return int(os.environ.get("WORLD_SIZE", "1"))
