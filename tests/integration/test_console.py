# SPDX-License-Identifier: Apache-2.0
"""monkey console through a real pseudo-terminal (forkpty), and with -c."""
import os
import pty
import select
import time

from harness import MONKEY, check, run, wait_until


class Pty:
    def __init__(self, env):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execve(MONKEY, [MONKEY, "console"], env)
        self.buf = b""

    def read_until(self, marker, timeout=20):
        deadline = time.time() + timeout
        while marker.encode() not in self.buf:
            left = deadline - time.time()
            if left <= 0:
                raise AssertionError(f"no {marker!r} in console output: {self.buf[-2000:]!r}")
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    self.buf += os.read(self.fd, 65536)
                except OSError:
                    break
        out, _, self.buf = self.buf.partition(marker.encode())
        return out.decode(errors="replace")

    def send(self, text):
        os.write(self.fd, text.encode())


def console_repl(c):
    c.start("n1")
    jid = c.submit("--name", "sleeper", "--", "sleep", "30")
    wait_until(lambda: c.show(jid)["state"] == "running", 30, "running")
    p = Pty(c.env)
    banner = p.read_until("monkey> ")
    check("drain" in banner and "quit" in banner, f"the banner names every verb: {banner}")
    p.send("help\r")
    out = p.read_until("monkey> ")
    listed = next((ln.split()[1:] for ln in out.splitlines() if ln.startswith("commands:")), [])
    check("drain" in listed and "submit" in listed
          and not {"up", "down", "certs", "console"} & set(listed),
          f"help lists the console's commands, not up/down/certs/console: {out}")
    p.send("help submit\r")
    out = p.read_until("monkey> ")
    check("--retries" in out, f"help VERB shows the verb's options: {out}")
    p.send("jobs\r")
    out = p.read_until("monkey> ")
    check("sleeper" in out and "running" in out, f"jobs listed: {out}")
    p.send("frobnicate\r")
    out = p.read_until("monkey> ")
    check("unknown command 'frobnicate'" in out, f"one-line error, prompt again: {out}")
    p.send("show 'unterminated\r")
    out = p.read_until("monkey> ")
    check("unterminated" in out, out)
    p.send("tree\r")
    out = p.read_until("monkey> ")
    check("coordinator" in out and "worker-" in out and "journal" in out, out)
    p.send("kill core/coordinator\r")
    out = p.read_until("monkey> ")
    check("killed core/coordinator (#" in out and "its supervisor core restarts it" in out, out)
    p.send("kill core/router\r")  # a child of core, as core is of root: the same form
    out = p.read_until("monkey> ")
    check("killed core/router (#" in out and "its supervisor core restarts it" in out, out)
    p.send("tree\r")
    out = p.read_until("monkey> ")
    check("restarts 1" in out, f"restart counted: {out}")
    p.send("stat\t")            # tab completion of a verb: the terminal shows the rest
    p.read_until("us")
    p.send("\r")
    out = p.read_until("monkey> ")
    check("cpus" in out, f"status ran: {out}")
    p.send("kill core/jo\t")    # completion of an actor path from the live tree
    p.read_until("urnal")
    p.send("\x15")              # clear the line (Ctrl-U)
    p.send(f"cancel {jid}\r")
    out = p.read_until("monkey> ")
    check("cancelling" in out, out)
    p.send("exit\r")
    _, status = os.waitpid(p.pid, 0)
    check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "console exits 0")
    check(c.wait_final(jid)["state"] == "cancelled", "cancel from the console took effect")
    hist = open(os.path.join(c.home, "console_history")).read()
    check("core/coordinator" in hist and "frobnicate" in hist, "history is saved (libedit format)")


def console_one_command(c):
    c.start("n1")
    r = c.monkey("console", "-c", "status")
    check("cpus" in r.stdout, r.stdout)
    r = c.monkey("console", "-c", "bogus", check_rc=False)
    check(r.returncode == 2 and "unknown command 'bogus'" in r.stderr, r.stderr)
    r = c.monkey("console", "-c", "jobs --json")
    check(r.stdout.strip() == "[]", r.stdout)


run(console_repl)
run(console_one_command)
