#!/usr/bin/env python3
"""/metrics of the real server process, on cpp-httplib (issue 24, points 10 and 17, and the
smaller item on how its requests were parsed). Usage: server_metrics_test.py MODE SERVER

  http  plain HTTP: 12 silent connections and 2 clients sending a byte a second do not hold it
        (a scrape beside them answers within 1 s; the old single-threaded loop took 2 s a
        silent connection), nor do 40 silent ones, more than its threads (within 3 s); a request
        line without the HTTP version is 400 (it was 200 by prefix match), a request split over
        two writes is 200 (it was 404), other paths 404, other methods 405, headers past the
        limit refused, two requests on one keep-alive connection answered, and SIGTERM with all
        of that held still exits 0 promptly.
  auth  --metrics-require-token (twin FLASHSERVE_METRICS_REQUIRE_TOKEN): 401 without the token or
        with a wrong one, 200 with it or any other token gRPC takes (a token file's tenants, the
        admin's); open by default, even when gRPC needs the token; refused at start without one.
  tls   --metrics-tls (twin FLASHSERVE_METRICS_TLS): HTTPS with --tls-cert/--tls-key, plain HTTP
        not served there, with the token too; plain HTTP by default when only gRPC has TLS;
        refused at start without the pair; silent connections do not hold it either.

Prints each failed check and "N passed, N failed"; exits 1 when any failed ("skipped" without
openssl for tls).
"""
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

mode, server = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp()
passed = failed = 0


def check(what, ok):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAILED:", what, flush=True)


def start(args, env=None):
    """The server on free ports with ARGS: (process, metrics port, scheme), once it says ready."""
    out = open(os.path.join(tmp, "out"), "w+")
    err = open(os.path.join(tmp, "err"), "w+")
    p = subprocess.Popen([server, "--port", "0", "--metrics-port", "0", "--http-port", "-1"] + args, stdout=out, stderr=err,
                         env=dict(os.environ, **(env or {})))
    text = ""
    for _ in range(400):
        out.seek(0)
        text = out.read()
        if re.search(r"^ready$", text, re.M) or p.poll() is not None:
            break
        time.sleep(0.025)
    m = re.search(r"metrics on (https?)://127\.0\.0\.1:(\d+)/metrics", text)
    return p, (int(m.group(2)) if m else 0), (m.group(1) if m else "")


def refused(args, env, needle, what):
    """ARGS refused at start: exit 1, never listening, NEEDLE on stderr."""
    err = os.path.join(tmp, "err")
    with open(os.path.join(tmp, "out"), "w") as out, open(err, "w") as e:
        rc = subprocess.run([server, "--port", "0", "--metrics-port", "0", "--http-port", "-1"] + args, stdout=out, stderr=e,
                            env=dict(os.environ, **env), timeout=20).returncode
    text = open(err).read()
    check(f"{what}: exit 1 (rc {rc})", rc == 1)
    check(f"{what}: says '{needle}' (stderr: {text.strip()[-300:]!r})", needle in text)


def stop(p, within=5.0):
    """SIGTERM: (exit status, seconds it took); killed and -9 past WITHIN."""
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(within)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        rc = -9
    took = time.monotonic() - t0
    report = re.search(r"ERROR: (Address|Leak)Sanitizer|runtime error:|UndefinedBehaviorSanitizer",
                       open(os.path.join(tmp, "err")).read())
    check(f"no sanitizer report ({report.group(0) if report else ''})", report is None)
    return rc, took


def exchange(port, chunks, pause=0.0, timeout=3.0, tls=None):
    """Sends CHUNKS (PAUSE seconds apart) on one connection, reads until the server closes it or
    TIMEOUT: (the bytes, seconds taken, whether it timed out)."""
    t0 = time.monotonic()
    data, timed_out = b"", False
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        if tls is not None:
            s = tls.wrap_socket(s, server_hostname="127.0.0.1")
        for i, c in enumerate(chunks):
            if i and pause:
                time.sleep(pause)
            s.sendall(c)
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except socket.timeout:
        timed_out = True
    except (OSError, ssl.SSLError):
        pass
    return data, time.monotonic() - t0, timed_out


def status(data):
    m = re.match(rb"HTTP/1\.[01] (\d{3}) ", data)
    return int(m.group(1)) if m else 0


GET = b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
SERIES = b"vllm:num_requests_running"


def scrape_ok(port, what, within, tls=None, headers=b""):
    req = GET if not headers else GET.replace(b"Host: x\r\n", b"Host: x\r\n" + headers)
    data, took, timed_out = exchange(port, [req], timeout=max(3.0, within + 2), tls=tls)
    check(f"{what}: 200 with the series (got {data[:60]!r}{', timed out' if timed_out else ''})",
          status(data) == 200 and SERIES in data)
    check(f"{what}: answered within {within} s (took {took:.2f} s)", took < within)


class Hold:
    """N silent connections and SLOW clients that send a request's bytes one a second."""

    def __init__(self, port, silent, slow, tls=None):
        self.socks, self.stop, self.threads = [], threading.Event(), []
        for _ in range(silent):
            try:
                self.socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            except OSError:
                pass  # not accepted (the old loop's backlog)
        for _ in range(slow):
            t = threading.Thread(target=self.trickle, args=(port,), daemon=True)
            t.start()
            self.threads.append(t)
        time.sleep(0.3)  # every connection accepted and its first byte (if any) sent

    def trickle(self, port):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            for i, b in enumerate(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100):
                if self.stop.wait(1.0 if i else 0):
                    break
                s.send(bytes([b]))
            s.close()
        except OSError:
            pass  # closed by the server: its request took too long

    def close(self):
        self.stop.set()
        for s in self.socks:
            s.close()
        for t in self.threads:
            t.join()


def mode_http():
    p, port, _ = start([])
    check("started with a metrics port", port > 0)
    if port == 0:
        p.kill()
        return
    scrape_ok(port, "a scrape", 2.0)

    hold = Hold(port, silent=12, slow=2)
    scrape_ok(port, "beside 12 silent connections and 2 byte-a-second clients", 2.0)
    scrape_ok(port, "again beside them", 2.0)
    hold.close()
    hold = Hold(port, silent=40, slow=0)
    scrape_ok(port, "beside 40 silent connections (more than the threads)", 3.0)
    hold.close()

    data, _, _ = exchange(port, [b"GET /metrics\r\n\r\n"])
    check(f"a request line without the HTTP version: 400 (got {data[:40]!r})", status(data) == 400)
    data, _, _ = exchange(port, [b"GET /met", b"rics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"], pause=0.2)
    check(f"a request split in its line over two writes: 200 (got {data[:40]!r})",
          status(data) == 200 and SERIES in data)
    data, _, _ = exchange(port, [b"GET /metrics HTTP/1.1\r\nHo", b"st: x\r\nConnection: close\r\n\r\n"], pause=0.2)
    check(f"a request split in its headers: 200 (got {data[:40]!r})", status(data) == 200 and SERIES in data)
    for path in (b"/", b"/metricsx", b"/metrics/x", b"/v1/models"):
        data, _, _ = exchange(port, [b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"])
        check(f"GET {path.decode()}: 404 (got {data[:40]!r})", status(data) == 404)
    for method in (b"POST", b"PUT", b"DELETE"):
        data, _, _ = exchange(port, [method + b" /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                                     b"Connection: close\r\n\r\n"])
        check(f"{method.decode()} /metrics: 405 with Allow (got {data[:60]!r})",
              status(data) == 405 and re.search(rb"\r\nAllow: [A-Z, ]*GET", data) is not None)
    data, _, _ = exchange(port, [b"HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"])
    check(f"HEAD /metrics: 200 without a body (got {data[:40]!r})", status(data) == 200 and SERIES not in data)
    big = b"".join(b"X-Pad-%d: %s\r\n" % (i, b"a" * 1000) for i in range(20))
    data, _, timed_out = exchange(port, [b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + big + b"\r\n"])
    check(f"20 KB of headers: refused and closed (got {data[:40]!r})",
          status(data) in (400, 431) and not timed_out)
    data, _, timed_out = exchange(port, [b"GET /metrics?" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"])
    check(f"a 20 KB request line: refused and closed (got {data[:40]!r})",
          status(data) in (414, 431) and not timed_out)
    data, _, _ = exchange(port, [b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" + GET])
    check("two requests on one keep-alive connection: both answered",
          data.count(b"HTTP/1.1 200 OK") == 2 and data.count(b"\n" + SERIES + b" ") == 2)
    check("Keep-Alive bounded in the response", re.search(rb"Keep-Alive: timeout=\d+, max=\d+", data) is not None)

    hold = Hold(port, silent=12, slow=2)
    rc, took = stop(p)
    hold.close()
    check(f"SIGTERM with 12 silent and 2 slow connections held: exit 0 (rc {rc})", rc == 0)
    check(f"... within 4 s (took {took:.2f} s)", took < 4.0)


def mode_auth():
    token = {"FLASHSERVE_AUTH_TOKEN": "s3cret"}
    p, port, _ = start([], token)
    scrape_ok(port, "with a gRPC token but no --metrics-require-token (open, the default)", 2.0)
    stop(p)

    for what, args, env in (("--metrics-require-token", ["--metrics-require-token"], token),
                            ("FLASHSERVE_METRICS_REQUIRE_TOKEN=1", [],
                             dict(token, FLASHSERVE_METRICS_REQUIRE_TOKEN="1"))):
        p, port, _ = start(args, env)
        check(f"{what}: started", port > 0)
        data, _, _ = exchange(port, [GET])
        check(f"{what}: no token is 401 with WWW-Authenticate (got {data[:40]!r})",
              status(data) == 401 and b"WWW-Authenticate: Bearer" in data and SERIES not in data)
        for bad in (b"Bearer wrong", b"Bearer s3cre", b"Bearer s3cret2", b"s3cret", b"Basic czNjcmV0"):
            data, _, _ = exchange(port, [GET.replace(b"Host: x\r\n", b"Host: x\r\nAuthorization: " + bad + b"\r\n")])
            check(f"{what}: 'Authorization: {bad.decode()}' is 401 (got {data[:40]!r})",
                  status(data) == 401 and SERIES not in data)
        scrape_ok(port, f"{what}: the token", 2.0, headers=b"Authorization: Bearer s3cret\r\n")
        scrape_ok(port, f"{what}: the token, header name in lower case", 2.0, headers=b"authorization: Bearer s3cret\r\n")
        data, _, _ = exchange(port, [b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"])
        check(f"{what}: an unknown path is still 404 (got {data[:40]!r})", status(data) == 404)
        rc, _ = stop(p)
        check(f"{what}: SIGTERM exits 0 (rc {rc})", rc == 0)

    # Every token gRPC takes: each tenant's of a token file, and the admin's.
    tokens, admin = os.path.join(tmp, "tokens"), os.path.join(tmp, "admin")
    open(tokens, "w").write("first\nsecond\n")
    open(admin, "w").write("boss\n")
    p, port, _ = start(["--metrics-require-token", "--auth-token-file", tokens, "--admin-token-file", admin])
    for t in (b"first", b"second", b"boss"):
        scrape_ok(port, f"a token file's token '{t.decode()}'", 2.0, headers=b"Authorization: Bearer " + t + b"\r\n")
    data, _, _ = exchange(port, [GET.replace(b"Host: x\r\n", b"Host: x\r\nAuthorization: Bearer firstsecond\r\n")])
    check(f"a token file: another token is 401 (got {data[:40]!r})", status(data) == 401)
    stop(p)

    refused(["--metrics-require-token"], {"FLASHSERVE_AUTH_TOKEN": ""}, "--metrics-require-token needs a bearer token",
            "--metrics-require-token without a token")


def mode_tls():
    if shutil.which("openssl") is None:
        print("no openssl to make a certificate: skipped")
        sys.exit(0)
    cert, key = os.path.join(tmp, "a.crt"), os.path.join(tmp, "a.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    ctx = ssl.create_default_context(cafile=cert)  # verifies the chain and the IP in the name
    pair = ["--tls-cert", cert, "--tls-key", key]

    p, port, scheme = start(pair)
    check(f"gRPC TLS alone: /metrics stays plain HTTP, the default (says {scheme!r})", scheme == "http")
    scrape_ok(port, "gRPC TLS alone: a plain scrape", 2.0)
    stop(p)

    for what, args, env in (("--metrics-tls", pair + ["--metrics-tls"], {}),
                            ("FLASHSERVE_METRICS_TLS=1", [], {"FLASHSERVE_TLS_CERT": cert, "FLASHSERVE_TLS_KEY": key,
                                                              "FLASHSERVE_METRICS_TLS": "1"})):
        p, port, scheme = start(args, env)
        check(f"{what}: says https (says {scheme!r})", scheme == "https")
        scrape_ok(port, f"{what}: an HTTPS scrape", 2.0, tls=ctx)
        data, _, _ = exchange(port, [GET])
        check(f"{what}: plain HTTP is not served (got {data[:40]!r})", b"HTTP/1.1 200" not in data and SERIES not in data)
        hold = Hold(port, silent=12, slow=2)
        scrape_ok(port, f"{what}: beside 12 silent and 2 byte-a-second connections", 2.0, tls=ctx)
        hold.close()
        rc, took = stop(p)
        check(f"{what}: SIGTERM exits 0 promptly (rc {rc}, {took:.2f} s)", rc == 0 and took < 4.0)

    p, port, scheme = start(pair + ["--metrics-tls", "--metrics-require-token"], {"FLASHSERVE_AUTH_TOKEN": "s3cret"})
    data, _, _ = exchange(port, [GET], tls=ctx)
    check(f"TLS and the token: none is 401 (got {data[:40]!r})", status(data) == 401)
    scrape_ok(port, "TLS and the token: the token", 2.0, tls=ctx, headers=b"Authorization: Bearer s3cret\r\n")
    stop(p)

    refused(["--metrics-tls"], {}, "--metrics-tls serves /metrics over HTTPS with --tls-cert and --tls-key",
            "--metrics-tls without a certificate")


try:
    {"http": mode_http, "auth": mode_auth, "tls": mode_tls}[mode]()
finally:
    shutil.rmtree(tmp, ignore_errors=True)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
