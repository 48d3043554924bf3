# SPDX-License-Identifier: Apache-2.0
"""What reaches the runtime's port that is not Monkey: raw garbage, a header announcing an
oversized payload, half-open connections that never speak, a flood of idle connections.
The node must stay up and keep answering real clients, and accept jobs afterwards."""
import os
import socket
import struct
import time

from harness import check, run


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.settimeout(2)
    return s


def answers(c):
    """The node answers a real client at the first try."""
    r = c.monkey("--timeout", "10", "status", check_rc=False, timeout=60)
    check(r.returncode == 0 and "this node:" in r.stdout,
          f"a client is answered: rc {r.returncode}, {r.stderr.strip()!r}")
    return True


def peak_rss_mb(proc):
    with open(f"/proc/{proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    return -1


def basp_header(op, payload_len, operation_data=0, source=0, dest=0):
    """CAF 0.17's BASP header: operation, two padding bytes, flags, payload length,
    operation data, source and destination actor, in network byte order (32 bytes)."""
    return struct.pack("!BBBBIQQQ", op, 0, 0, 0, payload_len, operation_data, source, dest)


def garbage_and_oversized(c):
    node = c.start("n1")
    port = node["port"]
    proc = node["proc"]
    # 1. Random bytes, then close.
    for size in (1, 16, 4096, 1 << 20):
        s = connect(port)
        try:
            s.sendall(os.urandom(size))
        except OSError:
            pass  # the node may close first: fine
        s.close()
    time.sleep(0.3)
    check(proc.poll() is None and answers(c), "the node survives random bytes")
    # 2. Headers that announce a huge payload (every length field at its maximum), then
    #    nothing, or a trickle.
    for fill in (b"\xff", b"\x7f", b"\x00"):
        s = connect(port)
        try:
            s.sendall(fill * 64 + struct.pack("!I", 0xFFFFFFF0) * 8)
            s.sendall(b"\x00" * 1024)
        except OSError:
            pass
        time.sleep(0.2)
        s.close()
    time.sleep(0.3)
    check(proc.poll() is None and answers(c), "the node survives oversized headers")
    # 2b. Well-formed BASP headers that announce a payload of almost 4 GiB: a client
    #     handshake (the first message a connection may send) and a direct message. CAF
    #     alone would allocate and zero the whole payload before a byte of it arrives; the
    #     node closes such a connection at once, without the sender closing it.
    for hdr in (basp_header(1, 0xFFFFFFF0), basp_header(2, 0xFFFFFFF0, dest=1),
                basp_header(1, 70 * 1024 * 1024)):
        s = connect(port)
        s.settimeout(5)
        try:
            s.sendall(hdr)
            closed = False
            t0 = time.time()
            while time.time() - t0 < 5:
                data = s.recv(65536)  # the node's handshake first, then the end
                if not data:
                    closed = True
                    break
        except (ConnectionResetError, socket.timeout, OSError) as e:
            closed = not isinstance(e, socket.timeout)
        s.close()
        check(closed, f"the node closes a connection whose header announces "
                      f"{struct.unpack('!I', hdr[4:8])[0]} bytes")
    rss = peak_rss_mb(proc)
    check(0 < rss < 1024, f"the node never held the announced payloads: peak RSS {rss} MB")
    check(proc.poll() is None and answers(c), "the node survives announced huge payloads")
    log = open(os.path.join(node["data"], "runtime.log")).read()
    check("announces 4294967280 bytes, more than the 65536 allowed before the handshake" in log,
          "the node logs the refused connection and why")
    # 3. Half-open connections that never speak, and a flood of idle ones, held open while
    #    a real client works.
    idle = []
    for _ in range(200):
        try:
            idle.append(connect(port))
        except OSError:
            break
    check(len(idle) >= 100, f"the node accepts connections: {len(idle)}")
    check(answers(c), "a real client is answered while 200 idle connections are open")
    jid = c.submit("--", "true")
    check(c.wait_final(jid, timeout=60)["state"] == "succeeded", "jobs still run")
    for s in idle:
        s.close()
    time.sleep(0.5)
    check(proc.poll() is None and answers(c), "the node is up after the idle connections close")


if __name__ == "__main__":
    run(garbage_and_oversized)
