#!/usr/bin/env python3
"""A local HTTP server for kiln's fetch tests: files from --root, plus misbehaving routes.

Usage: http_server.py --root DIR --port-file FILE [--log FILE]

It listens on 127.0.0.1 on a free port and writes the port to --port-file once it listens.
Each request is appended to --log as one JSON line: {"path": ..., "range": ..., "accept": ...}.

Routes (GET only):
  /<path>                      a file under --root, honouring "Range: bytes=N-" (206, or 416 past
                               the end); a path ending in '/' serves index.json (as PEP 691 JSON)
                               or index.html from that directory
  /status/<code>/<anything>    always answers <code>
  /flaky/<n>/<path>            the first <n> requests of this URL answer 500, then /<path>
  /truncate/<k>/<path>         the first request of this URL announces the full length but sends
                               only <k> bytes and closes; later requests serve /<path>
  /always-truncate/<k>/<path>  every answer sends only <k> bytes of what it announces
  /cut/<n>/<k>/<path>          the first <n> requests of this URL send only <k> bytes of what they
                               announce (from the range asked for) and close: a network cut
  /norange/<path>              /<path>, ignoring Range (always 200 and the whole file)
  /stall/<path>                announces /<path>, sends 10 bytes, then sends nothing for 30 s
  /redirect/<path>             302 to /<path>
"""

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COUNTS = {}
LOCK = threading.Lock()


def count(path):
    with LOCK:
        COUNTS[path] = COUNTS.get(path, 0) + 1
        return COUNTS[path]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet
        pass

    def handle(self):
        try:
            super().handle()
        except (ConnectionResetError, BrokenPipeError):  # the client went away (kiln gave up)
            pass

    def record(self):
        if not self.server.log_path:
            return
        line = json.dumps({
            "path": self.path,
            "range": self.headers.get("Range", ""),
            "accept": self.headers.get("Accept", ""),
            "user_agent": self.headers.get("User-Agent", ""),
        })
        with LOCK, open(self.server.log_path, "a") as f:
            f.write(line + "\n")

    def send_plain(self, code, text=""):
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def serve(self, rel, ranges=True, send_only=None, stall=False):
        root = self.server.root
        path = os.path.normpath(os.path.join(root, rel.lstrip("/")))
        if not (path == root or path.startswith(root + os.sep)):
            return self.send_plain(403, "outside the root")
        ctype = "application/octet-stream"
        if rel.endswith("/"):
            if os.path.isfile(os.path.join(path, "index.json")):
                path = os.path.join(path, "index.json")
                ctype = "application/vnd.pypi.simple.v1+json"
            elif os.path.isfile(os.path.join(path, "index.html")):
                path = os.path.join(path, "index.html")
                ctype = "text/html; charset=utf-8"
            else:
                return self.send_plain(404, "no index here")
        if not os.path.isfile(path):
            return self.send_plain(404, "not found")
        with open(path, "rb") as f:
            data = f.read()
        start = 0
        header = self.headers.get("Range", "")
        code = 200
        if ranges and header.startswith("bytes=") and header.endswith("-"):
            start = int(header[len("bytes="):-1])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % len(data))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            code = 206
        body = data[start:]
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if code == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        self.end_headers()
        if stall:
            self.wfile.write(body[:10])
            self.wfile.flush()
            time.sleep(30)
            self.close_connection = True
            return
        if send_only is not None:
            self.wfile.write(body[:send_only])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)

    def do_GET(self):
        self.record()
        parts = self.path.split("/", 3)  # ['', route, arg, rest]
        route = parts[1] if len(parts) > 1 else ""
        try:
            if route == "status":
                return self.send_plain(int(parts[2]), "status %s" % parts[2])
            if route == "flaky":
                if count(self.path) <= int(parts[2]):
                    return self.send_plain(500, "try again")
                return self.serve("/" + parts[3])
            if route == "truncate":
                if count(self.path) == 1:
                    return self.serve("/" + parts[3], send_only=int(parts[2]))
                return self.serve("/" + parts[3])
            if route == "cut":
                _, _, n, k, rest = self.path.split("/", 4)
                if count(self.path) <= int(n):
                    return self.serve("/" + rest, send_only=int(k))
                return self.serve("/" + rest)
            if route == "always-truncate":
                return self.serve("/" + parts[3], send_only=int(parts[2]))
            if route == "norange":
                return self.serve("/" + self.path.split("/", 2)[2], ranges=False)
            if route == "stall":
                return self.serve("/" + self.path.split("/", 2)[2], stall=True)
            if route == "endless":  # a body without Content-Length that goes on (up to 256 MiB)
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.end_headers()
                chunk = b"\0" * 65536
                for _ in range(4096):
                    self.wfile.write(chunk)
                self.close_connection = True
                return
            if route == "redirect":
                self.send_response(302)
                self.send_header("Location", "/" + self.path.split("/", 2)[2])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            return self.serve(self.path)
        except (BrokenPipeError, ConnectionResetError):
            pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--log", default="")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.root = os.path.realpath(args.root)
    server.log_path = args.log
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(tmp, args.port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
