"""A hostile or slow remote cache cannot grow kiln or hold a build (issue 31, items 4 and 5).

Fake servers of the test's own, on 127.0.0.1 only, each stopping by itself: a Redis that answers
GET with `$100000000000` and streams bytes, one that sends a byte every 2 s, and an HTTP cache that
does the same. A pure package built from a local archive reaches the remote at once (its wheel's
entry.json is the first GET), so each case costs a few seconds:
- a reply announcing 10^11 bytes is refused before its body is read: kiln's peak RSS stays small,
  one warning, the build finishes locally (and stores its wheel);
- with KILN_REMOTE_DEADLINE=3s a server that trickles is cut off at the deadline: one warning,
  the remote off, the build finishes locally within seconds (not when the server gives up);
- SIGTERM during a slow GET ends kiln within 2 s with exit 130, without a remote warning.
"""

import http.server
import os
import re
import signal
import socket
import subprocess
import threading
import time
import unittest

from kilntest import KILN, SourceTestCase

HUGE = 100_000_000_000   # what the hostile servers announce
STREAMED = 512 << 20     # what they send of it at most
LIFETIME = 30            # seconds a fake server trickles at most before it hangs up
REMOTE_WARNING = re.compile(r"^kiln: warning: remote cache", re.M)


def stream(send, stop):
    """Sends up to STREAMED bytes in 64 KiB chunks (until the client hangs up or `stop`)."""
    chunk = b"x" * 65536
    sent = 0
    while sent < STREAMED and not stop.is_set():
        try:
            send(chunk)
        except OSError:
            return
        sent += len(chunk)


def trickle(send, stop):
    """Sends one byte every 2 s for at most LIFETIME seconds (until the client hangs up)."""
    end = time.time() + LIFETIME
    while time.time() < end and not stop.wait(2):
        try:
            send(b"x")
        except OSError:
            return


class FakeRedis:
    """Just enough RESP for kiln: GET is answered by `mode` ('huge' or 'slow'); SET, AUTH, SELECT
    and EVAL with +OK or :0. Connections are served one at a time; `got_get` is set at the first
    GET."""

    def __init__(self, mode):
        self.mode = mode
        self.stop = threading.Event()
        self.got_get = threading.Event()
        self.commands = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def close(self):
        self.stop.set()
        self.thread.join(timeout=LIFETIME + 10)
        self.listener.close()

    def run(self):
        end = time.time() + 3 * LIFETIME
        while not self.stop.is_set() and time.time() < end:
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(LIFETIME)
                try:
                    self.serve(conn)
                except OSError:
                    pass

    def serve(self, conn):
        reader = conn.makefile("rb")
        while not self.stop.is_set():
            head = reader.readline()
            if not head.startswith(b"*"):
                return
            args = []
            for _ in range(int(head[1:])):
                length = int(reader.readline()[1:])
                args.append(reader.read(length + 2)[:-2])
            name = args[0].upper()
            self.commands.append(name.decode())
            if name == b"GET":
                self.got_get.set()
                conn.sendall(b"$%d\r\n" % (HUGE if self.mode == "huge" else 1000))
                (stream if self.mode == "huge" else trickle)(conn.sendall, self.stop)
                return  # hang up: the reply can never be completed
            conn.sendall(b":0\r\n" if name == b"EVAL" else b"+OK\r\n")


class FakeHttpCache:
    """An HTTP cache whose GETs announce 10^11 bytes and stream ('huge') or trickle ('slow');
    PUTs are answered 201."""

    def __init__(self, mode):
        outer = self
        self.stop = threading.Event()
        self.got_get = threading.Event()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.got_get.set()
                self.send_response(200)
                self.send_header("Content-Length", str(HUGE if mode == "huge" else 1000))
                self.end_headers()
                (stream if mode == "huge" else trickle)(self.wfile.write, outer.stop)
                self.close_connection = True

            def do_PUT(self):
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self.send_response(201)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/cache/"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.2,), daemon=True)
        self.thread.start()

    def close(self):
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


class RemoteLimitsTest(SourceTestCase):
    def setUp(self):
        super().setUp()
        self.local_archive("demo-1.0.0.tar.gz", self.good_sdist())

    def fake(self, cls, mode):
        server = cls(mode)
        self.addCleanup(server.close)
        return server

    def start(self, server, env=None):
        """`kiln build demo` against `server`, its output in files; returns (process, start time)."""
        self.out = open(self.tmp / "out.txt", "w+")
        self.err = open(self.tmp / "err.txt", "w+")
        self.addCleanup(self.out.close)
        self.addCleanup(self.err.close)
        full_env = {**os.environ, "KILN_CACHE": str(self.fresh_cache(f"c{time.time_ns()}")),
                    **(env or {})}
        full_env.pop("KILN_MANIFESTS", None)
        proc = subprocess.Popen([KILN, "build", "demo", "--remote-cache", server.url],
                                cwd=self.project, env=full_env, stdout=self.out, stderr=self.err)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        return proc, time.monotonic()

    def finish(self, proc, limit):
        """Waits up to `limit` s: (exit code, stderr, peak RSS in MiB); kills kiln past it."""
        end = time.monotonic() + limit
        while time.monotonic() < end:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                self.err.seek(0)
                return proc.returncode, self.err.read(), usage.ru_maxrss // 1024
            time.sleep(0.05)
        proc.kill()
        proc.wait()
        self.err.seek(0)
        self.fail(f"kiln still ran after {limit} s\n{self.err.read()}")

    def assert_huge_reply_refused(self, server):
        proc, _ = self.start(server)
        code, err, rss = self.finish(proc, 180)
        self.assertLess(rss, 300, f"peak RSS {rss} MiB\n{err}")
        self.assertEqual(code, 0, err)
        self.assertEqual(len(REMOTE_WARNING.findall(err)), 1, err)
        self.assertIn("100000000000", err)
        self.assertTrue(list(self.tmp.glob("c*/wheels/*/demo-1.0.0-*.whl")), err)

    def assert_slow_server_cut_off(self, server):
        proc, started = self.start(server, {"KILN_REMOTE_DEADLINE": "3s"})
        code, err, _ = self.finish(proc, LIFETIME + 30)
        took = time.monotonic() - started
        self.assertEqual(code, 0, err)
        self.assertEqual(len(REMOTE_WARNING.findall(err)), 1, err)
        self.assertIn("building without it for the rest of this run", err)
        self.assertIn("timed out", err)
        # The deadline plus a pure build; the server would trickle for LIFETIME s.
        self.assertLess(took, 12, err)

    def test_redis_reply_announcing_1e11_bytes_is_refused_unread(self):
        self.assert_huge_reply_refused(self.fake(FakeRedis, "huge"))

    def test_http_reply_announcing_1e11_bytes_is_refused_unread(self):
        self.assert_huge_reply_refused(self.fake(FakeHttpCache, "huge"))

    def test_redis_slow_reply_is_cut_off_at_the_deadline(self):
        self.assert_slow_server_cut_off(self.fake(FakeRedis, "slow"))

    def test_http_slow_reply_is_cut_off_at_the_deadline(self):
        self.assert_slow_server_cut_off(self.fake(FakeHttpCache, "slow"))

    def test_sigterm_during_a_slow_get_ends_kiln_within_2_s(self):
        for cls in (FakeRedis, FakeHttpCache):
            with self.subTest(server=cls.__name__):
                server = self.fake(cls, "slow")
                proc, _ = self.start(server)
                self.assertTrue(server.got_get.wait(60), "kiln sent no GET")
                time.sleep(0.5)
                sent = time.monotonic()
                proc.send_signal(signal.SIGTERM)
                code, err, _ = self.finish(proc, 10)
                took = time.monotonic() - sent
                self.assertEqual(code, 130, err)
                self.assertLess(took, 2.0, err)
                self.assertIn("kiln: error: interrupted", err)
                self.assertEqual(REMOTE_WARNING.findall(err), [], err)


if __name__ == "__main__":
    unittest.main()
