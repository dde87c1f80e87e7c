"""The shared remote cache against real servers (tests/support/services.py): Redis and nginx's
WebDAV. Each worker is a `kiln build` with a local cache of its own (downloads, sysroots and
toolkits shared, as on a warm CI runner) and the same remote.

What is checked: a worker with an empty cache takes the wheel (validated) or, for another arch
set, the objects it shares; a damaged or truncated remote entry is a miss, reported, rebuilt and
stored again whole; read-only never writes; a wrong token, a remote killed mid-build or a
poisoned wheel (valid hashes, another key's wheel) never fail the build.
"""

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from kilntest import KILN, KilnTestCase

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import services  # noqa: E402

MAGIC = b"kiln-object 1 "


def whole(entry):
    """Whether a remote entry's bytes match the sha256 its header records."""
    head, _, body = entry.partition(b"\n")
    return head.startswith(MAGIC) and head[len(MAGIC):].decode() == hashlib.sha256(body).hexdigest()


class RemoteCacheTest(KilnTestCase):
    def start(self, cls, **kwargs):
        try:
            service = cls(self.tmp, **kwargs)
        except services.ServiceMissing as e:
            raise self.failureException(str(e)) from None
        self.addCleanup(service.stop)
        return service

    def worker(self, name, *args, env=None, check=0):
        """A `kiln --json build kiln-demo` with a fresh local cache `name` (kept for reuse)."""
        cache = self.tmp / name
        if not cache.exists():
            cache = self.fresh_cache(name)
        proc = self.kiln("--json", "build", "kiln-demo", *args, check=check,
                         env={"KILN_CACHE": str(cache), **(env or {})})
        out = json.loads(proc.stdout) if proc.returncode == 0 else None
        return out, proc.stderr

    def ran(self, out):
        return {j["job"] for j in out["jobs"]}

    def test_redis_workers_share_wheels_and_objects_and_refuse_a_poisoned_wheel(self):
        redis = self.start(services.Redis)
        remote = ("--remote-cache", redis.url)
        first, _ = self.worker("a", *remote)
        self.assertGreater(first["stores"]["remote"]["stores"], 0, first["stores"])
        self.assertFalse(first["stores"]["remote"]["failed"])

        # An empty worker: the wheel, validated, and no compile.
        second, err = self.worker("b", *remote)
        self.assertTrue(second["items"][0]["remote_hit"], err)
        self.assertEqual(second["compile_jobs"], 0)
        self.assertEqual(second["items"][0]["sha256"], first["items"][0]["sha256"])

        # Another arch set: another wheel, but the C++ object, the host parts and the sm_90
        # device parts come from the remote; only sm_120's are compiled.
        third, err = self.worker("c", *remote, "--archs", "9.0;12.0")
        ran = self.ran(third)
        self.assertNotIn("g++ kiln_demo.cpp", ran)
        self.assertFalse([j for j in ran if j.endswith(" sm_90") or j.endswith(" host")], ran)
        self.assertTrue([j for j in ran if j.endswith(" sm_120")], ran)
        self.assertGreater(third["stores"]["remote"]["hits"], 0)

        # A poisoned wheel: the first build's entry, whole, put under the key of an sm_100 build.
        resolved = json.loads(self.kiln("--json", "resolve", "kiln-demo", "--archs", "9.0;10.0",
                                        check=0).stdout)
        key = resolved["items"][0]["key"]
        good = first["items"][0]["key"]
        info = redis.command("GET", f"kiln:wheels/{good}/entry.json")
        wheel = Path(first["items"][0]["wheel"]).name
        redis.command("SET", f"kiln:wheels/{key}/entry.json", info)
        redis.command("SET", f"kiln:wheels/{key}/{wheel}",
                      redis.command("GET", f"kiln:wheels/{good}/{wheel}"))
        poisoned, err = self.worker("d", *remote, "--archs", "9.0;10.0")
        self.assertRegex(err, r"is refused[: (]+its (kiln|entry).json names another build key")
        self.assertFalse(poisoned["items"][0]["remote_hit"])
        self.assertNotEqual(poisoned["items"][0]["sha256"], first["items"][0]["sha256"])

        # Killed mid-build: the build finishes locally, with one warning.
        cache = self.fresh_cache("e")
        proc = subprocess.Popen([KILN, "--json", "build", "kiln-demo", "--archs", "8.0;9.0",
                                 *remote], cwd=self.project, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "KILN_CACHE": str(cache)})
        deadline = time.time() + 300
        while not list(cache.glob("build/*/logs/*.log")) and time.time() < deadline:
            time.sleep(0.2)
        redis.kill()
        out, err = proc.communicate(timeout=600)
        self.assertEqual(proc.returncode, 0, err)
        self.assertEqual(err.count("building without it for the rest of this run"), 1, err)
        self.assertTrue(json.loads(out)["stores"]["remote"]["failed"])

    def test_webdav_damaged_entries_readonly_and_a_wrong_token(self):
        dav = self.start(services.WebDav, token="s3cret")
        remote = ("--remote-cache", dav.url)
        token = {"KILN_REMOTE_CACHE_TOKEN": "s3cret"}
        first, _ = self.worker("a", *remote, env=token)
        objects = sorted(p for p in (dav.root / "objects").rglob("*.o"))
        self.assertGreaterEqual(len(objects), 3)

        # One object truncated, one with a bit flipped, the wheel's entry gone: a worker with an
        # empty cache rebuilds those two (reporting them) and stores them again whole.
        for f in (dav.root / "wheels" / first["items"][0]["key"]).iterdir():
            f.unlink()
        truncated, flipped = objects[0], objects[1]
        truncated.write_bytes(truncated.read_bytes()[:40])  # inside the header
        data = bytearray(flipped.read_bytes())
        data[-1] ^= 1
        flipped.write_bytes(bytes(data))
        second, err = self.worker("b", *remote, env=token)
        self.assertEqual(second["items"][0]["sha256"], first["items"][0]["sha256"])
        self.assertEqual(second["stores"]["remote"]["corrupt"], 2, err)
        self.assertIn("do not match the sha256", err)
        self.assertIn("no kiln-object header", err)
        self.assertTrue(whole(truncated.read_bytes()) and whole(flipped.read_bytes()))

        # Read-only: compiles what it must (sm_120) and writes nothing.
        before = {p: p.stat().st_mtime_ns for p in dav.root.rglob("*")}
        third, _ = self.worker("c", *remote, "--archs", "9.0;12.0", "--remote-cache-readonly",
                               env=token)
        self.assertTrue([j for j in self.ran(third) if j.endswith(" sm_120")])
        self.assertEqual(third["stores"]["remote"]["stores"], 0)
        self.assertEqual({p: p.stat().st_mtime_ns for p in dav.root.rglob("*")}, before)

        # A wrong token: one warning, a local build (from this worker's own objects), exit 0; the
        # token is in no message.
        subprocess.run(["rm", "-rf", str(self.tmp / "c" / "wheels")], check=True)
        fourth, err = self.worker("c", *remote, "--archs", "9.0;12.0",
                                  env={"KILN_REMOTE_CACHE_TOKEN": "wr0ng-t0ken"})
        self.assertEqual(err.count("building without it for the rest of this run"), 1, err)
        self.assertIn("HTTP 401", err)
        self.assertNotIn("wr0ng-t0ken", err)
        self.assertTrue(fourth["stores"]["remote"]["failed"])
        self.assertEqual(fourth["items"][0]["sha256"], third["items"][0]["sha256"])

    def test_credentials_never_on_the_command_line(self):
        proc = self.kiln("build", "kiln-demo", "--remote-cache", "redis://:pw@127.0.0.1:1")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("holds credentials", proc.stderr)
        self.assertNotIn("pw@", proc.stderr)


if __name__ == "__main__":
    import unittest
    unittest.main()
