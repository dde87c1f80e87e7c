"""Fault injection with the real kiln binary: the kiln-demo fixture as an sdist served over HTTP by
tests/support/http_server.py (so one build downloads, unpacks, compiles, writes a wheel and
commits it), a fresh cache, and kiln's KILN_FAULT test hook (docs/reliability.md), which makes kiln
SIGKILL itself the nth time it reaches a named point. Used by test_faults.py and scripts/fault-sweep.
"""

import hashlib
import io
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE_DIR = Path(os.environ.get("KILN_SOURCE_DIR", HERE.parents[1]))
SERVER = SOURCE_DIR / "tests" / "support" / "http_server.py"
SHARED_CACHE = Path(os.environ.get("KILN_CACHE") or Path.home() / ".cache/kiln/cache")

# The points kiln knows (builder/: fault_point("...")) and what the nth arrival is.
POINTS = {
    "download": "each chunk of the sdist written to its .part file",
    "unpack": "each member of the sdist unpacked",
    "compile": "each compile or link job started (kiln-demo: its C++ file, a device, a host and a fat-binary job per kernel shard, the link)",
    "wheel": "each entry written into the staged wheel, and the finished wheel",
    "commit": "1: wheel staged; 2: entry.json written; 3: entry renamed into wheels/, not yet synced",
}


def sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


class FaultRig:
    """One served kiln-demo sdist (with a seeded incompressible blob that makes the download take
    many chunks and names this rig's build root), a project copy whose kiln-demo manifest points at
    it, and fresh caches that share only the torch downloads and sysroots."""

    def __init__(self, kiln, tmp, seed=0, blob_kib=1024):
        self.kiln_bin = kiln
        self.tmp = Path(tmp)
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.project = self.tmp / "project"
        for part in ("manifests", "patches", "kernels"):
            if not (self.project / part).exists():
                shutil.copytree(SOURCE_DIR / part, self.project / part, ignore=shutil.ignore_patterns("__pycache__"))
        self.served = self.tmp / "served"
        self.served.mkdir(exist_ok=True)
        self.blob = f"fault-{os.getpid()}-{seed}-{time.time_ns()}.bin"
        rng = random.Random(seed)
        data = self.sdist(rng.randbytes(blob_kib * 1024))
        (self.served / "kiln-demo-0.1.0.tar.gz").write_bytes(data)
        self.sdist_sha = sha256_bytes(data)
        self.server_proc = None
        self.url = self.start_server()
        manifest = self.project / "manifests" / "kiln-demo" / "0.1.0.toml"
        text = manifest.read_text()
        text = re.sub(r'(?m)^path = "\.\./\.\./kernels/kiln-demo"$',
                      f'url = "{self.url}/kiln-demo-0.1.0.tar.gz"\nsha256 = "{self.sdist_sha}"', text)
        assert self.sdist_sha in text, "the kiln-demo manifest no longer has a local path source"
        manifest.write_text(text)

    def sdist(self, blob):
        buf = io.BytesIO()
        root = SOURCE_DIR / "kernels" / "kiln-demo"
        with tarfile.open(fileobj=buf, mode="w:gz") as t:
            for p in sorted(root.rglob("*")):
                if p.is_file() and "__pycache__" not in p.parts:
                    info = t.gettarinfo(str(p), f"kiln-demo-0.1.0/{p.relative_to(root)}")
                    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                    with open(p, "rb") as f:
                        t.addfile(info, f)
            info = tarfile.TarInfo(f"kiln-demo-0.1.0/{self.blob}")
            info.size = len(blob)
            t.addfile(info, io.BytesIO(blob))
        return buf.getvalue()

    def start_server(self):
        port_file = self.tmp / "port"
        self.server_proc = subprocess.Popen([sys.executable, str(SERVER), "--root", str(self.served),
                                             "--port-file", str(port_file), "--log", str(self.tmp / "http.log")])
        for _ in range(200):
            if port_file.exists() and port_file.read_text().strip():
                return f"http://127.0.0.1:{port_file.read_text().strip()}"
            time.sleep(0.05)
        raise RuntimeError("test server did not start")

    def close(self):
        if self.server_proc and self.server_proc.poll() is None:
            self.server_proc.terminate()
            self.server_proc.wait()

    def fresh_cache(self, name):
        """A cache of its own; downloads/<xx>/<sha>/ of the shared cache (torch wheels) and its
        sysroots are linked in, so nothing big is fetched again."""
        cache = self.tmp / name
        shutil.rmtree(cache, ignore_errors=True)
        (cache / "downloads").mkdir(parents=True)
        (SHARED_CACHE / "sysroots").mkdir(parents=True, exist_ok=True)
        (cache / "sysroots").symlink_to(SHARED_CACHE / "sysroots")
        for entry in (SHARED_CACHE / "downloads").glob("*/*"):
            if entry.is_dir() and any(p.suffix == ".whl" for p in entry.iterdir()):
                (cache / "downloads" / entry.parent.name).mkdir(exist_ok=True)
                (cache / "downloads" / entry.parent.name / entry.name).symlink_to(entry)
        return cache

    def kiln(self, cache, *args, fault=None, timeout=3600):
        env = dict(os.environ, KILN_CACHE=str(cache))
        env.pop("KILN_MANIFESTS", None)
        env.pop("KILN_FAULT", None)
        if fault:
            env["KILN_FAULT"] = fault
        return subprocess.run([self.kiln_bin, *args], cwd=self.project, env=env, capture_output=True,
                              text=True, timeout=timeout)

    def arrivals(self, stderr, point):
        return len(re.findall(rf"^kiln: fault point {re.escape(point)} #\d+$", stderr, re.M))

    def build_roots(self, cache):
        """Build roots of `cache` holding this rig's sources (<cache>/build/<name>)."""
        return sorted(p.parent.parent for p in (Path(cache) / "build").glob(f"*/src/{self.blob}"))

    def project_snapshot(self):
        return sorted((str(p.relative_to(self.project)), p.stat().st_size if p.is_file() else -1)
                      for p in self.project.rglob("*"))

    def the_download(self, cache):
        return cache / "downloads" / self.sdist_sha[:2] / self.sdist_sha / "kiln-demo-0.1.0.tar.gz"

    def reset(self, cache, point):
        """Puts `cache` in the state where a build reaches `point`: no wheel (and, for the points
        before it, no download or no objects)."""
        for d in (cache / "wheels").glob("*"):
            shutil.rmtree(d)
        if point in ("download", "unpack"):
            shutil.rmtree(cache / "downloads" / self.sdist_sha[:2] / self.sdist_sha, ignore_errors=True)
        if point == "compile":
            shutil.rmtree(cache / "objects", ignore_errors=True)

    def wait_for_orphans(self, cache, timeout=1800):
        """A build killed mid-compile leaves its compilers running (they hold its build root's lock,
        so the next build waits for them); wait until they are done so runs do not pile up."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            busy = False
            for root in self.build_roots(cache):
                lock = Path(cache) / "locks" / f"build-{root.name}.lock"
                if lock.exists():
                    import fcntl
                    with open(lock) as f:
                        try:
                            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                            fcntl.flock(f, fcntl.LOCK_UN)
                        except BlockingIOError:
                            busy = True
            if not busy:
                return
            time.sleep(1)

    def kill(self, cache, point, nth):
        """A build killed at point:nth, then the checks: no partial entry, `cache verify` passes,
        `cache gc` removes the staging and the build root the killed process left, a killed
        download is not published, nothing in the project changed. Returns (facts, problems)."""
        before = self.project_snapshot()
        out = {"point": point, "nth": nth}
        killed = self.kiln(cache, "--json", "build", "kiln-demo", fault=f"{point}:{nth}")
        out["killed"] = killed.returncode == -signal.SIGKILL
        out["arrivals"] = self.arrivals(killed.stderr, point)
        problems = []
        if not out["killed"]:
            problems.append(f"not killed (exit {killed.returncode}, {out['arrivals']} arrivals): {killed.stderr[-2000:]}")
        for d in (cache / "wheels").glob("*"):  # every directory in wheels/ is a whole entry
            names = sorted(p.name for p in d.iterdir())
            if "entry.json" not in names or not any(n.endswith(".whl") for n in names):
                problems.append(f"partial cache entry {d.name}: {names}")
        verify = self.kiln(cache, "--json", "cache", "verify")
        out["verify"] = verify.returncode
        if verify.returncode != 0:
            problems.append(f"cache verify failed after the kill: {verify.stdout} {verify.stderr}")
        self.wait_for_orphans(cache)
        gc = self.kiln(cache, "cache", "gc")
        leftovers = sorted(p.name for p in (cache / "tmp").glob("*")) if (cache / "tmp").exists() else []
        if gc.returncode != 0 or leftovers:
            problems.append(f"cache gc left {leftovers} (exit {gc.returncode}): {gc.stderr}")
        if self.build_roots(cache):  # the killed build's root: removed by gc once nothing holds it
            problems.append(f"build roots left after gc: {self.build_roots(cache)}")
        if point == "download" and self.the_download(cache).exists():
            problems.append("a killed download was published")  # at most a resumable .part
        if self.project_snapshot() != before:
            problems.append("the project tree changed")
        return out, problems

    def kill_run(self, cache, point, nth):
        """One run of the sweep: kill() and then the next build, which must succeed; with it the
        build root is gone and no staging is left. Returns the facts, with `problems` and `ok`."""
        out, problems = self.kill(cache, point, nth)
        t0 = time.time()
        again = self.kiln(cache, "--json", "build", "kiln-demo")
        out["rebuild_seconds"] = round(time.time() - t0, 1)
        if again.returncode != 0:
            problems.append(f"the next build failed: {again.stderr[-3000:]}")
        else:
            item = json.loads(again.stdout)["items"][0]
            out["wheel_sha256"] = item["sha256"]
            out["key"] = item["key"]
        verify = self.kiln(cache, "cache", "verify")
        if verify.returncode != 0:
            problems.append(f"cache verify failed after the rebuild: {verify.stderr}")
        if self.build_roots(cache):
            problems.append(f"build roots left: {self.build_roots(cache)}")
        if (cache / "tmp").exists() and any((cache / "tmp").iterdir()):
            problems.append(f"staging left: {sorted(p.name for p in (cache / 'tmp').iterdir())}")
        out["problems"] = problems
        out["ok"] = not problems
        return out


PURE_MANIFEST = """[package]
name = "{name}"
version = "1.0.0"
summary = "a pure package"
license = "MIT"
requires-python = ">=3.9"

[source]
{source}

[build]
backend = "pure"
packages = ["{module}"]
"""


def pure_package(project, sources, name, payload=b"VALUE = 1\n", blob=0, source=None):
    """A pure package `name` 1.0.0 in `project`'s manifests, from a local directory under `sources`
    (or from `source`, a manifest [source] body), with `blob` seeded random bytes in its module.
    Returns the source directory."""
    module = name.replace("-", "_")
    src = Path(sources) / name
    (src / module).mkdir(parents=True, exist_ok=True)
    (src / module / "__init__.py").write_bytes(payload)
    if blob:
        (src / module / "blob.bin").write_bytes(random.Random(7).randbytes(blob))
    d = Path(project) / "manifests" / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "1.0.0.toml").write_text(PURE_MANIFEST.format(name=name, module=module, source=source or f'path = "{src}"'))
    return src


def process_state(pid):
    """The state letter of /proc/<pid>/stat ('T' when stopped), or '' when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return ""


def wait_stopped(proc, timeout=600):
    """Waits until `proc` (run with KILN_FAULT=<point>:<n>:stop) has stopped itself."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process_state(proc.pid) == "T":
            return
        if proc.poll() is not None:
            raise AssertionError(f"kiln exited ({proc.returncode}) before reaching its stop point")
        time.sleep(0.05)
    raise AssertionError("kiln did not reach its stop point")
