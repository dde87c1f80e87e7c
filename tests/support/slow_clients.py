#!/usr/bin/env python3
"""Slow clients against an HTTP server, and fresh requests timed meanwhile.

Opens COUNT connections to HOST:PORT, each sending one byte of a request head every INTERVAL
seconds (a head that never ends); once they are open, sends a fresh GET of PATH on a new
connection every second for SECONDS seconds and times each until its whole answer arrived.
Prints one JSON object: how many slow connections were opened, how many the server had closed by
the end, and each fresh request's status and seconds (status 0: no answer within TIMEOUT).

Used by tests/e2e/test_serve.py and bench/serve-load.
  slow_clients.py HOST PORT PATH [--count N] [--interval S] [--seconds S] [--timeout S]
"""

import argparse
import errno
import json
import resource
import selectors
import socket
import sys
import time

HEAD = b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100000


def raise_fd_limit(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, want), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def fresh_request(host, port, path, timeout):
    """(status, seconds) of one GET on a new connection; status 0 when no whole answer came."""
    start = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while True:
                left = timeout - (time.monotonic() - start)
                if left <= 0:
                    return 0, time.monotonic() - start
                s.settimeout(left)
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
        return status, time.monotonic() - start
    except OSError:
        return 0, time.monotonic() - start


def run(host, port, path, count, interval, seconds, timeout):
    raise_fd_limit(count + 256)
    sel = selectors.DefaultSelector()
    slow = {}  # socket -> bytes of HEAD sent
    opened = 0
    # Open them a few hundred at a time, so the listen backlog never overflows.
    while opened < count:
        for _ in range(min(250, count - opened)):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex((host, port))
            sel.register(s, selectors.EVENT_READ)
            slow[s] = 0
            opened += 1
        time.sleep(0.02)
    closed = 0

    def tick():
        """One byte more on each slow connection still open; notes those the server closed."""
        nonlocal closed
        for key, _ in sel.select(timeout=0):
            s = key.fileobj
            try:
                if s.recv(4096):
                    continue
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                pass
            sel.unregister(s)
            s.close()
            del slow[s]
            closed += 1
        for s, sent in list(slow.items()):
            try:
                s.send(HEAD[sent:sent + 1])
                slow[s] = sent + 1
            except (BlockingIOError, InterruptedError):
                pass
            except OSError as e:
                if e.errno == errno.ENOTCONN:  # still connecting
                    continue
                sel.unregister(s)
                s.close()
                del slow[s]
                closed += 1

    fresh = []
    started = time.monotonic()
    next_tick = started
    while time.monotonic() - started < seconds:
        if time.monotonic() >= next_tick:
            tick()
            next_tick += interval
        status, took = fresh_request(host, port, path, timeout)
        fresh.append({"at": round(time.monotonic() - started, 2), "status": status, "seconds": round(took, 4)})
        time.sleep(max(0.0, 1.0 - took))
    tick()
    for s in list(slow):
        s.close()
    return {"slow_opened": opened, "slow_closed_by_server": closed, "fresh": fresh}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("path")
    p.add_argument("--count", type=int, default=10050)
    p.add_argument("--interval", type=float, default=5.0)
    p.add_argument("--seconds", type=float, default=25.0)
    p.add_argument("--timeout", type=float, default=5.0)
    a = p.parse_args()
    json.dump(run(a.host, a.port, a.path, a.count, a.interval, a.seconds, a.timeout), sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
