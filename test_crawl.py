# Copyright (c) 2026 The crawl.py authors
# SPDX-License-Identifier: MIT
"""Tests for crawl.py. Run: python -m unittest -v test_crawl

Every test serves its own pages from servers embedded here, on 127.0.0.1:
SiteServer (http.server, threaded, HTTP/1.1 keep-alive) for ordinary pages,
RawServer (plain sockets) for the malformed bytes real servers send. Nothing
touches the internet.
"""

import atexit
import errno
import gc
import gzip
import http.server
import io
import json
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
import unittest
import urllib.parse
import zlib

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

_CERT_DIR = tempfile.mkdtemp(prefix="crawl-test-cert-")
CERT_FILE = os.path.join(_CERT_DIR, "cert.pem")
KEY_FILE = os.path.join(_CERT_DIR, "key.pem")
with open(CERT_FILE, "w") as _f:
    _f.write(TEST_CERT)
with open(KEY_FILE, "w") as _f:
    _f.write(TEST_KEY)


atexit.register(shutil.rmtree, _CERT_DIR, True)  # removed when the test run ends


def server_tls_context():
    """An SSLContext for the test servers, with the embedded certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(CERT_FILE, KEY_FILE)
    return context


def client_tls_context():
    """An SSLContext that trusts the embedded certificate (and verifies it)."""
    context = ssl.create_default_context(cafile=CERT_FILE)
    return context


def open_fds():
    """The set of this process's open file descriptors (Linux)."""
    return set(os.listdir("/proc/self/fd"))


def has_ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
        return True
    except OSError:
        return False


# ---------------------------------------------------------------------------
# Embedded servers
# ---------------------------------------------------------------------------


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

        self.server = Server((host, 0), Handler)
        if tls:
            self.server.socket = server_tls_context().wrap_socket(self.server.socket, server_side=True)
        self.host = host
        self.port = self.server.server_address[1]
        self.scheme = "https" if tls else "http"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
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


class LoopTestCase(unittest.TestCase):
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
