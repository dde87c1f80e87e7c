"""kiln serve and kiln index export with real clients: pip and uv download and install from it,
each target's sub-index serves that target's build, curl sees PEP 503/691/658/700 and HTTP
semantics, and hostile requests get 400/404 without touching anything outside the cache."""

import ctypes
import ctypes.util
import hashlib
import http.server
import json
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import unittest
import urllib.request
import zipfile
from pathlib import Path

from kilntest import KILN, SHARED_CACHE, KilnTestCase, SourceTestCase

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
PIP_ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html; q=0.1, text/html; q=0.01"


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()



def raw_reply(port, request):
    """Everything `kiln serve` on `port` sends back for the raw bytes `request` until it closes
    (b"" when it closes unanswered; a reset is an end like any other)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        try:
            s.sendall(request)
        except (BrokenPipeError, ConnectionResetError):
            pass
        reply = b""
        try:
            while chunk := s.recv(65536):
                reply += chunk
        except (ConnectionResetError, socket.timeout):
            pass
    return reply

class Inotify:
    """Every open or read of the watched directories and their files (Linux inotify, via ctypes)."""

    IN_ACCESS, IN_OPEN = 0x1, 0x20

    def __init__(self, *dirs):
        self.libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        for d in dirs:
            if self.libc.inotify_add_watch(self.fd, str(d).encode(), self.IN_ACCESS | self.IN_OPEN) < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {d}")

    def events(self):
        names = []
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return names
        pos = 0
        while pos + 16 <= len(data):
            _, mask, _, length = struct.unpack_from("iIII", data, pos)
            names.append((mask, data[pos + 16:pos + 16 + length].rstrip(b"\0").decode()))
            pos += 16 + length
        return names

    def close(self):
        os.close(self.fd)


class ServeTest(KilnTestCase):
    def curl(self, url, *args):
        """(status, headers dict (lowercase names), body bytes) of one curl request."""
        dump = [] if "-I" in args else ["-D", "-"]  # -I writes the headers to stdout itself
        proc = subprocess.run(["curl", "-s", "-S", *dump, *args, url], capture_output=True, check=True)
        head, _, body = proc.stdout.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        return status, headers, body

    def pip(self, *args):
        env = dict(os.environ, PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1",
                   PIP_NO_INPUT="1")
        env.pop("PIP_INDEX_URL", None)
        env.pop("PIP_EXTRA_INDEX_URL", None)
        proc = subprocess.run([sys.executable, "-m", "pip", *args, "--no-cache-dir"], capture_output=True,
                              text=True, env=env, timeout=600)
        self.assertEqual(proc.returncode, 0, f"pip {' '.join(args)}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def uv(self, *args, cache_dir=None):
        env = dict(os.environ, UV_CACHE_DIR=str(cache_dir or self.tmp / "uv-cache"), UV_NO_CONFIG="1",
                   UV_PYTHON_DOWNLOADS="never", UV_OFFLINE="0")
        for k in ("UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_INDEX", "UV_DEFAULT_INDEX"):
            env.pop(k, None)
        proc = subprocess.run([self.tool("uv"), *args], capture_output=True, text=True, env=env, timeout=600)
        self.assertEqual(proc.returncode, 0, f"uv {' '.join(args)}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def project_json(self, index, project):
        status, headers, body = self.curl(f"{index}{project}/", "-H", f"Accept: {PIP_ACCEPT}")
        self.assertEqual(status, 200)
        self.assertEqual(headers["content-type"], JSON_TYPE)
        return json.loads(body)

    def installed_provenance(self, target_dir, dist):
        info = next(Path(target_dir).glob(f"{dist}-*.dist-info"))
        return json.loads((info / "kiln.json").read_text())

    # --- the persistent cache: causal-conv1d and flash-linear-attention, built once -----------

    def persistent_cache(self):
        """The persistent cache with this checkout's causal-conv1d and flash-linear-attention (and
        fla-core) for the default target: built here on a machine's first run (minutes), hits after."""
        self.kiln("--cache", str(SHARED_CACHE), "build", "causal-conv1d", "fla-core", "flash-linear-attention",
                  check=0, timeout=3000)
        return SHARED_CACHE

    def test_pip_and_uv_install_causal_conv1d_and_fla(self):
        cache = self.persistent_cache()
        base, proc, log = self.start_serve(cache)
        index = f"{base}default/simple/"
        self.assertIn(f"kiln: default: pip install --index-url {index} ", log.read_text())
        pins = []
        expected = {}
        for project in ("causal-conv1d", "flash-linear-attention"):
            page = self.project_json(index, project)
            newest = page["versions"][-1]
            f = next(f for f in page["files"] if f"-{newest}-" in f["filename"])
            pins.append(f"{project}=={newest} --hash=sha256:{f['hashes']['sha256']}\n")
            expected[f["filename"]] = f["hashes"]["sha256"]
        self.assertTrue(any("+cu130torch" in name for name in expected))  # a local label: '+' in URLs
        req = self.tmp / "requirements.txt"
        req.write_text("".join(pins))

        # pip: download and install, hashes required.
        dl = self.tmp / "pip-dl"
        self.pip("download", "--no-deps", "--require-hashes", "--index-url", index, "-d", str(dl), "-r", str(req))
        self.assertEqual({p.name: sha256(p) for p in dl.iterdir()}, expected)
        target = self.tmp / "pip-target"
        self.pip("install", "--no-deps", "--require-hashes", "--index-url", index, "--target", str(target),
                 "-r", str(req))
        self.assertTrue((target / "causal_conv1d").is_dir())
        self.assertTrue((target / "fla").is_dir())

        # uv: resolve with hashes (what it would download), then install them, hashes required.
        (self.tmp / "req.in").write_text("causal-conv1d\nflash-linear-attention\n")
        locked = self.tmp / "uv-requirements.txt"
        self.uv("pip", "compile", "--no-deps", "--python", sys.executable, "--default-index", index,
                "--generate-hashes", str(self.tmp / "req.in"), "-o", str(locked))
        text = locked.read_text()
        for name, digest in expected.items():
            self.assertIn(f"--hash=sha256:{digest}", text)
        uv_target = self.tmp / "uv-target"
        self.uv("pip", "install", "--no-deps", "--require-hashes", "--python", sys.executable, "--default-index", index,
                "--target", str(uv_target), "-r", str(locked))
        self.assertTrue((uv_target / "causal_conv1d").is_dir())
        self.assertTrue((uv_target / "fla").is_dir())
        # pip and uv installed the same files.
        for sub in ("causal_conv1d", "fla"):
            a = sorted(str(p.relative_to(target)) for p in (target / sub).rglob("*.py"))
            b = sorted(str(p.relative_to(uv_target)) for p in (uv_target / sub).rglob("*.py"))
            self.assertEqual(a, b)

        # Every request was logged, one line each; SIGTERM stops the server cleanly.
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=10), 0)
        text = log.read_text()
        self.assertRegex(text, r"kiln: 127\.0\.0\.1 GET /default/simple/causal-conv1d/ 200 \d+ [\d.]+ms")
        self.assertRegex(text, r"kiln: 127\.0\.0\.1 GET /default/simple/causal-conv1d/causal_conv1d-[^ ]+\.whl 200 \d+ ")
        self.assertIn("kiln: stopped", text)

    def test_http_semantics_with_curl(self):
        cache = self.persistent_cache()
        base, _, _ = self.start_serve(cache)
        index = f"{base}default/simple/"
        page = self.project_json(index, "causal-conv1d")
        f = page["files"][-1]
        self.assertIn("+", f["filename"])
        self.assertEqual(f["url"], f["filename"].replace("+", "%2B"))
        for key in ("size", "upload-time", "core-metadata", "dist-info-metadata", "requires-python"):
            self.assertIn(key, f)
        self.assertRegex(f["upload-time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertEqual(page["meta"]["api-version"], "1.1")
        self.assertIn(f["filename"].split("-")[1], page["versions"])

        # Content negotiation: HTML for browsers and HTML-only clients, 406 when nothing fits.
        status, headers, html = self.curl(f"{index}causal-conv1d/", "-H", "Accept: text/html")
        self.assertEqual((status, headers["content-type"]), (200, "text/html; charset=utf-8"))
        self.assertEqual(headers["vary"], "Accept")
        # (The persistent cache may hold several wheels of the release: the anchor of this one.)
        href = re.search(rb'<a href="(' + re.escape(f["url"].encode()) + rb')#sha256=([0-9a-f]{64})"([^>]*)>', html)
        self.assertIsNotNone(href, html[:2000])
        self.assertEqual(href.group(1).decode(), f["url"])
        self.assertEqual(href.group(2).decode(), f["hashes"]["sha256"])
        md_hash = f["core-metadata"]["sha256"]
        self.assertIn(f'data-core-metadata="sha256={md_hash}"'.encode(), href.group(3))
        self.assertIn(f'data-dist-info-metadata="sha256={md_hash}"'.encode(), href.group(3))
        self.assertIn(b'data-requires-python="&gt;=', href.group(3))
        status, headers, _ = self.curl(f"{index}causal-conv1d/", "-H", "Accept: application/vnd.pypi.simple.v1+html")
        self.assertEqual(headers["content-type"], "application/vnd.pypi.simple.v1+html")
        status, headers, _ = self.curl(f"{index}causal-conv1d/", "-H",
                                       f"Accept: text/html;q=0.4, {JSON_TYPE};q=0.5")
        self.assertEqual(headers["content-type"], JSON_TYPE)
        status, _, _ = self.curl(f"{index}causal-conv1d/", "-H", "Accept: application/json")
        self.assertEqual(status, 406)
        status, _, body = self.curl(index, "-H", f"Accept: {JSON_TYPE}")
        self.assertIn({"name": "causal-conv1d"}, json.loads(body)["projects"])

        # PEP 658: the metadata file's hash is the advertised one, under both spellings of '+'.
        wheel_url = f"{index}causal-conv1d/{f['url']}"
        for url in (wheel_url + ".metadata", f"{index}causal-conv1d/{f['filename']}.metadata"):
            status, _, md = self.curl(url)
            self.assertEqual(status, 200)
            self.assertEqual(hashlib.sha256(md).hexdigest(), md_hash)
            self.assertIn(b"Name: causal-conv1d", md)

        # HEAD and Range on the wheel.
        status, headers, body = self.curl(wheel_url, "-I")
        self.assertEqual((status, int(headers["content-length"]), body), (200, f["size"], b""))
        self.assertEqual(headers["etag"], f'"{f["hashes"]["sha256"]}"')
        self.assertEqual(headers["accept-ranges"], "bytes")
        status, headers, body = self.curl(wheel_url, "-r", "0-3")
        self.assertEqual((status, body), (206, b"PK\x03\x04"))
        self.assertEqual(headers["content-range"], f"bytes 0-3/{f['size']}")
        status, headers, body = self.curl(wheel_url, "-r", "-22")
        self.assertEqual((status, body[:4]), (206, b"PK\x05\x06"))  # the end of central directory
        status, _, _ = self.curl(wheel_url, "-r", f"{f['size']}-")
        self.assertEqual(status, 416)
        status, _, _ = self.curl(wheel_url, "-H", f'If-None-Match: "{f["hashes"]["sha256"]}"')
        self.assertEqual(status, 304)

        # Redirects and 404s.
        status, headers, _ = self.curl(f"{index}Causal_Conv1D")
        self.assertEqual((status, headers["location"]), (301, "/default/simple/causal-conv1d/"))
        status, headers, _ = self.curl(f"{base}default/simple")
        self.assertEqual((status, headers["location"]), (301, "/default/simple/"))
        # A name that is not kiln's goes upstream (the index kiln resolves with), for this request only.
        status, headers, _ = self.curl(f"{index}No_Such.Project/")
        self.assertEqual(status, 307)
        self.assertTrue(headers["location"].endswith("/no-such-project/"), headers["location"])
        self.assertEqual(headers["cache-control"], "no-store")
        self.assertEqual(self.curl(f"{base}no-such-target/simple/")[0], 404)
        # /simple/ (no target of that name): a 404 that names each target's index.
        for path in ("simple/", "simple/causal-conv1d/"):
            status, _, body = self.curl(f"{base}{path}")
            self.assertEqual(status, 404)
            self.assertIn(b"kiln serves one index per target", body)
            self.assertIn(b"\n/default/simple/", body)
        self.assertEqual(self.curl(f"{index}causal-conv1d/no-such-file.whl")[0], 404)
        self.assertEqual(self.curl(f"{index}causal-conv1d/", "-X", "POST")[0], 405)
        status, _, root = self.curl(base)
        self.assertIn(b'<a href="default/simple/">default</a>', root)

    def test_traversal_and_malformed_requests_touch_nothing_outside_the_cache(self):
        cache = self.persistent_cache()
        base, _, log = self.start_serve(cache)
        port = int(re.search(r":(\d+)/$", base).group(1))
        # Canaries beside the cache and in this test's directory: any open or read is seen.
        secret_dir = self.tmp / "secret"
        secret_dir.mkdir()
        (secret_dir / "passwd").write_text("canary\n")
        watch = Inotify(secret_dir)
        self.addCleanup(watch.close)
        rel = os.path.relpath(secret_dir / "passwd", cache / "wheels" / "x")
        raw_paths = [
            "/../../../../../../etc/passwd",
            "/default/simple/../../../../etc/passwd",
            f"/default/simple/causal-conv1d/{rel}",
            "/default/simple/causal-conv1d/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
            "/default/simple/%2E%2E%2F%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
            "/default/simple/causal-conv1d/..%2f..%2f..%2fentry.json",
            "/default/simple/causal-conv1d/%2e%2e%5c%2e%2e%5csecret",
            "//etc/passwd",
            "/" + str(secret_dir / "passwd"),
            "/default/simple/causal-conv1d/entry.json",
            "/default/simple/causal-conv1d/x.whl%00.metadata",
            "/default/simple/causal-conv1d/%zz",
            "/default/simple/causal-conv1d/" + "A" * 4000,
            "/default/./simple/causal-conv1d/",
        ]

        def raw(request):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(request)
                data = b""
                try:
                    while chunk := s.recv(65536):
                        data += chunk
                except socket.timeout:
                    pass
            return data

        for path in raw_paths:
            reply = raw(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            status = int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/1.1 ") else 0
            self.assertIn(status, (400, 404), f"{path}: {reply[:200]!r}")
            self.assertNotIn(b"canary", reply)
            self.assertNotIn(b"root:", reply)
        # Malformed at the HTTP level: absolute-form, no version, oversized header, a body, garbage.
        for request, allowed in [
            (b"GET http://127.0.0.1/../../etc/passwd HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", (400, 404)),
            (b"GET * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", (400, 404)),
            (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70000 + b"\r\nConnection: close\r\n\r\n", (431,)),
            (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", (414,)),
            (b"PUT /default/simple/x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc", (405,)),
        ]:
            reply = raw(request)
            status = int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/1.1 ") else 0
            self.assertIn(status, allowed, f"{request[:80]!r}: {reply[:200]!r}")
        self.assertFalse(raw(b"\x16\x03\x01garbage\r\n\r\n").startswith(b"HTTP/1.1 200"))  # a TLS hello
        # curl normalises dot segments unless told not to.
        status, _, _ = self.curl(f"{base}default/simple/../../../etc/passwd", "--path-as-is")
        self.assertIn(status, (400, 404))
        time.sleep(0.2)
        self.assertEqual(watch.events(), [])
        self.assertEqual(self.curl(f"{base}default/simple/")[0], 200)  # still serving

    def test_idle_and_slow_clients_do_not_starve_a_fresh_request(self):
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < 1200:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
        cache = self.persistent_cache()
        base, proc, _ = self.start_serve(cache)
        port = int(re.search(r":(\d+)/$", base).group(1))

        def rss_kib():
            with open(f"/proc/{proc.pid}/status") as f:
                return int(next(l for l in f if l.startswith("VmRSS:")).split()[1])
        before = rss_kib()
        socks = []
        self.addCleanup(lambda: [s.close() for s in socks])
        for _ in range(1000):  # idle: connected, nothing sent
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        slow = []
        for _ in range(50):  # slowloris: headers that never end
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET /default/simple/ HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            slow.append(s)
        socks.extend(slow)
        deadline = time.time() + 10  # until the server holds every one of them
        while len(os.listdir(f"/proc/{proc.pid}/fd")) < 1050 and time.time() < deadline:
            time.sleep(0.05)
        self.assertGreaterEqual(len(os.listdir(f"/proc/{proc.pid}/fd")), 1050)
        for _ in range(3):
            for s in slow:
                s.sendall(b"a" * 100)
            t0 = time.time()
            status, _, body = self.curl(f"{base}default/simple/causal-conv1d/")
            self.assertEqual(status, 200)
            self.assertLess(time.time() - t0, 1.0)
        # Oversized headers, with all of them still open: refused (431, or the connection closed
        # without an answer), and the server answers the next request.
        for request in (b"GET /default/simple/ HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (64 << 10) + b"\r\n\r\n",
                        b"GET /default/simple/ HTTP/1.1\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(4000)) + b"\r\n"):
            reply = raw_reply(port, request)
            self.assertTrue(reply == b"" or reply.startswith(b"HTTP/1.1 431 "), reply[:200])
        self.assertEqual(self.curl(f"{base}default/simple/causal-conv1d/")[0], 200)
        held = rss_kib()
        print(f"\nkiln serve RSS: {before} KiB idle, {held} KiB holding 1,000 idle and 50 slowloris connections",
              file=sys.stderr)
        self.assertLess(held - before, 64 * 1024)  # bounded: a small buffer per connection

    def test_ten_thousand_slow_clients_do_not_starve_a_fresh_request(self):
        # 10,050 connections, each sending one byte of a request head every 5 s (each byte resets
        # an idle timeout), while a fresh request is timed every second for 25 s.
        cache = self.tmp / "slow-cache"
        cache.mkdir()
        base, proc, _ = self.start_serve(cache)
        port = int(re.search(r":(\d+)/$", base).group(1))
        script = Path(__file__).resolve().parents[1] / "support" / "slow_clients.py"
        run = subprocess.run([sys.executable, str(script), "127.0.0.1", str(port), "/", "--count", "10050",
                              "--interval", "5", "--seconds", "25"], capture_output=True, text=True, timeout=600)
        self.assertEqual(run.returncode, 0, run.stderr)
        result = json.loads(run.stdout)
        self.assertEqual(result["slow_opened"], 10050)
        fresh = result["fresh"]
        took = sorted(f["seconds"] for f in fresh)
        print(f"\nfresh requests during 10,050 slow clients: {len(fresh)}, median {took[len(took) // 2] * 1000:.1f} ms, "
              f"max {took[-1] * 1000:.1f} ms; slow connections closed by the server: {result['slow_closed_by_server']}",
              file=sys.stderr)
        self.assertGreaterEqual(len(fresh), 10)
        for f in fresh:
            self.assertEqual(f["status"], 200, f"fresh request at {f['at']} s: {f}")
            self.assertLess(f["seconds"], 1.0, f"fresh request at {f['at']} s: {f}")
        # Each head had 10 s: by the end every slow connection was cut.
        self.assertEqual(result["slow_closed_by_server"], 10050)
        self.assertIsNone(proc.poll())

    # --- two targets in a fresh cache: each sub-index serves its own build ---------------------

    def test_each_target_serves_its_own_build_and_export(self):
        cache = self.fresh_cache("c")
        base, proc, log = self.start_serve(cache)  # before any build: builds appear without a restart
        self.assertIn("no wheels in the cache yet", log.read_text())
        self.assertNotIn(b"default/simple", self.curl(base)[2])
        builds = {}
        for archs in (None, "9.0;12.0+PTX"):
            args = ["--cache", str(cache), "--json", "build", "kiln-demo"] + (["--archs", archs] if archs else [])
            item = json.loads(self.kiln(*args, check=0, timeout=3000).stdout)["items"][0]
            builds[item["target"]] = item
        self.assertEqual(set(builds), {"default", "default-sm90-sm120-ptx120"})
        a, b = builds.values()
        self.assertEqual(Path(a["wheel"]).name, Path(b["wheel"]).name)  # same file name, other bytes
        self.assertNotEqual(a["sha256"], b["sha256"])
        _, _, root = self.curl(base)
        for target in builds:
            self.assertIn(f'<a href="{target}/simple/">'.encode(), root)

        uv_cache = self.tmp / "uv-shared"  # one uv cache for both: it must still tell them apart
        for target, item in builds.items():
            index = f"{base}{target}/simple/"
            page = self.project_json(index, "kiln-demo")
            self.assertEqual([f["hashes"]["sha256"] for f in page["files"]], [item["sha256"]])
            version = page["versions"][-1]
            req = self.tmp / f"req-{target}.txt"
            req.write_text(f"kiln-demo=={version} --hash=sha256:{item['sha256']}\n")
            dl = self.tmp / f"pip-dl-{target}"
            self.pip("download", "--no-deps", "--require-hashes", "--index-url", index, "-d", str(dl), "-r", str(req))
            self.assertEqual([sha256(p) for p in dl.iterdir()], [item["sha256"]])
            pip_target = self.tmp / f"pip-{target}"
            self.pip("install", "--no-deps", "--require-hashes", "--index-url", index, "--target", str(pip_target),
                     "-r", str(req))
            self.assertEqual(self.installed_provenance(pip_target, "kiln_demo")["build_key"], item["key"])
            uv_target = self.tmp / f"uv-{target}"
            self.uv("pip", "install", "--no-deps", "--python", sys.executable, "--default-index", index,
                    "--target", str(uv_target), f"kiln-demo=={version}", cache_dir=uv_cache)
            self.assertEqual(self.installed_provenance(uv_target, "kiln_demo")["build_key"], item["key"])

        # The same index as static files, served by a plain web server, works for pip.
        out = self.tmp / "site"
        proc_export = self.kiln("--cache", str(cache), "index", "export", str(out), check=0)
        self.assertEqual(proc_export.stdout.strip(), str(out))
        for target, item in builds.items():
            pdir = out / target / "simple" / "kiln-demo"
            self.assertEqual(sha256(pdir / Path(item["wheel"]).name), item["sha256"])
            self.assertEqual(json.loads((pdir / "index.json").read_text()),
                             self.project_json(f"{base}{target}/simple/", "kiln-demo"))
        handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(out), **k)
        handler.log_message = lambda *a: None
        static = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=static.serve_forever, daemon=True).start()
        self.addCleanup(static.shutdown)
        target = "default-sm90-sm120-ptx120"
        dl = self.tmp / "static-dl"
        self.pip("download", "--no-deps", "--index-url", f"http://127.0.0.1:{static.server_port}/{target}/simple/",
                 "-d", str(dl), "kiln-demo")
        self.assertEqual([sha256(p) for p in dl.iterdir()], [builds[target]["sha256"]])
        # Exporting again replaces the tree; a directory that is not an export is refused.
        self.kiln("--cache", str(cache), "index", "export", str(out), check=0)
        (self.tmp / "precious").mkdir()
        (self.tmp / "precious" / "keep").write_text("x")
        refused = self.kiln("--cache", str(cache), "index", "export", str(self.tmp / "precious"), check=2)
        self.assertIn("is not a kiln index export", refused.stderr)
        self.assertEqual(os.listdir(self.tmp / "precious"), ["keep"])

    def test_json_ready_line_and_a_warning_for_an_open_address(self):
        cache = self.fresh_cache("ready")
        err = self.tmp / "ready.err"
        with open(err, "w") as stderr:
            proc = subprocess.Popen([KILN, "--cache", str(cache), "--json", "serve", "--port", "0",
                                     "--host", "0.0.0.0"], stdout=subprocess.PIPE, stderr=stderr, text=True)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.terminate)
        readable, _, _ = select.select([proc.stdout], [], [], 60)
        self.assertTrue(readable, "no ready line on stdout: " + err.read_text())
        ready = json.loads(proc.stdout.readline())
        self.assertEqual(sorted(ready), ["cache", "indexes", "install", "url", "urls"])
        # Another host's address, never 0.0.0.0, which no client can reach.
        self.assertRegex(ready["url"], r"^http://\d+\.\d+\.\d+\.\d+:\d+/$")
        self.assertNotIn("0.0.0.0", ready["url"])
        self.assertEqual(ready["urls"][0], ready["url"])
        self.assertEqual((ready["cache"], ready["indexes"]), (str(cache), {}))
        self.assertIn("kiln: warning: serving on 0.0.0.0 without --token-file", err.read_text())
        port = ready["url"].rsplit(":", 1)[1].rstrip("/")
        status, _, body = self.curl(f"http://127.0.0.1:{port}/simple/")
        self.assertEqual(status, 404)
        self.assertIn(b"(none yet: the cache holds no wheels)", body)

    def test_token_file(self):
        cache = self.fresh_cache("c")
        token = self.tmp / "token"
        token.write_text("t0ken-value\n")
        base, _, log = self.start_serve(cache, "--token-file", str(token))
        self.assertNotIn("t0ken-value", log.read_text())
        self.assertEqual(self.curl(base)[0], 401)
        self.assertEqual(self.curl(base, "-H", "Authorization: Bearer t0ken-value")[0], 200)
        self.assertEqual(self.curl(base.replace("http://", "http://kiln:t0ken-value@"))[0], 200)
        self.assertEqual(self.curl(base.replace("http://", "http://kiln:wrong@"))[0], 401)
        (self.tmp / "empty").write_text("\n")
        bad = self.kiln("--cache", str(cache), "serve", "--port", "0", "--token-file", str(self.tmp / "empty"), check=2)
        self.assertIn("the file is empty", bad.stderr)


class ServedWheelTest(SourceTestCase):
    """Two build keys commit wheels of one file name: the index serves the package's last build for
    the target (a cache hit makes it current again), and falls back to the newest commit when no
    last/ record names that file."""

    def build(self, cache):
        proc = self.kiln("--cache", str(cache), "--json", "build", "demo", check=0)
        return json.loads(proc.stdout)["items"][0]

    def served_file(self, base):
        req = urllib.request.Request(f"{base}default/simple/demo/", headers={"Accept": JSON_TYPE})
        with urllib.request.urlopen(req, timeout=30) as r:
            files = json.loads(r.read())["files"]
        self.assertEqual(len(files), 1, files)
        with urllib.request.urlopen(f"{base}default/simple/demo/{files[0]['url']}", timeout=30) as r:
            data = r.read()
        self.assertEqual(hashlib.sha256(data).hexdigest(), files[0]["hashes"]["sha256"])
        return files[0]["filename"], files[0]["hashes"]["sha256"]

    def listed(self, cache):
        out = json.loads(self.kiln("--cache", str(cache), "--json", "cache", "ls", check=0).stdout)
        return {e["key"]: e for e in out}

    def test_the_last_build_of_a_file_name_is_served_even_after_a_hit(self):
        self.local_archive("demo-1.0.0.tar.gz", self.good_sdist())
        cache = self.fresh_cache("c")
        base, _, _ = self.start_serve(cache)
        original = self.build(cache)
        self.assertEqual(self.served_file(base), (Path(original["wheel"]).name, original["sha256"]))
        manifest = self.project / "manifests" / "demo" / "1.0.0.toml"
        text = manifest.read_text()
        manifest.write_text(text.replace('summary = "demo"', 'summary = "an experiment"'))
        # Commit times are whole seconds, and the fallback below (no last/ record) takes the newest:
        # the experiment is committed in a later second than the original.
        time.sleep(1.1)
        experiment = self.build(cache)  # another key, the same file name, other bytes
        self.assertNotEqual(experiment["key"], original["key"])
        self.assertEqual(Path(experiment["wheel"]).name, Path(original["wheel"]).name)
        self.assertNotEqual(experiment["sha256"], original["sha256"])
        self.assertEqual(self.served_file(base)[1], experiment["sha256"])
        manifest.write_text(text)
        again = self.build(cache)
        self.assertTrue(again["cache_hit"])
        self.assertEqual(again["key"], original["key"])
        # The running server follows the hit without a restart.
        self.assertEqual(self.served_file(base)[1], original["sha256"])
        listed = self.listed(cache)
        self.assertTrue(listed[original["key"]]["served"])
        self.assertFalse(listed[experiment["key"]]["served"])
        self.assertEqual(listed[original["key"]]["backend"], "pure")
        table = self.kiln("--cache", str(cache), "cache", "ls", check=0).stdout.splitlines()
        self.assertIn("BACKEND", table[0])
        row = next(line for line in table if original["key"][:16] in line)
        self.assertTrue(row.rstrip().endswith("*"), table)
        self.assertFalse(next(line for line in table if experiment["key"][:16] in line).rstrip().endswith("*"))
        # index export serves the same wheel.
        out = self.tmp / "site"
        self.kiln("--cache", str(cache), "index", "export", str(out), check=0)
        exported = out / "default" / "simple" / "demo" / Path(original["wheel"]).name
        self.assertEqual(hashlib.sha256(exported.read_bytes()).hexdigest(), original["sha256"])

        # A cache from before last/ named wheels: the newest commit wins, as it did.
        shutil.rmtree(cache / "last")
        self.assertEqual(self.served_file(base)[1], experiment["sha256"])
        # A hostile last/ record (a link, garbage, a key of no entry) changes nothing and crashes nothing.
        (cache / "last" / "default").mkdir(parents=True)
        (cache / "last" / "default" / "demo.json").symlink_to(self.outside / "x.json")
        (self.outside / "x.json").write_text(json.dumps(
            {"kiln_last": 1, "build": {"key": original["key"], "wheel": Path(original["wheel"]).name}}))
        (cache / "last" / "default" / "other.json").write_text('{"kiln_last": 1, "build": {"key": 5, "wheel": []}}')
        (cache / "last" / "default" / "bad.json").write_text("[")
        (cache / "last" / ".changed").write_text("x")
        self.assertEqual(self.served_file(base)[1], experiment["sha256"])
        self.assertTrue(self.listed(cache)[experiment["key"]]["served"])


class ServeHeadsTest(KilnTestCase):
    """Raw request heads against `kiln serve` on an empty cache (no build needed): every head over
    the documented limit (docs/serve.md, "Limits": 16 KiB) gets 431, every other one its answer,
    and a method that is not a token gets 400."""

    LIMIT = 16384

    def exchange(self, port, request):
        """The status of the one answer to `request` (0: the connection closed unanswered)."""
        m = re.match(rb"HTTP/1\.1 (\d{3}) ", raw_reply(port, request))
        return int(m.group(1)) if m else 0

    def head_of(self, size):
        start = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Pad: "
        return start + b"a" * (size - len(start) - 4) + b"\r\n\r\n"

    def test_every_head_over_the_limit_gets_431_and_every_other_an_answer(self):
        self.cache.mkdir()
        base, _, log = self.start_serve(self.cache)
        port = int(re.search(r":(\d+)/$", base).group(1))
        sizes = [15000, 15900, 15950, 16000, 16100, 16180, 16300, 20000, 40000, 70000,
                 self.LIMIT - 1, self.LIMIT, self.LIMIT + 1] + list(range(15800, 16600, 25))
        got = {n: self.exchange(port, self.head_of(n)) for n in sizes}
        wrong = {n: s for n, s in got.items() if s != (200 if n <= self.LIMIT else 431)}
        self.assertEqual(wrong, {}, f"heads answered otherwise than 200 up to {self.LIMIT} bytes, "
                                    f"431 past it (0: closed unanswered)")
        self.assertEqual(self.exchange(port, b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"), 414)

    def test_a_method_that_is_not_a_token_gets_400(self):
        self.cache.mkdir()
        base, _, log = self.start_serve(self.cache)
        port = int(re.search(r":(\d+)/$", base).group(1))
        rest = b" / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        got = {m: self.exchange(port, m + rest) for m in (b"GET\0", b"GET\0X", b"G\x01T", b"GET\x7f", b"G\xc3\x89T")}
        self.assertEqual(got, {m: 400 for m in got})  # before: GET\0 and GET\0X served as GET (200)
        self.assertEqual(self.exchange(port, b"GET" + rest), 200)
        self.assertEqual(self.exchange(port, b"BREW" + rest), 405)


if __name__ == "__main__":
    unittest.main()
