"""Faults end to end, with the real binary and fresh caches: kiln SIGKILLed at named points of a
kiln-demo build (download, unpack, compile, wheel write, commit), a full disk, a network cut in
the middle of a download, and a cache entry whose bytes were flipped. After each: a clear error
(or none, for a kill), `kiln cache verify` passes, nothing partial is left in the cache, nothing
is written outside the cache and the build root, and the next build succeeds. The sweep of 20 runs
per point is scripts/fault-sweep (results in docs/reliability.md)."""

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import unittest
from pathlib import Path

from faults import FaultRig, pure_package
from kilntest import KILN, SOURCE_DIR, KilnTestCase

SERVER = SOURCE_DIR / "tests" / "support" / "http_server.py"

def sha256(data):
    return hashlib.sha256(data).hexdigest()


class FaultTest(KilnTestCase):
    def pure_package(self, name, payload=b"VALUE = 1\n", blob=0, source=None):
        return pure_package(self.project, self.tmp / "sources", name, payload, blob, source)

    def sdist_of(self, src, name):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as t:
            t.add(src, arcname=f"{name}-1.0.0")
        return buf.getvalue()

    def server(self, served):
        port_file = self.tmp / "port"
        log = self.tmp / "http.log"
        proc = subprocess.Popen([sys.executable, str(SERVER), "--root", str(served), "--port-file", str(port_file),
                                 "--log", str(log)])
        self.addCleanup(proc.wait)
        self.addCleanup(proc.terminate)
        for _ in range(200):
            if port_file.exists() and port_file.read_text().strip():
                return f"http://127.0.0.1:{port_file.read_text().strip()}", log
            time.sleep(0.05)
        self.fail("test server did not start")

    def snapshot(self):
        """Everything under the test's directory outside the caches."""
        return sorted(str(p.relative_to(self.tmp)) for p in self.tmp.rglob("*")
                      if not any(part.startswith("cache") for part in p.relative_to(self.tmp).parts)
                      and p.name not in ("http.log", "port"))

    def error_line(self, proc):
        return next((l for l in proc.stderr.splitlines() if l.startswith("kiln: error: ")), "")

    def entries(self, cache):
        return sorted(p.name for p in (cache / "wheels").glob("*")) if (cache / "wheels").exists() else []

    def staging(self, cache):
        return sorted(p.name for p in (cache / "tmp").glob("*")) if (cache / "tmp").exists() else []

    # --- SIGKILL at each point of one build, then the next build succeeds -----------------------

    def test_sigkill_at_each_point_then_verify_and_build(self):
        rig = FaultRig(KILN, self.tmp / "rig", seed=1)
        self.addCleanup(rig.close)
        cache = rig.fresh_cache("cache")
        before = rig.project_snapshot()
        # One chain, so the fixture compiles once: each run gets past the point the one before it
        # was killed at (the download resumes, the unpack restarts, the objects are reused, ...).
        for point, nth in (("download", 5), ("unpack", 3), ("compile", 3), ("wheel", 3), ("commit", 1),
                           ("commit", 2)):
            with self.subTest(point=point, nth=nth):
                out, problems = rig.kill(cache, point, nth)
                self.assertEqual(problems, [], out)
                self.assertTrue(out["killed"])
        final = rig.kiln(cache, "--json", "build", "kiln-demo")
        self.assertEqual(final.returncode, 0, final.stderr)
        item = json.loads(final.stdout)["items"][0]
        self.assertFalse(item["cache_hit"])
        self.assertEqual(rig.kiln(cache, "cache", "verify").returncode, 0)
        self.assertEqual(rig.kiln(cache, "validate", item["wheel"]).returncode, 0)
        # A kill after the entry was renamed into place (before the directory sync): it is whole.
        shutil.rmtree(Path(item["wheel"]).parent)
        out, problems = rig.kill(cache, "commit", 3)
        self.assertEqual(problems, [], out)
        again = rig.kiln(cache, "--json", "build", "kiln-demo")
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertTrue(json.loads(again.stdout)["items"][0]["cache_hit"])
        self.assertEqual(json.loads(again.stdout)["items"][0]["sha256"], item["sha256"])
        self.assertEqual(rig.build_roots(cache), [])
        self.assertEqual(self.staging(cache), [])
        self.assertEqual(rig.project_snapshot(), before)
        # The download was resumed, not started over: a Range request after the kill.
        log = [json.loads(l) for l in (rig.tmp / "http.log").read_text().splitlines()]
        self.assertTrue(any(r["range"].startswith("bytes=") for r in log if r["path"].endswith(".tar.gz")), log)

    # --- disk full: a small tmpfs as the cache --------------------------------------------------

    def served_sdist(self, name, blob):
        """A pure package's sdist behind a local server: (its bytes, the server's URL, its request log)."""
        served = self.tmp / "served"
        served.mkdir()
        data = self.sdist_of(self.pure_package(name, blob=blob), name)
        (served / f"{name}-1.0.0.tar.gz").write_bytes(data)
        url, log = self.server(served)
        return data, url, log

    def in_small_mount(self, script, size):
        """Runs a shell script in a mount namespace where $MNT is a fresh tmpfs of `size`."""
        mnt = self.tmp / "cache-small"
        mnt.mkdir()
        unshare = ["unshare", "--mount"] if os.getuid() == 0 else ["unshare", "--mount", "--map-root-user"]
        probe = subprocess.run([*unshare, "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {mnt}"], capture_output=True)
        if probe.returncode != 0:
            self.skipTest(f"cannot mount a tmpfs in a mount namespace here: {probe.stderr.decode().strip()}")
        env = dict(os.environ, MNT=str(mnt), KILN=KILN, KILN_CACHE=str(mnt))
        env.pop("KILN_MANIFESTS", None)
        return subprocess.run([*unshare, "sh", "-c", f"mount -t tmpfs -o size={size} tmpfs \"$MNT\" && {script}"],
                              capture_output=True, text=True, env=env, cwd=self.project, timeout=600)

    def test_disk_full_during_wheel_write_and_download(self):
        self.pure_package("big-wheel", blob=3 << 20)
        data, url, _ = self.served_sdist("big-sdist", blob=3 << 20)
        self.pure_package("big-sdist", blob=3 << 20,
                          source=f'url = "{url}/big-sdist-1.0.0.tar.gz"\nsha256 = "{sha256(data)}"')
        before = self.snapshot()
        out = self.tmp / "results"
        out.mkdir()
        # In a 1 MiB cache both builds fail; what is left is listed; then, with room, both succeed.
        script = f"""
            "$KILN" build big-wheel >{out}/w.out 2>{out}/w.err; echo $? >{out}/w.rc
            "$KILN" build big-sdist >{out}/d.out 2>{out}/d.err; echo $? >{out}/d.rc
            (cd "$MNT" && find . -type f ! -path './locks/*' ! -path ./CACHEDIR.TAG | sort) >{out}/left
            "$KILN" cache verify >/dev/null 2>{out}/v1.err; echo $? >{out}/v1.rc
            mount -o remount,size=64m "$MNT"
            "$KILN" --json build big-wheel big-sdist >{out}/ok.out 2>{out}/ok.err; echo $? >{out}/ok.rc
            "$KILN" cache verify >/dev/null 2>{out}/v2.err; echo $? >{out}/v2.rc
        """
        proc = self.in_small_mount(script, "1m")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        read = lambda name: (out / name).read_text()
        self.assertEqual(read("w.rc").strip(), "1", read("w.err"))
        self.assertRegex(read("w.err"), r"(?m)^kiln: error: .*No space left on device")
        self.assertEqual(read("d.rc").strip(), "1", read("d.err"))
        self.assertRegex(read("d.err"), r"(?m)^kiln: error: cannot download big-sdist-1\.0\.0\.tar\.gz .*No space left on device")
        self.assertEqual(read("left"), "", "a full disk left files in the cache")  # no .part, no staging
        self.assertEqual(read("v1.rc").strip(), "0", read("v1.err"))
        self.assertEqual(read("ok.rc").strip(), "0", read("ok.err"))
        self.assertEqual(len(json.loads(read("ok.out"))["items"]), 2)
        self.assertEqual(read("v2.rc").strip(), "0", read("v2.err"))
        self.assertEqual(self.snapshot(), sorted(before + ["results"] + [f"results/{p.name}" for p in out.iterdir()]))

    # --- a network cut in the middle of a download ----------------------------------------------

    def test_network_cut_mid_download_then_retry_resumes(self):
        data, url, log = self.served_sdist("cut", blob=256 << 10)
        # The first three requests (kiln's three attempts) each get 4 KiB and a closed connection.
        self.pure_package("cut", blob=256 << 10, source=f'url = "{url}/cut/3/4096/cut-1.0.0.tar.gz"\nsha256 = "{sha256(data)}"')
        before = self.snapshot()
        failed = self.kiln("build", "cut")
        self.assertEqual(failed.returncode, 1, failed.stderr)
        self.assertRegex(self.error_line(failed), r"^kiln: error: cannot download cut-1\.0\.0\.tar\.gz from http://127\.0\.0\.1:\d+/cut/3/4096/cut-1\.0\.0\.tar\.gz: .*\(3 attempts\)$")
        sha_dir = self.cache / "downloads" / sha256(data)[:2] / sha256(data)
        self.assertEqual(sorted(p.name for p in sha_dir.iterdir()), ["cut-1.0.0.tar.gz.part"])  # resumable, not cached
        self.assertEqual((sha_dir / "cut-1.0.0.tar.gz.part").stat().st_size, 3 * 4096)
        self.assertEqual(self.entries(self.cache), [])
        self.assertEqual(self.staging(self.cache), [])
        ok = self.kiln("--json", "build", "cut")
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertEqual((sha_dir / "cut-1.0.0.tar.gz").read_bytes(), data)
        ranges = [json.loads(l)["range"] for l in log.read_text().splitlines()]
        self.assertEqual(ranges, ["", "bytes=4096-", "bytes=8192-", "bytes=12288-"])
        self.assertEqual(self.kiln("cache", "verify").returncode, 0)
        self.assertEqual(self.snapshot(), before)

    # --- a corrupted cache entry is found by verify and rebuilt by build --------------------------

    def test_corrupted_entry_is_detected_and_rebuilt(self):
        self.pure_package("flip", blob=64 << 10)
        first = json.loads(self.kiln("--json", "build", "flip", check=0).stdout)["items"][0]
        wheel = Path(first["wheel"])
        good = wheel.read_bytes()
        for damage in ("flip", "truncate", "no-entry-json"):
            with self.subTest(damage=damage):
                if damage == "flip":
                    bad = bytearray(good)
                    for i in (100, len(bad) // 2, len(bad) - 30):
                        bad[i] ^= 0xFF
                    wheel.write_bytes(bytes(bad))
                elif damage == "truncate":
                    wheel.write_bytes(good[: len(good) // 2])
                else:
                    (wheel.parent / "entry.json").unlink()
                verify = self.kiln("cache", "verify")
                self.assertEqual(verify.returncode, 1, verify.stderr)
                self.assertIn(f"kiln: error: cache entry {first['key']}: ", verify.stderr)
                rebuilt = self.kiln("--json", "build", "flip", check=0)
                item = json.loads(rebuilt.stdout)["items"][0]
                self.assertFalse(item["cache_hit"])
                self.assertIn(f"kiln: warning: cache entry {first['key'][:16]} of flip was damaged", rebuilt.stderr)
                self.assertEqual(item["sha256"], first["sha256"])  # the same bytes again
                self.assertEqual(wheel.read_bytes(), good)
                self.assertEqual(self.kiln("cache", "verify").returncode, 0)
                self.assertEqual(self.staging(self.cache), [])


if __name__ == "__main__":
    unittest.main()
