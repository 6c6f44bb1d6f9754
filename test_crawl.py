# Copyright (c) 2026 The crawl.py authors
# SPDX-License-Identifier: MIT
"""Tests for crawl.py. Run: python -m unittest -v test_crawl

Every test serves its own pages from servers embedded here, on 127.0.0.1:
SiteServer (http.server, threaded, HTTP/1.1 keep-alive) for ordinary pages,
RawServer (plain sockets) for the malformed bytes real servers send. Nothing
touches the internet.
"""

import atexit
import collections
import contextlib
import errno
import gc
import gzip
import hashlib
import html
import http
import http.server
import io
import itertools
import json
import logging
import os
import random
import re
import select
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import tracemalloc
import types
import unittest
import urllib.parse
import warnings
import zlib
from unittest import mock

try:
    import resource
except ImportError:  # not on every platform; the EMFILE test is skipped then
    resource = None

import crawl

HERE = os.path.dirname(os.path.abspath(__file__))

# A self-signed certificate for 127.0.0.1, ::1 and localhost, valid until
# 2126, made once with:
#   openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes
#     -keyout key.pem -out cert.pem -days 36500 -subj "/CN=crawl.py test server"
#     -addext "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost"
#     -addext "basicConstraints=critical,CA:TRUE"
TEST_CERT = """\
-----BEGIN CERTIFICATE-----
MIIBxDCCAWqgAwIBAgIUEJYmxVXQY93+X9SMe43MAmSK8gQwCgYIKoZIzj0EAwIw
HzEdMBsGA1UEAwwUY3Jhd2wucHkgdGVzdCBzZXJ2ZXIwIBcNMjYxMTI5MTczMzI5
WhgPMjEyNjExMDUxNzMzMjlaMB8xHTAbBgNVBAMMFGNyYXdsLnB5IHRlc3Qgc2Vy
dmVyMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEXDmoIDOPZ1ukhURc/6P9fdCV
CSOCTYvsRgkBWq9mRJfhkhSeKNIfaF0yQHjYBHIApCyfd9MlLGlmYAoVZ4VKzKOB
gTB/MB0GA1UdDgQWBBQiR2Ujk6jgBU6xq5ismwiijDZR9jAfBgNVHSMEGDAWgBQi
R2Ujk6jgBU6xq5ismwiijDZR9jAsBgNVHREEJTAjhwR/AAABhxAAAAAAAAAAAAAA
AAAAAAABgglsb2NhbGhvc3QwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNI
ADBFAiEA1zs0g8taUpDTLevYciYlAnfNCdEO10wOdt/PxREELkcCIBe405D+cfJv
yty8scdGVc7In1e6eMvNzVOc5ZZMQtc2
-----END CERTIFICATE-----
"""
TEST_KEY = """\
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg1Crc3xDjOt/3eyL4
O1WqC1UGJa0ZvbhHFhUHQ2EWrn2hRANCAARcOaggM49nW6SFRFz/o/190JUJI4JN
i+xGCQFar2ZEl+GSFJ4o0h9oXTJAeNgEcgCkLJ930yUsaWZgChVnhUrM
-----END PRIVATE KEY-----
"""

# Another CA, which signed nothing the test servers present (made likewise,
# with -subj "/CN=crawl.py test other CA" and no subjectAltName).
OTHER_CA_CERT = """\
-----BEGIN CERTIFICATE-----
MIIBmTCCAT+gAwIBAgIUZgBUEYY0aq3jka4FkXXtZNIMyBgwCgYIKoZIzj0EAwIw
ITEfMB0GA1UEAwwWY3Jhd2wucHkgdGVzdCBvdGhlciBDQTAgFw0yNjEyMDExMzIx
MjVaGA8yMTI2MTEwNzEzMjEyNVowITEfMB0GA1UEAwwWY3Jhd2wucHkgdGVzdCBv
dGhlciBDQTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABEOJuDCa3RlaoPc/C2wu
g2DdNsxltHNPghNjirviguhT9S4WvNXQwFbTWwCGW1H39lwkVkhacsNjSPS0KBG/
PhKjUzBRMB0GA1UdDgQWBBTOBIxqtr/yHaaUNvnY8GYrwNI6TjAfBgNVHSMEGDAW
gBTOBIxqtr/yHaaUNvnY8GYrwNI6TjAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49
BAMCA0gAMEUCIBGg8gQYmxNWBKDtrl6b2Bcr2CRa/8ITC9H35xNYDBH0AiEA0+Zp
WdXfQdw+LGWJVaQTolfgRhTPptAHSs0HCqxz3jY=
-----END CERTIFICATE-----
"""

_CERT_DIR = tempfile.mkdtemp(prefix="crawl-test-cert-")
CERT_FILE = os.path.join(_CERT_DIR, "cert.pem")
KEY_FILE = os.path.join(_CERT_DIR, "key.pem")
with open(CERT_FILE, "w") as _f:
    _f.write(TEST_CERT)
with open(KEY_FILE, "w") as _f:
    _f.write(TEST_KEY)
OTHER_CA_FILE = os.path.join(_CERT_DIR, "other-ca.pem")
with open(OTHER_CA_FILE, "w") as _f:
    _f.write(OTHER_CA_CERT)


atexit.register(shutil.rmtree, _CERT_DIR, True)  # removed when the test run ends


# ---------------------------------------------------------------------------
# Test helpers: certificates, embedded servers, loops, runners
# ---------------------------------------------------------------------------
#
# Shared by every section: open_fds() and wait_for_fds() (file descriptors),
# refused_port(), wait_until(), run_cli() and run_main() (the command line in
# a subprocess or in this process), read_jsonl(); SiteServer and RawServer,
# made and closed through ServerTestCase.site/raw/scripted; LoopTestCase; and
# CrawlerTestCase.crawl_site() (crawl_one()) with assert_record().


def server_tls_context():
    """An SSLContext for the test servers, with the embedded certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(CERT_FILE, KEY_FILE)
    return context


def client_tls_context():
    """An SSLContext that trusts the embedded certificate (and verifies it)."""
    context = ssl.create_default_context(cafile=CERT_FILE)
    return context


# The descriptors of the sockets refused_port() keeps bound for a test.
_PORT_BLOCKERS = set()


def open_fds():
    """The set of this process's open file descriptors (Linux; as strings).
    Left out: refused_port()'s sockets, and entries that no longer open
    anything by the time they are checked (the descriptor that listed the
    directory, and the one Linux reserves for the next connection while
    another thread sits in accept()), so that two listings do not differ
    with nothing leaked."""
    fds = set()
    for name in os.listdir("/proc/self/fd"):
        if not os.path.exists(f"/proc/self/fd/{name}"):
            continue
        try:
            os.fstat(int(name))
        except OSError:
            continue
        fds.add(name)
    return fds - _PORT_BLOCKERS


def wait_for_fds(expected, timeout=10.0):
    """open_fds() once it equals expected (the embedded servers' threads close
    their ends a moment after the client), else, after timeout seconds of
    real time, the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        now = open_fds()
        if now == expected or time.monotonic() > deadline:
            return now
        time.sleep(0.01)


def describe_fds(fds):
    """Each descriptor with what it opens, for failure messages."""
    described = []
    for fd in sorted(fds, key=int):
        try:
            described.append(f"{fd} -> {os.readlink('/proc/self/fd/' + fd)}")
        except OSError:
            described.append(fd)
    return described


def refused_port(test):
    """A 127.0.0.1 port that refuses connections: a socket is bound to it and
    not listening, so no other process can take it while test runs; the
    socket is closed in test's cleanup."""
    blocker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    fd = str(blocker.fileno())
    _PORT_BLOCKERS.add(fd)

    def close():
        _PORT_BLOCKERS.discard(fd)
        blocker.close()

    test.addCleanup(close)
    blocker.bind(("127.0.0.1", 0))
    return blocker.getsockname()[1]


def wait_until(condition, timeout=10.0, what="the condition"):
    """Poll condition() until it is true; fail after timeout seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


CRAWL_PY = os.path.join(HERE, "crawl.py")

# The command line in a subprocess imports crawl instead of running the file
# as a script, so that Python compiles it once per test run (into a cache
# folder of the run's own) instead of once per subprocess: 40 ms each.
# test_a_closed_stdout_pipe_is_not_a_traceback runs the file itself.
_PYCACHE = tempfile.mkdtemp(prefix="crawl-test-pycache-")
atexit.register(shutil.rmtree, _PYCACHE, True)
CLI_ENV = dict(os.environ, PYTHONPYCACHEPREFIX=_PYCACHE, PYTHONPATH=HERE)
CLI_ENV.pop("PYTHONDONTWRITEBYTECODE", None)


def crawl_command(*args):
    """The argv that runs crawl.py's command line with args (env=CLI_ENV)."""
    return [sys.executable, "-c", "import sys, crawl; sys.exit(crawl.main())"] + list(args)


def run_cli(*args, timeout=60, **options):
    """Run crawl.py's command line with args in a subprocess; returns the
    CompletedProcess (stdout and stderr as text)."""
    options.setdefault("env", CLI_ENV)
    return subprocess.run(crawl_command(*args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout,
                          **options)


def read_jsonl(path):
    """The records (dicts) of a JSON Lines file. Every line must parse and the
    last one must be whole (end with a newline). Split on "\\n" only, not
    str.splitlines(): U+2028 and the like may sit inside a JSON string."""
    with open(path, "rb") as file:
        text = file.read().decode("utf-8")
    if not text:
        return []
    if not text.endswith("\n"):
        raise AssertionError(f"the last JSON line is not whole: {text[-200:]!r}")
    return [json.loads(line) for line in text[:-1].split("\n")]


def run_main(argv):
    """crawl.main(argv) in this process, with stdout and stderr captured and
    the root logger restored after: (exit status, stdout, stderr)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    root_logger = logging.getLogger()
    saved = root_logger.handlers[:], root_logger.level
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                status = crawl.main(argv)
            except SystemExit as exit:
                status = exit.code
    finally:
        root_logger.handlers[:] = saved[0]
        root_logger.setLevel(saved[1])
    return status, stdout.getvalue(), stderr.getvalue()


def run_in_process(*args, timeout=None):
    """run_cli()'s result (returncode, stdout, stderr) for crawl.main(args)
    run in this process: for tests of what the command line does and
    prints rather than of the process itself, without the cost of starting
    Python. (timeout is accepted for symmetry and not needed.)"""
    status, stdout, stderr = run_main(list(args))
    return types.SimpleNamespace(returncode=status, stdout=stdout, stderr=stderr)


def has_ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
        return True
    except OSError:
        return False


class Page:
    """A canned response for SiteServer: status, headers [(name, value)], body."""

    def __init__(self, body=b"", status=200, headers=None, content_type="text/html; charset=utf-8"):
        self.body = body.encode("utf-8") if isinstance(body, str) else body
        self.status = status
        self.headers = list(headers or [])
        if content_type and not any(n.lower() == "content-type" for n, _ in self.headers):
            self.headers.append(("Content-Type", content_type))


def html_page(*links, extra=""):
    """An HTML page linking to each of links."""
    anchors = "\n".join(f'<a href="{link}">{link}</a>' for link in links)
    return Page(f"<!doctype html><html><head><title>t</title></head><body>{extra}\n{anchors}\n</body></html>")


def redirect(location, status=302):
    return Page(b"", status=status, headers=[("Location", location)], content_type=None)


def held_page(release, seconds=10):
    """A route that answers with an empty page once the threading.Event
    release is set (or after seconds)."""
    def held(handler):
        release.wait(seconds)
        return html_page()
    return held


# What a server thread sees when the client goes away mid-response.
EXPECTED_DISCONNECTS = (ConnectionError, ssl.SSLError, socket.timeout)


class SiteServer:
    """A threaded HTTP/1.1 server (http.server) on 127.0.0.1 serving routes.

    routes maps a request target ("/a?b=1", or the path alone) to a Page, or
    to a function(handler) that returns a Page (or None after writing the
    response itself). Unknown targets get 404. Records every request in
    ``requests`` as dicts (method, target, headers, connection, time), counts
    TCP connections and the peak number of requests in flight."""

    def __init__(self, routes=None, host="127.0.0.1", tls=False, protocol="HTTP/1.1"):
        self.routes = dict(routes or {})
        self.requests = []
        self.connections = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self.lock = threading.Lock()
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = protocol
            disable_nagle_algorithm = True  # http.server writes head and body apart

            def setup(self):
                super().setup()
                with site.lock:
                    site.connections += 1
                    self.connection_number = site.connections

            def log_message(self, *args):
                pass

            def do_GET(self):
                site._serve(self)

            def do_HEAD(self):
                site._serve(self, head=True)

        family = socket.AF_INET6 if ":" in host else socket.AF_INET

        class Server(http.server.ThreadingHTTPServer):
            address_family = family
            daemon_threads = True
            request_queue_size = 128

            def handle_error(self, request, client_address):
                # A client that resets or abandons a connection is what many
                # tests do on purpose; anything else is still printed.
                if not isinstance(sys.exc_info()[1], EXPECTED_DISCONNECTS):
                    super().handle_error(request, client_address)

        self.server = Server((host, 0), Handler)
        if tls:
            self.server.socket = server_tls_context().wrap_socket(self.server.socket, server_side=True)
        self.host = host
        self.port = self.server.server_address[1]
        self.scheme = "https" if tls else "http"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.005,), daemon=True)
        self.thread.start()

    @property
    def origin(self):
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def url(self, target="/"):
        return self.origin + target

    def _serve(self, handler, head=False):
        with self.lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            self.requests.append({"method": handler.command, "target": handler.path,
                                  "headers": dict(handler.headers.items()),
                                  "connection": handler.connection_number,
                                  "time": time.monotonic()})
        try:
            route = self.routes.get(handler.path)
            if route is None:
                route = self.routes.get(handler.path.split("?")[0])
            page = route(handler) if callable(route) else route
            if route is None:
                page = Page("not found", status=404, content_type="text/plain")
            if page is not None:
                handler.send_response(page.status)
                for name, value in page.headers:
                    handler.send_header(name, value)
                handler.send_header("Content-Length", str(len(page.body)))
                handler.end_headers()
                if not head:
                    handler.wfile.write(page.body)
        finally:
            with self.lock:
                self.in_flight -= 1

    def targets(self, method="GET"):
        """Request targets received, in order."""
        with self.lock:
            return [r["target"] for r in self.requests if r["method"] == method]

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class RawConnection:
    """One accepted connection of a RawServer, for scripts to drive."""

    def __init__(self, sock, number):
        self.sock = sock
        self.number = number
        self.buffer = b""

    def read_request(self, timeout=5):
        """The next request head (bytes, up to the blank line), or None when
        the client closed."""
        self.sock.settimeout(timeout)
        while b"\r\n\r\n" not in self.buffer:
            try:
                data = self.sock.recv(65536)
            except (OSError, socket.timeout):
                return None
            if not data:
                return None
            self.buffer += data
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        return head + b"\r\n\r\n"

    @staticmethod
    def target(request):
        return request.split(b"\r\n", 1)[0].split(b" ")[1].decode("latin-1")

    def send(self, data):
        self.sock.sendall(data)

    def send_slowly(self, data, pieces=None, delay=0.0):
        """Send data in pieces (default: one byte at a time)."""
        step = 1 if pieces is None else max(1, len(data) // pieces)
        for i in range(0, len(data), step):
            self.sock.sendall(data[i:i + step])
            if delay:
                time.sleep(delay)

    def reset(self):
        """Close with a TCP RST instead of a FIN."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        self.sock.close()

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


class RawServer:
    """A TCP server whose every connection runs script(RawConnection) in a
    thread: the script reads requests and writes whatever bytes it likes.

    ``RawServer.responses({target: bytes or function(conn, request)})``
    builds the common script: answer each request with the bytes for its
    target and keep the connection open for the next one; close_after
    closes after each response."""

    def __init__(self, script, host="127.0.0.1", tls=False):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.listener = socket.socket(family, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((host, 0))
        self.listener.listen(128)
        self.host = host
        self.port = self.listener.getsockname()[1]
        self.script = script
        self.tls_context = server_tls_context() if tls else None
        self.scheme = "https" if tls else "http"
        self.connections = 0
        self.targets = []  # request targets seen by responses() scripts
        self.lock = threading.Lock()
        self.closing = False
        self.threads = []
        self.socks = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @classmethod
    def responses(cls, table, close_after=False, **options):
        server = None

        def script(conn):
            while True:
                request = conn.read_request()
                if request is None:
                    return
                target = conn.target(request)
                with server.lock:
                    server.targets.append(target)
                answer = table.get(target, table.get(target.split("?")[0]))
                if answer is None:
                    answer = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
                if callable(answer):
                    if answer(conn, request) == "closed":
                        return
                else:
                    conn.send(answer)
                if close_after:
                    conn.close()
                    return

        server = cls(script, **options)
        return server

    def _accept(self):
        while not self.closing:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
                number = self.connections
                self.socks.append(sock)
            thread = threading.Thread(target=self._run, args=(sock, number), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _run(self, sock, number):
        try:
            if self.tls_context is not None:
                sock = self.tls_context.wrap_socket(sock, server_side=True)
            conn = RawConnection(sock, number)
            self.script(conn)
        except (OSError, ssl.SSLError):
            pass
        finally:
            try:
                sock.close()
            except OSError:
                pass

    @property
    def origin(self):
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def url(self, target="/"):
        return self.origin + target

    def settle(self):
        """Wait until the connection threads have finished (and closed their
        sockets)."""
        for thread in list(self.threads):
            thread.join(5)

    def close(self):
        self.closing = True
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the thread in accept()
        except OSError:
            pass
        self.listener.close()
        self.thread.join(5)
        with self.lock:
            socks = list(self.socks)
        for sock in socks:  # wakes scripts blocked reading
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in self.threads:
            thread.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def http_response(body, status="200 OK", headers=(), version="HTTP/1.1", length=True):
    """Response bytes: status line, headers, Content-Length (if length), body."""
    body = body.encode() if isinstance(body, str) else body
    lines = [f"{version} {status}"] + [f"{n}: {v}" for n, v in headers]
    if length:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class ServerTestCase(unittest.TestCase):
    """Embedded servers made through these methods are closed when the test
    ends; self.servers lists them, in order."""

    def _keep(self, server):
        self.__dict__.setdefault("servers", []).append(server)
        self.addCleanup(server.close)
        return server

    def site(self, routes=None, **options):
        """A SiteServer serving routes."""
        return self._keep(SiteServer(routes, **options))

    def raw(self, table, **options):
        """A RawServer.responses(table) server."""
        return self._keep(RawServer.responses(table, **options))

    def scripted(self, script, **options):
        """A RawServer running script on each connection."""
        return self._keep(RawServer(script, **options))


class LoopTestCase(ServerTestCase):
    """Each test gets a fresh EventLoop as the thread's default loop; at the
    end no callbacks, timers or watched sockets may be left, and the loop is
    closed."""

    def setUp(self):
        self.loop = crawl.EventLoop()
        crawl.set_event_loop(self.loop)
        self.addCleanup(self._close_loop)

    def _close_loop(self):
        crawl.set_event_loop(None)
        self.loop.close()

    def run_co(self, coro, timeout=20):
        """Run coro on the test's loop (failing the test after timeout s),
        then check that it left nothing behind."""
        result = self.loop.run_until_complete(crawl.wait_for(coro, timeout))
        self.loop.run_until_complete(crawl.sleep(0))  # let cancellations finish
        self.assertEqual(self.loop.pending_work(), (0, 0, 0), "work left on the loop")
        return result

class VirtualClockLoop(crawl.EventLoop):
    """An EventLoop whose clock is virtual: time passes only when the loop
    would wait for a timer, and then it jumps straight to that timer.

    time() starts at 1000.0 (not 0, so that no code can mistake it for
    "unset") and changes only in select(): running callbacks takes no time,
    so intervals made of timers are exact (sleep(1) is 1.0 s, not 1.0 plus
    the CPU spent around it), and the same test gives the same times on a
    busy machine.

    The rule for jumping, when the loop has nothing ready and its next timer
    is due in t s:
      * If no file descriptor is watched but the loop's own wake-up socket,
        and no run_in_thread call is in flight, nothing but that timer can
        wake the loop: the clock jumps to it at once, without waiting.
      * Otherwise a socket may still become ready (a server thread may be
        about to answer): select() really waits for it, up to
        min(t, io_grace) real seconds. If a socket becomes ready, the clock
        does not move and its callbacks run as usual; only if none did does
        the clock jump to the timer. So a peer is overtaken by a virtual
        timeout only after io_grace real seconds of silence: io_grace is how
        long the embedded servers may take to answer. Silent servers (the
        timeout tests) cost io_grace real seconds per timeout, whatever its
        virtual length.
    Real time spent waiting for I/O is not added to the clock: a peer that
    trickles bytes faster than io_grace keeps the clock still, so tests of a
    deadline against a trickling server need the real clock.

    Threads other than run_in_thread's that call call_soon_threadsafe are
    not known to the loop: in such a test, keep a socket watched (or use the
    real clock) so that the loop waits for them before jumping.
    """

    IO_GRACE = 2.0  # real seconds of silence before a watched socket is overtaken

    def __init__(self, io_grace=None):
        super().__init__()
        self.io_grace = self.IO_GRACE if io_grace is None else io_grace
        self._now = 1000.0
        self._threads_busy = 0
        self.jumps = 0  # how many times the clock jumped (tests may check)
        self._selector = _VirtualClockSelector(self._selector, self)

    def time(self):
        return self._now

    def run_in_thread(self, fn, *args):
        future = super().run_in_thread(fn, *args)
        self._threads_busy += 1
        future.add_done_callback(self._thread_done)
        return future

    def _thread_done(self, future):
        self._threads_busy -= 1

    def advance(self, seconds):
        """Move the clock forward by seconds (timers now due run at the next
        iteration)."""
        if seconds < 0:
            raise ValueError("the clock only goes forward")
        self._now += seconds

    def _next_timer(self):
        """When the first timer not cancelled is due (None if none is):
        cancelled timers stay in the heap, and the clock skips them."""
        return min((when for when, _, handle in self._timers if not handle.cancelled), default=None)

    def _jump(self, when):
        self.jumps += 1
        self._now = max(self._now, when)


class _VirtualClockSelector:
    """The selector of a VirtualClockLoop: select() applies its rule for
    jumping; everything else goes to the real selector."""

    def __init__(self, real, loop):
        self._real = real
        self._loop = loop

    def __getattr__(self, name):
        return getattr(self._real, name)

    def select(self, timeout=None):
        loop = self._loop
        if timeout is None or timeout <= 0:
            return self._real.select(timeout)  # ready work, or nothing timed to wait for
        when = loop._next_timer()
        if when is None:
            return self._real.select(None)  # only cancelled timers: as if there were none
        if loop.pending_work()[2] == 0 and not loop._threads_busy:
            events = self._real.select(0)  # only the wake-up socket: already woken?
        else:
            events = self._real.select(min(max(0.0, when - loop.time()), loop.io_grace))
        if not events:
            loop._jump(when)
        return events


def use_virtual_clock(test, io_grace=None):
    """Give a LoopTestCase test a VirtualClockLoop in place of the loop its
    setUp made (closed unused); FaultCase's open descriptors are taken
    again. Returns the new loop."""
    test.loop.close()
    test.loop = VirtualClockLoop(io_grace)
    crawl.set_event_loop(test.loop)
    if hasattr(test, "fds_before"):
        test.fds_before = open_fds()
    return test.loop


def virtual_clock(method=None, *, io_grace=None):
    """Decorator for a test method of a LoopTestCase (or subclass): the test
    runs on a VirtualClockLoop. @virtual_clock, or @virtual_clock(io_grace=s)
    where the test's servers are silent, so that waiting is pointless."""
    def decorate(method):
        def test(self, *args, **kwargs):
            use_virtual_clock(self, io_grace)
            return method(self, *args, **kwargs)
        test.__name__, test.__qualname__, test.__doc__ = method.__name__, method.__qualname__, method.__doc__
        return test
    return decorate(method) if method is not None else decorate


def fetch_times(client):
    """Wrap client.fetch to note (url, loop time) as each fetch starts;
    returns the list it fills."""
    times = []
    fetch = client.fetch

    def timed_fetch(url, *args, **kwargs):
        times.append((url, crawl.get_event_loop().time()))
        return (yield from fetch(url, *args, **kwargs))

    client.fetch = timed_fetch
    return times


def time_gaps(times, url=None):
    """Gaps between successive times of fetch_times (of url only if given)."""
    times = [when for fetched, when in times if url is None or fetched == url]
    return [later - earlier for earlier, later in zip(times, times[1:])]


class VirtualClockTestCase(LoopTestCase):
    """A LoopTestCase whose every test runs on a VirtualClockLoop."""

    IO_GRACE = None

    def setUp(self):
        super().setUp()
        use_virtual_clock(self, self.IO_GRACE)


class VirtualClockTest(VirtualClockTestCase):
    """The virtual clock itself."""

    def test_a_long_sleep_returns_at_once_with_the_clock_advanced(self):
        real = time.monotonic()
        start = self.loop.time()
        self.run_co(crawl.sleep(3600), timeout=7200)
        self.assertEqual(self.loop.time(), start + 3600)
        self.assertLess(time.monotonic() - real, 1.0)

    def test_timers_fire_in_order_at_their_own_times(self):
        fired = []
        start = self.loop.time()

        def note(label):
            fired.append((label, self.loop.time() - start))

        for label, delay in (("c", 3.0), ("a", 1.0), ("b1", 2.0), ("b2", 2.0), ("d", 86400.0 * 3)):
            self.loop.call_later(delay, note, label)
        self.run_co(crawl.sleep(86400.0 * 3 + 1), timeout=86400.0 * 4)
        self.assertEqual(fired, [("a", 1.0), ("b1", 2.0), ("b2", 2.0), ("c", 3.0), ("d", 86400.0 * 3)])

    def test_running_callbacks_takes_no_time(self):
        def busy():
            start = self.loop.time()
            deadline = time.monotonic() + 0.05
            while time.monotonic() < deadline:
                yield from crawl.sleep(0)
            return self.loop.time() - start
        self.assertEqual(self.run_co(busy()), 0.0)

    def test_a_socket_that_answers_within_the_grace_is_not_overtaken(self):
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        self.addCleanup(ours.close)
        self.addCleanup(theirs.close)
        timer = threading.Timer(0.05, theirs.sendall, (b"late but in time",))
        self.addCleanup(timer.join)
        start = self.loop.time()
        timer.start()
        self.assertEqual(self.run_co(crawl.read(ours, timeout=1.0)), b"late but in time")
        self.assertEqual(self.loop.time(), start)

    def test_a_silent_socket_is_overtaken_after_the_grace(self):
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        self.addCleanup(ours.close)
        self.addCleanup(theirs.close)
        self.loop.io_grace = 0.05
        real, start = time.monotonic(), self.loop.time()
        with self.assertRaises(TimeoutError):
            self.run_co(crawl.read(ours, timeout=30.0), timeout=60)
        self.assertEqual(self.loop.time(), start + 30.0)
        self.assertGreaterEqual(time.monotonic() - real, 0.05)
        self.assertLess(time.monotonic() - real, 1.0)

    def test_a_thread_at_work_is_waited_for(self):
        def work():
            time.sleep(0.05)
            return "done"
        start = self.loop.time()
        self.assertEqual(self.run_co(self.loop.run_in_thread(work), timeout=10), "done")
        self.assertEqual(self.loop.time(), start)
        self.assertEqual(self.loop._threads_busy, 0)

    def test_virtual_clock_decorator_on_an_ordinary_loop_test(self):
        case = LoopTestCase("run_co")
        case.setUp()
        try:
            real_loop = case.loop
            loop = use_virtual_clock(case)
            self.assertIsInstance(loop, VirtualClockLoop)
            self.assertTrue(real_loop.is_closed())
            self.assertIs(crawl.get_event_loop(), loop)
            case.run_co(crawl.sleep(15))  # within run_co's 20 s, virtual
            self.assertEqual(loop.time(), 1015.0)
        finally:
            case.doCleanups()
            crawl.set_event_loop(self.loop)
        self.assertTrue(loop.is_closed())

def run_one_iteration(loop):
    """Run exactly one loop iteration: the callbacks ready now (and the I/O
    and timers that are due), nothing they schedule."""
    loop.call_soon(loop.stop)
    loop.run_forever()


def asks_numeric_host(args, kwargs):
    flags = kwargs.get("flags", args[5] if len(args) > 5 else 0)
    return bool(flags & socket.AI_NUMERICHOST)


class CountingSocket(socket.socket):
    """A socket that counts its send() calls."""

    sends = 0

    def send(self, data, *args):
        self.sends += 1
        return super().send(data, *args)


class TestHung(SystemExit):
    """Raised by the watchdog alarm in a hung runtime test. A SystemExit, so
    that neither a Task nor a loop callback swallows it, while unittest still
    reports it as this test's error and goes on."""


class RuntimeTestCase(LoopTestCase):
    """LoopTestCase plus helpers for the runtime tests, and a watchdog: a
    runtime bug that would hang a test (a lost wake-up, say) makes it fail
    after WATCHDOG_SECONDS instead."""

    WATCHDOG_SECONDS = 15

    def setUp(self):
        super().setUp()
        if hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
            def hung(signum, frame):
                raise TestHung(f"test still running after {self.WATCHDOG_SECONDS} s")

            previous = signal.signal(signal.SIGALRM, hung)
            self.addCleanup(signal.signal, signal.SIGALRM, previous)
            signal.setitimer(signal.ITIMER_REAL, self.WATCHDOG_SECONDS)
            self.addCleanup(signal.setitimer, signal.ITIMER_REAL, 0)

    def run_briefly(self, awaitable, timeout=5):
        """run_until_complete with a safety timeout, so that a runtime bug
        fails the test (TimeoutError) instead of hanging it."""
        return self.loop.run_until_complete(crawl.wait_for(awaitable, timeout))

    def assert_no_errors_logged(self, fn):
        """Call fn(); fail if it logs anything at ERROR on the 'crawl'
        logger (assertNoLogs is 3.10+)."""
        with self.assertLogs("crawl", "ERROR") as cm:
            fn()
            crawl.logger.error("sentinel")
        self.assertEqual([record.getMessage() for record in cm.records], ["sentinel"])

    @contextlib.contextmanager
    def assert_no_socket_left_for_gc(self):
        """Fail if a socket opened in the block is left for the garbage
        collector to close (ResourceWarning) instead of being closed."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            yield
            gc.collect()
        self.assertEqual([str(w.message) for w in caught if issubclass(w.category, ResourceWarning)], [])

    def spy_timers(self):
        """Record (callback, Handle) for every call_later on the test's loop,
        so that a test can schedule something at exactly a deadline."""
        timers = []
        real_call_later = self.loop.call_later

        def spy(delay, callback, *args):
            handle = real_call_later(delay, callback, *args)
            timers.append((callback, handle))
            return handle

        patcher = mock.patch.object(self.loop, "call_later", side_effect=spy)
        patcher.start()
        self.addCleanup(patcher.stop)
        return timers

    def expiry_handles(self, timers):
        return [handle for callback, handle in timers
                if getattr(callback, "__name__", "") == "_expire"]

    def socketpair(self):
        a, b = socket.socketpair()
        a.setblocking(False)
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        return a, b


def html_bytes(link):
    """Bytes of a small HTML page linking to link."""
    return (f'<!doctype html><html><head><title>t</title></head><body>'
            f'<p>Some text.</p><a href="{link}">{link}</a></body></html>\n').encode()


def chunked_body(body, size=7, trailers=b"", extension=b""):
    """body in the chunked transfer coding: size bytes per chunk, or, when
    size is a tuple, those sizes in turn; extension (b";name=value") on the
    second chunk; trailers (field lines, each ending in CRLF) at the end."""
    sizes = size if isinstance(size, tuple) else (size,)
    out, i, n = b"", 0, 0
    while i < len(body):
        piece = body[i:i + sizes[n % len(sizes)]]
        ext = extension if n == 1 else b""
        out += b"%x%s\r\n%s\r\n" % (len(piece), ext, piece)
        i, n = i + len(piece), n + 1
    return out + b"0\r\n" + trailers + b"\r\n"


def deflate_raw(data):
    compressor = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


_BOMBS = {}


def compression_bomb(kind="gzip"):
    """50 MiB of zeros, gzip- or zlib-compressed (made once, ~0.1 s)."""
    if kind not in _BOMBS:
        wbits = 31 if kind == "gzip" else 15
        compressor = zlib.compressobj(1, zlib.DEFLATED, wbits)
        zeros = bytes(1 << 20)
        _BOMBS[kind] = b"".join(compressor.compress(zeros) for _ in range(50)) + compressor.flush()
    return _BOMBS[kind]


def answer_and_close(data):
    """A RawServer.responses answer: send data, then close (FIN)."""
    def answer(conn, request):
        conn.send(data)
        conn.close()
        return "closed"
    return answer


def answer_and_hold(data):
    """An answer that sends data and then keeps the connection open, reading
    nothing more, until the client closes it."""
    def answer(conn, request):
        try:
            conn.send(data)
        except OSError:
            return "closed"
        while conn.read_request(timeout=10) is not None:
            pass
        return "closed"
    return answer


def parse_request_head(raw):
    """(request line, [(name, value)]) of a request head as bytes."""
    lines = raw.decode("latin-1").split("\r\n")
    fields = [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:] if line]
    return lines[0], fields


class HTTPLayerTestCase(LoopTestCase):
    """Shared helpers for the HTTP tests (no tests of its own)."""

    def client(self, **options):
        options.setdefault("timeout", 10)
        options.setdefault("read_timeout", 5)
        client = crawl.Client(**options)
        self.addCleanup(client.close)
        return client

    def get(self, client, url, method="GET", headers=None):
        return self.run_co(client.fetch(url, method, headers))

    def get_many(self, client, urls, method="GET"):
        def go():
            responses = []
            for url in urls:
                responses.append((yield from client.fetch(url, method)))
            return responses
        return self.run_co(go())

    def get_error(self, error_type, client, url, method="GET", run_timeout=20):
        """Fetch url expecting error_type; return the exception. The loop
        must be left clean after the error too."""
        with self.assertRaises(error_type) as caught:
            self.run_co(client.fetch(url, method), timeout=run_timeout)
        self.run_co(crawl.sleep(0))
        return caught.exception


class CatchAllRoutes(dict):
    """SiteServer routes that answer every target not listed with page
    (except /robots.txt, which stays a 404): for sites whose every path
    serves the same links."""

    def __init__(self, page, routes=None):
        super().__init__(routes or {})
        self.page = page

    def get(self, key, default=None):
        if key in self:
            return self[key]
        if key.split("?")[0] == "/robots.txt":
            return default
        return self.page


def slow_route(delay, page):
    """A SiteServer route that waits delay seconds, then writes page itself;
    a client that went away meanwhile is not an error."""

    def route(handler):
        time.sleep(delay)
        try:
            handler.send_response(page.status)
            for name, value in page.headers:
                handler.send_header(name, value)
            handler.send_header("Content-Length", str(len(page.body)))
            handler.end_headers()
            handler.wfile.write(page.body)
            handler.wfile.flush()
        except OSError:
            handler.close_connection = True
        return None

    return route


def sequence_route(*pages):
    """A route that answers with each of pages in turn, then the last one
    for ever."""
    answers = list(pages)
    lock = threading.Lock()

    def route(handler):
        with lock:
            return answers.pop(0) if len(answers) > 1 else answers[0]

    return route


def robots_page(text, status=200):
    return Page(text, status=status, content_type="text/plain")


class FakeClient:
    """A stand-in for crawl.Client serving canned Pages from a dict keyed by
    absolute URL, with no network: for scope tests on example.test names.
    A value that is an exception instance is raised by fetch()."""

    verify = True
    user_agent = crawl.DEFAULT_USER_AGENT

    def __init__(self, pages):
        self.pages = dict(pages)
        self.fetched = []
        self.closed = False

    def fetch(self, url, method="GET", headers=None, read_body=None, time_limit=None):
        self.fetched.append(url)
        yield from crawl.sleep(0)
        page = self.pages.get(url)
        if isinstance(page, BaseException):
            raise page
        if page is None:
            page = Page("not found", status=404, content_type="text/plain")
        fields = crawl.Fields(page.headers + [("Content-Length", str(len(page.body)))])
        response = crawl.Response(url, page.status, http.HTTPStatus(page.status).phrase,
                                  "HTTP/1.1", fields, page.body)
        response.content_length = len(page.body)
        if method == "HEAD" or (read_body is not None and not read_body(response)):
            response.body, response.body_read = b"", method == "HEAD"
        return response

    def close(self):
        self.closed = True


def ssl_error():
    """An ssl.SSLError with the attributes the ssl module always sets."""
    error = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    error.reason, error.library = "WRONG_VERSION_NUMBER", "SSL"
    return error


class CrawlerTestCase(LoopTestCase):
    """LoopTestCase plus the crawl runner and the record assertion."""

    # Options every crawl_site() of the class starts from. The soft-404
    # probe (on by default) is one more request per origin: off here, so
    # that tests count the requests of what they test; the probe's own
    # tests (CrawlerTrapTest) and the command line's run with it.
    crawl_defaults = {"backoff": 0.01, "soft_404": False}

    def crawl_site(self, roots, run_timeout=20, **options):
        """Run a Crawler on the test's loop with crawl_defaults updated by
        options; returns (crawler, records dict). Each URL must have been
        handed to on_record exactly once, and those are the records."""
        settings = dict(self.crawl_defaults, **options)
        callback = settings.pop("on_record", None)
        finished = []

        def on_record(record):
            finished.append(record)
            if callback is not None:
                callback(record)

        crawler = crawl.Crawler(roots, on_record=on_record, **settings)
        records = self.run_co(crawler.crawl(), run_timeout)
        self.assertIs(records, crawler.records)
        twice = [url for url, count in collections.Counter(r.url for r in finished).items() if count > 1]
        self.assertEqual(twice, [], "URLs recorded more than once")
        self.assertEqual(sorted(r.url for r in finished), sorted(records))
        return crawler, records

    def crawl_one(self, url, **options):
        """crawl_site() of a single URL that must give a single record; returns it."""
        _, records = self.crawl_site([url], **options)
        self.assertEqual(list(records), [url], "one record, for the root")
        return records[url]

    def assert_record(self, record, error_contains=None, **expected):
        """The record's fields named in expected have those values, and its
        error (if error_contains is given) contains that text."""
        got = {name: getattr(record, name) for name in expected}
        self.assertEqual(got, expected, f"record: {record.as_dict()}")
        if error_contains is not None:
            self.assertIn(error_contains, record.error or "", f"record: {record.as_dict()}")


def drain_until_closed(conn, timeout=10):
    """Read and discard until the client closes (or timeout seconds)."""
    conn.sock.settimeout(timeout)
    try:
        while conn.sock.recv(65536):
            pass
    except (OSError, socket.timeout):
        pass


def answer_then_reset(data):
    """A RawServer script: read the request, send data, then reset."""
    def script(conn):
        if conn.read_request() is None:
            return
        conn.send(data)
        time.sleep(0.02)  # let the bytes reach the client before the RST
        conn.reset()
    return script


def answer_then_wait(data, read_first=True):
    """A RawServer script: (read the request,) send data, then keep the
    connection open until the client closes it."""
    def script(conn):
        if read_first and conn.read_request() is None:
            return
        conn.send(data)
        drain_until_closed(conn)
    return script


def dns_tries_for_invalid_names(max_tries):
    """How many tries a name under .invalid gets here: 1 when the resolver
    answers "no such name" (not retryable); max_tries when it cannot answer
    now (EAI_AGAIN: no resolver reachable, which is worth another try)."""
    try:
        socket.getaddrinfo("crawl-py-test.invalid", 80, 0, socket.SOCK_STREAM)
    except socket.gaierror as error:
        return max_tries if error.errno == socket.EAI_AGAIN else 1
    return None  # the name resolved: the test cannot run here


class FaultCase(CrawlerTestCase):
    """A CrawlerTestCase that crawls without robots.txt, with a short timeout
    and three tries, and can check that every file descriptor the test
    opened was closed."""

    crawl_defaults = {"backoff": 0.01, "robots": False, "timeout": 2.0, "max_tries": 3, "soft_404": False}

    def setUp(self):
        super().setUp()
        self.fds_before = open_fds()

    def assert_no_leaks(self):
        """Close the servers, then the descriptors must be those of the start."""
        for server in self.__dict__.get("servers", []):
            server.close()
        self.assertEqual(self.loop.pending_work(), (0, 0, 0), "work left on the loop")
        now = wait_for_fds(self.fds_before)
        self.assertEqual(now, self.fds_before,
                         f"file descriptors leaked: opened and not closed: "
                         f"{describe_fds(now - self.fds_before)}; closed: "
                         f"{sorted(self.fds_before - now)}")


def parser_corpus():
    """(response bytes, method) pairs: the valid and malformed responses
    the HTTP tests use, for the fuzzer to start from."""
    page = b"<!doctype html><html><body>" + b"<a href='/x'>x</a>\n" * 30 + b"</body></html>"
    deflate = zlib.compressobj(wbits=-15)
    raw_deflate = deflate.compress(page) + deflate.flush()
    text = [("Content-Type", "text/html; charset=utf-8")]
    chunked = [("Transfer-Encoding", "chunked")]
    varied = dict(size=(7, 100, 1, 3000), extension=b";name=value", trailers=b"X-Trailer: yes\r\n")
    items = [
        http_response(page, headers=text),
        http_response(b"hello", "200"),  # no reason phrase
        b"HTTP/1.1 200 \r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nread until the server closes",
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nclose-delimited",
        http_response(chunked_body(page, **varied), headers=text + chunked, length=False),
        http_response(gzip.compress(page), headers=text + [("Content-Encoding", "gzip")]),
        http_response(chunked_body(gzip.compress(page), **varied),
                      headers=[("Content-Encoding", "gzip")] + chunked, length=False),
        http_response(zlib.compress(page), headers=[("Content-Encoding", "deflate")]),
        http_response(raw_deflate, headers=[("Content-Encoding", "deflate")]),
        http_response(gzip.compress(page), headers=[("Content-Encoding", "x-gzip, identity")]),
        http_response(gzip.compress(b"\0" * 300000), headers=[("Content-Encoding", "gzip")]),
        b"HTTP/1.1 200 OK\nContent-Length: 5\nContent-Type: text/plain\n\nhello",  # bare LF
        b"HTTP/1.1 100 Continue\r\n\r\n" + http_response(b"after 100"),
        b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n" + http_response(b"x"),
        b"HTTP/1.1 102 Processing\r\n\r\n" * 20 + http_response(b"many interim"),
        b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\nstray bytes after a 304",
        b"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n0123456789",
        b"HTTP/1.1 200 OK\r\nX-Folded: a\r\n  b\r\n\tc\r\nContent-Length: 3\r\n\r\nabc",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\nContent-Length: 5\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nx",
        b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\nx",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFF\r\nabc",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcdeXX0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 3\r\n\r\nabc",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 9\r\n\r\nnot gzip!",
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
        b"HTTP/1.1 302 Found\r\nLocation: /next\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n no-field-before-this\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-F%d: v\r\n" % i for i in range(201)) + b"\r\n",
        b"HTTP/1.1 200 OK\r\nX-Big: " + b"b" * 70000 + b"\r\n\r\n",
        b"HTTP/2 200\r\n\r\n",
        b"ICY 200 OK\r\n\r\n",
        b"SSH-2.0-OpenSSH_9.6\r\n",
        b"HTTP/1.1 200 OK\r\n",
        b"",
        b"\r\n",
    ]
    corpus = [(item, "GET") for item in items]
    corpus.append((http_response(b"", headers=[("Content-Length", "1234")], length=False), "HEAD"))
    corpus.append((http_response(page, headers=text) + b"trailing", "HEAD"))
    return corpus


FUZZ_TOKENS = (b"\r\n", b"\n", b"\r", b":", b" ", b"\t", b";", b",", b"0", b"9", b"f", b"\x00",
                 b"\xff", b"HTTP/1.1 ", b"HTTP/1.1 100 Continue\r\n\r\n", b"\r\n\r\n",
                 b"Content-Length: 7\r\n", b"Transfer-Encoding: chunked\r\n",
                 b"Content-Encoding: gzip\r\n", b"Content-Encoding: deflate\r\n",
                 b"ffffffff\r\n", b"99999999")


def mutate(rng, data):
    """Flip, drop, duplicate or insert bytes, or truncate: 1 to 4 times."""
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.choice((0, 0, 0, 1, 1, 2, 2, 3, 3, 3, 4, 5, 5))
        i = rng.randrange(len(data) + 1)
        if op == 0 and data:  # flip a bit
            i = min(i, len(data) - 1)
            data[i] ^= 1 << rng.randrange(8)
        elif op == 1:  # drop bytes
            del data[i:i + rng.randint(1, 8)]
        elif op == 2:  # duplicate a run
            data[i:i] = data[i:i + rng.randint(1, 64)]
        elif op == 3:  # insert a token or random bytes
            if rng.random() < 0.7:
                data[i:i] = rng.choice(FUZZ_TOKENS)
            else:
                data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        elif op == 4:  # truncate
            del data[i:]
        else:  # overwrite a byte with another that means something
            if data:
                i = min(i, len(data) - 1)
                data[i] = rng.choice(b"\r\n :;0123456789abcdefABCDEF\t\x00")
    return bytes(data)


def split_points(rng, length):
    """Where the stream is cut between reads: none, a few, or (small
    messages) every byte."""
    if length > 1 and length < 3000 and rng.random() < 0.05:
        return list(range(1, length))
    return sorted(rng.sample(range(length + 1), min(length + 1, rng.randint(0, 8))))


class ParserDeadline(BaseException):
    """Raised by SIGALRM in a parse that does not end: a BaseException so
    that no ``except Exception`` on the way can swallow it."""


def parser_alarm(signum, frame):
    raise ParserDeadline("read_response did not end within its deadline (a hang)")


def gzip_member(data):
    return gzip.compress(data, mtime=0)


# ---------------------------------------------------------------------------
# Vocabularies: options, error kinds, record fields; the file's structure
# ---------------------------------------------------------------------------


def readme_table(header):
    """The rows (lists of cell texts) of the README.md table whose header
    row starts with header."""
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as file:
        lines = file.read().split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


class VocabularyTest(unittest.TestCase):
    """Each option, error kind and record field is declared once in
    crawl.py; the parser, Client, Crawler and README.md all agree with it."""

    def test_readme_options_table_is_the_declaration(self):
        rows = readme_table("| option | default | meaning |")
        expected = [["`ROOT ...`", "", "where to start: `xkcd.com`, `localhost:8000`, "
                     "`http://host/path`, `https://host/`; no scheme means `http://`"]]
        for option in crawl.OPTIONS:
            if option.flag is not None:
                metavar = f" {option.metavar}" if option.metavar else ""
                flags = ", ".join(f"`{flag}{metavar}`" for flag in option.flag.split("/"))
                expected.append([flags, option.shown, option.help])
        expected.append(["`--version`", "", "print the version"])
        self.assertEqual(rows, expected)

    def test_readme_library_keywords_are_the_declaration(self):
        rows = readme_table("| keyword | component | default | meaning |")
        expected = [[f"`{option.keyword}`", option.takes, option.shown, option.help]
                    for option in crawl.OPTIONS if option.flag is None]
        self.assertEqual(rows, expected)

    def test_readme_record_fields_are_the_declaration(self):
        rows = readme_table("| field | meaning |")
        self.assertEqual(rows, [[f"`{name}`", meaning]
                                for name, meaning in crawl.RECORD_FIELDS.items()])
        self.assertEqual(tuple(crawl.Record("http://a.test/").as_dict()),
                         tuple(crawl.RECORD_FIELDS))

    def test_readme_error_kinds_are_the_declaration(self):
        rows = readme_table("| kind | outcome | retried | meaning |")
        yes_no = {True: "yes", False: "no"}
        self.assertEqual(rows, [[f"`{kind}`", about.outcome, yes_no[about.retried],
                                 about.meaning] for kind, about in crawl.ERROR_KINDS.items()])

    def test_parser_defaults_and_help_come_from_the_declaration(self):
        parser = crawl.build_parser()
        args = parser.parse_args(["example.test"])
        help_text = " ".join(parser.format_help().split())
        for option in crawl.OPTIONS:
            if option.flag is None:
                continue
            with self.subTest(option=option.flag):
                default = option.default
                if option.parse is crawl.REGEXES:
                    default = list(default)
                self.assertEqual(getattr(args, option.keyword), default)
                self.assertIn(" ".join(option.help.split()), help_text)
                self.assertIn(f"(default: {option.shown.strip('`')})", help_text)

    def test_switches_turn_their_default_around(self):
        args = crawl.build_parser().parse_args(
            ["example.test", "--no-robots", "--insecure", "--lenient", "-q", "-vv"])
        self.assertEqual((args.robots, args.verify, args.lenient, args.quiet, args.verbose),
                         (False, False, True, True, 2))

    def test_client_and_crawler_defaults_come_from_the_declaration(self):
        client = crawl.Client()
        crawler = crawl.Crawler("example.test")
        self.addCleanup(client.close)
        self.addCleanup(crawler.client.close)
        for option in crawl.OPTIONS:
            with self.subTest(option=option.keyword):
                if option.takes == "crawler":
                    value = getattr(crawler, option.keyword)
                    if option.keyword == "exclude":
                        value = tuple(value)
                    self.assertEqual(value, option.default)
                elif option.takes == "client" and option.keyword not in (
                        "max_idle_per_origin", "max_idle", "accept"):
                    self.assertEqual(getattr(client, option.keyword), option.default)
                    self.assertEqual(getattr(crawler.client, option.keyword), option.default)
        self.assertEqual(client.accept, crawl.option_defaults("client")["accept"])
        self.assertEqual((client.pool.max_per_origin, client.pool.max_total), (10, 100))
        # The crawler sizes the client's pool by its own concurrency
        # (max_tasks 10: 10 per origin, at least 100 in all).
        self.assertEqual((crawler.client.pool.max_per_origin, crawler.client.pool.max_total),
                         (10, 100))
        crawler = crawl.Crawler("example.test", max_tasks=3)
        self.addCleanup(crawler.client.close)
        self.assertEqual((crawler.client.pool.max_per_origin, crawler.client.pool.max_total),
                         (3, 100))

    def test_client_options_given_to_the_crawler_reach_its_client(self):
        crawler = crawl.Crawler("example.test", timeout=5.0, read_timeout=2.0,
                                user_agent="bot/2.0", max_size=1000, max_tasks=200)
        self.addCleanup(crawler.client.close)
        client = crawler.client
        self.assertEqual((client.timeout, client.read_timeout, client.user_agent,
                          client.max_size), (5.0, 2.0, "bot/2.0", 1000))
        self.assertEqual((client.pool.max_per_origin, client.pool.max_total), (200, 200))

    def test_unknown_keywords_are_type_errors(self):
        with self.assertRaisesRegex(TypeError, "Client.. got an unexpected keyword argument "
                                               "'max_body_size'"):
            crawl.Client(max_body_size=10)
        with self.assertRaisesRegex(TypeError, "'max_task'"):
            crawl.Crawler("example.test", max_task=3)
        client = crawl.Client()
        self.addCleanup(client.close)
        with self.assertRaisesRegex(TypeError, "client options .'timeout'. and a client"):
            crawl.Crawler("example.test", client=client, timeout=3)

    def test_the_command_line_passes_every_option_to_the_crawler(self):
        seen = []

        def fake_crawler(roots, **options):
            seen.append((roots, options))
            raise ValueError("stop here")

        argv = ["example.test", "--max-tasks", "3", "--max-redirect", "0", "--max-tries", "2",
                "--max-pages", "7", "--max-depth", "1", "--delay", "0.5", "--lenient",
                "--exclude", "x$", "--no-robots", "--timeout", "9", "--max-size", "100",
                "--user-agent", "bot/1", "--cafile", CERT_FILE, "--insecure", "--no-compression", "-q"]
        with mock.patch.object(crawl, "Crawler", fake_crawler):
            self.assertEqual(run_main(argv)[0], 2)
        (roots, options), = seen
        options["exclude"] = [pattern.pattern for pattern in options["exclude"]]
        self.assertEqual(roots, ["example.test"])
        self.assertEqual(set(options), {option.keyword for option in crawl.OPTIONS
                                        if option.flag is not None and option.takes != "cli"})
        given = {key: options[key] for key in (
            "max_tasks", "max_redirect", "max_tries", "max_pages", "max_depth", "delay",
            "lenient", "exclude", "robots", "timeout", "max_size", "user_agent", "cafile",
            "verify", "compression")}
        self.assertEqual(given, {
            "max_tasks": 3, "max_redirect": 0, "max_tries": 2, "max_pages": 7, "max_depth": 1,
            "delay": 0.5, "lenient": True, "exclude": ["x$"], "robots": False, "timeout": 9.0,
            "max_size": 100, "user_agent": "bot/1", "cafile": CERT_FILE, "verify": False,
            "compression": False})

    def test_every_error_kind_the_code_names_is_declared(self):
        with open(os.path.join(HERE, "crawl.py"), encoding="utf-8") as file:
            source = file.read()
        named = set(re.findall(r'kind = "(\w+)"', source))
        named |= set(re.findall(r'_not_fetched\([^,]+, "(\w+)"', source))
        named |= set(re.findall(r'error_kind="(\w+)"', source))
        self.assertGreaterEqual(len(named), 10)
        self.assertLessEqual(named, set(crawl.ERROR_KINDS))
        for cls in (crawl.HTTPError, crawl.ProtocolError, crawl.BodyTooLarge,
                    crawl.TruncatedBody, crawl.ContentDecodingError):
            self.assertIn(cls.kind, crawl.ERROR_KINDS)
        self.assertEqual(crawl.NOT_FETCHED_KINDS, ("robots", "max_depth", "max_pages", "url_length",
                                                   "path_segments", "path_repeats", "interrupted"))
        self.assertEqual([kind for kind in crawl.TRAP_KINDS if crawl.ERROR_KINDS[kind].failure], [])

    def test_retries_and_failures_follow_the_table(self):
        samples = {
            "timeout": TimeoutError("timed out"),
            "refused": ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"),
            "connect": OSError(errno.EHOSTUNREACH, "No route to host"),
            "dns": socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
            "tls": ssl.SSLError(1, "bad"),
            "reset": ConnectionResetError(errno.ECONNRESET, "reset"),
            "network": OSError(errno.EIO, "I/O error"),
            "protocol": crawl.ProtocolError("bad"),
            "too_large": crawl.BodyTooLarge("big"),
            "truncated": crawl.TruncatedBody("short"),
            "decoding": crawl.ContentDecodingError("corrupt"),
            "invalid_url": crawl.InvalidURL("no host"),
            "internal": KeyError("x"),
        }
        for kind, error in samples.items():
            with self.subTest(kind=kind):
                self.assertEqual(crawl.describe_error(error)[0], kind)
                self.assertEqual(crawl._is_retryable(error), crawl.ERROR_KINDS[kind].retried)
        temporary = socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        self.assertEqual(crawl.describe_error(temporary)[0], "dns")
        self.assertTrue(crawl._is_retryable(temporary))
        for kind, about in crawl.ERROR_KINDS.items():
            record = crawl.Record("http://a.test/")
            record.error_kind = kind
            self.assertEqual(record.failed, about.failure, kind)


class StructureTest(unittest.TestCase):
    """The module docstring's first reading, __all__ and the sections."""

    @classmethod
    def setUpClass(cls):
        with open(os.path.join(HERE, "crawl.py"), encoding="utf-8") as file:
            cls.source = file.read()
        cls.tree = __import__("ast").parse(cls.source)

    def definition_line(self, dotted):
        """The line where a top-level name, or Class.method, is defined."""
        ast = __import__("ast")
        owner, _, member = dotted.rpartition(".")
        nodes = self.tree.body
        if owner:
            cls = next(node for node in nodes
                       if isinstance(node, ast.ClassDef) and node.name == owner)
            nodes = cls.body
            dotted = member
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == dotted:
                return node.lineno
        self.fail(f"{dotted} is not defined in crawl.py")

    def test_no_first_reading_name_is_marked_to_skip(self):
        doc = crawl.__doc__
        block = doc[doc.index("A first reading"):doc.index("Then read the sections")]
        lines = self.source.split("\n")
        for number, line in enumerate(lines):
            if "# Skip on first reading:" in line:
                # The mark covers the first definition below it (comments and
                # constants may stand between).
                name = next(match for match in (re.match(r"\s*(?:def|class) (\w+)", later)
                                                for later in lines[number + 1:]) if match)
                self.assertNotRegex(block, r"\b%s\b" % name.group(1))

    def test_first_reading_names_are_defined_in_that_order(self):
        doc = crawl.__doc__
        block = doc[doc.index("A first reading"):doc.index("Then read the sections")]
        names = []
        for line in block.split("\n"):
            match = re.match(r"\s+\d+\. (.+?)(?:\s{2,}|$)", line)
            if match:
                owner = None
                for name in match.group(1).split(", "):
                    if "." in name:
                        owner = name.split(".")[0]
                    elif owner and name.startswith("_") or owner and name in (
                            "put", "get", "task_done", "join", "crawl"):
                        name = f"{owner}.{name}"
                    names.append(name)
        self.assertGreaterEqual(len(names), 15)
        lines = [self.definition_line(name) for name in names]
        self.assertEqual(lines, sorted(lines), list(zip(names, lines)))

    def test_sections_are_numbered_in_order(self):
        titles = re.findall(r"(?m)^# -{75}\n# (\d+)\. ", self.source)
        self.assertEqual([int(number) for number in titles], list(range(1, 12)))

    def test_all_is_the_public_api(self):
        for name in crawl.__all__:
            self.assertTrue(hasattr(crawl, name), name)
            self.assertFalse(name.startswith("_"), name)
        for name in ("CancelledError", "Record", "Future", "Task", "EventLoop", "Queue",
                     "Client", "Crawler", "crawl", "main", "OPTIONS", "ERROR_KINDS"):
            self.assertIn(name, crawl.__all__)
        namespace = {}
        exec("from crawl import *", namespace)
        self.assertIn("Crawler", namespace)

    def test_no_private_name_is_used_above_its_definition(self):
        """A section may use private names defined above it, and public
        names from anywhere; never a private name of a later section."""
        ast = __import__("ast")
        section_starts = [self.source[:match.start()].count("\n") + 2 for match in
                          re.finditer(r"(?m)^# -{75}\n# \d+\. ", self.source)]

        def section(line):
            return sum(1 for start in section_starts if start <= line)

        defined = {}
        for node in self.tree.body:
            targets = [node] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else \
                getattr(node, "targets", [])
            for target in targets:
                name = getattr(target, "name", None) or getattr(target, "id", None)
                if name and name.startswith("_") and not name.startswith("__"):
                    defined[name] = section(node.lineno)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and node.id in defined:
                self.assertGreaterEqual(section(node.lineno), defined[node.id],
                                        f"{node.id} used on line {node.lineno}")

    def test_a_plain_http_crawl_makes_nothing_made_on_first_use(self):
        """Start-up time: the modules and regular expressions that crawl.py
        makes on first use stay unmade in a crawl of plain HTML pages over
        http (with crawl(): the command line also runs argparse, whose help
        formatter imports shutil, which imports zlib), and each works when
        first used."""
        lazy = ["_ssl", "argparse", "concurrent.futures", "email.utils", "encodings.idna",
                "json", "unicodedata", "xml.parsers.expat", "zlib"]
        code = ("import sys, crawl\n"
                "before = set(sys.modules)\n"
                "records = crawl.crawl(sys.argv[1:], robots=False)\n"
                f"print(len(records), sorted(set({lazy!r}) & (set(sys.modules) - before)),\n"
                "      crawl._CSS_SKIP._made, crawl._SRCSET_URL._made, crawl._ANCHOR._made)")
        with SiteServer({"/": html_page("/a?x=1&amp;y=2"), "/a": html_page()}) as site:
            result = subprocess.run(
                [sys.executable, "-c", code, site.url("/")], cwd=HERE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                timeout=60)
        self.assertEqual(result.stderr, "")
        self.assertEqual(result.stdout.splitlines()[-1], "2 [] None None None")
        self.assertEqual(crawl.zlib.decompress(zlib.compress(b"x")), b"x")
        self.assertEqual(crawl.unicodedata.normalize("NFC", "e\u0301"), "\u00e9")
        self.assertEqual(crawl.css_links("a { background: url(x.png) }"), [("x.png", "css url")])
        self.assertIs(crawl._CSS_SKIP.match, crawl._CSS_SKIP.match)  # kept on the stand-in
        self.assertIn("made on first use", repr(crawl._OnFirstUse(list, "a list")))

    def test_a_plain_http_crawl_never_loads_ssl(self):
        """ssl is executed on first use only (start-up time); a crawl over
        https loads it, and its errors are ssl's own classes."""
        code = ("import sys, crawl\n"
                "before = '_ssl' in sys.modules\n"
                "status = crawl.main(sys.argv[1:])\n"
                "after = '_ssl' in sys.modules\n"
                "import ssl\n"
                "print(before, after, status, crawl.ssl.SSLError is ssl.SSLError)")
        with SiteServer({"/": html_page("/a"), "/a": html_page()}) as site:
            result = subprocess.run(
                [sys.executable, "-c", code, site.url("/"), "-q", "--no-robots"], cwd=HERE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                timeout=60)
        self.assertEqual(result.stderr, "")
        self.assertEqual(result.stdout.splitlines()[-1], "False False 0 True")
        with SiteServer({"/": html_page()}, tls=True) as site:
            result = subprocess.run(
                [sys.executable, "-c", code, site.url("/"), "-q", "--no-robots"], cwd=HERE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                timeout=60)
        self.assertIn("[tls] certificate verify failed", result.stdout)
        self.assertEqual(result.stdout.splitlines()[-1], "False True 3 True")

    def test_an_https_crawl_never_loads_the_idna_codec(self):
        """Start-up time: socket and ssl get an ASCII host name as bytes (a
        str goes through the idna codec, 1.5 ms to load)."""
        code = ("import sys, crawl\n"
                "records = crawl.crawl(sys.argv[1:2], robots=False, cafile=sys.argv[2])\n"
                "print(len(records), 'encodings.idna' in sys.modules)")
        with SiteServer({"/": html_page("/a"), "/a": html_page()}, tls=True) as site:
            result = subprocess.run(
                [sys.executable, "-c", code, site.url("/"), CERT_FILE], cwd=HERE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                timeout=60)
        self.assertEqual(result.stderr, "")
        self.assertEqual(result.stdout.splitlines()[-1], "2 False")



# ---------------------------------------------------------------------------
# 1. Futures and tasks
# ---------------------------------------------------------------------------


class RuntimeFutureTest(RuntimeTestCase):

    def test_pending_state(self):
        future = crawl.Future(self.loop)
        self.assertFalse(future.done())
        self.assertFalse(future.cancelled())
        self.assertIn("pending", repr(future))
        with self.assertRaises(crawl.InvalidStateError):
            future.result()
        with self.assertRaises(crawl.InvalidStateError):
            future.exception()

    def test_finished_with_result(self):
        future = crawl.Future(self.loop)
        future.set_result(42)
        self.assertTrue(future.done())
        self.assertFalse(future.cancelled())
        self.assertEqual(future.result(), 42)
        self.assertIsNone(future.exception())
        with self.assertRaises(crawl.InvalidStateError):
            future.set_result(43)
        with self.assertRaises(crawl.InvalidStateError):
            future.set_exception(ValueError("late"))
        self.assertFalse(future.cancel())
        self.assertEqual(future.result(), 42)
        self.assertFalse(future.cancelled())

    def test_finished_with_exception(self):
        future = crawl.Future(self.loop)
        error = ValueError("bad value")
        future.set_exception(error)
        self.assertTrue(future.done())
        self.assertFalse(future.cancelled())
        self.assertIs(future.exception(), error)
        with self.assertRaises(ValueError) as cm:
            future.result()
        self.assertIs(cm.exception, error)
        with self.assertRaises(crawl.InvalidStateError):
            future.set_result(1)
        with self.assertRaises(crawl.InvalidStateError):
            future.set_exception(KeyError("again"))
        self.assertFalse(future.cancel())

    def test_set_exception_accepts_a_class(self):
        future = crawl.Future(self.loop)
        future.set_exception(KeyError)
        self.assertIs(type(future.exception()), KeyError)

    def test_set_exception_rejects_stop_iteration(self):
        future = crawl.Future(self.loop)
        with self.assertRaises(TypeError):
            future.set_exception(StopIteration(1))
        self.assertFalse(future.done())

    def test_cancelled_state(self):
        future = crawl.Future(self.loop)
        self.assertTrue(future.cancel())
        self.assertTrue(future.done())
        self.assertTrue(future.cancelled())
        with self.assertRaises(crawl.CancelledError):
            future.result()
        with self.assertRaises(crawl.CancelledError):
            future.exception()
        self.assertFalse(future.cancel())
        with self.assertRaises(crawl.InvalidStateError):
            future.set_result(1)
        with self.assertRaises(crawl.InvalidStateError):
            future.set_exception(ValueError())

    def test_cancelled_error_is_not_an_exception(self):
        # so that `except Exception` in a coroutine does not swallow it
        self.assertTrue(issubclass(crawl.CancelledError, BaseException))
        self.assertFalse(issubclass(crawl.CancelledError, Exception))
        self.assertTrue(issubclass(crawl.InvalidStateError, Exception))

    def test_callbacks_are_scheduled_not_run_inside_set_result(self):
        for finish in ("set_result", "set_exception", "cancel"):
            with self.subTest(finish=finish):
                future = crawl.Future(self.loop)
                calls = []
                future.add_done_callback(lambda f: calls.append(("a", f)))
                future.add_done_callback(lambda f: calls.append(("b", f)))
                future.add_done_callback(lambda f: calls.append(("c", f)))
                self.loop.call_soon(calls.append, "scheduled before")
                if finish == "set_result":
                    future.set_result(1)
                elif finish == "set_exception":
                    future.set_exception(ValueError("x"))
                else:
                    future.cancel()
                self.loop.call_soon(calls.append, "scheduled after")
                self.assertEqual(calls, [])  # nothing ran inside set_result
                run_one_iteration(self.loop)
                self.assertEqual(calls, ["scheduled before", ("a", future), ("b", future),
                                         ("c", future), "scheduled after"])

    def test_callback_added_to_done_future_is_scheduled_at_once(self):
        future = crawl.Future(self.loop)
        future.set_result("done")
        calls = []
        self.loop.call_soon(calls.append, "first")
        future.add_done_callback(lambda f: calls.append(("callback", f.result())))
        self.loop.call_soon(calls.append, "last")
        self.assertEqual(calls, [])
        run_one_iteration(self.loop)
        self.assertEqual(calls, ["first", ("callback", "done"), "last"])

    def test_remove_done_callback(self):
        future = crawl.Future(self.loop)
        calls = []

        def f(fut):
            calls.append("f")

        def g(fut):
            calls.append("g")

        future.add_done_callback(f)
        future.add_done_callback(g)
        future.add_done_callback(f)
        self.assertEqual(future.remove_done_callback(f), 2)
        self.assertEqual(future.remove_done_callback(f), 0)
        self.assertEqual(future.remove_done_callback(lambda fut: None), 0)
        future.set_result(None)
        run_one_iteration(self.loop)
        self.assertEqual(calls, ["g"])

    def test_future_without_loop_uses_the_default_loop(self):
        future = crawl.Future()  # LoopTestCase made self.loop the default
        calls = []
        future.add_done_callback(calls.append)
        future.set_result(5)
        run_one_iteration(self.loop)
        self.assertEqual(calls, [future])

    def test_long_chain_of_callbacks_does_not_recurse(self):
        # Each callback finishes the next future: were callbacks run inside
        # set_result, this would exceed the recursion limit.
        count = sys.getrecursionlimit() * 3
        futures = [crawl.Future(self.loop) for _ in range(count)]
        for current, following in zip(futures, futures[1:]):
            current.add_done_callback(lambda done, following=following: following.set_result(done.result() + 1))
        futures[0].set_result(0)
        self.assertEqual(self.loop.run_until_complete(futures[-1]), count - 1)

    def test_iter_protocol(self):
        pending = crawl.Future(self.loop)
        steps = iter(pending)
        self.assertIs(next(steps), pending)  # yields itself while pending
        pending.set_result(3)
        with self.assertRaises(StopIteration) as cm:
            next(steps)
        self.assertEqual(cm.exception.value, 3)

        done = crawl.Future(self.loop)
        done.set_result(5)
        with self.assertRaises(StopIteration) as cm:
            next(iter(done))  # does not yield at all
        self.assertEqual(cm.exception.value, 5)

        failed = crawl.Future(self.loop)
        failed.set_exception(ValueError("in the awaiting frame"))
        with self.assertRaisesRegex(ValueError, "in the awaiting frame"):
            next(failed.__await__())

    def test_yield_from_future(self):
        def waiter(future):
            value = yield from future
            return value + 1

        def catcher(future):
            try:
                yield from future
            except ValueError as error:
                return ("caught", str(error))
            return "not raised"

        good = crawl.Future(self.loop)
        bad = crawl.Future(self.loop)
        self.loop.call_later(0.01, good.set_result, 41)
        self.loop.call_later(0.01, bad.set_exception, ValueError("from the future"))
        self.assertEqual(self.run_co(waiter(good)), 42)
        self.assertEqual(self.run_co(catcher(bad)), ("caught", "from the future"))

    def test_await_future_in_async_def(self):
        async def waiter(future):
            value = await future
            return value * 2

        async def catcher(future):
            try:
                await future
            except KeyError as error:
                return ("caught", error.args[0])
            return "not raised"

        good = crawl.Future(self.loop)
        bad = crawl.Future(self.loop)
        self.loop.call_later(0.01, good.set_result, 21)
        self.loop.call_later(0.01, bad.set_exception, KeyError("k"))
        self.assertEqual(self.run_co(waiter(good)), 42)
        self.assertEqual(self.run_co(catcher(bad)), ("caught", "k"))


class RuntimeTaskTest(RuntimeTestCase):

    def test_first_step_is_not_run_in_the_constructor(self):
        log = []

        def coroutine():
            log.append("started")
            yield
            log.append("resumed")
            return "value"

        task = self.loop.create_task(coroutine())
        self.assertEqual(log, [])
        self.assertFalse(task.done())
        run_one_iteration(self.loop)
        self.assertEqual(log, ["started"])
        self.assertFalse(task.done())
        run_one_iteration(self.loop)
        self.assertEqual(log, ["started", "resumed"])
        self.assertTrue(task.done())
        self.assertEqual(task.result(), "value")

        log.clear()
        task = crawl.Task(coroutine())  # the default loop
        self.assertEqual(log, [])
        self.assertEqual(self.loop.run_until_complete(task), "value")
        self.assertEqual(log, ["started", "resumed"])

    def test_task_needs_a_coroutine(self):
        with mock.patch.object(sys, "unraisablehook"):  # see the next test
            with self.assertRaises(TypeError):
                crawl.Task(42, self.loop)
            with self.assertRaises(TypeError):
                crawl.Task(lambda: None, self.loop)
            gc.collect()
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))

    def test_rejected_task_is_collected_quietly(self):
        # The half-built Task that __init__ refused must not make __del__
        # fail ("Exception ignored in: <function Task.__del__ ...>").
        unraisable = []
        with mock.patch.object(sys, "unraisablehook", unraisable.append):
            with self.assertRaises(TypeError):
                crawl.Task(42, self.loop)
            gc.collect()
        self.assertEqual([repr(u.exc_value) for u in unraisable], [])

    def test_return_value_becomes_the_result(self):
        def coroutine():
            yield from crawl.sleep(0)
            return {"answer": 42}

        task = self.loop.create_task(coroutine())
        self.assertEqual(self.loop.run_until_complete(task), {"answer": 42})
        self.assertTrue(task.done())
        self.assertFalse(task.cancelled())
        self.assertEqual(task.result(), {"answer": 42})
        self.assertIsNone(task.exception())
        with self.assertRaises(RuntimeError):
            task.set_result(1)  # a task's result comes from its coroutine
        with self.assertRaises(RuntimeError):
            task.set_exception(ValueError())

    def test_exception_keeps_the_coroutine_frames_in_the_traceback(self):
        def inner_failing_coroutine():
            yield from crawl.sleep(0)
            raise ValueError("deep failure")

        def outer_calling_coroutine():
            yield from inner_failing_coroutine()

        task = self.loop.create_task(outer_calling_coroutine())
        try:  # not assertRaises: it strips the traceback
            self.loop.run_until_complete(task)
        except ValueError as caught:
            error = caught
        else:
            self.fail("ValueError not raised")
        self.assertIs(task.exception(), error)
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        self.assertIn("inner_failing_coroutine", text)
        self.assertIn("outer_calling_coroutine", text)
        self.assertIn('raise ValueError("deep failure")', text)
        self.assertIn("ValueError: deep failure", text)

    def test_exception_reaches_a_task_waiting_on_the_failed_task(self):
        def failing_worker_coroutine():
            yield
            raise KeyError("worker broke")

        def waiting_coroutine(worker):
            try:
                yield from worker
            except KeyError as error:
                text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
                return error.args[0], "failing_worker_coroutine" in text
            return "not raised"

        worker = self.loop.create_task(failing_worker_coroutine())
        self.assertEqual(self.run_co(waiting_coroutine(worker)), ("worker broke", True))

    def test_keyboard_interrupt_from_another_task_leaves_the_loop_usable(self):
        log = []

        def interrupter():
            yield from crawl.sleep(0.01)
            raise KeyboardInterrupt

        def long_runner():
            try:
                yield from crawl.sleep(10)
            except crawl.CancelledError:
                log.append("long runner cleaned up")
                raise

        interrupting = self.loop.create_task(interrupter())
        main = self.loop.create_task(long_runner())
        with self.assertRaises(KeyboardInterrupt):
            self.loop.run_until_complete(main)
        self.assertFalse(self.loop.is_running())
        with self.assertRaises(RuntimeError):
            crawl.get_running_loop()
        self.assertTrue(interrupting.done())
        self.assertIs(type(interrupting.exception()), KeyboardInterrupt)
        self.assertFalse(main.done())
        # Clean up on the same loop, as the crawler does to print its report.
        self.assertTrue(main.cancel())
        with self.assertRaises(crawl.CancelledError):
            self.run_briefly(main)
        self.assertEqual(log, ["long runner cleaned up"])
        self.assertEqual(self.run_co(crawl.sleep(0.01, "still works")), "still works")

    def test_keyboard_interrupt_from_the_main_task_leaves_the_loop_usable(self):
        def interrupted_main():
            yield from crawl.sleep(0)
            raise KeyboardInterrupt

        main = self.loop.create_task(interrupted_main())
        with self.assertRaises(KeyboardInterrupt):
            self.loop.run_until_complete(main)
        self.assertTrue(main.done())
        self.assertIs(type(main.exception()), KeyboardInterrupt)
        self.assertFalse(self.loop.is_running())
        # The loop must run the clean-up to completion.
        self.assertEqual(self.loop.run_until_complete(crawl.sleep(0.01, "cleaned up")), "cleaned up")

    def test_keyboard_interrupt_from_a_callback_leaves_the_loop_usable(self):
        def interrupt():
            raise KeyboardInterrupt

        sleeper = self.loop.create_task(crawl.sleep(0.02, "slept"))
        self.loop.call_soon(interrupt)
        with self.assertRaises(KeyboardInterrupt):
            self.loop.run_until_complete(sleeper)
        self.assertFalse(sleeper.done())
        self.assertEqual(self.run_briefly(sleeper), "slept")

    def test_sigint_while_blocked_in_select(self):
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            self.skipTest("SIGINT is not handled by the default handler here")
        if threading.current_thread() is not threading.main_thread():
            self.skipTest("signals only reach the main thread")
        log = []

        def sleeper():
            try:
                yield from crawl.sleep(10)
            except crawl.CancelledError:
                log.append("cancelled after the interrupt")
                raise

        task = self.loop.create_task(sleeper())
        timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT))
        start = time.monotonic()
        try:
            with self.assertRaises(KeyboardInterrupt):
                timer.start()
                self.loop.run_until_complete(task)
        finally:
            timer.join()
        self.assertLess(time.monotonic() - start, 5)
        self.assertFalse(task.done())
        task.cancel()
        with self.assertRaises(crawl.CancelledError):
            self.run_briefly(task)
        self.assertEqual(log, ["cancelled after the interrupt"])
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))

    def test_awaiting_an_already_done_future_resumes(self):
        done = crawl.Future(self.loop)
        done.set_result("ready")
        failed = crawl.Future(self.loop)
        failed.set_exception(ValueError("already failed"))

        def coroutine():
            first = yield from done
            second = yield from done
            try:
                yield from failed
            except ValueError as error:
                third = str(error)
            return first, second, third

        self.assertEqual(self.run_co(coroutine()), ("ready", "ready", "already failed"))

        def raw_yield():
            # The Task protocol itself: yielding a future that is done wakes
            # the task again at once (the chapter's sketch never resumed).
            yield done
            return "resumed"

        self.assertEqual(self.run_co(raw_yield()), "resumed")

    def test_bare_yield_gives_up_control_for_one_iteration(self):
        log = []

        def worker(name):
            for i in range(3):
                log.append(f"{name}{i}")
                yield

        def main():
            yield from crawl.gather(worker("a"), worker("b"))

        self.run_co(main())
        self.assertEqual(log, ["a0", "b0", "a1", "b1", "a2", "b2"])

    def test_yielding_a_generator_throws_runtime_error(self):
        def helper_coroutine():
            yield from crawl.sleep(0)
            return 1

        def mistaken():
            try:
                yield helper_coroutine()  # should be `yield from`
            except RuntimeError as error:
                return str(error)
            return "no error"

        message = self.run_co(mistaken())
        self.assertIn("yield from", message)
        self.assertIn("helper_coroutine", message)

    def test_yielding_an_int_throws_runtime_error(self):
        def mistaken():
            try:
                yield 42
            except RuntimeError as error:
                return str(error)
            return "no error"

        message = self.run_co(mistaken())
        self.assertIn("42", message)
        self.assertIn("not a Future", message)

        def uncaught():
            yield "a string"

        task = self.loop.create_task(uncaught())
        with self.assertRaises(RuntimeError) as cm:
            self.run_briefly(task)
        self.assertIn("'a string'", str(cm.exception))
        self.assertIs(task.exception(), cm.exception)

    def test_unretrieved_exception_is_logged_when_collected(self):
        def doomed_coroutine():
            yield
            raise ValueError("nobody looked at me")

        task = self.loop.create_task(doomed_coroutine())
        for _ in range(10):
            if task.done():
                break
            run_one_iteration(self.loop)
        self.assertTrue(task.done())
        with self.assertLogs("crawl", "ERROR") as cm:
            del task
            gc.collect()
        self.assertEqual(len(cm.records), 1)
        record = cm.records[0]
        self.assertIn("never retrieved", record.getMessage())
        self.assertIs(record.exc_info[0], ValueError)
        self.assertIn("doomed_coroutine", cm.output[0])
        self.assertIn("nobody looked at me", cm.output[0])

    def test_retrieved_or_cancelled_tasks_are_not_logged(self):
        def failing():
            yield
            raise ValueError("seen")

        def sleeping():
            yield from crawl.sleep(10)

        retrieved = self.loop.create_task(failing())
        cancelled = self.loop.create_task(sleeping())
        succeeded = self.loop.create_task(crawl.sleep(0, "fine"))
        with self.assertRaises(ValueError):
            self.loop.run_until_complete(retrieved)
        cancelled.cancel()
        with self.assertRaises(crawl.CancelledError):
            self.loop.run_until_complete(cancelled)
        self.assertEqual(self.loop.run_until_complete(succeeded), "fine")

        def collect():
            nonlocal retrieved, cancelled, succeeded
            retrieved = cancelled = succeeded = None
            gc.collect()

        self.assert_no_errors_logged(collect)


class RuntimeTaskCancelTest(RuntimeTestCase):

    def test_cancel_while_waiting_on_a_shared_future(self):
        shared = crawl.Future(self.loop)
        log = []

        def victim():
            try:
                yield from shared
            except crawl.CancelledError:
                log.append("victim cleaned up")
                raise

        def bystander():
            value = yield from shared
            log.append(("bystander got", value))
            return value

        victim_task = self.loop.create_task(victim())
        bystander_task = self.loop.create_task(bystander())
        run_one_iteration(self.loop)  # both now wait on shared
        self.assertTrue(victim_task.cancel())
        with self.assertRaises(crawl.CancelledError):
            self.run_briefly(victim_task)
        self.assertTrue(victim_task.cancelled())
        self.assertFalse(victim_task.cancel())  # already done
        self.assertEqual(log, ["victim cleaned up"])
        self.assertFalse(shared.done())  # others wait on it: left alone
        shared.set_result("shared value")
        self.assertEqual(self.run_briefly(bystander_task), "shared value")
        self.assertEqual(log, ["victim cleaned up", ("bystander got", "shared value")])

    def test_cancel_while_sleeping(self):
        log = []

        def sleeper():
            try:
                yield from crawl.sleep(10)
            except crawl.CancelledError:
                log.append("cleanup")
                return "cleaned up"
            return "slept"

        task = self.loop.create_task(sleeper())
        self.loop.call_later(0.01, task.cancel)
        start = time.monotonic()
        self.assertEqual(self.run_briefly(task), "cleaned up")
        self.assertLess(time.monotonic() - start, 2)
        self.assertFalse(task.cancelled())  # it caught the CancelledError
        self.assertEqual(log, ["cleanup"])
        self.loop.run_until_complete(crawl.sleep(0))
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))  # the 10 s timer is gone

    def test_cancel_while_sleeping_reraised(self):
        task = self.loop.create_task(crawl.sleep(10))
        self.loop.call_later(0.01, task.cancel)
        with self.assertRaises(crawl.CancelledError):
            self.run_briefly(task)
        self.assertTrue(task.cancelled())
        self.loop.run_until_complete(crawl.sleep(0))
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))

    def test_cancel_while_waiting_for_a_socket(self):
        a, b = self.socketpair()
        log = []

        def reader():
            try:
                return (yield from crawl.read(a))
            except crawl.CancelledError:
                log.append("reader cleaned up")
                raise

        task = self.loop.create_task(reader())
        run_one_iteration(self.loop)
        self.assertEqual(self.loop.pending_work(), (0, 0, 1))  # watching a
        self.assertTrue(task.cancel())
        with self.assertRaises(crawl.CancelledError):
            self.run_briefly(task)
        self.assertEqual(log, ["reader cleaned up"])
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))
        self.assertFalse(self.loop.remove_reader(a))  # already removed
        b.sendall(b"still usable")
        self.assertEqual(self.run_co(crawl.read(a)), b"still usable")

    def test_cancel_while_waiting_to_write(self):
        a, b = self.socketpair()
        log = []

        def writer():
            try:
                yield from crawl.sendall(a, b"x" * (16 << 20))  # more than the buffer
            except crawl.CancelledError:
                log.append("writer cleaned up")
                raise

        task = self.loop.create_task(writer())
        self.loop.call_later(0.02, task.cancel)
        with self.assertRaises(crawl.CancelledError):
            self.run_briefly(task)
        self.assertEqual(log, ["writer cleaned up"])
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))

    def test_cancel_before_the_first_step(self):
        log = []

        def never_started():
            log.append("ran")
            yield

        task = self.loop.create_task(never_started())
        self.assertTrue(task.cancel())
        with self.assertRaises(crawl.CancelledError):
            self.run_briefly(task)
        self.assertTrue(task.cancelled())
        self.assertEqual(log, [])

    def test_cancel_during_a_bare_yield(self):
        log = []

        def yielder():
            try:
                while True:
                    yield
                    log.append("tick")
            except crawl.CancelledError:
                log.append("cancelled")
                return "stopped"

        task = self.loop.create_task(yielder())
        run_one_iteration(self.loop)  # first step: to the first yield
        run_one_iteration(self.loop)  # one tick
        task.cancel()
        self.assertEqual(self.run_briefly(task), "stopped")
        self.assertEqual(log, ["tick", "cancelled"])

    def test_a_task_cancelling_itself(self):
        holder = []
        log = []

        def self_cancelling():
            holder[0].cancel()
            try:
                yield from crawl.sleep(10)
            except crawl.CancelledError:
                log.append("saw own cancellation")
                raise

        task = self.loop.create_task(self_cancelling())
        holder.append(task)
        start = time.monotonic()
        with self.assertRaises(crawl.CancelledError):
            self.run_briefly(task)
        self.assertLess(time.monotonic() - start, 2)
        self.assertEqual(log, ["saw own cancellation"])
        self.loop.run_until_complete(crawl.sleep(0))
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))

    def test_cancelling_twice_throws_in_once(self):
        caught = []

        def coroutine():
            try:
                yield from crawl.sleep(10)
            except crawl.CancelledError:
                caught.append("first")
            yield from crawl.sleep(0.01)
            return len(caught)

        task = self.loop.create_task(coroutine())
        run_one_iteration(self.loop)
        self.assertTrue(task.cancel())
        self.assertTrue(task.cancel())
        self.assertEqual(self.run_briefly(task), 1)
        self.assertEqual(caught, ["first"])

    def test_a_deadline_swallowed_once_still_times_out_next_time(self):
        def coroutine():
            try:
                with crawl.timeout(0.01):
                    try:
                        yield from crawl.sleep(1)
                    except crawl.CancelledError:
                        pass  # swallowed: the block ends normally
            except TimeoutError:
                pass
            task = crawl.current_task()
            first = task.cancelling()
            try:
                with crawl.timeout(0.01):
                    yield from crawl.sleep(1)
            except TimeoutError:
                return first, "timed out"
            return first, "no timeout"

        self.assertEqual(self.run_co(coroutine()), (0, "timed out"))

    def test_a_task_that_cancels_itself_counts_once(self):
        def coroutine():
            task = crawl.current_task()
            task.cancel()
            try:
                yield from crawl.sleep(1)
            except crawl.CancelledError:
                return task.cancelling()

        self.assertEqual(self.run_co(coroutine()), 1)


class RuntimeAsyncDefTest(RuntimeTestCase):

    def test_async_def_awaits_a_future_on_this_loop(self):
        future = crawl.Future(self.loop)

        async def main():
            value = await future
            task_value = await self.loop.create_task(crawl.sleep(0.01, "task"))
            return value, task_value, crawl.get_running_loop() is self.loop

        self.loop.call_later(0.01, future.set_result, "future")
        self.assertEqual(self.run_co(main()), ("future", "task", True))

    def test_async_def_task_is_cancelled_while_awaiting(self):
        future = crawl.Future(self.loop)
        log = []

        async def waiter():
            try:
                await future
            except crawl.CancelledError:
                log.append("async cleanup")
                raise

        task = self.loop.create_task(waiter())
        self.assertIn("waiter", task.name)
        self.loop.call_later(0.01, task.cancel)
        with self.assertRaises(crawl.CancelledError):
            self.run_briefly(task)
        self.assertEqual(log, ["async cleanup"])
        self.assertFalse(future.done())

    def test_async_def_exception_keeps_its_frame(self):
        async def failing_async_coroutine():
            await crawl.Task(crawl.sleep(0))
            raise ValueError("async failure")

        try:  # not assertRaises: it strips the traceback
            self.loop.run_until_complete(failing_async_coroutine())
        except ValueError as caught:
            error = caught
        else:
            self.fail("ValueError not raised")
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        self.assertIn("failing_async_coroutine", text)


# ---------------------------------------------------------------------------
# 2. The event loop
# ---------------------------------------------------------------------------


class RuntimeEventLoopTest(RuntimeTestCase):

    def test_call_soon_order(self):
        log = []

        def record(*args):
            log.append(args)

        def nested():
            log.append("nested ran")
            self.loop.call_soon(log.append, "scheduled by nested")

        for i in range(3):
            self.loop.call_soon(log.append, i)
        self.loop.call_soon(nested)
        self.loop.call_soon(record, "a", 1, 2)
        cancelled = self.loop.call_soon(log.append, "cancelled")
        cancelled.cancel()
        self.loop.call_soon(log.append, "last")
        run_one_iteration(self.loop)
        # Only what was ready when the pass began ran.
        self.assertEqual(log, [0, 1, 2, "nested ran", ("a", 1, 2), "last"])
        run_one_iteration(self.loop)
        self.assertEqual(log[-1], "scheduled by nested")
        self.assertEqual(len(log), 7)

    def test_timer_order_including_equal_deadlines(self):
        log = []

        def record(name, when):
            log.append(name)
            self.assertGreaterEqual(self.loop.time(), when)  # never early

        handles = {}
        handles["zero"] = self.loop.call_later(0, lambda: record("zero", handles["zero_when"]))
        now = handles["zero_when"] = handles["zero"].when  # the loop time it was scheduled at
        self.loop.call_later(0.03, record, "late", now + 0.03)
        self.loop.call_at(now + 0.01, record, "early", now + 0.01)
        same = now + 0.02
        for name in ("same1", "same2", "same3", "same4"):
            handle = self.loop.call_at(same, record, name, same)
            self.assertEqual(handle.when, same)
        self.loop.call_later(0.05, self.loop.stop)
        self.loop.run_forever()
        self.assertEqual(log, ["zero", "early", "same1", "same2", "same3", "same4", "late"])

    def test_many_equal_deadlines_keep_scheduling_order(self):
        log = []
        base = self.loop.time() + 0.005
        for i in range(300):
            self.loop.call_at(base + (i % 3) * 0.001, log.append, i)
        self.loop.call_at(base + 0.01, self.loop.stop)
        self.loop.run_forever()
        self.assertEqual(log, sorted(range(300), key=lambda i: (i % 3, i)))

    def test_cancel_a_timer(self):
        log = []
        cancelled = self.loop.call_later(0.01, log.append, "cancelled")
        self.loop.call_later(0.01, log.append, "kept")
        cancelled.cancel()
        cancelled.cancel()  # twice is harmless
        self.assertTrue(cancelled.cancelled)
        self.assertEqual(self.loop.pending_work(), (0, 1, 0))
        self.loop.call_later(0.02, self.loop.stop)
        self.loop.run_forever()
        self.assertEqual(log, ["kept"])
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))

    def test_cancel_a_due_timer_from_another_timer(self):
        log = []
        when = self.loop.time() + 0.01
        handles = {}

        def first():
            log.append("first")
            handles["second"].cancel()

        self.loop.call_at(when, first)
        handles["second"] = self.loop.call_at(when, log.append, "second")
        self.loop.call_at(when, log.append, "third")
        self.loop.call_at(when + 0.01, self.loop.stop)
        self.loop.run_forever()
        self.assertEqual(log, ["first", "third"])

    def test_many_cancelled_timers(self):
        log = []
        handles = [self.loop.call_later(0.005 + i / 100000, log.append, i) for i in range(300)]
        for i, handle in enumerate(handles):
            if i != 150:
                handle.cancel()
        self.assertEqual(self.loop.pending_work(), (0, 1, 0))
        self.loop.call_later(0.02, self.loop.stop)
        self.loop.run_forever()
        self.assertEqual(log, [150])
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))

    def test_a_raising_callback_is_logged_and_the_loop_goes_on(self):
        log = []

        def failing_callback():
            raise ValueError("callback failure")

        self.loop.call_soon(failing_callback)
        self.loop.call_soon(log.append, "after")
        self.loop.call_later(0.001, failing_callback)
        self.loop.call_later(0.002, log.append, "timer after")
        self.loop.call_later(0.01, self.loop.stop)
        with self.assertLogs("crawl", "ERROR") as cm:
            self.loop.run_forever()
        self.assertEqual(log, ["after", "timer after"])
        self.assertEqual(len(cm.records), 2)
        for record, output in zip(cm.records, cm.output):
            self.assertIn("Exception in callback", record.getMessage())
            self.assertIn("failing_callback", record.getMessage())
            self.assertIs(record.exc_info[0], ValueError)
            self.assertIn("Traceback", output)
            self.assertIn('raise ValueError("callback failure")', output)
        self.assertEqual(self.run_co(crawl.sleep(0, "alive")), "alive")

    def test_reader_and_writer_on_the_same_socket(self):
        a, b = self.socketpair()
        b.sendall(b"ping")  # a is readable, and writable as always
        log = []
        self.loop.add_reader(a, log.append, "read")
        self.loop.add_writer(a, log.append, "write")
        self.assertEqual(self.loop.pending_work(), (0, 0, 1))  # one socket
        run_one_iteration(self.loop)
        self.assertEqual(sorted(log), ["read", "write"])

        self.assertTrue(self.loop.remove_writer(a))
        self.assertFalse(self.loop.remove_writer(a))
        log.clear()
        run_one_iteration(self.loop)
        self.assertEqual(log, ["read"])

        self.loop.add_writer(a.fileno(), log.append, "write by fd")  # int fds too
        log.clear()
        run_one_iteration(self.loop)
        self.assertEqual(sorted(log), ["read", "write by fd"])

        self.assertTrue(self.loop.remove_reader(a.fileno()))
        self.assertFalse(self.loop.remove_reader(a))
        log.clear()
        run_one_iteration(self.loop)
        self.assertEqual(log, ["write by fd"])

        self.assertTrue(self.loop.remove_writer(a))
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))
        log.clear()
        run_one_iteration(self.loop)
        self.assertEqual(log, [])
        self.assertFalse(self.loop.remove_reader(b))  # never watched
        self.assertFalse(self.loop.remove_writer(b))

    def test_add_reader_again_replaces_the_callback(self):
        a, b = self.socketpair()
        b.sendall(b"x")
        log = []
        self.loop.add_reader(a, log.append, "old")
        self.loop.add_reader(a, log.append, "new")
        run_one_iteration(self.loop)
        self.assertEqual(log, ["new"])
        self.assertTrue(self.loop.remove_reader(a))
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))

    def test_a_stream_keeps_its_socket_in_the_selector_between_reads(self):
        a, b = self.socketpair()
        stream = crawl.Stream(a)
        self.loop.call_later(0.01, b.sendall, b"first")

        def coroutine():
            first = yield from stream.read()  # waits: registered
            key = self.loop._selector.get_map()[a.fileno()]
            watched = self.loop.pending_work()[2]
            self.loop.call_later(0.01, b.sendall, b"second")
            second = yield from stream.read()  # waits: the same registration again
            return first, watched, key is self.loop._selector.get_map()[a.fileno()], second

        self.assertEqual(self.run_co(coroutine()), (b"first", 0, True, b"second"))
        self.assertIn(a.fileno(), self.loop._selector.get_map())  # parked, not watched

    def test_a_parked_socket_that_turns_ready_leaves_the_selector(self):
        a, b = self.socketpair()
        stream = crawl.Stream(a)
        self.loop.call_later(0.01, b.sendall, b"head")
        self.assertEqual(self.run_co(stream.read()), b"head")
        self.assertIn(a.fileno(), self.loop._selector.get_map())  # parked
        b.sendall(b"more")  # nobody reads now
        run_one_iteration(self.loop)
        self.assertNotIn(a.fileno(), self.loop._selector.get_map())  # not reported again
        self.assertEqual(self.run_co(stream.read()), b"more")
        self.loop.call_later(0.01, b.close)
        self.assertEqual(self.run_co(stream.read()), b"")  # waited for the end again

    def test_closing_a_stream_forgets_its_parked_socket(self):
        a, b = self.socketpair()
        stream = crawl.Stream(a)
        self.loop.call_later(0.01, b.sendall, b"data")
        number = a.fileno()

        def coroutine():
            data = yield from stream.read()
            parked = number in self.loop._selector.get_map()
            stream.close()
            return data, parked

        self.assertEqual(self.run_co(coroutine()), (b"data", True))
        self.assertNotIn(number, self.loop._selector.get_map())

    def test_a_stream_closed_after_the_loop_stopped_forgets_its_parked_socket(self):
        # As Client.close() after run_until_complete does: the thread's loop
        # is told, so that no closed socket stays in its selector.
        a, b = self.socketpair()
        stream = crawl.Stream(a)
        self.loop.call_later(0.01, b.sendall, b"data")
        number = a.fileno()
        self.assertEqual(self.run_co(stream.read()), b"data")
        stream.close()
        self.assertNotIn(number, self.loop._selector.get_map())
        self.assertEqual(self.loop._parked, {})

    def test_waiting_on_a_parked_socket_closed_unforgotten_fails(self):
        a, b = self.socketpair()
        stream = crawl.Stream(a)
        self.loop.call_later(0.01, b.sendall, b"data")
        self.assertEqual(self.run_co(stream.read()), b"data")
        a.close()  # closed without Stream.close: the loop is not told
        with self.assertRaises(ValueError):  # as for any closed socket, not a wait
            self.run_co(crawl.wait_readable(a, timeout=5))

    def test_a_parked_socket_closed_unforgotten_does_not_hide_a_new_one(self):
        a, b = self.socketpair()
        stream = crawl.Stream(a)
        self.loop.call_later(0.01, b.sendall, b"data")
        self.assertEqual(self.run_co(stream.read()), b"data")
        number = a.fileno()
        self.assertIn(number, self.loop._selector.get_map())  # parked
        c, d = self.socketpair()
        # a closed without Stream.close (the loop is not told), and its number
        # given to another socket: what a leaked connection may come to
        os.dup2(c.fileno(), number)
        a.detach()
        reused = socket.socket(fileno=number)
        self.addCleanup(reused.close)
        log = []
        self.loop.add_reader(reused, log.append, "new socket")
        d.sendall(b"x")
        run_one_iteration(self.loop)
        self.assertEqual(log, ["new socket"])
        self.assertTrue(self.loop.remove_reader(reused))

    def test_park_reader_of_a_socket_also_written_removes_the_reader(self):
        a, b = self.socketpair()
        log = []
        reader = self.loop.add_reader(a, log.append, "read")
        self.loop.add_writer(a, log.append, "write")
        self.assertTrue(self.loop.park_reader(a, reader))
        b.sendall(b"x")
        run_one_iteration(self.loop)
        self.assertEqual(log, ["write"])
        self.assertFalse(self.loop.remove_reader(a))
        self.assertTrue(self.loop.remove_writer(a))
        self.assertNotIn(a.fileno(), self.loop._selector.get_map())

    def test_call_soon_threadsafe_wakes_a_blocked_select(self):
        future = crawl.Future(self.loop)
        main_thread = threading.get_ident()
        # Only a safety net: without the wake-up the loop would sit in
        # select() for 10 s and then fail.
        safety = self.loop.call_later(10, crawl._set_exception_unless_done, future,
                                      AssertionError("the thread did not wake the loop"))

        def from_thread():
            time.sleep(0.1)  # the loop is blocked in select() by now
            self.loop.call_soon_threadsafe(
                lambda: future.set_result(("woken", threading.get_ident())))

        thread = threading.Thread(target=from_thread)
        start = time.monotonic()
        thread.start()
        try:
            result = self.loop.run_until_complete(future)
        finally:
            thread.join()
            safety.cancel()
        self.assertEqual(result, ("woken", main_thread))  # the callback ran on the loop's thread
        self.assertLess(time.monotonic() - start, 2)

    def test_call_soon_threadsafe_many_calls(self):
        # More calls than the wake-up socket can buffer: none may be lost.
        log = []

        def from_thread():
            for i in range(3000):
                self.loop.call_soon_threadsafe(log.append, i)

        thread = threading.Thread(target=from_thread)
        thread.start()
        thread.join()
        run_one_iteration(self.loop)
        self.assertEqual(log, list(range(3000)))
        self.assertEqual(self.run_co(crawl.sleep(0.01, "fine")), "fine")

    def test_run_in_thread(self):
        main_thread = threading.get_ident()
        ticks = []

        def ticker():
            while True:
                yield from crawl.sleep(0.01)
                ticks.append(1)

        def coroutine():
            tick_task = crawl.Task(ticker())
            ident = yield from self.loop.run_in_thread(threading.get_ident)
            value = yield from self.loop.run_in_thread(pow, 2, 10)
            slow = yield from self.loop.run_in_thread(lambda: time.sleep(0.2) or "slow")
            try:
                yield from self.loop.run_in_thread(int, "not a number")
            except ValueError as error:
                message = str(error)
            else:
                message = None
            tick_task.cancel()
            return ident, value, slow, message

        ident, value, slow, message = self.run_co(coroutine())
        self.assertNotEqual(ident, main_thread)
        self.assertEqual(value, 1024)
        self.assertEqual(slow, "slow")
        self.assertIn("not a number", message)
        self.assertGreaterEqual(len(ticks), 3)  # the loop ran on during the 0.2 s call

    def test_run_until_complete_returns_or_raises(self):
        def returning():
            yield from crawl.sleep(0)
            return "returned"

        def raising():
            yield from crawl.sleep(0)
            raise KeyError("raised")

        async def native():
            return "native"

        self.assertEqual(self.loop.run_until_complete(returning()), "returned")
        with self.assertRaises(KeyError) as cm:
            self.loop.run_until_complete(raising())
        self.assertEqual(cm.exception.args, ("raised",))
        self.assertEqual(self.loop.run_until_complete(native()), "native")

        done = crawl.Future(self.loop)
        done.set_result("already")
        self.assertEqual(self.loop.run_until_complete(done), "already")

        later = crawl.Future(self.loop)
        self.loop.call_later(0.01, later.set_result, "later")
        self.assertEqual(self.loop.run_until_complete(later), "later")

        cancelled = crawl.Future(self.loop)
        self.loop.call_soon(cancelled.cancel)
        with self.assertRaises(crawl.CancelledError):
            self.loop.run_until_complete(cancelled)
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))

    def test_stop_ends_run_forever(self):
        log = []
        self.loop.call_soon(lambda: log.append(("running", self.loop.is_running())))
        self.loop.call_later(0.01, self.loop.stop)
        self.loop.call_later(5, log.append, "never")
        start = time.monotonic()
        self.loop.run_forever()
        self.assertLess(time.monotonic() - start, 2)
        self.assertEqual(log, [("running", True)])
        self.assertFalse(self.loop.is_running())
        # The loop can run again afterwards.
        self.assertEqual(self.loop.run_until_complete(crawl.sleep(0, "again")), "again")

    def test_nested_run_is_refused(self):
        other = crawl.EventLoop()
        self.addCleanup(other.close)

        def coroutine():
            yield
            errors = []
            for loop in (self.loop, other):
                try:
                    loop.run_until_complete(crawl.Future(loop))
                except RuntimeError as error:
                    errors.append(str(error))
            return errors

        errors = self.run_co(coroutine())
        self.assertEqual(len(errors), 2)
        self.assertIn("already running", errors[0])
        self.assertIn("another loop", errors[1])

    def test_close_releases_the_selector_and_wakeup_sockets(self):
        before = open_fds()
        loop = crawl.EventLoop()
        self.assertEqual(len(open_fds() - before), 3)  # selector + socket pair
        self.assertEqual(loop.run_until_complete(crawl.Task(crawl.sleep(0.01, "ran"), loop)), "ran")
        self.assertEqual(loop.run_until_complete(loop.run_in_thread(pow, 3, 3)), 27)
        self.assertFalse(loop.is_closed())
        loop.close()
        self.assertTrue(loop.is_closed())
        self.assertEqual(open_fds(), before)
        loop.close()  # twice is harmless
        self.assertEqual(open_fds(), before)
        with self.assertRaises(RuntimeError):
            loop.run_forever()
        with self.assertRaises(RuntimeError):
            loop.run_until_complete(crawl.Future(loop))
        a, b = self.socketpair()
        with self.assertRaises(RuntimeError):
            loop.add_reader(a, print)

    def test_close_while_running_is_refused(self):
        def coroutine():
            yield
            try:
                self.loop.close()
            except RuntimeError:
                return "refused"
            return "closed"

        self.assertEqual(self.run_co(coroutine()), "refused")
        self.assertFalse(self.loop.is_closed())

    def test_get_event_loop_and_get_running_loop(self):
        other = crawl.EventLoop()
        self.addCleanup(other.close)

        def probe():
            yield from crawl.sleep(0.01)  # would hang on the wrong loop
            return crawl.get_event_loop(), crawl.get_running_loop()

        other.call_later(2, other.stop)  # safety net
        self.assertEqual(other.run_until_complete(probe()), (other, other))
        with self.assertRaises(RuntimeError):
            crawl.get_running_loop()
        self.assertIs(crawl.get_event_loop(), self.loop)  # the default again

        self.assertEqual(self.run_co(probe()), (self.loop, self.loop))

    def test_run_makes_and_closes_its_own_loop(self):
        before = open_fds()
        seen = []

        def coroutine():
            seen.append(crawl.get_running_loop())
            return (yield from crawl.sleep(0.01, "from run"))

        self.assertEqual(crawl.run(coroutine()), "from run")
        self.assertIsNot(seen[0], self.loop)
        self.assertTrue(seen[0].is_closed())
        self.assertEqual(open_fds(), before)

        def failing():
            yield
            raise ValueError("run failed")

        with self.assertRaisesRegex(ValueError, "run failed"):
            crawl.run(failing())
        self.assertEqual(open_fds(), before)

    def test_run_lets_the_main_task_clean_up_after_ctrl_c(self):
        cleaned = []

        def interrupt():
            raise KeyboardInterrupt

        def main():
            crawl.get_event_loop().call_soon(interrupt)
            try:
                yield from crawl.sleep(10)
            finally:
                yield from crawl.sleep(0)  # a clean-up that itself waits
                cleaned.append(True)

        with self.assertRaises(KeyboardInterrupt):
            crawl.run(main())
        self.assertEqual(cleaned, [True])


# ---------------------------------------------------------------------------
# 3. Socket coroutines
# ---------------------------------------------------------------------------


class RuntimeSocketTest(RuntimeTestCase):

    def test_sleep_order_and_result(self):
        log = []

        def sleeper(delay):
            value = yield from crawl.sleep(delay, delay)
            log.append(value)
            return value

        def main():
            # 50 ms apart: robust against a busy machine pausing the loop
            return (yield from crawl.gather(*(sleeper(d) for d in (0.15, 0, 0.1, 0.05, -1))))

        self.assertEqual(self.run_co(main()), [0.15, 0, 0.1, 0.05, -1])
        self.assertEqual(log, [0, -1, 0.05, 0.1, 0.15])

    def test_a_thousand_concurrent_tasks(self):
        rng = random.Random(1000)
        delays = [rng.randint(0, 50) / 1000 for _ in range(1000)]
        active = [0, 0]  # now, peak

        def worker(i):
            active[0] += 1
            active[1] = max(active[1], active[0])
            yield from crawl.sleep(delays[i])
            active[0] -= 1
            return i

        def main():
            return (yield from crawl.gather(*(worker(i) for i in range(1000))))

        start = time.monotonic()
        self.assertEqual(self.run_co(main()), list(range(1000)))
        self.assertLess(time.monotonic() - start, 5)  # serially it would take ~25 s
        self.assertEqual(active, [0, 1000])

    def test_connect_to_a_closed_port_is_refused(self):
        port = refused_port(self)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(sock.close)
        with self.assertRaises(ConnectionRefusedError) as cm:
            self.run_briefly(crawl.connect(sock, ("127.0.0.1", port)))
        self.assertEqual(cm.exception.errno, errno.ECONNREFUSED)
        self.assertIn(f"127.0.0.1:{port}", str(cm.exception))
        self.loop.run_until_complete(crawl.sleep(0))
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))

    def test_read_and_read_all_against_a_local_server(self):
        tail = b" world, " + bytes(range(256)) * 1000

        def script(conn):
            time.sleep(0.1)  # the client waits for readability meanwhile
            conn.sock.sendall(b"hello")
            got = b""
            while len(got) < 4:
                got += conn.sock.recv(4 - len(got))
            if got == b"more":
                conn.sock.sendall(tail)
            conn.close()

        server = self.scripted(script)
        ticks = []

        def ticker():
            while True:
                yield from crawl.sleep(0.005)
                ticks.append(1)

        def client():
            tick_task = crawl.Task(ticker())
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                yield from crawl.connect(sock, ("127.0.0.1", server.port))
                first = yield from crawl.read(sock, 3)
                second = yield from crawl.read(sock, 100)
                yield from crawl.sendall(sock, b"more")
                rest = yield from crawl.read_all(sock)
                at_eof = yield from crawl.read(sock)
                return first, second, rest, at_eof
            finally:
                sock.close()
                tick_task.cancel()

        first, second, rest, at_eof = self.run_co(client())
        self.assertEqual(first, b"hel")
        self.assertEqual(second, b"lo")
        self.assertEqual(rest, tail)
        self.assertEqual(at_eof, b"")
        self.assertGreaterEqual(len(ticks), 3)  # the loop ran while read() waited

    def test_sendall_8_mib_to_a_slow_reader(self):
        data = os.urandom(8 << 20)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(listener.close)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        received = {"digest": hashlib.sha256(), "bytes": 0, "reads": 0}

        def slow_reader():
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(10)
                while True:
                    chunk = conn.recv(32768)
                    if not chunk:
                        return
                    received["digest"].update(chunk)
                    received["bytes"] += len(chunk)
                    received["reads"] += 1
                    time.sleep(0.001)

        thread = threading.Thread(target=slow_reader)
        thread.start()
        self.addCleanup(thread.join, 10)

        ticks = []

        def ticker():
            while True:
                yield from crawl.sleep(0.005)
                ticks.append(1)

        sock = CountingSocket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(sock.close)

        def sender():
            tick_task = crawl.Task(ticker())
            try:
                yield from crawl.connect(sock, listener.getsockname())
                yield from crawl.sendall(sock, data)
            finally:
                sock.close()
                tick_task.cancel()

        start = time.monotonic()
        self.run_co(sender(), timeout=10)
        thread.join(10)
        self.assertFalse(thread.is_alive())
        self.assertEqual(received["bytes"], len(data))
        self.assertEqual(received["digest"].hexdigest(), hashlib.sha256(data).hexdigest())
        self.assertGreater(sock.sends, 1)  # send() really was partial
        self.assertGreater(received["reads"], 10)
        self.assertGreaterEqual(len(ticks), 3)  # the loop ran while sendall waited
        self.assertLess(time.monotonic() - start, 5)

    def test_wait_for_timeout_cancels_the_inner_task(self):
        log = []

        def slow():
            try:
                yield from crawl.sleep(10)
            except crawl.CancelledError:
                log.append("inner cancelled")
                raise
            return "finished"

        inner = self.loop.create_task(slow())

        def outer():
            try:
                yield from crawl.wait_for(inner, 0.05)
            except TimeoutError as error:
                return error, inner.done(), inner.cancelled()
            return "no timeout"

        start = time.monotonic()
        error, done, cancelled = self.run_co(outer())
        self.assertLess(time.monotonic() - start, 2)
        self.assertIs(type(error), TimeoutError)  # the builtin
        self.assertEqual((done, cancelled), (True, True))
        self.assertEqual(log, ["inner cancelled"])

        log.clear()
        with self.assertRaises(TimeoutError):
            self.loop.run_until_complete(crawl.wait_for(slow(), 0.02))  # a coroutine
        self.assertEqual(log, ["inner cancelled"])
        self.loop.run_until_complete(crawl.sleep(0))
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))

    def test_wait_for_returns_the_value_when_fast(self):
        def raising():
            yield from crawl.sleep(0.01)
            raise KeyError("inner error")

        def main():
            fast = yield from crawl.wait_for(crawl.sleep(0.01, "fast"), 5)
            unlimited = yield from crawl.wait_for(crawl.sleep(0.01, "no limit"), None)
            future = crawl.Future()
            crawl.get_event_loop().call_later(0.01, future.set_result, "future")
            from_future = yield from crawl.wait_for(future, 5)
            try:
                yield from crawl.wait_for(raising(), 5)
            except KeyError as error:
                error_text = error.args[0]
            return fast, unlimited, from_future, error_text

        self.assertEqual(self.run_co(main()), ("fast", "no limit", "future", "inner error"))
        # run_co checked that no 5 s timer is left behind

    def test_wait_for_cancelled_from_outside_cancels_the_inner_task(self):
        log = []

        def slow():
            try:
                yield from crawl.sleep(10)
            except crawl.CancelledError:
                log.append("inner cancelled")
                raise

        inner = self.loop.create_task(slow())
        outer = self.loop.create_task(crawl.wait_for(inner, 5))
        self.loop.call_later(0.01, outer.cancel)
        with self.assertRaises(crawl.CancelledError):
            self.loop.run_until_complete(outer)
        self.loop.run_until_complete(crawl.sleep(0))
        self.assertTrue(inner.cancelled())
        self.assertEqual(log, ["inner cancelled"])
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))

    def test_cancel_right_after_the_wait_for_deadline_is_not_lost(self):
        # As for timeout(): the outer task is cancelled in the iteration in
        # which its wait_for deadline expires; the cancellation must not turn
        # into a TimeoutError that the coroutine handles and goes on.
        timers = self.spy_timers()
        attempts = []

        def worker():
            while len(attempts) < 3:
                try:
                    yield from crawl.wait_for(crawl.sleep(10), 0.05)
                except TimeoutError:
                    attempts.append("timed out")
            return "went on"

        task = self.loop.create_task(worker())
        run_one_iteration(self.loop)  # inside the first wait_for
        expiry = self.expiry_handles(timers)
        self.assertEqual(len(expiry), 1)
        cancelled = []
        self.loop.call_at(expiry[0].when, lambda: cancelled.append(task.cancel()))
        with self.assertRaises(crawl.CancelledError):
            self.loop.run_until_complete(task)
        self.assertEqual(cancelled, [True])
        self.assertTrue(task.cancelled())

    def test_refused_open_connection_closes_its_socket(self):
        port = refused_port(self)
        for host in ("127.0.0.1", "localhost"):
            with self.subTest(host=host):
                before = open_fds()
                with self.assert_no_socket_left_for_gc(), self.assertRaises(ConnectionRefusedError):
                    self.run_briefly(crawl.open_connection(host, port))
                self.assertEqual(open_fds(), before)
                self.loop.run_until_complete(crawl.sleep(0))
                self.assertEqual(self.loop.pending_work(), (0, 0, 0))

    def test_cancelled_open_connection_while_connecting_closes_its_socket(self):
        # A listener whose accept queue is full drops SYNs: connect() hangs.
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(listener.close)
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        filler = socket.create_connection(listener.getsockname(), timeout=5)
        self.addCleanup(filler.close)
        port = listener.getsockname()[1]

        before = open_fds()
        task = self.loop.create_task(crawl.open_connection("127.0.0.1", port))
        self.loop.run_until_complete(crawl.sleep(0.05))
        if task.done():
            task.result().close()
            self.skipTest("this kernel accepted a connection beyond the backlog")
        self.assertEqual(self.loop.pending_work(), (0, 0, 1))  # waiting to connect
        task.cancel()
        with self.assert_no_socket_left_for_gc(), self.assertRaises(crawl.CancelledError):
            self.run_briefly(task)
        del task
        self.assertEqual(open_fds(), before)
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))

        with self.assert_no_socket_left_for_gc(), self.assertRaises(TimeoutError):  # through connect_timeout
            self.run_briefly(crawl.open_connection("127.0.0.1", port, connect_timeout=0.05))
        self.assertEqual(open_fds(), before)
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))

    def test_cancelled_open_connection_during_the_tls_handshake_closes_its_socket(self):
        def silent(conn):  # never answers the ClientHello
            conn.read_request(timeout=5)

        server = self.scripted(silent)
        context = client_tls_context()
        before = open_fds()
        task = self.loop.create_task(crawl.open_connection("127.0.0.1", server.port, ssl_context=context))
        self.loop.call_later(0.05, task.cancel)
        with self.assert_no_socket_left_for_gc(), self.assertRaises(crawl.CancelledError):
            self.run_briefly(task)
        del task
        server.settle()
        self.assertEqual(open_fds(), before)
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))

        with self.assert_no_socket_left_for_gc(), self.assertRaises(TimeoutError):
            self.run_briefly(crawl.wait_for(
                crawl.open_connection("127.0.0.1", server.port, ssl_context=context), 0.05))
        server.settle()
        self.assertEqual(open_fds(), before)
        self.loop.run_until_complete(crawl.sleep(0))
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))


class RuntimeReadIntoTest(RuntimeTestCase):

    def test_read_into_and_regex_separators(self):
        a, b = self.socketpair()
        b.sendall(b"abcdef")
        buffer = bytearray(4)

        def coroutine():
            first = yield from crawl.read_into(a, buffer)
            first_bytes = bytes(buffer[:first])
            second = yield from crawl.read_into(a, memoryview(buffer)[1:])
            b.shutdown(socket.SHUT_WR)
            end = yield from crawl.read_into(a, buffer)
            return first, first_bytes, second, bytes(buffer[1:1 + second]), end

        self.assertEqual(self.run_co(coroutine()), (4, b"abcd", 2, b"ef", 0))

        c, d = self.socketpair()
        stream = crawl.Stream(c)
        self.assertIsNone(stream.take_until(b"\n"))  # nothing buffered: no wait, None
        d.sendall(b"Head: 1\nMore: 2\n\nbody")
        d.shutdown(socket.SHUT_WR)
        head = self.run_co(stream.readuntil(re.compile(rb"\r?\n\r?\n")))
        self.assertEqual(head, b"Head: 1\nMore: 2\n\n")
        self.assertEqual(stream.take_until(b"\n"), None)  # b"body" has no newline
        self.assertEqual(self.run_co(stream.read()), b"body")


class RuntimeTLSTest(RuntimeTestCase):

    def test_tls_round_trip(self):
        big = bytes(range(256)) * 1024  # 256 KiB: many TLS records

        def echo_upper(conn):
            line = b""
            while not line.endswith(b"\n"):
                chunk = conn.sock.recv(1024)
                if not chunk:
                    return
                line += chunk
            conn.sock.sendall(line.upper())
            conn.sock.sendall(big)

        server = self.scripted(echo_upper, tls=True)
        names = []
        server.tls_context.sni_callback = lambda sslobj, name, context: names.append(name)

        def client(host):
            stream = yield from crawl.open_connection(host, server.port, ssl_context=client_tls_context())
            try:
                is_tls = isinstance(stream.sock, ssl.SSLSocket)
                yield from stream.write(b"hello tls\n")
                line = yield from stream.readline()
                body = yield from stream.readexactly(len(big))
                end = yield from stream.read()
                return is_tls, line, body == big, end, stream.bytes_sent, stream.bytes_received
            finally:
                stream.close()

        for host in ("127.0.0.1", "localhost"):
            with self.subTest(host=host):
                before = open_fds()
                with self.assert_no_socket_left_for_gc():
                    result = self.run_co(client(host))
                self.assertEqual(result, (True, b"HELLO TLS\n", True, b"", 10, 10 + len(big)))
                server.settle()
                self.assertEqual(open_fds(), before)
        # SNI is sent for host names (never for IP literals).
        self.assertEqual(names, [None, "localhost"])

    def test_tls_read_returns_buffered_plaintext_without_waiting(self):
        # One TLS record of 5 bytes, read 3 at a time: the last 2 bytes sit
        # decrypted in the SSL object while the socket itself has nothing
        # to read, so read() must not wait for readability first.
        def script(conn):
            conn.sock.settimeout(5)
            conn.sock.sendall(b"hello")
            conn.sock.recv(10)  # the client's "next"
            conn.sock.sendall(b"world!")
            conn.sock.recv(10)  # keep the connection open until the client's "bye"

        server = self.scripted(script, tls=True)

        def client():
            stream = yield from crawl.open_connection("127.0.0.1", server.port,
                                                      ssl_context=client_tls_context())
            try:
                sock = stream.sock
                first = yield from crawl.read(sock, 3, timeout=2)
                second = yield from crawl.read(sock, 3, timeout=2)
                yield from crawl.sendall(sock, b"next")
                buffer = bytearray(3)
                count = yield from crawl.read_into(sock, buffer, timeout=2)
                third = bytes(buffer[:count])
                count = yield from crawl.read_into(sock, buffer, timeout=2)
                fourth = bytes(buffer[:count])
                yield from crawl.sendall(sock, b"bye")
                return first, second, third, fourth
            finally:
                stream.close()

        self.assertEqual(self.run_co(client()), (b"hel", b"lo", b"wor", b"ld!"))

    def test_tls_peer_closing_with_or_without_close_notify_is_an_eof(self):
        def script(conn):
            conn.sock.sendall(b"all of it")
            if conn.number == 1:  # close_notify before the TCP FIN
                conn.sock.setblocking(False)
                try:
                    conn.sock.unwrap()
                except ssl.SSLWantReadError:
                    pass  # sent; the client's close_notify is not waited for
            conn.close()  # the second connection: no close_notify, just the FIN

        server = self.scripted(script, tls=True)

        def client():
            stream = yield from crawl.open_connection("127.0.0.1", server.port,
                                                      ssl_context=client_tls_context())
            try:
                chunks = []
                while True:
                    chunk = yield from stream.read()
                    if not chunk:
                        return b"".join(chunks), stream.at_eof()
                    chunks.append(chunk)
            finally:
                stream.close()

        for number in (1, 2):
            with self.subTest(close_notify=number == 1):
                self.assertEqual(self.run_co(client()), (b"all of it", True))

    def test_tls_sends_more_than_the_socket_buffers_hold(self):
        # 4 MiB through small socket buffers: send() finds them full often;
        # the ciphertext left over when sendall() returns must still go out
        # before the client waits for the answer, which needs every byte.
        payload = bytes(range(256)) * 16384

        def script(conn):
            conn.sock.settimeout(5)
            received = 0
            while received < len(payload):
                chunk = conn.sock.recv(65536)
                if not chunk:
                    return
                received += len(chunk)
            conn.sock.sendall(b"%d\n" % received)

        server = self.scripted(script, tls=True)

        def client():
            stream = yield from crawl.open_connection("127.0.0.1", server.port,
                                                      ssl_context=client_tls_context(),
                                                      read_timeout=5)
            try:
                stream.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
                yield from stream.write(payload)
                return (yield from stream.readline())
            finally:
                stream.close()

        self.assertEqual(self.run_co(client()), b"%d\n" % len(payload))

    def test_tls_verification_fails_with_the_default_context(self):
        server = self.scripted(lambda conn: None, tls=True)
        context = ssl.create_default_context()  # does not trust the test certificate
        before = open_fds()
        with self.assert_no_socket_left_for_gc(), self.assertRaises(ssl.SSLCertVerificationError):
            self.run_briefly(crawl.open_connection("127.0.0.1", server.port, ssl_context=context))
        server.settle()
        self.assertEqual(open_fds(), before)
        self.loop.run_until_complete(crawl.sleep(0))
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))

    def test_tls_verification_fails_for_the_wrong_host_name(self):
        server = self.scripted(lambda conn: None, tls=True)
        before = open_fds()
        with self.assert_no_socket_left_for_gc(), self.assertRaises(ssl.SSLCertVerificationError):
            self.run_briefly(crawl.open_connection("127.0.0.1", server.port,
                                                   ssl_context=client_tls_context(),
                                                   server_hostname="wrong.example"))
        server.settle()
        self.assertEqual(open_fds(), before)


class RuntimeGetaddrinfoTest(RuntimeTestCase):

    def test_localhost_resolves_off_the_loop(self):
        real_getaddrinfo = socket.getaddrinfo
        calls = []

        def slow_getaddrinfo(*args, **kwargs):
            numeric = asks_numeric_host(args, kwargs)
            calls.append((args[0], numeric, threading.get_ident()))
            if not numeric:
                time.sleep(0.2)  # a slow DNS server
            return real_getaddrinfo(*args, **kwargs)

        ticks = []

        def ticker():
            while True:
                yield from crawl.sleep(0.01)
                ticks.append(1)

        def main():
            tick_task = crawl.Task(ticker())
            try:
                return (yield from crawl.getaddrinfo("localhost", 8080))
            finally:
                tick_task.cancel()

        with mock.patch("socket.getaddrinfo", slow_getaddrinfo):
            infos = self.run_co(main())
        main_thread = threading.get_ident()
        resolving = [call for call in calls if not call[1]]
        self.assertEqual(len(resolving), 1)
        self.assertEqual(resolving[0][0], b"localhost")  # ASCII: no idna codec to import
        self.assertNotEqual(resolving[0][2], main_thread)  # in a worker thread
        self.assertGreaterEqual(len(ticks), 5)  # the loop kept running meanwhile
        self.assertIn((socket.AF_INET, ("127.0.0.1", 8080)), [(info[0], info[4]) for info in infos])
        self.assertEqual({info[1] for info in infos}, {socket.SOCK_STREAM})

    def test_localhost_resolves_for_real(self):
        infos = self.run_co(crawl.getaddrinfo("localhost", 80))
        self.assertIn(("127.0.0.1", 80), [info[4][:2] for info in infos if info[0] == socket.AF_INET])

    def test_ip_literals_resolve_without_a_thread(self):
        with mock.patch.object(self.loop, "run_in_thread",
                               side_effect=AssertionError("a thread was used")) as run_in_thread:
            for host, family, address in (("127.0.0.1", socket.AF_INET, ("127.0.0.1", 80)),
                                          ("::1", socket.AF_INET6, ("::1", 80, 0, 0))):
                with self.subTest(host=host):
                    steps = crawl.getaddrinfo(host, 80)
                    with self.assertRaises(StopIteration) as cm:  # done without suspending
                        next(steps)
                    infos = cm.exception.value
                    self.assertEqual(len(infos), 1)
                    self.assertEqual((infos[0][0], infos[0][1], infos[0][4]),
                                     (family, socket.SOCK_STREAM, address))
        self.assertEqual(run_in_thread.call_count, 0)

    def test_unknown_name_raises_gaierror(self):
        real_getaddrinfo = socket.getaddrinfo

        def fake_getaddrinfo(*args, **kwargs):
            if asks_numeric_host(args, kwargs):
                return real_getaddrinfo(*args, **kwargs)
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

        with mock.patch("socket.getaddrinfo", fake_getaddrinfo):
            with self.assertRaises(socket.gaierror) as cm:
                self.run_briefly(crawl.getaddrinfo("nowhere.invalid", 80))
        self.assertEqual(cm.exception.errno, socket.EAI_NONAME)
        self.assertIn("nowhere.invalid", str(cm.exception))


class RuntimeTimeoutContextTest(RuntimeTestCase):
    """crawl.timeout(): a deadline for a block inside a task, and
    crawl.current_task(), which it relies on."""

    def test_expired_block_raises_builtin_timeout_error(self):
        log = []

        def coroutine():
            try:
                with crawl.timeout(0.05) as deadline:
                    try:
                        yield from crawl.sleep(10)
                    except crawl.CancelledError:
                        log.append("block cancelled")
                        raise
            except TimeoutError as error:
                log.append(("timed out", type(error) is TimeoutError, deadline.expired))
            yield from crawl.sleep(0.01)  # the task itself goes on
            return "went on"

        start = time.monotonic()
        self.assertEqual(self.run_co(coroutine()), "went on")
        self.assertLess(time.monotonic() - start, 2)
        self.assertEqual(log, ["block cancelled", ("timed out", True, True)])

    def test_fast_block_keeps_its_value_and_leaves_no_timer(self):
        def coroutine():
            with crawl.timeout(5) as deadline:
                value = yield from crawl.sleep(0.01, "fast")
            with crawl.timeout(None):
                unlimited = yield from crawl.sleep(0.01, "no deadline")
            return value, unlimited, deadline.expired

        self.assertEqual(self.run_co(coroutine()), ("fast", "no deadline", False))
        # run_co checked that the 5 s timer is gone

    def test_exception_in_the_block_passes_through(self):
        def coroutine():
            with crawl.timeout(5):
                yield from crawl.sleep(0)
                raise KeyError("inside")

        with self.assertRaises(KeyError):
            self.run_briefly(coroutine())
        self.loop.run_until_complete(crawl.sleep(0))
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))

    def test_cancelled_from_outside_stays_cancelled(self):
        def coroutine():
            with crawl.timeout(5):
                yield from crawl.sleep(10)

        task = self.loop.create_task(coroutine())
        self.loop.call_later(0.01, task.cancel)
        with self.assertRaises(crawl.CancelledError):
            self.run_briefly(task)
        self.assertTrue(task.cancelled())
        self.loop.run_until_complete(crawl.sleep(0))
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))

    def test_nested_deadlines(self):
        def coroutine():
            results = []
            with crawl.timeout(5):
                try:
                    with crawl.timeout(0.02):
                        yield from crawl.sleep(10)
                except TimeoutError:
                    results.append("inner expired")
            try:
                with crawl.timeout(0.02):
                    with crawl.timeout(5):
                        yield from crawl.sleep(10)
            except TimeoutError:
                results.append("outer expired")
            return results

        self.assertEqual(self.run_co(coroutine()), ["inner expired", "outer expired"])

    def test_cancel_right_after_the_deadline_is_not_lost(self):
        # A worker that handles a fetch timeout and goes on to the next item;
        # the crawler's shutdown cancels it in the very iteration its
        # deadline expires. cancel() said True: the worker must end.
        timers = self.spy_timers()
        attempts = []

        def worker():
            while len(attempts) < 3:
                try:
                    with crawl.timeout(0.05):
                        yield from crawl.sleep(10)
                except TimeoutError:
                    attempts.append("timed out")
            return "went on"

        task = self.loop.create_task(worker())
        run_one_iteration(self.loop)  # inside the first timeout block
        expiry = self.expiry_handles(timers)
        self.assertEqual(len(expiry), 1)
        cancelled = []
        self.loop.call_at(expiry[0].when, lambda: cancelled.append(task.cancel()))
        with self.assertRaises(crawl.CancelledError):
            self.run_briefly(task)
        self.assertEqual(cancelled, [True])
        self.assertTrue(task.cancelled())

    def test_outside_a_task(self):
        with self.assertRaises(RuntimeError):
            crawl.timeout(1).__enter__()
        with crawl.timeout(None):  # no deadline needs no task
            pass

    def test_current_task(self):
        self.assertIsNone(crawl.current_task(self.loop))
        seen = []

        def coroutine():
            seen.append(crawl.current_task())
            yield from crawl.sleep(0)
            seen.append(crawl.current_task())

        task = self.loop.create_task(coroutine())
        self.loop.call_soon(lambda: seen.append(crawl.current_task()))  # a plain callback
        self.run_briefly(task)
        self.assertEqual(seen, [task, None, task])
        self.assertIsNone(crawl.current_task(self.loop))


class RuntimeStreamTest(RuntimeTestCase):

    def test_reads(self):
        a, b = self.socketpair()
        data = b"HTTP/1.1 200 OK\r\nabcdefgh\nrest"
        b.sendall(data)
        b.shutdown(socket.SHUT_WR)
        stream = crawl.Stream(a)

        def coroutine():
            results = []
            results.append((yield from stream.readuntil(b"\r\n")))
            results.append((yield from stream.readexactly(4)))
            results.append((yield from stream.readline()))
            results.append(stream.buffered())
            results.append((yield from stream.read(2)))
            results.append(stream.at_eof())
            results.append((yield from stream.read()))
            results.append((yield from stream.read()))
            results.append(stream.at_eof())
            results.append((yield from stream.readexactly(0)))
            return results

        self.assertEqual(self.run_co(coroutine()),
                         [b"HTTP/1.1 200 OK\r\n", b"abcd", b"efgh\n", 4, b"re", False,
                          b"st", b"", True, b""])
        self.assertEqual(stream.bytes_received, len(data))
        self.assertEqual(stream.bytes_sent, 0)

    def test_separator_split_across_reads(self):
        a, b = self.socketpair()
        b.sendall(b"ab\r\n\r")
        self.loop.call_later(0.02, b.sendall, b"\ncd")
        stream = crawl.Stream(a)

        def coroutine():
            head = yield from stream.readuntil(b"\r\n\r\n")
            rest = yield from stream.read()
            return head, rest

        self.assertEqual(self.run_co(coroutine()), (b"ab\r\n\r\n", b"cd"))

    def test_readline_limit(self):
        a, b = self.socketpair()
        stream = crawl.Stream(a)
        b.sendall(b"123456789\n")
        self.assertEqual(self.run_co(stream.readline(limit=10)), b"123456789\n")  # exactly the limit
        b.sendall(b"123456789\n")
        with self.assertRaises(crawl.LimitOverrunError):
            self.run_briefly(stream.readline(limit=9))
        a2, b2 = self.socketpair()
        stream2 = crawl.Stream(a2)
        b2.sendall(b"x" * 100 + b"\n")
        with self.assertRaises(crawl.LimitOverrunError):
            self.run_briefly(stream2.readline(limit=50))
        # No newline and the peer stays open: still an overrun, not a hang.
        a3, b3 = self.socketpair()
        stream3 = crawl.Stream(a3)
        b3.sendall(b"y" * 100)
        with self.assertRaises(crawl.LimitOverrunError):
            self.run_briefly(stream3.readline(limit=50), timeout=2)
        self.loop.run_until_complete(crawl.sleep(0))
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))

    def test_incomplete_read_at_eof(self):
        a, b = self.socketpair()
        b.sendall(b"abc")
        b.shutdown(socket.SHUT_WR)
        stream = crawl.Stream(a)
        with self.assertRaises(crawl.IncompleteReadError) as cm:
            self.run_briefly(stream.readexactly(10))
        self.assertIsInstance(cm.exception, EOFError)
        self.assertEqual((cm.exception.partial, cm.exception.expected), (b"abc", 10))
        self.assertTrue(stream.at_eof())

        a2, b2 = self.socketpair()
        b2.sendall(b"no newline")
        b2.shutdown(socket.SHUT_WR)
        stream2 = crawl.Stream(a2)
        with self.assertRaises(crawl.IncompleteReadError) as cm:
            self.run_briefly(stream2.readline())
        self.assertEqual((cm.exception.partial, cm.exception.expected), (b"no newline", None))
        self.assertEqual(stream2.bytes_received, 10)

    def test_write_and_close(self):
        a, b = self.socketpair()
        stream = crawl.Stream(a)

        def coroutine():
            yield from stream.write(b"hello ")
            yield from stream.write(memoryview(b"world"))
            return stream.bytes_sent

        self.assertEqual(self.run_co(coroutine()), 11)
        b.settimeout(5)
        got = b""
        while len(got) < 11:
            got += b.recv(100)
        self.assertEqual(got, b"hello world")
        self.assertFalse(stream.closed)
        stream.close()
        self.assertTrue(stream.closed)
        stream.close()  # twice is harmless
        self.assertEqual(b.recv(100), b"")  # the peer sees EOF

    def test_read_timeout(self):
        a, b = self.socketpair()
        stream = crawl.Stream(a, read_timeout=0.05)
        start = time.monotonic()
        with self.assertRaises(TimeoutError):
            self.run_briefly(stream.readline())
        self.assertLess(time.monotonic() - start, 2)
        self.loop.run_until_complete(crawl.sleep(0))
        self.assertEqual(self.loop.pending_work(), (0, 0, 0))


# ---------------------------------------------------------------------------
# 4. The queue
# ---------------------------------------------------------------------------


class RuntimeQueueTest(RuntimeTestCase):

    def test_fifo_and_sizes(self):
        queue = crawl.Queue()
        self.assertEqual((queue.qsize(), queue.empty(), queue.full()), (0, True, False))
        for i in range(5):
            queue.put_nowait(i)
        self.assertEqual((queue.qsize(), queue.empty(), queue.full(), queue.unfinished), (5, False, False, 5))

        def drain():
            items = []
            for _ in range(5):
                items.append((yield from queue.get()))
            return items

        self.assertEqual(self.run_co(drain()), [0, 1, 2, 3, 4])
        self.assertEqual((queue.qsize(), queue.empty(), queue.unfinished), (0, True, 5))
        with self.assertRaises(crawl.QueueEmpty):
            queue.get_nowait()

        for maxsize in (0, -1):
            unbounded = crawl.Queue(maxsize)
            for i in range(1000):
                unbounded.put_nowait(i)
            self.assertFalse(unbounded.full())

    def test_nowait_errors(self):
        queue = crawl.Queue(maxsize=2)
        queue.put_nowait("a")
        queue.put_nowait("b")
        self.assertTrue(queue.full())
        with self.assertRaises(crawl.QueueFull):
            queue.put_nowait("c")
        self.assertEqual(queue.qsize(), 2)
        self.assertEqual(queue.get_nowait(), "a")
        self.assertEqual(queue.get_nowait(), "b")
        with self.assertRaises(crawl.QueueEmpty):
            queue.get_nowait()
        self.assertTrue(issubclass(crawl.QueueFull, Exception))
        self.assertTrue(issubclass(crawl.QueueEmpty, Exception))

    def test_put_waits_while_full(self):
        queue = crawl.Queue(maxsize=2)
        log = []

        def producer():
            for i in range(4):
                yield from queue.put(i)
                log.append(f"put {i}")

        def consumer():
            snapshots = []
            yield from crawl.sleep(0.01)
            snapshots.append((list(log), queue.full(), queue.qsize()))
            log.append(f"get {(yield from queue.get())}")
            yield from crawl.sleep(0.01)
            snapshots.append((list(log), queue.full(), queue.qsize()))
            for _ in range(3):
                log.append(f"get {(yield from queue.get())}")
            return snapshots

        def main():
            return (yield from crawl.gather(producer(), consumer()))

        _, snapshots = self.run_co(main())
        self.assertEqual(snapshots, [
            (["put 0", "put 1"], True, 2),
            (["put 0", "put 1", "get 0", "put 2"], True, 2),
        ])
        self.assertEqual(log, ["put 0", "put 1", "get 0", "put 2", "get 1", "get 2", "put 3", "get 3"])

    def test_task_done_too_often(self):
        queue = crawl.Queue()
        with self.assertRaises(ValueError):
            queue.task_done()
        queue.put_nowait("x")
        queue.put_nowait("y")
        queue.get_nowait()
        queue.task_done()
        self.assertEqual(queue.unfinished, 1)
        queue.task_done()  # the item still queued may be marked done too
        self.assertEqual(queue.unfinished, 0)
        with self.assertRaises(ValueError):
            queue.task_done()

    def test_join_waits_until_every_item_is_done(self):
        queue = crawl.Queue()
        queue.put_nowait("a")
        queue.put_nowait("b")
        log = []

        def joiner(name):
            yield from queue.join()
            log.append(f"{name} joined (empty={queue.empty()}, unfinished={queue.unfinished})")

        def worker():
            for _ in range(2):
                item = yield from queue.get()
                log.append(f"got {item}")
                yield from crawl.sleep(0.01)
                log.append(f"done {item}")
                queue.task_done()

        def main():
            yield from crawl.gather(joiner("j1"), joiner("j2"), worker())

        self.run_co(main())
        self.assertEqual(log, ["got a", "done a", "got b", "done b",
                               "j1 joined (empty=True, unfinished=0)",
                               "j2 joined (empty=True, unfinished=0)"])

        steps = queue.join()  # nothing unfinished: returns without waiting
        with self.assertRaises(StopIteration):
            next(steps)

    def test_join_counts_items_not_queue_length(self):
        queue = crawl.Queue()
        log = []

        def worker():
            item = yield from queue.get()
            log.append(f"got {item}")
            yield from crawl.sleep(0.01)
            log.append(f"done {item}")
            queue.task_done()

        def main():
            queue.put_nowait("first")
            queue.get_nowait()
            worker_task = crawl.Task(worker())
            queue.put_nowait("second")
            queue.task_done()  # "first" is done, "second" is not
            self.assertEqual(queue.unfinished, 1)
            yield from queue.join()
            log.append(f"joined, unfinished={queue.unfinished}")
            yield from worker_task

        self.run_co(main())
        self.assertEqual(log, ["got second", "done second", "joined, unfinished=0"])

    def test_cancelled_getter_loses_no_item(self):
        queue = crawl.Queue()
        first = self.loop.create_task(queue.get())
        second = self.loop.create_task(queue.get())
        run_one_iteration(self.loop)  # both wait
        first.cancel()
        with self.assertRaises(crawl.CancelledError):
            self.run_briefly(first)
        queue.put_nowait("x")
        self.assertEqual(self.run_briefly(second), "x")
        self.assertTrue(queue.empty())

        lonely = self.loop.create_task(queue.get())
        run_one_iteration(self.loop)
        lonely.cancel()
        with self.assertRaises(crawl.CancelledError):
            self.run_briefly(lonely)
        queue.put_nowait("y")
        self.assertEqual(queue.qsize(), 1)
        self.assertEqual(self.run_briefly(queue.get()), "y")

    def test_getter_woken_then_cancelled_passes_the_item_on(self):
        queue = crawl.Queue()
        first = self.loop.create_task(queue.get())
        second = self.loop.create_task(queue.get())
        run_one_iteration(self.loop)  # both wait
        queue.put_nowait("x")  # wakes first ...
        first.cancel()  # ... which is cancelled before it runs
        self.assertEqual(self.run_briefly(second), "x")
        self.assertTrue(first.cancelled())
        self.assertTrue(queue.empty())

        # Woken and cancelled with nobody else waiting: the item stays queued
        # for the next getter.
        lonely = self.loop.create_task(queue.get())
        run_one_iteration(self.loop)
        queue.put_nowait("y")
        lonely.cancel()
        with self.assertRaises(crawl.CancelledError):
            self.run_briefly(lonely)
        self.assertEqual(queue.qsize(), 1)
        self.assertEqual(self.run_briefly(queue.get()), "y")

    def test_putter_woken_then_cancelled_passes_the_slot_on(self):
        queue = crawl.Queue(maxsize=1)
        queue.put_nowait("full")
        first = self.loop.create_task(queue.put("first"))
        second = self.loop.create_task(queue.put("second"))
        run_one_iteration(self.loop)  # both wait
        self.assertEqual(queue.get_nowait(), "full")  # wakes first ...
        first.cancel()  # ... which is cancelled before it runs
        self.run_briefly(second)
        self.assertTrue(first.cancelled())
        self.assertEqual(queue.get_nowait(), "second")
        self.assertTrue(queue.empty())

    def test_woken_getter_whose_item_was_taken_waits_again(self):
        queue = crawl.Queue()
        getter = self.loop.create_task(queue.get())
        run_one_iteration(self.loop)
        queue.put_nowait("x")
        self.assertEqual(queue.get_nowait(), "x")  # taken before the getter ran
        self.loop.run_until_complete(crawl.sleep(0.01))
        self.assertFalse(getter.done())
        queue.put_nowait("y")
        self.assertEqual(self.run_briefly(getter), "y")


# ---------------------------------------------------------------------------
# 5. URLs
# ---------------------------------------------------------------------------


class URLNormalizeTest(unittest.TestCase):

    def test_default_ports_dropped_only_for_their_scheme(self):
        n = crawl.normalize_url
        self.assertEqual(n("http://example.test:80/p"), "http://example.test/p")
        self.assertEqual(n("http://example.test/p"), "http://example.test/p")
        self.assertEqual(n("https://example.test:443/"), "https://example.test/")
        self.assertEqual(n("https://example.test:80/"), "https://example.test:80/")
        self.assertEqual(n("http://example.test:443/"), "http://example.test:443/")
        self.assertEqual(n("http://example.test:8080"), "http://example.test:8080/")

    def test_case_empty_path_and_fragment(self):
        n = crawl.normalize_url
        self.assertEqual(n("HTTP://EXAMPLE.Test"), "http://example.test/")
        self.assertEqual(n("hTTpS://Example.TEST/A/B"), "https://example.test/A/B")
        self.assertEqual(n("http://example.test/p#frag"), "http://example.test/p")
        self.assertEqual(n("http://example.test/p?#"), "http://example.test/p?")  # an empty query
        self.assertEqual(n("http://example.test/p?q=1#x"), "http://example.test/p?q=1")

    def test_percent_encoding(self):
        n = crawl.normalize_url
        base = "http://example.test/"
        self.assertEqual(n("/a b", base), "http://example.test/a%20b")
        self.assertEqual(n("/a%20b", base), "http://example.test/a%20b")
        self.assertEqual(n("/%7Euser", base), "http://example.test/~user")
        self.assertEqual(n("/%7euser", base), "http://example.test/~user")
        self.assertEqual(n("/x%3d%3d", base), "http://example.test/x%3D%3D")
        self.assertEqual(n("/x%3D%3D", base), "http://example.test/x%3D%3D")
        self.assertEqual(n("/a%2Fb", base), "http://example.test/a%2Fb")
        self.assertEqual(n("/a%2fb", base), "http://example.test/a%2Fb")
        self.assertEqual(n("/%41%62c", base), "http://example.test/Abc")
        self.assertEqual(n("/ü?ä=ö", base), "http://example.test/%C3%BC?%C3%A4=%C3%B6")
        self.assertEqual(n("/%zz", base), "http://example.test/%zz")  # a lone "%" stays
        self.assertEqual(n("/100%", base), "http://example.test/100%")
        self.assertEqual(n("/q?a=%7e&b=%2f", base), "http://example.test/q?a=~&b=%2F")

    def test_never_double_encodes(self):
        n = crawl.normalize_url
        for link in ("/a%20b", "/x%3d", "/%C3%BC", "/a b%20c"):
            self.assertNotIn("%25", n(link, "http://example.test/"), link)

    def test_dot_segments(self):
        n = crawl.normalize_url
        base = "http://example.test/x/y"
        self.assertEqual(n("/d/./e/../f", base), "http://example.test/d/f")
        self.assertEqual(n("../../../g", base), "http://example.test/g")
        self.assertEqual(n("./", base), "http://example.test/x/")
        self.assertEqual(n("http://example.test/a/b/..", None), "http://example.test/a/")
        self.assertEqual(n("http://example.test/a/./b/.", None), "http://example.test/a/b/")
        self.assertEqual(n("http://example.test/../a", None), "http://example.test/a")

    def test_whitespace_in_links(self):
        n = crawl.normalize_url
        base = "http://127.0.0.1:8000/x/y"
        self.assertEqual(n("\n            /feeds/atom.xml\n          ", base),
                         "http://127.0.0.1:8000/feeds/atom.xml")
        self.assertEqual(n(" http://127.0.0.1:8000/other", base), "http://127.0.0.1:8000/other")
        self.assertEqual(n("/pa\tge\n", base), "http://127.0.0.1:8000/page")
        self.assertEqual(n("rel page", base), "http://127.0.0.1:8000/x/rel%20page")
        self.assertEqual(n("\f/ff\r\n", base), "http://127.0.0.1:8000/ff")

    def test_relative_resolution(self):
        n = crawl.normalize_url
        base = "http://example.test/a/b?q=1"
        self.assertEqual(n("c", base), "http://example.test/a/c")
        self.assertEqual(n("?r=2", base), "http://example.test/a/b?r=2")
        self.assertEqual(n("//other.test/z", base), "http://other.test/z")
        self.assertEqual(n("//other.test/z", "https://example.test/"), "https://other.test/z")
        self.assertEqual(n("https://example.test/s", base), "https://example.test/s")

    def test_idn_host(self):
        n = crawl.normalize_url
        self.assertEqual(n("http://bücher.example/"), "http://xn--bcher-kva.example/")
        self.assertEqual(n("http://BÜCHER.example/x"), "http://xn--bcher-kva.example/x")
        self.assertEqual(n("http://xn--bcher-kva.example/"), "http://xn--bcher-kva.example/")

    def test_userinfo_dropped(self):
        n = crawl.normalize_url
        self.assertEqual(n("http://user:secret@Example.TEST:80/a"), "http://example.test/a")
        self.assertEqual(n("https://user@example.test:8443/"), "https://example.test:8443/")

    def test_ipv6_literal(self):
        n = crawl.normalize_url
        self.assertEqual(n("http://[::1]:8080/x"), "http://[::1]:8080/x")
        self.assertEqual(n("http://[::1]:80/x"), "http://[::1]/x")
        # The URL Standard writes an embedded IPv4 address in hex (inet_ntop does not).
        self.assertEqual(n("http://[::FFFF:1.2.3.4]/"), "http://[::ffff:102:304]/")
        self.assertEqual(n("http://[0:0:0:0:0:0:13.1.68.3]/"), "http://[::d01:4403]/")
        self.assertEqual(n("http://[1:0:0:2:0:0:0:3]/"), "http://[1:0:0:2::3]/")

    def test_invalid_urls_raise_value_error(self):
        for url in ("http://example.test:99999/", "http://example.test:abc/",
                    "http://example.test:-1/", "http://[::1/", "http://", "http:///",
                    "http://" + "ü" * 64 + ".example/"):
            with self.subTest(url=url):
                with self.assertRaises(ValueError):
                    crawl.normalize_url(url)

    def test_invalid_ip_literals_raise_value_error(self):
        # An IP-literal is an IPv6 address (or IPvFuture) in brackets, and
        # only ":port" may follow it (RFC 3986 §3.2.2); never a silently
        # different host. urllib.parse checks the brackets only from 3.11.4.
        for url in ("http://[zz]/", "http://[1.2.3.4]/", "http://[::1]x/", "http://[::1]8080/"):
            with self.subTest(url=url):
                with self.assertRaises(ValueError):
                    crawl.normalize_url(url)

    def test_links_not_followed_give_none(self):
        base = "http://example.test/a/b"
        for link in ("mailto:someone@example.test", "tel:0123456789", "javascript:void(0)",
                     "JavaScript:alert(1)", "data:text/html,hi", "ftp://example.test/f",
                     "#top", "", "   ", "\n#x", "MAILTO:x@y", "file:///etc/passwd"):
            with self.subTest(link=link):
                self.assertIsNone(crawl.normalize_url(link, base))
                self.assertIsNone(crawl.normalize_url(link))

    def test_relative_link_without_base_is_none(self):
        self.assertIsNone(crawl.normalize_url("/a"))

    def test_idempotent(self):
        base = "http://127.0.0.1:8000/x/y"
        links = ["/a b", "/a%20b", "/%7Euser", "/x%3d%3d", "HTTP://127.0.0.1:8000/n#frag",
                 "/a%2fb", "/d/./e/../f", "http://bücher.example/ä?ö=ü", "https://e.test:443/",
                 "https://e.test:80/", "/%zz", "/100%", "?q=a+b&c=%2B", "http://[::1]:80/",
                 "/p;param?x=[1]", "/a'b(c)*!", "/~%7E", "rel page"]
        for link in links:
            with self.subTest(link=link):
                once = crawl.normalize_url(link, base)
                self.assertEqual(crawl.normalize_url(once), once)
                self.assertEqual(crawl.normalize_url(once, base), once)

    def test_resolve_location(self):
        url = "http://127.0.0.1:8000/"
        raw = b"//127.0.0.1:9000/?\xc5\xa0".decode("latin-1")
        self.assertEqual(crawl.resolve_location(raw, url), "http://127.0.0.1:9000/?%C5%A0")
        self.assertEqual(crawl.resolve_location(b"/caf\xc3\xa9".decode("latin-1"), url),
                         "http://127.0.0.1:8000/caf%C3%A9")
        self.assertEqual(crawl.resolve_location("next", "http://h.test/a/b"), "http://h.test/a/next")
        self.assertEqual(crawl.resolve_location("https://h.test:443/x", url), "https://h.test/x")
        self.assertIsNone(crawl.resolve_location("mailto:x@h.test", url))
        with self.assertRaises(ValueError):
            crawl.resolve_location("http://h.test:99999/", url)

    def test_parse_root(self):
        self.assertEqual(crawl.parse_root("xkcd.com"), "http://xkcd.com/")
        self.assertEqual(crawl.parse_root("localhost:8000"), "http://localhost:8000/")
        self.assertEqual(crawl.parse_root("localhost:8000/docs"), "http://localhost:8000/docs")
        self.assertEqual(crawl.parse_root(" https://Example.TEST/docs "), "https://example.test/docs")
        self.assertEqual(crawl.parse_root("http://host.test:80/path"), "http://host.test/path")
        self.assertEqual(crawl.parse_root("[::1]:8000"), "http://[::1]:8000/")
        for bad in ("ftp://example.test/", "mailto:a@example.test", "http://", "javascript:x"):
            with self.subTest(root=bad):
                with self.assertRaises(ValueError):
                    crawl.parse_root(bad)

    def test_escaped_dots_are_dot_segments(self):  # RFC 3986 §6.2.2.3
        n = crawl.normalize_url
        self.assertEqual(n("/a/%2e%2e/b", "http://h.test/x"), "http://h.test/b")
        self.assertEqual(n("http://h.test/a/%2E%2E/b"), "http://h.test/b")
        self.assertEqual(n("%2e%2e/c", "http://h.test/a/b/"), "http://h.test/a/c")
        self.assertEqual(n("./%2e/d", "http://h.test/a/"), "http://h.test/a/d")
        for url in ("http://h.test/a/%2e%2e/b", "http://h.test/%2E/x/%2e%2E/y"):
            self.assertEqual(n(n(url)), n(url))

    def test_invalid_url_is_its_own_error(self):
        with self.assertRaises(crawl.InvalidURL):
            crawl.normalize_url("http://h.test:0/")
        self.assertTrue(issubclass(crawl.InvalidURL, ValueError))


# Cases from WPT's URL test data (web-platform-tests/wpt, url/resources/
# urltestdata.json and toascii.json) for http(s) URLs: input, base (B when
# "http://example.org/foo/bar"), and the URL a browser derives without its
# fragment and userinfo (ValueError: the URL Standard's parser fails). Left
# out, each by a choice the class below tests: percent-escape case and
# escaped unreserved characters (RFC 3986 normalization, same resource),
# which ASCII characters a query or path escapes ([ ] ` { } ' DEL: same
# resource for a server that decodes), port 0 (an error here: nothing
# listens there), a link that is empty or only a fragment (None: no new URL),
# a host with an empty label or one over 63 octets (an error here: no DNS
# name), and CheckBidi (RFC 5893: needs data the standard library lacks).
B = "http://example.org/foo/bar"
WPT_URL_CASES = (
    # "\" is "/" in the path and the authority, not in the query
    ("\\x", B, "http://example.org/x"),
    ("\\\\x\\hello", B, "http://x/hello"),
    (":foo.com\\", B, "http://example.org/foo/:foo.com/"),
    ("http://foo.com/\\@", B, "http://foo.com//@"),
    ("http://a:b@c\\", None, "http://c/"),
    ("http://example.com\\\\foo\\\\bar", None, "http://example.com//foo//bar"),
    ("http:\\\\www.google.com\\foo", None, "http://www.google.com/foo"),
    ("http:\\\\foo.com\\", B, "http://foo.com/"),
    ("/\\/\\//example.org/../path", "http://example.org/", "http://example.org/path"),
    # any number of slashes before the host; "http:x" is relative on an http: base
    ("https:/example.com/", None, "https://example.com/"),
    ("https:example.com/", B, "https://example.com/"),
    ("http:example.com/", None, "http://example.com/"),
    ("http:/@www.example.com", None, "http://www.example.com/"),
    ("http:foo.com", B, "http://example.org/foo/foo.com"),
    ("http::@c:29", B, "http://example.org/foo/:@c:29"),
    ("///example.org/path", "http://example.org/", "http://example.org/path"),
    ("///\\//\\//test", "http://example.org/", "http://test/"),
    ("///example.org/../path/../../", "http://example.org/", "http://example.org/"),
    # C0 controls and spaces around, TAB and newlines inside
    ("\x00\x1b\x04\x12 http://example.com/\x1f \r ", None, "http://example.com/"),
    ("http://example\t.\norg", B, "http://example.org/"),
    ("http://f:\n/c", B, "http://f/c"),
    # a lone "%" stays; an empty query is kept
    ("http://example.com/foo%", None, "http://example.com/foo%"),
    ("http://example.com/foo%2zbar", None, "http://example.com/foo%2zbar"),
    ("http://example.org/test?%GH", None, "http://example.org/test?%GH"),
    ("?", B, "http://example.org/foo/bar?"),
    ("http://example.org/test?#", None, "http://example.org/test?"),
    ("https://x/?#\x00y", None, "https://x/?"),
    # IPv4 in its numeric forms
    ("http://192.168.257", "http://other.com/", "http://192.168.1.1/"),
    ("http://192.168.257.", "http://other.com/", "http://192.168.1.1/"),
    ("http://192.0x00A80001", None, "http://192.168.0.1/"),
    ("http://０Ｘｃ０．０２５０．０１", "http://other.com/", "http://192.168.0.1/"),
    ("http://%30%78%63%30%2e%30%32%35%30.01", "http://other.com/", "http://192.168.0.1/"),
    ("http://999999999", "http://other.com/", "http://59.154.201.255/"),
    ("http://256", "http://other.com/", "http://0.0.1.0/"),
    ("http://0xffffffff", "http://other.com/", "http://255.255.255.255/"),
    ("https://0x.0x.0", None, "https://0.0.0.0/"),
    ("http://1.2.3.4./", "http://other.com/", "http://1.2.3.4/"),
    ("http://4294967296", "http://other.com/", ValueError),
    ("http://0xffffffff1", "http://other.com/", ValueError),
    ("http://256.256.256.256", "http://other.com/", ValueError),
    ("http://1.2.3.4.5", "http://other.com/", ValueError),
    ("http://1.2.3.09", None, ValueError),
    ("http://foo.09", None, ValueError),
    ("http://foo.0x4", None, ValueError),
    ("http://foo.2.3.4", None, ValueError),
    ("http://💩.123/", None, ValueError),
    ("http://0..0x300/", None, ValueError),
    # IPv6, written as the standard writes it
    ("http://[::127.0.0.1]", B, "http://[::7f00:1]/"),
    ("http://[0:0:0:0:0:0:13.1.68.3]", B, "http://[::d01:4403]/"),
    ("http://[1:0::]", B, "http://[1::]/"),
    ("http://[::1.2.3.]", B, ValueError),
    # hosts: percent-decoded, UTS #46 non-transitional, forbidden code points
    ("https://faß.ExAmPlE/", None, "https://xn--fa-hia.example/"),
    ("https://%e2%98%83", None, "https://xn--n3h/"),
    ("https://a%C2%ADb/", None, "https://ab/"),
    ("http://Ｇｏ.com", None, "http://go.com/"),
    ("http://%zz%66%a.com", None, ValueError),
    ("http://%ef%bc%85%ef%bc%94%ef%bc%91.com", None, ValueError),
    ("http://a<b", None, ValueError),
    ("http://a^b", None, ValueError),
    ("http://ho%00st/", None, ValueError),
    ("https://xn--/", None, ValueError),
    ("http://a.b.c.xn--pokxncvks", None, ValueError),
    ("https://\ufffd", None, ValueError),
    ("http://\ufdd0zyx.com", "http://other.com/", ValueError),
    ("https://\uffffy", None, ValueError),
    ("http://f:b/c", B, ValueError),
    ("http://f:999999/c", B, ValueError),
)
TOASCII_CASES = (  # toascii.json: the host alone; None: not a valid host
    ("a†--", "xn--a---kp0a"), ("-x.ß", "-x.xn--zca"), ("xn--zca.ß", "xn--zca.xn--zca"),
    ("ab--c.ß", "ab--c.xn--zca"), ("xn--a", None), ("xn--ls8h=", None), ("xn--tešla", None),
    ("\u200d.example", None), ("xn--1ug.example", None), ("\u064a.", "xn--mhb."),
    ("1.\u064a", "1.xn--mhb"), ("\u064a.1", None),
    ("\u0dc1\u0dca\u200d\u0dbb\u0dd3", "xn--10cl1a0b660p"),
    ("\u0646\u0627\u0645\u0647\u200c\u0627\u06cc", "xn--mgba3gch31f060k"),
    ("\ufffd.com", None), ("xn--zn7c.com", None), ("a\u00adb", "ab"), ("≠", "xn--1ch"),
)


class URLStandardTest(unittest.TestCase):
    """http(s) URLs as a browser derives them (WHATWG URL Standard)."""

    def test_wpt_url_cases(self):
        for link, base, expected in WPT_URL_CASES:
            with self.subTest(link=link, base=base):
                if expected is ValueError:
                    with self.assertRaises(crawl.InvalidURL):
                        crawl.normalize_url(link, base)
                else:
                    self.assertEqual(crawl.normalize_url(link, base), expected)
                    self.assertEqual(crawl.normalize_url(expected), expected)

    def test_wpt_toascii_cases(self):
        for host, expected in TOASCII_CASES:
            with self.subTest(host=host):
                if expected is None:
                    with self.assertRaises(crawl.InvalidURL):
                        crawl.parse_host(host)
                else:
                    self.assertEqual(crawl.parse_host(host), expected)

    def test_idna_is_uts46_not_the_idna_codec(self):
        # The stdlib codec is IDNA 2003: it maps "ß" to "ss" and "ς" to "σ".
        self.assertEqual("faß.example".encode("idna"), b"fass.example")
        self.assertEqual(crawl.parse_host("faß.example"), "xn--fa-hia.example")
        self.assertEqual("σοφος".encode("idna"), b"xn--0xaakcn")  # as if "σοφοσ"
        self.assertEqual(crawl.parse_host("σοφος.example"), "xn--0xaajbq.example")  # final ς kept
        self.assertEqual(crawl.parse_host("ΣΟΦΟΣ.example"), "xn--0xaakcn.example")  # Σ is σ
        self.assertEqual(crawl.parse_host("βόλος.example"), "xn--nxasmm1c.example")
        self.assertEqual(crawl.parse_host("BÜCHER.example"), "xn--bcher-kva.example")
        self.assertEqual(crawl.parse_host("例え。テスト"), "xn--r8jz45g.xn--zckzah")
        # The same answer on every Python, whatever its Unicode version
        # (U+1FAE0 is Unicode 14: unassigned in Python 3.9's unicodedata).
        self.assertEqual(crawl.parse_host("\U0001fae0.example"), "xn--129h.example")
        for host in ("\U0010fffd.example", "a\u3000b.example", "a\x85b.example"):
            with self.subTest(host=host):
                with self.assertRaises(crawl.InvalidURL):
                    crawl.parse_host(host)

    def test_ipv4_forms(self):
        for host, expected in (("0x7f.1", "127.0.0.1"), ("0177.0.0.1", "127.0.0.1"),
                               ("2130706433", "127.0.0.1"), ("127.1", "127.0.0.1"),
                               ("127.0.1", "127.0.0.1"), ("0x7F000001.", "127.0.0.1"),
                               ("00", "0.0.0.0"), ("0x", "0.0.0.0")):
            with self.subTest(host=host):
                self.assertEqual(crawl.parse_host(host), expected)
        for host in ("1.2.3.256", "1.2.65536", "08", "0x1g.1", "1..2", "1.2.3.4.5", "example.1",
                     "example.0x1f", "+1.1", "1_0.1", "0x_1.1"):
            with self.subTest(host=host):
                with self.assertRaises(crawl.InvalidURL):
                    crawl.parse_host(host)
        for name in ("example.1a", "+1", "1_0", "0x_1"):  # names: the last label is no number
            self.assertEqual(crawl.parse_host(name), name)

    def test_numbers_with_thousands_of_digits(self):
        # int() refuses more than 4,300 decimal digits (ValueError): a port
        # or an IPv4 part that long is read (leading zeros) or rejected.
        self.assertEqual(crawl.normalize_url("http://h.test:" + "0" * 5000 + "81/"), "http://h.test:81/")
        with self.assertRaisesRegex(crawl.InvalidURL, "invalid port"):
            crawl.normalize_url("http://h.test:" + "9" * 5000 + "/")
        with self.assertRaisesRegex(crawl.InvalidURL, "out of range"):
            crawl.normalize_url("http://1" + "0" * 5000 + "/")

    def test_hosts_no_dns_lookup_can_carry_are_invalid(self):
        # Stricter than a browser, which accepts these and then fails at the
        # lookup: Python's socket layer cannot even encode them.
        for host, reason in (("bad..host", "empty label"), (".git", "empty label"),
                             ("a.", None), ("x" * 63 + ".test", None),
                             ("x" * 64 + ".test", "too long"), ("a." * 127 + "a", "too long")):
            with self.subTest(host=host):
                if reason is None:
                    self.assertEqual(crawl.parse_host(host), host)
                else:
                    with self.assertRaisesRegex(crawl.InvalidURL, reason):
                        crawl.parse_host(host)

    def test_lone_percent_is_sent_escaped(self):
        # The URL keeps a lone "%" (URL Standard); the request target may not
        # hold one (RFC 9112 §3.2 takes RFC 3986's pct-encoded).
        url = crawl.normalize_url("/100%/a%2", "http://h.test/")
        self.assertEqual(url, "http://h.test/100%/a%2")
        self.assertEqual(crawl.split_url(url)[3], "/100%25/a%252")

    def test_empty_query_is_sent(self):
        self.assertEqual(crawl.split_url("http://h.test/p?")[3], "/p?")
        self.assertEqual(crawl.split_url("http://h.test/p")[3], "/p")
        self.assertEqual(crawl.normalize_url("", "http://h.test/p?"), None)
        self.assertEqual(crawl.normalize_url("x", "http://h.test/a/p?"), "http://h.test/a/x")
        self.assertEqual(crawl.normalize_url("#f", "http://h.test/p?"), None)

    def test_escapes_beside_a_lone_percent_name_the_same_resource(self):
        # "%%34%31" is "%41" to a server: decoding "%34%31" to "41" would
        # make "%41", which is "A". Hex digits stay escaped beside a lone "%".
        n = crawl.normalize_url
        self.assertEqual(n("/%%34%31", "http://h.test/"), "http://h.test/%%34%31")
        self.assertEqual(n("/%%7e%2e%2E/", "http://h.test/"), "http://h.test/%~../")
        self.assertEqual(n("/%/%2e%2e/x", "http://h.test/a/b"), "http://h.test/x")
        for url in ("http://h.test/%%34%31", "http://h.test/%4%31", "http://h.test/%%7e"):
            self.assertEqual(n(n(url)), n(url))

    def test_backslash_stays_in_query_and_fragment(self):
        n = crawl.normalize_url
        self.assertEqual(n("/a\\b?c\\d#e\\f", "http://h.test/"), "http://h.test/a/b?c%5Cd")
        self.assertEqual(n("?x\\y", "http://h.test/p"), "http://h.test/p?x%5Cy")

    def test_link_host_reads_backslashes(self):
        self.assertEqual(crawl.link_host("\\\\Other.test\\x"), "other.test")
        self.assertEqual(crawl.link_host("http://other.test\\x?y\\z"), "other.test")
        self.assertEqual(crawl.link_host("///Other.test:8/x"), "other.test")
        self.assertEqual(crawl.link_host(" http://u@[::1]:8/"), "::1")
        self.assertIsNone(crawl.link_host("/x//y"))


# ---------------------------------------------------------------------------
# 6. HTTP/1.1
# ---------------------------------------------------------------------------


# Feeding bytes to read_response without a socket ------------------------------
# The parsing tests below are tables: input bytes -> the expected response or
# error. _http_check_table() feeds each case to crawl.read_response through an
# in-memory stream (a) whole, (b) byte by byte and (c) split in two at every
# split point, and checks that all of them give the same result.

_HTTP_URL = "http://example.test/x"


class _HTTPWouldWait(BaseException):
    """Raised by _HTTPPieceSocket when the parse asks for bytes not fed yet
    while the peer has not closed: on a socket, that read would wait. A
    BaseException, so that no ``except Exception`` in the parser takes it."""


class _HTTPPieceSocket:
    """A socket stand-in for crawl.Stream: recv()/recv_into() hand out the
    pieces fed to it, one per call (cut to the caller's size), then b"" when
    eof is set, else raise _HTTPWouldWait. It never blocks, so a parse runs
    to its end within one send() to the coroutine, with no event loop."""

    def __init__(self, pieces=(), eof=False):
        self.pieces = collections.deque()
        self.eof = eof
        self.reads_after_eof = 0
        self.feed(pieces)

    def feed(self, pieces):
        self.pieces.extend(piece for piece in pieces if piece)

    def recv(self, max_bytes):
        if not self.pieces:
            if not self.eof:
                raise _HTTPWouldWait("the parse waits for bytes that never come")
            self.reads_after_eof += 1
            if self.reads_after_eof > 100:
                raise AssertionError("read again and again after EOF: a hang")
            return b""
        piece = self.pieces.popleft()
        if len(piece) > max_bytes:
            self.pieces.appendleft(piece[max_bytes:])
            piece = piece[:max_bytes]
        return piece

    def recv_into(self, buffer):
        piece = self.recv(len(buffer))
        buffer[:len(piece)] = piece
        return len(piece)

    def fileno(self):
        return -1

    def close(self):
        pass


_HTTP_WAITS = "waits for more bytes"


def _http_read(stream, method="GET", max_body_size=crawl.DEFAULT_MAX_BODY_SIZE, url=_HTTP_URL,
               read_body=None):
    """Run crawl.read_response on a stream over an _HTTPPieceSocket to its
    end: (Response, reusable), the exception raised, or _HTTP_WAITS."""
    coro = crawl.read_response(stream, method, url, max_body_size, read_body)
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    except _HTTPWouldWait:
        return _HTTP_WAITS
    except Exception as error:
        return error
    finally:
        coro.close()
    raise AssertionError("read_response waited for I/O on a stream that never blocks")


def _http_feed(messages, method="GET", max_body_size=crawl.DEFAULT_MAX_BODY_SIZE, eof=True,
               read_body=None):
    """Outcomes (see _http_read) of reading one response per message from
    one stream: messages is a list of piece lists; the pieces of a message
    arrive after the previous response was read (as a server answers each
    request), and EOF (if eof) after the last. Later messages are read
    with GET and read whole; the reading stops at the first outcome that
    is not a response."""
    sock = _HTTPPieceSocket()
    stream = crawl.Stream(sock)
    outcomes = []
    for number, pieces in enumerate(messages):
        sock.feed(pieces)
        sock.eof = eof and number == len(messages) - 1
        outcomes.append(_http_read(stream, method if number == 0 else "GET", max_body_size,
                                   read_body=read_body if number == 0 else None))
        if not isinstance(outcomes[-1], tuple):
            break
    return outcomes


# Above this size a message is split at a sample of points, not at every
# one (a parse of a 64 KiB head costs milliseconds). Nor is a long head fed
# one byte at a time all through (_http_byte_pieces): crawl.Stream.readuntil()
# searches the whole buffer again after each read, so a 64 KiB field section
# read one byte per read costs it tens of seconds.
_HTTP_EVERY_POINT = 2048


def _http_split_points(data):
    """Every split point of a small message; for a large one, those in its
    first and last 8 bytes, around the end of its head, and 8 more spread
    evenly."""
    n = len(data)
    if n <= _HTTP_EVERY_POINT:
        return range(1, n)
    points = set(range(1, 9)) | set(range(n - 8, n)) | set(range(n // 9, n, n // 9))
    for blank in (b"\r\n\r\n", b"\n\n"):
        end = data.find(blank)
        if end >= 0:
            points.update(range(end - 2, end + len(blank) + 3))
    return sorted(p for p in points if 0 < p < n)


def _http_byte_pieces(data):
    """data one byte per piece; for a large message, one byte per piece
    for its first 512 bytes, the first 2 KiB after its head and its last
    KiB (when past the head), 8 KiB pieces elsewhere."""
    n = len(data)
    ends = [i + len(blank) for blank in (b"\r\n\r\n", b"\n\n") for i in (data.find(blank),) if i >= 0]
    body = min(ends, default=n)
    runs = sorted((a, b) for a, b in ((0, min(512, n)), (body, min(body + 2048, n)), (max(n - 1024, body), n))
                  if a < b)
    pieces, done = [], 0
    for start, end in runs:
        start = max(start, done)
        pieces += [data[i:min(i + 8192, start)] for i in range(done, start, 8192)]
        pieces += [data[i:i + 1] for i in range(start, end)]
        done = max(done, end)
    return pieces + [data[i:i + 8192] for i in range(done, n, 8192)]


def _http_feedings(messages):
    """(name, [pieces per message]) for the three ways of feeding: whole,
    byte by byte, and each message split in two at each of its split points
    (the other messages whole)."""
    yield "whole", [[data] for data in messages]
    yield "byte by byte", [_http_byte_pieces(data) for data in messages]
    for number, data in enumerate(messages):
        for point in _http_split_points(data):
            pieces = [[other] for other in messages]
            pieces[number] = [data[:point], data[point:]]
            yield f"message {number} split at {point}", pieces


def _http_summary(outcome):
    """A comparable summary of an outcome: all the Response facts, or the
    exception's type and message and its partial response."""
    def facts(response):
        return (response.url, response.status, response.reason, response.http_version,
                response.headers.items(), response.body, response.wire_bytes, response.truncated)
    if isinstance(outcome, tuple):
        return ("response", facts(outcome[0]), outcome[1])
    if outcome == _HTTP_WAITS:
        return (_HTTP_WAITS,)
    # The partial response of an error: how many bytes had been received,
    # and how much of a body that fails to decode had been decoded, depend
    # on where the reads ended.
    response = getattr(outcome, "response", None)
    if response is not None:
        response = facts(response)[:-2]
        if isinstance(outcome, crawl.ContentDecodingError):
            response = response[:-1]
    return ("error", type(outcome), str(outcome), response)


def _http_case(name, data, method="GET", max_body_size=crawl.DEFAULT_MAX_BODY_SIZE, eof=True,
               then=(), read_body=None, **expect):
    """One table row: data (the response bytes) read with method,
    max_body_size and read_body, the connection closed after it (eof) or
    held open.
    then: (bytes, body) of responses that follow on the same connection,
    each after the one before was read (the connection is in sync).

    expect, for a response: status, reason, version, headers (the items),
    get ({name: headers.get(name)}), get_all ({name: list}), field_count,
    body, body_has (a bytes fragment), content_type, charset, body_read,
    content_length, reusable,
    wire_bytes ("all" for len(data)); for an error: error (the type), message (fragments of
    str(error)), kind, partial (the same keys, for error.response; None for
    no response)."""
    response_keys = {"status", "reason", "version", "headers", "get", "get_all", "field_count",
                     "body", "body_has", "content_type", "charset", "wire_bytes", "body_read",
                     "content_length"}
    unknown = set(expect) - response_keys - {"reusable", "error", "message", "kind", "partial"}
    unknown |= set(expect.get("partial") or ()) - response_keys
    if unknown:  # a misspelt expectation would check nothing
        raise TypeError(f"{name}: unknown expectations {sorted(unknown)}")
    return {"name": name, "data": data, "method": method, "max_body_size": max_body_size,
            "eof": eof, "then": list(then), "read_body": read_body, "expect": expect}


def _http_check_response(test, response, expect, data, context):
    checks = {
        "status": lambda: response.status, "reason": lambda: response.reason,
        "version": lambda: response.http_version, "headers": lambda: response.headers.items(),
        "field_count": lambda: len(response.headers), "body": lambda: response.body,
        "wire_bytes": lambda: response.wire_bytes, "content_type": lambda: response.content_type,
        "charset": lambda: response.charset, "body_read": lambda: response.body_read,
        "content_length": lambda: response.content_length,
    }
    for key, value in expect.items():
        if key in checks:
            if key == "wire_bytes" and value == "all":
                value = len(data)
            test.assertEqual(checks[key](), value, f"{context}: {key}")
        elif key == "get":
            test.assertEqual({name: response.headers.get(name) for name in value}, value, context)
        elif key == "get_all":
            test.assertEqual({name: response.headers.get_all(name) for name in value}, value, context)
        elif key == "body_has":
            test.assertIn(value, response.body, context)


def _http_check_expectations(test, case, outcomes):
    expect, data, context = case["expect"], case["data"], case["name"]
    outcome = outcomes[0]
    if "error" in expect:
        test.assertIsInstance(outcome, expect["error"], f"{context}: {outcome!r}")
        messages = expect.get("message", ())
        for fragment in (messages,) if isinstance(messages, str) else messages:
            test.assertIn(fragment, str(outcome), context)
        if isinstance(outcome, crawl.HTTPError):
            test.assertEqual(outcome.url, _HTTP_URL, context)
            test.assertIn(_HTTP_URL, str(outcome), context)
        if "kind" in expect:
            test.assertEqual(outcome.kind, expect["kind"], context)
        if "partial" in expect:
            partial = outcome.response
            if expect["partial"] is None:
                test.assertIsNone(partial, context)
            else:
                test.assertIsInstance(partial, crawl.Response, context)
                test.assertTrue(partial.truncated, context)
                _http_check_response(test, partial, expect["partial"], data, f"{context}: partial")
        return
    test.assertIsInstance(outcome, tuple, f"{context}: {outcome!r}")
    response, reusable = outcome
    test.assertEqual(response.url, _HTTP_URL, context)
    test.assertFalse(response.truncated, context)
    _http_check_response(test, response, expect, data, context)
    if "reusable" in expect:
        test.assertEqual(reusable, expect["reusable"], f"{context}: reusable")
    test.assertEqual(len(outcomes), 1 + len(case["then"]), context)
    for (sent, body), later in zip(case["then"], outcomes[1:]):
        test.assertIsInstance(later, tuple, f"{context}: the response after: {later!r}")
        test.assertEqual((later[0].status, later[0].body, later[0].wire_bytes), (200, body, len(sent)),
                         f"{context}: the response after")


def _http_check_table(test, cases):
    """Check each case (see _http_case) fed whole, byte by byte and split
    at every split point: the whole feeding meets the expectations, and
    every other feeding gives the same outcome.

    One exception, for reusable: bytes after the end of a response (a 304
    with a body, say) can only be seen when they arrive with it; when a
    piece ends exactly there, reusable is what it would be without them."""
    for case in cases:
        with test.subTest(case=case["name"]):
            messages = [case["data"]] + [sent for sent, _ in case["then"]]
            args = (case["method"], case["max_body_size"], case["eof"], case["read_body"])
            whole = None
            for name, pieces in _http_feedings(messages):
                outcomes = _http_feed(pieces, *args)
                if whole is None:
                    whole = outcomes
                    _http_check_expectations(test, case, outcomes)
                    expected = [_http_summary(outcome) for outcome in outcomes]
                    unseen = {}
                    for number, outcome in enumerate(outcomes):
                        end = outcome[0].wire_bytes if isinstance(outcome, tuple) else None
                        if end is not None and end < len(messages[number]):
                            cut = [[m] for m in messages[:number]] + [[messages[number][:end]]]
                            alone = _http_feed(cut, *args[:2], eof=False, read_body=args[3])[number]
                            unseen[number] = (end, _http_summary(alone))
                    continue
                got = [_http_summary(outcome) for outcome in outcomes]
                for number, (end, alone) in unseen.items():
                    if number < len(got) and _http_piece_ends_at(pieces[number], end):
                        expected_here = list(expected)
                        expected_here[number] = alone
                        test.assertEqual(got, expected_here, f"{case['name']}, fed {name}")
                        break
                else:
                    test.assertEqual(got, expected, f"{case['name']}, fed {name}")


def _http_piece_ends_at(pieces, offset):
    """Whether a piece of the message ends exactly at offset."""
    total = 0
    for piece in pieces:
        total += len(piece)
        if total >= offset:
            return total == offset
    return False



# Status line -----------------------------------------------------------------
class HTTPStatusLineTest(HTTPLayerTestCase):

    def test_parse_status_line_valid(self):
        cases = {
            b"HTTP/1.1 200 OK\r\n": ("HTTP/1.1", 200, "OK"),
            b"HTTP/1.0 200\r\n": ("HTTP/1.0", 200, ""),
            b"HTTP/1.1 200 \r\n": ("HTTP/1.1", 200, ""),
            b"HTTP/1.1 404 Not Found\r\n": ("HTTP/1.1", 404, "Not Found"),
            b"HTTP/1.1 304 NOT MODIFIED\n": ("HTTP/1.1", 304, "NOT MODIFIED"),
            b"HTTP/1.1 500 Internal Server Error\r\n": ("HTTP/1.1", 500, "Internal Server Error"),
            b"HTTP/1.0 302 Found\r\n": ("HTTP/1.0", 302, "Found"),
        }
        for line, expected in cases.items():
            with self.subTest(line=line):
                self.assertEqual(crawl.parse_status_line(line), expected)

    def test_parse_status_line_invalid(self):
        for line in (b"HTTP/2 200 OK\r\n", b"HTTP/1.1 20 OK\r\n", b"HTTP/1.1 2000 OK\r\n",
                     b"ICY 200 OK\r\n", b"HTTP/1.1 abc OK\r\n", b"HTTP/1.1  200 OK\r\n",
                     b"HTTP/1.1 200OK\r\n", b"garbage\r\n", b"\r\n", b"",
                     b"http/1.1 200 OK\r\n", b"HTTP/1.x 200 OK\r\n", b"HTTP/1.1\r\n"):
            with self.subTest(line=line):
                with self.assertRaises(crawl.ProtocolError) as caught:
                    crawl.parse_status_line(line, "http://example.test/")
                self.assertIn("http://example.test/", str(caught.exception))

    def test_missing_or_empty_reason_phrase(self):
        body = html_bytes("/next")
        body_b = html_bytes("/b-next")
        answer_b = b"HTTP/1.1 200 \r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(body_b) + body_b
        _http_check_table(self, [
            # HTTP/1.0 without keep-alive: the connection is not reused.
            _http_case("HTTP/1.0, no reason phrase",
                       b"HTTP/1.0 200\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(body) + body,
                       status=200, reason="", version="HTTP/1.0", body=body, body_has=b'<a href="/next">',
                       reusable=False),
            # A second one after it on the same connection.
            _http_case("HTTP/1.1, empty reason phrase", answer_b, eof=False, then=[(answer_b, body_b)],
                       status=200, reason="", version="HTTP/1.1", body=body_b, reusable=True),
        ])

    def test_invalid_status_lines(self):
        lines = {"HTTP/2": (b"HTTP/2 200 OK", "HTTP/2 200"), "two digits": (b"HTTP/1.1 20 OK", "HTTP/1.1 20 OK"),
                 "ICY": (b"ICY 200 OK", "ICY 200 OK"), "binary junk": (b"\x00\x01garbage\xff", "garbage"),
                 "HTML": (b"<html>hello</html>", "<html>hello</html>")}
        _http_check_table(self, [
            _http_case(name, line + b"\r\nContent-Length: 0\r\n\r\n", error=crawl.ProtocolError, message=seen,
                       kind="protocol", partial=None)
            for name, (line, seen) in lines.items()])

    def test_bare_cr_and_nul_in_the_status_line_are_rejected(self):
        # RFC 9112 §2.2, RFC 9110 §5.5: rejected, never a line end (the
        # reason used to be recorded as 'OK\rContent-Length: 0').
        invalid = dict(error=crawl.ProtocolError, message="invalid status line", kind="protocol", partial=None)
        _http_check_table(self, [
            _http_case("bare CR splitting the line", b"HTTP/1.1 200 OK\rContent-Length: 0\r\n\r\n",
                       eof=False, **dict(invalid, message=["invalid status line", "a bare CR"])),
            _http_case("bare CR before CRLF", b"HTTP/1.1 200 OK\r\r\nContent-Length: 0\r\n\r\n", eof=False,
                       **dict(invalid, message="a bare CR")),
            # CR alone never ends a line: no status line ever arrived.
            _http_case("bare CR as the only line end", b"HTTP/1.1 200 OK\rContent-Length: 2\r\rok", eof=True,
                       error=crawl.IncompleteReadError),
            _http_case("NUL in the reason", b"HTTP/1.1 200 O\0K\r\nContent-Length: 0\r\n\r\n", eof=False,
                       **dict(invalid, message=["invalid status line", "a NUL"])),
        ])
        for line in (b"HTTP/1.1 200 OK\rX: y\r\n", b"HTTP/1.1 200 OK\r\r\n", b"HTTP/1.1 200 \0\n"):
            with self.subTest(line=line), self.assertRaises(crawl.ProtocolError):
                crawl.parse_status_line(line)


# Field section ---------------------------------------------------------------
class HTTPFieldsTest(HTTPLayerTestCase):

    def test_fields_object(self):
        fields = crawl.Fields([("Set-Cookie", "a=1"), ("Content-Type", "text/html"), ("set-cookie", "b=2")])
        self.assertEqual(fields.get("content-type"), "text/html")
        self.assertEqual(fields.get("CONTENT-TYPE"), "text/html")
        self.assertEqual(fields["Content-type"], "text/html")
        self.assertEqual(fields.get_all("SET-COOKIE"), ["a=1", "b=2"])
        self.assertEqual(fields.get("set-cookie"), "a=1, b=2")
        self.assertEqual(fields.get("missing"), None)
        self.assertEqual(fields.get("missing", "x"), "x")
        self.assertEqual(fields.get_all("missing"), [])
        self.assertIn("set-COOKIE", fields)
        self.assertNotIn("missing", fields)
        with self.assertRaises(KeyError):
            fields["missing"]
        self.assertEqual(len(fields), 3)
        self.assertEqual(fields.items(), [("Set-Cookie", "a=1"), ("Content-Type", "text/html"),
                                          ("set-cookie", "b=2")])

    def test_the_end_of_fields_pattern_finds_what_the_plain_one_does(self):
        plain = re.compile(rb"(?:^|\n)\r?\n")  # what _END_OF_FIELDS stands for
        rng = random.Random(9112)
        texts = [b"", b"\n", b"\r\n", b"\r\r\n", b"A: 1\r\n\r\nbody\n\n", b"A: 1\n\nB",
                 b"A: 1\n\r\n", b"A: 1\r\nB: 2\r\n", b"\nA"]
        texts += [bytes(rng.choice(b"\r\nA:") for _ in range(rng.randrange(12)))
                  for _ in range(5000)]
        for text in texts:
            expected = plain.search(text)
            found = crawl._END_OF_FIELDS.search(bytearray(text))
            self.assertEqual(found and found.end(), expected and expected.end(), text)

    def test_parse_fields(self):
        fields = crawl.parse_fields(["A: 1\r\n", "  continued\r\n", "\tagain\r\n", "B:2\n",
                                     "C:   spaced \t \r\n", "D:\r\n", "E: x: y\r\n"])
        self.assertEqual(fields.items(), [("A", "1 continued again"), ("B", "2"), ("C", "spaced"),
                                          ("D", ""), ("E", "x: y")])
        for bad in (["no colon here\r\n"], [": empty name\r\n"], ["Bad Name: x\r\n"],
                    ["Name : x\r\n"], [" continuation first\r\n", "A: 1\r\n"]):
            with self.subTest(lines=bad):
                with self.assertRaises(crawl.ProtocolError):
                    crawl.parse_fields(bad, "http://example.test/")

    def test_plain_field_lines_read_in_one_call_as_parse_fields_reads_them(self):
        blocks = ["\r\n", "\n", "A: 1\r\nB:2\n\r\n", "C:   spaced \t \r\nD:\r\nE: x: y\n\n",
                  "F: \t\r\nG:a b\t c\r\nH: \"q\"  \r\n\r\n"]
        for block in blocks:
            with self.subTest(block=block):
                self.assertEqual(crawl._plain_fields(block).items(),
                                 crawl.parse_fields(block.split("\n")[:-2]).items())
        # Folded, invalid: left to parse_fields (line by line).
        for block in ("A: 1\r\n  continued\r\n\r\n", "A: 1\r\nno colon\r\n\r\n",
                      " first\r\nA: 1\r\n\r\n", "A: 1\r\nBad Name: x\r\n\r\n", "X-A: 1\r\n:\r\n\r\n"):
            with self.subTest(block=block):
                self.assertIsNone(crawl._plain_fields(block))

    def test_repeated_case_insensitive_and_folded(self):
        data = (b"HTTP/1.1 200 OK\r\n"
                b"Set-Cookie: a=1\r\n"
                b"content-type: text/plain\r\n"
                b"SET-COOKIE: b=2\r\n"
                b"X-Folded: first\r\n"
                b"  second\r\n"
                b"\tthird\r\n"
                b"Content-Length: 5\r\n"
                b"\r\n"
                b"hello")
        _http_check_table(self, [_http_case(
            "repeated, any case, folded", data, eof=False, body=b"hello",
            get={"Content-Type": "text/plain", "x-folded": "first second third"},
            get_all={"set-cookie": ["a=1", "b=2"]},
            headers=[("Set-Cookie", "a=1"), ("content-type", "text/plain"), ("SET-COOKIE", "b=2"),
                     ("X-Folded", "first second third"), ("Content-Length", "5")],
            wire_bytes="all")])

    def test_bare_lf_line_ends(self):
        body = html_bytes("/lf-ok")
        n = len(body)
        lf_only = b"HTTP/1.1 200 OK\nContent-Type: text/html\nContent-Length: %d\n\n" % n + body
        mixed = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\nContent-Length: %d\r\n\n" % n + body
        expect = dict(status=200, reason="OK", headers=[("Content-Type", "text/html"), ("Content-Length", str(n))],
                      body=body, body_has=b'<a href="/lf-ok">', wire_bytes="all", reusable=True)
        _http_check_table(self, [
            # The connection stays in sync: the responses after it on the same one parse too.
            _http_case("bare LF only", lf_only, eof=False,
                       then=[(mixed, body), (lf_only, body), (http_response("after"), b"after")], **expect),
            _http_case("CRLF and bare LF mixed", mixed, eof=False, **expect),
        ])

    def test_bare_cr_and_nul_in_field_lines_are_rejected(self):
        # Rejected rather than replaced with SP: a CR that a proxy reads as
        # a line end would show it other fields (response splitting).
        head = b"HTTP/1.1 200 OK\r\n"
        end = b"Content-Length: 2\r\n\r\nok"
        invalid = dict(error=crawl.ProtocolError, kind="protocol", partial=None)
        _http_check_table(self, [
            _http_case("bare CR splitting a field line", head + b"Content-Type: text/html\rX-Injected: 1\r\n" + end,
                       eof=False, message=["invalid field line", "a bare CR", "X-Injected"], **invalid),
            _http_case("bare CR before CRLF", head + b"Content-Type: text/html\r\r\n" + end, eof=False,
                       message="a bare CR", **invalid),
            _http_case("bare CR ending the fields", head + b"Content-Type: text/html\r\n\r" + end, eof=False,
                       message="a bare CR", **invalid),
            _http_case("bare CR in an obs-fold line", head + b"X-Folded: a\r\n b\rc\r\n" + end, eof=False,
                       message="a bare CR", **invalid),
            _http_case("NUL in a value", head + b"Content-Type: text/html\0; charset=utf-8\r\n" + end,
                       eof=False, message=["invalid field line", "a NUL"], **invalid),
            _http_case("NUL in a name", head + b"X-A\0b: 1\r\n" + end, eof=False, message="a NUL", **invalid),
            # The leniencies kept: bare LF line ends and obs-fold.
            _http_case("bare LF and obs-fold still read", head + b"X-Folded: a\n\tb\n" + b"Content-Length: 2\n\nok",
                       eof=False, body=b"ok", get={"x-folded": "a b"}, reusable=True),
        ])
        self.assertEqual(crawl.parse_fields(["A: 1\r\n"]).items(), [("A", "1")])
        self.assertEqual(crawl.parse_fields(["A: 1\r\r\n"]).items(), [("A", "1\r")],
                         "one line end is removed, not every CR (read_response rejects these bytes)")

    def test_field_section_over_64k_is_an_error_not_a_hang(self):
        # The connection is held open after these bytes: nothing more comes.
        one_line = b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70000 + b"\r\nContent-Length: 0\r\n\r\n"
        many_lines = (b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-Line-%03d: %s\r\n" % (i, b"b" * 980)
                                                       for i in range(100))
                      + b"Content-Length: 0\r\n\r\n")
        long_status = b"HTTP/1.1 200 " + b"O" * 70000 + b"\r\nContent-Length: 0\r\n\r\n"
        endless = b"HTTP/1.1 200 OK\r\nX-Endless: " + b"c" * 200000  # no line end
        _http_check_table(self, [
            _http_case("one 70 KB field", one_line, eof=False, error=crawl.ProtocolError),
            _http_case("100 fields of 1 KB", many_lines, eof=False, error=crawl.ProtocolError),
            _http_case("70 KB status line", long_status, eof=False, error=crawl.ProtocolError),
            _http_case("a field that never ends", endless, eof=False, error=crawl.ProtocolError),
        ])

    def test_field_count_limit(self):
        limit = crawl.MAX_FIELD_COUNT

        def head(count):
            lines = [b"Content-Length: 2\r\n"] + [b"X-F%d: v\r\n" % i for i in range(count - 1)]
            return b"HTTP/1.1 200 OK\r\n" + b"".join(lines) + b"\r\nok"

        _http_check_table(self, [
            _http_case("at the limit", head(limit), eof=False, field_count=limit, body=b"ok"),
            _http_case("one over", head(limit + 1), eof=False, error=crawl.ProtocolError),
            _http_case("1000 fields", head(1000), eof=False, error=crawl.ProtocolError),
        ])


# Interim responses and bodyless statuses ---------------------------------------
class HTTPInterimAndNoBodyTest(HTTPLayerTestCase):

    def test_interim_and_bodyless_responses(self):
        interim = (b"HTTP/1.1 100 Continue\r\n\r\n"
                   b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
                   b"HTTP/1.1 200 OK\r\nX-Final: yes\r\nContent-Length: 5\r\n\r\nhello")
        after = [(http_response("next"), b"next")]
        _http_check_table(self, [
            _http_case("1xx skipped", interim, eof=False, then=after, status=200, reason="OK", body=b"hello",
                       headers=[("X-Final", "yes"), ("Content-Length", "5")], get={"link": None},
                       wire_bytes="all", reusable=True),
            _http_case("1xx skipped before a 201",
                       b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                       b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok", eof=False,
                       status=201, reason="Created", body=b"ok", reusable=True),
            # HEAD: no body whatever Content-Length says, and the connection stays in sync.
            _http_case("HEAD", b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1000\r\n\r\n",
                       method="HEAD", eof=False, then=[(http_response("after head"), b"after head")],
                       status=200, body=b"", get={"content-length": "1000"}, reusable=True),
            _http_case("204", b"HTTP/1.1 204 No Content\r\nServer: x\r\n\r\n", eof=False, then=after,
                       status=204, reason="No Content", body=b"", reusable=True),
            # Bytes after a bodyless response: read as no body (a client that
            # waited for more would hang), and the connection is not reused.
            _http_case("304 with stray bytes",
                       b"HTTP/1.1 304 NOT MODIFIED\r\nConnection: keep-alive\r\n\r\ntest", eof=False,
                       status=304, reason="NOT MODIFIED", body=b"", reusable=False),
            _http_case("204 with stray bytes", b"HTTP/1.1 204 No Content\r\n\r\njunk", eof=False,
                       status=204, body=b"", reusable=False),
            _http_case("HEAD answered with a body", b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody",
                       method="HEAD", eof=False, status=200, body=b"", reusable=False),
        ])

    def test_empty_lines_after_an_interim_response(self):
        final = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
        after = [(http_response("next"), b"next")]
        _http_check_table(self, [
            # Some servers send an empty line after "100 Continue": the final response follows.
            _http_case("100, an empty line, 200", b"HTTP/1.1 100 Continue\r\n\r\n\r\n" + final, eof=False,
                       then=after, status=200, reason="OK", body=b"hello", wire_bytes="all", reusable=True),
            _http_case("100, empty lines (LF, CRLF), 200", b"HTTP/1.1 100 Continue\n\n\n\r\n" + final,
                       eof=False, status=200, body=b"hello", reusable=True),
            _http_case("103, an empty line, 200",
                       b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n\r\n" + final, eof=False,
                       status=200, body=b"hello", reusable=True),
            # Not before a first status line, nor a bare CR as an empty line.
            _http_case("empty line first", b"\r\n" + final, eof=False, error=crawl.ProtocolError,
                       message="invalid status line", partial=None),
            _http_case("bare CR after 100", b"HTTP/1.1 100 Continue\r\n\r\n\r" + final, eof=False,
                       error=crawl.ProtocolError, message="a bare CR", partial=None),
            # Empty lines count against the head's 64 KiB.
            _http_case("endless empty lines", b"HTTP/1.1 100 Continue\r\n\r\n" + b"\r\n" * 40000 + final,
                       eof=False, error=crawl.ProtocolError, message="response head larger than"),
        ])

    def test_head_against_http_server(self):
        site = self.site({"/": html_page("/a")})
        client = self.client()
        head = self.get(client, site.url("/"), "HEAD")
        get = self.get(client, site.url("/"))
        self.assertEqual(head.body, b"")
        self.assertEqual(head.headers.get("content-length"), str(len(get.body)))
        self.assertEqual(get.body, html_page("/a").body)
        self.assertEqual([r["method"] for r in site.requests], ["HEAD", "GET"])
        self.assertEqual(site.connections, 1)

    def test_read_response_reusable_flags(self):
        cases = [
            (b"HTTP/1.1 304 Not Modified\r\nConnection: keep-alive\r\n\r\ntest", "GET", b"", False),
            (b"HTTP/1.1 304 Not Modified\r\n\r\n", "GET", b"", True),
            (b"HTTP/1.1 204 No Content\r\n\r\n", "GET", b"", True),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", "HEAD", b"", True),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "GET", b"ok", True),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok", "GET", b"ok", False),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: Keep-Alive, CLOSE\r\n\r\nok", "GET",
             b"ok", False),
            (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", "GET", b"ok", False),
            (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok", "GET", b"ok", True),
            (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", "GET", b"ok", True),
            (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\nok\r\n0\r\n\r\n",
             "GET", b"ok", False),
        ]
        table = [_http_case(f"{method} {data!r}", data, method, eof=False, body=body, reusable=reusable)
                 for data, method, body, reusable in cases]
        # Read until close: complete at EOF, never reusable.
        table.append(_http_case("until close", b"HTTP/1.1 200 OK\r\n\r\nuntil close", eof=True,
                                body=b"until close", reusable=False))
        _http_check_table(self, table)

    def test_body_framing(self):
        f = crawl.Fields
        cases = [
            (("HEAD", 200, f([("Content-Length", "10")])), ("none", 0, True)),
            (("GET", 204, f()), ("none", 0, True)),
            (("GET", 304, f([("Content-Length", "10")])), ("none", 0, True)),
            (("GET", 200, f([("Transfer-Encoding", "chunked")])), ("chunked", None, True)),
            (("GET", 200, f([("Transfer-Encoding", "Chunked"), ("Content-Length", "5")])),
             ("chunked", None, False)),
            (("GET", 200, f([("Content-Length", "42")])), ("length", 42, True)),
            (("GET", 200, f([("Content-Length", "42"), ("content-length", "42")])), ("length", 42, True)),
            (("GET", 200, f([("Content-Length", "42, 42")])), ("length", 42, True)),
            (("GET", 200, f([("Content-Length", "0")])), ("length", 0, True)),
            (("GET", 200, f()), ("close", None, False)),
        ]
        for args, expected in cases:
            with self.subTest(args=args):
                self.assertEqual(crawl.body_framing(*args), expected)

    def test_invalid_content_length(self):
        for value in ("abc", "-1", "+5", "5.0", "0x10", "", "1 2", "5, 6", "\xb2", "\u0663"):
            with self.subTest(value=value):
                with self.assertRaises(crawl.ProtocolError):
                    crawl.body_framing("GET", 200, crawl.Fields([("Content-Length", value)]), "http://e.test/")
        _http_check_table(self, [
            _http_case(f"Content-Length: {value!r}", b"HTTP/1.1 200 OK\r\nContent-Length: %s\r\n\r\nbody" % value,
                       eof=False, error=crawl.ProtocolError, partial={"status": 200, "body": b""})
            for value in (b"abc", b"-1", b"\xb2")])


# Chunked, Content-Length, close-delimited, truncated -----------------------------
class HTTPBodyFramingTest(HTTPLayerTestCase):
    CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"

    def test_chunked(self):
        data = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
                b"5;ext=1\r\nhello\r\n6 \r\n world\r\nA\r\n0123456789\r\n0\r\n\r\n")
        trailers = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n"
                    + chunked_body(b"hello trailers", 4, b"X-Checksum: abc\r\nX-Other: w\r\n"))
        after = [(http_response("next"), b"next")]
        _http_check_table(self, [
            _http_case("chunk extensions, whitespace, upper-case hex", data, eof=False, then=after,
                       body=b"hello world0123456789", wire_bytes="all", reusable=True),
            # Trailers are read and discarded.
            _http_case("trailers", trailers, eof=False, then=after, body=b"hello trailers", wire_bytes="all",
                       get={"x-checksum": None}, reusable=True),
            # Chunked wins over Content-Length, but the connection is not reused.
            _http_case("chunked and Content-Length",
                       b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 100\r\n\r\n"
                       b"5\r\nhello\r\n0\r\n\r\n", eof=False, body=b"hello", reusable=False),
            # Only the final CRLF is missing: the body is whole (as http.client
            # reads it), but the connection is done.
            _http_case("last chunk then close", self.CHUNKED + b"5\r\nhello\r\n0\r\n", eof=True,
                       status=200, body=b"hello", reusable=False),
        ])

    def test_bad_chunked_framing(self):
        malformed = dict(error=crawl.ProtocolError, message="malformed chunk size")
        _http_check_table(self, [
            _http_case("not hex", self.CHUNKED + b"5\r\nhello\r\nzz\r\n...\r\n0\r\n\r\n", eof=False,
                       partial={"status": 200, "body": b"hello"}, **malformed),
            _http_case("half hex", self.CHUNKED + b"5\r\nhello\r\n1X\r\nab\r\n0\r\n\r\n", eof=False,
                       partial={"status": 200, "body": b"hello"}, **malformed),
            _http_case("0x prefix", self.CHUNKED + b"0x5\r\nhello\r\n0\r\n\r\n", eof=False,
                       partial={"status": 200, "body": b""}, **malformed),
            _http_case("chunk data not followed by CRLF", self.CHUNKED + b"5\r\nhelloXX\r\n0\r\n\r\n", eof=False,
                       error=crawl.ProtocolError, message="not followed by CRLF", partial={}),
        ])

    def test_bare_cr_and_nul_in_chunk_lines_are_rejected(self):
        bad = dict(error=crawl.ProtocolError, kind="protocol")
        _http_check_table(self, [
            _http_case("bare CR after the size", self.CHUNKED + b"5\r\r\nhello\r\n0\r\n\r\n", eof=False,
                       message=["malformed chunk size", "a bare CR"], partial={"status": 200, "body": b""}, **bad),
            _http_case("bare CR in an extension", self.CHUNKED + b"5;a=\rb\r\nhello\r\n0\r\n\r\n", eof=False,
                       message="a bare CR", partial={"status": 200, "body": b""}, **bad),
            _http_case("NUL in the last chunk", self.CHUNKED + b"5\r\nhello\r\n0\0\r\n\r\n", eof=False,
                       message="a NUL", partial={"status": 200, "body": b"hello"}, **bad),
            _http_case("bare CR in a trailer", self.CHUNKED + b"5\r\nhello\r\n0\r\nX-T: a\rb\r\n\r\n",
                       eof=False, message=["invalid trailer line", "a bare CR"], partial={"status": 200}, **bad),
            # Whitespace around the size is a leniency kept.
            _http_case("whitespace around the size", self.CHUNKED + b" 5 \t;x\r\nhello\r\n0\r\n\r\n", eof=False,
                       body=b"hello", reusable=True),
        ])

    def test_protocol_error_mid_body_closes_the_connection(self):
        server = self.raw({"/badchunk": answer_and_hold(self.CHUNKED + b"5\r\nhello\r\nzz\r\n...\r\n0\r\n\r\n"),
                           "/": http_response("fine")})
        client = self.client()
        error = self.get_error(crawl.ProtocolError, client, server.url("/badchunk"))
        self.assertIn("malformed chunk size", str(error))
        # The connection is not reused: the next fetch opens a new one.
        self.assertEqual(self.get(client, server.url("/")).body, b"fine")
        self.assertEqual(server.connections, 2)
        self.get(client, server.url("/"))  # and that one is reused
        self.assertEqual(server.connections, 2)

    def test_duplicate_content_length(self):
        body = b'<html><body><a href="/dup-next">next</a>'
        body += b" " * (84 - len(body) - len(b"</body></html>\n")) + b"</body></html>\n"
        self.assertEqual(len(body), 84)
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
        same = dict(status=200, body=body, body_has=b'<a href="/dup-next">', reusable=True)
        _http_check_table(self, [
            _http_case("repeated", head + b"Content-Length: 84\r\nContent-Length: 84\r\n\r\n" + body, eof=False,
                       **same),
            _http_case("listed", head + b"Content-Length: 84, 84\r\n\r\n" + body, eof=False, **same),
            _http_case("conflicting", head + b"Content-Length: 84\r\nContent-Length: 90\r\n\r\n" + body,
                       eof=False, error=crawl.ProtocolError),
        ])

    def test_read_until_close(self):
        start = b"<!doctype html><html><body><p>"
        end = b'</p><a href="/tail">tail</a></body></html>\n'
        page = start + b"A" * (10000 - len(start) - len(end)) + end
        self.assertEqual(len(page), 10000)
        _http_check_table(self, [
            _http_case("HTTP/1.0", b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n" + b"A" * 10000,
                       status=200, version="HTTP/1.0", body=b"A" * 10000, reusable=False),
            # keep-alive promised, but without a length the close ends the body.
            _http_case("HTTP/1.1 keep-alive",
                       b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: keep-alive\r\n\r\n" + page,
                       status=200, body=page, reusable=False),
        ])

    def test_truncated_bodies(self):
        truncated = dict(error=crawl.TruncatedBody, kind="truncated")
        _http_check_table(self, [
            _http_case("Content-Length", b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"0123456789" * 4,
                       partial={"status": 200, "body": b"0123456789" * 4}, **truncated),
            _http_case("mid-chunk", self.CHUNKED + b"a\r\n0123", partial={"body": b"0123"}, **truncated),
            _http_case("after a chunk", self.CHUNKED + b"5\r\nhello\r\n", partial={"body": b"hello"},
                       **truncated),
            # Closed before the head is complete: read_response's own error
            # (the client reports it as a ProtocolError, below).
            _http_case("closed in the head", b"HTTP/1.1 200 OK\r\nContent-Le", error=crawl.IncompleteReadError),
        ])
        self.assertTrue(issubclass(crawl.TruncatedBody, crawl.HTTPError))

    def test_closed_before_complete_head(self):
        server = self.raw({"/": answer_and_close(b"HTTP/1.1 200 OK\r\nContent-Le")})
        error = self.get_error(crawl.ProtocolError, self.client(), server.url("/"))
        self.assertIn(server.url("/"), str(error))

    def test_errors_after_the_head_carry_the_response(self):
        # HTTPError.response is the partial Response whenever the status
        # line and fields had arrived (crawl.HTTPError docstring).
        cases = {
            "conflicting lengths": (crawl.ProtocolError, b"Content-Length: 84\r\nContent-Length: 90\r\n\r\n"),
            "bad length": (crawl.ProtocolError, b"Content-Length: abc\r\n\r\n"),
            "br": (crawl.ContentDecodingError, b"Content-Encoding: br\r\nContent-Length: 4\r\n\r\nxxxx"),
            "too large": (crawl.BodyTooLarge, b"Content-Length: 99999999\r\n\r\n" + bytes((1 << 20) + 1)),
            "truncated": (crawl.TruncatedBody, b"Content-Length: 10\r\n\r\nabc"),
        }
        _http_check_table(self, [
            _http_case(name, b"HTTP/1.1 200 OK\r\nX-Mark: here\r\n" + rest, max_body_size=1 << 20,
                       error=error_type, partial={"status": 200, "get": {"x-mark": "here"}})
            for name, (error_type, rest) in cases.items()])


# Content-Encoding ----------------------------------------------------------------
class HTTPContentEncodingTest(HTTPLayerTestCase):
    HTML = html_bytes("/deflate-ok").replace(b"<p>Some text.</p>", b"<p>" + b"Some text. " * 200 + b"</p>")

    def test_codings_decode_to_the_same_html(self):
        html = self.HTML
        gz = gzip.compress(html)
        zl = zlib.compress(html)
        raw = deflate_raw(html)
        self.assertNotEqual(zl[:2], raw[:2])

        def coded(coding, payload, chunked=False):
            headers = [("Content-Type", "text/html; charset=utf-8"), ("Content-Encoding", coding)]
            if chunked:
                return (http_response(b"", headers=headers + [("Transfer-Encoding", "chunked")], length=False)
                        + chunked_body(payload, 100))
            return http_response(payload, headers=headers)

        table = {
            "gzip": coded("gzip", gz),
            "x-gzip": coded("x-gzip", gz),
            "GZip": coded("GZip", gz),
            "gzip, chunked": coded("gzip", gz, chunked=True),
            "zlib deflate": coded("deflate", zl),
            "raw deflate": coded("deflate", raw),
            "raw deflate, chunked": coded("deflate", raw, chunked=True),
            "identity": coded("identity", html),
            "none": http_response(html),
        }
        _http_check_table(self, [
            _http_case(name, data, eof=False, status=200, body=html, body_has=b'<a href="/deflate-ok">',
                       wire_bytes="all", reusable=True)
            for name, data in table.items()])

    def test_empty_body_with_content_encoding(self):
        _http_check_table(self, [
            _http_case("empty gzip", b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 0\r\n\r\n",
                       eof=False, body=b"", reusable=True),
            _http_case("empty deflate",
                       b"HTTP/1.1 200 OK\r\nContent-Encoding: deflate\r\nContent-Length: 0\r\n\r\n",
                       eof=False, body=b"", reusable=True),
            _http_case("redirect",
                       b"HTTP/1.1 301 Moved\r\nLocation: /x\r\nContent-Encoding: gzip\r\nContent-Length: 0\r\n\r\n",
                       eof=False, body=b"", reusable=True),
            _http_case("HEAD", b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 20\r\n\r\n",
                       method="HEAD", eof=False, body=b"", reusable=True),
        ])

    def test_corrupt_unsupported_and_incomplete_codings(self):
        gz = bytearray(gzip.compress(self.HTML))
        gz[-8] ^= 0xFF  # CRC-32 no longer matches
        whole_gz = gzip.compress(self.HTML)
        raw = deflate_raw(self.HTML)
        cases = {
            "not gzip": ("gzip", b"this is not gzip data at all"),
            "bad CRC": ("gzip", bytes(gz)),
            "not deflate": ("deflate", b"\xff\xff\xff\xff not deflate either \xff\xff"),
            "br": ("br", b"\x0b\x02\x80hello\x03"),
            "compress": ("compress", b"\x1f\x9d\x90hello"),
            # A body that ends (at its declared length) in the middle of the
            # compressed stream is corrupt, not a short success.
            "gzip cut": ("gzip", whole_gz[:len(whole_gz) // 2]),
            "gzip without its trailer": ("gzip", whole_gz[:-8]),
            "raw deflate cut": ("deflate", raw[:len(raw) // 2]),
            "one byte of deflate": ("deflate", b"x"),
        }
        _http_check_table(self, [
            _http_case(name, http_response(payload, headers=[("Content-Encoding", coding)]), eof=False,
                       error=crawl.ContentDecodingError, kind="decoding")
            for name, (coding, payload) in cases.items()])

    def test_compression_bomb_stops_at_the_limit(self):
        limit = 1 << 20
        gz = compression_bomb("gzip")
        zl = compression_bomb("zlib")
        too_large = dict(max_body_size=limit, eof=False, error=crawl.BodyTooLarge, kind="too_large",
                         partial={"body": bytes(limit)})
        _http_check_table(self, [
            _http_case("gzip", http_response(gz, headers=[("Content-Encoding", "gzip")]), **too_large),
            _http_case("gzip, chunked", http_response(
                b"", headers=[("Content-Encoding", "gzip"), ("Transfer-Encoding", "chunked")], length=False)
                + chunked_body(gz, 16384), **too_large),
            _http_case("deflate", http_response(zl, headers=[("Content-Encoding", "deflate")]), **too_large),
        ])

    def test_content_decoder_unit(self):
        html = self.HTML
        for coding, payload in (("gzip", gzip.compress(html)), ("deflate", zlib.compress(html)),
                                ("deflate", deflate_raw(html)), (None, html), ("identity", html)):
            with self.subTest(coding=coding, head=payload[:2]):
                decoder = crawl.ContentDecoder(coding, 1 << 20)
                for i in range(len(payload)):  # one byte at a time
                    self.assertTrue(decoder.feed(payload[i:i + 1]))
                self.assertEqual(decoder.finish(), html)
        decoder = crawl.ContentDecoder("gzip", 100)
        self.assertFalse(decoder.feed(gzip.compress(html)))
        self.assertEqual(decoder.finish(), html[:100])
        with self.assertRaises(crawl.ContentDecodingError):
            crawl.ContentDecoder("br", 100)

    def test_a_body_in_small_pieces_takes_about_its_size(self):
        # A server may send its body in 2-byte chunks: the pieces are not
        # each kept as an object (which took 20 times the body's size).
        import tracemalloc
        decoder = crawl.ContentDecoder(None, 1 << 20)
        tracemalloc.start()
        self.addCleanup(tracemalloc.stop)
        for _ in range(50000):
            decoder.feed(b"ab")
        kept, _ = tracemalloc.get_traced_memory()
        self.assertLess(kept, 400_000)  # the 100,000-byte body, and room to grow
        self.assertEqual(decoder.finish(), b"ab" * 50000)


# Limits --------------------------------------------------------------------------
class HTTPBodySizeLimitTest(HTTPLayerTestCase):

    def test_content_length_over_limit_is_read_up_to_the_limit(self):
        # Only 10 of the declared bytes are sent, and the connection is held
        # open: a reader that read on past the limit would wait instead.
        _http_check_table(self, [_http_case(
            "Content-Length over the limit", b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
            b"Content-Length: 2000000\r\n\r\n0123456789", max_body_size=5, eof=False,
            error=crawl.BodyTooLarge, message="Content-Length 2000000 exceeds the limit of 5 bytes",
            partial={"status": 200, "body": b"01234"})])

    def test_bodies_over_the_limit_are_cut_at_the_limit(self):
        limit = 100000
        big = bytes(range(256)) * 1200  # 307200 bytes
        cut = dict(max_body_size=limit, error=crawl.BodyTooLarge, partial={"body": big[:limit]})
        _http_check_table(self, [
            _http_case("until close", b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + big, eof=True, **cut),
            _http_case("until close, held open", b"HTTP/1.0 200 OK\r\n\r\n" + big, eof=False, **cut),
            _http_case("chunked", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                       + chunked_body(big, 10000), eof=False, **cut),
        ])

    def test_bodies_at_the_limit_are_complete(self):
        limit = 100000
        body = b"x" * limit
        whole = dict(max_body_size=limit, body=body)
        _http_check_table(self, [
            _http_case("Content-Length", http_response(body), eof=False, **whole),
            _http_case("until close", b"HTTP/1.0 200 OK\r\n\r\n" + body, eof=True, **whole),
            _http_case("chunked", http_response(b"", headers=[("Transfer-Encoding", "chunked")], length=False)
                       + chunked_body(body, 30000), eof=False, **whole),
            _http_case("gzip", http_response(gzip.compress(body), headers=[("Content-Encoding", "gzip")]),
                       eof=False, **whole),
        ])

    def test_a_large_compressed_page_is_not_a_bomb(self):
        # Text compresses 3 to 15 times; a body past the limit at such a
        # ratio is a large page (BodyTooLarge), at over 100:1 a bomb.
        rng = random.Random(7)
        page = " ".join(rng.choice(("link", "page", "<a href=x>", "text", "1", "2"))
                        for _ in range(60000)).encode()
        packed = gzip.compress(page)
        self.assertLess(len(page) / len(packed), 10)
        large = _http_feed([[http_response(packed, headers=[("Content-Encoding", "gzip")])]],
                           max_body_size=100000)[0]
        self.assertIs(type(large), crawl.BodyTooLarge)
        self.assertEqual(large.response.body, page[:100000])
        self.assertIn("body exceeds the limit of 100000 bytes", str(large))
        bomb = _http_feed([[http_response(compression_bomb("gzip"), headers=[("Content-Encoding", "gzip")])]],
                          max_body_size=100000)[0]
        self.assertIs(type(bomb), crawl.DecompressionBomb)
        self.assertEqual(bomb.kind, "too_large")
        self.assertRegex(str(bomb), r"decoded body exceeds the limit of 100000 bytes from \d+ compressed")


# Bodies not read -----------------------------------------------------------------
class HTTPBodyNotReadTest(HTTPLayerTestCase):
    # read_body says no: the head is read, the body is drained when short
    # (the connection carries the next response) or left (it is closed).

    def test_bodies_not_wanted(self):
        def never(response):
            return False

        nxt = (http_response("next"), b"next")
        skip = dict(read_body=never, status=200, body=b"", body_read=False)
        big = 30 * 1000 * 1000
        _http_check_table(self, [
            _http_case("short: drained", http_response(b"x" * 1000), eof=False, then=[nxt],
                       content_length=1000, reusable=True, wire_bytes="all", **skip),
            _http_case("just short enough", http_response(bytes(crawl.DRAIN_LIMIT)), eof=False,
                       then=[nxt], reusable=True, wire_bytes="all", **skip),
            _http_case("chunked, short: drained", http_response(
                b"", headers=[("Transfer-Encoding", "chunked")], length=False) + chunked_body(b"y" * 3000, 1000),
                eof=False, then=[nxt], content_length=None, reusable=True, wire_bytes="all", **skip),
            # 30 MB declared, 100 kB sent, the connection held open: nothing
            # past the head is waited for.
            _http_case("long: left", http_response(b"", headers=[("Content-Length", str(big))], length=False)
                       + bytes(100000), eof=False, content_length=big, reusable=False, **skip),
            _http_case("one byte too long", http_response(bytes(crawl.DRAIN_LIMIT + 1)), eof=False,
                       reusable=False, **skip),
            _http_case("until close: left", b"HTTP/1.0 200 OK\r\n\r\n" + bytes(5000), eof=False,
                       reusable=False, **skip),
            _http_case("gzip, short: drained, not decoded", http_response(
                b"not gzip at all", headers=[("Content-Encoding", "gzip")]), eof=False, then=[nxt],
                reusable=True, **skip),
        ])
        # A long chunked body is read up to DRAIN_LIMIT, then left: how far
        # past it the reading went depends on how the bytes arrived.
        chunked = http_response(b"", headers=[("Transfer-Encoding", "chunked")], length=False)
        data = chunked + chunked_body(bytes(100000), 10000)
        for name, pieces in (("whole", [data]), ("byte by byte", _http_byte_pieces(data))):
            response, reusable = _http_feed([pieces], eof=False, read_body=never)[0]
            self.assertEqual((response.status, response.body, response.body_read, reusable),
                             (200, b"", False, False), name)
            self.assertGreater(response.wire_bytes, len(chunked) + crawl.DRAIN_LIMIT, name)

    def test_read_body_decides_on_the_head(self):
        html = html_bytes("/a")
        heads = []

        def html_only(response):
            heads.append((response.status, response.content_type, response.content_length, response.body))
            return response.content_type == "text/html"

        _http_check_table(self, [
            _http_case("wanted", http_response(html, headers=[("Content-Type", "text/html")]),
                       read_body=html_only, body=html, body_read=True, content_length=len(html)),
            _http_case("not wanted", http_response(b"%PDF-1.7", headers=[("Content-Type", "application/pdf")]),
                       read_body=html_only, body=b"", body_read=False, content_length=8),
            # No body to decide on: read_body is not asked.
            _http_case("HEAD", http_response(b"", headers=[("Content-Length", "30000000")], length=False),
                       method="HEAD", read_body=html_only, body=b"", body_read=True, content_length=30000000),
            _http_case("204", b"HTTP/1.1 204 No Content\r\n\r\n", read_body=html_only, body_read=True),
        ])
        self.assertEqual(heads[0], (200, "text/html", len(html), b""))
        self.assertEqual({head[1] for head in heads}, {"text/html", "application/pdf"})


# Byte-at-a-time ------------------------------------------------------------------
class HTTPSlowWriterTest(HTTPLayerTestCase):
    # Every table above is also fed one byte at a time; these combine the
    # features whose state crosses reads.

    def test_one_byte_at_a_time_parses_the_same(self):
        html = html_bytes("/slow")
        gz = gzip.compress(html)
        responses = {
            "plain": b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nSet-Cookie: a=1\r\n"
                     b"X-Folded: one\r\n two\r\nset-cookie: b=2\r\nContent-Length: %d\r\n\r\n" % len(html) + html,
            "chunked-gzip": b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip\r\n"
                            b"Transfer-Encoding: chunked\r\n\r\n" + chunked_body(gz, 13, b"X-T: 1\r\n"),
            "raw-deflate": http_response(deflate_raw(html), headers=[("Content-Encoding", "deflate")]),
            "zlib": http_response(zlib.compress(html), headers=[("Content-Encoding", "deflate")]),
            "bare-lf": b"HTTP/1.1 200 OK\nContent-Type: text/html\nContent-Length: %d\n\n" % len(html) + html,
            "interim": b"HTTP/1.1 100 Continue\r\n\r\n" + http_response(html),
            "chunk-ext": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                         b"5;ext=1\r\nhello\r\n6 \r\n world\r\nA\r\n0123456789\r\n0\r\n\r\n",
        }
        _http_check_table(self, [
            _http_case(name, data, eof=False, status=200, wire_bytes="all", reusable=True,
                       body=b"hello world0123456789" if name == "chunk-ext" else html)
            for name, data in responses.items()])


# Persistent connections ------------------------------------------------------------
class HTTPPersistentConnectionTest(HTTPLayerTestCase):

    def test_100_fetches_one_connection(self):
        page = html_page("/a")
        site = self.site({"/": page})
        client = self.client()
        responses = self.get_many(client, [site.url("/")] * 100)
        self.assertEqual(len(responses), 100)
        for response in responses:
            self.assertEqual((response.status, response.body), (200, page.body))
        self.assertEqual(site.connections, 1)
        self.assertEqual(client.connections_opened, 1)
        self.assertEqual(len(site.requests), 100)
        self.assertEqual({r["connection"] for r in site.requests}, {1})

    def test_connection_close_and_http10_are_not_reused(self):
        server = self.raw({
            "/close": http_response("closing", headers=[("Connection", "close")]),
            "/close-upper": http_response("closing", headers=[("connection", "Keep-Alive, CLOSE")]),
            "/old": http_response("old", version="HTTP/1.0"),
            "/old-ka": http_response("old but alive", version="HTTP/1.0", headers=[("Connection", "keep-alive")]),
            "/next": http_response("next"),
        })
        client = self.client()
        for target, reused in (("/close", False), ("/close-upper", False), ("/old", False),
                               ("/old-ka", True)):
            with self.subTest(target=target):
                before = server.connections
                self.get(client, server.url(target))
                self.assertEqual(len(client.pool), 1 if reused else 0)
                self.assertEqual(self.get(client, server.url("/next")).body, b"next")
                self.assertEqual(server.connections, before + 1 if reused else before + 2)
                client.close()

    def test_http10_server(self):
        site = self.site({"/": html_page("/a")}, protocol="HTTP/1.0")
        client = self.client()
        responses = self.get_many(client, [site.url("/")] * 3)
        self.assertEqual([r.status for r in responses], [200, 200, 200])
        self.assertEqual(site.connections, 3)

    def test_pool_cap_zero_opens_a_connection_per_fetch(self):
        site = self.site({"/": html_page("/a")})
        client = self.client(max_idle_per_origin=0)
        self.get_many(client, [site.url("/")] * 3)
        self.assertEqual(site.connections, 3)
        self.assertEqual(len(client.pool), 0)

    def test_pool_caps_with_concurrent_fetches(self):
        def slow(handler):
            time.sleep(0.1)
            return html_page("/a")

        site = self.site({"/": slow})
        other = self.site({"/": slow})
        client = self.client(max_idle_per_origin=2, max_idle=3)

        def go():
            return (yield from crawl.gather(*[client.fetch(site.url("/")) for _ in range(4)],
                                            *[client.fetch(other.url("/")) for _ in range(2)]))

        responses = self.run_co(go())
        self.assertEqual([r.status for r in responses], [200] * 6)
        self.assertEqual(site.connections, 4)
        self.assertEqual(client.connections_opened, 6)
        self.assertEqual(len(client.pool), 3)

    def test_keep_alive_promised_then_fin(self):
        root = html_bytes("/a").replace(b"</body>", b'<a href="/b">b</a></body>')
        table = {"/": http_response(root, headers=[("Connection", "keep-alive")]),
                 "/a": http_response("page a", headers=[("Connection", "keep-alive")]),
                 "/b": http_response("page b", headers=[("Connection", "keep-alive")])}
        server = self.raw(table, close_after=True)
        client = self.client()
        responses = self.get_many(client, [server.url("/"), server.url("/a"), server.url("/b")])
        self.assertEqual([r.status for r in responses], [200, 200, 200])
        self.assertEqual([r.body for r in responses], [root, b"page a", b"page b"])
        self.assertEqual(server.targets, ["/", "/a", "/b"])
        self.assertEqual(server.connections, 3)

    def test_keep_alive_promised_then_rst(self):
        def reset_after(body):
            def answer(conn, request):
                conn.send(http_response(body, headers=[("Connection", "keep-alive")]))
                time.sleep(0.02)  # let the response leave before the RST
                conn.reset()
                return "closed"
            return answer

        server = self.raw({"/": reset_after("root"), "/a": reset_after("page a"), "/b": reset_after("page b")})
        client = self.client()
        responses = self.get_many(client, [server.url("/"), server.url("/a"), server.url("/b")])
        self.assertEqual([(r.status, r.body) for r in responses],
                         [(200, b"root"), (200, b"page a"), (200, b"page b")])
        self.assertEqual(server.connections, 3)

    def _stale_server(self, first_action, later_action=None):
        """Connection 1 answers its first request, then meets the second with
        first_action ("fin", "rst" or "partial"); later connections answer
        every request, or meet it with later_action. Returns (server, log of
        (connection number, target))."""
        log = []

        def act(conn, action):
            if action == "fin":
                conn.close()
            elif action == "rst":
                conn.reset()
            else:
                conn.send(b"HTTP/1.1 200 OK\r\nContent-Le")
                conn.close()

        def script(conn):
            count = 0
            while True:
                request = conn.read_request()
                if request is None:
                    return
                count += 1
                log.append((conn.number, conn.target(request)))
                if conn.number == 1 and count == 2:
                    return act(conn, first_action)
                if conn.number > 1 and later_action:
                    return act(conn, later_action)
                conn.send(http_response(f"body of {conn.target(request)}"))

        return self.scripted(script), log

    def test_stale_connection_retried_once_fin(self):
        server, log = self._stale_server("fin")
        client = self.client()
        first, second = self.get_many(client, [server.url("/1"), server.url("/2")])
        self.assertEqual((first.body, second.body), (b"body of /1", b"body of /2"))
        self.assertEqual(log, [(1, "/1"), (1, "/2"), (2, "/2")])
        self.assertEqual(server.connections, 2)
        self.assertEqual(client.connections_opened, 2)
        third = self.get(client, server.url("/3"))  # the new connection is pooled
        self.assertEqual(third.body, b"body of /3")
        self.assertEqual(server.connections, 2)

    def test_stale_connection_retried_once_rst(self):
        server, log = self._stale_server("rst")
        client = self.client()
        first, second = self.get_many(client, [server.url("/1"), server.url("/2")])
        self.assertEqual((first.body, second.body), (b"body of /1", b"body of /2"))
        self.assertEqual(log, [(1, "/1"), (1, "/2"), (2, "/2")])
        self.assertEqual(server.connections, 2)

    def test_stale_connection_retried_only_once(self):
        # A close before any byte is reported like a reset (as http.client's
        # RemoteDisconnected), whether the server sent a FIN or an RST.
        for later, error_type in (("fin", ConnectionResetError), ("rst", ConnectionResetError)):
            with self.subTest(later=later):
                server, log = self._stale_server("fin", later_action=later)
                client = self.client()
                self.assertEqual(self.get(client, server.url("/1")).body, b"body of /1")
                self.get_error(error_type, client, server.url("/2"))
                self.assertEqual(log, [(1, "/1"), (1, "/2"), (2, "/2")])
                self.assertEqual(server.connections, 2)
                self.assertEqual(client.connections_opened, 2)

    def test_reused_connection_failing_after_response_bytes_is_not_retried(self):
        server, log = self._stale_server("partial")
        client = self.client()
        self.assertEqual(self.get(client, server.url("/1")).body, b"body of /1")
        self.get_error(crawl.ProtocolError, client, server.url("/2"))
        self.assertEqual(log, [(1, "/1"), (1, "/2")])
        self.assertEqual(server.connections, 1)

    def test_connection_pool_unit(self):
        def stream():
            ours, theirs = socket.socketpair()
            ours.setblocking(False)
            self.addCleanup(theirs.close)
            self.addCleanup(ours.close)
            return crawl.Stream(ours), theirs

        pool = crawl.ConnectionPool(max_per_origin=2, max_total=3)
        a, b = ("http", "a.test", 80), ("http", "b.test", 80)
        a1, a2, a3 = (stream()[0] for _ in range(3))
        pool.put(a, a1)
        pool.put(a, a2)
        pool.put(a, a3)  # per-origin cap: a1, the oldest, is closed
        self.assertEqual(len(pool), 2)
        self.assertTrue(a1.closed)
        b1, b2 = stream()[0], stream()[0]
        pool.put(b, b1)
        pool.put(b, b2)  # total cap: a2, the oldest idle, is closed
        self.assertEqual(len(pool), 3)
        self.assertTrue(a2.closed)
        self.assertIs(pool.get(a), a3)
        self.assertIsNone(pool.get(a))
        self.assertIs(pool.get(b), b2)  # most recently used first
        self.assertEqual(len(pool), 1)
        # A connection the server closed, or with bytes waiting, is not reused.
        dead, dead_peer = stream()
        chatty, chatty_peer = stream()
        pool.put(a, dead)
        pool.put(b, chatty)
        dead_peer.close()
        chatty_peer.sendall(b"HTTP/1.1 200 OK\r\n")
        self.assertIsNone(pool.get(a))
        self.assertTrue(dead.closed)
        self.assertIs(pool.get(b), b1)
        self.assertTrue(chatty.closed)
        pool.put(a, a3)
        pool.put(b, b1)
        pool.close()
        self.assertEqual(len(pool), 0)
        self.assertTrue(a3.closed and b1.closed)


# Deadlines -----------------------------------------------------------------------
class HTTPTimeoutTest(HTTPLayerTestCase):

    def test_total_deadline_against_a_trickling_server(self):
        # The real clock: the server's bytes keep coming in real time.
        def trickle(conn, request):
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
            while True:
                conn.send(b"x")
                time.sleep(0.05)

        server = self.raw({"/": trickle})
        client = self.client(timeout=0.5, read_timeout=30)
        url = server.url("/")
        started = time.monotonic()
        error = self.get_error(TimeoutError, client, url)
        elapsed = time.monotonic() - started
        self.assertIs(type(error), TimeoutError)
        self.assertGreaterEqual(elapsed, 0.45)
        self.assertLess(elapsed, 1.5)
        self.assertIn(url, str(error))
        self.assertEqual(len(client.pool), 0)

    @virtual_clock(io_grace=0.05)  # the server says nothing: no point waiting long
    def test_read_timeout_against_a_silent_server(self):
        server = self.raw({"/": answer_and_hold(b"")})
        client = self.client(read_timeout=30, timeout=None)
        url = server.url("/")
        # run_timeout 50: only the client's own read timeout can end this in
        # time (its message names the URL; run_co's would not).
        started = self.loop.time()
        error = self.get_error(TimeoutError, client, url, run_timeout=50)
        self.assertIn(url, str(error))
        self.assertAlmostEqual(self.loop.time() - started, 30.0, places=9)

    @virtual_clock(io_grace=0.05)  # the server sends its bytes at once, then nothing
    def test_read_timeout_mid_body(self):
        server = self.raw({"/": answer_and_hold(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")})
        client = self.client(read_timeout=30, timeout=None)
        started = self.loop.time()
        error = self.get_error(TimeoutError, client, server.url("/"), run_timeout=50)
        self.assertIn(server.url("/"), str(error))
        self.assertAlmostEqual(self.loop.time() - started, 30.0, places=9)

    def test_connect_timeout(self):
        # A listener whose accept queue is full drops further SYNs, so a
        # connect hangs; skip where that does not happen.
        listener = socket.socket()
        self.addCleanup(listener.close)
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        address = listener.getsockname()
        for _ in range(4):
            filler = socket.socket()
            self.addCleanup(filler.close)
            filler.setblocking(False)
            filler.connect_ex(address)
        probe = socket.socket()
        probe.settimeout(0.2)
        try:
            probe.connect(address)
            self.skipTest("the full accept queue does not hold off connects here")
        except socket.timeout:
            pass
        finally:
            probe.close()
        use_virtual_clock(self, io_grace=0.05)  # the connect never completes: no point waiting long
        client = self.client(connect_timeout=30, timeout=None)
        url = f"http://127.0.0.1:{address[1]}/"
        started = self.loop.time()
        error = self.get_error(TimeoutError, client, url, run_timeout=50)
        self.assertIn(url, str(error))
        self.assertAlmostEqual(self.loop.time() - started, 30.0, places=9)


# TLS -------------------------------------------------------------------------------
class HTTPTLSTest(HTTPLayerTestCase):

    def test_tls_with_the_test_certificate(self):
        page = html_page("/secure")
        site = self.site({"/": page}, tls=True)
        client = self.client(cafile=CERT_FILE)
        responses = self.get_many(client, [site.url("/")] * 3)
        self.assertTrue(site.url("/").startswith("https://"))
        for response in responses:
            self.assertEqual((response.status, response.body), (200, page.body))
        self.assertEqual(site.connections, 1)

    def test_tls_raw_server(self):
        server = self.raw({"/": http_response("over tls", headers=[("Content-Type", "text/plain")]),
                           "/chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                       + chunked_body(b"chunked over tls", 5)}, tls=True)
        client = self.client(cafile=CERT_FILE)
        first, second = self.get_many(client, [server.url("/"), server.url("/chunked")])
        self.assertEqual(first.body, b"over tls")
        self.assertEqual(second.body, b"chunked over tls")
        self.assertEqual(server.connections, 1)

    def test_large_bodies_over_tls(self):
        # 3 MiB bodies: hundreds of TLS records, cut anywhere by the reads.
        body = bytes(random.Random(13).randrange(256) for _ in range(4096)) * 768
        server = self.raw({"/length": http_response(body),
                           "/chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                       + chunked_body(body, (40000, 1, 16384, 70001))}, tls=True)
        client = self.client(cafile=CERT_FILE, max_size=8 << 20)
        responses = self.get_many(client, [server.url("/length"), server.url("/chunked")])
        self.assertEqual([response.body == body for response in responses], [True, True])
        self.assertEqual(server.connections, 1)

    @virtual_clock(io_grace=0.05)  # the server sends its bytes at once, then nothing
    def test_read_timeout_mid_body_over_tls(self):
        server = self.raw({"/": answer_and_hold(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")},
                          tls=True)
        client = self.client(cafile=CERT_FILE, read_timeout=30, timeout=None)
        started = self.loop.time()
        error = self.get_error(TimeoutError, client, server.url("/"), run_timeout=50)
        self.assertIn(server.url("/"), str(error))
        self.assertAlmostEqual(self.loop.time() - started, 30.0, places=9)

    def test_default_client_rejects_the_test_certificate(self):
        site = self.site({"/": html_page()}, tls=True)
        self.get_error(ssl.SSLCertVerificationError, self.client(), site.url("/"))

    # --cafile means "also trust these CAs", but the system's CA store is
    # loaded only when a certificate fails against the cafile alone. These
    # tests stand in for the system store with SSL_CERT_FILE (which OpenSSL
    # reads when the store is loaded) and an SSL_CERT_DIR without certificates.
    def system_store(self, cafile):
        return mock.patch.dict(os.environ, SSL_CERT_FILE=cafile, SSL_CERT_DIR=_CERT_DIR)

    def test_cafile_that_verifies_leaves_the_system_store_unloaded(self):
        server = self.raw({"/": http_response("ok")}, tls=True)
        client = self.client(cafile=CERT_FILE)
        with self.system_store(OTHER_CA_FILE):
            responses = self.get_many(client, [server.url("/")] * 2)
        self.assertEqual([response.body for response in responses], [b"ok", b"ok"])
        self.assertEqual(server.connections, 1)
        self.assertEqual(client.ssl_context().cert_store_stats()["x509_ca"], 1)  # the cafile's

    def test_cafile_also_trusts_the_system_store(self):
        server = self.raw({"/": http_response("ok")}, tls=True)
        client = self.client(cafile=OTHER_CA_FILE)
        with self.system_store(CERT_FILE):
            responses = self.get_many(client, [server.url("/")] * 2)
        self.assertEqual([response.body for response in responses], [b"ok", b"ok"])
        # Refused against the cafile alone, then verified with the system
        # store added, and that connection reused.
        self.assertEqual(server.connections, 2)
        self.assertEqual(client.connections_opened, 1)
        self.assertEqual(client.ssl_context().cert_store_stats()["x509_ca"], 2)

    def test_certificate_trusted_by_neither_fails_after_one_more_try(self):
        server = self.raw({"/": http_response("ok")}, tls=True)
        client = self.client(cafile=OTHER_CA_FILE)
        with self.system_store(OTHER_CA_FILE):
            self.get_error(ssl.SSLCertVerificationError, client, server.url("/"))
            self.assertEqual(server.connections, 2)  # the cafile alone, then the system's too
            self.get_error(ssl.SSLCertVerificationError, client, server.url("/"))
            self.assertEqual(server.connections, 3)  # the store is complete now: one try
        self.assertEqual(client.connections_opened, 0)

    def test_verify_false_works_and_warns(self):
        site = self.site({"/": html_page("/x")}, tls=True)
        with self.assertLogs("crawl", "WARNING") as logs:
            client = self.client(verify=False)
        self.assertTrue(any("verif" in message.lower() for message in logs.output), logs.output)
        response = self.get(client, site.url("/"))
        self.assertEqual((response.status, response.body), (200, html_page("/x").body))


# Network errors ----------------------------------------------------------------------
class HTTPNetworkErrorTest(HTTPLayerTestCase):

    def test_refused_port(self):
        port = refused_port(self)
        error = self.get_error(ConnectionRefusedError, self.client(), f"http://127.0.0.1:{port}/")
        self.assertIn(str(port), str(error))

    def test_unresolvable_host(self):
        error = self.get_error(socket.gaierror, self.client(), "http://nonexistent.invalid/")
        self.assertIn("nonexistent.invalid", str(error))


# Requests as the server sees them ------------------------------------------------------
class HTTPRequestTest(HTTPLayerTestCase):

    def recorder(self):
        """A RawServer answering 200 to everything; returns (server, list of
        raw request heads)."""
        requests = []

        def script(conn):
            while True:
                request = conn.read_request()
                if request is None:
                    return
                requests.append(request)
                conn.send(http_response("ok"))

        return self.scripted(script), requests

    def test_request_fields(self):
        server, requests = self.recorder()
        client = self.client()
        self.get(client, server.url("/path?q=1"))
        self.get(client, server.url("/"), "HEAD")
        self.get(client, server.url("/x"), headers={"X-Test": "yes"})
        self.assertEqual(len(requests), 3)
        for raw in requests:
            self.assertTrue(raw.endswith(b"\r\n\r\n"))
            self.assertEqual(raw.count(b"\r\n\r\n"), 1)
        line, fields = parse_request_head(requests[0])
        self.assertEqual(line, "GET /path?q=1 HTTP/1.1")
        names = [name.lower() for name, _ in fields]
        self.assertEqual(names.count("host"), 1)
        self.assertEqual(names[0], "host")
        values = {name.lower(): value for name, value in fields}
        self.assertEqual(values["host"], f"127.0.0.1:{server.port}")
        self.assertTrue(values["user-agent"].startswith("crawl.py/"), values["user-agent"])
        self.assertEqual(values["user-agent"], crawl.DEFAULT_USER_AGENT)
        self.assertEqual(values["accept-encoding"], "gzip, deflate")
        self.assertIn("accept", values)
        self.assertEqual(parse_request_head(requests[1])[0], "HEAD / HTTP/1.1")
        line, fields = parse_request_head(requests[2])
        self.assertEqual(line, "GET /x HTTP/1.1")
        self.assertIn(("X-Test", "yes"), fields)

    def test_no_compression_asks_for_the_body_as_it_is(self):
        server, requests = self.recorder()
        self.get(self.client(compression=False), server.url("/"))
        self.assertEqual(dict(parse_request_head(requests[0])[1])["Accept-Encoding"], "identity")

    def test_custom_user_agent(self):
        server, requests = self.recorder()
        client = self.client(user_agent="TestBot/2.0 (+http://example.test/bot)")
        self.get(client, server.url("/"))
        values = dict(parse_request_head(requests[0])[1])
        self.assertEqual(values["User-Agent"], "TestBot/2.0 (+http://example.test/bot)")

    def test_request_targets_percent_encoded(self):
        site = self.site({})
        client = self.client()
        urls = ["/café/ü?q=ä", "/a%20b", "/100%", "/50%zz", "/a b?c d", "/page#frag", "",
                "/%7euser", "/ü%C3%BC", "/x?a=1&b=/y?z"]
        expected = ["/caf%C3%A9/%C3%BC?q=%C3%A4", "/a%20b", "/100%25", "/50%25zz", "/a%20b?c%20d", "/page", "/",
                    "/%7euser", "/%C3%BC%C3%BC", "/x?a=1&b=/y?z"]
        responses = self.get_many(client, [site.url(u) for u in urls])
        self.assertEqual([r.status for r in responses], [404] * len(urls))
        self.assertEqual(site.targets(), expected)
        self.assertEqual(site.connections, 1)

    def test_request_target_unit(self):
        cases = [
            (("/café/ü", "q=ä"), "/caf%C3%A9/%C3%BC?q=%C3%A4"),
            (("/a%20b", ""), "/a%20b"),
            (("/100%", ""), "/100%25"),
            (("/50%zz", "x=%"), "/50%25zz?x=%25"),
            (("/a b", "c d"), "/a%20b?c%20d"),
            (("", ""), "/"),
            (("", "q=1"), "/?q=1"),
            (('/a"b<c>', ""), "/a%22b%3Cc%3E"),
            (("/a:b@c!$&'()*+,;=-._~", ""), "/a:b@c!$&'()*+,;=-._~"),
            (("/%e2%82%ac", ""), "/%e2%82%ac"),
            (("/€", ""), "/%E2%82%AC"),
        ]
        for args, expected in cases:
            with self.subTest(args=args):
                self.assertEqual(crawl.request_target(*args), expected)

    def test_split_url_and_host_field(self):
        self.assertEqual(crawl.split_url("http://Example.TEST/a b?x=ü#frag"),
                         ("http", "example.test", 80, "/a%20b?x=%C3%BC"))
        self.assertEqual(crawl.split_url("https://example.test"), ("https", "example.test", 443, "/"))
        self.assertEqual(crawl.split_url("HTTP://example.test:8080"), ("http", "example.test", 8080, "/"))
        self.assertEqual(crawl.split_url("http://[::1]:8080/p"), ("http", "::1", 8080, "/p"))
        self.assertEqual(crawl.split_url("http://alice:s3cr3t@example.test:81/p"), ("http", "example.test", 81, "/p"))
        self.assertEqual(crawl.split_url("http://bücher.example/"), ("http", "xn--bcher-kva.example", 80, "/"))
        for url in ("ftp://example.test/f", "http:///path", "http://", "mailto:a@example.test",
                    "http://example.test:99999/", "http://example.test:abc/", "//example.test/",
                    "example.test/path", "file:///etc/passwd", "javascript:alert(1)"):
            with self.subTest(url=url):
                with self.assertRaises(ValueError):
                    crawl.split_url(url)
        # The authorities parsed are kept (_AUTHORITIES): the same answers
        # the second time, for either scheme; an invalid one is never kept.
        for _ in range(2):
            self.assertEqual(crawl.split_url("http://Cached.TEST/a"), ("http", "cached.test", 80, "/a"))
            self.assertEqual(crawl.split_url("https://Cached.TEST/b"), ("https", "cached.test", 443, "/b"))
            with self.assertRaisesRegex(ValueError, "http://cached.test:99999/c"):
                crawl.split_url("http://cached.test:99999/c")
        self.assertNotIn("cached.test:99999", crawl._AUTHORITIES)
        self.assertEqual(crawl.host_field("http", "example.test", 80), "example.test")
        self.assertEqual(crawl.host_field("https", "example.test", 443), "example.test")
        self.assertEqual(crawl.host_field("http", "example.test", 443), "example.test:443")
        self.assertEqual(crawl.host_field("https", "example.test", 80), "example.test:80")
        self.assertEqual(crawl.host_field("http", "::1", 8080), "[::1]:8080")
        self.assertEqual(crawl.host_field("https", "::1", 443), "[::1]")

    def test_fetch_rejects_bad_urls(self):
        client = self.client()
        for url in ("ftp://example.test/f", "http:///nohost"):
            with self.subTest(url=url):
                self.get_error(ValueError, client, url)

    def test_ipv6_host_field(self):
        if not has_ipv6_loopback():
            self.skipTest("no IPv6 loopback")
        site = self.site({"/": html_page("/next")}, host="::1")
        response = self.get(self.client(), f"http://[::1]:{site.port}/")
        self.assertEqual(response.status, 200)
        self.assertEqual(site.requests[0]["headers"]["Host"], f"[::1]:{site.port}")

    def test_userinfo_never_sent(self):
        server, requests = self.recorder()
        response = self.get(self.client(), f"http://alice:s3cr3t@127.0.0.1:{server.port}/secret")
        self.assertEqual(response.body, b"ok")
        raw = requests[0]
        self.assertNotIn(b"alice", raw)
        self.assertNotIn(b"s3cr3t", raw)
        self.assertNotIn(b"authorization", raw.lower())
        self.assertEqual(dict(parse_request_head(raw)[1])["Host"], f"127.0.0.1:{server.port}")
        self.assertEqual(parse_request_head(raw)[0], "GET /secret HTTP/1.1")

    def test_no_request_splitting(self):
        for agent in ("bot\r\nEvil: 1", "bot\nEvil: 1", "bot\rEvil: 1"):
            with self.subTest(agent=agent):
                with self.assertRaises(ValueError):
                    crawl.Client(user_agent=agent)
        server, requests = self.recorder()
        client = self.client()
        for headers in ({"X-A": "a\r\nEvil: 1"}, [("X-A", "a\nEvil: 1")], [("X-A", "a\rEvil: 1")]):
            with self.subTest(headers=headers):
                with self.assertRaises(ValueError):
                    self.run_co(client.fetch(server.url("/"), "GET", headers))
        # CR/LF in the URL never reach the request head.
        self.get(client, server.url("/a\r\nEvil: 1"))
        self.assertEqual(len(requests), 1)
        self.assertNotIn(b"\r\nEvil", requests[0])

    def test_no_request_splitting_in_field_names(self):
        server, requests = self.recorder()
        client = self.client()
        for headers in ({"X-A\r\nEvil": "1"}, [("X-A\nEvil", "1")], [("Bad Name", "1")], [("", "1")]):
            with self.subTest(headers=headers):
                with self.assertRaises(ValueError):
                    self.run_co(client.fetch(server.url("/"), "GET", headers))
        for raw in requests:
            self.assertNotIn(b"Evil", raw)


# Response facts ---------------------------------------------------------------------
class HTTPResponseFactsTest(HTTPLayerTestCase):

    def test_content_type_and_charset(self):
        cases = {
            "quoted, upper case": ('Text/HTML; Charset="UTF-8"', "text/html", "utf-8"),
            "no space": ("application/json;charset=iso-8859-1", "application/json", "iso-8859-1"),
            "no charset": ("text/plain", "text/plain", None),
            "no Content-Type": (None, "", None),
            "single quotes, another parameter first": ("text/html; boundary=x; charset='Shift_JIS'", "text/html",
                                                       "shift_jis"),
        }
        _http_check_table(self, [
            _http_case(name, http_response("x", headers=[("Content-Type", ct)] if ct else []), eof=False,
                       content_type=content_type, charset=charset)
            for name, (ct, content_type, charset) in cases.items()])

    def test_wire_bytes_and_response_fields(self):
        # (url and truncated are checked for every response by the table;
        # all but the last could share one connection.)
        _http_check_table(self, [
            _http_case("Content-Length", http_response("exact", headers=[("X-A", "1")]), eof=False,
                       wire_bytes="all", reusable=True),
            _http_case("chunked", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                       + chunked_body(b"abcdefghij" * 10, 9, b"X-T: 1\r\n"), eof=False, wire_bytes="all",
                       reusable=True),
            _http_case("gzip", http_response(gzip.compress(b"z" * 5000), headers=[("Content-Encoding", "gzip")]),
                       eof=False, wire_bytes="all", reusable=True),
            _http_case("204", b"HTTP/1.1 204 No Content\r\n\r\n", eof=False, wire_bytes="all", reusable=True),
            _http_case("until close", b"HTTP/1.0 200 OK\r\n\r\nuntil close", eof=True, wire_bytes="all",
                       reusable=False),
        ])

    def test_elapsed(self):
        server = self.raw({"/": http_response("x")})
        self.assertGreaterEqual(self.get(self.client(), server.url("/")).elapsed, 0.0)


# Sockets closed -----------------------------------------------------------------------
class HTTPSocketsClosedTest(HTTPLayerTestCase):

    def test_no_fd_left_after_fetches_and_errors(self):
        before = open_fds()
        site = SiteServer({"/": html_page("/a")})
        tls_site = SiteServer({"/": html_page("/b")}, tls=True)
        server = RawServer.responses({
            "/ok": http_response("ok"),
            "/truncated": answer_and_close(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc"),
            "/protocol": answer_and_hold(b"ICY 200 OK\r\n\r\n"),
            "/silent": answer_and_hold(b""),
            "/too-large": answer_and_hold(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999\r\n\r\n"
                                          + bytes((1 << 20) + 1)),
            "/gzip-bad": answer_and_hold(http_response(b"nope", headers=[("Content-Encoding", "gzip")])),
        })
        try:
            client = crawl.Client(read_timeout=0.3, max_size=1 << 20, cafile=CERT_FILE)
            try:
                for _ in range(3):
                    self.run_co(client.fetch(site.url("/")))
                    self.run_co(client.fetch(server.url("/ok")))
                    self.run_co(client.fetch(tls_site.url("/")))
                for target, error_type in (("/truncated", crawl.TruncatedBody),
                                           ("/protocol", crawl.ProtocolError),
                                           ("/silent", TimeoutError),
                                           ("/too-large", crawl.BodyTooLarge),
                                           ("/gzip-bad", crawl.ContentDecodingError)):
                    with self.assertRaises(error_type):
                        self.run_co(client.fetch(server.url(target)))
                    self.run_co(crawl.sleep(0))
                with self.assertRaises(ConnectionRefusedError):
                    self.run_co(client.fetch(f"http://127.0.0.1:{refused_port(self)}/"))
                with self.assertRaises(ssl.SSLCertVerificationError):
                    self.run_co(crawl.Client().fetch(tls_site.url("/")))
                self.run_co(crawl.sleep(0))
            finally:
                client.close()
            with self.assertRaises(TimeoutError):  # total deadline, pooled connection in use
                self.run_co(crawl.fetch(server.url("/silent"), timeout=0.3))
            self.assertEqual(self.run_co(crawl.fetch(site.url("/"))).status, 200)
        finally:
            site.close()
            tls_site.close()
            server.close()
        self.assertEqual(wait_for_fds(before), before)

    def test_close_closes_idle_connections(self):
        site = self.site({"/": html_page("/a")})
        other = self.site({"/": html_page("/b")})
        before = open_fds()
        client = crawl.Client()
        self.run_co(client.fetch(site.url("/")))
        self.run_co(client.fetch(other.url("/")))
        self.assertEqual(len(client.pool), 2)
        client.close()
        self.assertEqual(len(client.pool), 0)
        self.assertEqual(wait_for_fds(before), before)


class HTTPRegressionTest(LoopTestCase):

    def test_parsing_regressions(self):
        _http_check_table(self, [
            # An encoding, even an unsupported one, does not matter without a body.
            _http_case("redirect with Content-Encoding br",
                       b"HTTP/1.1 301 Moved\r\nLocation: /b\r\nContent-Encoding: br\r\nContent-Length: 0\r\n\r\n",
                       status=301, body=b""),
            _http_case("HEAD with Content-Encoding br",
                       b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 5\r\n\r\n", method="HEAD",
                       status=200, body=b""),
            _http_case("gzip with several members (RFC 1952 §2.2)",
                       http_response(gzip_member(b"first ") + gzip_member(b"second"),
                                     headers=[("Content-Encoding", "gzip")]), body=b"first second"),
            _http_case("huge Content-Length", b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\nx",
                       error=crawl.ProtocolError),
            _http_case("field name that is not a token", b"HTTP/1.1 200 OK\r\nContent\tLength: 1\r\n\r\nx",
                       error=crawl.ProtocolError),
            _http_case("chunk data cut before its CRLF",
                       b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello",
                       error=crawl.TruncatedBody, partial={"body": b"hello"}),
        ])

    def test_field_values_must_be_latin_1(self):
        with self.assertRaises(ValueError):
            crawl.Client(user_agent="bot\u2713/1.0")
        status, _, stderr = run_main(["--user-agent", "bot\u2713/1.0", "localhost:9"])
        self.assertEqual(status, 2)
        self.assertIn("must be ASCII", stderr)

    def test_retry_after_digits_are_ascii(self):
        self.assertIsNone(crawl.parse_retry_after("\u00b2"))
        self.assertEqual(crawl.parse_retry_after("7"), 7.0)


class FuzzResponseParserTest(LoopTestCase):
    """Mutated responses, fed to crawl.read_response: each ends within its
    deadline in a parsed response or a documented error (HTTPError
    subclasses; IncompleteReadError when the head is cut short). The seed
    is in every failure message: FUZZ_SEED=N replays it."""

    CASES = 4000
    SOCKET_CASES = 300
    # Messages over LARGE bytes (a 70 KB field, 201 fields) cost crawl.py's
    # head reader milliseconds per parse: they are drawn one time in ten
    # they come up, and cut at a few points only, never at every byte.
    LARGE = 2000
    DOCUMENTED = (crawl.HTTPError, crawl.IncompleteReadError)

    def setUp(self):
        super().setUp()
        previous = signal.signal(signal.SIGALRM, parser_alarm)
        self.addCleanup(signal.signal, signal.SIGALRM, previous)
        self.addCleanup(signal.setitimer, signal.ITIMER_REAL, 0)

    def seed(self):
        """The seed: 6006 (a fixed default keeps the suite deterministic),
        FUZZ_SEED=N to replay a failure, FUZZ_SEED=random to explore."""
        value = os.environ.get("FUZZ_SEED", "6006")
        return random.randrange(2 ** 32) if value == "random" else int(value)

    def draw(self, rng, corpus):
        """A corpus entry, the large ones drawn one time in ten."""
        while True:
            original, method = rng.choice(corpus)
            if len(original) <= self.LARGE or rng.random() < 0.1:
                return original, method

    def cuts(self, rng, data):
        """Split points: none, a few, or (a small message, one time in 20)
        every byte."""
        if len(data) > self.LARGE:
            return sorted(rng.sample(range(len(data) + 1), rng.randint(0, 4)))
        return split_points(rng, len(data))

    def parse_in_memory(self, data, cuts, method, max_body_size, context, deadline=2.0):
        """read_response over an in-memory stream (_HTTPPieceSocket) cut at
        cuts, then EOF: the (response, reusable) tuple or the exception
        raised. context() names the case in a failure. A parse that does
        not end within deadline seconds, or that waits for I/O, fails the
        test."""
        bounds = [0] + [c for c in cuts if 0 < c < len(data)] + [len(data)]
        stream = crawl.Stream(_HTTPPieceSocket([data[a:b] for a, b in zip(bounds, bounds[1:])], eof=True))
        signal.setitimer(signal.ITIMER_REAL, deadline)
        try:
            return _http_read(stream, method, max_body_size, "http://fuzz.test/")
        except ParserDeadline as error:
            self.fail(f"{context()}: {error}")
        except AssertionError as error:
            self.fail(f"{context()}: {error}")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def check_outcome(self, outcome, max_body_size, context):
        """context: the case's description, or a function that makes it
        (called only when the check fails)."""
        def where():
            return context() if callable(context) else context
        if isinstance(outcome, BaseException):
            if not isinstance(outcome, self.DOCUMENTED):
                self.fail(f"{where()}: undocumented {type(outcome).__name__}: {outcome}\n"
                          + "".join(traceback.format_exception(type(outcome), outcome,
                                                               outcome.__traceback__)))
            response = getattr(outcome, "response", None)
            if response is not None and not (isinstance(response, crawl.Response) and response.truncated):
                self.fail(f"{where()}: the partial response {response!r} is not a truncated Response")
            return
        if not isinstance(outcome, tuple):
            self.fail(f"{where()}: {outcome!r}")
        response, reusable = outcome
        if not (isinstance(response, crawl.Response) and reusable in (True, False)
                and isinstance(response.status, int) and isinstance(response.body, bytes)
                and len(response.body) <= max_body_size and not response.truncated):
            self.fail(f"{where()}: {response!r} (status {response.status!r}, reusable {reusable!r}, "
                      f"truncated {response.truncated!r}, {len(response.body)} bytes of body, "
                      f"max_body_size {max_body_size})")

    def test_mutated_responses_through_an_in_memory_stream(self):
        seed = self.seed()
        rng = random.Random(seed)
        corpus = parser_corpus()
        started = time.monotonic()
        for case in range(self.CASES):
            original, method = self.draw(rng, corpus)
            data = original if rng.random() < 0.03 else mutate(rng, original)
            cuts = self.cuts(rng, data)
            max_body_size = rng.choice((crawl.DEFAULT_MAX_BODY_SIZE, 1000, 64, 1))

            def context():
                return (f"FUZZ_SEED={seed} case {case}: {method} {data[:300]!r}"
                        f"{'...' if len(data) > 300 else ''} cut at {cuts[:20]}, "
                        f"max_body_size {max_body_size}")

            outcome = self.parse_in_memory(data, cuts, method, max_body_size, context)
            self.check_outcome(outcome, max_body_size, context)
        self.assertLess(time.monotonic() - started, 15, f"FUZZ_SEED={seed}: too slow")

    def _read_one(self, stream, method, max_body_size):
        try:
            return (yield from crawl.read_response(stream, method, "http://fuzz.test/",
                                                   max_body_size))
        except Exception as error:  # judged by check_outcome
            return error

    def _write_pieces(self, sock, data, cuts):
        bounds = [0] + [c for c in cuts if 0 < c < len(data)] + [len(data)]
        try:
            for a, b in zip(bounds, bounds[1:]):
                if b > a:
                    yield from crawl.sendall(sock, data[a:b], 2.0)
                yield from crawl.sleep(0)
        finally:
            sock.close()

    def test_mutated_responses_through_a_socket_pair(self):
        seed = self.seed()
        rng = random.Random(seed)
        corpus = [(data, method) for data, method in parser_corpus() if len(data) < 60000]
        for case in range(self.SOCKET_CASES):
            original, method = self.draw(rng, corpus)
            data = mutate(rng, original)
            cuts = sorted(rng.sample(range(len(data) + 1), min(len(data) + 1, rng.randint(0, 4))))
            max_body_size = rng.choice((crawl.DEFAULT_MAX_BODY_SIZE, 1000, 64))
            context = f"FUZZ_SEED={seed} socket case {case}: {method} {data[:300]!r} cut at {cuts}"
            reader, writer = socket.socketpair()
            reader.setblocking(False)
            writer.setblocking(False)
            stream = crawl.Stream(reader, read_timeout=2.0)
            signal.setitimer(signal.ITIMER_REAL, 5.0)  # a parse that never yields
            try:
                outcome, _ = self.loop.run_until_complete(crawl.wait_for(crawl.gather(
                    self._read_one(stream, method, max_body_size),
                    self._write_pieces(writer, data, cuts)), 3.0))
            except (TimeoutError, ParserDeadline):
                self.fail(f"{context}: no outcome within the deadline (a hang)")
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                reader.close()
                writer.close()
            self.check_outcome(outcome, max_body_size, context)
        self.loop.run_until_complete(crawl.sleep(0))
        self.assertEqual(self.loop.pending_work(), (0, 0, 0), f"FUZZ_SEED={seed}")

    def test_unmutated_responses_parse_whatever_the_cuts(self):
        # The first 20 of the corpus are valid: whole, or cut anywhere
        # across reads, each parses to the same response.
        rng = random.Random(20)
        for data, method in parser_corpus()[:20]:
            whole = self.parse_in_memory(data, [], method, crawl.DEFAULT_MAX_BODY_SIZE, lambda: data[:80])
            self.assertIsInstance(whole, tuple, f"{data[:80]!r}: {whole!r}")
            self.assertIn(whole[0].status, (200, 204, 302, 304), data[:80])
            for _ in range(20):
                cuts = split_points(rng, len(data))
                cut = self.parse_in_memory(data, cuts, method, crawl.DEFAULT_MAX_BODY_SIZE,
                                           lambda: f"{data[:80]!r} cut at {cuts}")
                self.assertIsInstance(cut, tuple, f"{data[:80]!r} cut at {cuts}: {cut!r}")
                # (reusable may differ: stray bytes after a 304 or 204 that
                # have not arrived yet cannot be seen; the pool checks later)
                self.assertEqual((cut[0].status, cut[0].headers.items(), cut[0].body),
                                 (whole[0].status, whole[0].headers.items(), whole[0].body),
                                 f"{data[:80]!r} cut at {cuts}")


class HTTPLimitMessageTest(unittest.TestCase):
    """The limit an error names is the limit that was exceeded."""

    def test_heads_and_trailers_too_large_name_their_limit(self):
        fields = b"".join(b"X-%d: %s\r\n" % (n, b"v" * 100) for n in range(700))
        head = dict(error=crawl.ProtocolError, message="response head larger than 65536 bytes")
        _http_check_table(self, [
            _http_case("fields", b"HTTP/1.1 200 OK\r\n" + fields + b"\r\n", **head),
            _http_case("an interim response and the final one together",
                       b"HTTP/1.1 100 Continue\r\n" + fields[:40000] + b"\r\n"
                       b"HTTP/1.1 200 OK\r\n" + fields[:40000] + b"\r\n", **head),
            _http_case("status line", b"HTTP/1.1 200 " + b"x" * 70000 + b"\r\n\r\n", **head),
            _http_case("trailers", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                       b"3\r\nabc\r\n0\r\n" + fields + b"\r\n", error=crawl.ProtocolError,
                       message="trailer section larger than 65536 bytes"),
        ])


class ContentTypeCharsetTest(unittest.TestCase):
    """parse_charset() reads Content-Type parameters by RFC 9110 §5.6.6,
    as email.message does (the reference here), quoted strings included."""

    CASES = [
        ("text/html", None),
        ("text/html; charset=UTF-8", "utf-8"),
        ("text/html;charset=utf-8", "utf-8"),
        ('text/html; charset="ISO-8859-1"', "iso-8859-1"),
        ('text/html; foo="a;charset=latin1"; charset=utf-8', "utf-8"),
        ('text/html; foo="x=1;y"; charset=koi8-r', "koi8-r"),
        ("text/html; charset=", None),
        ("text/html; CHARSET=Shift_JIS", "shift_jis"),
        ("text/html;;charset=utf-8", "utf-8"),
        ("text/html; x=1; charset=windows-1252 ; y=2", "windows-1252"),
        ("text/html; flag; charset=utf-8", "utf-8"),
        ('text/html; charset = "utf-8"', "utf-8"),
    ]

    def test_parameters_as_rfc_9110_reads_them(self):
        import email.message
        for value, expected in self.CASES:
            with self.subTest(value=value):
                self.assertEqual(crawl.parse_charset(value), expected)
                message = email.message.Message()
                message["content-type"] = value
                reference = (message.get_param("charset") or "").strip().lower() or None
                self.assertEqual(crawl.parse_charset(value), reference)

    def test_single_quotes_are_stripped_as_before(self):
        self.assertEqual(crawl.parse_charset("text/html; charset='utf-8'"), "utf-8")


# ---------------------------------------------------------------------------
# 7. Links
# ---------------------------------------------------------------------------


class URLExtractLinksTest(unittest.TestCase):

    def links(self, text, url="http://127.0.0.1:8000/"):
        links, invalid = crawl.extract_links(text, url)
        self.assertEqual(invalid, [])
        return links

    def test_relative_base_href(self):
        self.assertEqual(self.links('<head><base href="/forum/"></head><a href="index.php/fa/89652/0/">',
                                    "http://127.0.0.1:8000/forum/index.php/mv/msg/7627/216142/0/"),
                         ["http://127.0.0.1:8000/forum/index.php/fa/89652/0/"])
        self.assertEqual(self.links('<base href="myself.html"><a href="?param=value">',
                                    "http://127.0.0.1:8000/myself.html"),
                         ["http://127.0.0.1:8000/myself.html?param=value"])
        self.assertEqual(self.links('<base href="/a/"><base href="/b/"><a href="c">',
                                    "http://127.0.0.1:8000/two-bases.html"),
                         ["http://127.0.0.1:8000/a/c"])

    def test_base_without_href_does_not_count(self):
        self.assertEqual(self.links('<base target="_top"><base href="/b/"><a href="c">',
                                    "http://127.0.0.1:8000/x/y"),
                         ["http://127.0.0.1:8000/b/c"])

    def test_absolute_base_on_another_host(self):
        self.assertEqual(self.links('<base href="http://other.test/d/"><a href="e">'),
                         ["http://other.test/d/e"])

    def test_elements_and_attributes(self):
        text = ('<a href="/a">a</a><area href="/area"><frameset><frame src="/frame"></frameset>'
                '<iframe src="/iframe"></iframe><a name="anchor">no href</a><form action="/form"></form>'
                '<frame href="/not-src">')
        self.assertEqual(self.links(text), ["http://127.0.0.1:8000/a", "http://127.0.0.1:8000/area",
                                            "http://127.0.0.1:8000/frame", "http://127.0.0.1:8000/iframe"])

    def test_resources_and_how_each_was_found(self):
        text = ('<img src="/i.png" srcset="/i2.png 2x, /i3.png 300w"><picture><source srcset="/p.webp">'
                '</picture><script src="/j.js"></script><link rel="stylesheet" href="/s.css">'
                '<link rel="icon" href="/f.ico"><link rel="dns-prefetch" href="//cdn.test">'
                '<link rel=preconnect href="/no"><link rel="next" href="/no2">'
                '<link rel="modulepreload" href="/m.js"><link rel=manifest href="/app.webmanifest">'
                '<video src="/v.mp4" poster="/poster.jpg"><source src="/v.webm"><track src="/t.vtt">'
                '</video><audio src="/a.ogg"></audio><embed src="/e.swf"><object data="/o.pdf"></object>'
                '<input type="image" src="/button.png"><input type="text" src="/no3"><a href="/page">')
        links, invalid = crawl.find_links(text, "http://h.test/")
        self.assertEqual(invalid, [])
        self.assertEqual([(url[len("http://h.test"):], via) for url, via in links.items()], [
            ("/i.png", "img src"), ("/i2.png", "img srcset"), ("/i3.png", "img srcset"),
            ("/p.webp", "source srcset"), ("/j.js", "script src"), ("/s.css", "link href"),
            ("/f.ico", "link href"), ("/m.js", "link href"), ("/app.webmanifest", "link href"),
            ("/v.mp4", "video src"), ("/poster.jpg", "video poster"), ("/v.webm", "source src"),
            ("/t.vtt", "track src"), ("/a.ogg", "audio src"), ("/e.swf", "embed src"),
            ("/o.pdf", "object data"), ("/button.png", "input src"), ("/page", "link")])

    def test_an_invalid_link_is_listed_once_a_page(self):
        # As valid links are: by the URL its record gets, the first way wins.
        _, invalid = crawl.find_links('<img src="http://h.test:x/"><a href="http://h.test:x/">'
                                      '<a href=" http://h.test:x/\n"><a href="http://h.test:y/">',
                                      "http://h.test/")
        self.assertEqual([(raw, via) for raw, _, via in invalid],
                         [("http://h.test:x/", "img src"), ("http://h.test:y/", "link")])

    def test_the_first_way_a_url_is_found_wins(self):
        links, _ = crawl.find_links('<img src="/x"><a href="/x"><a href="/y"><img src="/y">',
                                    "http://h.test/")
        self.assertEqual(links, {"http://h.test/x": "img src", "http://h.test/y": "link"})

    def test_srcset_by_the_html_standard(self):
        cases = [
            ("a.png", ["a.png"]),
            ("a.png 1x, b.png 2x", ["a.png", "b.png"]),
            ("a,b.png 1x,c.png 2x", ["a,b.png", "c.png"]),  # a comma inside a URL
            ("a.png,, b.png", ["a.png", "b.png"]),  # trailing commas end a URL
            ("  a.png 100w ,\n b.png 200w", ["a.png", "b.png"]),
            ("data:image/png;base64,iVBO= 1x, b.png 2x", ["data:image/png;base64,iVBO=", "b.png"]),
            ("a.png 1x 2x, b.png", ["b.png"]),  # two densities: dropped
            ("a.png 0w, b.png 10q, c.png (x, y) 1x, d.png 1.5x", ["d.png"]),
            ("a.png 100w 50h, b.png 50h", ["a.png"]),  # h needs w
            ("", []), (" , ", []),
            # Descriptors split on ASCII whitespace only: U+00A0, U+2003 and
            # U+001C are part of a descriptor, which is then invalid.
            ("a.png 1x\u00a0, b.png 2x\u2003, c.png 1x\x1c, d.png\u00a01x, e.png\t1x",
             ["d.png\u00a01x", "e.png"]),  # the URL runs to ASCII whitespace
            ("a.png " + "0" * 5000 + "1w, b.png " + "0" * 5000 + "w", ["a.png"]),  # no int() limit
        ]
        for value, urls in cases:
            with self.subTest(value=value):
                self.assertEqual(crawl.srcset_urls(value), urls)

    def test_css_url_and_import(self):
        css = ('@import "a.css";\n@import url(b.css) screen;\n@IMPORT \'c.css\';'
               'body { background: url( "img/d.png" ) } .x { background: URL(e\\28 1\\29.png) }'
               '/* url(no-comment.png) */ .y { content: "url(no-string.png)" }'
               '.z { background: url(\'f g.png\') } .w { mask: myurl(no-function.png) }'
               '.v { background: url(data:image/png;base64,AAAA) }')
        links, invalid = crawl.find_links(css, "http://h.test/css/site.css", "text/css")
        self.assertEqual(invalid, [])
        self.assertEqual(list(links.items()), [
            ("http://h.test/css/a.css", "css @import"), ("http://h.test/css/b.css", "css @import"),
            ("http://h.test/css/c.css", "css @import"), ("http://h.test/css/img/d.png", "css url"),
            ("http://h.test/css/e(1).png", "css url"), ("http://h.test/css/f%20g.png", "css url")])

    def test_css_escapes_are_code_points(self):
        # CSS's "consume an escaped code point": no windows-1252 table (that
        # is HTML's, for numeric character references); U+FFFD for 0,
        # surrogates and numbers past 0x10FFFF.
        self.assertEqual(crawl.css_links("a{b:url(/\\80 .png)} c{d:url('/\\9f\\41 \\e9.png')}"),
                         [("/\x80.png", "css url"), ("/\x9fA\xe9.png", "css url")])
        self.assertEqual(crawl.css_links("a{b:url(/\\0 \\d800\\110000\\10fffd.png)}"),
                         [("/\ufffd\ufffd\ufffd\U0010fffd.png", "css url")])

    def test_css_syntax(self):
        cases = [
            # A newline ends a string as a bad string, which names nothing;
            # the tokens after the newline are read as usual.
            ('a{content:"x url(/no.png)\n}', []),
            ('@import "no\n.css; a{b:url("no\n.png)} c{d:url(/yes.png)}', ["/yes.png"]),
            ('a{content:"x\r url(/1.png) \f url(/2.png)', ["/1.png", "/2.png"]),  # CR, FF: newlines
            ('a{content:"x\\\r\n url(/no.png)"}', []),  # an escaped CRLF continues the string
            # The end of the text closes strings, url( and @import.
            ('a{content:"x url(/no.png)', []),
            ("a{b:url(/eof.png", ["/eof.png"]),
            ("a{b:url(  '/eof.png'  ", ["/eof.png"]),
            ('@import "eof.css', ["eof.css"]),
            # A name is compared after its escapes are decoded.
            ("a{b:\\75rl(/1.png) \\75 rl(/2.png) u\\rl(/3.png) \\55RL(/4.png)}",
             ["/1.png", "/2.png", "/3.png", "/4.png"]),
            ("a{b:myurl(/no) -url(/no) #url(/no) 1url(/no) url\\28 /no)}", []),
            ('@imp\\6frt "e.css"; @import \\\n "no.css"; @importx "no.css"', ["e.css"]),
            # A bad url (a quote, a parenthesis, a space inside, a
            # non-printable code point) names nothing and swallows all up to ")".
            ('a{b:url(/a"b url(/no.png)) url(/1.png) url(/c d) url(/x\x01y) url(/2.png)}',
             ["/1.png", "/2.png"]),
            ("a{b:url(/a\\)b.png) url(/a\\75 b.png)}", ["/a)b.png", "/aub.png"]),
            ("a{b:url(/n\x00.png)}", ["/n\ufffd.png"]),  # NUL is U+FFFD
            # url("...") is a function: only a string then ")" is a URL.
            ('a{b:url("s.png" x) url( "t.png" ) url(\n"u.png")}', ["t.png", "u.png"]),
            ("@import /* c */ 'c.css'; @import x 'no.css'; @import url(\"d.css\")",
             ["c.css", "d.css"]),
        ]
        for css, urls in cases:
            with self.subTest(css=css):
                self.assertEqual([raw for raw, _ in crawl.css_links(css)], urls)

    def test_distinct_in_document_order(self):
        text = '<a href="/b">1</a><a href="/a">2</a><a href="/b#x">3</a><a href="/a">4</a>'
        self.assertEqual(self.links(text), ["http://127.0.0.1:8000/b", "http://127.0.0.1:8000/a"])

    def test_first_of_repeated_attributes(self):
        self.assertEqual(self.links('<a href="/first" href="/second">'), ["http://127.0.0.1:8000/first"])

    def test_rel_nofollow(self):
        text = ('<a rel="nofollow" href="/nf">x</a><a rel="external NoFollow" href="/nf2">x</a>'
                '<a rel="noopener" href="/ok">x</a><a rel="nofollowing" href="/ok2">x</a>'
                '<a rel="x\fnofollow\r" href="/nf3">')
        self.assertEqual(self.links(text), ["http://127.0.0.1:8000/ok", "http://127.0.0.1:8000/ok2"])

    def test_token_lists_split_on_ascii_whitespace_only(self):
        # "Split a string on ASCII whitespace": U+00A0 and U+001C belong to a
        # token (str.split() would split there).
        text = ("<a rel='nofollow\u00a0x' href=/a><a rel='x\x1cnofollow' href=/b>"
                "<link rel='x\u00a0stylesheet' href=/no.css><link rel='x\tstylesheet' href=/s.css>")
        self.assertEqual(self.links(text), ["http://127.0.0.1:8000/a", "http://127.0.0.1:8000/b",
                                            "http://127.0.0.1:8000/s.css"])

    def test_input_type_is_compared_as_it_is(self):
        # An enumerated attribute: ASCII case-insensitive, not trimmed.
        text = "<input type=' image ' src=/no1><input type='image\n' src=/no2><input type=IMAGE src=/i>"
        self.assertEqual(self.links(text), ["http://127.0.0.1:8000/i"])

    def test_image_is_img(self):
        # The tree builder renames an <image> start tag to <img>.
        links, _ = crawl.find_links("<image src=/i.png srcset='/j.png 2x'><IMAGE/src=/k.png>",
                                    "http://h.test/")
        self.assertEqual(links, {"http://h.test/i.png": "img src", "http://h.test/j.png": "img srcset",
                                 "http://h.test/k.png": "img src"})

    def test_meta_robots_nofollow(self):
        for meta in ('<meta name="robots" content="noindex, nofollow">',
                     '<meta name="ROBOTS" content="NOFOLLOW">',
                     '<meta content="nofollow,noarchive" name="robots">',
                     '<meta name="robots" content="None">'):  # "none": noindex, nofollow
            with self.subTest(meta=meta):
                self.assertEqual(crawl.extract_links(f"<head>{meta}</head><a href='/a'>a</a>",
                                                     "http://127.0.0.1:8000/"), ([], []))
        for meta in ('<meta name="robots" content="noindex">',
                     '<meta name="robots" content="nofollow\u00a0x">',
                     '<meta name="googlebot" content="nofollow">'):
            with self.subTest(meta=meta):
                self.assertEqual(self.links(f"<head>{meta}</head><a href='/a'>a</a>"),
                                 ["http://127.0.0.1:8000/a"])

    def test_entities_in_hrefs(self):
        self.assertEqual(self.links('<a href="/q?a=1&amp;b=2&#38;c=3&#x26;d=4">x</a>'),
                         ["http://127.0.0.1:8000/q?a=1&b=2&c=3&d=4"])
        self.assertEqual(self.links('<a href="/caf&eacute;">x</a>'), ["http://127.0.0.1:8000/caf%C3%A9"])

    def test_script_style_and_comments_give_no_links(self):
        text = ('<script>document.write(\'<a href="/js">x</a>\')</script>'
                '<style>a[href="/css"] { color: red }</style>'
                '<!-- <a href="/comment">x</a> -->'
                '<a href="/real">real</a>')
        self.assertEqual(self.links(text), ["http://127.0.0.1:8000/real"])

    def test_non_http_and_fragment_links(self):
        text = ('<a href="mailto:someone@example.test">m</a><a href="tel:0123456789">t</a>'
                '<a href="javascript:void(0)">j</a><a href="JavaScript:alert(1)">J</a>'
                '<a href="data:text/html,hi">d</a><a href="ftp://example.test/f">f</a>'
                '<a href="#top">top</a><a href="">empty</a><a>none</a><a href="/real">r</a>')
        self.assertEqual(self.links(text, "http://127.0.0.1:8000/a/b"), ["http://127.0.0.1:8000/real"])

    def test_invalid_links_are_reported(self):
        links, invalid = crawl.extract_links(
            '<a href="/ok">o</a><a href="http://[::1/">b</a><a href="http://h.test:99999/">p</a>',
            "http://127.0.0.1:8000/")
        self.assertEqual(links, ["http://127.0.0.1:8000/ok"])
        self.assertEqual([raw for raw, _ in invalid], ["http://[::1/", "http://h.test:99999/"])
        for _, reason in invalid:
            self.assertIsInstance(reason, str)
            self.assertTrue(reason)

    def test_markup_variants(self):
        cases = [
            ("<a href=/unquoted>x</a>", ["/unquoted"]),
            ('<A HREF="/upper">x</A>', ["/upper"]),
            ('<a\nhref="/nl"\n>x</a><a\thref="/tab">', ["/nl", "/tab"]),
            ("<a href='/single'>", ["/single"]),
            ('<a title="a>b" href="/gt">', ["/gt"]),
            ('<a href="/selfclose"/>', ["/selfclose"]),
            ('<a href = "/spaced" >', ["/spaced"]),
            ('<a/href="/slash">', ["/slash"]),
            ('<a data-href="/no" href="/yes">', ["/yes"]),
            ('<SCRIPT>var s="<a href=/js>";</SCRIPT><a href="/after-script">', ["/after-script"]),
            ('<style>x{}</style ><a href="/after-style">', ["/after-style"]),
            ('<![CDATA[ <a href="/cdata"> ]]><a href="/after-cdata">', ["/after-cdata"]),
            ('<scriptx><a href="/scriptx">', ["/scriptx"]),
            ('<iframe src="/f" ></iframe><frameset><frame SRC=/g>', ["/f", "/g"]),
            ('<area shape=rect href="/area">', ["/area"]),
            ('<a href="/a" rel=nofollow><a rel="NOFOLLOW noopener" href="/b"><a href>', []),
            ('<a href="/unclosed"', []),
        ]
        for text, paths in cases:
            with self.subTest(text=text):
                self.assertEqual(self.links(text), ["http://127.0.0.1:8000" + p for p in paths])

    def test_html_charset(self):
        c = crawl.html_charset
        self.assertEqual(c(b"<p>x</p>", "iso-8859-1"), "iso-8859-1")
        self.assertEqual(c(b'<meta charset="windows-1252">', None), "windows-1252")
        self.assertEqual(c(b"<meta charset=KOI8-R>", None), "koi8-r")
        self.assertEqual(c(b'<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-2">', None),
                         "iso-8859-2")
        self.assertEqual(c(b"<meta charset=koi8-r>", "iso-8859-1"), "iso-8859-1")  # the header wins
        self.assertEqual(c(b"\xef\xbb\xbf<p>x</p>", "iso-8859-1"), "utf-8-sig")  # the BOM wins
        self.assertEqual(c(b"<p>x</p>", None), "utf-8")
        self.assertEqual(c(b"<p>x</p>", "x-no-such-charset"), "utf-8")
        self.assertEqual(c(b"<meta charset=bogus-charset>", None), "utf-8")
        self.assertEqual(c(b" " * 2000 + b"<meta charset=koi8-r>", None), "utf-8")  # only the first 1024 bytes

    def test_codecs_that_are_not_text_encodings(self):
        for name in ("base64", "idna", "punycode", "rot13", "zlib"):
            with self.subTest(name=name):
                self.assertEqual(crawl.html_charset(b"<p>x</p>", name), "utf-8")
                self.assertEqual(crawl.html_charset(f'<meta charset="{name}">'.encode(), None),
                                 "utf-8")
        self.assertEqual(crawl.html_charset(b"<p>x</p>", "utf\x008"), "utf-8")

    def test_decoded_links_with_each_charset(self):
        url = "http://127.0.0.1:8000/"
        cases = [
            ("<a href='/caf\xe9'>x</a>".encode("latin-1"), "iso-8859-1"),
            ("<meta charset=koi8-r><a href='/caf\xe9'>x</a>".encode("koi8-r", "replace"), None),
            ("\ufeff<a href='/caf\xe9'>x</a>".encode("utf-8"), "iso-8859-1"),
            ("<a href='/caf\xe9'>x</a>".encode("utf-8"), "x-unknown"),
        ]
        for body, declared in cases:
            with self.subTest(declared=declared, body=body):
                text = body.decode(crawl.html_charset(body, declared), "replace")
                links, _ = crawl.extract_links(text, url)
                self.assertEqual(len(links), 1)
                if declared == "iso-8859-1" or declared == "x-unknown":
                    self.assertEqual(links, ["http://127.0.0.1:8000/caf%C3%A9"])
        cyrillic = "<meta charset='koi8-r'><a href='/\u0434'>x</a>".encode("koi8-r")
        text = cyrillic.decode(crawl.html_charset(cyrillic, None), "replace")
        self.assertEqual(crawl.extract_links(text, url)[0], ["http://127.0.0.1:8000/%D0%B4"])


SITEMAP_HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n'


def sitemap_xml(*urls, index=False, namespace=crawl.SITEMAP_NAMESPACE):
    """A sitemap (bytes) listing urls; a sitemap index with index."""
    root, entry = ("sitemapindex", "sitemap") if index else ("urlset", "url")
    entries = "".join(f"<{entry}><loc>{html.escape(url)}</loc></{entry}>" for url in urls)
    xmlns = f' xmlns="{namespace}"' if namespace else ""
    return f"{SITEMAP_HEAD}<{root}{xmlns}>{entries}</{root}>".encode("utf-8")


class LinksSitemapTest(unittest.TestCase):

    def test_urlset_and_index(self):
        body = (SITEMAP_HEAD + f'<urlset xmlns="{crawl.SITEMAP_NAMESPACE}" '
                'xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">'
                '<url><loc>\n  http://example.test/a?x=1&amp;y=2 </loc><lastmod>2026-01-01</lastmod>'
                '<image:image><image:loc>http://cdn.test/i.png</image:loc></image:image></url>'
                '<url><loc>/relative</loc></url><loc>http://example.test/stray</loc></urlset>')
        self.assertEqual(crawl.parse_sitemap(body.encode()),
                         (False, ["http://example.test/a?x=1&y=2", "/relative"], 0))
        self.assertEqual(crawl.parse_sitemap(sitemap_xml("http://example.test/s1.xml", index=True)),
                         (True, ["http://example.test/s1.xml"], 0))
        # Without the namespace (common in the wild), and gzip-compressed.
        plain = sitemap_xml("http://example.test/", namespace=None)
        self.assertEqual(crawl.parse_sitemap(gzip.compress(plain)), (False, ["http://example.test/"], 0))

    def test_the_limits_of_sitemaps_org(self):
        urls = [f"http://example.test/{n}" for n in range(crawl.SITEMAP_MAX_URLS + 3)]
        is_index, locs, more = crawl.parse_sitemap(sitemap_xml(*urls))
        self.assertEqual((len(locs), locs[-1], more), (crawl.SITEMAP_MAX_URLS, urls[-4], 3))
        bomb = gzip.compress(b"<urlset>" + b" " * crawl.SITEMAP_MAX_BYTES + b"</urlset>")
        self.assertLess(len(bomb), 100 * 1024)
        with self.assertRaisesRegex(crawl.SitemapError, "larger than 52428800 bytes uncompressed"):
            crawl.parse_sitemap(bomb)

    def test_documents_that_are_no_sitemap(self):
        laughs = ('<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY a "aaaaaaaaaa">'
                  '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><urlset><url><loc>&b;</loc></url></urlset>')
        for data, message in [
                (laughs.encode(), "it has a DOCTYPE (refused: entity expansion)"),
                # A search of the bytes would miss this one.
                (laughs.replace('"1.0"', '"1.0" encoding="UTF-16"').encode("utf-16"), "DOCTYPE"),
                (b"<!doctype html><html><body>Not found</body></html>", "not well-formed XML"),
                (b"<html><body></body></html>", "not a sitemap: the document is a <html>"),
                (b'<urlset xmlns="http://example.test/other"/>', "the document is a <urlset>"),
                (b"", "not well-formed XML: no element found"),
                (b"<urlset><url><loc>http://example.test/</loc></url>", "not well-formed XML"),
                (b"\x1f\x8b\x08\x00garbage", "not valid gzip")]:
            with self.subTest(data=data[:40]):
                with self.assertRaisesRegex(crawl.SitemapError, re.escape(message)):
                    crawl.parse_sitemap(data)


# ---------------------------------------------------------------------------
# 8. robots.txt
# ---------------------------------------------------------------------------


class RobotsRulesTest(unittest.TestCase):

    def rules(self, text, token="crawl.py"):
        return crawl.RobotsRules.parse(text, token)

    def test_sitemap_lines_belong_to_no_group(self):
        rules = self.rules("Sitemap: http://example.test/a.xml\nUser-agent: other\nDisallow: /\n"
                           "SITEMAP:/b.xml.gz # a comment\nUser-agent: *\nsitemap:\nDisallow: /x\n")
        self.assertEqual(rules.sitemaps, ["http://example.test/a.xml", "/b.xml.gz"])
        self.assertFalse(rules.can_fetch("/x"))  # the Sitemap line did not end the group
        self.assertEqual(crawl.RobotsRules.allow_all().sitemaps, [])

    def test_wildcards(self):
        rules = self.rules("User-agent: *\nDisallow: /search/*\nAllow: /search/public\n"
                           "Disallow: /*.pdf$\nDisallow: /inventory/srp.html?*\n")
        for target, allowed in [("/search/public", True), ("/docs/a.pdf?x=1", True),
                                ("/inventory/srp.html", True), ("/about", True), ("/", True),
                                ("/search/", False), ("/search/q", False), ("/docs/a.pdf", False),
                                ("/inventory/srp.html?make=1", False), ("/a.pdf", False),
                                ("/docs/a.PDF", True), ("/search", True)]:
            with self.subTest(target=target):
                self.assertEqual(rules.can_fetch(target), allowed)

    def test_disallow_star(self):  # the same rules on a second host
        rules = self.rules("User-agent: *\nDisallow: *\n")
        for target in ("/", "/about", "/a?b"):
            self.assertFalse(rules.can_fetch(target), target)
        self.assertTrue(rules.can_fetch("/robots.txt"))

    def test_longest_match_wins_and_allow_wins_a_tie(self):
        rules = self.rules("User-agent: *\nDisallow: /a\nAllow: /a/b\nAllow: /p\nDisallow: /p\n"
                           "Disallow: /x/\nAllow: /x/*$\n")
        self.assertTrue(rules.can_fetch("/a/b/c"))
        self.assertFalse(rules.can_fetch("/a/c"))
        self.assertFalse(rules.can_fetch("/a"))
        self.assertTrue(rules.can_fetch("/p"))  # same length: Allow wins
        self.assertTrue(rules.can_fetch("/x/y"))  # "/x/*$" is longer than "/x/"
        self.assertTrue(rules.can_fetch("/b"))

    def test_bom_ignored(self):
        for text in ("\ufeffUser-agent: *\nDisallow: /\n", "User-agent: *\nDisallow: /\n"):
            with self.subTest(bom=text.startswith("\ufeff")):
                rules = self.rules(text)
                self.assertFalse(rules.can_fetch("/"))
                self.assertFalse(rules.can_fetch("/a"))
                self.assertTrue(rules.can_fetch("/robots.txt"))

    def test_crawl_delay_fractions(self):
        self.assertEqual(self.rules("User-agent: *\nCrawl-delay: 2\n").crawl_delay, 2.0)
        self.assertEqual(self.rules("User-agent: *\nCrawl-delay: 1.5\n").crawl_delay, 1.5)
        self.assertIsNone(self.rules("User-agent: *\nCrawl-delay: soon\n").crawl_delay)
        self.assertIsNone(self.rules("User-agent: *\nDisallow: /x\n").crawl_delay)
        self.assertIsNone(self.rules("User-agent: otherbot\nCrawl-delay: 10\n").crawl_delay)

    def test_groups_chosen_by_product_token(self):
        text = ("User-agent: *\nDisallow: /\nCrawl-delay: 9\n\n"
                "User-agent: crawl.py\nDisallow: /secret\nCrawl-delay: 0.5\n")
        rules = self.rules(text)
        self.assertTrue(rules.can_fetch("/"))
        self.assertFalse(rules.can_fetch("/secret/x"))
        self.assertEqual(rules.crawl_delay, 0.5)
        other = self.rules(text, "MyBot")
        self.assertFalse(other.can_fetch("/"))
        self.assertEqual(other.crawl_delay, 9.0)
        mine = self.rules("User-agent: MYBOT/2.0\nDisallow: /m\n", "mybot")
        self.assertFalse(mine.can_fetch("/m"))

    def test_product_token(self):
        self.assertEqual(crawl.product_token(crawl.DEFAULT_USER_AGENT), "crawl.py")
        self.assertEqual(crawl.product_token("MyBot/2.0 (+https://example.test)"), "MyBot")

    def test_groups_with_several_agents_and_merged_groups(self):
        text = ("User-agent: a\nUser-agent: crawl.py\nDisallow: /one\n\n"
                "User-agent: b\nDisallow: /\n\n"
                "User-agent: CRAWL.PY\nDisallow: /two\n")
        rules = self.rules(text)
        self.assertFalse(rules.can_fetch("/one"))
        self.assertFalse(rules.can_fetch("/two"))
        self.assertTrue(rules.can_fetch("/three"))

    def test_comments_blank_values_and_unknown_lines(self):
        rules = self.rules("# comment\nUser-agent: * # all\nDisallow: /c # why\nDisallow:\n"
                           "Sitemap: http://example.test/s.xml\nnonsense line\n")
        self.assertFalse(rules.can_fetch("/c"))
        self.assertTrue(rules.can_fetch("/d"))
        self.assertTrue(self.rules("User-agent: *\nDisallow:\n").can_fetch("/anything"))
        self.assertTrue(self.rules("").can_fetch("/anything"))

    def test_percent_encoding_in_patterns(self):
        rules = self.rules("User-agent: *\nDisallow: /caf\u00e9\nDisallow: /x%7ey\n")
        self.assertFalse(rules.can_fetch("/caf%C3%A9"))
        self.assertFalse(rules.can_fetch("/x~y"))

    def test_allow_all_and_disallow_all(self):
        self.assertTrue(crawl.RobotsRules.allow_all().can_fetch("/x"))
        blocked = crawl.RobotsRules.disallow_all("robots.txt unreachable")
        self.assertFalse(blocked.can_fetch("/x"))
        self.assertEqual(blocked.reason, "robots.txt unreachable")

    def test_other_records_do_not_end_a_group(self):  # RFC 9309 §2.1
        text = ("User-agent: crawl.py\nSitemap: http://h.test/sitemap.xml\n"
                "User-agent: otherbot\nDisallow: /private\n")
        rules = crawl.RobotsRules.parse(text, "crawl.py")
        self.assertFalse(rules.can_fetch("/private"))
        self.assertTrue(rules.can_fetch("/public"))

    def test_crawl_delay_is_finite_and_capped(self):
        parse = crawl.RobotsRules.parse
        self.assertIsNone(parse("User-agent: *\nCrawl-delay: inf\n", "x").crawl_delay)
        self.assertIsNone(parse("User-agent: *\nCrawl-delay: nan\n", "x").crawl_delay)
        self.assertIsNone(parse("User-agent: *\nCrawl-delay: -3\n", "x").crawl_delay)
        self.assertEqual(parse("User-agent: *\nCrawl-delay: 1e12\n", "x").crawl_delay,
                         crawl.MAX_CRAWL_DELAY)
        for huge in ("9" * 400, "9" * 5000, "1e400"):  # too large for a float: inf
            self.assertEqual(parse(f"User-agent: *\nCrawl-delay: {huge}\n", "x").crawl_delay,
                             crawl.MAX_CRAWL_DELAY)
        self.assertEqual(crawl.MAX_CRAWL_DELAY, 60.0)


class CrawlerRobotsTest(CrawlerTestCase):

    def test_robots_redirect_loop(self):
        site = self.site({"/robots.txt": redirect("/robots.txt", 301), "/": html_page("/page"),
                            "/page": html_page()})
        _, records = self.crawl_site(site.url(), max_tasks=4)
        targets = site.targets()
        self.assertLessEqual(targets.count("/robots.txt"), 6)
        self.assertGreaterEqual(targets.count("/robots.txt"), 1)
        self.assertEqual(set(records), {site.url(), site.url("/page")})
        self.assertEqual([t for t in targets if t != "/robots.txt"], ["/", "/page"])
        for record in records.values():
            self.assert_record(record, status=200, error=None)

    def test_robots_redirect_to_another_path(self):
        site = self.site({"/robots.txt": redirect("/real-robots.txt", 301),
                            "/real-robots.txt": robots_page("User-agent: *\nDisallow: /private\n"),
                            "/": html_page("/private/x", "/public"), "/public": html_page("/public2"),
                            "/public2": html_page()})
        _, records = self.crawl_site(site.url(), max_tasks=4)
        self.assertEqual(collections.Counter(site.targets()), collections.Counter(
            ["/robots.txt", "/real-robots.txt", "/", "/public", "/public2"]))
        self.assert_record(records[site.url("/private/x")], status=None, error_kind="robots", tries=0)
        self.assert_record(records[site.url("/public")], status=200)

    def test_bom(self):
        for body in (b"\xef\xbb\xbfUser-agent: *\nDisallow: /\n", b"User-agent: *\nDisallow: /\n"):
            with self.subTest(bom=body.startswith(b"\xef")):
                site = self.site({"/robots.txt": Page(body, content_type="text/plain"),
                                    "/": html_page("/a"), "/a": html_page()})
                crawler, records = self.crawl_site(site.url())
                self.assertEqual(site.targets(), ["/robots.txt"])
                self.assertEqual(list(records), [site.url()])
                self.assert_record(records[site.url()], status=None, error_kind="robots", tries=0)
                self.assertIn("robots.txt", records[site.url()].error)

    def test_wildcards_two_hosts(self):
        p = self.site({
            "/robots.txt": robots_page("User-agent: *\nDisallow: /search/*\nAllow: /search/public\n"
                                       "Disallow: /*.pdf$\nDisallow: /inventory/srp.html?*\n"),
            "/": html_page("/search/", "/search/q", "/search/public", "/docs/a.pdf", "/docs/a.pdf?x=1",
                           "/inventory/srp.html?make=1", "/inventory/srp.html", "/about"),
        })
        p2 = self.site({"/robots.txt": robots_page("User-agent: *\nDisallow: *\n"),
                          "/": html_page("/about")})
        _, records = self.crawl_site([p.url(), p2.url()])
        self.assertEqual(collections.Counter(p.targets()), collections.Counter(
            ["/robots.txt", "/", "/search/public", "/docs/a.pdf?x=1", "/inventory/srp.html", "/about"]))
        self.assertEqual(p2.targets(), ["/robots.txt"])
        for path in ("/search/", "/search/q", "/docs/a.pdf", "/inventory/srp.html?make=1"):
            self.assert_record(records[p.url(path)], error_kind="robots", status=None)
        self.assert_record(records[p2.url()], error_kind="robots", status=None)
        self.assertEqual(len(records), 9 + 1)

    def test_robots_4xx_allows_everything(self):
        for status in (403, 404, 410):
            with self.subTest(status=status):
                site = self.site({"/robots.txt": Page("User-agent: *\nDisallow: /\n", status, content_type="text/plain"),
                                    "/": html_page("/a"), "/a": html_page()})
                _, records = self.crawl_site(site.url())
                self.assertEqual(site.targets(), ["/robots.txt", "/", "/a"])
                self.assertEqual(len(records), 2)

    def test_robots_5xx_blocks_everything(self):
        site = self.site({"/robots.txt": Page("oops", 500, content_type="text/plain"),
                            "/": html_page("/a")})
        crawler, records = self.crawl_site(site.url(), max_tries=2)
        self.assertEqual(site.targets(), ["/robots.txt"])
        self.assertEqual(list(records), [site.url()])
        self.assert_record(records[site.url()], status=None, error_kind="robots", tries=0)
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_NOTHING_CRAWLED)

    def test_link_to_a_server_that_is_down_is_a_failure(self):
        # robots.txt unreachable means "fetch nothing" (RFC 9309), but the
        # linked URL is then a broken link, not one skipped by choice: the
        # link check must fail (exit status 1), as it does with robots off.
        down = f"http://127.0.0.1:{refused_port(self)}/x"
        site = self.site({"/": html_page(down)})
        crawler, records = self.crawl_site(site.url(), max_tries=1)
        self.assertEqual(set(records), {site.url(), down})
        self.assert_record(records[down], status=None, error_kind="refused", depth=1, referrer=site.url(),
                           error="connection refused (robots.txt unreachable)")
        self.assertTrue(records[down].failed)
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_FAILED_URLS)

    def test_robots_fetched_once_per_origin(self):
        other = self.site({"/": html_page("/x", "/y"), "/x": html_page(), "/y": html_page()})
        routes = {"/": html_page(*[f"/p{i}" for i in range(8)], other.url("/"))}
        for i in range(8):
            routes[f"/p{i}"] = html_page("/", other.url("/x"))
        site = self.site(routes)
        _, records = self.crawl_site(site.url(), max_tasks=6)
        self.assertEqual(site.targets().count("/robots.txt"), 1)
        self.assertEqual(other.targets().count("/robots.txt"), 1)
        self.assertEqual(site.targets()[0], "/robots.txt")
        self.assertEqual(other.targets()[0], "/robots.txt")
        self.assertEqual(len(records), 9 + 3)

    def test_robots_uses_product_token_group(self):
        site = self.site({"/robots.txt": robots_page("User-agent: *\nDisallow: /\n\n"
                                                          "User-agent: MyBot\nDisallow: /secret\n"),
                            "/": html_page("/secret", "/open"), "/open": html_page()})
        _, records = self.crawl_site(site.url(), user_agent="MyBot/2.0 (+https://example.test)")
        self.assertEqual(site.targets(), ["/robots.txt", "/", "/open"])
        self.assertEqual(site.requests[0]["headers"]["User-Agent"], "MyBot/2.0 (+https://example.test)")
        self.assert_record(records[site.url("/secret")], error_kind="robots")

    def test_no_robots(self):
        site = self.site({"/robots.txt": robots_page("User-agent: *\nDisallow: /\n"),
                            "/": html_page("/a"), "/a": html_page()})
        _, records = self.crawl_site(site.url(), robots=False)
        self.assertEqual(site.targets(), ["/", "/a"])

    def page_times(self, site):
        return [r["time"] for r in site.requests if r["target"] != "/robots.txt"]

    @virtual_clock
    def test_crawl_delay(self):  # C30
        site = self.site({"/robots.txt": robots_page("User-agent: *\nCrawl-delay: 2\n"),
                            "/": html_page("/1", "/2", "/3", "/4")})
        for i in range(1, 5):
            site.routes[f"/{i}"] = html_page()
        crawler = crawl.Crawler(site.url(), max_tasks=4, backoff=0.01, soft_404=False)
        sent = fetch_times(crawler.client)
        records = self.run_co(crawler.crawl(), timeout=60)
        self.assertEqual(len(records), 5)
        self.assertEqual(len(self.page_times(site)), 5)
        self.assertEqual([url for url, _ in sent if url.endswith("/robots.txt")], [site.url("/robots.txt")])
        page_sent = [(url, when) for url, when in sent if not url.endswith("/robots.txt")]
        # The crawler's own (virtual) clock: each request exactly one delay after the last.
        gaps = time_gaps(page_sent)
        self.assertEqual(len(gaps), 4)
        for gap in gaps:
            self.assertAlmostEqual(gap, 2.0, places=9)

    @virtual_clock
    def test_a_politeness_delay_that_holds_urls_back_is_said_once_per_host(self):
        site = self.site({"/robots.txt": robots_page("User-agent: *\nCrawl-delay: 1.5\n"),
                          "/": html_page("/1", "/2", "/3")})
        for i in range(1, 4):
            site.routes[f"/{i}"] = html_page()
        with self.assertLogs("crawl", "INFO") as logs:
            self.crawl_site(site.url(), max_tasks=4)
        notices = [record for record in logs.records if hasattr(record, "notice")]
        self.assertEqual([record.getMessage() for record in notices], [
            "robots.txt asks for 1.5 s between requests to 127.0.0.1: at most 40 URLs a "
            "minute from it"])
        with self.assertLogs("crawl", "INFO") as logs:
            self.crawl_site(site.url(), max_tasks=4, delay=4, robots=False)
        self.assertEqual([record.getMessage() for record in logs.records
                          if hasattr(record, "notice")],
                         ["--delay sets 4 s between requests to 127.0.0.1: at most 15 URLs a "
                          "minute from it"])

    @virtual_clock
    def test_delay_option_and_larger_of_the_two(self):
        for crawl_delay, delay in ((1, 3), (3, 1.5)):
            with self.subTest(crawl_delay=crawl_delay, delay=delay):
                site = self.site({"/robots.txt": robots_page(f"User-agent: *\nCrawl-delay: {crawl_delay}\n"),
                                    "/": html_page("/1", "/2")})
                site.routes["/1"] = site.routes["/2"] = html_page()
                crawler = crawl.Crawler(site.url(), max_tasks=3, delay=delay, backoff=0.01, soft_404=False)
                sent = fetch_times(crawler.client)
                self.run_co(crawler.crawl(), timeout=60)
                self.assertEqual(len(self.page_times(site)), 3)
                gaps = time_gaps([(url, when) for url, when in sent if not url.endswith("/robots.txt")])
                self.assertEqual(len(gaps), 2)
                for gap in gaps:
                    self.assertAlmostEqual(gap, max(crawl_delay, delay), places=9)

    def test_crawl_delay_of_another_agent_ignored(self):
        site = self.site({"/robots.txt": robots_page("User-agent: otherbot\nCrawl-delay: 30\n\n"
                                                          "User-agent: *\nDisallow:\n"),
                            "/": html_page("/1", "/2", "/3", "/4")})
        for i in range(1, 5):
            site.routes[f"/{i}"] = html_page()
        started = time.monotonic()
        _, records = self.crawl_site(site.url(), max_tasks=4, run_timeout=10)
        self.assertEqual(len(records), 5)
        self.assertLess(time.monotonic() - started, 5)

    def test_max_pages_holds_while_robots_txt_is_fetched(self):
        other = self.site({f"/p{i}": html_page() for i in range(6)})
        site = self.site({"/": html_page(*[other.url(f"/p{i}") for i in range(6)])})
        records = crawl.crawl([site.url()], max_pages=2, max_tasks=10)
        fetched = [r for r in records if r.tries]
        self.assertEqual(len(fetched), 2)
        # minus two robots.txt and two soft-404 probes (which are not pages)
        self.assertEqual(len(site.targets()) + len(other.targets()) - 4, 2)
        self.assertEqual(len([r for r in records if r.error_kind == "max_pages"]), 5)

    def test_robots_txt_unreachable_says_how_many_tries(self):
        # The host's problem comes first, then what it cost.
        server = self.scripted(answer_then_reset(b"HTTP/1.1 200 OK\r\n"))
        records = crawl.crawl([server.url("/")], max_tries=3, backoff=0.01)
        self.assertEqual(len(records), 1)
        self.assertEqual(records[0].error_kind, "reset")
        self.assertTrue(records[0].error.startswith("connection reset by the server"), records[0].error)
        self.assertTrue(records[0].error.endswith("(robots.txt unreachable after 3 tries)"), records[0].error)


# ---------------------------------------------------------------------------
# 9. The crawler
# ---------------------------------------------------------------------------


class CrawlerScopeTest(LoopTestCase):

    def scope(self, roots, **options):
        return crawl.Crawler(roots, client=FakeClient({}), **options).in_scope

    def test_strict(self):
        in_scope = self.scope(["example.test"])
        for url in ("http://example.test/", "https://example.test/a", "http://example.test:8080/",
                    "http://www.example.test/x", "https://www.example.test:8443/"):
            self.assertTrue(in_scope(url), url)
        for url in ("http://sub.example.test/", "http://other.test/", "http://example.test.evil.test/",
                    "http://notexample.test/", "http://www.www.example.test/", "http://127.0.0.1/"):
            self.assertFalse(in_scope(url), url)

    def test_www_root(self):
        in_scope = self.scope(["https://www.example.test/docs/"])
        self.assertTrue(in_scope("http://example.test/"))
        self.assertTrue(in_scope("http://www.example.test/other"))
        self.assertFalse(in_scope("http://sub.example.test/"))

    def test_lenient(self):
        in_scope = self.scope(["www.example.test"], lenient=True)
        for url in ("http://example.test/", "http://www.example.test/", "http://sub.example.test/",
                    "https://a.b.example.test:8443/"):
            self.assertTrue(in_scope(url), url)
        for url in ("http://badexample.test/", "http://example.test.evil.test/", "http://other.test/"):
            self.assertFalse(in_scope(url), url)

    def test_scope_subdomains_is_lenient(self):
        for options in ({"scope": "subdomains"}, {"lenient": True}, {"lenient": True, "scope": "host"}):
            in_scope = self.scope(["www.example.test"], **options)
            self.assertTrue(in_scope("https://a.b.example.test:8443/"), options)
            self.assertFalse(in_scope("http://badexample.test/"), options)
        for scope in ("origin", "path"):
            with self.assertRaisesRegex(ValueError, f"lenient contradicts scope='{scope}'"):
                self.scope(["example.test"], scope=scope, lenient=True)
        with self.assertRaisesRegex(ValueError, "unknown scope 'site'"):
            self.scope(["example.test"], scope="site")

    def test_scope_origin(self):
        # The port counts: two local services on one host are two sites.
        in_scope = self.scope(["http://localhost:8000/", "https://example.test/a"], scope="origin")
        for url in ("http://localhost:8000/", "http://localhost:8000/x?y", "https://example.test/",
                    "https://example.test/b/c"):
            self.assertTrue(in_scope(url), url)
        for url in ("http://localhost:8001/", "https://localhost:8000/", "http://localhost/",
                    "http://example.test/", "https://www.example.test/", "https://example.test:8443/",
                    "https://sub.example.test/"):
            self.assertFalse(in_scope(url), url)

    def test_scope_path(self):
        # Under the root's directory: its path up to the last "/", as wget --no-parent.
        in_scope = self.scope(["http://example.test/docs/guide/index.html", "http://other.test:81/a/"],
                              scope="path", exclude=[r"\.pdf$"])
        for url in ("http://example.test/docs/guide/", "http://example.test/docs/guide/index.html",
                    "http://example.test/docs/guide/deeper/page.html", "http://example.test/docs/guide/?q",
                    "http://other.test:81/a/b"):
            self.assertTrue(in_scope(url), url)
        for url in ("http://example.test/docs/", "http://example.test/docs/guide", "http://example.test/",
                    "http://example.test/docs/guidebook/", "https://example.test/docs/guide/x",
                    "http://www.example.test/docs/guide/x", "http://other.test/a/b",
                    "http://example.test/docs/guide/x.pdf"):
            self.assertFalse(in_scope(url), url)
        in_scope = self.scope(["http://example.test/docs"], scope="path")  # no slash: a file in "/"
        self.assertTrue(in_scope("http://example.test/other"))

    def test_invalid_links_on_the_site_are_reported_in_every_scope(self):
        pages = {"http://example.test/docs/": html_page("http://example.test:99999/x", "http://other.test:99999/")}
        for scope in ("host", "origin", "path"):
            with self.subTest(scope=scope):
                crawler = crawl.Crawler("http://example.test/docs/", client=FakeClient(pages), robots=False,
                                        scope=scope)
                records = self.run_co(crawler.crawl())
                self.assertEqual(sorted(url for url, r in records.items() if r.error_kind == "invalid_url"),
                                 ["http://example.test:99999/x"])

    def test_scope_from_the_command_line(self):
        parser = crawl.build_parser()
        self.assertEqual(parser.parse_args(["x.test", "--scope", "path"]).scope, "path")
        with contextlib.redirect_stderr(io.StringIO()) as stderr, self.assertRaises(SystemExit):
            parser.parse_args(["x.test", "--scope", "site"])
        self.assertIn("expected one of host, subdomains, origin, path; got 'site'", stderr.getvalue())

    def test_several_roots(self):
        in_scope = self.scope(["one.test", "http://two.test:8000/x"])
        self.assertTrue(in_scope("http://one.test/"))
        self.assertTrue(in_scope("https://www.two.test/"))
        self.assertFalse(in_scope("http://three.test/"))

    def test_exclude(self):
        in_scope = self.scope(["example.test"], exclude=[r"/private/", re.compile(r"\.pdf$")])
        self.assertTrue(in_scope("http://example.test/public/a"))
        self.assertFalse(in_scope("http://example.test/private/a"))
        self.assertFalse(in_scope("http://example.test/doc.pdf"))
        self.assertTrue(in_scope("http://example.test/doc.pdf?x=1"))

    def test_bad_roots_and_options(self):
        client = FakeClient({})
        with self.assertRaises(ValueError):
            crawl.Crawler(["ftp://example.test/"], client=client)
        with self.assertRaises(ValueError):
            crawl.Crawler([], client=client)
        with self.assertRaises(ValueError):
            crawl.Crawler(["example.test"], max_tasks=0, client=client)
        with self.assertRaises(ValueError):
            crawl.Crawler(["example.test"], max_tries=0, client=client)

    def test_roots_normalized(self):
        crawler = crawl.Crawler(["Example.TEST", "https://example.test:443/a#f"], client=FakeClient({}))
        self.assertEqual(crawler.roots, ["http://example.test/", "https://example.test/a"])


class CrawlerDescribeErrorTest(unittest.TestCase):

    def test_kinds(self):
        cases = [
            (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "refused"),
            (OSError(errno.ENETUNREACH, "Network is unreachable"), "connect"),
            (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), "dns"),
            (TimeoutError("http://h.test/: timed out"), "timeout"),
            (ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"), "reset"),
            (crawl.ProtocolError("bad status line", "http://h.test/"), "protocol"),
            (crawl.BodyTooLarge("too big", "http://h.test/"), "too_large"),
            (crawl.TruncatedBody("cut", "http://h.test/"), "truncated"),
            (crawl.ContentDecodingError("bad gzip", "http://h.test/"), "decoding"),
            (ssl_error(), "tls"),
            (crawl.InvalidURL("invalid port '99999'"), "invalid_url"),
            (ValueError("a bug, not a URL"), "internal"),
            (RuntimeError("surprise"), "internal"),
            (KeyError("k"), "internal"),
        ]
        for error, kind in cases:
            with self.subTest(error=error):
                got_kind, message = crawl.describe_error(error)
                self.assertEqual(got_kind, kind)
                self.assertIsInstance(message, str)
                self.assertTrue(message)
        self.assertEqual(crawl.describe_error(crawl.ProtocolError("bad status line", "http://h.test/")),
                         ("protocol", "bad status line"))
        self.assertEqual(crawl.describe_error(RuntimeError("surprise")),
                         ("internal", "unexpected RuntimeError: surprise"))

    def test_a_tls_connection_closed_early_is_one_message_on_every_python(self):
        for error in (ssl.SSLEOFError(8, "EOF occurred in violation of protocol (_ssl.c:1129)"),
                      ssl.SSLZeroReturnError(6, "TLS/SSL connection has been closed (EOF)"),
                      ssl.SSLEOFError(8, "[SSL: UNEXPECTED_EOF_WHILE_READING] unexpected eof")):
            self.assertEqual(crawl.describe_error(error), (
                "tls", "TLS error: the server closed the connection in the middle of TLS"))

    def test_a_dns_failure_names_the_host_first(self):
        error = socket.gaierror(socket.EAI_NONAME, "Name or service not known (resolving 'xkcd.com')")
        self.assertEqual(crawl.describe_error(error, "http://xkcd.com/"),
                         ("dns", "cannot resolve host xkcd.com: Name or service not known"))
        self.assertEqual(crawl.describe_error(error)[1],
                         "cannot resolve host: Name or service not known (resolving 'xkcd.com')")

    def test_parse_retry_after(self):
        self.assertEqual(crawl.parse_retry_after("120"), 120.0)
        self.assertEqual(crawl.parse_retry_after(" 0 "), 0.0)
        self.assertIsNone(crawl.parse_retry_after(None))
        self.assertIsNone(crawl.parse_retry_after("soon"))
        now = 1_000_000_000.0  # 2001-09-09T01:46:40Z
        self.assertEqual(crawl.parse_retry_after("Sun, 09 Sep 2001 01:47:10 GMT", now=now), 30.0)
        self.assertEqual(crawl.parse_retry_after("Sun, 09 Sep 2001 01:00:00 GMT", now=now), 0.0)


class RecordStoreTest(unittest.TestCase):
    """crawler.records keeps every field as it was, one packed row per URL."""

    def test_a_record_comes_back_as_it_went_in(self):
        store = crawl.RecordStore()
        plain = crawl.Record("http://h.test/a", 1, "http://h.test/", "img src")
        plain.status, plain.reason, plain.content_type, plain.charset = 200, "OK", "text/html", None
        plain.size, plain.content_length, plain.links, plain.new_links = 8123, 8123, 10, 3
        plain.tries, plain.elapsed = 1, 0.012345
        odd = crawl.Record("http://h.test/b", 70000, "http://h.test/a")
        odd.error_kind, odd.error = "connect", "unreachable"
        odd.content_length, odd.links, odd.elapsed = 10 ** 15, 65535, -1.5  # beyond the fields
        odd.redirect, odd.linked_from, odd.referrers = "http://h.test/c", 2, ["http://h.test/a"]
        for record in (plain, odd):
            store.add(record.url, record.depth, record.referrer, record.via, 1)
        store.finish(odd)
        store.finish(plain)
        self.assertEqual(list(store), ["http://h.test/b", "http://h.test/a"])  # finishing order
        for record in (plain, odd):
            self.assertEqual(store[record.url].as_dict(), record.as_dict())
            self.assertEqual({name: type(value) for name, value in store[record.url].as_dict().items()},
                             {name: type(value) for name, value in record.as_dict().items()})
        self.assertEqual((store.seen["http://h.test/a"], len(store.seen)), (1, 2))

    def test_a_record_read_is_a_snapshot(self):
        store = crawl.RecordStore()
        record = crawl.Record("http://h.test/")
        record.referrers = ["http://h.test/x"]
        store.finish(record)
        copy = store["http://h.test/"]
        copy.status = 500
        copy.referrers.append("http://h.test/y")
        self.assertEqual(store["http://h.test/"].as_dict(), record.as_dict())
        store.set_field("http://h.test/", "linked_from", 3)
        self.assertEqual(store.field("http://h.test/", "linked_from"), 3)
        self.assertNotIn("http://h.test/other", store)
        with self.assertRaises(KeyError):
            store["http://h.test/other"]

    def test_rows_hold_no_object_per_url(self):
        """Structural: a URL costs its row in the packed bytes, and no dict
        entry for a plain record (only the URL, its row number and
        references to existing strings are Python objects)."""
        store = crawl.RecordStore()
        for n in range(1000):
            url = f"http://h.test/{n}"
            store.add(url, 1, "http://h.test/", "link", 1)
            record = store.new_record(url)
            record.status, record.reason, record.content_type = 200, "OK", "text/html"
            record.size, record.content_length, record.elapsed = 100 + n, 100 + n, n / 1000
            store.finish(record)
        self.assertEqual(len(store._packed), 1000 * store._format.size)
        self.assertLessEqual(store._format.size, 40)
        self.assertEqual([len(values) for values in store._odd.values()], [0] * len(store._odd))
        self.assertEqual([len(values) for values in store._sparse.values()], [0, 0, 0])
        self.assertEqual(store._strings, [None, "link", "OK", "text/html"])
        slots = set(crawl.Record.__slots__)
        self.assertEqual({name for name, _ in store.PACKED} | set(store.SPARSE)
                         | {"url", "referrer"}, slots)

    def test_count_link_says_how_many_pages_link_while_the_url_waits(self):
        store = crawl.RecordStore()
        row = store.add("http://h.test/a", 1, "http://h.test/", "link", 1)
        self.assertEqual([store.count_link(row), store.count_link(row)], [2, 3])
        store.finish(store.new_record("http://h.test/a"))
        self.assertEqual(store.count_link(row), 0)  # finished: still counted, no longer waiting
        self.assertEqual((store.links_to(row), store.seen["http://h.test/a"]), (4, 4))

    def test_page_lists_reuse_their_cells(self):
        lists = crawl._PageLists()
        for page in ("a", "b", "c"):
            lists.add(5, page)
        lists.add(2, "d")
        self.assertEqual(lists.take(5), ["c", "b", "a"])
        self.assertEqual(lists.take(5), [])
        lists.add(7, "e")
        lists.add(7, "f")
        self.assertEqual(len(lists._page), 4)  # two of the three cells given back, reused
        self.assertEqual((lists.take(7), lists.take(2), lists.take(99)), (["f", "e"], ["d"], []))


class CrawlerRecordUnitTest(unittest.TestCase):

    def test_new_record(self):
        record = crawl.Record("http://h.test/", 2, "http://h.test/r")
        self.assertEqual(record.as_dict(), {
            "url": "http://h.test/", "status": None, "reason": None, "content_type": None,
            "charset": None, "size": 0, "content_length": None, "links": 0, "new_links": 0, "redirect": None,
            "error": None, "error_kind": None, "failed": False, "tries": 0, "elapsed": 0.0,
            "depth": 2, "referrer": "http://h.test/r", "via": "link", "linked_from": None, "referrers": None})
        self.assertEqual(tuple(record.as_dict()), tuple(crawl.RECORD_FIELDS))

    def test_repr_and_the_failed_field(self):
        record = crawl.Record("http://h.test/")
        self.assertEqual(repr(record), "<Record http://h.test/ None>")
        record.status, record.error_kind = 404, None
        self.assertEqual((repr(record), record.as_dict()["failed"]),
                         ("<Record http://h.test/ 404>", True))
        record.status, record.error_kind = None, "max_pages"
        self.assertEqual((repr(record), record.as_dict()["failed"]),
                         ("<Record http://h.test/ None max_pages>", False))

    def test_failed_and_is_page(self):
        def record(**fields):
            r = crawl.Record("http://h.test/")
            for name, value in fields.items():
                setattr(r, name, value)
            return r
        self.assertFalse(record(status=200, content_type="text/html").failed)
        self.assertTrue(record(status=200, content_type="text/html").is_page)
        self.assertFalse(record(status=200, content_type="text/plain").is_page)
        self.assertFalse(record(status=301).failed)
        self.assertTrue(record(status=404).failed)
        self.assertTrue(record(status=503).failed)
        self.assertTrue(record(error_kind="connect", error="refused").failed)
        for kind in ("robots", "max_depth", "max_pages", "interrupted"):
            self.assertFalse(record(error_kind=kind, error="not fetched").failed, kind)
        self.assertTrue(record(status=302, error_kind="redirect_limit", error="x").failed)

    def test_format_record(self):
        r = crawl.Record("http://h.test/")
        r.status, r.content_type, r.size, r.links, r.new_links = 200, "text/html", 123, 3, 2
        self.assertEqual(crawl.format_record(r), "200 http://h.test/  text/html  123 bytes  2/3 new links")
        r = crawl.Record("http://h.test/r")
        r.status, r.redirect = 301, "http://h.test/target"
        self.assertEqual(crawl.format_record(r), "301 http://h.test/r  -  0 bytes  -> http://h.test/target")
        r = crawl.Record("http://h.test/down")
        r.error_kind, r.error, r.tries = "connect", "Connection refused", 4
        self.assertEqual(crawl.format_record(r), "--- http://h.test/down  [connect] Connection refused  (4 tries)")
        r = crawl.Record("http://h.test/gone")
        r.status, r.content_type, r.size, r.tries = 404, "text/plain", 9, 1
        self.assertEqual(crawl.format_record(r), "404 http://h.test/gone  text/plain  9 bytes")
        r.referrer = "http://h.test/links.html"
        self.assertEqual(crawl.format_record(r), "404 http://h.test/gone  text/plain  9 bytes"
                                                 "  <- linked from http://h.test/links.html")


class CrawlerSiteTest(CrawlerTestCase):

    def test_exact_url_set_and_requests(self):
        site = self.site({
            "/": html_page("/a", "/b", "/a#frag", "b"),
            "/a": html_page("/", "/c", "/b"),
            "/b": html_page("/c"),
            "/c": html_page(),
        })
        crawler, records = self.crawl_site(site.url())
        self.assertEqual(set(records), {site.url(p) for p in ("/", "/a", "/b", "/c")})
        self.assertEqual(collections.Counter(site.targets()),
                         collections.Counter(["/robots.txt", "/", "/a", "/b", "/c"]))
        self.assertEqual(site.targets()[:2], ["/robots.txt", "/"])
        for record in records.values():
            self.assert_record(record, status=200, error=None, error_kind=None, tries=1)
        self.assert_record(records[site.url("/")], links=2, new_links=2, depth=0, referrer=None)
        self.assert_record(records[site.url("/c")], depth=2, links=0, new_links=0)
        self.assertIn(records[site.url("/c")].referrer, (site.url("/a"), site.url("/b")))
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_OK)
        self.assertEqual(crawler.stats()["pages"], 4)

    def test_full_records(self):
        site = self.site({"/": html_page("/a", "/missing", "/private"), "/a": Page("<p>no links</p>"),
                            "/robots.txt": robots_page("User-agent: *\nDisallow: /private\n")})
        root = site.routes["/"]
        crawler, records = self.crawl_site(site.url())
        self.assertEqual(set(records), {site.url(p) for p in ("/", "/a", "/missing", "/private")})
        for record in records.values():
            self.assertIsInstance(record.elapsed, float)
            self.assertGreaterEqual(record.elapsed, 0.0)
            self.assertLess(record.elapsed, 10.0)
        got = {url: dict(record.as_dict(), elapsed=None) for url, record in records.items()}
        self.assertEqual(got[site.url("/")], {
            "url": site.url("/"), "status": 200, "reason": "OK", "content_type": "text/html",
            "charset": "utf-8", "size": len(root.body), "content_length": len(root.body), "links": 3, "new_links": 3, "redirect": None,
            "error": None, "error_kind": None, "failed": False, "tries": 1, "elapsed": None,
            "depth": 0, "referrer": None, "via": "root", "linked_from": None, "referrers": None})
        self.assertEqual(got[site.url("/a")], {
            "url": site.url("/a"), "status": 200, "reason": "OK", "content_type": "text/html",
            "charset": "utf-8", "size": 15, "content_length": 15, "links": 0, "new_links": 0, "redirect": None,
            "error": None, "error_kind": None, "failed": False, "tries": 1, "elapsed": None,
            "depth": 1, "referrer": site.url("/"), "via": "link", "linked_from": None, "referrers": None})
        self.assertEqual(got[site.url("/missing")], {
            "url": site.url("/missing"), "status": 404, "reason": "Not Found", "content_type": "text/plain",
            "charset": None, "size": 0, "content_length": 9, "links": 0, "new_links": 0, "redirect": None,
            "error": None, "error_kind": None, "failed": True, "tries": 1, "elapsed": None,
            "depth": 1, "referrer": site.url("/"), "via": "link", "linked_from": 1, "referrers": [site.url("/")]})
        private = records[site.url("/private")]
        self.assertEqual(dict(got[site.url("/private")], error=None), {
            "url": site.url("/private"), "status": None, "reason": None, "content_type": None,
            "charset": None, "size": 0, "content_length": None, "links": 0, "new_links": 0, "redirect": None,
            "error": None, "error_kind": "robots", "failed": False, "tries": 0, "elapsed": None,
            "depth": 1, "referrer": site.url("/"), "via": "link", "linked_from": None, "referrers": None})
        self.assertEqual(private.elapsed, 0.0)
        self.assertIn("robots.txt", private.error)
        self.assertTrue(records[site.url("/missing")].failed)
        self.assertFalse(private.failed)
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_FAILED_URLS)
        self.assertNotIn("/private", site.targets())

    def test_referrer_is_first_page_linking(self):
        site = self.site({"/": html_page("/a", "/b"), "/a": html_page("/c"),
                            "/b": html_page("/c"), "/c": html_page()})
        _, records = self.crawl_site(site.url(), max_tasks=1)
        self.assert_record(records[site.url("/c")], referrer=site.url("/a"), depth=2)
        self.assert_record(records[site.url("/a")], new_links=1, links=1)
        self.assert_record(records[site.url("/b")], new_links=0, links=1)

    def test_scope_strict_localhost_vs_127(self):
        site = self.site({"/in": html_page(), "/upper": html_page()})
        site.routes["/"] = html_page("/in", site.url("/out"), f"http://LOCALHOST:{site.port}/upper")
        root = f"http://localhost:{site.port}/"
        _, records = self.crawl_site(root)
        self.assertEqual(set(records), {root, f"http://localhost:{site.port}/in",
                                        f"http://localhost:{site.port}/upper"})
        self.assert_record(records[root], links=3, new_links=2)
        self.assertNotIn("/out", site.targets())

    def test_scope_port_and_scheme_do_not_matter(self):
        other = self.site({"/": html_page("/deeper"), "/deeper": html_page()})
        site = self.site({"/": html_page(other.url("/"))})
        _, records = self.crawl_site(site.url())
        self.assertEqual(set(records), {site.url(), other.url(), other.url("/deeper")})
        self.assertEqual(other.targets(), ["/robots.txt", "/", "/deeper"])

    def test_exclude(self):
        site = self.site({"/": html_page("/a", "/skip/b", "/c.pdf", "/c"), "/a": html_page("/skip/d")})
        _, records = self.crawl_site(site.url(), exclude=[r"/skip/", r"\.pdf$"])
        self.assertEqual(set(records), {site.url(p) for p in ("/", "/a", "/c")})
        self.assertEqual(sorted(site.targets()), ["/", "/a", "/c", "/robots.txt"])
        self.assert_record(records[site.url("/")], links=4, new_links=2)

    def test_lenient_and_www_with_fake_client(self):
        pages = {
            "http://example.test/": html_page("http://sub.example.test/", "http://www.example.test/w",
                                              "http://other.test/", "https://example.test:8443/s",
                                              "http://a.sub.example.test/deep"),
            "http://sub.example.test/": html_page(),
            "http://www.example.test/w": html_page(),
            "https://example.test:8443/s": html_page(),
            "http://a.sub.example.test/deep": html_page(),
        }
        strict = FakeClient(pages)
        _, records = self.crawl_site("example.test", client=strict)
        self.assertEqual(set(records), {"http://example.test/", "http://www.example.test/w",
                                        "https://example.test:8443/s"})
        self.assertEqual(sorted(strict.fetched), sorted([
            "http://example.test/robots.txt", "http://example.test/",
            "http://www.example.test/robots.txt", "http://www.example.test/w",
            "https://example.test:8443/robots.txt", "https://example.test:8443/s"]))
        self.assertTrue(strict.closed)
        lenient = FakeClient(pages)
        _, records = self.crawl_site("example.test", client=lenient, lenient=True)
        self.assertEqual(set(records), {"http://example.test/", "http://www.example.test/w",
                                        "https://example.test:8443/s", "http://sub.example.test/",
                                        "http://a.sub.example.test/deep"})
        self.assertNotIn("http://other.test/", lenient.fetched)

    def test_non_html_not_parsed_and_xhtml_parsed(self):
        site = self.site({
            "/": html_page("/plain", "/xhtml", "/json"),
            "/plain": Page('<a href="/from-plain">x</a>', content_type="text/plain"),
            "/xhtml": Page('<html xmlns="http://www.w3.org/1999/xhtml"><a href="/from-xhtml">x</a></html>',
                           content_type="application/xhtml+xml"),
            "/json": Page('{"a": "<a href=\\"/from-json\\">"}', content_type="application/json"),
            "/from-xhtml": html_page(),
        })
        _, records = self.crawl_site(site.url())
        self.assertEqual(set(records), {site.url(p) for p in ("/", "/plain", "/xhtml", "/json", "/from-xhtml")})
        self.assert_record(records[site.url("/plain")], links=0, content_type="text/plain")
        self.assert_record(records[site.url("/xhtml")], links=1, new_links=1)

    def test_charset_from_content_type(self):
        site = self.site({
            "/": html_page("/latin", "/meta", "/unknown"),
            "/latin": Page("<a href='/caf\xe9'>x</a>".encode("latin-1"), content_type="text/html; charset=ISO-8859-1"),
            "/meta": Page("<meta charset='koi8-r'><a href='/\u0434'>x</a>".encode("koi8-r"), content_type="text/html"),
            "/unknown": Page("<a href='/na\xefve'>x</a>".encode("utf-8"), content_type="text/html; charset=x-nonsense"),
        })
        _, records = self.crawl_site(site.url())
        self.assert_record(records[site.url("/latin")], charset="iso-8859-1", links=1)
        self.assert_record(records[site.url("/meta")], charset=None, links=1)
        self.assert_record(records[site.url("/unknown")], charset="x-nonsense", links=1)
        self.assertEqual(collections.Counter(site.targets()), collections.Counter(
            ["/robots.txt", "/", "/latin", "/meta", "/unknown", "/caf%C3%A9", "/%D0%B4", "/na%C3%AFve"]))

    def test_meta_and_rel_nofollow_in_a_crawl(self):
        site = self.site({
            "/": html_page("/meta", extra='<a rel="nofollow" href="/nf">x</a>'),
            "/meta": html_page("/hidden", extra='<meta name="robots" content="nofollow">'),
        })
        _, records = self.crawl_site(site.url())
        self.assertEqual(set(records), {site.url("/"), site.url("/meta")})
        self.assert_record(records[site.url("/meta")], links=0, new_links=0)

    def test_invalid_link_recorded(self):
        # Invalid links on the site's own host (or relative) are broken links
        # and get a failed record; an invalid link to another host ([::1]
        # here) is out of scope like any link to another host.
        site = self.site({"/": html_page("/ok", "http://[::1/", "http://127.0.0.1:99999/x",
                                           "http://127.0.0.1:0/y", "//[zz]/w", "http://other.test:x/"),
                            "/ok": html_page()})
        crawler, records = self.crawl_site(site.url())
        self.assertEqual(set(records), {site.url("/"), site.url("/ok"), "http://127.0.0.1:99999/x",
                                        "http://127.0.0.1:0/y"})
        for raw in ("http://127.0.0.1:99999/x", "http://127.0.0.1:0/y"):
            self.assert_record(records[raw], status=None, error_kind="invalid_url", depth=1,
                               referrer=site.url("/"), tries=0)
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_FAILED_URLS)

    def test_invalid_links_to_other_hosts_are_checked_with_external(self):
        # Not fetched either way; without --external counted as not checked.
        bad = ("http://[::1/", "http://other.test:x/", "http://bad..host/")
        site = self.site({"/": html_page("/ok", *bad), "/ok": html_page()})
        crawler, records = self.crawl_site(site.url())
        self.assertEqual(set(records), {site.url("/"), site.url("/ok")})
        self.assertEqual(crawler.offsite_unchecked, set(bad))
        crawler, records = self.crawl_site(site.url(), external=True)
        for raw in bad:
            self.assert_record(records[raw], status=None, error_kind="invalid_url", depth=1,
                               referrer=site.url("/"), tries=0)
        self.assertEqual(crawler.offsite_unchecked, set())

    def test_links_to_self_and_fragments_only(self):
        site = self.site({"/a/b": html_page(
            "mailto:someone@example.test", "tel:0123456789", "javascript:void(0)", "JavaScript:alert(1)",
            "data:text/html,hi", "ftp://example.test/f", "#top", "", "/real",
            extra="<a>no href</a>"), "/real": html_page()})
        _, records = self.crawl_site(site.url("/a/b"))
        self.assertEqual(set(records), {site.url("/a/b"), site.url("/real")})
        self.assertEqual(site.targets(), ["/robots.txt", "/a/b", "/real"])
        self.assert_record(records[site.url("/a/b")], links=1, new_links=1)

    def test_whitespace_links_crawl_ends(self):
        page = Page('<a href="\n            /feeds/atom.xml\n          ">f</a>'
                    f'<a href=" http://127.0.0.1:{{port}}/other">o</a>'
                    '<a href="/pa\tge\n">p</a><a href="rel page">r</a>')
        site = self.site()
        page = Page(page.body.replace(b"{port}", str(site.port).encode()))
        site.routes = CatchAllRoutes(page)
        _, records = self.crawl_site(site.url("/x/y"))
        expected = ["/x/y", "/feeds/atom.xml", "/other", "/page", "/x/rel%20page",
                    "/feeds/rel%20page", "/rel%20page"]
        self.assertEqual(set(records), {site.url(p) for p in expected})
        self.assertEqual(collections.Counter(site.targets()), collections.Counter(["/robots.txt"] + expected))
        self.assertEqual(records[site.url("/x/y")].links, 4)
        for target in site.targets():
            self.assertNotRegex(target, r"(?i)%09|%0A|%0D|^/?%20|%20$")

    def test_links_followed_as_a_browser_follows_them(self):
        # The URL Standard's reading, on the wire: "\\" is "/", any number of
        # slashes before a host, IPv4 number forms, an empty query kept, a
        # lone "%" sent escaped; an invalid host is not in scope, and so not
        # recorded, like any link to another host.
        site = self.site()
        port = site.port
        site.routes = CatchAllRoutes(html_page())
        site.routes["/a/b"] = html_page(
            "\\c\\d", f"\\\\127.0.0.1:{port}\\e", f"///127.0.0.1:{port}/f",
            f"http:/0x7f.1:{port}/g", f"http://0x7f.1:{port}/g", f"http://2130706433:{port}/h",
            "/p?", "/p", "/100%",
            "\x01 /q \x1f", "http://bad..host/", "http://1.2.3.4.5/")
        _, records = self.crawl_site(site.url("/a/b"))
        # "http:/..." on an http: page is a relative link, as in a browser.
        expected = ["/a/b", "/c/d", "/e", "/f", f"/0x7f.1:{port}/g", "/g", "/h", "/p?", "/p",
                    "/100%", "/q"]
        self.assertEqual(set(records), {site.url(p) for p in expected})
        wire = ["/robots.txt"] + [p.replace("%", "%25") for p in expected]
        self.assertEqual(sorted(site.targets()), sorted(wire))
        self.assertEqual(records[site.url("/a/b")].links, 10)

    def test_equivalent_spellings_fetched_once(self):
        site = self.site()
        port = site.port
        site.routes["/"] = html_page(
            "/a b", "/a%20b", "/%7Euser", "/~user", "/x%3d%3d", "/x%3D%3D",
            f"HTTP://127.0.0.1:{port}/n", f"http://127.0.0.1:{port}/n#frag", "/n",
            "/a%2Fb", "/a/b", "/d/./e/../f", f"http://127.0.0.1:{port}/")
        _, records = self.crawl_site(site.url())
        expected = ["/a%20b", "/~user", "/x%3D%3D", "/n", "/a%2Fb", "/a/b", "/d/f"]
        self.assertEqual(collections.Counter(site.targets()),
                         collections.Counter(["/robots.txt", "/"] + expected))
        self.assertEqual(set(records), {site.url(p) for p in ["/"] + expected})
        self.assert_record(records[site.url("/")], links=8, new_links=7)
        self.assertFalse(any("%25" in t for t in site.targets()))

    def test_base_href_crawl(self):
        site = self.site({
            "/": html_page("/forum/index.php/mv/msg/7627/216142/0/", "/myself.html", "/two-bases.html"),
            "/forum/index.php/mv/msg/7627/216142/0/": Page(
                '<head><base href="/forum/"></head><a href="index.php/fa/89652/0/">x</a>'),
            "/myself.html": Page('<base href="myself.html"><a href="?param=value">x</a>'),
            "/two-bases.html": Page('<base href="/a/"><base href="/b/"><a href="c">x</a>'),
        })
        _, records = self.crawl_site(site.url())
        self.assertEqual(collections.Counter(site.targets()), collections.Counter([
            "/robots.txt", "/", "/forum/index.php/mv/msg/7627/216142/0/", "/myself.html",
            "/two-bases.html", "/forum/index.php/fa/89652/0/", "/myself.html?param=value", "/a/c"]))

    def test_max_depth(self):
        site = self.site({"/": html_page("/a"), "/a": html_page("/b"), "/b": html_page("/c")})
        crawler, records = self.crawl_site(site.url(), max_depth=1)
        self.assertEqual(set(records), {site.url(p) for p in ("/", "/a", "/b")})
        self.assertNotIn("/b", site.targets())
        self.assert_record(records[site.url("/b")], status=None, error_kind="max_depth", depth=2,
                           referrer=site.url("/a"), tries=0)
        self.assertFalse(records[site.url("/b")].failed)
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_OK)
        _, records = self.crawl_site(site.url(), max_depth=0)
        self.assertEqual(set(records), {site.url("/"), site.url("/a")})
        self.assert_record(records[site.url("/a")], error_kind="max_depth", depth=1)

    def crawl_with_a_slow_page(self, slow_path, routes=None, **options):
        """A crawl of routes (by default a site where / links to /a and /b,
        /a to /d, /b to /c and /c to /d) with every fetch of slow_path held
        5 s (virtual) before it starts; returns ({path: record}, the
        targets in request order). The site is self.slow_site, the crawler
        self.slow_crawler."""
        site = self.slow_site = self.site(routes or {
            "/": html_page("/a", "/b"), "/a": html_page("/d"), "/b": html_page("/c"),
            "/c": html_page("/d"), "/d": html_page()})
        options = dict(self.crawl_defaults, **dict(dict(robots=False), **options))
        crawler = self.slow_crawler = crawl.Crawler([site.url("/")], **options)
        fetch = crawler.client.fetch

        def late_fetch(url, *args, **kwargs):
            if url == site.url(slow_path):
                yield from crawl.sleep(5)
            return (yield from fetch(url, *args, **kwargs))

        crawler.client.fetch = late_fetch
        records = self.run_co(crawler.crawl())
        self.assertEqual(crawler.stats()["queued"], 0)
        return {url[len(site.url("")):]: record for url, record in records.items()}, site.targets()

    @virtual_clock(io_grace=0.2)
    def test_max_depth_counts_the_fewest_links_whichever_page_answers_first(self):
        # /d is 2 links from the root through /a, 3 through /b and /c; /a
        # answers last. The crawl goes one depth at a time, so /c is not
        # fetched before /a, and /d is first found on /a.
        records, targets = self.crawl_with_a_slow_page("/a", max_depth=2)
        self.assertEqual({path: (r.status, r.depth) for path, r in records.items()},
                         {"/": (200, 0), "/a": (200, 1), "/b": (200, 1), "/c": (200, 2), "/d": (200, 2)})
        self.assertEqual(records["/d"].referrer[-2:], "/a")
        self.assertEqual(sorted(targets[:3]), ["/", "/a", "/b"])
        # The same with /b slow: nothing waits for a slower path.
        records, _ = self.crawl_with_a_slow_page("/b", max_depth=2)
        self.assertEqual(records["/d"].depth, 2)
        # With one depth less, /d is beyond it whichever page answers first,
        # and the progress line never counts it (or /c) as queued.
        queued = {}

        def note_queued(record):
            queued[record.url[len(self.slow_site.url("")):]] = self.slow_crawler.stats()["queued"]

        records, targets = self.crawl_with_a_slow_page("/a", max_depth=1, on_record=note_queued)
        self.assert_record(records["/d"], status=None, error_kind="max_depth", depth=2)
        self.assert_record(records["/c"], status=None, error_kind="max_depth", depth=2)
        self.assertEqual(sorted(targets), ["/", "/a", "/b"])
        self.assertEqual(queued, {"/": 2, "/b": 0, "/a": 0, "/c": 0, "/d": 0})

    @virtual_clock(io_grace=0.2)
    def test_a_redirect_brings_a_url_waiting_for_a_later_depth_forward(self):
        # /new is found on /a one link deeper than /old, which redirects to
        # it later (it is slow): a redirect keeps its source's depth.
        routes = {"/": html_page("/old", "/a"), "/old": redirect("/new"), "/a": html_page("/new"),
                  "/new": html_page()}
        records, targets = self.crawl_with_a_slow_page("/old", routes, max_depth=1)
        # Its record says how it was reached at its depth.
        self.assert_record(records["/new"], status=200, depth=1, via="redirect",
                           referrer=self.slow_site.url("/old"))
        self.assertEqual(targets.count("/new"), 1)

    @virtual_clock(io_grace=0.2)
    def test_a_page_from_a_late_sitemap_brings_a_url_forward(self):
        # The root links to /m, which links to /x, and to another origin of
        # the site, whose robots.txt names a sitemap listing its /s (depth
        # 0, but found while depth 1 is crawled); /s links to /x too.
        # Whichever page answers first, /x is 1 link from a listed page.
        for slow in ("/m", "other /"):
            with self.subTest(slow=slow):
                other = self.site()
                site = self.site({"/": html_page("/m", other.url("/")), "/m": html_page("/x"),
                                  "/x": html_page()})
                other.routes.update({
                    "/": html_page(), "/s": html_page(site.url("/x")),
                    "/robots.txt": Page(f"User-agent: *\nSitemap: {other.url('/sitemap.xml')}\n",
                                        content_type="text/plain"),
                    "/sitemap.xml": Page(sitemap_xml(other.url("/s")),
                                         content_type="application/xml")})
                slow_url = site.url("/m") if slow == "/m" else other.url("/")
                crawler = crawl.Crawler([site.url("/")], **dict(
                    self.crawl_defaults, robots=True, sitemaps=True, max_depth=1))
                fetch = crawler.client.fetch

                def late_fetch(url, *args, **kwargs):
                    if url == slow_url:
                        yield from crawl.sleep(5)
                    return (yield from fetch(url, *args, **kwargs))

                crawler.client.fetch = late_fetch
                records = self.run_co(crawler.crawl())
                self.assert_record(records[other.url("/s")], status=200, depth=0, via="sitemap")
                self.assert_record(records[site.url("/x")], status=200, depth=1,
                                   referrer=other.url("/s"))
                self.assertEqual(crawler.stats()["queued"], 0)

    def test_urls_waiting_for_their_depth_are_recorded_when_interrupted(self):
        release = threading.Event()
        self.addCleanup(release.set)
        site = self.site({"/": html_page("/a", "/b"), "/a": html_page("/c"),
                          "/b": held_page(release)})
        crawler = crawl.Crawler([site.url("/")], **dict(self.crawl_defaults, robots=False,
                                                         max_depth=5, timeout=5))
        with self.assertRaises(TimeoutError):
            self.loop.run_until_complete(crawl.wait_for(crawler.crawl(), 0.5))
        release.set()
        # /b was being fetched; /c, found on /a, waited for /b's depth to be done.
        self.assertEqual({url[len(site.url("")):]: (r.status, r.error_kind, r.depth)
                          for url, r in crawler.records.items()},
                         {"/": (200, None, 0), "/a": (200, None, 1), "/b": (None, "interrupted", 1),
                          "/c": (None, "interrupted", 2)})
        self.assertEqual(crawler.stats()["queued"], 0)
        # Beyond --max-depth, a URL waiting would never have been fetched.
        release.clear()
        crawler = crawl.Crawler([site.url("/")], **dict(self.crawl_defaults, robots=False,
                                                         max_depth=1, timeout=5))
        with self.assertRaises(TimeoutError):
            self.loop.run_until_complete(crawl.wait_for(crawler.crawl(), 0.5))
        release.set()
        self.assertEqual(crawler.records[site.url("/c")].error_kind, "max_depth")

    def test_an_interruption_while_urls_beyond_max_depth_are_recorded_loses_none(self):
        # A KeyboardInterrupt can come from on_record (or a Ctrl-C under the
        # default SIGINT handler) while the URLs beyond --max-depth are
        # recorded: the rest are recorded on the way out.
        site = self.site({"/": html_page("/a", "/b", "/c")})

        def on_record(record):
            if record.url == site.url("/a"):
                raise KeyboardInterrupt

        crawler = crawl.Crawler([site.url("/")], **dict(self.crawl_defaults, robots=False,
                                                         max_depth=0, on_record=on_record))
        with self.assertRaises(KeyboardInterrupt):
            self.run_co(crawler.crawl())
        self.assertEqual({url[len(site.url("")):]: r.error_kind for url, r in crawler.records.items()},
                         {"/": None, "/a": "max_depth", "/b": "max_depth", "/c": "max_depth"})

    @virtual_clock(io_grace=0.2)
    def test_without_max_depth_no_page_waits_for_a_slower_one(self):
        # No depth to cut at: /c and /d are fetched while /a is held, and
        # /d's depth is that of the path that found it first.
        records, targets = self.crawl_with_a_slow_page("/a")
        self.assertEqual(targets[-1], "/a")
        self.assertEqual(records["/d"].depth, 3)

    def test_max_pages(self):
        site = self.site({"/": html_page("/a", "/b", "/c"), "/a": html_page("/d"),
                            "/b": html_page(), "/c": html_page()})
        _, records = self.crawl_site(site.url(), max_pages=2, max_tasks=1)
        self.assertEqual(set(records), {site.url(p) for p in ("/", "/a", "/b", "/c", "/d")})
        self.assertEqual(site.targets(), ["/robots.txt", "/", "/a"])
        for path in ("/b", "/c", "/d"):
            self.assert_record(records[site.url(path)], status=None, error_kind="max_pages", tries=0)
            self.assertFalse(records[site.url(path)].failed)

    def test_https_redirect_at_root_stays_in_scope(self):
        secure = self.site({"/": html_page("/a"), "/a": html_page()}, tls=True)
        plain = self.site({"/": redirect(secure.url("/"), 301)})
        _, records = self.crawl_site(plain.url(), cafile=CERT_FILE)
        self.assertEqual(set(records), {plain.url(), secure.url(), secure.url("/a")})
        self.assert_record(records[plain.url()], status=301, redirect=secure.url(), new_links=1)
        self.assert_record(records[secure.url()], status=200, referrer=plain.url(), depth=0)
        self.assertEqual(secure.targets(), ["/robots.txt", "/", "/a"])

    def test_tls_failure_not_retried(self):
        secure = self.site({"/": html_page()}, tls=True)
        crawler, records = self.crawl_site(secure.url(), robots=False, max_tries=3)
        self.assert_record(records[secure.url()], status=None, error_kind="tls", tries=1)
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_NOTHING_CRAWLED)

    def test_insecure_is_reported(self):
        secure = self.site({"/": html_page()}, tls=True)
        with self.assertLogs("crawl", "WARNING") as logs:
            crawler, records = self.crawl_site(secure.url(), verify=False)
        self.assertIn("TLS certificate verification is DISABLED", logs.output[0])
        self.assert_record(records[secure.url()], status=200)
        self.assertIn("WARNING: TLS certificate verification was disabled", crawl.summarize(crawler))

    def test_ipv6_literal_host(self):
        if not has_ipv6_loopback():
            self.skipTest("no IPv6 loopback")
        site = self.site(host="::1")
        site.routes["/"] = html_page("/next", f"http://[::1]:{site.port}/abs")
        site.routes["/next"] = html_page()
        site.routes["/abs"] = html_page()
        root = f"http://[::1]:{site.port}/"
        _, records = self.crawl_site(root)
        self.assertEqual(set(records), {root, root + "next", root + "abs"})
        self.assertEqual(collections.Counter(site.targets()),
                         collections.Counter(["/robots.txt", "/", "/next", "/abs"]))
        for request in site.requests:
            self.assertEqual(request["headers"]["Host"], f"[::1]:{site.port}")
        for record in records.values():
            self.assert_record(record, status=200, error=None)


class CrawlerRedirectTest(CrawlerTestCase):

    def test_a_root_that_redirects_to_another_host_brings_it_into_scope(self):
        client = FakeClient({
            "http://example.test/": redirect("https://www.moved.test/start", 301),
            "https://www.moved.test/start": html_page("/page", "http://moved.test/other",
                                                      "http://elsewhere.test/"),
            "https://www.moved.test/page": html_page("/start"),
            "http://moved.test/other": redirect("http://far.test/", 301),
        })
        with self.assertLogs("crawl", "INFO") as logs:
            crawler, records = self.crawl_site("http://example.test/", client=client, robots=False)
        self.assertEqual(set(records), {"http://example.test/", "https://www.moved.test/start",
                                        "https://www.moved.test/page", "http://moved.test/other"})
        self.assert_record(records["https://www.moved.test/start"], status=200, depth=0, new_links=2,
                           referrer="http://example.test/")
        self.assertIn("INFO:crawl:moved.test added to the scope: a root redirects there", logs.output)
        # Only a root's redirects widen the scope: a page's redirect to
        # far.test leaves it off-site (and counted as not checked).
        self.assertEqual(crawler.offsite_unchecked, {"http://elsewhere.test/", "http://far.test/"})
        self.assertFalse(crawler.in_scope("http://far.test/"))

    def test_each_redirect_status_followed(self):
        statuses = (301, 302, 303, 307, 308)
        routes = {"/": html_page(*[f"/r{s}" for s in statuses])}
        for s in statuses:
            routes[f"/r{s}"] = redirect(f"/t{s}", s)
            routes[f"/t{s}"] = html_page()
        site = self.site(routes)
        _, records = self.crawl_site(site.url())
        self.assertEqual(len(records), 11)
        for s in statuses:
            self.assert_record(records[site.url(f"/r{s}")], status=s, redirect=site.url(f"/t{s}"),
                               new_links=1, error=None, error_kind=None, depth=1, content_type=None,
                               size=0, links=0)
            self.assert_record(records[site.url(f"/t{s}")], status=200, referrer=site.url(f"/r{s}"),
                               depth=1, redirect=None)
            self.assertEqual(site.targets().count(f"/t{s}"), 1)

    def test_chain(self):
        site = self.site({"/": redirect("/c1", 301), "/c1": redirect("/c2"),
                            "/c2": redirect("/c3", 307), "/c3": redirect("/final", 308),
                            "/final": html_page()})
        crawler, records = self.crawl_site(site.url())
        self.assertEqual(site.targets(), ["/robots.txt", "/", "/c1", "/c2", "/c3", "/final"])
        self.assert_record(records[site.url("/final")], status=200, referrer=site.url("/c3"), depth=0)
        self.assert_record(records[site.url("/c2")], redirect=site.url("/c3"), referrer=site.url("/c1"))
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_OK)

    def test_loop(self):
        site = self.site({"/": html_page("/l1"), "/l1": redirect("/l2"), "/l2": redirect("/l1")})
        crawler, records = self.crawl_site(site.url())
        self.assertEqual(site.targets(), ["/robots.txt", "/", "/l1", "/l2"])
        self.assert_record(records[site.url("/l1")], status=302, error_kind=None, redirect=site.url("/l2"))
        self.assert_record(records[site.url("/l2")], status=302, error_kind="redirect_limit",
                           redirect=site.url("/l1"))
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_FAILED_URLS)

    def test_self_redirect_and_growing_chain(self):
        def login(handler):
            target = handler.path
            query = urllib.parse.urlsplit(target).query
            value = urllib.parse.unquote(query.partition("redirect=")[2])
            grown = urllib.parse.quote(value + target, safe="")
            return redirect("/login?redirect=" + grown)

        site = self.site({
            "/": html_page("/self", "/login?redirect=%2F", "/ok"),
            "/self": redirect("/self"),
            "/login": login,
            "/ok": html_page("/self", "/login?redirect=%2F"),
        })
        crawler, records = self.crawl_site(site.url(), max_redirect=5)
        targets = site.targets()
        self.assertLessEqual(targets.count("/self"), 6)
        self.assertEqual(targets.count("/self"), 1)
        login_targets = [t for t in targets if t.startswith("/login")]
        self.assertEqual(len(login_targets), 6)
        self.assertEqual(len(set(login_targets)), 6)
        self.assertEqual(targets.count("/ok"), 1)
        self.assert_record(records[site.url("/self")], status=302, error_kind="redirect_limit",
                           redirect=site.url("/self"))
        self.assert_record(records[site.url("/ok")], status=200, error=None)
        chain = [records[site.url(t)] for t in login_targets]
        for record in chain[:-1]:
            self.assert_record(record, status=302, error_kind=None, new_links=1)
        self.assert_record(chain[-1], status=302, error_kind="redirect_limit", new_links=0)
        self.assertIn(site.url(login_targets[0]), chain[-1].error)  # the hop list
        self.assertEqual(len(records), 3 + 6)
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_FAILED_URLS)

    def test_max_redirect_zero_follows_none(self):
        site = self.site({"/": html_page("/r"), "/r": redirect("/t", 301), "/t": html_page()})
        _, records = self.crawl_site(site.url(), max_redirect=0)
        self.assertEqual(site.targets(), ["/robots.txt", "/", "/r"])
        self.assertEqual(set(records), {site.url(), site.url("/r")})
        self.assert_record(records[site.url("/r")], status=301, redirect=site.url("/t"),
                           error_kind="redirect_limit", new_links=0)

    def test_redirect_out_of_scope_or_excluded_not_followed(self):
        site = self.site({"/": html_page("/out", "/excl"), "/excl": redirect("/private/y")})
        site.routes["/out"] = redirect(f"http://localhost:{site.port}/x")
        _, records = self.crawl_site(site.url(), exclude=["/private/"])
        self.assertEqual(set(records), {site.url(), site.url("/out"), site.url("/excl")})
        self.assert_record(records[site.url("/out")], status=302, redirect=f"http://localhost:{site.port}/x",
                           new_links=0, error_kind=None)
        self.assert_record(records[site.url("/excl")], status=302, redirect=site.url("/private/y"), new_links=0)
        self.assertEqual(sorted(site.targets()), ["/", "/excl", "/out", "/robots.txt"])

    def test_protocol_relative_location_with_raw_bytes(self):
        b = self.raw({"/": http_response("<a href='/b2'>x</a>", headers=[("Content-Type", "text/html")])})
        a = self.raw({"/": (b"HTTP/1.1 301 Moved Permanently\r\nLocation: //127.0.0.1:%d/?\xc5\xa0\r\n"
                            b"Content-Length: 0\r\n\r\n" % b.port)})
        _, records = self.crawl_site(a.url())
        target = f"http://127.0.0.1:{b.port}/?%C5%A0"
        self.assert_record(records[a.url()], status=301, redirect=target, error=None)
        self.assert_record(records[target], status=200, referrer=a.url(), error=None)
        self.assertEqual(a.targets, ["/robots.txt", "/"])
        self.assertEqual(b.targets[:2], ["/robots.txt", "/?%C5%A0"])
        self.assertEqual(set(records), {a.url(), target, b.url("/b2")})


class OffSiteClient(FakeClient):
    """A FakeClient that notes (method, url, time_limit) per fetch, answers
    HEAD with 405 for the URLs in head_refused (as some servers do), and
    takes `busy` seconds per fetch, counting the fetches running per host."""

    def __init__(self, pages, head_refused=(), busy=0.0):
        super().__init__(pages)
        self.head_refused = set(head_refused)
        self.busy = busy
        self.requests = []
        self.running = collections.Counter()
        self.most_running = collections.Counter()

    def fetch(self, url, method="GET", headers=None, read_body=None, time_limit=None):
        host = crawl.url_host(url)
        self.requests.append((method, url, time_limit))
        self.running[host] += 1
        self.most_running[host] = max(self.most_running[host], self.running[host])
        try:
            yield from crawl.sleep(self.busy)
            if method == "HEAD" and url in self.head_refused:
                return crawl.Response(url, 405, "Method Not Allowed", "HTTP/1.1", crawl.Fields())
            return (yield from super().fetch(url, method, headers, read_body, time_limit))
        finally:
            self.running[host] -= 1


class CrawlerExternalTest(CrawlerTestCase):

    SITE = {
        "http://example.test/": html_page("/a", "http://other.test/ok", "http://other.test/gone",
                                          "http://hostile.test/x", "http://dead.test/", "mailto:me@example.test"),
        "http://example.test/a": html_page("http://other.test/ok", "http://www.example.test/"),
        "http://www.example.test/": html_page(),
        "http://other.test/ok": html_page("http://other.test/deeper"),
        "http://hostile.test/x": Page("%PDF-1.7", content_type="application/pdf"),
        "http://dead.test/robots.txt": ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"),
        "http://dead.test/": ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"),
    }

    def test_off_site_links_are_checked_once_and_never_crawled(self):
        client = OffSiteClient(self.SITE, head_refused={"http://hostile.test/x"})
        crawler, records = self.crawl_site("http://example.test/", client=client, external=True)
        root = "http://example.test/"
        self.assertEqual(set(records), {root, "http://example.test/a", "http://www.example.test/",
                                        "http://other.test/ok", "http://other.test/gone",
                                        "http://hostile.test/x", "http://dead.test/"})
        self.assert_record(records["http://other.test/ok"], status=200, tries=1, links=0, size=0,
                           referrer=root, depth=1, error=None)
        self.assertEqual(crawler.seen["http://other.test/ok"], 2)  # linked from two pages, checked once
        # HEAD refused, then one GET that stops after its head.
        self.assert_record(records["http://hostile.test/x"], status=200, tries=2, size=0,
                           content_type="application/pdf", content_length=8, error=None)
        self.assert_record(records["http://other.test/gone"], status=404, tries=2, referrer=root)
        self.assertTrue(records["http://other.test/gone"].failed)
        # A dead host: its robots.txt is unreachable (refused: one try), so nothing is asked.
        self.assert_record(records["http://dead.test/"], status=None, error_kind="refused", tries=0,
                           referrer=root)
        self.assertTrue(records["http://dead.test/"].failed)
        off_site = [(method, url) for method, url, _ in client.requests if "example.test" not in url]
        self.assertEqual(sorted(off_site), sorted([
            ("GET", "http://other.test/robots.txt"), ("HEAD", "http://other.test/ok"),
            ("HEAD", "http://other.test/gone"), ("GET", "http://other.test/gone"),
            ("GET", "http://hostile.test/robots.txt"), ("HEAD", "http://hostile.test/x"),
            ("GET", "http://hostile.test/x"),
            ("GET", "http://dead.test/robots.txt")]))  # refused: not tried again
        # Off-site: the shorter timeout; on-site: the client's own.
        self.assertEqual({limit for method, url, limit in client.requests if "example.test" not in url}, {10.0})
        self.assertEqual({limit for method, url, limit in client.requests if "example.test" in url}, {None})
        self.assertEqual(crawler.offsite_unchecked, set())
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_FAILED_URLS)

    def test_without_external_off_site_links_are_counted(self):
        client = OffSiteClient(self.SITE)
        crawler, records = self.crawl_site("http://example.test/", client=client)
        self.assertEqual(set(records), {"http://example.test/", "http://example.test/a",
                                        "http://www.example.test/"})
        self.assertEqual(crawler.offsite_unchecked, {"http://other.test/ok", "http://other.test/gone",
                                                     "http://hostile.test/x", "http://dead.test/"})
        self.assertIn("Off-site: 4 links not checked (--external checks them)",
                      crawl.summarize(crawler))
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_OK)

    def test_off_site_tries_and_timeout_are_their_own(self):
        client = OffSiteClient({"http://example.test/": html_page("http://slow.test/"),
                                "http://slow.test/": TimeoutError("timed out")})
        crawler, records = self.crawl_site("http://example.test/", client=client, external=True,
                                           robots=False, external_tries=3, external_timeout=4.0)
        self.assert_record(records["http://slow.test/"], error_kind="timeout", tries=3)
        self.assertEqual([(m, limit) for m, url, limit in client.requests if url == "http://slow.test/"],
                         [("HEAD", 4.0)] * 3)  # a network error on HEAD: no GET after it
        client = crawl.Client(timeout=2.0)
        self.addCleanup(client.close)
        self.assertEqual(crawl.Crawler("example.test", client=client).external_timeout, 2.0)
        with self.assertRaises(ValueError):
            crawl.Crawler("example.test", client=client, external_tries=0)

    @virtual_clock
    def test_off_site_hosts_get_the_same_politeness(self):
        links = [f"http://other.test/{n}" for n in range(4)] + ["http://other.test/private/x"]
        pages = {"http://example.test/": html_page(*links),
                 "http://other.test/robots.txt": robots_page("User-agent: *\nCrawl-delay: 5\nDisallow: /private/\n")}
        pages.update((link, html_page()) for link in links[:4])
        client = OffSiteClient(pages)
        sent = fetch_times(client)
        crawler, records = self.crawl_site("http://example.test/", client=client, external=True,
                                           run_timeout=120)
        self.assert_record(records["http://other.test/private/x"], error_kind="robots", tries=0)
        heads = sorted(when for url, when in sent if url in links)
        self.assertEqual(len(heads), 4)
        for earlier, later in zip(heads, heads[1:]):
            self.assertGreaterEqual(later - earlier, 5.0 - 1e-9)

    @virtual_clock
    def test_at_most_two_checks_at_a_time_per_off_site_host(self):
        links = [f"http://{host}/{n}" for host in ("one.test", "two.test") for n in range(6)]
        client = OffSiteClient({"http://example.test/": html_page(*links)}, busy=1.0)
        crawler, records = self.crawl_site("http://example.test/", client=client, external=True,
                                           robots=False, max_tasks=10)
        self.assertEqual(len(records), 13)
        self.assertEqual(client.most_running["one.test"], crawl.EXTERNAL_PER_HOST)
        self.assertEqual(client.most_running["two.test"], crawl.EXTERNAL_PER_HOST)
        for link in links:  # HEAD, then GET: 404 both times
            self.assert_record(records[link], status=404, tries=2)

    def test_root_redirect_in_origin_and_path_scopes(self):
        pages = {"http://example.test/": redirect("https://example.test/docs/", 301),
                 "https://example.test/docs/": html_page("a", "/other", "https://example.test:8443/docs/b"),
                 "https://example.test/docs/a": html_page()}
        for scope, expected in (("origin", {"https://example.test/docs/a", "https://example.test/other"}),
                                ("path", {"https://example.test/docs/a"})):
            with self.subTest(scope=scope), self.assertLogs("crawl", "INFO") as logs:
                crawler, records = self.crawl_site("http://example.test/", client=FakeClient(pages),
                                                   robots=False, scope=scope)
                self.assertEqual(set(records) - {"http://example.test/", "https://example.test/docs/"},
                                 expected)
                added = "https://example.test" if scope == "origin" else "https://example.test/docs/"
                self.assertIn(f"INFO:crawl:{added} added to the scope: a root redirects there", logs.output)
                self.assertEqual(crawler.offsite_unchecked, {"https://example.test:8443/docs/b"}
                                 | ({"https://example.test/other"} if scope == "path" else set()))

    def test_off_site_servers_over_sockets(self):
        # "localhost" is another host than "127.0.0.1": a HEAD-hostile server
        # with a 30 MB file, and a host with nothing listening.
        def hostile(conn, request):
            if request.startswith(b"HEAD "):
                conn.send(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                return None
            conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                      b"Content-Length: 30000000\r\n\r\n" + bytes(1 << 20))
            drain_until_closed(conn)
            return "closed"

        other = self.raw({"/file": hostile})
        dead = f"http://localhost:{refused_port(self)}/"
        file_url = f"http://localhost:{other.port}/file"
        site = self.site({"/": html_page(file_url, dead)})
        crawler, records = self.crawl_site(site.url(), external=True)
        self.assert_record(records[file_url], status=200, tries=2, content_length=30000000, size=0,
                           content_type="application/octet-stream", error=None, referrer=site.url())
        self.assert_record(records[dead], status=None, error_kind="refused", referrer=site.url())
        self.assertEqual(records[dead].error, "connection refused (robots.txt unreachable)")
        self.assertEqual(other.targets, ["/robots.txt", "/file", "/file"])
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_FAILED_URLS)

    def test_off_site_redirects_are_recorded_not_followed(self):
        pages = {"http://example.test/": html_page("http://other.test/moved", "/r"),
                 "http://example.test/r": redirect("http://third.test/x", 301),
                 "http://other.test/moved": redirect("/new", 301)}
        client = OffSiteClient(pages)
        crawler, records = self.crawl_site("http://example.test/", client=client, external=True,
                                           robots=False)
        self.assert_record(records["http://other.test/moved"], status=301,
                           redirect="http://other.test/new", tries=1)
        self.assertNotIn("http://other.test/new", records)
        # An on-site redirect to another host: the target is checked like a link.
        self.assert_record(records["http://third.test/x"], status=404, referrer="http://example.test/r")

class CrawlerFragmentTest(CrawlerTestCase):

    def site_with_fragments(self):
        root = html_page("/a#intro", "/a#missing", "/a#Sec%20tion", "#self", "#top", "/doc.pdf#page=2",
                         "/gone#x", "/r#intro", "/r#nope", "/b#none", "http://other.test/#x",
                         extra='<a name="self">s</a><a href="/b#none">again</a>')
        return self.site({
            "/": root,
            "/a": Page('<h1 id="intro">i</h1><h2 id="Sec tion">s</h2><p class="missing" data-id="missing">not an anchor</p>'
                       '<a href="/#self">back</a> <a href="/b#none">b</a>'),
            "/b": html_page(),
            "/doc.pdf": Page(b"%PDF-1.7", content_type="application/pdf"),
            "/r": redirect("/a", 301),
        })

    def test_missing_anchors_get_their_own_records(self):
        site = self.site_with_fragments()
        crawler, records = self.crawl_site(site.url(), fragments=True)
        u = site.url
        broken = {url: record for url, record in records.items() if record.error_kind == "fragment"}
        self.assertEqual(set(broken), {u("/a#missing"), u("/r#nope"), u("/b#none")})
        self.assert_record(broken[u("/a#missing")], status=None, tries=0, referrer=u("/"), depth=1,
                           error=f"no id or <a name> 'missing' on {u('/a')}")
        self.assert_record(broken[u("/r#nope")], referrer=u("/"),
                           error=f"no id or <a name> 'nope' on {u('/a')}")
        self.assertTrue(broken[u("/b#none")].failed)
        # Linked from "/" and "/a": the report says so.
        self.assertEqual(crawl.format_record(broken[u("/b#none")]),
                         f"--- {u('/b#none')}  [fragment] no id or <a name> 'none' on {u('/b')}"
                         f"  <- linked from {u('/')} and 1 other page")
        # Pages are fetched once; fragments add no request.
        self.assertEqual(sorted(site.targets()), sorted(["/robots.txt", "/", "/a", "/b", "/doc.pdf", "/gone", "/r"]))
        self.assertEqual(len(records), 6 + 3)
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_FAILED_URLS)

    def test_off_by_default(self):
        site = self.site_with_fragments()
        crawler, records = self.crawl_site(site.url())
        self.assertEqual([r for r in records.values() if r.error_kind == "fragment"], [])
        self.assertEqual(crawler.anchors, {})

    def test_a_page_cut_short_is_not_checked_and_base_is_obeyed(self):
        long_page = Page('<a href="/long#far">self</a>' + "<p>filler</p>" * 200 + '<h1 id="far">f</h1>')
        site = self.site({"/": Page('<base href="/d/"><a href="x#here">x</a><a href="x#gone">y</a>'
                                    '<a href="/long#far">l</a>'),
                          "/d/x": Page('<div id="here"></div>'), "/long": long_page})
        _, records = self.crawl_site(site.url(), fragments=True, max_size=1000)
        self.assertEqual(records[site.url("/long")].error_kind, "cut_short")
        self.assertEqual([url for url, r in records.items() if r.error_kind == "fragment"], [site.url("/d/x#gone")])

    def test_a_missing_anchor_is_named_in_a_url_as_the_url_standard_writes_it(self):
        # The fragment percent-encode set: space, '"', '<', '>', '`' and
        # non-ASCII are encoded, the rest of printable ASCII is not.
        # Two spellings of one anchor are one record, linked from both pages.
        site = self.site({"/": Page('<a href="/#type de m\u00e9dium &quot;x&quot;">a</a>'
                                    '<a href="/#a[1]{b}|^`c">b</a><a href="/p">p</a>'),
                          "/p": Page('<a href="/#type%20de%20m%C3%A9dium%20%22x%22">a</a>'
                                     '<a href="/#zzz">z</a>')})
        crawler, records = self.crawl_site(site.url(), fragments=True)
        self.assertEqual(sorted(url for url, r in records.items() if r.error_kind == "fragment"),
                         [site.url("/#a[1]{b}|^%60c"), site.url("/#type%20de%20m%C3%A9dium%20%22x%22"),
                          site.url("/#zzz")])
        self.assertEqual(records[site.url("/#type%20de%20m%C3%A9dium%20%22x%22")].linked_from, 2)
        self.assertEqual(crawler.failed, 3)

    def test_page_anchors(self):
        # Every id and name attribute, and a superset of them: a false anchor
        # can hide a missing one, never report one that is there.
        text = ('<div id="one"><a name=two href="#one"><A\nID=\'three\' NAME="four">'
                '<img/id="five"><p data-id="no" valid="no" id="a&amp;b">'
                '<!-- <p id="in-a-comment"> --><input name="q">')
        self.assertEqual(crawl.page_anchors(text),
                         {"one", "two", "three", "four", "five", "a&b", "in-a-comment", "q"})
        self.assertEqual(crawl.page_anchors("<p>no anchors, id: none</p>"), set())


class CrawlerSitemapTest(CrawlerTestCase):

    def xml(self, body):
        return Page(body, content_type="application/xml")

    def test_robots_txt_sitemaps_an_index_and_gzip(self):
        site = self.site()
        u = site.url
        site.routes.update({
            "/robots.txt": robots_page("User-agent: *\nDisallow: /private\nSitemap: /index.xml\n"),
            "/": html_page("/a", "/b", "/index.xml"),
            "/a": html_page(), "/b": html_page(), "/orphan": html_page("/deep"), "/deep": html_page(),
            "/orphan2": Page(b"%PDF-1.7", content_type="application/pdf"),
            "/index.xml": self.xml(sitemap_xml(u("/s1.xml"), u("/s2.xml.gz"), index=True)),
            "/s1.xml": self.xml(sitemap_xml(u("/"), u("/a"), u("/orphan"), u("/gone"), u("/private"),
                                            "http://other.test/x", "/relative", u("/a#frag"))),
            "/s2.xml.gz": Page(gzip.compress(sitemap_xml(u("/b"), u("/orphan2"))),
                               content_type="application/gzip"),
        })
        # One worker: the root's links are found before the sitemaps are read.
        crawler, records = self.crawl_site(u(), sitemaps=True, max_tasks=1)
        index, s1, s2 = u("/index.xml"), u("/s1.xml"), u("/s2.xml.gz")
        self.assert_record(records[index], status=200, via="robots.txt", referrer=u("/robots.txt"),
                           depth=0, links=2, new_links=2, error=None)
        self.assert_record(records[s1], status=200, via="sitemap", referrer=index, links=8,
                           new_links=3, error=None)  # /orphan, /gone, /private
        self.assert_record(records[s2], status=200, via="sitemap", referrer=index, links=2,
                           content_type="application/gzip", error=None)
        self.assert_record(records[u("/orphan")], status=200, via="sitemap", referrer=s1, depth=0)
        self.assert_record(records[u("/deep")], status=200, via="link", referrer=u("/orphan"), depth=1)
        self.assert_record(records[u("/gone")], status=404, via="sitemap", referrer=s1,
                           referrers=[s1], linked_from=1)
        self.assert_record(records[u("/private")], error_kind="robots", via="sitemap")
        self.assert_record(records[u("/a")], via="link", referrer=u("/"))
        self.assertEqual(crawler.orphans(), [u("/gone"), u("/orphan"), u("/orphan2"), u("/private")])
        self.assertEqual((crawler.sitemaps_read, crawler.sitemap_ignored), (3, 2))
        self.assertNotIn("/sitemap.xml", site.targets())  # robots.txt names the sitemaps
        self.assertEqual(site.targets().count("/index.xml"), 1)  # a sitemap linked from a page too
        summary = crawl.summarize(crawler)
        self.assertIn("Sitemaps: 3 read, listing 7 URLs on the site; 2 entries ignored (off the "
                      "site, not valid URLs, or past a limit)", summary)
        self.assertIn("Orphans:  4 URLs in a sitemap that no page links to", summary)
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_FAILED_URLS)

    def test_sitemap_xml_when_robots_txt_names_none(self):
        listed = lambda site: self.xml(sitemap_xml(site.url("/"), site.url("/lonely")))
        for case in ("sitemap", "robots off", "missing", "html", "broken", "redirect"):
            with self.subTest(case=case):
                site = self.site({"/": html_page(), "/lonely": html_page()})
                if case in ("sitemap", "robots off"):
                    site.routes["/sitemap.xml"] = listed(site)
                elif case == "html":
                    site.routes["/sitemap.xml"] = html_page("/lonely")
                elif case == "broken":
                    site.routes["/sitemap.xml"] = self.xml("<urlset><url><loc>/x</loc></url>")
                elif case == "redirect":  # as WordPress does
                    site.routes["/sitemap.xml"] = redirect("/wp-sitemap.xml", 301)
                    site.routes["/wp-sitemap.xml"] = listed(site)
                crawler, records = self.crawl_site(site.url(), sitemaps=True,
                                                   robots=case != "robots off")
                guess = records[site.url("/sitemap.xml")]
                self.assertEqual((guess.via, guess.referrer, guess.depth), ("sitemap", None, 0))
                found = case in ("sitemap", "robots off", "redirect")
                self.assertEqual(site.url("/lonely") in records, found)
                self.assertEqual(crawler.orphans(), [site.url("/lonely")] if found else [])
                if case == "missing":
                    self.assert_record(guess, status=404, error_kind="no_sitemap", failed=False,
                                       error="no sitemap: robots.txt names none, and /sitemap.xml "
                                             "answered 404")
                elif case == "html":
                    self.assert_record(guess, status=200, error_kind="no_sitemap", failed=False)
                elif case == "broken":
                    self.assert_record(guess, status=200, error_kind="sitemap", failed=True,
                                       error_contains="not well-formed XML: no element found")
                elif case == "redirect":
                    self.assert_record(records[site.url("/wp-sitemap.xml")], status=200, via="redirect",
                                       links=2, new_links=1, error=None)
                self.assertEqual(crawl.exit_status(crawler),
                                 crawl.EXIT_FAILED_URLS if case == "broken" else crawl.EXIT_OK)

    def test_sitemaps_are_read_past_max_size_and_within_their_limits(self):
        pages = [f"/p{n}" for n in range(100)]
        site = self.site(dict((page, html_page()) for page in ["/"] + pages))
        site.routes["/sitemap.xml"] = self.xml(sitemap_xml(*map(site.url, pages)))
        crawler, records = self.crawl_site(site.url(), sitemaps=True, robots=False, max_size=1000)
        self.assertGreater(len(site.routes["/sitemap.xml"].body), 3000)
        self.assert_record(records[site.url("/sitemap.xml")], error=None, links=100, new_links=100)
        self.assertEqual(len(crawler.orphans()), 100)
        # A sitemap too large to read (the limit made small for the test).
        with mock.patch.object(crawl, "SITEMAP_MAX_BYTES", 2000):
            crawler, records = self.crawl_site(site.url(), sitemaps=True, robots=False)
        self.assert_record(records[site.url("/sitemap.xml")], status=200, error_kind="sitemap",
                           error="larger than 2000 bytes (the sitemaps.org limit): not read")
        self.assertEqual(len(records), 2)

    def test_indexes_are_followed_to_a_bounded_depth(self):
        site = self.site({"/": html_page(), "/a": html_page(), "/b": html_page()})
        u = site.url
        site.routes.update({
            "/robots.txt": robots_page(f"Sitemap: {u('/i0.xml')}\nSitemap: http://[bad/\n"),
            "/i0.xml": self.xml(sitemap_xml(u("/i1.xml"), u("/i1.xml"), index=True)),
            "/i1.xml": self.xml(sitemap_xml(u("/i2.xml"), u("/s1.xml"), index=True)),
            "/s1.xml": self.xml(sitemap_xml(u("/a"))),
            "/i2.xml": self.xml(sitemap_xml(u("/s2.xml"), index=True)),
            "/s2.xml": self.xml(sitemap_xml(u("/b"))),
        })
        with self.assertLogs("crawl", "INFO") as logs:
            crawler, records = self.crawl_site(u(), sitemaps=True)
        self.assertEqual(crawler.sitemap_files, {u("/i0.xml"): 0, u("/i1.xml"): 1, u("/i2.xml"): 2,
                                                 u("/s1.xml"): 2})
        self.assertIn(u("/a"), records)
        self.assertNotIn(u("/s2.xml"), records)
        self.assertEqual(crawler.sitemap_ignored, 2)  # the invalid URL and /s2.xml
        self.assertIn(f"INFO:crawl:{u('/i2.xml')}: a sitemap index 3 deep; its sitemaps were not read",
                      logs.output)

    def test_a_sitemap_fetched_before_it_is_known_as_one_says_so(self):
        site = self.site({"/": html_page()})
        u = site.url
        site.routes.update({"/robots.txt": robots_page("Sitemap: /index.xml\n"),
                            "/index.xml": self.xml(sitemap_xml(u("/s1.xml"), index=True)),
                            "/s1.xml": self.xml(sitemap_xml(u("/a")))})
        with self.assertLogs("crawl", "INFO") as logs:
            crawler, records = self.crawl_site([u(), u("/s1.xml")], sitemaps=True, max_tasks=1)
        self.assert_record(records[u("/s1.xml")], status=200, via="root", links=0, error=None)
        self.assertNotIn(u("/a"), records)
        self.assertIn(f"INFO:crawl:{u('/s1.xml')}: a sitemap, but fetched before it was known "
                      "as one: not read", logs.output)

    def test_off_by_default(self):
        site = self.site({"/": html_page(), "/sitemap.xml": self.xml(sitemap_xml("/x"))})
        crawler, records = self.crawl_site(site.url())
        self.assertEqual(site.targets(), ["/robots.txt", "/"])
        self.assertNotIn("Orphans", "\n".join(crawl.summarize(crawler)))

    def test_the_report_lists_orphans(self):
        site = self.site({"/": html_page("/linked"), "/linked": html_page(), "/lonely": html_page()})
        site.routes["/sitemap.xml"] = self.xml(sitemap_xml(*map(site.url, ["/linked", "/lonely"])))
        crawler, _ = self.crawl_site(site.url(), sitemaps=True, robots=False)
        out = io.StringIO()
        crawl.report(crawler, out)
        lines = out.getvalue().split("\n")
        start = lines.index("Orphans, in a sitemap but linked from no page:")
        self.assertEqual(lines[start + 1:start + 3], [f"    {site.url('/lonely')}", ""])
        self.assertIn("Orphans:  1 URL in a sitemap that no page links to", lines)
        out = io.StringIO()
        crawl.report(crawler, out, quiet=True)  # not failures: counted only
        self.assertNotIn(site.url("/lonely"), out.getvalue())


class CrawlerRetryTest(CrawlerTestCase):

    def gaps(self, site, target):
        times = [r["time"] for r in site.requests if r["target"] == target]
        return [later - earlier for earlier, later in zip(times, times[1:])]

    @virtual_clock
    def test_503_retried_with_backoff(self):
        site = self.site({"/": sequence_route(Page("busy", 503), Page("busy", 503),
                                                        Page("busy", 503), html_page())})
        crawler = crawl.Crawler(site.url(), backoff=1.0, robots=False)
        sent = fetch_times(crawler.client)
        records = self.run_co(crawler.crawl(), timeout=60)
        self.assert_record(records[site.url()], status=200, tries=4, error=None)
        self.assertEqual(len(self.gaps(site, "/")), 3)
        gaps = time_gaps(sent, site.url())  # on the loop's (virtual) clock: exactly the back-off
        self.assertEqual(len(gaps), 3)
        for gap, backoff in zip(gaps, (1.0, 2.0, 4.0)):
            self.assertAlmostEqual(gap, backoff, places=9)

    def test_429_retried_up_to_max_tries(self):
        site = self.site({"/": Page("slow down", 429)})
        crawler, records = self.crawl_site(site.url(), max_tries=3, robots=False)
        self.assertEqual(site.targets(), ["/", "/", "/"])
        self.assert_record(records[site.url()], status=429, tries=3)
        self.assertTrue(records[site.url()].failed)
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_FAILED_URLS)

    @virtual_clock
    def test_retry_after_honoured(self):
        site = self.site({"/": sequence_route(Page("busy", 503, headers=[("Retry-After", "30")]),
                                                        html_page())})
        crawler = crawl.Crawler(site.url(), robots=False, backoff=0.01)
        sent = fetch_times(crawler.client)
        records = self.run_co(crawler.crawl(), timeout=60)
        self.assert_record(records[site.url()], status=200, tries=2)
        self.assertEqual(len(self.gaps(site, "/")), 1)
        [gap] = time_gaps(sent, site.url())
        self.assertAlmostEqual(gap, 30.0, places=9)

    @virtual_clock
    def test_retry_after_capped(self):
        site = self.site({"/": sequence_route(Page("busy", 429, headers=[("Retry-After", "3600")]),
                                                        html_page())})
        crawler = crawl.Crawler(site.url(), robots=False, backoff=0.01)  # max_retry_after: 60 by default
        sent = fetch_times(crawler.client)
        records = self.run_co(crawler.crawl(), timeout=600)
        self.assert_record(records[site.url()], status=200, tries=2)
        self.assertEqual(len(self.gaps(site, "/")), 1)
        [gap] = time_gaps(sent, site.url())
        self.assertAlmostEqual(gap, 60.0, places=9)

    def test_other_statuses_final(self):
        site = self.site({"/": html_page("/500", "/404", "/403"), "/500": Page("err", 500),
                            "/403": Page("no", 403)})
        _, records = self.crawl_site(site.url(), robots=False)
        for path, status in (("/500", 500), ("/404", 404), ("/403", 403)):
            self.assertEqual(site.targets().count(path), 1)
            self.assert_record(records[site.url(path)], status=status, tries=1, error=None)
            self.assertTrue(records[site.url(path)].failed)

    @virtual_clock
    def test_network_errors_retried(self):
        def script(conn):
            request = conn.read_request()
            if request is None:
                return
            if conn.number <= 2:
                conn.reset()
                return
            conn.send(http_response("<p>ok</p>", headers=[("Content-Type", "text/html")]))
            conn.read_request()

        server = RawServer(script)
        self.addCleanup(server.close)
        crawler = crawl.Crawler(server.url(), robots=False, backoff=1.0, soft_404=False)
        sent = fetch_times(crawler.client)
        records = self.run_co(crawler.crawl(), timeout=60)
        self.assert_record(records[server.url()], status=200, tries=3, error=None)
        self.assertEqual(server.connections, 3)
        gaps = time_gaps(sent, server.url())
        self.assertEqual(len(gaps), 2)
        self.assertAlmostEqual(gaps[0], 1.0, places=9)
        self.assertAlmostEqual(gaps[1], 2.0, places=9)

    def test_network_errors_only_up_to_max_tries(self):
        def script(conn):
            if conn.read_request() is not None:
                conn.reset()

        server = RawServer(script)
        self.addCleanup(server.close)
        crawler, records = self.crawl_site(server.url(), robots=False, max_tries=2)
        self.assert_record(records[server.url()], status=None, error_kind="reset", tries=2)
        self.assertEqual(server.connections, 2)
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_NOTHING_CRAWLED)

    def test_connection_refused_is_not_retried(self):
        # As wget and curl: nothing listens there, and asking again will not
        # change that. Other network errors keep their retries (the table).
        self.assertFalse(crawl.ERROR_KINDS["refused"].retried)
        url = f"http://127.0.0.1:{refused_port(self)}/"
        crawler, records = self.crawl_site(url, robots=False, max_tries=3)
        self.assertEqual(list(records), [url])
        self.assert_record(records[url], status=None, error_kind="refused", tries=1, depth=0,
                           error="connection refused")
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_NOTHING_CRAWLED)

    @virtual_clock(io_grace=0.05)  # the first connection is silent on purpose
    def test_timeout_retried(self):
        def script(conn):
            request = conn.read_request()
            if request is None:
                return
            if conn.number == 1:
                conn.read_request(timeout=10)  # say nothing until the client gives up
                return
            conn.send(http_response("<p>ok</p>", headers=[("Content-Type", "text/html")]))
            conn.read_request()

        server = RawServer(script)
        self.addCleanup(server.close)
        crawler = crawl.Crawler(server.url(), robots=False, backoff=1.0, timeout=30, soft_404=False)
        sent = fetch_times(crawler.client)
        records = self.run_co(crawler.crawl(), timeout=60)
        self.assert_record(records[server.url()], status=200, tries=2)
        self.assertEqual(server.connections, 2)
        # The first try waits out its 30 s timeout (virtual), then the back-off.
        [gap] = time_gaps(sent, server.url())
        self.assertAlmostEqual(gap, 31.0, places=9)


class CrawlerConcurrencyTest(CrawlerTestCase):

    def test_never_above_max_tasks(self):
        routes = {"/": html_page(*[f"/p{i}" for i in range(12)])}
        for i in range(12):
            routes[f"/p{i}"] = slow_route(0.1, html_page())
        site = self.site(routes)
        crawler, records = self.crawl_site(site.url(), max_tasks=3, robots=False)
        self.assertEqual(len(records), 13)
        self.assertEqual(site.peak_in_flight, 3)
        self.assertEqual(crawler.in_progress, 0)

    def test_one_task(self):
        routes = {"/": html_page(*[f"/p{i}" for i in range(4)])}
        for i in range(4):
            routes[f"/p{i}"] = slow_route(0.05, html_page())
        site = self.site(routes)
        _, records = self.crawl_site(site.url(), max_tasks=1)
        self.assertEqual(site.peak_in_flight, 1)
        self.assertEqual(site.targets(), ["/robots.txt", "/", "/p0", "/p1", "/p2", "/p3"])

    def test_internal_error_in_follow_links(self):
        site = self.site({"/": html_page("/boom", "/fine"), "/boom": html_page("/lost"),
                            "/fine": html_page("/after")})
        original = crawl.Crawler._follow_links

        def flaky(self, record, response, depth):
            if record.url.endswith("/boom"):
                raise RuntimeError("injected")
            return original(self, record, response, depth)

        with mock.patch.object(crawl.Crawler, "_follow_links", flaky), \
                mock.patch.object(crawl.logger, "exception"):
            crawler, records = self.crawl_site(site.url(), max_tasks=2)
        self.assertEqual(set(records), {site.url(p) for p in ("/", "/boom", "/fine", "/after")})
        boom = records[site.url("/boom")]
        self.assert_record(boom, error_kind="internal", referrer=site.url("/"))
        self.assertIn("RuntimeError", boom.error)
        self.assertIn("injected", boom.error)
        self.assertTrue(boom.failed)
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_FAILED_URLS)

    def test_internal_error_from_client(self):
        pages = {"http://example.test/": html_page("/a", "/b", "/c"),
                 "http://example.test/a": html_page(), "http://example.test/b": RuntimeError("client bug"),
                 "http://example.test/c": html_page()}
        client = FakeClient(pages)
        crawler, records = self.crawl_site("example.test", client=client, max_tries=3)
        self.assertEqual(set(records), set(pages))
        self.assert_record(records["http://example.test/b"], status=None, error_kind="internal",
                           error="unexpected RuntimeError: client bug", tries=1)
        self.assertEqual(client.fetched.count("http://example.test/b"), 1)
        self.assert_record(records["http://example.test/c"], status=200)

    def test_on_record_callback(self):
        site = self.site({"/": html_page("/a", "/b"), "/a": html_page("/c")})
        seen = []
        crawler, records = self.crawl_site(site.url(), on_record=seen.append)
        self.assertEqual([r.url for r in seen], list(records))
        self.assertEqual(len(seen), 4)
        self.assertEqual(len({r.url for r in seen}), 4)
        for record in seen:  # the same fields; crawler.records gives a snapshot
            self.assertEqual(records[record.url].as_dict(), record.as_dict())


class CrawlerBodyTest(CrawlerTestCase):

    def test_huge_and_binary_bodies(self):  # max_size 1 MiB
        block = b"\0" + os.urandom(256 * 1024 - 1)
        total = 50 * 1024 * 1024

        def send_big(conn, request, head):
            conn.send(head)
            try:
                for _ in range(total // len(block)):
                    conn.send(block)
            except OSError:
                pass
            conn.close()
            return "closed"

        big_head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n"
        cl_head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % total)
        server = self.raw({
            "/": http_response("<a href='/big'>b</a><a href='/big-cl'>c</a><a href='/normal'>n</a>",
                               headers=[("Content-Type", "text/html")]),
            "/big": lambda conn, request: send_big(conn, request, big_head),
            "/big-cl": lambda conn, request: send_big(conn, request, cl_head),
            "/normal": http_response("<a href='/end'>e</a>", headers=[("Content-Type", "text/html")]),
            "/end": http_response("<p>end</p>", headers=[("Content-Type", "text/html")]),
        })
        try:
            import resource
            peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        except ImportError:
            resource = None
        started = time.monotonic()
        crawler, records = self.crawl_site(server.url(), max_size=1024 * 1024, max_tasks=4)
        self.assertLess(time.monotonic() - started, 10)
        self.assertEqual(set(records), {server.url(p) for p in ("/", "/big", "/big-cl", "/normal", "/end")})
        # Large pages are cut short, not failures; binary data yields no links.
        self.assert_record(records[server.url("/big")], status=200, error_kind="cut_short", links=0,
                           size=1024 * 1024, content_length=None)
        self.assert_record(records[server.url("/big-cl")], status=200, error_kind="cut_short", links=0,
                           size=1024 * 1024, content_length=total)
        self.assert_record(records[server.url("/normal")], status=200, error=None, links=1)
        self.assert_record(records[server.url("/end")], status=200, error=None, referrer=server.url("/normal"))
        if resource is not None:
            grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before
            self.assertLess(grown_kib, 40 * 1024)
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_OK)

    def test_files_are_checked_not_downloaded(self):
        # A valid 30 MB download is not a failure and is not downloaded: its
        # head gives the record; a short 404 body is drained (the connection
        # serves the next request), the long file's connection is closed.
        total = 30 * 1000 * 1000
        sent = []

        def send_file(conn, request):
            conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/zip\r\n"
                      b"Content-Length: %d\r\n\r\n" % total)
            block, count = bytes(65536), 0
            try:
                while count < total:
                    conn.send(block)
                    count += len(block)
            except OSError:
                pass
            sent.append(count)
            conn.close()
            return "closed"

        server = self.raw({
            "/": http_response("<a href='/file.zip'>z</a> <a href='/gone'>g</a> <a href='/a.html'>a</a>",
                               headers=[("Content-Type", "text/html")]),
            "/file.zip": send_file,
            "/gone": http_response("<p>gone</p>" * 100, "404 Not Found", headers=[("Content-Type", "text/html")]),
            "/a.html": http_response("<p>a</p>", headers=[("Content-Type", "text/html")]),
        })
        crawler, records = self.crawl_site(server.url(), max_tasks=1, robots=False)
        self.assert_record(records[server.url("/file.zip")], status=200, content_type="application/zip",
                           content_length=total, size=0, error=None, tries=1)
        self.assert_record(records[server.url("/gone")], status=404, content_length=1100, size=0)
        self.assert_record(records[server.url("/a.html")], status=200, size=8)
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_FAILED_URLS)  # the 404 only
        self.assertEqual(crawler.failed, 1)
        server.close()
        self.assertLess(sent[0], total // 2)  # what socket buffers took in, not the file
        # One connection for "/", "/gone", "/a.html" (in some order) and one
        # after the file's, or one more when the file came before "/gone".
        self.assertLessEqual(server.connections, 2)

    def test_large_page_is_cut_short_and_its_links_followed(self):
        page = "<a href='/early'>e</a>" + "<p>filler</p>" * 1000 + "<a href='/late'>l</a>"
        site = self.site({"/": Page(page), "/early": html_page(), "/late": html_page()})
        crawler, records = self.crawl_site(site.url(), max_size=1000, robots=False)
        self.assertEqual(set(records), {site.url("/"), site.url("/early")})
        self.assert_record(records[site.url("/")], status=200, error_kind="cut_short", size=1000,
                           content_length=len(page), links=1, new_links=1,
                           error_contains="cut short: larger than --max-size")
        self.assertTrue(records[site.url("/")].is_page)
        self.assertEqual(crawler.pages, 2)
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_OK)

    def test_binary_html_under_the_limit(self):
        rng = random.Random(31)
        noise = bytes(rng.randrange(256) for _ in range(20000))
        site = self.site({"/": html_page("/nul", "/noise"), "/nul": Page(b"\0" + noise),
                            "/noise": Page(noise.replace(b"\0", b"x").replace(b"<", b"x")
                                           + b"<a href='/tail'>t</a>"),
                            "/tail": html_page()})
        _, records = self.crawl_site(site.url())
        self.assert_record(records[site.url("/nul")], status=200, error=None, links=0, size=20001)
        self.assert_record(records[site.url("/noise")], status=200, error=None)
        self.assertIn(site.url("/tail"), records)


class FaultInjectionTest(FaultCase):
    """Every fault ends in one record with the right error kind and tries
    (network trouble and timeouts retried max_tries times; TLS, DNS and
    protocol errors not), and leaves no socket open."""

    def test_reset_while_reading_the_status_line(self):
        server = self.scripted(answer_then_reset(b"HTTP/1.1 2"))
        record = self.crawl_one(server.url(), max_tries=3)
        self.assert_record(record, status=None, error_kind="reset", tries=3,
                           error_contains="connection reset")
        self.assertEqual(server.connections, 3)
        self.assert_no_leaks()

    def test_reset_while_reading_the_header_section(self):
        server = self.scripted(answer_then_reset(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Le"))
        record = self.crawl_one(server.url(), max_tries=3)
        self.assert_record(record, status=None, error_kind="reset", tries=3,
                           error_contains="connection reset")
        self.assertEqual(server.connections, 3)
        self.assert_no_leaks()

    def test_reset_while_reading_the_body(self):
        server = self.scripted(answer_then_reset(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1000\r\n\r\n"
            + b"<p>" * 40))
        record = self.crawl_one(server.url(), max_tries=3)
        self.assert_record(record, status=None, error_kind="reset", tries=3,
                           error_contains="connection reset")
        self.assertEqual(server.connections, 3)
        self.assert_no_leaks()

    def test_server_closes_right_after_accept(self):
        # No byte of a response: the same trouble as a reset, whether the
        # kernel ends the connection with a FIN or (the request having
        # arrived) an RST; like http.client's RemoteDisconnected, it is a
        # ConnectionResetError, worth another try.
        server = self.scripted(lambda conn: conn.close())
        record = self.crawl_one(server.url(), max_tries=3)
        self.assert_record(record, status=None, error_kind="reset", tries=3)
        self.assertEqual(server.connections, 3)
        self.assert_no_leaks()

    def test_server_sends_fin_before_any_byte(self):
        # The deterministic FIN variant: the server shuts its side at once,
        # then reads the request so that no RST is ever sent.
        def script(conn):
            conn.sock.shutdown(socket.SHUT_WR)
            drain_until_closed(conn)
        server = self.scripted(script)
        record = self.crawl_one(server.url(), max_tries=2)
        self.assert_record(record, status=None, error_kind="reset", tries=2)
        self.assertEqual(server.connections, 2)
        self.assert_no_leaks()

    @virtual_clock(io_grace=0.05)  # the server never answers: no point waiting long
    def test_server_accepts_and_never_answers(self):
        server = self.scripted(answer_then_wait(b""))
        started = self.loop.time()
        record = self.crawl_one(server.url(), max_tries=2, timeout=5)
        elapsed = self.loop.time() - started
        self.assert_record(record, status=None, error_kind="timeout", tries=2,
                           error_contains="timed out after 5 s")
        self.assertEqual(server.connections, 2)
        self.assertAlmostEqual(elapsed, 5 + 0.01 + 5, places=9)  # two tries and the back-off between
        self.assert_no_leaks()

    def test_trickling_server_cannot_extend_the_total_deadline(self):
        # A byte every 20 ms never trips the idle read timeout: the total
        # deadline (timeout) ends each try.
        def script(conn):
            if conn.read_request() is None:
                return
            try:
                conn.send(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                for _ in range(500):
                    conn.send(b"a")
                    time.sleep(0.02)
            except OSError:
                pass
        server = self.scripted(script)
        started = time.monotonic()  # the real clock: the bytes keep coming in real time
        record = self.crawl_one(server.url(), max_tries=2, timeout=0.2)
        self.assert_record(record, status=None, error_kind="timeout", tries=2,
                           error_contains="timed out after 0.2 s")
        self.assertLess(time.monotonic() - started, 3.0)
        self.assert_no_leaks()

    def test_server_that_is_not_http_sends_a_banner(self):
        server = self.scripted(answer_then_wait(b"SSH-2.0-OpenSSH_9.6\r\n",
                                                              read_first=False))
        record = self.crawl_one(server.url(), max_tries=3)
        self.assert_record(record, status=None, error_kind="protocol", tries=1,
                           error_contains="invalid status line")
        self.assertIn("SSH-2.0-OpenSSH_9.6", record.error)
        self.assertEqual(server.connections, 1)
        self.assert_no_leaks()

    def test_server_that_is_not_http_sends_binary(self):
        rng = random.Random(6)
        garbage = bytes(rng.randrange(256) for _ in range(3000)) + b"\r\n"
        self.assertFalse(garbage.startswith(b"HTTP/"))
        server = self.scripted(answer_then_wait(garbage))
        record = self.crawl_one(server.url(), max_tries=3)
        self.assert_record(record, status=None, error_kind="protocol", tries=1,
                           error_contains="invalid status line")
        self.assertEqual(server.connections, 1)
        self.assert_no_leaks()

    def test_tls_spoken_to_a_plain_http_port(self):
        site = self.site({"/": html_page()})
        url = site.url("/").replace("http://", "https://")
        record = self.crawl_one(url, max_tries=3)
        self.assert_record(record, status=None, error_kind="tls", tries=1)
        self.assertTrue(record.error.startswith("TLS"), record.error)
        self.assertEqual(site.requests, [], "no request reached the plain server")
        self.assert_no_leaks()

    def test_plain_http_spoken_to_a_tls_port(self):
        # The TLS server resets the connection it cannot read a handshake
        # from: the client sees a reset and no byte of a response.
        site = self.site({"/": html_page()}, tls=True)
        url = site.url("/").replace("https://", "http://")
        record = self.crawl_one(url, max_tries=3)
        self.assert_record(record, status=None, error_kind="reset", tries=3)
        self.assertEqual(site.requests, [])
        self.assert_no_leaks()

    def test_certificate_that_does_not_verify(self):
        site = self.site({"/": html_page()}, tls=True)
        record = self.crawl_one(site.url("/"), max_tries=3)  # default verification
        self.assert_record(record, status=None, error_kind="tls", tries=1,
                           error_contains="certificate verify failed")
        self.assertRegex(record.error, r"self.signed certificate")
        self.assertEqual(site.requests, [])
        self.assert_no_leaks()

    def test_certificate_verifies_with_its_ca(self):
        site = self.site({"/": html_page()}, tls=True)
        record = self.crawl_one(site.url("/"), max_tries=3, cafile=CERT_FILE)
        self.assert_record(record, status=200, error_kind=None, tries=1)
        self.assert_no_leaks()

    def test_host_that_does_not_resolve(self):
        tries = dns_tries_for_invalid_names(3)
        if tries is None:
            self.skipTest("this resolver answers for names under .invalid")
        record = self.crawl_one("http://crawl-py-test.invalid/", max_tries=3)
        self.assert_record(record, status=None, error_kind="dns", tries=tries,
                           error_contains="cannot resolve host")
        # The host's problem first (robots.txt was asked for first, and failed).
        self.assertTrue(record.error.startswith("cannot resolve host crawl-py-test.invalid: "), record.error)
        self.assert_no_leaks()

    def test_connection_refused(self):
        url = f"http://127.0.0.1:{refused_port(self)}/"
        record = self.crawl_one(url, max_tries=3)
        self.assert_record(record, status=None, error_kind="refused", tries=1)
        self.assert_no_leaks()

    def test_truncated_gzip_body_is_a_decoding_error(self):
        # Content-Length is honoured but the gzip stream inside ends half
        # way: the body is not whole and must not pass for a good page.
        body = gzip.compress(b"<html><body>" + bytes(range(256)) * 100 + b"</body></html>")
        cut = body[:len(body) // 2]
        server = self.raw({"/": http_response(
            cut, headers=[("Content-Type", "text/html"), ("Content-Encoding", "gzip")])})
        record = self.crawl_one(server.url(), max_tries=3)
        self.assert_record(record, status=200, error_kind="decoding", tries=1)
        self.assert_no_leaks()

    def test_out_of_descriptors_with_nothing_in_flight_is_an_error(self):
        class NoDescriptorsClient(crawl.Client):
            def fetch(self, url, method="GET", headers=None, **options):
                raise OSError(errno.EMFILE, "Too many open files")
                yield

        crawler = crawl.Crawler(["http://h.test/"], robots=False, client=NoDescriptorsClient())
        records = self.run_co(crawler.crawl())
        record = records["http://h.test/"]
        self.assertEqual((record.error_kind, record.tries), ("network", 0))
        self.assertIn("Too many open files", record.error)


class FaultServerDiesTest(FaultCase):

    def test_server_dies_in_the_middle_of_a_crawl(self):
        # "/" links to "/a"; "/a" links to 30 pages and shuts the server
        # down (listener closed) before answering. Every one of the 30
        # queued URLs ends with one record: refused, not retried.
        links = [f"/p{i}" for i in range(30)]
        site = None

        def dying(handler):
            site.server.shutdown()
            site.server.server_close()
            return html_page(*links)

        site = self.site({"/": html_page("/a"), "/a": dying}, protocol="HTTP/1.0")
        started = time.monotonic()
        crawler, records = self.crawl_site([site.url("/")], max_tasks=5, max_tries=3)
        self.assertLess(time.monotonic() - started, 5.0, "the crawl ends promptly")
        self.assertEqual(sorted(records), sorted(site.url(t) for t in ["/", "/a"] + links))
        self.assert_record(records[site.url("/")], status=200, error_kind=None, tries=1)
        self.assert_record(records[site.url("/a")], status=200, error_kind=None, tries=1)
        for link in links:
            self.assert_record(records[site.url(link)], status=None, error_kind="refused", tries=1)
        self.assertEqual(site.targets(), ["/", "/a"])
        self.assertEqual(crawler.frontier.unfinished, 0)
        self.assert_no_leaks()


class FaultLeakTest(FaultCase):

    def test_no_descriptor_or_task_left_after_clean_and_faulty_crawls(self):
        pages = {"/": html_page(*[f"/p{i}" for i in range(40)])}
        for i in range(40):
            pages[f"/p{i}"] = html_page("/", f"/p{(i + 1) % 40}")
        site = self.site(pages)
        tls_site = self.site(pages, tls=True)
        raw = self.scripted(answer_then_reset(b"HTTP/1.1 200 OK\r\n"))
        # clean, with robots.txt and keep-alive (connections pooled)
        _, records = self.crawl_site([site.url("/")], robots=True, max_tasks=8)
        self.assertEqual(len(records), 41)
        self.assertTrue(all(r.status == 200 for r in records.values()))
        # clean over TLS
        _, records = self.crawl_site([tls_site.url("/")], max_tasks=8, cafile=CERT_FILE)
        self.assertEqual(len(records), 41)
        self.assertTrue(all(r.status == 200 for r in records.values()))
        # faulty: resets, a certificate that does not verify, a refused port
        refused = f"http://127.0.0.1:{refused_port(self)}/"
        _, records = self.crawl_site([raw.url("/"), tls_site.url("/"), refused], max_tries=2)
        self.assertEqual({url: r.error_kind for url, r in records.items()},
                         {raw.url("/"): "reset", tls_site.url("/"): "tls", refused: "refused"})
        self.assert_no_leaks()

    def test_no_descriptor_or_task_left_after_an_interrupted_crawl(self):
        release = threading.Event()
        self.addCleanup(release.set)
        pages = {"/": html_page(*[f"/p{i}" for i in range(20)])}
        for i in range(20):
            pages[f"/p{i}"] = held_page(release) if i % 2 else html_page()
        site = self.site(pages)
        crawler = crawl.Crawler([site.url("/")], robots=False, max_tasks=4, timeout=5)
        with self.assertRaises(TimeoutError):
            self.loop.run_until_complete(crawl.wait_for(crawler.crawl(), 0.5))
        self.loop.run_until_complete(crawl.sleep(0))
        self.assertTrue(crawler.interrupted)
        # The 4 workers are held by /p1, /p3, /p5 and /p7; the even pages
        # before them are done; everything else was still queued.
        got = {url: (r.status, r.error_kind) for url, r in crawler.records.items()}
        want = {site.url("/"): (200, None)}
        for i in range(20):
            done = i % 2 == 0 and i < 8
            want[site.url(f"/p{i}")] = (200, None) if done else (None, "interrupted")
        self.assertEqual(got, want)
        release.set()
        self.assert_no_leaks()


class FaultNothingLostTest(FaultCase):

    def test_every_url_seen_or_refused_has_exactly_one_record(self):
        dead = f"http://127.0.0.1:{refused_port(self)}/dead"

        def reset(conn, request):
            conn.reset()
            return "closed"

        def silent(conn, request):
            drain_until_closed(conn)
            return "closed"

        links = ["/ok", "/e500", "/e502", "/busy", "/reset", "/slow", "/redir", "/missing",
                 dead, "http://elsewhere.invalid/x", "ftp://127.0.0.1/f", "mailto:a@b.c",
                 "/ok#again"]
        close = [("Connection", "close")]  # one request per connection: exact counts
        html = close + [("Content-Type", "text/html")]
        table = {
            "/": http_response(html_page(*links).body, headers=html),
            "/ok": http_response("<p>ok</p>", headers=html),
            "/e500": http_response("boom", "500 Internal Server Error", close),
            "/e502": http_response("bad gateway", "502 Bad Gateway", close),
            "/busy": http_response("", "503 Service Unavailable", close + [("Retry-After", "0")]),
            "/reset": reset,
            "/slow": silent,
            "/redir": http_response("", "302 Found", close + [("Location", "/target")]),
            "/target": http_response("<p>here</p>", headers=html),
            "/missing": http_response("not here", "404 Not Found", close),
        }
        server = self.raw(table)
        crawler, records = self.crawl_site([server.url("/")], max_tasks=4, max_tries=2,
                                           timeout=0.3)
        seen = {server.url(target) for target in server.targets} | {dead}  # served or refused
        self.assertEqual(set(records), seen)
        expected = {
            "/": (200, None, 1), "/ok": (200, None, 1), "/e500": (500, None, 1),
            "/e502": (502, None, 1), "/busy": (503, None, 2), "/reset": (None, "reset", 2),
            "/slow": (None, "timeout", 2), "/redir": (302, None, 1), "/target": (200, None, 1),
            "/missing": (404, None, 1),
        }
        got = {url: (r.status, r.error_kind, r.tries) for url, r in records.items()}
        want = {server.url(t): value for t, value in expected.items()}
        want[dead] = (None, "refused", 1)
        self.assertEqual(got, want)
        self.assertEqual(records[server.url("/redir")].redirect, server.url("/target"))
        self.assertEqual(collections.Counter(server.targets), collections.Counter({
            "/": 1, "/ok": 1, "/e500": 1, "/e502": 1, "/busy": 2, "/reset": 2, "/slow": 2,
            "/redir": 1, "/target": 1, "/missing": 1}))
        self.assertEqual(server.connections, len(server.targets))
        self.assertEqual(crawler.stats()["queued"], 0)
        self.assert_no_leaks()

    def test_a_second_cancel_during_shutdown_loses_no_record(self):
        site = self.site({"/": html_page(*[f"/p{i}" for i in range(30)])})
        for i in range(30):
            site.routes[f"/p{i}"] = lambda handler: time.sleep(0.2) or html_page()
        crawler = crawl.Crawler([site.url()], robots=False, max_tasks=3)
        task = self.loop.create_task(crawler.crawl())

        def cancel_twice():
            task.cancel()
            self.loop.call_soon(task.cancel)

        def wait_and_cancel():
            while len(site.targets()) < 3:
                yield from crawl.sleep(0.01)
            cancel_twice()
            yield from crawl.wait_done(task)

        self.run_co(wait_and_cancel())
        self.assertTrue(task.cancelled())
        self.assertEqual(len(crawler.records), 31)
        self.assertEqual(set(crawler.records), set(crawler.seen))
        self.assert_no_leaks()  # and the slow handlers have finished


class SafetyTest(FaultCase):

    def test_only_http_and_https_are_fetched(self):
        trap = self.raw({})  # counts any connection
        port = trap.port
        others = [f"ftp://127.0.0.1:{port}/f", f"gopher://127.0.0.1:{port}/", "file:///etc/passwd",
                  f"file://127.0.0.1:{port}/x", f"ws://127.0.0.1:{port}/", f"telnet://127.0.0.1:{port}",
                  "mailto:someone@127.0.0.1", "javascript:alert(1)", "data:text/plain,hello",
                  f"FTP://127.0.0.1:{port}/upper"]
        site = self.site({
            "/": html_page(*others, "/go"),
            "/go": redirect(f"ftp://127.0.0.1:{port}/via-redirect"),
        })
        _, records = self.crawl_site([site.url("/")], robots=True)
        self.assertEqual(trap.connections, 0, "a non-http(s) URL was fetched")
        self.assertEqual(set(records), {site.url("/"), site.url("/go")})
        self.assertEqual(site.targets(), ["/robots.txt", "/", "/go"])
        self.assert_no_leaks()

    def test_credentials_in_a_url_are_never_sent_nor_written(self):
        site = self.site({})
        base = f"http://127.0.0.1:{site.port}"
        site.routes["/"] = html_page("/a", f"http://user2:hunter2@127.0.0.1:{site.port}/b")
        site.routes["/a"] = html_page(f"//user3:swordfish@127.0.0.1:{site.port}/c")
        site.routes["/b"] = redirect(f"http://user4:opensesame@127.0.0.1:{site.port}/d")
        site.routes["/c"] = html_page()
        site.routes["/d"] = html_page()
        with tempfile.TemporaryDirectory() as directory:
            output = os.path.join(directory, "out.jsonl")
            result = run_in_process(f"http://user:secret@127.0.0.1:{site.port}/", "--no-soft-404", "-o", output,
                                    timeout=30)
            self.assertEqual(result.returncode, 0, result.stderr)
            with open(output, encoding="utf-8") as file:
                written = file.read()
        self.assertEqual(sorted(site.targets()), ["/", "/a", "/b", "/c", "/d", "/robots.txt"])
        secrets = ("secret", "hunter2", "swordfish", "opensesame", "user:", "user2", "user3", "user4")
        for request in site.requests:
            self.assertNotIn("authorization", {name.lower() for name in request["headers"]})
            sent = request["target"] + repr(request["headers"])
            for secret in secrets:
                self.assertNotIn(secret, sent)
        for where, text in (("-o output", written), ("stdout", result.stdout),
                            ("stderr", result.stderr)):
            for secret in secrets:
                self.assertNotIn(secret, text, f"{secret!r} written to {where}")
        self.assertEqual(sorted(json.loads(line)["url"] for line in written.splitlines()),
                         sorted(base + t for t in ("/", "/a", "/b", "/c", "/d")))

    def test_header_section_size_limit(self):
        head = b"HTTP/1.1 200 OK\r\n" + b"X-Filler: " + b"f" * 70000 + b"\r\nContent-Length: 0\r\n\r\n"
        server = self.scripted(answer_then_wait(head))
        record = self.crawl_one(server.url())
        self.assert_record(record, status=None, error_kind="protocol", tries=1,
                           error_contains="larger than 65536 bytes")
        self.assert_no_leaks()

    def test_header_field_count_limit(self):
        head = (b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-F%d: v\r\n" % i for i in range(250))
                + b"Content-Length: 0\r\n\r\n")
        server = self.scripted(answer_then_wait(head))
        record = self.crawl_one(server.url())
        self.assert_record(record, status=None, error_kind="protocol", tries=1,
                           error_contains="more than 200 fields")
        self.assert_no_leaks()

    def test_body_size_limit_by_content_length(self):
        server = self.scripted(answer_then_wait(
            http_response(b"x" * 5000, headers=[("Content-Type", "text/html")])))
        record = self.crawl_one(server.url(), max_size=1000)
        self.assert_record(record, status=200, error_kind="cut_short", tries=1, content_length=5000,
                           error_contains="links taken from its first 1000 bytes")
        self.assertEqual(record.size, 1000)
        self.assertFalse(record.failed)
        self.assert_no_leaks()

    def test_body_size_limit_without_length(self):
        server = self.scripted(answer_then_wait(http_response(
            chunked_body(b"x" * 5000), headers=[("Content-Type", "text/html"),
                                                  ("Transfer-Encoding", "chunked")],
            length=False)))
        record = self.crawl_one(server.url(), max_size=1000)
        self.assert_record(record, status=200, error_kind="cut_short", tries=1, size=1000,
                           content_length=None, error_contains="links taken from its first 1000 bytes")
        self.assertFalse(record.failed)
        self.assert_no_leaks()

    def test_decompressed_size_limit(self):
        bomb = gzip.compress(b"\0" * 2000000)
        self.assertLess(len(bomb), 10000)
        server = self.scripted(answer_then_wait(http_response(
            bomb, headers=[("Content-Type", "text/html"), ("Content-Encoding", "gzip")])))
        record = self.crawl_one(server.url(), max_size=10000)
        self.assert_record(record, status=200, error_kind="too_large", tries=1,
                           error_contains="exceeds the limit of 10000 bytes")
        self.assertEqual(record.size, 10000)
        self.assert_no_leaks()

    def test_redirect_hop_limit(self):
        site = self.site({f"/r{i}": redirect(f"/r{i + 1}") for i in range(10)})
        _, records = self.crawl_site([site.url("/r0")], max_redirect=3)
        self.assertEqual(site.targets(), ["/r0", "/r1", "/r2", "/r3"])
        got = {url: (r.status, r.error_kind, r.redirect) for url, r in records.items()}
        self.assertEqual(got, {
            site.url("/r0"): (302, None, site.url("/r1")),
            site.url("/r1"): (302, None, site.url("/r2")),
            site.url("/r2"): (302, None, site.url("/r3")),
            site.url("/r3"): (302, "redirect_limit", site.url("/r4")),
        })
        self.assertIn("more than 3", records[site.url("/r3")].error)
        self.assert_no_leaks()

    def test_redirect_loop(self):
        site = self.site({"/a": redirect("/b"), "/b": redirect("/a")})
        _, records = self.crawl_site([site.url("/a")])
        self.assertEqual(site.targets(), ["/a", "/b"])
        self.assertEqual(records[site.url("/a")].error_kind, None)
        self.assertEqual(records[site.url("/b")].error_kind, "redirect_limit")
        self.assertIn("redirect loop", records[site.url("/b")].error)
        self.assert_no_leaks()

    def test_nothing_written_to_disk_but_the_output_file(self):
        pages = {"/": html_page("/a", "/b", "/gone", "/big"), "/a": html_page("/"),
                 "/b": Page(gzip.compress(b"<a href='/a'>a</a>"),
                            headers=[("Content-Encoding", "gzip")]),
                 "/big": Page(b"x" * 5000), "/robots.txt": Page("User-agent: *\nDisallow: /b\n",
                                                                content_type="text/plain")}
        site = self.site(pages)
        with tempfile.TemporaryDirectory() as directory:
            env = dict(CLI_ENV, TMPDIR=directory, TMP=directory, TEMP=directory)
            result = run_cli("-v", "--max-size", "1000", "-o", "out.jsonl", site.url("/"),
                                    cwd=directory, env=env, timeout=30)
            self.assertEqual(result.returncode, 1, result.stderr)  # /gone and /big failed
            self.assertEqual(os.listdir(directory), ["out.jsonl"])
            records = read_jsonl(os.path.join(directory, "out.jsonl"))
        self.assertEqual(len(records), 5)

    def test_certificate_verification_stays_on_unless_insecure(self):
        client = crawl.Crawler(["https://127.0.0.1/"]).client
        context = client.ssl_context()
        self.assertEqual(context.verify_mode, ssl.CERT_REQUIRED)
        self.assertTrue(context.check_hostname)
        client.close()
        site = self.site({"/": html_page()}, tls=True)
        result = run_in_process("--no-robots", site.url("/"), timeout=30)
        self.assertEqual(result.returncode, 3, "no root could be fetched")
        self.assertIn("[tls] certificate verify failed", result.stdout)
        self.assertNotIn("verification was disabled", result.stdout)
        result = run_in_process("--no-robots", "--no-soft-404", "--cafile", CERT_FILE, site.url("/"), timeout=30)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertNotIn("verification was disabled", result.stdout)
        self.assertNotIn("DISABLED", result.stderr)
        result = run_in_process("--no-robots", "--no-soft-404", "--insecure", site.url("/"), timeout=30)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("WARNING: TLS certificate verification was disabled", result.stdout)
        self.assertIn("TLS certificate verification is DISABLED", result.stderr)
        self.assertEqual(len(site.requests), 2)  # the --cafile and the --insecure crawls

    def test_insecure_report_in_process(self):
        site = self.site({"/": html_page()}, tls=True)
        with self.assertLogs("crawl", "WARNING") as logs:
            crawler, records = self.crawl_site([site.url("/")], verify=False)
        self.assertIn("DISABLED", "\n".join(logs.output))
        self.assert_record(records[site.url("/")], status=200, error_kind=None, tries=1)
        self.assertIn("WARNING: TLS certificate verification was disabled", crawl.summarize(crawler))
        self.assert_no_leaks()


class CrawlerTrapTest(CrawlerTestCase):
    """URL spaces without end: soft 404s (one probe per origin) and the path
    limits. At the default options, as a user runs the crawler."""

    crawl_defaults = {"backoff": 0.01}

    def catch_all_site(self, page, routes=None):
        """A site that answers every path (but /robots.txt) with page."""
        site = self.site({})
        site.routes = CatchAllRoutes(page, routes)
        return site

    def probes(self, site):
        return [target for target in site.targets() if target.startswith("/crawl.py-probe-")]

    def assert_every_url_recorded(self, crawler, records):
        self.assertEqual(set(crawler.seen), set(records))
        self.assertEqual(crawler.frontier.unfinished, 0)

    def test_soft_404_site_ends_by_itself(self):
        # Every path answers 200 with the same relative links: without a
        # defence, /a/a/a/... for ever (13,600 URLs in 60 s, then killed).
        site = self.catch_all_site(html_page("sitemap", "a/"))
        started = time.monotonic()
        crawler, records = self.crawl_site(site.url())
        self.assertLess(time.monotonic() - started, 5)
        self.assert_every_url_recorded(crawler, records)
        probe, second_probe = self.probes(site)  # the second: how much two answers differ
        targets = site.targets()
        self.assertEqual(targets[:4], ["/robots.txt", probe, second_probe, "/"])
        self.assertEqual(sorted(targets[4:]), ["/a/", "/sitemap"])  # fetched at once, in any order
        # The root is never a soft 404 (it was asked for); its links are followed.
        self.assert_record(records[site.url("/")], status=200, error_kind=None, links=2, new_links=2)
        for target in ("/sitemap", "/a/"):
            record = records[site.url(target)]
            self.assert_record(record, status=200, error_kind="soft_404", links=0, new_links=0, tries=1,
                               error_contains=f"the same answer as for {site.url(probe)}")
            self.assertFalse(record.failed)
            self.assertFalse(record.is_page)
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_OK)
        summary = crawl.summarize(crawler)
        self.assertIn(f"Traps:    soft_404 2 from {site.url('/a/')}", summary)
        self.assertIn("Skipped:  none", summary, "a soft 404 was fetched")

    def test_soft_404_that_echoes_the_requested_path(self):
        # "/a/ was not found": the same page once each loses its own path.
        def not_found(handler):
            path = urllib.parse.unquote(handler.path)
            return html_page("sitemap", "a/", extra=f"<p>{html.escape(path)} was not found at "
                                                     f"http://127.0.0.1:{site.port}{handler.path}</p>")
        site = self.catch_all_site(not_found)
        crawler, records = self.crawl_site(site.url())
        self.assert_every_url_recorded(crawler, records)
        self.assertEqual({url: r.error_kind for url, r in records.items()},
                         {site.url("/"): None, site.url("/sitemap"): "soft_404", site.url("/a/"): "soft_404"})

    def test_soft_404_with_a_clock_or_a_random_link_ends_by_itself(self):
        # Not the same page twice (a counter, a random token): numbers and
        # long hex tokens are masked, so every page but the root is one.
        counter = itertools.count()

        def changing(handler):
            token = os.urandom(4).hex()
            return html_page("sitemap", "a/", f"b/page.html?r={token}",
                             extra=f"<p>request {next(counter)}</p><!-- {token} -->")
        site = self.catch_all_site(changing)
        crawler, records = self.crawl_site(site.url())
        self.assert_every_url_recorded(crawler, records)
        self.assertEqual(len(self.probes(site)), 2)
        self.assertEqual(records[site.url("/")].error_kind, None)
        self.assertEqual(len(records), 4)  # the root and its three links, none followed
        for url, record in records.items():
            if url != site.url("/"):
                self.assert_record(record, status=200, error_kind="soft_404", links=0, depth=1)

    def test_real_pages_on_the_soft_404_template_are_followed(self):
        # The same template, a changing token, the probe's name echoed as
        # words, and pages whose content is one short paragraph: pages.
        def template(body):
            return (f"<html><head><title>Site</title></head><body><nav><a href='/'>home</a>"
                    f"</nav><main>{body}</main><footer>{os.urandom(4).hex()}</footer></body></html>")

        def route(body):
            return lambda handler: Page(template(body))

        def nothing_matches(handler):
            words = handler.path.strip("/").replace("-", " ").replace(".", " ")
            return Page(template(f'<p>Nothing matches "{words}"</p>'))
        routes = {"/": route("<a href='/docs/'>docs</a> <a href='/hours'>hours</a>"),
                  "/docs/": route("<h1>Docs</h1><p>Read these.</p><a href='intro'>intro</a>"),
                  "/docs/intro": route("<h1>Intro</h1><p>Start here.</p><a href='missing'>x</a>"),
                  "/hours": route("<p>Open 9 to 5</p>")}
        site = self.catch_all_site(nothing_matches, routes)
        crawler, records = self.crawl_site(site.url())
        self.assert_every_url_recorded(crawler, records)
        got = {url[len(site.origin):]: r.error_kind for url, r in records.items()}
        self.assertEqual(got, {"/": None, "/docs/": None, "/docs/intro": None, "/hours": None,
                               "/docs/missing": None})  # "Nothing matches "docs missing"": no echo

    def test_two_probes_that_differ_spot_nothing(self):
        # A random tip in words: two answers to a missing path differ, so no
        # page can be told from them; the path limits still end the crawl.
        tips = itertools.cycle(["Try the search.", "Check the spelling.", "Go home."])

        def tip(handler):
            return html_page("a/", extra=f"<p>{next(tips)}</p>")
        site = self.catch_all_site(tip)
        with self.assertLogs("crawl", "INFO") as logs:
            crawler, records = self.crawl_site(site.url())
        self.assert_every_url_recorded(crawler, records)
        self.assertIn("two answers differ; soft 404s not spotted", "\n".join(logs.output))
        self.assertNotIn("soft_404", {r.error_kind for r in records.values()})
        self.assertEqual(records[site.url("/a/a/a/")].error_kind, "path_repeats")

    def test_a_probe_answered_with_a_body_not_read_spots_nothing(self):
        # A text/plain catch-all: its bodies are not read, so they cannot be
        # compared (and hold no links to follow).
        site = self.catch_all_site(Page("nothing here", content_type="text/plain"),
                                   {"/": html_page("/a.txt", "/b/")})
        with self.assertLogs("crawl", "INFO") as logs:
            crawler, records = self.crawl_site(site.url())
        self.assertIn("200 with text/plain; soft 404s not spotted", "\n".join(logs.output))
        self.assertEqual({url[len(site.origin):]: r.error_kind for url, r in records.items()},
                         {"/": None, "/a.txt": None, "/b/": None})
        self.assertEqual(len(self.probes(site)), 1)

    def test_a_changing_soft_404_is_cut_by_the_path_limits_without_probes(self):
        counter = itertools.count()

        def changing(handler):
            return html_page("sitemap", "a/", extra=f"<p>request {next(counter)}</p>")
        site = self.catch_all_site(changing)
        crawler, records = self.crawl_site(site.url(), soft_404=False)
        self.assert_every_url_recorded(crawler, records)
        got = {url[len(site.origin):]: (r.status, r.error_kind, r.tries) for url, r in records.items()}
        fetched = ["/", "/sitemap", "/a/", "/a/sitemap", "/a/a/", "/a/a/sitemap"]
        self.assertEqual(got, dict({target: (200, None, 1) for target in fetched},
                                   **{"/a/a/a/": (None, "path_repeats", 0)}))
        self.assert_record(records[site.url("/a/a/a/")], failed=False, depth=3, referrer=site.url("/a/a/"),
                           error="not fetched: the path repeats '/a' more than --max-segment-repeats 2 times")
        self.assertEqual(self.probes(site), [])
        self.assertIn(f"Traps:    path_repeats 1 from {site.url('/a/a/a/')}", crawl.summarize(crawler))
        self.assertIn("Skipped:  path_repeats 1 (not fetched by choice, not failures)", crawl.summarize(crawler))

    def test_a_site_that_404s_costs_one_request_per_origin(self):
        other = self.site({"/": html_page("/b"), "/b": html_page()})
        site = self.site({"/": html_page("/a", other.url("/")), "/a": html_page()})
        with self.assertLogs("crawl", "INFO") as logs:
            crawler, records = self.crawl_site(site.url())
        self.assertEqual(len(records), 4)
        self.assertTrue(all(r.status == 200 and r.error is None for r in records.values()))
        for server, pages in ((site, ["/", "/a"]), (other, ["/", "/b"])):
            [probe] = self.probes(server)
            self.assertEqual(sorted(server.targets()), sorted(["/robots.txt", probe] + pages))
            # Logged (-v), not recorded: the probe is no URL of the site.
            self.assertIn(f"soft-404 probe {server.url(probe)}: 404, as it should", "\n".join(logs.output))
        self.assertNotIn("Traps:", "\n".join(crawl.summarize(crawler)))
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_OK)

    def test_no_soft_404_probe(self):
        site = self.catch_all_site(html_page("b"))
        crawler, records = self.crawl_site(site.url(), soft_404=False)
        self.assertEqual(self.probes(site), [])
        self.assertEqual({r.error_kind for r in records.values()}, {None})

    def test_the_probe_obeys_robots_txt(self):
        site = self.catch_all_site(html_page("b"), {
            "/robots.txt": robots_page("User-agent: *\nDisallow: /crawl.py-probe-\n")})
        with self.assertLogs("crawl", "INFO") as logs:
            crawler, records = self.crawl_site(site.url())
        self.assertEqual(self.probes(site), [])
        self.assertIn("disallowed by robots.txt; soft 404s not spotted", "\n".join(logs.output))
        self.assertEqual(set(records), {site.url("/"), site.url("/b")})

    def test_a_probe_that_fails_unexpectedly_holds_up_nothing(self):
        class BrokenProbe(crawl.Crawler):
            def _fetch_probe(self, origin, state):
                raise RuntimeError("a bug in the probe")
                yield

        site = self.site({"/": html_page("/a", "/b", "/c"), "/a": html_page(), "/b": html_page(),
                          "/c": html_page()})
        crawler = BrokenProbe(site.url(), max_tasks=4)
        with self.assertLogs("crawl", "ERROR") as logs:
            records = self.run_co(crawler.crawl(), timeout=10)
        self.assertIn("a bug in the probe", "\n".join(logs.output))
        self.assertEqual({url: r.status for url, r in records.items()},
                         {site.url(t): 200 for t in ("/", "/a", "/b", "/c")})

    def test_path_limits_are_recorded_not_fetched_and_counted(self):
        deep = "/" + "/".join(str(i) for i in range(21))
        long_query = "/search?q=" + "x" * 2100
        links = ["/a/b/a/b/a/b/", "/a/b/a/b/", deep, deep.rsplit("/", 1)[0], long_query, "/c//////"]
        site = self.site({"/": html_page(*links)})
        crawler, records = self.crawl_site(site.url())
        self.assert_every_url_recorded(crawler, records)
        kinds = {url[len(site.origin):]: r.error_kind for url, r in records.items() if r.error_kind}
        self.assertEqual(kinds, {"/a/b/a/b/a/b/": "path_repeats", deep: "path_segments",
                                 long_query: "url_length", "/c//////": "path_repeats"})
        for target in kinds:
            self.assert_record(records[site.url(target)], status=None, tries=0, failed=False)
        self.assertNotIn("/a/b/a/b/a/b/", site.targets())
        self.assertIn("/a/b/a/b/", site.targets())  # twice in a row is fine
        self.assertIn(deep.rsplit("/", 1)[0], site.targets())  # 20 segments are fine
        self.assert_record(records[site.url(deep)],
                           error="not fetched: 21 path segments, more than --max-path-segments 20")
        length = len(site.url(long_query))
        self.assert_record(records[site.url(long_query)],
                           error=f"not fetched: {length} characters, more than --max-url-length 2083")
        summary = crawl.summarize(crawler)
        self.assertIn(f"Traps:    path_repeats 2 from {site.url('/c//////')}, path_segments 1 from "
                      f"{site.url(deep)}, url_length 1 from {site.url(long_query)}", summary)
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_FAILED_URLS)  # the 404s of the shorter links

    def test_path_limits_follow_their_options(self):
        crawler = crawl.Crawler(["http://h.test/"], max_url_length=30, max_path_segments=3,
                                max_segment_repeats=1)
        self.addCleanup(crawler.client.close)
        cases = {
            "http://h.test/a/b/": None, "http://h.test/a/b/c": None,
            "http://h.test/a/b/c/": "path_segments", "http://h.test/a/a": "path_repeats",
            "http://h.test/a/ab": None, "http://h.test/ab/b": None, "http://h.test/x?q=/a/a/a/a": None,
            "http://h.test/?q=" + "x" * 14: "url_length", "http://h.test/?q=" + "x" * 13: None,
        }
        for url, kind in cases.items():
            with self.subTest(url=url):
                trap = crawler._trap(url)
                self.assertEqual(trap and trap[0], kind)
        default = crawl.Crawler(["http://h.test/"])
        self.addCleanup(default.client.close)
        for url, kind in {"http://h.test/a/b/a/b/a/b": "path_repeats", "http://h.test/a/b/a/b/a/c": None,
                          "http://h.test/x/y/z/y/z/y/z/w": "path_repeats", "http://h.test/a/a/ab/": None,
                          "http://h.test/" + "x" * 2069: None, "http://h.test/" + "x" * 2070: "url_length"}.items():
            with self.subTest(url=url):
                trap = default._trap(url)
                self.assertEqual(trap and trap[0], kind)
        for keyword in ("max_url_length", "max_path_segments", "max_segment_repeats"):
            with self.subTest(keyword=keyword), self.assertRaises(ValueError):
                crawl.Crawler(["http://h.test/"], **{keyword: 0})

    def test_the_command_line_reports_the_cut(self):
        site = self.catch_all_site(html_page("sitemap", "a/"))
        result = run_cli("-q", site.url())
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn(f"Traps:    soft_404 2 from {site.url('/a/')}", result.stdout)


class CrawlerBookkeepingTest(CrawlerTestCase):
    """Counters and timings the report and the progress line read."""

    @virtual_clock
    def test_a_record_that_fails_in_link_parsing_keeps_its_elapsed_time(self):
        client = FakeClient({"http://example.test/": html_page("a.html")})
        original = client.fetch

        def slow_fetch(url, method="GET", headers=None, **options):
            yield from crawl.sleep(1.5)
            return (yield from original(url, method, headers, **options))

        client.fetch = slow_fetch
        with mock.patch.object(crawl, "find_links", side_effect=RuntimeError("boom")), \
                self.assertLogs("crawl", "ERROR"):
            crawler, records = self.crawl_site("http://example.test/", client=client,
                                               robots=False)
        record = records["http://example.test/"]
        self.assertEqual((record.status, record.error_kind), (200, "internal"))
        self.assertEqual(record.elapsed, 1.5)

    @virtual_clock
    def test_in_progress_counts_urls_and_fetching_counts_requests(self):
        observed = []
        client = FakeClient({"http://example.test/": html_page("a.html", "b.html")})
        original = client.fetch
        crawler = None

        def watching_fetch(url, method="GET", headers=None, **options):
            observed.append((crawler.in_progress, crawler.fetching))
            return (yield from original(url, method, headers, **options))

        client.fetch = watching_fetch
        crawler = crawl.Crawler("http://example.test/", client=client, robots=False,
                                delay=2.0, max_tasks=3, soft_404=False)
        self.run_co(crawler.crawl())
        # The root alone, then a.html on the wire while b.html waits for its
        # politeness slot: two URLs in progress, one request fetching.
        self.assertEqual(observed, [(1, 1), (2, 1), (1, 1)])
        self.assertEqual((crawler.in_progress, crawler.fetching), (0, 0))
        stats = crawler.stats()
        self.assertEqual((stats["in_progress"], stats["fetching"]), (0, 0))

    def test_records_share_one_copy_of_repeated_strings(self):
        client = FakeClient({"http://example.test/": html_page("a.html", "b.html"),
                             "http://example.test/a.html": html_page(),
                             "http://example.test/b.html": html_page()})
        crawler, records = self.crawl_site("http://example.test/", client=client, robots=False)
        first, *others = records.values()
        self.assertEqual(len(others), 2)
        for record in others:
            self.assertEqual((record.reason, record.content_type, record.charset),
                             (first.reason, first.content_type, first.charset))
            self.assertIs(record.content_type, first.content_type)
            self.assertIs(record.reason, first.reason)
            self.assertIs(record.charset, first.charset)


class CrawlerReferrersTest(CrawlerTestCase):
    """The pages linking to a failed URL: kept (bounded) for failed URLs
    only, listed in URL order whatever the timing."""

    crawl_defaults = {"backoff": 0.01, "robots": False, "soft_404": False}

    def linking_site(self, pages):
        """A FakeClient site: the root links to /p0.. /p{pages-1}, each of
        which links to /missing; fetches finish in an order set by seed."""
        site = {"http://example.test/": html_page(*[f"/p{i}" for i in range(pages)])}
        for i in range(pages):
            site[f"http://example.test/p{i}"] = html_page("/missing", "/")
        return site

    def crawl_in_order(self, site, seed, **options):
        client = FakeClient(site)
        fetch = client.fetch
        delays = random.Random(seed)

        def shuffled_fetch(url, method="GET", headers=None, **options):
            yield from crawl.sleep(delays.random())
            return (yield from fetch(url, method, headers, **options))

        client.fetch = shuffled_fetch
        return self.crawl_site("http://example.test/", client=client, max_tasks=5,
                               run_timeout=600, **options)

    @virtual_clock
    def test_a_failed_url_lists_its_linking_pages_in_url_order(self):
        crawler, records = self.crawl_in_order(self.linking_site(3), seed=1)
        missing = records["http://example.test/missing"]
        self.assertEqual((missing.failed, missing.linked_from), (True, 3))
        self.assertEqual(missing.referrers, ["http://example.test/p0", "http://example.test/p1",
                                             "http://example.test/p2"])
        self.assertEqual(crawl.format_record(missing),
                         "404 http://example.test/missing  text/plain  9 bytes  <- linked from "
                         "http://example.test/p0 and 2 other pages")
        self.assertEqual(crawl.format_record(missing, verbose=True).split("\n")[1:], [
            "      also linked from http://example.test/p1",
            "      also linked from http://example.test/p2"])
        for record in records.values():
            if not record.failed:
                self.assertEqual((record.linked_from, record.referrers), (None, None))
        # Only failed URLs keep their linking pages once the crawl is over.
        self.assertEqual(list(crawler._referrers),
                         [crawler.records.row("http://example.test/missing")])

    @virtual_clock
    def test_the_list_is_bounded_and_the_count_is_not(self):
        crawler, records = self.crawl_in_order(self.linking_site(250), seed=2)
        missing = records["http://example.test/missing"]
        first_100 = sorted(f"http://example.test/p{i}" for i in range(250))[:100]
        self.assertEqual((missing.linked_from, missing.referrers), (250, first_100))
        lines = crawl.format_record(missing, verbose=True).split("\n")
        self.assertEqual(lines[0], "404 http://example.test/missing  text/plain  9 bytes  <- "
                                   "linked from http://example.test/p0 and 249 other pages")
        self.assertEqual(len(lines), 1 + 99 + 1)
        self.assertEqual(lines[-1], "      and 150 more pages")

    @virtual_clock
    def test_the_same_crawl_gives_the_same_report_whatever_the_timing(self):
        reports = set()
        for seed in range(6):
            crawler, _ = self.crawl_in_order(self.linking_site(12), seed=seed)
            out = io.StringIO()
            crawl.report(crawler, out, quiet=True)
            reports.add(out.getvalue().split("\n")[0])
        self.assertEqual(reports, {"404 http://example.test/missing  text/plain  9 bytes  <- "
                                   "linked from http://example.test/p0 and 11 other pages"})

    def test_an_invalid_link_counts_every_page_that_has_it(self):
        site = {"http://example.test/": html_page("/a", "/b", "http://example.test:99999/"),
                "http://example.test/a": html_page("http://example.test:99999/"),
                "http://example.test/b": html_page("http://example.test:99999/")}
        _, records = self.crawl_site("http://example.test/", client=FakeClient(site))
        bad = records["http://example.test:99999/"]
        self.assertEqual((bad.error_kind, bad.linked_from, bad.referrers), ("invalid_url", 3, [
            "http://example.test/", "http://example.test/a", "http://example.test/b"]))

    def test_a_page_counts_once_for_an_invalid_link_it_repeats(self):
        bad = "http://example.test:99999/"
        site = {"http://example.test/": html_page(bad, bad, "/a", extra=f'<img src="{bad}"><a href=" {bad}">'),
                "http://example.test/a": html_page(bad)}
        _, records = self.crawl_site("http://example.test/", client=FakeClient(site))
        self.assertEqual((records[bad].linked_from, records[bad].via), (2, "img src"))  # extra comes first


# ---------------------------------------------------------------------------
# 10. The report and the command line
# ---------------------------------------------------------------------------


class CrawlerReportTest(CrawlerTestCase):

    def test_report_lines(self):
        site = self.site({"/robots.txt": robots_page("User-agent: *\nDisallow: /private\n"),
                            "/": html_page("/a", "/missing", "/r", "/private"),
                            "/a": Page("<p>a</p>"), "/r": redirect("/a", 301)})
        root_size = len(site.routes["/"].body)
        crawler, records = self.crawl_site(site.url())
        out = io.StringIO()
        crawl.report(crawler, out)
        lines = out.getvalue().split("\n")
        u = site.url
        # URLs not fetched by choice (robots here) are counted, not listed.
        self.assertEqual(lines[:5], [
            f"200 {u('/')}  text/html  {root_size} bytes  4/4 new links",
            f"200 {u('/a')}  text/html  8 bytes",
            f"404 {u('/missing')}  text/plain  9 bytes  <- linked from {u('/')}",
            f"301 {u('/r')}  -  0 bytes  -> {u('/a')}",
            "",
        ])
        summary = lines[5:]
        self.assertEqual(summary[-1], "")
        self.assertEqual(summary[:5], [
            "Statuses: 2xx 2, 3xx 1, 4xx 1 (HTTP responses)",
            "Errors:   none",
            "Skipped:  robots 1 (not fetched by choice, not failures)",
            "Failed:   1 URL (4xx 1)",
            f"Bytes:    {root_size + 8} (decoded bodies)"])  # the 404's text/plain body is not read
        self.assertRegex(summary[5], r"^URLs:     5 in \d+\.\d\d s, 4 fetched, \d+(\.\d+)? fetches/s$")
        self.assertEqual(summary[6], "Pages:    2 (HTML documents fetched with status 200)")
        self.assertEqual(len(summary), 8)
        self.assertEqual(crawl.summarize(crawler), summary[:-1])
        listed = io.StringIO()
        crawl.report(crawler, listed, show_unfetched=True)
        self.assertEqual(listed.getvalue().split("\n")[3],
                         f"--- {u('/private')}  [robots] {records[u('/private')].error}")
        quiet = io.StringIO()
        crawl.report(crawler, quiet, quiet=True)  # only the URLs that failed, then the summary
        self.assertEqual(quiet.getvalue().split("\n"),
                         [f"404 {u('/missing')}  text/plain  9 bytes  <- linked from {u('/')}", ""]
                         + summary)
        # -q --show-unfetched: the explicit flag adds the URLs not fetched.
        both = io.StringIO()
        crawl.report(crawler, both, quiet=True, show_unfetched=True)
        self.assertEqual(both.getvalue().split("\n")[:3],
                         [f"404 {u('/missing')}  text/plain  9 bytes  <- linked from {u('/')}",
                          f"--- {u('/private')}  [robots] {records[u('/private')].error}", ""])

    def test_summary_errors_by_kind(self):
        url = f"http://127.0.0.1:{refused_port(self)}/"
        crawler, _ = self.crawl_site(url, robots=False, max_tries=1)
        summary = crawl.summarize(crawler)
        self.assertEqual(summary[:4], ["Statuses: none (no HTTP response)",
                                       "Errors:   refused 1 (no usable response)",
                                       "Skipped:  none", "Failed:   1 URL (refused 1)"])
        self.assertEqual(summary[-1], "Pages:    0 (HTML documents fetched with status 200)")


class CrawlerReportSummaryTest(CrawlerTestCase):
    """The report shows what matters: URLs not fetched by choice counted,
    not listed; summary lines that say what they count."""

    crawl_defaults = {"backoff": 0.01, "robots": False, "soft_404": False}

    def report_lines(self, crawler, **options):
        out = io.StringIO()
        crawl.report(crawler, out, **options)
        return out.getvalue().split("\n")

    def test_urls_not_fetched_by_choice_are_counted_not_listed(self):
        site = {"http://example.test/": html_page(*[f"/p{i}" for i in range(30)])}
        for i in range(30):
            site[f"http://example.test/p{i}"] = html_page()
        crawler, records = self.crawl_site("http://example.test/", client=FakeClient(site),
                                           max_pages=3, max_tasks=1)
        self.assertEqual(len(records), 31)
        lines = self.report_lines(crawler)
        self.assertEqual([line.split("  ")[0] for line in lines[:4]], [
            "200 http://example.test/", "200 http://example.test/p0",
            "200 http://example.test/p1", ""])
        self.assertEqual(lines[4:8], [
            "Statuses: 2xx 3 (HTTP responses)", "Errors:   none",
            "Skipped:  max_pages 28 (not fetched by choice, not failures)", "Failed:   none"])
        self.assertRegex(lines[9], r"^URLs:     31 in \d+\.\d\d s, 3 fetched, ")
        # On request (or with -v) they are listed; every kind that is no failure is.
        for listed in (self.report_lines(crawler, show_unfetched=True),
                       self.report_lines(crawler, verbose=True)):
            self.assertEqual(len(listed), 31 + 1 + 8)
            self.assertIn("--- http://example.test/p9  [max_pages] not fetched: --max-pages 3 "
                          "reached", listed)
        self.assertEqual(crawl.NOT_FETCHED_KINDS, tuple(
            kind for kind, about in crawl.ERROR_KINDS.items() if about.outcome == crawl.SKIPPED))

    def test_rates_keep_their_precision(self):
        self.assertEqual([crawl._rate(rate) for rate in (0, 0.004, 0.25, 0.8333, 4.46, 12.6, 530)],
                         ["0", "0.004", "0.25", "0.83", "4.5", "13", "530"])

    def test_fetched_kinds_are_not_errors(self):
        crawler = crawl.Crawler("http://example.test/", soft_404=False)
        self.addCleanup(crawler.client.close)
        record = crawl.Record("http://example.test/")
        record.status, record.content_type = 200, "text/html"
        record.error_kind, record.error = "cut_short", "cut short: larger than --max-size"
        crawler._finish(record)
        summary = crawl.summarize(crawler)
        self.assertIn("Errors:   none", summary)
        self.assertIn("Failed:   none", summary)

    @virtual_clock
    def test_a_slow_crawl_shows_its_rate(self):
        site = {"http://example.test/": html_page("/a"), "http://example.test/a": html_page()}
        crawler, _ = self.crawl_site("http://example.test/", client=FakeClient(site), delay=4)
        self.assertEqual(crawler.stats()["elapsed"], 4.0)
        self.assertEqual(crawl.summarize(crawler)[-2],
                         "URLs:     2 in 4.00 s, 2 fetched, 0.5 fetches/s")

    def test_a_crawl_that_fetched_nothing_says_so(self):
        client = FakeClient({"http://example.test/": html_page("/a"),
                             "http://example.test/robots.txt": robots_page(
                                 "User-agent: *\nDisallow: /\n")})
        crawler, _ = self.crawl_site("http://example.test/", client=client, robots=True)
        self.assertEqual(crawl.summarize(crawler)[:2], [
            "NOTE: no URL was fetched", "Statuses: none (no HTTP response)"])
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_NOTHING_CRAWLED)

    def test_a_root_that_only_redirects_out_of_scope_says_so(self):
        # (A root's redirect to another host widens the scope, unless that
        # host is excluded.)
        client = FakeClient({"http://example.test/": redirect("https://www.other.test/")})
        crawler, _ = self.crawl_site("http://example.test/", client=client, exclude="other")
        self.assertEqual(crawl.summarize(crawler)[0],
                         "NOTE: the root http://example.test/ only redirects out of scope, "
                         "to https://www.other.test/")
        self.assertEqual(crawl.exit_status(crawler), crawl.EXIT_OK)


class CrawlerLibraryTest(ServerTestCase):

    def setUp(self):
        self.home = self.site({"/": html_page("/b", "/a"), "/a": html_page(), "/b": html_page("/missing")})

    def test_crawl_helper(self):
        records = crawl.crawl([self.home.url()], max_tasks=2, backoff=0.01)
        self.assertEqual([r.url for r in records],
                         [self.home.url(p) for p in ("/", "/a", "/b", "/missing")])
        self.assertIsInstance(records[0], crawl.Record)
        self.assertEqual([r.status for r in records], [200, 200, 200, 404])
        self.assertEqual(crawl.crawl(self.home.url("/a"))[0].url, self.home.url("/a"))

    def test_a_string_exclude_is_one_pattern(self):
        records = crawl.crawl([self.home.url()], exclude="/b$", backoff=0.01)
        self.assertEqual([r.url for r in records], [self.home.url("/"), self.home.url("/a")])
        records = crawl.crawl([self.home.url()], exclude=re.compile("/a$"), backoff=0.01)
        self.assertEqual(len(records), 3)
        # A bad pattern is a ValueError, as every bad option value is (re.error
        # is one only from Python 3.13).
        with self.assertRaisesRegex(ValueError, r"^exclude: not a valid regular expression: "):
            crawl.Crawler(self.home.url(), exclude="(")

    def test_main_returns_status(self):
        handlers = list(logging.root.handlers)
        level = logging.root.level
        self.addCleanup(setattr, logging.root, "handlers", handlers)
        self.addCleanup(logging.root.setLevel, level)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = crawl.main(["-q", self.home.url()])
        self.assertEqual(status, 1)
        self.assertEqual(out.getvalue().splitlines()[-1], "Pages:    3 (HTML documents fetched with status 200)")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = crawl.main(["-q", self.home.url("/a")])
        self.assertEqual(status, 0)
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(crawl.main(["--max-tasks", "0", self.home.url()]), 2)
            self.assertEqual(crawl.main(["--help"]), 0)
            self.assertEqual(crawl.main(["--version"]), 0)

    def test_help_lists_every_option(self):
        text = crawl.build_parser().format_help()
        for option in ("--max-tasks", "--max-redirect", "--max-tries", "--max-pages", "--max-depth",
                       "--delay", "--timeout", "--max-size", "--user-agent", "--lenient", "--exclude",
                       "--no-robots", "--output", "--quiet", "--verbose"):
            self.assertIn(option, text)
        self.assertIn("examples:", text)
        self.assertIn("default: 10", text)


class CLITest(ServerTestCase):

    def output_file(self):
        handle, path = tempfile.mkstemp(prefix="crawl-test-", suffix=".jsonl")
        os.close(handle)
        os.unlink(path)
        self.addCleanup(lambda: os.path.exists(path) and os.unlink(path))
        return path

    def test_exit_0_and_report(self):
        site = self.site({"/": html_page("/a"), "/a": html_page()})
        result = run_in_process(site.url())
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertTrue(lines[0].startswith(f"200 {site.url('/')}  text/html  "), lines[0])
        self.assertTrue(lines[1].startswith(f"200 {site.url('/a')}  text/html  "), lines[1])
        self.assertEqual(lines[2], "")
        self.assertEqual(lines[-1], "Pages:    2 (HTML documents fetched with status 200)")
        self.assertEqual(result.stderr, "")  # no progress line when stderr is not a terminal
        self.assertNotIn("\r", result.stdout)

    def test_quiet_prints_only_the_summary_when_nothing_failed(self):
        site = self.site({"/": html_page("/a"), "/a": html_page()})
        result = run_in_process("-q", site.url())
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue(result.stdout.startswith("Statuses: 2xx 2 (HTTP responses)\n"), result.stdout)
        self.assertNotIn(site.url(), result.stdout)

    def test_exit_1_with_a_404(self):
        site = self.site({"/": html_page("/missing")})
        result = run_in_process("-q", site.url())
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)

    def test_exit_2_for_usage_errors(self):
        for args in ([], ["--max-tasks", "0", "example.test"], ["ftp://example.test/"]):
            with self.subTest(args=args):
                result = run_in_process(*args)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn("usage:", result.stderr)
                self.assertEqual(result.stdout, "")
        for args in (["--delay", "-1", "example.test"], ["--timeout", "0", "example.test"],
                     ["--max-tries", "x", "example.test"], ["--exclude", "(", "example.test"],
                     ["--bogus", "example.test"], ["mailto:a@example.test"], ["http://"],
                     ["--cafile", "/no/such/file.pem", "example.test"]):
            with self.subTest(args=args):
                status, _, errors = run_main(args)
                self.assertEqual(status, 2)
                self.assertIn("usage:", errors)

    def test_exit_3_when_no_root_could_be_fetched(self):
        port = refused_port(self)
        result = run_in_process("--max-tries", "1", "--no-robots", f"127.0.0.1:{port}")
        self.assertEqual(result.returncode, 3, result.stdout + result.stderr)
        self.assertIn("[refused] connection refused", result.stdout)
        result = run_in_process(f"127.0.0.1:{port}")
        self.assertEqual(result.returncode, 3, result.stdout + result.stderr)
        # The host's problem first, not robots.txt's.
        self.assertIn("[refused] connection refused (robots.txt unreachable)", result.stdout)

    def test_json_lines_output(self):
        site = self.site({"/": html_page("/a", "/missing", "/r"), "/a": html_page(),
                          "/r": redirect("/a")})
        path = self.output_file()
        result = run_in_process("-q", "-o", path, site.url())
        self.assertEqual(result.returncode, 1, result.stderr)
        rows = read_jsonl(path)
        self.assertEqual(len(rows), 4)
        for row in rows:
            self.assertEqual(list(row), list(crawl.RECORD_FIELDS))
        by_url = {row["url"]: row for row in rows}
        self.assertEqual(set(by_url), {site.url(p) for p in ("/", "/a", "/missing", "/r")})
        self.assertEqual(by_url[site.url("/r")]["redirect"], site.url("/a"))
        self.assertEqual(by_url[site.url("/missing")]["status"], 404)
        self.assertEqual(by_url[site.url("/a")]["referrer"], site.url("/"))
        self.assertEqual(dict(by_url[site.url("/")], elapsed=None), {
            "url": site.url("/"), "status": 200, "reason": "OK", "content_type": "text/html",
            "charset": "utf-8", "size": len(site.routes["/"].body),
            "content_length": len(site.routes["/"].body), "links": 3, "new_links": 3,
            "redirect": None, "error": None, "error_kind": None, "failed": False, "tries": 1,
            "elapsed": None, "depth": 0, "referrer": None, "via": "root", "linked_from": None,
            "referrers": None})
        self.assertEqual((by_url[site.url("/missing")]["failed"],
                          by_url[site.url("/missing")]["linked_from"],
                          by_url[site.url("/missing")]["referrers"]), (True, 1, [site.url("/")]))

    def test_output_dash_writes_json_lines_to_stdout_and_the_report_to_stderr(self):
        site = self.site({"/": html_page("/a", "/missing"), "/a": html_page()})
        result = run_in_process("-o", "-", site.url())
        self.assertEqual(result.returncode, 1, result.stderr)
        rows = [json.loads(line) for line in result.stdout.splitlines()]
        self.assertEqual(sorted(row["url"] for row in rows),
                         [site.url("/"), site.url("/a"), site.url("/missing")])
        self.assertEqual([row["failed"] for row in rows if row["url"] == site.url("/missing")],
                         [True])
        self.assertEqual(result.stderr.splitlines()[-1],
                         "Pages:    2 (HTML documents fetched with status 200)")
        self.assertIn(f"404 {site.url('/missing')}  text/plain  9 bytes", result.stderr)
        status, stdout, stderr = run_main(["-q", "-o", "-", site.url()])
        self.assertEqual((status, len(stdout.splitlines())), (1, 3))
        self.assertIn("Failed:   1 URL (4xx 1)", stderr)

    def test_help_documents_every_exit_status_and_returns_0(self):
        status, stdout, stderr = run_main(["--help"])
        self.assertEqual((status, stderr), (0, ""))
        help_text = " ".join(stdout.split())
        for text in ("0 all URLs fine", "1 some URL failed", "2 bad usage",
                     "3 no root could be fetched (nothing crawled)", "130 interrupted",
                     "143 terminated", "python3 crawl.py --max-pages 100 xkcd.com"):
            self.assertIn(text, help_text)
        self.assertIn("--max-size BYTES largest body kept, after decompression; 512K, 10M "
                      "and 1G (1024-based) are understood", help_text)
        self.assertEqual(crawl.build_parser().parse_args(["--max-size", "512K", "x.test"])
                         .max_size, 512 * 1024)

    def test_crawl_py_runs_as_a_program(self):
        with open(CRAWL_PY, encoding="utf-8") as file:
            self.assertEqual(file.readline(), "#!/usr/bin/env python3\n")
        self.assertTrue(os.access(CRAWL_PY, os.X_OK), "crawl.py is executable")

    def interrupt(self, signum, expected_status):
        routes = {"/": html_page(*[f"/p{i}" for i in range(30)])}
        for i in range(30):
            routes[f"/p{i}"] = slow_route(0.5, html_page())
        site = self.site(routes)
        path = self.output_file()
        process = subprocess.Popen(crawl_command("--max-tasks", "2", "-o", path, site.url()),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   universal_newlines=True, env=CLI_ENV)
        self.addCleanup(lambda: process.poll() is None and process.kill())
        deadline = time.monotonic() + 15
        while len([t for t in site.targets() if t.startswith("/p")]) < 3:
            self.assertLess(time.monotonic(), deadline, "the crawl did not start")
            self.assertIsNone(process.poll(), "the crawl ended early")
            time.sleep(0.02)
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=10)
        self.assertEqual(process.returncode, expected_status, stderr)
        match = re.search(r"^INTERRUPTED: (\d+) URLs remained unfetched$", stdout, re.M)
        self.assertIsNotNone(match, stdout)
        rows = read_jsonl(path)
        urls = [row["url"] for row in rows]
        self.assertEqual(len(urls), len(set(urls)))
        self.assertEqual(set(urls), {site.url("/")} | {site.url(f"/p{i}") for i in range(30)})
        interrupted = [row for row in rows if row["error_kind"] == "interrupted"]
        finished = [row for row in rows if row["status"] == 200]
        self.assertEqual(len(interrupted) + len(finished), 31)
        self.assertEqual(int(match.group(1)), len(interrupted))
        self.assertGreaterEqual(len(interrupted), 20)
        self.assertGreaterEqual(len(finished), 2)
        for row in rows:
            self.assertEqual(list(row), list(crawl.RECORD_FIELDS))
        for row in rows:  # the partial report lists every URL fetched, not the others
            if row["error_kind"] == "interrupted":
                self.assertNotIn(row["url"] + " ", stdout)
            else:
                self.assertIn(row["url"] + " ", stdout)

    def test_ctrl_c(self):
        self.interrupt(signal.SIGINT, 130)

    def test_sigterm(self):
        self.interrupt(signal.SIGTERM, 143)


class CLILinkCheckTest(ServerTestCase):
    """Issue 10's "done when": one site with every kind of broken link at
    once, checked in one run of the command line as CI would run it."""

    def test_a_complete_link_check(self):
        def download(handler):  # a valid 30 MB file: the head, then less than 1 MB of it
            handler.send_response(200)
            handler.send_header("Content-Type", "application/zip")
            handler.send_header("Content-Length", "30000000")
            handler.end_headers()
            try:
                handler.wfile.write(bytes(64 * 1024))
                handler.wfile.flush()
            except OSError:
                pass
            handler.close_connection = True

        def head_hostile(conn, request):
            if request.startswith(b"HEAD "):
                conn.send(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            else:
                conn.send(http_response("%PDF-1.7", headers=[("Content-Type", "application/pdf")]))

        # "localhost" is another host than the site's 127.0.0.1.
        hostile = self.raw({"/paper.pdf": head_hostile})
        paper = f"http://localhost:{hostile.port}/paper.pdf"
        dead = f"http://localhost:{refused_port(self)}/"
        site = self.site()
        u = site.url
        site.routes.update({
            "/robots.txt": robots_page("User-agent: *\nDisallow:\nSitemap: /sitemap.xml\n"),
            "/": Page(f"""<!doctype html><link rel=stylesheet href="/style.css">
                <link rel=stylesheet href="/gone.css"><script src="/missing.js"></script>
                <img src="/ok.png" srcset="/ok.png 1x, /missing-2x.png 2x"><img src="/missing.png">
                <a href="/about.html#team">team</a> <a href="/about.html#nowhere">?</a>
                <a href="/big.zip">download</a> <a href="{paper}">paper</a> <a href="{dead}">dead</a>"""),
            "/about.html": Page('<h2 id="team">Team</h2><a href="/">home</a>'),
            "/style.css": Page("body { background: url(/missing-bg.png) }", content_type="text/css"),
            "/ok.png": Page(b"\x89PNG", content_type="image/png"),
            "/big.zip": download,
            "/sitemap.xml": Page(sitemap_xml(*map(u, ["/", "/about.html", "/orphan.html", "/dead.html"])),
                                 content_type="application/xml"),
            "/orphan.html": Page("<p>nobody links here</p>"),
        })
        output = os.path.join(tempfile.mkdtemp(prefix="crawl-test-"), "records.jsonl")
        self.addCleanup(shutil.rmtree, os.path.dirname(output), True)
        # One worker: the same referrer and via in every run.
        status, out, err = run_main([u(), "--external", "--fragments", "--sitemaps", "-q",
                                     "--max-tasks", "1", "-o", output])
        self.assertEqual(status, crawl.EXIT_FAILED_URLS, err)
        records = {r["url"]: (r["status"], r["error_kind"], r["via"], r["referrer"])
                   for r in read_jsonl(output)}
        root, css, sitemap = u(), u("/style.css"), u("/sitemap.xml")
        self.assertEqual(records, {
            root: (200, None, "root", None),
            u("/style.css"): (200, None, "link href", root),
            u("/gone.css"): (404, None, "link href", root),
            u("/missing.js"): (404, None, "script src", root),
            u("/ok.png"): (200, None, "img src", root),
            u("/missing-2x.png"): (404, None, "img srcset", root),
            u("/missing.png"): (404, None, "img src", root),
            u("/about.html"): (200, None, "link", root),
            u("/about.html#nowhere"): (None, "fragment", "link", root),
            u("/big.zip"): (200, None, "link", root),
            paper: (200, None, "link", root),
            dead: (None, "refused", "link", root),
            u("/missing-bg.png"): (404, None, "css url", css),
            sitemap: (200, None, "robots.txt", u("/robots.txt")),
            u("/orphan.html"): (200, None, "sitemap", sitemap),
            u("/dead.html"): (404, None, "sitemap", sitemap),
        })
        download_record = [r for r in read_jsonl(output) if r["url"] == u("/big.zip")][0]
        self.assertEqual((download_record["content_length"], download_record["size"],
                          download_record["failed"]), (30000000, 0, False))
        self.assertEqual(hostile.targets, ["/robots.txt", "/paper.pdf", "/paper.pdf"])  # HEAD, GET
        # -q: the failures, then the summary.
        failed = [line.split("  ")[0] for line in out.split("\n\n")[0].split("\n")]
        self.assertEqual(failed, ["--- " + u("/about.html#nowhere"), "404 " + u("/dead.html"),
                                  "404 " + u("/gone.css"), "404 " + u("/missing-2x.png"),
                                  "404 " + u("/missing-bg.png"), "404 " + u("/missing.js"),
                                  "404 " + u("/missing.png"), "--- " + dead])  # by URL
        summary = out.split("\n\n")[1].split("\n")
        self.assertEqual(summary[:4], [
            "Statuses: 2xx 8, 4xx 6 (HTTP responses)",
            "Errors:   refused 1, fragment 1 (no usable response)",
            "Skipped:  none",
            "Failed:   8 URLs (4xx 6, refused 1, fragment 1)"])
        self.assertEqual(summary[4:6], [
            "Sitemaps: 1 read, listing 4 URLs on the site; 0 entries ignored (off the site, "
            "not valid URLs, or past a limit)",
            "Orphans:  2 URLs in a sitemap that no page links to"])
        self.assertEqual(summary[-2:], ["Pages:    3 (HTML documents fetched with status 200)", ""])


class CLIUserFeedbackTest(ServerTestCase):
    """What a new user tripped over: clear errors, nothing charged to the
    wrong URL, a report that says where to fix a broken link."""

    def test_quiet_still_lists_the_urls_that_failed(self):
        site = self.site({"/": html_page("/a", "/gone"), "/a": html_page("/gone")})
        result = run_in_process("-q", "--no-robots", site.url())
        self.assertEqual(result.returncode, 1, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual(lines[0], f"404 {site.url('/gone')}  text/plain  9 bytes"
                                   f"  <- linked from {site.url('/')} and 1 other page")
        self.assertEqual(lines[1], "")
        self.assertEqual(lines[2], "Statuses: 2xx 2, 4xx 1 (HTTP responses)")
        self.assertNotIn(site.url("/a"), result.stdout)

    def test_unwritable_output_stops_the_crawl_without_blaming_urls(self):
        site = self.site({"/": html_page("/a"), "/a": html_page()})
        result = run_in_process("--no-robots", "-o", "/dev/full", site.url())
        self.assertEqual(result.returncode, 1)
        self.assertNotIn("Traceback", result.stderr)
        self.assertEqual(result.stderr.count("cannot write --output '/dev/full'"), 1, result.stderr)
        self.assertNotIn("[internal]", result.stdout)
        self.assertIn(f"200 {site.url('/')}  text/html", result.stdout)

    def test_a_closed_stdout_pipe_is_not_a_traceback(self):
        # About 100 KB of report, more than a pipe holds, so writing it must
        # hit the closed pipe.
        site = self.site({"/": html_page(*[f"/p{i}-{'x' * 200}" for i in range(400)])})
        command = (f"{sys.executable} {CRAWL_PY} --no-robots "
                   f"{site.url()} | head -n 1")
        result = subprocess.run(["sh", "-c", command], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, universal_newlines=True, timeout=30)
        self.assertEqual(result.stdout.count("\n"), 1)
        self.assertEqual(result.stderr, "")

    def test_a_closed_stdout_pipe_stops_a_crawl_writing_records_there(self):
        site = self.site({"/": html_page(*[f"/p{i}-{'x' * 200}" for i in range(400)])})
        command = f"{sys.executable} {CRAWL_PY} -q --no-robots -o - {site.url()} | head -n 1"
        result = subprocess.run(["sh", "-c", command], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, universal_newlines=True, timeout=30)
        self.assertEqual(json.loads(result.stdout)["url"], site.url())
        self.assertNotIn("Traceback", result.stderr)
        self.assertNotIn("ERROR", result.stderr)
        self.assertIn("INTERRUPTED: ", result.stderr)

    def test_usage_errors_say_what_is_wrong(self):
        cases = {
            "localhost:abc": "invalid port 'abc'",
            "bad..host": "invalid host name 'bad..host': an empty label",
            "::1": "IPv6 addresses need brackets",
            "localhost:0": "invalid port '0'",
            "mailto:someone@example.test": "unsupported URL scheme 'mailto'",
        }
        for root, message in cases.items():
            with self.subTest(root=root):
                status, _, stderr = run_main([root])
                self.assertEqual(status, 2)
                self.assertIn(message, stderr.splitlines()[-1])
        self.assertEqual(crawl.parse_root("localhost:"), "http://localhost/")
        # Read as the URL Standard reads it: any number of slashes before the host.
        self.assertEqual(crawl.parse_root("http:/localhost:8123"), "http://localhost:8123/")
        self.assertEqual(crawl.parse_root("http:///localhost"), "http://localhost/")

    def test_bad_option_values_caught_before_crawling(self):
        with tempfile.NamedTemporaryFile("w", suffix=".pem") as not_pem:
            not_pem.write("not a certificate\n")
            not_pem.flush()
            cases = [(["--cafile", not_pem.name], "not a readable PEM file"),
                     (["--exclude", ""], "matches every URL"),
                     (["--exclude", "x*"], "matches every URL")]
            for args, message in cases:
                with self.subTest(args=args):
                    status, _, stderr = run_main(args + ["localhost:9"])
                    self.assertEqual(status, 2)
                    self.assertIn(message, stderr.splitlines()[-1])

    def test_verbose_logs_robots_and_fetches_and_leaves_logging_as_it_was(self):
        site = self.site({"/": html_page("/a"), "/a": html_page()})
        result = run_cli("-vv", "-q", site.url())
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(f"INFO robots.txt for {site.origin}: 0 rules", result.stderr)
        self.assertIn(f"DEBUG 200 {site.url('/a')}", result.stderr)
        before = crawl.logger.level, crawl.logger.propagate, list(crawl.logger.handlers)
        stderr = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr):
            crawl.main(["-q", "-v", site.url()])
        self.assertIn(f"INFO robots.txt for {site.origin}: 0 rules", stderr.getvalue())
        self.assertEqual((crawl.logger.level, crawl.logger.propagate, crawl.logger.handlers),
                         before)

    def test_log_lines_carry_the_elapsed_time_and_no_trailing_space(self):
        site = self.site({"/": html_page("/a"), "/a": html_page()})
        status, _, stderr = run_main(["-vv", "-q", site.url()])
        self.assertEqual(status, 0, stderr)
        lines = stderr.splitlines()
        self.assertTrue(lines)
        for line in lines:
            self.assertRegex(line, r"^\[\d+\.\ds\] (INFO|DEBUG) \S")
            self.assertEqual(line, line.rstrip())
        self.assertTrue(any(re.fullmatch(rf"\[\d+\.\ds\] DEBUG 200 {re.escape(site.url('/a'))}",
                                         line) for line in lines), stderr)

    def test_a_delay_that_holds_urls_back_is_said_without_verbose(self):
        site = self.site({"/": html_page("/a", "/b"), "/a": html_page(), "/b": html_page()})
        with mock.patch.object(crawl, "EventLoop", VirtualClockLoop):  # no real waiting
            status, _, stderr = run_main(["--delay", "2", "--no-robots", site.url()])
            self.assertEqual((status, stderr.split("] ", 1)[-1]),
                             (0, "INFO --delay sets 2 s between requests to 127.0.0.1: at most "
                                 "30 URLs a minute from it\n"))
            status, _, stderr = run_main(["-q", "--delay", "2", "--no-robots", site.url()])
        self.assertEqual((status, stderr), (0, ""))

    def test_verbose_keeps_the_progress_line_on_a_terminal(self):
        site = self.site({"/": html_page("/a"), "/a": slow_route(0.6, html_page())})

        class Terminal(io.StringIO):
            def isatty(self):
                return True

        terminal = Terminal()
        with contextlib.redirect_stderr(terminal), contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(crawl.main(["-v", site.url()]), 0)
        text = terminal.getvalue()
        self.assertIn("\r1 done, 0 queued, 1 on the wire, 0 waiting, 0 failed, ", text)
        self.assertIn(f"\r\x1b[K[0.0s] INFO robots.txt for {site.origin}: 0 rules\n", text)

    def test_an_on_record_callback_that_raises_is_not_the_urls_fault(self):
        site = self.site({"/": html_page("/a"), "/a": html_page()})

        def broken_callback(record):
            raise RuntimeError("disk on fire")

        with self.assertLogs("crawl", "ERROR") as logs:
            records = crawl.crawl([site.url()], on_record=broken_callback)
        self.assertEqual([(r.url, r.status, r.error) for r in records],
                         [(site.url("/"), 200, None), (site.url("/a"), 200, None)])
        self.assertEqual(len(logs.records), 2)


class CLIProgressTest(LoopTestCase):
    """Feedback while the crawl runs: the progress line's words, the status
    line logged off a terminal."""

    def test_progress_says_what_is_on_the_wire_and_what_waits(self):
        crawler = crawl.Crawler("http://example.test/", client=FakeClient({}))
        crawler.started, crawler.finished = 1000.0, 1004.0
        crawler.in_progress, crawler.fetching, crawler.fetches_started = 10, 1, 2
        self.assertEqual(crawl.progress_text(crawler),
                         "0 done, 0 queued, 1 on the wire, 9 waiting, 0 failed, 0.5 fetches/s")

    @virtual_clock
    def test_verbose_off_a_terminal_logs_a_status_line_every_10_seconds(self):
        crawler = crawl.Crawler("http://example.test/", client=FakeClient({}))
        crawler.started = self.loop.time()
        status = crawl.StatusLog(crawler)

        def run_for_25_seconds():
            status.start()
            yield from crawl.sleep(25)
            status.stop()

        with self.assertLogs("crawl", "INFO") as logs:
            self.run_co(run_for_25_seconds(), 60)
        self.assertEqual([record.getMessage() for record in logs.records], [
            "status: 0 done, 0 queued, 0 on the wire, 0 waiting, 0 failed, 0 fetches/s"] * 2)


class FaultSubprocessTest(ServerTestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="crawl-test-faults-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.output = os.path.join(self.tmp, "records.jsonl")

    @unittest.skipIf(resource is None, "needs the resource module")
    def test_out_of_file_descriptors_slows_the_crawl_but_loses_nothing(self):
        count = 300
        pages = {"/": html_page(*[f"/p{i}" for i in range(count)])}
        for i in range(count):
            pages[f"/p{i}"] = html_page("/", f"/p{(i + 7) % count}")
        site = self.site(pages)

        def lower_the_limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))

        result = run_cli("-q", "--max-tasks", "500", "--no-soft-404", "-o", self.output, site.url("/"),
                                preexec_fn=lower_the_limit)
        self.assertNotIn("Traceback", result.stderr)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        records = read_jsonl(self.output)
        urls = collections.Counter(r["url"] for r in records)
        self.assertEqual(set(urls), {site.url("/")} | {site.url(f"/p{i}") for i in range(count)})
        self.assertEqual(set(urls.values()), {1}, "each page recorded once")
        self.assertEqual({(r["status"], r["error_kind"]) for r in records}, {(200, None)})
        self.assertIn(f"Pages:    {count + 1} (HTML", result.stdout)
        # each page fetched once: waiting for a descriptor is not a try
        self.assertEqual(collections.Counter(site.targets()),
                         collections.Counter(["/robots.txt", "/"] + [f"/p{i}" for i in range(count)]))
        self.assertLessEqual(site.connections, 128)

    def _blocking_site(self):
        """A site whose "/p10" never answers (until the test ends): with
        --max-tasks 1, "/" and "/p0".."/p9" are finished when "/p10" is
        asked for."""
        release = threading.Event()
        self.addCleanup(release.set)
        pages = {"/": html_page(*[f"/p{i}" for i in range(20)])}
        for i in range(20):
            pages[f"/p{i}"] = held_page(release, 30) if i == 10 else html_page()
        site = self.site(pages)
        return site

    def _start_blocked_crawl(self, site):
        process = subprocess.Popen(
            crawl_command("--no-robots", "--max-tasks", "1", "-o", self.output, site.url("/")),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=CLI_ENV)
        self.addCleanup(lambda: process.poll() is None and process.kill())
        wait_until(lambda: "/p10" in site.targets(), what="the request for /p10")
        return process

    def test_sigterm_gives_a_partial_report_flushed_output_and_exit_143(self):
        site = self._blocking_site()
        process = self._start_blocked_crawl(site)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=10)
        self.assertEqual(process.returncode, 143, stderr)
        self.assertNotIn("Traceback", stderr)
        self.assertIn("INTERRUPTED: 10 URLs remained unfetched", stdout)
        self.assertIn("Pages:    11 (HTML", stdout)
        records = read_jsonl(self.output)  # whole lines only, each parsed
        got = {r["url"]: (r["status"], r["error_kind"]) for r in records}
        self.assertEqual(len(records), len(got), "each URL once")
        want = {site.url("/"): (200, None)}
        for i in range(20):
            want[site.url(f"/p{i}")] = (200, None) if i < 10 else (None, "interrupted")
        self.assertEqual(got, want)
        for url, (status, _) in want.items():  # the report lists every URL fetched
            self.assertEqual(url + " " in stdout, status is not None, url)

    def test_sigkill_leaves_whole_lines_and_every_finished_record(self):
        site = self._blocking_site()
        process = self._start_blocked_crawl(site)
        process.kill()
        process.communicate(timeout=10)
        self.assertEqual(process.returncode, -signal.SIGKILL)
        records = read_jsonl(self.output)  # every line parses, no partial last line
        self.assertEqual([(r["url"], r["status"]) for r in records],
                         [(site.url("/"), 200)] + [(site.url(f"/p{i}"), 200) for i in range(10)])

    def test_sigkill_at_a_random_moment_leaves_only_whole_lines(self):
        pages = {"/": html_page(*[f"/p{i}" for i in range(400)])}
        for i in range(400):
            pages[f"/p{i}"] = html_page("/", extra="x" * 2000)
        site = self.site(pages)
        process = subprocess.Popen(
            crawl_command("-q", "--no-robots", "--max-tasks", "20", "-o", self.output, site.url("/")),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=CLI_ENV)
        self.addCleanup(lambda: process.poll() is None and process.kill())
        wait_until(lambda: len(site.targets()) > 50, what="50 requests")
        process.kill()
        process.wait(10)
        records = read_jsonl(self.output)  # every line parses, no partial last line
        self.assertEqual(len({r["url"] for r in records}), len(records))


class BadInputTest(unittest.TestCase):
    """Bad input: one line on stderr after the usage saying what is wrong,
    exit 2, no traceback, nothing fetched."""

    def setUp(self):
        self.site = SiteServer({"/": html_page("/a"), "/a": html_page()})
        self.addCleanup(self.site.close)
        self.root = self.site.url("/")

    def assert_usage_error(self, status, stderr, *fragments):
        self.assertEqual(status, 2, stderr)
        self.assertNotIn("Traceback", stderr)
        lines = stderr.splitlines()
        self.assertTrue(lines and lines[0].startswith("usage: crawl.py"), stderr)
        n = 1
        while n < len(lines) and lines[n][:1].isspace():  # the usage goes on
            n += 1
        rest = lines[n:]
        self.assertEqual(len(rest), 1, f"one line after the usage: {rest}")
        self.assertTrue(rest[0].startswith("crawl.py: error: "), rest[0])
        for fragment in fragments:
            self.assertIn(fragment, rest[0])
        self.assertEqual(self.site.requests, [], "nothing fetched")

    def check(self, argv, *fragments):
        status, stdout, stderr = run_main(argv)
        self.assert_usage_error(status, stderr, *fragments)
        self.assertEqual(stdout, "")

    def test_negative_counts(self):
        for option, minimum in (("--max-tasks", 1), ("--max-tries", 1), ("--max-redirect", 0),
                                ("--max-pages", 1), ("--max-depth", 0), ("--max-size", 1)):
            with self.subTest(option=option):
                self.check([option, "-3", self.root], f"argument {option}",
                           f"must be at least {minimum}", "-3")

    def test_zero_where_zero_means_nothing(self):
        for option in ("--max-tasks", "--max-tries", "--max-pages", "--max-size"):
            with self.subTest(option=option):
                self.check([option, "0", self.root], f"argument {option}", "must be at least 1",
                           "got 0")

    def test_counts_that_are_not_whole_numbers(self):
        for value in ("many", "1.5", "1e3", ""):
            with self.subTest(value=value):
                self.check(["--max-tasks", value, self.root], "argument --max-tasks",
                           "expected a whole number", repr(value))

    def test_bad_seconds(self):
        self.check(["--timeout", "0", self.root], "argument --timeout", "more than 0")
        self.check(["--timeout", "nan", self.root], "argument --timeout")
        self.check(["--delay", "-1", self.root], "argument --delay", "0 or more")
        self.check(["--delay", "soon", self.root], "argument --delay", "expected a number")

    def test_max_redirect_zero_is_accepted_and_follows_no_redirect(self):
        self.site.routes["/"] = redirect("/a")
        status, stdout, stderr = run_main(["-q", "--no-robots", "--no-soft-404", "--max-redirect", "0",
                                                "-o", os.devnull, self.root])
        self.assertNotIn("error:", stderr)
        self.assertEqual(self.site.targets(), ["/"], "the redirect is not followed")
        self.assertEqual(status, 1, "a redirect not followed is reported as a failure")
        self.assertIn("redirect_limit 1", stdout)

    def test_regex_that_does_not_compile(self):
        self.check(["--exclude", "(unclosed", self.root], "argument --exclude",
                   "not a valid regular expression", "'(unclosed'")
        self.check(["--exclude", "*", self.root], "argument --exclude",
                   "not a valid regular expression")

    def test_root_with_an_unsupported_scheme(self):
        for root in ("ftp://x", "file:///etc/passwd", "gopher://127.0.0.1/"):
            with self.subTest(root=root):
                # the good root must not be crawled either: input is checked first
                self.check([self.root, root], "bad root", "unsupported URL scheme",
                           repr(root.split(":")[0]))

    def test_root_with_no_host(self):
        for root in ("http://", "https://", "http:///", "http://:80/"):
            with self.subTest(root=root):
                self.check([root, self.root], "bad root", "no host", repr(root))

    def test_root_with_an_invalid_host_or_port(self):
        # Any host the URL Standard's host parser rejects, or no DNS lookup
        # can carry; the good root must not be crawled either.
        for root, fragment in (("bad..host", "an empty label"), (".git", "an empty label"),
                               ("http://a..b:80/", "an empty label"),
                               ("x" * 64 + ".test", "too long"),
                               ("localhost:abc", "invalid port 'abc'"),
                               ("example.test:99999", "invalid port '99999'"),
                               ("http://1.2.3.4.5/", "invalid IPv4 address"),
                               ("http://256.0.0.1/", "invalid IPv4 address"),
                               ("http://a%zzb/", "invalid character '%'"),
                               ("http://a<b/", "invalid character '<'"),
                               ("http://xn--/", "invalid international host name"),
                               ("http://\u200d.test/", "invalid international host name")):
            with self.subTest(root=root):
                self.check([self.root, root], "bad root", fragment)

    def test_output_path_that_cannot_be_written(self):
        self.check(["-o", "/nonexistent-dir/x.jsonl", self.root], "cannot write --output",
                   "'/nonexistent-dir/x.jsonl'", "No such file or directory")
        with tempfile.TemporaryDirectory() as directory:
            self.check(["-o", directory, self.root], "cannot write --output", directory)

    def test_cafile_that_does_not_exist(self):
        self.check(["--cafile", "/nonexistent-dir/ca.pem", self.root], "--cafile",
                   "'/nonexistent-dir/ca.pem'")

    def test_bad_user_agent_is_a_usage_error_with_no_side_effect(self):
        before = open_fds()
        with tempfile.TemporaryDirectory() as directory:
            output = os.path.join(directory, "out.jsonl")
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                status, stdout, stderr = run_main(
                    ["--user-agent", "bot\r\nX-Injected: 1", "-o", output, self.root])
                gc.collect()
            self.assert_usage_error(status, stderr, "user agent")
            self.assertEqual([str(w.message) for w in caught
                              if issubclass(w.category, ResourceWarning)], [],
                             "the --output file was left open")
            self.assertEqual(open_fds(), before)
            self.assertFalse(os.path.exists(output), "a usage error creates no output file")

    def test_in_a_subprocess(self):
        for args, fragments in (
                (["--max-tries", "0", self.root], ["argument --max-tries", "must be at least 1"]),
                (["-o", "/nonexistent-dir/x.jsonl", self.root], ["cannot write --output"]),
                (["ftp://x"], ["bad root", "unsupported URL scheme"])):
            with self.subTest(args=args):
                result = run_cli(*args, timeout=30)
                self.assertEqual(result.stdout, "")
                self.assert_usage_error(result.returncode, result.stderr, *fragments)


def readme_blocks():
    """The fenced code blocks of README.md: [(language, text)]."""
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as file:
        return re.findall(r"^```(\w*)\n(.*?)^```$", file.read(), re.M | re.S)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ReadmeSnippetTest(unittest.TestCase):
    """Every fenced block of README.md, run as a user would: the http.server
    command serves a small site with one broken link, the shell commands
    and the library code crawl it (localhost:8000 and xkcd.com become that
    server), and the sample report is what the crawl prints, but for the
    numbers (sizes, times)."""

    SITE = {
        "index.html": '<!doctype html><title>Home</title><a href="about.html">About</a> '
                      '<a href="docs/">Docs</a> <a href="missing.html">Old page</a> '
                      '<a href="https://example.com/">elsewhere</a>',
        "about.html": '<!doctype html><title>About</title><a href="/">Home</a> '
                      '<a href="missing.html">Old page</a>',
        "docs/index.html": '<!doctype html><title>Docs</title><a href="guide.html">Guide</a>',
        "docs/guide.html": '<!doctype html><title>Guide</title>'
                           '<a href="../missing.html">Old page</a>',
    }

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="crawl-test-readme-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.site_dir = os.path.join(cls.tmp, "site")
        for name, text in cls.SITE.items():
            path = os.path.join(cls.site_dir, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as file:
                file.write(text)
        cls.work = os.path.join(cls.tmp, "work")
        os.mkdir(cls.work)
        cls.blocks = readme_blocks()
        cls.port = free_port()
        serve = cls.blocks[1][1].strip()
        command = cls.substitute(cls, serve).replace("/path/to/some/html", cls.site_dir)
        server = subprocess.Popen(command, shell=True, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True)
        cls.addClassCleanup(server.wait, 10)
        cls.addClassCleanup(os.killpg, server.pid, signal.SIGTERM)

        def listening():
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", cls.port)) == 0

        wait_until(listening, what="the README's http.server")

    def test_the_blocks_are_the_ones_this_test_runs(self):
        self.assertEqual([language for language, _ in self.blocks],
                         ["sh", "sh", "sh", "text", "sh", "sh", "sh", "python"])
        self.assertTrue(self.blocks[1][1].startswith("python3 -m http.server "))

    def substitute(self, text):
        """The README's text with its host names and commands made local."""
        return (text.replace("localhost:8000", f"127.0.0.1:{self.port}")
                .replace("xkcd.com", f"127.0.0.1:{self.port}")
                .replace(" 8000", f" {self.port}")
                .replace("python3 crawl.py", "PYTHON " + CRAWL_PY)
                .replace("python3 ", "PYTHON ").replace("PYTHON ", sys.executable + " "))

    def run_shell(self, block):
        return subprocess.run(self.substitute(block), shell=True, cwd=self.work,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=60)

    def test_the_sample_report_is_what_the_crawl_prints(self):
        crawl_command, sample = self.blocks[2][1], self.blocks[3][1]
        result = self.run_shell(crawl_command)
        self.assertEqual(result.returncode, 1, result.stderr)

        def shape(text):  # sizes and times vary with the files and the machine
            return re.sub(r"\d+(\.\d+)?", "N", self.substitute(text)).split("\n")

        self.assertEqual(shape(result.stdout), shape(sample))
        self.assertEqual(result.stderr, "")

    def test_the_first_example_and_the_recipes(self):
        urls = {f"http://127.0.0.1:{self.port}{path}" for path in
                ("/", "/about.html", "/docs/", "/docs/guide.html", "/missing.html")}
        first = self.run_shell(self.blocks[0][1])
        self.assertEqual(first.returncode, 1, first.stderr)
        self.assertIn("URLs:     5 in ", first.stdout)
        link_check = self.run_shell(self.blocks[4][1])
        self.assertEqual(link_check.returncode, 1, link_check.stderr)
        self.assertTrue(link_check.stdout.startswith(
            f"404 http://127.0.0.1:{self.port}/missing.html "), link_check.stdout)
        with_jq, with_python = self.blocks[5][1], self.blocks[6][1]
        if shutil.which("jq"):
            listed = self.run_shell(with_jq)
            self.assertEqual((listed.returncode, listed.stderr), (0, ""))
            self.assertEqual(set(listed.stdout.split()), urls)
        failed = self.run_shell(with_python)
        self.assertEqual((failed.returncode, failed.stderr), (0, ""))
        # The pages known to link to it when it failed: one at least.
        origin = f"http://127.0.0.1:{self.port}"
        missing, *referrers = failed.stdout.split()
        self.assertEqual(missing, f"{origin}/missing.html")
        self.assertTrue(referrers, failed.stdout)
        self.assertEqual(referrers, sorted(referrers))
        self.assertLessEqual(set(referrers), {f"{origin}/", f"{origin}/about.html",
                                              f"{origin}/docs/guide.html"})

    def test_the_library_example(self):
        code = self.substitute(self.blocks[7][1])
        result = subprocess.run([sys.executable, "-c", code], cwd=self.work,
                                env=dict(os.environ, PYTHONPATH=HERE), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        origin = f"http://127.0.0.1:{self.port}"
        lines = result.stdout.splitlines()
        self.assertEqual(lines[0], f"{origin}/missing.html 404 None linked from "
                                   f"['{origin}/', '{origin}/about.html', "
                                   f"'{origin}/docs/guide.html']")
        self.assertEqual(lines[-1], f"(200, 'text/html', {len(self.SITE['index.html'])})")
        self.assertEqual(len(read_jsonl(os.path.join(self.work, "links.jsonl"))), 5)


# ---------------------------------------------------------------------------
# 11. Making it fast
# ---------------------------------------------------------------------------


class ScanLinksStandardTest(unittest.TestCase):
    """scan_links() is the HTML Standard's tokenizer: each case is markup
    and the raw link values a browser takes from it (html.parser, on every
    supported Python, differs on many of them)."""

    def assertLinks(self, cases):
        for text, expected in cases:
            with self.subTest(text=text):
                self.assertEqual([raw for raw, _ in crawl.scan_links(text).links], expected)

    def test_character_references_in_attribute_values(self):
        self.assertLinks([
            # A legacy name without ";" before "=" or an alphanumeric stays text.
            ('<a href="/p?id=7&currency=EUR">', ["/p?id=7&currency=EUR"]),
            ('<a href="/f?a=1&param=2">', ["/f?a=1&param=2"]),
            ('<a href="/s?q=x&region=eu">', ["/s?q=x&region=eu"]),
            ('<a href="/t?section=3&lt=4">', ["/t?section=3&lt=4"]),
            ("<a href=/u?a&amp=1&copy2>", ["/u?a&amp=1&copy2"]),
            ('<a href="/v?&notit;&notin;&not;x">', ["/v?&notit;\u2209\u00acx"]),
            # ... and is decoded before anything else.
            ('<a href="/w?a=1&amp;b=2&amp-c&lt.&copy">', ["/w?a=1&b=2&-c<.\u00a9"]),
            ('<a href="/x&nosuchname;&AMP;&#;&#x;&">', ["/x&nosuchname;&&#;&#x;&"]),
            # Numeric references: controls kept, 0x80-0x9F by the table, U+FFFD.
            ('<a href="/n&#x0001;&#65&#x42;">', ["/n\x01AB"]),
            ('<a href="/n&#x80;&#150;&#x9f;&#x81;">', ["/n\u20ac\u2013\u0178\x81"]),
            ('<a href="/n&#0;&#xD800;&#x110000;&#99999999999;">', ["/n\ufffd\ufffd\ufffd\ufffd"]),
            # Thousands of digits (more than int() converts): leading zeros
            # count for nothing, and past 0x10FFFF it is U+FFFD.
            ('<a href="/n&#' + "0" * 5000 + "65;&#x" + "0" * 5000 + "42;&#" + "9" * 5000 + ';">',
             ["/nAB\ufffd"]),
            # NUL in an attribute value is U+FFFD.
            ('<a href="/nul\x00x">', ["/nul\ufffdx"]),
            ("<a href=/nul\x00y>", ["/nul\ufffdy"]),
        ])

    def test_the_url_a_browser_requests(self):
        links, _ = crawl.extract_links('<a href="/p?id=7&currency=EUR">x</a><a href="/q&para=2">'
                                       '<a href="/n\x00">', "http://h.test/")
        self.assertEqual(links, ["http://h.test/p?id=7&currency=EUR", "http://h.test/q&para=2",
                                 "http://h.test/n%EF%BF%BD"])

    def test_text_only_elements_hold_no_links(self):
        self.assertLinks([
            ("<title><a href=/t></title><a href=/1>", ["/1"]),
            ("<textarea><a href=/t></textarea><a href=/2>", ["/2"]),
            ("<xmp><a href=/t></xmp><a href=/3>", ["/3"]),
            ("<noembed><a href=/t></noembed><a href=/4>", ["/4"]),
            ("<noframes><a href=/t></noframes><a href=/5>", ["/5"]),
            ("<iframe src=/f><a href=/t></iframe><a href=/6>", ["/f", "/6"]),
            ("<style>a[href='<a href=/t>']{}</style><a href=/7>", ["/7"]),
            ("<plaintext><a href=/t></plaintext><a href=/u>", []),
            ("<TITLE>x</TiTlE ><a href=/8>", ["/8"]),
            ("<title>x</titles><a href=/t></title x='>'><a href=/9>", ["/9"]),
            ("<textarea><a href=/t>", []),  # never closed: the rest is text
            ("<noscript><a href=/10></noscript>", ["/10"]),  # scripting off
            ("<script/><a href=/t></script><a href=/11>", ["/11"]),  # "/>" changes nothing
        ])

    def test_script_data(self):
        self.assertLinks([
            ('<script>var s="<a href=/t>";</SCRIPT><a href=/1>', ["/1"]),
            ('<script><!--\ndocument.write("<script></script><a href=/t>")\n--></script>'
             '<a href=/2>', ["/2"]),
            ("<script><!--<script></script><a href=/t></script><a href=/3>", ["/3"]),
            ("<script><!--></script><a href=/4>", ["/4"]),
            ("<script></scripty><a href=/t></script><a href=/5>", ["/5"]),
            ("<script><a href=/t>", []),
        ])

    def test_comments_end_where_a_browser_ends_them(self):
        self.assertLinks([
            ("<!--><a href=/1>", ["/1"]),
            ("<!---><a href=/2>", ["/2"]),
            ("<!-- x --!><a href=/3>", ["/3"]),
            ("<!-- <a href=/t> -- ><a href=/t2> --><a href=/4>", ["/4"]),
            ("<!----><a href=/5>", ["/5"]),
            ("<!-- unclosed <a href=/t>", []),
            ("<!DOCTYPE html><?php x ?><a href=/6>", ["/6"]),
            ("<![CDATA[ <a href=/t> ]]><a href=/7>", ["/7"]),  # a bogus comment up to ">"
            ("<![CDATA[ x ]]><a href=/8>", ["/8"]),
            ("</ x><a href=/9></><a href=/10>", ["/9", "/10"]),
            ("<! bogus <a href=/t>", []),
        ])

    def test_tags_as_the_tokenizer_reads_them(self):
        self.assertLinks([
            ('<a title="a>b" href="/1">', ["/1"]),
            ('<a href="/2"title="x">', ["/2"]),  # no space needed after a quoted value
            ("<a =href=/t href=/3>", ["/3"]),  # "=href" is an attribute name
            ('<a href="/4" href="/t">', ["/4"]),
            ("<a/href=/5>", ["/5"]),
            ("<a href=/6/>", ["/6/"]),
            ("<a href>", [""]),
            ('<a b"href=/t>', []),
            ("<a\nhref\n=\n'/7'\n>", ["/7"]),
            ("<a\x0bhref=/t>", []),  # U+000B is not whitespace in HTML
            ('</p title="<a href=/t>"><a href=/8>', ["/8"]),
            ("<p <a href=/9>", []),  # "<a" is an attribute of <p>
            ('<a href="/unclosed', []),
            ("<a href=/10><<a href=/11>", ["/10", "/11"]),
            ("<a-b href=/t><abbr href=/t><ab href=/t>", []),
            ("<a\u212a href=/t><lin\u212a rel=stylesheet href=/t>", []),
        ])

    def test_judgement_calls(self):
        self.assertLinks([
            ("<frame src=/t>", []),  # ignored outside a frameset
            ("<frameset><frame src=/1></frameset>", ["/1"]),
            ("<svg><a href=/2><text>x</text></a></svg>", ["/2"]),
            ("<select><option><a href=/3>x</a></select>", ["/3"]),
            # Not tracked (see crawl.py): foreign content, frameset-ok and
            # the "in frameset" mode. A browser: /s.png, no /c, /f, no /f2.
            ("<svg><style><img src=/s.png></style></svg>", []),
            ("<svg><![CDATA[ > <a href=/c> ]]></svg>", ["/c"]),
            ("<frameset><script><frame src=/f></script>", []),
            ("x<frameset><frame src=/f2>", ["/f2"]),
        ])

    def test_base_and_nofollow(self):
        found = crawl.scan_links("<title><base href=/t></title><base href=/b>"
                                 "<!-- <meta name=robots content=nofollow> -->")
        self.assertEqual((found.base, found.nofollow), ("/b", False))
        found = crawl.scan_links("<META NAME=robots CONTENT='noindex,NOFOLLOW' ><a href=/x>")
        self.assertTrue(found.nofollow)

    def test_garbage_with_no_closing_bracket(self):
        text = "<a href=/first>" + "<div a" * 800
        self.assertEqual(crawl.scan_links(text).links, [("/first", "link")])
        text = "<a href=/first>" + "<a b" * 800 + " href=/one-tag>"  # attributes b<a ... href
        self.assertEqual(crawl.scan_links(text).links, [("/first", "link"), ("/one-tag", "link")])

    def test_time_is_linear_in_the_input(self):
        # Hostile shapes for a backtracking regex engine (a tag, name or
        # value never closed, each shape repeated): reading one text of 4n
        # characters must cost about what reading one of n costs four
        # times. A quadratic path costs four times that (about a second for
        # the larger text). CPU time, best of three, with a floor for tiny
        # times.
        shapes = [
            (crawl.scan_links, "<a", "x"), (crawl.scan_links, "<b", "x"),
            (crawl.scan_links, "<a", "\x00"), (crawl.scan_links, "</a", "x"),
            (crawl.scan_links, "<script", "x"), (crawl.scan_links, "<b", "x='y'"),
            (crawl.scan_links, "", "<a"), (crawl.scan_links, "<", "x=y"),
            (crawl.scan_links, "<b x", "y"), (crawl.scan_links, "<a x=", "y"),
            (crawl.scan_links, "<b x='", "y"), (crawl.scan_links, "<a ", "x=y "),
            (crawl.scan_links, "", "<b x"), (crawl.scan_links, "", "<!--"),
            (crawl.scan_links, "<script>", "<!--<script>"), (crawl.scan_links, "", "&#1"),
            (crawl.scan_links, "<meta", " x=y"), (crawl.scan_links, "<a class=x", " x=y"),
            (crawl.scan_links, "<script type=a", " x=y"), (crawl.scan_links, "<title x=y", " x"),
            (crawl.scan_links, "<img", " x=y"), (crawl.scan_links, "<img src=x", " x=y"),
            (crawl.scan_links, "", "<img src=x "), (crawl.scan_links, "<p", " a= b"),
            (crawl.scan_links, "<meta", " a =b"), (crawl.scan_links, "<a", ' a="b"'),
            (crawl.srcset_urls, "a ", "("), (crawl.srcset_urls, "", "a,"),
            (crawl.css_links, "", "url("), (crawl.css_links, "", "url(\\"),
            (crawl.css_links, "url(", "\\aaaaaa"), (crawl.css_links, "", "\\75"),
            (crawl.css_links, "", '"'), (crawl.css_links, "", "/*"),
            (crawl.css_links, "", "a\\"), (crawl.css_links, "@import", "ab\\41"),
        ]

        def cpu(function, text, times):
            best = float("inf")
            for _ in range(3):
                start = time.process_time()
                for _ in range(times):
                    function(text)
                best = min(best, time.process_time() - start)
            return best

        n = 2000
        for function, prefix, filler in shapes:
            with self.subTest(function=function.__name__, prefix=prefix, filler=filler):
                small = prefix + filler * (n // len(filler))
                large = prefix + filler * (4 * n // len(filler))
                self.assertLess(cpu(function, large, 1), 2.5 * max(cpu(function, small, 4), 0.01))

    def test_shapes_read_in_one_step(self):
        # _SKIP takes the plain <a href> and the plain tags that name
        # nothing without Python; these are the edges of those shapes.
        self.assertLinks([
            ('<a class="x y" href="/1" title=\'t\'>', ["/1"]),
            ("<A HREF='/2'/><a\thref=/3\n>", ["/2", "/3"]),
            ('<a href="/4&amp;x"><a href=/5&lt><a href="/6\x00">', ["/4&x", "/5<", "/6\ufffd"]),
            ("<a rel=nofollow href=/t><a href=/t REL='nofollow x'><a href=/7 rel=next>",
             ["/7"]),
            # a rel that cannot say nofollow is read in the same step; one
            # that has "nofollow" in it, or a reference, is read by Python
            ('<a href=/17 rel="alternate"><a REL=\'Next Prev\' href=/18><a rel=nofollowx href=/19>',
             ["/17", "/18", "/19"]),
            ('<a rel="x&#110;ofollow" href=/20><a rel="&#110;ofollow" href=/t><a rel="a\tNoFollow" href=/t>',
             ["/20"]),
            ('<a rel=alternate rel=nofollow href=/21><a rel=nofollow rel=alternate href=/t>', ["/21"]),
            # <link> with a rel that names a resource, before or after the href
            ('<link rel=stylesheet href=/c1><link href="/c2" rel="alternate stylesheet" media=all>'
             "<LINK REL='Shortcut Icon' hreflang=x href=/c3><link href=/c4 rel=\"x icon\" href=/t>",
             ["/c1", "/c2", "/c3", "/c4"]),
            ('<link rel=canonical href=/t><link rel="my-icon" href=/t><link href=/c5 rel="icon&#32;x">'
             '<link rel=icon rel=canonical href=/c6><link rel=canonical rel=icon href=/t><link rel=icon>',
             ["/c5", "/c6"]),
            ('<a href="/8" href="/t"><a hrefx=/t href=/9><a data-href=/t href="">',
             ["/8", "/9", ""]),
            ('<a href=/10 title="<a href=/t>"><a title=">" href=/11>', ["/10", "/11"]),
            ("<title>x</title><a href=/12><title>a<a href=/t></title><a href=/13>",
             ["/12", "/13"]),
            ("<script type=module>x</script><a href=/14><script async src=/s.js></script>",
             ["/14", "/s.js"]),
            ("<style media=all>p{}</style><STYLE>a<a href=/t></style><a href=/15>", ["/15"]),
            ("<meta charset=utf-8><meta/><META content=x><a href=/16>", ["/16"]),
        ])
        self.assertEqual(crawl.scan_links("<a href=/x><img src=/i><link rel=icon href=/c>").links,
                         [("/x", "link"), ("/i", "img src"), ("/c", "link href")])
        for text in ('<a href=/17 rel="alternate">', "<a REL='Next Prev' href=/18>", "<a href=x>",
                     '<link href="/c2" rel="alternate stylesheet" media=all>', "<link rel=icon href=x>"):
            with self.subTest(text=text):  # one match of _SKIP holds the value
                self.assertIn(crawl._SKIP.match(text).lastindex, crawl._FAST_LINK_VIA)
        self.assertNotIn(crawl._SKIP.match("<a rel=nofollowx href=/19>").lastindex,
                         crawl._FAST_LINK_VIA)
        # <img src> likewise, unless a srcset adds links
        self.assertLinks([
            ('<img alt="" src="/i1"><IMG SRC=/i2 /><img\nsrc=\'/i3\' width=1>', ["/i1", "/i2", "/i3"]),
            ('<img src="/i4&amp;x"><img src=/i5 srcset="/i6 2x"><img srcset="/i7 1x" src=/i8>',
             ["/i4&x", "/i5", "/i6", "/i8", "/i7"]),
            ('<img src="/i9" src="/t"><imgx src=/t><img data-src=/t src=/i10><image src=/i11>',
             ["/i9", "/i10", "/i11"]),
        ])
        self.assertEqual(crawl.scan_links('<img alt="" src="/i"><img src=/j srcset="/k 2x">').links,
                         [("/i", "img src"), ("/j", "img src"), ("/k", "img srcset")])
        found = crawl.scan_links("<meta charset=utf-8><meta Name=robots content=none><a href=/x>")
        self.assertTrue(found.nofollow)

    def test_tags_a_pattern_could_read_two_ways(self):
        # Where a regex that backtracks could find a second reading of a
        # tag (the scanner's possessive repeats and atomic groups, from
        # 3.11.5 on, must not change which one is taken): a "/" in an
        # unquoted value, a quote or "=" that opens no value, ">" in one.
        self.assertLinks([
            ("<a x=y/ href=/1><p x=y/><a href=/2/><a href=/3 x=y/>", ["/1", "/2/", "/3"]),
            ("<img src=/4/><IMG alt='' src=/5 / ><meta name=x/><a href=/6>", ["/4/", "/5", "/6"]),
            ('<P TITLE="a>b" CLASS=c><a href=/7><p a"b=\'<a href=/t>\'><a href=/8>', ["/7", "/8"]),
            ('<p ="<a href=/t>"><a href=/9><p="x>"<a href=/10>', ["/9", "/10"]),
            ('<p\t/ a="1"="x>y" ><a href=/11><td class="x" <a href=/t>', ["/11"]),
        ])

    def test_tags_with_more_attributes_than_one_pattern_repeats(self):
        # Past crawl._ATTRIBUTES_AT_ONCE attributes, a tag is read in runs:
        # the same links as with one attribute, start tag or end tag.
        at_once = crawl._ATTRIBUTES_AT_ONCE
        for n in (1, at_once - 1, at_once, at_once + 1, 2 * at_once + 1):
            with self.subTest(n=n):
                self.assertLinks([
                    ("<a" + " x=y" * n + " href=/h>", ["/h"]),
                    ('<p x="<a href=/t>"' + ' x=""' * n + "><a href=/after>", ["/after"]),
                    ("</a" + " x" * n + " href=/t><img src=/i>", ["/i"]),
                    ("<img" + " x/" * n + ' src=/s srcset="/w 2x">', ["/s", "/w"]),
                    ("<script" + ' x=""' * n + "><a href=/t></script><a href=/u>", ["/u"]),
                    ("<a" + ' x=""' * n + " rel=nofollow href=/t><a href=/v", []),
                ])
                found = crawl.scan_links("<meta" + " x=1" * n + " name=robots content=none>")
                self.assertTrue(found.nofollow)

    def test_memory_stays_within_a_few_times_the_page_on_long_repeats(self):
        # The regex engine keeps a few hundred bytes for each repetition
        # while it matches: one tag of 100,000 attributes in one match took
        # 40-100 MB (a 10 MB page, 1.3 GB), a long srcset 170 bytes a
        # character.
        pages = ["<a " * 100_000 + "href=/x>", "<p " + 'x=""' * 100_000 + "><a href=/x>",
                 "<p " + 'x="" ' * 100_000 + "><a href=/x>", "<a " + "x=y " * 100_000 + "href=/x>",
                 "</script " + 'x=""' * 100_000 + "><a href=/x>",
                 "<link" + " x=y" * 999 + " rel=icon" + " x=y" * 999 + " href=/x" + " x=y" * 98_000 + ">",
                 '<img srcset="/x ' + "y" * 300_000 + '">']
        for page in pages:
            with self.subTest(page=page[:16]):
                tracemalloc.start()
                try:
                    found = crawl.scan_links(page)
                    peak = tracemalloc.get_traced_memory()[1]
                finally:
                    tracemalloc.stop()
                self.assertEqual([raw for raw, _ in found.links], [] if "srcset" in page else ["/x"])
                self.assertLess(peak, 5 * len(page))

    def test_the_attributes_read_are_those_link_from_tag_reads(self):
        # _scan_construct keeps only the attributes in _ATTRIBUTES_READ:
        # every one link_from_tag() asks for must be there.
        asked = set()

        def first(attrs, name):
            asked.add(name)
            return {"rel": "stylesheet", "type": "image", "name": "robots"}.get(name, "x")

        for tag in crawl._SCAN_TAGS:
            found = crawl._FoundLinks()
            found.frameset = True
            crawl.link_from_tag(found, tag, [], first)
        self.assertLessEqual(asked, crawl._ATTRIBUTES_READ)
        self.assertIn("content", asked)

    def test_more_constructs_than_one_skip_takes(self):
        text = "<p>x</p>" * 30000 + "<a href=/last>" + "<!-- c -->" * 30000 + "<a href=/end>"
        self.assertEqual(crawl.scan_links(text).links, [("/last", "link"), ("/end", "link")])



class LinkResolverTest(unittest.TestCase):
    """LinkResolver.resolve() gives normalize_url()'s answer, with its fast
    path for plain links and its bounded cache for the others."""

    BASES = ("http://h.test/a/b/c.html?q=1", "https://h.test/", "http://h.test:81/d/",
             "http://h.test/a//b/c")
    LINKS = ("x.html", "x/", "./x", "././x/y/", "/x", "/./x", "x?b=1&c", "x?", "x#f",
             "x?y#z", "x.y..z", "~u/x-y_z", "../x", "../../../../x/y?z", "./../x",
             ".././x", "/../x", "../", "..//x", "../.x", "x//y", "/", ".", "..", "x/../y",
             "x/./y", "?q", "#f", "", " x", "x ", "x\ty", "X%41", "%2e%2E/x", "x:y",
             "//g.test/x", "HTTP://G.test", "-", "a.", "_/_/", "\u00e9", "x?%41", "x?a b",
             "http://[::1", "mailto:x@h.test", "x/.y", "x/y/.", "x/y//", "x?y#/./z", "../../x.y/z/",
             "./../../x", "#", "#/../x", " #f")

    def test_every_link_resolves_as_normalize_url_does(self):
        for base in self.BASES:
            resolver = crawl.LinkResolver(base)
            for raw in self.LINKS:
                with self.subTest(base=base, raw=raw):
                    try:
                        expected = crawl.normalize_url(raw, base)
                    except ValueError as error:
                        expected = str(error)
                    result = resolver.resolve(raw)
                    if isinstance(result, ValueError):
                        result = str(result)
                    self.assertEqual(result, expected)

    def test_a_normalized_base_is_split_as_normalize_url_splits_it(self):
        bases = ["http://h.test/a/b/c.html?q=1", "https://h.test/", "http://h.test:81/d/",
                 "http://127.0.0.1:8080/p/1.html", "http://h.test/a?", "http://h.test/a?b=1&c",
                 "https://h.test:80/", "http://xn--fa-hia.example/", "http://h.test./~u/",
                 # not normalized, or not valid: normalize_url() decides
                 "http://h.test/a//b/c", "http://127.0.0.1:80/x", "https://h.test:443/",
                 "http://H.test/", "http://0x7f.1/", "http://1.2.3/", "http://h.test",
                 "http://h.test/./a", "http://h.test/a/../b", "http://h.test:0099/",
                 "http://h.test/a%41", "http://h.test/a#f"]
        for base in bases:
            with self.subTest(base=base):
                normalized = crawl.normalize_url(base)
                scheme, _, rest = normalized.partition("://")
                authority, slash, path = rest.partition("/")
                path, question, query = (slash + path).partition("?")
                expected = (scheme, authority, path, query if question else None)
                with mock.patch.object(crawl, "_BASES", {}):
                    self.assertEqual(crawl.split_base(base), expected)
                fast = crawl._normalized_base_parts(base)
                self.assertIn(fast, (None, expected))
                if base != normalized:
                    self.assertIsNone(fast)
        for base in ("http://h.test:65536/", "http://xn--bad/", "http://a..b/", "http://256.1.1.1/"):
            with self.subTest(base=base):
                self.assertIsNone(crawl._normalized_base_parts(base))
                with self.assertRaises(ValueError):
                    crawl.split_base(base)

    def test_plain_links_skip_the_cache(self):
        resolver = crawl.LinkResolver("http://h.test/a/b/c.html")
        with mock.patch.object(crawl.LinkResolver, "_cache", {}) as cache:
            self.assertEqual(
                [resolver.resolve(raw) for raw in ("d.html", "../d.html?v=1", "/e/#top", "../../f/")],
                ["http://h.test/a/b/d.html", "http://h.test/a/d.html?v=1",
                 "http://h.test/e/", "http://h.test/f/"])
            self.assertEqual(cache, {})
            self.assertEqual([resolver.resolve(raw) for raw in ("", "#top", "#")], [None] * 3)
            self.assertEqual(cache, {})
            self.assertEqual(resolver.resolve("d%7e.html"), "http://h.test/a/b/d~.html")
            self.assertEqual(resolver.resolve("d/./e"), "http://h.test/a/b/d/e")
            self.assertEqual(len(cache), 2)

    def test_the_directories_above_are_kept_once_per_level(self):
        # A page may spell "one level up" in thousands of ways: one entry.
        resolver = crawl.LinkResolver("http://h.test/a/b/c/d.html")
        for n in range(50):
            self.assertEqual(resolver.resolve("./" * n + "../x"), "http://h.test/a/b/x")
            self.assertEqual(resolver.resolve("../" + "./" * n + "y"), "http://h.test/a/b/y")
        self.assertEqual(resolver._above, {1: "http://h.test/a/b/"})

    def test_the_cache_stays_within_its_bound(self):
        resolver = crawl.LinkResolver("http://h.test/")
        with mock.patch.object(crawl.LinkResolver, "_cache", {}) as cache, \
                mock.patch.object(crawl.LinkResolver, "MAX_ENTRIES", 50):
            for n in range(500):
                self.assertEqual(resolver.resolve(f"%7e{n}"), f"http://h.test/~{n}")
                self.assertLessEqual(len(cache), 50)


if __name__ == "__main__":
    unittest.main()
