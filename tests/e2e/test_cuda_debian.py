"""A CUDA 12 target without a CUDA 12 install: torch2.10-cu128 (torch 2.10, built with CUDA 12.8)
builds the fixture with nvcc 12.4 from pinned Debian packages, with /usr/local/cuda hidden under an
empty mount in a mount namespace, nvcc off PATH and CUDA_HOME unset. The packages (~1 GB) are
downloaded once into the shared cache (KILN_CACHE, kept between CI runs) and laid out once. The
module NEEDs libcudart.so.12 and kiln validate passes against torch 2.10's libraries. Archs the
toolkit cannot build are refused before anything is downloaded; --offline without the packages
fails naming the first missing one."""

import glob
import json
import os
import shutil
import subprocess
import unittest
import zipfile
from pathlib import Path

from kilntest import KILN, KilnTestCase, SHARED_CACHE

CUDA = Path("/usr/local/cuda")
TARGET = "torch2.10-cu128"


def needed(so_path):
    out = subprocess.run(["readelf", "-d", str(so_path)], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


class DebianToolkitTest(KilnTestCase):
    def setUp(self):
        super().setUp()
        if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
            self.skipTest("unshare -m is not permitted here")
        self.path = ":".join(p for p in os.environ.get("PATH", "/usr/bin:/bin").split(":") if "cuda" not in p)

    def hidden(self, *args, timeout=3000):
        """Runs kiln with the system CUDA toolkit out of reach."""
        env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH", "KILN_MANIFESTS")}
        env["PATH"] = self.path
        env["KILN_CACHE"] = str(self.cache)
        script = 'exec "$@"'
        if CUDA.exists():
            script = f'{shutil.which("mount")} -t tmpfs tmpfs "{os.path.realpath(CUDA)}" && exec "$@"'
        return subprocess.run([shutil.which("unshare"), "-m", shutil.which("sh"), "-c", script, "sh", KILN, *args],
                              cwd=self.project, env=env, capture_output=True, text=True, timeout=timeout)

    def assert_ok(self, proc):
        self.assertEqual(proc.returncode, 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")

    def test_fixture_builds_for_torch_2_10_with_nvcc_12_4_from_debian(self):
        self.cache = self.fresh_cache("debian")
        proc = self.hidden("--json", "build", "kiln-demo", "--target", TARGET)
        self.assert_ok(proc)
        item = json.loads(proc.stdout)["items"][0]
        wheel = Path(item["wheel"])
        self.assertRegex(wheel.name, r"^kiln_demo-0\.1\.0\+cu128torch2\.10-cp3\d+-cp3\d+-manylinux_2_\d+_x86_64\.whl$")
        with zipfile.ZipFile(wheel) as z:
            prov = json.loads(z.read("kiln_demo-0.1.0+cu128torch2.10.dist-info/kiln.json"))
            sos = [n for n in z.namelist() if n.endswith(".so")]
            self.assertEqual(len(sos), 1, sos)
            so = self.tmp / "module.so"
            so.write_bytes(z.read(sos[0]))
        cuda = prov["inputs"]["toolchain"]["cuda"]
        self.assertEqual((cuda["toolkit"], cuda["version"], cuda["release"], len(cuda["debs"])),
                         ("debian", "12.8", "12.4", 7))
        self.assertIn("minor version compatibility: nvcc 12.4 <= torch's CUDA 12.8", cuda["compatibility"])
        self.assertIn("release 12.4", prov["tools"]["nvcc"])
        self.assertIn("libcudart.so.12", needed(so))

        toolkits = glob.glob(str(SHARED_CACHE / "toolkits" / "cuda-12.4-debian-*" / "kiln-toolkit.json"))
        self.assertEqual(len(toolkits), 1, toolkits)
        home = Path(toolkits[0]).parent
        profile = (home / "bin" / "nvcc.profile").read_text()
        self.assertNotIn("/usr", profile)
        self.assertFalse((home / "bin" / "nvcc.profile").is_symlink())

        # kiln validate, still without the system toolkit: torch 2.10's libraries, cudart 12 from
        # the Debian toolkit in the cache.
        proc = self.hidden("--json", "validate", str(wheel))
        self.assert_ok(proc)
        checks = {c["id"]: c for c in json.loads(proc.stdout)["wheels"][0]["checks"]}
        for check in ("torch-abi", "gpu-code", "tags"):
            self.assertEqual(checks[check]["verdict"], "pass", checks[check])
        self.assertNotEqual(checks["elf"]["verdict"], "fail", checks["elf"])  # build paths: a warning
        libraries = checks["torch-abi"]["data"]["libraries"]
        self.assertTrue(any(p.endswith(f"/toolkits/{home.name}/lib64/libcudart.so.12") for p in libraries), libraries)

        # Warm: another cache sharing downloads and toolkits downloads nothing and lays out nothing.
        first = self.cache
        self.cache = self.fresh_cache("warm")
        (self.cache / "objects").symlink_to(first / "objects")
        proc = self.hidden("--json", "build", "kiln-demo", "--target", TARGET, "--offline")
        self.assert_ok(proc)
        warm = json.loads(proc.stdout)
        self.assertEqual(warm["fetches"], 0)
        self.assertNotIn("making the CUDA", proc.stderr)
        self.assertEqual(warm["items"][0]["key"], item["key"])

    def test_archs_past_the_toolkit_are_refused_before_any_download(self):
        self.cache = self.tmp / "empty"
        proc = self.hidden("resolve", "kiln-demo", "--target", TARGET, "--archs", "9.0;10.0;12.0")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("sm_100 needs CUDA 12.8 or newer (this toolkit is 12.4", proc.stderr)
        self.assertIn("sm_120 needs CUDA 12.8 or newer", proc.stderr)
        self.assertFalse((self.cache / "downloads").exists() and any((self.cache / "downloads").iterdir()))

    def test_offline_without_the_packages_names_the_missing_one(self):
        self.cache = self.tmp / "empty"
        proc = self.hidden("fetch", "kiln-demo", "--target", TARGET, "--offline")
        self.assertNotEqual(proc.returncode, 0, proc.stdout)
        self.assertIn(".deb", proc.stderr)
        self.assertIn("offline", proc.stderr)


if __name__ == "__main__":
    unittest.main()
