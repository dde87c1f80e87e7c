"""Helpers for end-to-end tests: run the real kiln binary in a temporary copy of the project."""

import gzip
import hashlib
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest
from pathlib import Path

KILN = os.environ.get("KILN") or shutil.which("kiln")
# Downloads, unpacked torch sysroots and build environments are shared by every test (and kept
# between runs) through this cache; wheels and objects are not, so each test builds from scratch.
SHARED_CACHE = Path(os.environ.get("KILN_CACHE") or Path.home() / ".cache/kiln/cache")
TOOLS = Path(os.environ.get("KILN_TOOLS") or Path.home() / ".cache/kiln/tools")
SOURCE_DIR = Path(os.environ.get("KILN_SOURCE_DIR", Path(__file__).resolve().parents[2]))
SERVER = SOURCE_DIR / "tests" / "support" / "http_server.py"


def sha256(data):
    return hashlib.sha256(data).hexdigest()


class KilnTestCase(unittest.TestCase):
    """Each test gets a scratch directory with a copy of manifests/, patches/ and kernels/."""

    def setUp(self):
        if not KILN:
            self.skipTest("KILN is not set and kiln is not on PATH")
        self.tmp = Path(tempfile.mkdtemp(prefix="kiln-e2e-"))
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.project = self.tmp / "project"
        for part in ("manifests", "patches", "kernels"):
            shutil.copytree(SOURCE_DIR / part, self.project / part,
                            ignore=shutil.ignore_patterns("__pycache__"))
        self.cache = self.tmp / "cache"

    def kiln(self, *args, check=None, env=None, cwd=None, timeout=600):
        """Runs kiln; check=0 (or any int) asserts that exit code."""
        full_env = dict(os.environ)
        for name in ("KILN_MANIFESTS", "KILN_PATCHES", "KILN_TARGET", "KILN_JOBS", "KILN_OFFLINE",
                     "KILN_INDEX_URL"):
            full_env.pop(name, None)
        full_env["KILN_CONFIG"] = "/dev/null"  # the user's configuration stays out of the tests
        full_env["KILN_CACHE"] = str(self.cache)
        full_env.update(env or {})
        proc = subprocess.run([KILN, *args], cwd=cwd or self.project, env=full_env,
                              capture_output=True, text=True, timeout=timeout)
        if check is not None:
            self.assertEqual(proc.returncode, check,
                             f"kiln {' '.join(args)}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        return proc

    def start_serve(self, cache, *args):
        """Starts `kiln serve --port 0` on `cache` (stopped at cleanup); returns (base URL, process,
        stderr path)."""
        log = self.tmp / f"serve-{len(list(self.tmp.glob('serve-*.log')))}.log"
        with open(log, "w") as err:
            proc = subprocess.Popen([KILN, "--cache", str(cache), "serve", "--port", "0", *args],
                                    stdout=subprocess.DEVNULL, stderr=err, cwd=self.project)

        def stop():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=10)
        self.addCleanup(stop)
        deadline = time.time() + 60
        while time.time() < deadline:
            m = re.search(r"^kiln: serving (http://127\.0\.0\.1:\d+/)", log.read_text(), re.M)
            if m:
                return m.group(1), proc, log
            self.assertIsNone(proc.poll(), log.read_text())
            time.sleep(0.05)
        self.fail("kiln serve did not start:\n" + log.read_text())

    def in_private_tmp(self, script, check=True):
        """Runs `script` (sh) as root in a mount namespace of its own whose /tmp is a tmpfs holding
        the real /tmp's entries (bound back in) but its kiln-build, so that what the script plants
        in /tmp nobody else sees."""
        if os.geteuid() != 0 or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
            self.skipTest("needs root and unshare -m")
        prologue = """set -e
mount --rbind /tmp /mnt
mount -t tmpfs tmpfs /tmp
for e in /mnt/* /mnt/.[!.]* /mnt/..?*; do
  [ -e "$e" ] || [ -L "$e" ] || continue
  n=${e#/mnt/}
  [ "$n" = kiln-build ] && continue
  if [ -L "$e" ]; then ln -s "$(readlink "$e")" "/tmp/$n"
  elif [ -d "$e" ]; then mkdir "/tmp/$n" && mount --rbind "$e" "/tmp/$n"
  else touch "/tmp/$n" && mount --bind "$e" "/tmp/$n"; fi
done
"""
        proc = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", prologue + script],
                              capture_output=True, text=True, timeout=1800)
        if check:
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        return proc

    def fresh_cache(self, name):
        """A cache with no wheels or objects that shares downloads, sysroots and the setuptools
        backend's environments with every test."""
        cache = self.tmp / name
        cache.mkdir()
        for part in ("downloads", "sysroots", "toolkits", "envs"):
            (SHARED_CACHE / part).mkdir(parents=True, exist_ok=True)
            (cache / part).symlink_to(SHARED_CACHE / part)
        return cache

    def copy_project(self, name):
        """A second copy of the project at another path."""
        other = self.tmp / name
        shutil.copytree(self.project, other, symlinks=True)
        return other

    def tool(self, name):
        path = TOOLS / "bin" / name
        if not path.exists():
            self.skipTest(f"{name} is not installed in {TOOLS} (scripts/test installs it)")
        return str(path)

    def cuobjdump_path(self):
        """The path of cuobjdump from the tools environment (PyPI's nvidia-cuda-cuobjdump puts the
        binary inside the package)."""
        found = subprocess.run([self.tool("python"), "-c", "import nvidia, pathlib; "
                                "print(next(pathlib.Path(p) for p in nvidia.__path__ "
                                "for p in pathlib.Path(p).rglob('cuobjdump') if p.is_file()))"],
                               capture_output=True, text=True)
        if found.returncode != 0:
            self.skipTest("cuobjdump not found in the tools environment")
        return found.stdout.strip()

    def sass_and_ptx(self, so):
        """(archs with SASS, archs with PTX) of a shared object, as cuobjdump lists them."""
        out = subprocess.run([self.cuobjdump_path(), "--list-elf", "--list-ptx", str(so)],
                             capture_output=True, text=True, check=True).stdout
        elf = sorted(set(re.findall(r"ELF file\s+\d+:.*\.(sm_\d+[af]?)\.cubin", out)))
        ptx = sorted(set(re.findall(r"PTX file\s+\d+:.*\.(sm_\d+[af]?)\.ptx", out)))
        return elf, ptx

    def edit(self, relpath, old, new):
        path = self.project / relpath
        text = path.read_text()
        self.assertIn(old, text, f"{old!r} not in {relpath}")
        path.write_text(text.replace(old, new, 1))


MANIFEST = """[package]
name = "demo"
version = "1.0.0"
summary = "demo"
license = "MIT"
requires-python = ">=3.9"

[source]
{source}

{patches}
[build]
backend = "pure"
packages = ["demo"]
"""


class SourceTestCase(KilnTestCase):
    """A package 'demo' whose source a test writes: a local HTTP server (tests/support/http_server.py)
    serving self.served, sdists built in memory, and assertions that a failure wrote nothing
    outside the cache."""

    def setUp(self):
        super().setUp()
        self.outside = self.tmp / "outside"
        self.outside.mkdir()
        self.served = self.tmp / "served"
        self.served.mkdir()

    # -- helpers -----------------------------------------------------------------------------
    def server(self):
        port_file = self.tmp / "port"
        proc = subprocess.Popen([sys.executable, str(SERVER), "--root", str(self.served),
                                 "--port-file", str(port_file)])
        self.addCleanup(proc.wait)
        self.addCleanup(proc.terminate)
        for _ in range(100):
            if port_file.exists() and port_file.read_text().strip():
                return f"http://127.0.0.1:{port_file.read_text().strip()}"
            time.sleep(0.05)
        self.fail("test server did not start")

    def demo_manifest(self, source, patches=""):
        d = self.project / "manifests" / "demo"
        d.mkdir(parents=True, exist_ok=True)
        (d / "1.0.0.toml").write_text(MANIFEST.format(source=source, patches=patches))

    def sdist(self, members):
        """A tar.gz built from (TarInfo, bytes) pairs; the same bytes for the same members (gzip's
        header holds no time)."""
        buf = io.BytesIO()
        with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as t:
            for info, data in members:
                t.addfile(info, io.BytesIO(data) if data is not None else None)
        return buf.getvalue()

    def member(self, name, data=b"x", **kw):
        info = tarfile.TarInfo(name)
        info.size = len(data) if data is not None else 0
        for k, v in kw.items():
            setattr(info, k, v)
        return info, data

    def good_sdist(self):
        return self.sdist([self.member("demo-1.0.0/demo/__init__.py", b"VALUE = 1\n"),
                           self.member("demo-1.0.0/setup.py", b"print('hi')\n")])

    def local_archive(self, name, data):
        path = self.tmp / name
        path.write_bytes(data)
        self.demo_manifest(f'path = "{path}"\nsha256 = "{sha256(data)}"')

    def snapshot(self):
        return sorted(str(p.relative_to(self.tmp)) for p in self.tmp.rglob("*")
                      if "cache" not in p.parts and "served" not in p.parts)

    def cache_files(self, keep_verified=False):
        """Files left in the cache. A resumable .part of a broken transfer is allowed; with
        keep_verified, so are pinned downloads whose sha256 matched and a git mirror (what the
        remote really holds): what failed there was not the download."""
        if not self.cache.exists():
            return []
        out = []
        for p in self.cache.rglob("*"):
            rel = p.relative_to(self.cache)
            if not p.is_file() or p.name.endswith(".part") or p.name.endswith(".lock") or rel.parts[0] == "locks":
                continue
            if rel.parts == ("CACHEDIR.TAG",):  # the mark of a kiln cache, written first
                continue
            if keep_verified and rel.parts[0] in ("downloads", "git"):
                continue
            out.append(str(rel))
        return sorted(out)

    def assert_fails_cleanly(self, *args, code=None, message, keep_verified=False, env=None):
        before = self.snapshot()
        proc = self.kiln(*args, env=env)
        self.assertNotEqual(proc.returncode, 0, proc.stderr)
        if code is not None:
            self.assertEqual(proc.returncode, code, proc.stderr)
        first = proc.stderr.strip().splitlines()[-1] if "kiln: error:" not in proc.stderr else \
            next(l for l in proc.stderr.splitlines() if l.startswith("kiln: error: "))
        self.assertRegex(first, message)
        self.assertEqual(self.snapshot(), before, "files were written outside the cache")
        self.assertEqual(list(self.outside.iterdir()), [])
        self.assertEqual(self.cache_files(keep_verified), [])
        return proc
