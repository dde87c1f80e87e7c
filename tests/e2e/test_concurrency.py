"""Concurrency on one cache, with the real binary: parallel `kiln build`s of the same and of
different keys (each key built once, every process succeeds, no torn file), `kiln serve` answering
throughout (never a wheel before its commit, never a body that disagrees with its hash), and
`kiln cache gc` running meanwhile (never removing what a build or a download uses)."""

import fcntl
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest
import urllib.error
import urllib.request
from pathlib import Path

from faults import pure_package, wait_stopped
from kilntest import KILN, KilnTestCase

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


class Index:
    """A client of `kiln serve`: pages as PEP 691 JSON, wheels checked against their hashes."""

    def __init__(self, base):
        self.base = base

    def get(self, path, accept=JSON_TYPE):
        req = urllib.request.Request(self.base + path.lstrip("/"), headers={"Accept": accept})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def projects(self, target="default"):
        status, body = self.get(f"{target}/simple/")
        return [p["name"] for p in json.loads(body)["projects"]] if status == 200 else []

    def files(self, project, target="default"):
        status, body = self.get(f"{target}/simple/{project}/")
        return json.loads(body)["files"] if status == 200 else []

    def check_all(self, target="default"):
        """Downloads every listed wheel; returns (wheels checked, problems)."""
        checked, problems = 0, []
        for project in self.projects(target):
            for f in self.files(project, target):
                url = f["url"] if "://" in f["url"] else f"{target}/simple/{project}/{f['url']}"
                status, body = self.get(url, accept="*/*")
                if status == 404:
                    continue  # removed since the page was read (gc): a 404, never a torn body
                if status != 200 or hashlib.sha256(body).hexdigest() != f["hashes"]["sha256"] or len(body) != f["size"]:
                    problems.append(f"{f['filename']}: status {status}, {len(body)} bytes, "
                                    f"sha256 {hashlib.sha256(body).hexdigest()} (page: {f['hashes']['sha256']}, {f['size']})")
                checked += 1
        return checked, problems


class ConcurrencyTest(KilnTestCase):
    def env(self, cache, **extra):
        env = dict(os.environ, KILN_CACHE=str(cache), **extra)
        env.pop("KILN_MANIFESTS", None)
        if "KILN_FAULT" not in extra:
            env.pop("KILN_FAULT", None)
        return env

    def popen(self, cache, *args, **extra):
        proc = subprocess.Popen([KILN, *args], cwd=self.project, env=self.env(cache, **extra), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        def cleanup():
            if proc.poll() is None:
                proc.kill()
            proc.communicate()  # (closes the pipes)
        self.addCleanup(cleanup)
        return proc

    def serve(self, cache):
        base, _, _ = self.start_serve(cache)
        return Index(base)

    def pure(self, name, **kw):
        return pure_package(self.project, self.tmp / "sources", name, **kw)

    def staging(self, cache):
        return sorted(p.name for p in (cache / "tmp").glob("*")) if (cache / "tmp").exists() else []

    def staging_kinds(self, cache):
        """The staging directories, by kind: "wheel-" (the wheel written) and "commit-" (the entry)."""
        return sorted(name.split("-")[0] for name in self.staging(cache))

    # --- parallel builds, served and collected meanwhile -----------------------------------------

    def test_parallel_builds_build_each_key_once_while_served_and_collected(self):
        cache = self.fresh_cache("c")
        for name in ("par-a", "par-b", "par-c"):
            self.pure(name, payload=f"NAME = {name!r}\n".encode(), blob=512 << 10)
        index = self.serve(cache)
        stop = threading.Event()
        served = {"checked": 0, "problems": [], "gc": [], "gc_runs": 0}

        def watch():  # every listed wheel, downloaded and checked, over and over
            while not stop.is_set():
                checked, problems = index.check_all()
                served["checked"] += checked
                served["problems"] += problems

        def collect():  # `kiln cache gc` (staging leftovers) over and over
            while not stop.is_set():
                gc = subprocess.run([KILN, "cache", "gc"], env=self.env(cache), capture_output=True, text=True)
                served["gc_runs"] += 1
                if gc.returncode != 0:
                    served["gc"].append(gc.stderr)
                time.sleep(0.2)
        threads = [threading.Thread(target=watch), threading.Thread(target=collect)]
        for t in threads:
            t.start()
        try:
            orders = [["kiln-demo", "par-a", "par-b", "par-c"], ["par-c", "par-b", "par-a", "kiln-demo"],
                      ["par-b", "kiln-demo", "par-c", "par-a"], ["par-a", "par-c", "kiln-demo", "par-b"]]
            procs = [self.popen(cache, "--json", "build", *order) for order in orders]
            results = []
            for p in procs:
                out, err = p.communicate(timeout=3000)
                self.assertEqual(p.returncode, 0, err)
                results.append(json.loads(out))
        finally:
            stop.set()
            for t in threads:
                t.join()
        by_key = {}
        for r in results:
            for item in r["items"]:
                by_key.setdefault(item["key"], []).append(item)
        self.assertEqual(len(by_key), 4)
        for key, items in by_key.items():
            self.assertEqual(len(items), 4)
            built = [i for i in items if not i["cache_hit"]]
            self.assertEqual(len(built), 1, f"{items[0]['package']} was built {len(built)} times")
            self.assertEqual({(i["wheel"], i["sha256"]) for i in items}, {(built[0]["wheel"], built[0]["sha256"])})
            self.assertEqual(hashlib.sha256(Path(built[0]["wheel"]).read_bytes()).hexdigest(), built[0]["sha256"])
        # kiln-demo compiled once: only the process that built it ran compile jobs, none twice.
        builders = [r for r in results if any(i["package"] == "kiln-demo" and not i["cache_hit"] for i in r["items"])]
        self.assertEqual(len(builders), 1)
        self.assertGreater(builders[0]["compile_jobs"], 0)
        self.assertEqual(sum(r["compile_jobs"] for r in results), builders[0]["compile_jobs"])
        labels = [j["job"] for r in results for j in r["jobs"]]
        self.assertEqual(len(labels), len(set(labels)), labels)
        print(f"\n4 parallel builds: {served['checked']} wheel downloads checked against their hashes, "
              f"{served['gc_runs']} `cache gc` runs meanwhile", file=sys.stderr)
        self.assertEqual(served["problems"], [])
        self.assertEqual(served["gc"], [])
        self.assertGreater(served["checked"], 0)
        checked, problems = index.check_all()
        self.assertEqual((checked, problems), (4, []))
        self.assertEqual(sorted(index.projects()), ["kiln-demo", "par-a", "par-b", "par-c"])
        self.assertEqual(self.kiln("--cache", str(cache), "cache", "verify").returncode, 0)
        self.assertEqual(self.staging(cache), [])

    # --- never a wheel before its commit ---------------------------------------------------------

    def test_serve_never_offers_a_wheel_before_its_commit(self):
        cache = self.fresh_cache("c")
        self.pure("half", blob=256 << 10)
        index = self.serve(cache)
        # Frozen in the middle of writing the wheel, then killed there.
        writing = self.popen(cache, "build", "half", KILN_FAULT="wheel:1:stop")
        wait_stopped(writing)
        staged = [p.name for p in (cache / "tmp").rglob("*") if ".whl.tmp-" in p.name]  # the wheel, half written
        self.assertEqual(len(staged), 1)
        wheel_name = staged[0][1:].split(".tmp-")[0]
        self.assertEqual(index.files("half"), [])  # kiln's name (a manifest's): an empty page
        self.assertNotIn("half", index.projects())
        self.assertEqual(index.get(f"default/simple/half/{wheel_name}", "*/*")[0], 404)
        writing.kill()
        writing.communicate()
        self.assertEqual(subprocess.run([KILN, "cache", "gc"], env=self.env(cache), capture_output=True).returncode, 0)
        self.assertEqual(self.staging(cache), [])
        # Frozen with the entry complete in staging (entry.json written), not yet renamed in.
        committing = self.popen(cache, "--json", "build", "half", KILN_FAULT="commit:2:stop")
        wait_stopped(committing)
        self.assertEqual(self.staging_kinds(cache), ["commit", "wheel"])
        self.assertNotIn("half", index.projects())
        self.assertEqual(index.files("half"), [])
        # gc, even --all, leaves the staging of a live process alone.
        for args in (["cache", "gc"], ["cache", "gc", "--all"]):
            self.assertEqual(subprocess.run([KILN, *args], env=self.env(cache), capture_output=True).returncode, 0)
            self.assertEqual(self.staging_kinds(cache), ["commit", "wheel"])
        committing.send_signal(signal.SIGCONT)
        out, err = committing.communicate(timeout=600)
        self.assertEqual(committing.returncode, 0, err)
        item = json.loads(out)["items"][0]
        self.assertEqual(index.projects(), ["half"])
        self.assertEqual(index.check_all(), (1, []))
        self.assertEqual(index.files("half")[0]["hashes"]["sha256"], item["sha256"])

    # --- gc --all during serve and build ---------------------------------------------------------

    def test_gc_never_removes_what_a_build_or_a_download_uses(self):
        cache = self.fresh_cache("c")
        for name in ("gc-served", "gc-held", "gc-building"):
            self.pure(name, blob=2 << 20)
        built = json.loads(self.kiln("--cache", str(cache), "--json", "build", "gc-served", "gc-held", check=0).stdout)
        wheels = {i["package"]: i for i in built["items"]}
        index = self.serve(cache)
        # A download in progress: headers and the first KiB read, the rest not yet.
        f = index.files("gc-served")[0]
        port = int(re.search(r":(\d+)/$", index.base).group(1))
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.addCleanup(sock.close)
        sock.sendall(f"GET /default/simple/gc-served/{f['url']} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        got = b""
        while b"\r\n\r\n" not in got or len(got.split(b"\r\n\r\n", 1)[1]) < 1024:
            got += sock.recv(1024)
        # A build in its commit, and a build holding a key (as one does while it checks a cache hit).
        building = self.popen(cache, "--json", "build", "gc-building", KILN_FAULT="commit:1:stop")
        wait_stopped(building)
        held_key = wheels["gc-held"]["key"]
        lock = open(cache / "locks" / f"{held_key}.lock", "a+")
        self.addCleanup(lock.close)
        fcntl.flock(lock, fcntl.LOCK_EX)
        shared = {p: sorted(os.listdir(cache / p)) for p in ("downloads", "sysroots")}

        gc = subprocess.run([KILN, "cache", "gc", "--all"], env=self.env(cache), capture_output=True, text=True)
        self.assertEqual(gc.returncode, 0, gc.stderr)
        self.assertIn(f"kiln: kept {Path(wheels['gc-held']['wheel']).name}: a build holds its key", gc.stderr)
        self.assertFalse(Path(wheels["gc-served"]["wheel"]).exists())  # removed: nobody held it ...
        while chunk := sock.recv(65536):  # ... but the download in progress gets every byte
            got += chunk
        head, body = got.split(b"\r\n\r\n", 1)
        self.assertIn(b" 200 ", head.split(b"\r\n")[0])
        self.assertEqual(hashlib.sha256(body).hexdigest(), wheels["gc-served"]["sha256"])
        self.assertEqual(index.get(f"default/simple/gc-served/{f['url']}", "*/*")[0], 404)
        self.assertNotIn("gc-served", index.projects())
        self.assertTrue(Path(wheels["gc-held"]["wheel"]).exists())  # kept: a build holds its key
        self.assertEqual(self.staging_kinds(cache), ["commit", "wheel"])  # kept: the committing build's
        self.assertEqual({p: sorted(os.listdir(cache / p)) for p in ("downloads", "sysroots")}, shared)
        building.send_signal(signal.SIGCONT)
        out, err = building.communicate(timeout=600)
        self.assertEqual(building.returncode, 0, err)
        self.assertTrue(Path(json.loads(out)["items"][0]["wheel"]).exists())
        self.assertEqual(sorted(index.projects()), ["gc-building", "gc-held"])
        self.assertEqual(index.check_all(), (2, []))
        fcntl.flock(lock, fcntl.LOCK_UN)
        self.assertEqual(subprocess.run([KILN, "cache", "gc", "--all"], env=self.env(cache), capture_output=True).returncode, 0)
        self.assertEqual(index.projects(), [])
        self.assertEqual(self.kiln("--cache", str(cache), "cache", "verify").returncode, 0)


if __name__ == "__main__":
    unittest.main()
