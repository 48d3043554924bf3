# SPDX-License-Identifier: Apache-2.0
"""TLS end to end: `monkey certs`, a 3-node `monkey up --tls` cluster whose jobs run across
all nodes, kill -9 detection over TLS, the port speaking TLS that demands a client
certificate (checked with Python's ssl module, a client independent of CAF), a plain
client and a client or node with another CA's certificate refused with a clear message,
and a node built for another protocol version refused at CAF's handshake."""
import json
import os
import signal
import socket
import ssl

from harness import check, refused_joiner, run, wait_until


def members(c, address, env=None):
    r = c.monkey("nodes", "--json", "--address", address, check_rc=False, env=env)
    if r.returncode != 0:
        return None
    return {m["pid"]: m for m in json.loads(r.stdout)}


def tls_cluster(c):
    r = c.monkey("certs")
    certs = os.path.join(c.home, "certs")
    for f in ("ca.pem", "ca.key", "node.pem", "node.key", "client.pem", "client.key"):
        check(os.path.exists(os.path.join(certs, f)), f"monkey certs wrote {f}: {r.stdout}")
    check(os.stat(os.path.join(certs, "node.key")).st_mode & 0o077 == 0, "keys are 0600")
    nodes = json.loads(c.monkey("up", "3", "--tls", "--no-measure", "--json",
                                timeout=120).stdout)["nodes"]
    pids = [n["pid"] for n in nodes]
    for n in nodes:
        ms = members(c, n["address"])
        check(ms is not None and sorted(ms) == sorted(pids), f"{n['name']} sees all 3: {ms}")
    for n in nodes:
        text = open(os.path.join(n["data_dir"], "runtime.log")).read()
        check("TLS as node" in text, f"{n['name']} says it runs TLS")

    # The port speaks TLS 1.2+ with our CA and demands a client certificate.
    host, port = nodes[0]["address"].rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=os.path.join(certs, "ca.pem"))
    ctx.check_hostname = False
    with socket.create_connection((host, int(port)), timeout=10) as s:
        try:
            with ctx.wrap_socket(s) as t:
                t.sendall(b"\0" * 8)
                data = t.recv(64)
                check(not data, f"no data for a client without a certificate: {data!r}")
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError) as e:
            # The alert "certificate required", or (a race with the close that follows
            # it) an EOF or a reset: refused either way, with no data.
            check("certificate" in str(e).lower() or isinstance(
                e, (ssl.SSLEOFError, ConnectionResetError, BrokenPipeError)),
                  f"refused for lack of a client certificate: {e}")
    ctx.load_cert_chain(os.path.join(certs, "client.pem"), os.path.join(certs, "client.key"))
    with socket.create_connection((host, int(port)), timeout=10) as s:
        with ctx.wrap_socket(s) as t:
            check(t.version() in ("TLSv1.2", "TLSv1.3"), f"TLS version {t.version()}")
            peer = t.getpeercert()
            check(dict(x[0] for x in peer["subject"]).get("commonName") == "node",
                  f"the node presents its certificate: {peer}")

    # Plain bytes and a half-open connection on the TLS port: the handshake fails on that
    # connection only (OpenSSL errors left behind must not close the healthy ones).
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n" + os.urandom(4096))
        try:
            s.recv(64)
        except OSError:
            pass
    half = socket.create_connection((host, int(port)), timeout=10)
    half.sendall(b"\x16\x03\x01")

    # Jobs submitted to each node run across all, over TLS.
    jobs = []
    for n in nodes:
        for _ in range(3):
            out = c.monkey("submit", "--address", n["address"], "--", "sleep", "1").stdout
            jobs.append(out.strip().splitlines()[-1])
    js = wait_until(lambda: (lambda js: js if len(js) == 9 and all(
        j["state"] == "succeeded" for j in js) else None)(
            json.loads(c.monkey("jobs", "--json").stdout)), 120, "the 9 jobs to succeed")
    check(sorted(j["id"] for j in js) == sorted(jobs), "one row per job")
    check(len({j["ran_on"] for j in js}) >= 2, f"jobs ran on several nodes: {js}")
    half.close()
    for n in nodes:
        ms = members(c, n["address"])
        check(ms is not None and all(m["state"] == "alive" for m in ms.values()),
              f"{n['name']} still sees every node alive after the garbage: {ms}")

    # A plain client is refused with a sentence that names TLS.
    env = dict(c.env)
    os.unlink(os.path.join(c.home, "cluster.tls"))
    r = c.monkey("nodes", "--address", nodes[0]["address"], check_rc=False, env=env)
    check(r.returncode != 0 and "--tls" in r.stderr, f"a plain client is told: {r.stderr}")
    # A client with another CA's certificate is refused.
    other = os.path.join(c.home, "other-ca")
    c.monkey("certs", "--dir", other)
    r = c.monkey("nodes", "--address", nodes[0]["address"], "--tls-dir", other,
                 check_rc=False)
    check(r.returncode != 0 and "TLS handshake" in r.stderr and "CA" in r.stderr,
          f"another CA's client is refused: {r.stderr}")
    # With the right certificates it works again (explicit --tls-dir).
    r = c.monkey("nodes", "--address", nodes[0]["address"], "--tls-dir", certs)
    check("alive: 3" in r.stdout, f"the right certificates get in: {r.stdout}")

    # A node with another CA's certificate cannot join, and the cluster stays up.
    pid, text = refused_joiner(c, "intruder", ["--tls-dir", other, "--join",
                                               nodes[0]["address"]])
    check("TLS handshake" in text, f"the refusal names TLS: {text[-800:]}")
    ms = members(c, nodes[0]["address"], env=dict(c.env, MONKEY_TLS_DIR=certs))
    check(ms is not None and pid not in ms and len(ms) == 3,
          f"the intruder is not a member: {ms}")

    # kill -9 over TLS: confirmed dead by a refused connection; its jobs are not lost.
    tls_env = dict(c.env, MONKEY_TLS_DIR=certs)
    os.kill(nodes[2]["pid"], signal.SIGKILL)
    m = wait_until(lambda: (lambda ms: ms.get(nodes[2]["pid"]) if ms and ms.get(
        nodes[2]["pid"], {}).get("state") == "dead" else None)(
            members(c, nodes[0]["address"], env=tls_env)), 20, "n3 declared dead")
    check("refused" in m["reason"], f"confirmed by a refused connection: {m}")
    c.monkey("down", env=tls_env, timeout=120)


def version_mismatch(c):
    nodes = json.loads(c.monkey("up", "1", "--no-measure", "--json", timeout=120).stdout)["nodes"]
    env = dict(c.env, MONKEY_TEST_PROTOCOL_VERSION="99")
    r = c.monkey("nodes", "--address", nodes[0]["address"], check_rc=False, env=env)
    check(r.returncode != 0 and "another Monkey protocol version" in r.stderr,
          f"a client of another version is told: {r.stderr}")
    pid, text = refused_joiner(c, "future", ["--join", nodes[0]["address"]], env=env)
    check("protocol version" in text, f"the refusal names the version: {text[-800:]}")
    ms = members(c, nodes[0]["address"])
    check(ms is not None and len(ms) == 1, f"not a member: {ms}")
    c.monkey("down", timeout=120)


if __name__ == "__main__":
    run(tls_cluster)
    run(version_mismatch)
