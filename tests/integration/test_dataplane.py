# SPDX-License-Identifier: Apache-2.0
"""The data plane between processes (issue #11): one rank per real process (bench/dp_ranks),
over shared memory and over TCP. Point-to-point and every collective equal the ring-order
reference bit for bit from 1 element to 64 MB with 2, 3 and 4 ranks; kill -9 of a rank in
the middle of an all-reduce fails the others at once; a SIGSTOPped rank fails them after the
transfer timeout; nothing is left in /dev/shm; a rank without the key is refused."""
import json
import os
import signal
import subprocess
import tempfile
import time

from harness import BIN, check, kill9_a_part_host, nodes_up, points, run, wait_until

DP = os.path.join(BIN, "dp_ranks")


def shm_entries():
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def start_world(world, *args, keys=None, env=None):
    d = tempfile.mkdtemp(prefix="monkey-dp-")
    procs = []
    for r in range(world):
        extra = ["--key", keys[r]] if keys else []
        procs.append(subprocess.Popen([DP, "--rank", str(r), "--world", str(world), "--dir", d,
                                       *args, *extra],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, env=env))
    return procs


def finish(procs, timeout):
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            out += "\n(timed out)"
        outs.append((p.returncode, out))
    return outs


def signal_rank_one(procs, sig, what):
    """Once rank 1 of a 3-rank loop has done 3 all-reduces, sends it `sig`; the exit codes
    and outputs of ranks 0 and 2, the seconds they took to stop, and their last lines."""
    deadline = time.time() + 60
    while time.time() < deadline:
        if procs[1].stdout.readline().startswith("iter 3"):
            break
    check(time.time() < deadline, f"{what}: rank 1 iterated")
    t0 = time.time()
    procs[1].send_signal(sig)
    try:
        outs = finish([procs[0], procs[2]], 30)
        took = time.time() - t0
    finally:
        procs[1].send_signal(signal.SIGKILL)
        procs[1].send_signal(signal.SIGCONT)
        procs[1].wait()
    for (rc, out), r in zip(outs, (0, 2)):
        check(rc == 3, f"{what}: rank {r} stopped with the error code: {rc}\n{out[-1500:]}")
    return outs, took, " | ".join(o.splitlines()[-1] for _, o in outs)


def collectives_equal_the_reference(c):
    """Every transport, 2/3/4 ranks, sizes 1 .. 1M+3 elements; 64 MB on 2 and 4 ranks. Over
    shm the point-to-point sends of 256 KB and 4 MB (and broadcasts' segments) go by address
    (the receiver reads the sender's memory: process_vm_readv) and the all-reduces up to 32 MB
    in place (each member reads the others' tensors by CMA), 64 MB through the rings; with
    MONKEY_DP_CMA=0 everything takes the rings, and the bytes are the same."""
    before = shm_entries()
    for transport in ("shm", "tcp", "shm-no-cma"):
        for world in (2, 3, 4) if transport != "shm-no-cma" else (3,):
            sizes = "1,2,7,1000,65537,1000003"
            if world in (2, 4):
                sizes += ",16777216"  # 64 MB of float32
            env = dict(os.environ, MONKEY_DP_CMA="0" if transport == "shm-no-cma" else "1")
            over = transport.split("-")[0]
            outs = finish(start_world(world, "--transport", over, "--sizes", sizes, env=env), 300)
            for r, (rc, out) in enumerate(outs):
                check(rc == 0, f"{transport} world {world} rank {r} passed: rc {rc}\n{out[-2000:]}")
                check(out.count("ok rank") == len(sizes.split(",")),
                      f"{transport} world {world} rank {r} checked every size:\n{out[-2000:]}")
                check(f"over {over}" in out, f"the ranks used {over}:\n{out[-500:]}")
                addr = [int(l.split(":")[1]) for l in out.splitlines()
                        if l.startswith("by-address sends:")]
                check(len(addr) == 1, f"rank {r} said how many it sent by address:\n{out[-500:]}")
                if transport == "shm":  # (and the broadcasts' segments)
                    check(addr[0] >= 2, f"shm world {world} rank {r}: {addr[0]} sends by address")
                else:
                    check(addr[0] == 0, f"{transport} world {world} rank {r}: {addr[0]} sends by "
                          "address")
                # Over shm the all-reduces up to 32 MB read the others' tensors in place (by
                # CMA: they are not registered); 64 MB takes the ring, as everything does
                # without CMA and over TCP. Sum and mean of each size, and the group of
                # ranks 1.. when world >= 3.
                done = [int(l.split(":")[1]) for l in out.splitlines()
                        if l.startswith("in-place all-reduces:")]
                in_place = len([n for n in sizes.split(",") if int(n) * 4 <= 32 << 20])
                want = in_place * (3 if world >= 3 and r > 0 else 2) if transport == "shm" else 0
                check(done == [want], f"{transport} world {world} rank {r}: {done} in place, "
                      f"not {want}")
    check(shm_entries() == before, f"/dev/shm unchanged: {shm_entries() - before}")


def killed_rank_fails_the_others_at_once(c):
    """kill -9 of rank 1 in the middle of a loop of 16 MB all-reduces, over shm (in place by
    CMA, and through the rings), TCP and TLS: ranks 0 and 2 get an error well within the
    detection time (no hang, no SIGPIPE death); nothing left in /dev/shm."""
    before = shm_entries()
    certs = os.path.join(c.home, "certs")
    c.monkey("certs", "--dir", certs)
    for transport in ("shm", "shm-rings", "tcp", "tls"):
        extra = ["--tls-dir", certs] if transport == "tls" else []
        # shm: the all-reduces read each other's tensors in place (CMA); shm-rings: without
        # CMA, through the rings' lanes.
        env = dict(os.environ, MONKEY_DP_CMA="0" if transport == "shm-rings" else "1")
        over = {"tls": "tcp", "shm-rings": "shm"}.get(transport, transport)
        procs = start_world(3, "--transport", over,
                            "--mode", "loop", "--iters", "0", "--sizes", "4194304",
                            "--timeout-ms", "30000", *extra, env=env)
        lines = {0: [], 1: [], 2: []}
        # Wait for a few iterations on every rank.
        deadline = time.time() + 60
        while time.time() < deadline:
            line = procs[1].stdout.readline()
            if line.startswith("iter 3"):
                break
        check(time.time() < deadline, f"{transport}: rank 1 iterated")
        t0 = time.time()
        procs[1].send_signal(signal.SIGKILL)
        procs[1].wait()
        outs = finish([procs[0], procs[2]], 20)
        took = time.time() - t0
        for (rc, out), r in zip(outs, (0, 2)):
            check(rc == 3, f"{transport}: rank {r} stopped with the error code: {rc}\n{out[-1500:]}")
            check("error after" in out, f"{transport}: rank {r} said why:\n{out[-800:]}")
        check(took < 10, f"{transport}: the others failed within 10 s of the kill ({took:.1f} s)")
        print(f"  {transport}: the others failed {took:.2f} s after the kill", flush=True)
        errors = [o.splitlines()[-1] for _, o in outs]
        # The first to notice names the lost peer; a failed all-reduce then closes its
        # group's links, so the other may hear of it as a closed link to a survivor.
        lost = ("went away", "closed", "Connection reset", "Broken pipe")
        check(all(any(w in e for w in lost) for e in errors),
              f"{transport}: each error says a link was lost: {errors}")
    check(shm_entries() == before, f"/dev/shm unchanged after kill -9: {shm_entries() - before}")


def stopped_rank_times_out(c):
    """SIGSTOP of rank 1 (over shm in place and through the rings, and TCP): rank 0 and
    rank 2 fail with "timed out" after the transfer timeout (2 s here), not before and not
    never."""
    for transport in ("shm", "shm-rings", "tcp"):
        env = dict(os.environ, MONKEY_DP_CMA="0" if transport == "shm-rings" else "1")
        procs = start_world(3, "--transport", transport.split("-")[0], "--mode", "loop",
                            "--iters", "0", "--sizes", "262144", "--timeout-ms", "2000", env=env)
        _, took, errors = signal_rank_one(procs, signal.SIGSTOP, transport)
        check("timed out" in errors, f"{transport}: a rank timed out: {errors}")
        check(1.5 < took < 20, f"{transport}: after the 2 s timeout ({took:.1f} s)")
        print(f"  {transport}: timed out {took:.2f} s after SIGSTOP", flush=True)


def registered_buffers_in_place(c):
    """Tensors from the shared arena (--registered): 2, 3 and 4 ranks over shm all-reduce in
    place (the others' tensors read where they lie), every collective still equal to the
    ring-order reference up to 64 MB; a group where only the odd ranks registered reads the
    others' tensors by CMA (in place too), and without CMA (MONKEY_DP_CMA=0) takes the ring,
    with the same sums; kill -9 of a rank fails the others at once and SIGSTOP after the
    transfer timeout, as over the rings; nothing is left in /dev/shm."""
    before = shm_entries()
    for world, reg in ((2, "all"), (3, "all"), (4, "all"), (3, "odd"), (3, "odd-no-cma")):
        sizes = "1,2,7,1000,65537,1000003" + (",16777216" if world in (2, 4) else "")
        env = dict(os.environ, MONKEY_DP_CMA="0" if reg == "odd-no-cma" else "1")
        outs = finish(start_world(world, "--transport", "shm", "--sizes", sizes,
                                  "--registered", reg.split("-")[0], env=env), 300)
        for r, (rc, out) in enumerate(outs):
            check(rc == 0, f"world {world} {reg} rank {r} passed: rc {rc}\n{out[-2000:]}")
            check(out.count("ok rank") == len(sizes.split(",")),
                  f"world {world} {reg} rank {r} checked every size:\n{out[-2000:]}")
            done = [int(l.split(":")[1]) for l in out.splitlines()
                    if l.startswith("in-place all-reduces:")]
            check(len(done) == 1, f"rank {r} said how many went in place:\n{out[-500:]}")
            if reg != "odd-no-cma":
                # sum and mean of every size, and the group of ranks 1.. when world >= 3 (a
                # mixed group too: the ranks read the tensors outside the arenas by CMA)
                want = len(sizes.split(",")) * (3 if world >= 3 and r > 0 else 2)
                check(done[0] == want, f"world {world} {reg} rank {r}: {done[0]} of {want} in place")
            else:
                check(done[0] == 0, f"a mixed group without CMA took the ring: rank {r} did {done[0]}")
            # Point-to-point sends of registered tensors from 64 KB up go by reference
            # (the bytes still equal what was sent: check mode compares them).
            refs = [int(l.split(":")[1]) for l in out.splitlines()
                    if l.startswith("by-reference sends:")]
            check(len(refs) == 1, f"rank {r} said how many it sent by reference:\n{out[-500:]}")
            if reg == "all" or r % 2 == 1:  # (the others' go by address)
                check(refs[0] >= 2, f"world {world} {reg} rank {r}: {refs[0]} sends by reference")
            else:
                check(refs[0] == 0, f"rank {r} registered nothing: {refs[0]} by reference")
    for how in ("kill", "stop"):
        procs = start_world(3, "--transport", "shm", "--mode", "loop", "--iters", "0",
                            "--sizes", "1048576", "--registered", "all",
                            "--timeout-ms", "2000" if how == "stop" else "30000")
        _, took, errors = signal_rank_one(
            procs, signal.SIGKILL if how == "kill" else signal.SIGSTOP, f"registered, {how}")
        if how == "kill":
            check(took < 10, f"the others failed within 10 s of the kill ({took:.1f} s)")
            check(any(w in errors for w in ("went away", "closed")),
                  f"the errors say a link was lost: {errors}")
        else:
            check("timed out" in errors, f"a rank timed out: {errors}")
            check(1.5 < took < 20, f"after the 2 s timeout ({took:.1f} s)")
        print(f"  registered, {how}: the others failed {took:.2f} s after it: {errors[:300]}",
              flush=True)
    check(shm_entries() == before, f"/dev/shm unchanged: {shm_entries() - before}")


def rank_without_the_key_is_refused(c):
    """A process with another key cannot join: the connection is refused with the reason on
    both sides, and nobody hangs."""
    for transport in ("shm", "tcp"):
        procs = start_world(2, "--transport", transport, "--sizes", "10", "--connect-ms", "3000",
                            keys=["the-job-key", "a-guess"])
        outs = finish(procs, 60)
        check(all(rc != 0 for rc, _ in outs), f"{transport}: both failed: {outs}")
        check("does not know this attempt's key" in outs[0][1],
              f"{transport}: rank 0 says it was refused: {outs[0][1][-600:]}")


def tls_links(c):
    """TCP links wrapped in TLS (the node's certificates): bit-exact collectives over 3
    processes; a process whose certificate another CA signed cannot join."""
    certs = os.path.join(c.home, "certs")
    other = os.path.join(c.home, "other-certs")
    c.monkey("certs", "--dir", certs)
    c.monkey("certs", "--dir", other)
    outs = finish(start_world(3, "--transport", "tcp", "--tls-dir", certs, "--sizes",
                              "1,1000,1000003"), 120)
    for r, (rc, out) in enumerate(outs):
        check(rc == 0 and out.count("over tls") == 3, f"rank {r} over TLS: rc {rc}\n{out[-1500:]}")
    d = tempfile.mkdtemp(prefix="monkey-dp-")
    procs = [subprocess.Popen([DP, "--rank", str(r), "--world", "2", "--dir", d, "--transport",
                               "tcp", "--tls-dir", dirs, "--connect-ms", "3000", "--sizes", "10"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r, dirs in ((0, certs), (1, other))]
    outs = finish(procs, 60)
    check(all(rc != 0 for rc, _ in outs), f"the stranger's TLS link failed: {outs}")
    check("TLS handshake failed" in outs[0][1] or "TLS handshake failed" in outs[1][1],
          f"a side says the handshake failed: {outs}")





def rank_logs(c, job, world=4):
    return "\n".join(c.monkey("logs", job, "--rank", str(r), check_rc=False).stdout
                     for r in range(world))


def app_allreduce_across_nodes(c):
    """The allreduce app through the SDK: 4 ranks on two nodes (two app hosts, two ranks
    each) all-reduce 200,000 floats per step; every sum is exact on every rank; the hosts
    reach each other over shm (reading each other's memory by CMA, as the host logs), and
    over TCP when the job asks for it."""
    nodes_up(c, 2)
    for transport in ("auto", "tcp"):
        job = c.submit("--app", "allreduce", "--workers", "4", "--set", "elements=200000",
                       "--set", "steps=6", "--env", f"MONKEY_DP_TRANSPORT={transport}")
        s = c.wait_final(job, 120)
        check(s["state"] == "succeeded", f"{transport}: the job succeeded: {s}")
        check(len(s["attempts"][-1]["hosts"]) == 2, f"two hosts: {s['attempts'][-1]['hosts']}")
        bad = points(c, job, "mismatches")
        check(len(bad) == 4 * 6, f"{transport}: every rank checked every step: {len(bad)} points")
        check(all(p["value"] == 0 for p in bad), f"{transport}: no element differs: {bad}")
        logs = rank_logs(c, job)
        want = "over shm" if transport == "auto" else "over tcp"
        check(want in logs and "over local" in logs,
              f"{transport}: ranks of two hosts use {want}, ranks of one host local:\n{logs[-1500:]}")
        if transport == "auto":
            # The hosts (processes of one user on one machine) read each other's memory.
            err = c.monkey("logs", job, "--err", check_rc=False).stdout
            check("single-copy reads (CMA) on every shm link" in err,
                  f"the app host said its shm links read by CMA:\n{err[-1200:]}")


def app_allreduce_on_a_tls_cluster(c):
    """On a --tls cluster the app hosts' TCP links are TLS (the nodes' certificates), and a
    job that opts out (MONKEY_DP_TLS=off, a trusted fabric) gets plain keyed TCP."""
    certs = os.path.join(c.home, "certs")
    c.monkey("certs", "--dir", certs)
    c.env["MONKEY_TLS_DIR"] = certs
    c.start("n1", "--cpus", "2", "--tls", "--tls-dir", certs)
    c.start("n2", "--cpus", "2", "--tls", "--tls-dir", certs, "--join", c.nodes["n1"]["address"])
    wait_until(lambda: len(json.loads(c.monkey("nodes", "--json").stdout)) == 2, 30, "2 members")
    for tls, want in (("on", "over tls"), ("off", "over tcp")):
        job = c.submit("--app", "allreduce", "--workers", "4", "--set", "elements=100000",
                       "--set", "steps=4", "--env", "MONKEY_DP_TRANSPORT=tcp",
                       "--env", f"MONKEY_DP_TLS={tls}")
        s = c.wait_final(job, 120)
        check(s["state"] == "succeeded", f"TLS {tls}: the job succeeded: {s}")
        check(all(p["value"] == 0 for p in points(c, job, "mismatches")), f"TLS {tls}: exact sums")
        logs = rank_logs(c, job)
        check(want in logs, f"TLS {tls}: the hosts' ranks reach each other {want}:\n{logs[-1200:]}")


def app_nccl_refused_the_same_on_every_rank(c):
    """NCCL from the SDK where it cannot run (ranks given no GPU, a build without NCCL):
    gpu_join gives every rank of the gang the same refusal, naming how many ranks could not
    and why; with device=auto the app then all-reduces host memory (exact sums), with
    device=cuda the job fails naming the reason, never hanging. The ranks' other collectives
    keep their order around the join's own."""
    nodes_up(c, 2)
    job = c.submit("--app", "allreduce", "--workers", "3", "--set", "elements=5000",
                   "--set", "steps=3")
    s = c.wait_final(job, 120)
    check(s["state"] == "succeeded", f"device=auto: the job succeeded: {s}")
    bad = points(c, job, "mismatches")
    check(len(bad) == 3 * 3 and all(p["value"] == 0 for p in bad), f"exact sums: {bad}")
    for r in range(3):
        log = c.monkey("logs", job, "--rank", str(r)).stdout
        check("all-reduces host memory over the data plane: NCCL cannot run on 3 of the "
              "group's 3 ranks (rank " + str(r) + ": " in log,
              f"rank {r} says why NCCL is not used:\n{log[-1200:]}")
    job = c.submit("--app", "allreduce", "--workers", "3", "--set", "elements=5000",
                   "--set", "steps=3", "--set", "device=cuda", "--max-requeues", "0")
    s = c.wait_final(job, 120)
    # A failed rank stops the gang (the gang policy; no requeue left: lost).
    check(s["state"] in ("failed", "lost"), f"device=cuda without GPUs: the job ended: {s}")
    said = s["attempts"][-1].get("cause", "") + rank_logs(c, job, 3) + \
        c.monkey("logs", job, "--err", check_rc=False).stdout
    check("device=cuda, but NCCL cannot run on 3 of the group's 3 ranks" in said,
          f"the failure names the reason:\n{said[-1500:]}")


def app_allreduce_resumes_after_kill9(c):
    """kill -9 of a node hosting ranks of a running allreduce gang (not the owner): the
    surviving hosts' all-reduce fails at once, the owner starts the gang again, and the new
    attempt resumes from the checkpointed weights, which it finds exact (resume_ok)."""
    nodes_up(c, 3)
    job = c.submit("--app", "allreduce", "--workers", "4", "--set", "elements=100000",
                   "--set", "steps=40", "--set", "step_ms=150", "--set", "checkpoint_every=5",
                   "--max-requeues", "3")
    s = wait_until(lambda: (lambda s: s if s["state"] == "running"
                            and any(p["step"] >= 14 for p in points(c, job, "mismatches"))
                            else None)(c.show(job)), 90, "the gang to pass step 14")
    kill9_a_part_host(c, s)
    s = c.wait_final(job, 180)
    check(s["state"] == "succeeded" and len(s["attempts"]) >= 2,
          f"the gang finished in a new attempt after losing a node: {s}")
    resumed = points(c, job, "resumed_at")
    ok = points(c, job, "resume_ok")
    check(resumed and resumed[-1]["value"] >= 10, f"resumed past 0: {resumed}")
    check(ok and all(p["value"] == 1 for p in ok), f"the restored weights were exact: {ok}")
    last = s["attempts"][-1]
    check(last.get("resumed_step", -1) == resumed[-1]["value"],
          f"the attempt's record says where the gang resumed: {last}")
    check(all(p["value"] == 0 for p in points(c, job, "mismatches")), "no sum differed")


if __name__ == "__main__":
    run(collectives_equal_the_reference, killed_rank_fails_the_others_at_once,
        stopped_rank_times_out, registered_buffers_in_place, rank_without_the_key_is_refused,
        tls_links,
        app_allreduce_across_nodes, app_allreduce_on_a_tls_cluster,
        app_nccl_refused_the_same_on_every_rank, app_allreduce_resumes_after_kill9)
