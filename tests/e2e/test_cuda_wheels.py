"""Builds without a CUDA toolkit on the machine: /usr/local/cuda hidden under an empty mount in a
mount namespace, nvcc off PATH, CUDA_HOME unset. The fixture builds with the CUDA 13.0 toolkit
from pinned wheels (downloaded once into the shared cache, laid out once) and passes kiln validate;
pure packages resolve and build with no CUDA and no compiler at all."""

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


def so_bytes(wheel):
    with zipfile.ZipFile(wheel) as z:
        return {n: z.read(n) for n in z.namelist() if n.endswith(".so")}


class NoSystemCudaTest(KilnTestCase):
    def setUp(self):
        super().setUp()
        if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
            self.skipTest("unshare -m is not permitted here")
        # PATH as it is, less the CUDA toolkit's directories.
        self.path = ":".join(p for p in os.environ.get("PATH", "/usr/bin:/bin").split(":") if "cuda" not in p)

    def hidden(self, *args, path=None, timeout=3000):
        """Runs kiln with the system CUDA toolkit out of reach."""
        env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH", "KILN_MANIFESTS")}
        env["PATH"] = path if path is not None else self.path
        env["KILN_CACHE"] = str(self.cache)
        script = 'exec "$@"'
        if CUDA.exists():
            script = f'{shutil.which("mount")} -t tmpfs tmpfs "{os.path.realpath(CUDA)}" && exec "$@"'
        return subprocess.run([shutil.which("unshare"), "-m", shutil.which("sh"), "-c", script, "sh", KILN, *args],
                              cwd=self.project, env=env, capture_output=True, text=True, timeout=timeout)

    def assert_ok(self, proc):
        self.assertEqual(proc.returncode, 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")

    def test_fixture_builds_with_the_wheel_toolkit(self):
        # The namespace really hides the machine's toolkit.
        probe = subprocess.run(["unshare", "-m", "sh", "-c",
                                f'mount -t tmpfs tmpfs "{os.path.realpath(CUDA)}" 2>/dev/null; '
                                f'PATH="{self.path}" nvcc --version || ls {CUDA}/bin/nvcc'],
                               capture_output=True, text=True)
        self.assertNotEqual(probe.returncode, 0, probe.stdout)
        # The machine's toolkit is refused for what it is: absent.
        self.cache = self.fresh_cache("nocuda")
        proc = self.hidden("resolve", "kiln-demo")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("kiln: error: target default: no CUDA toolkit found", proc.stderr)
        self.assertIn('use a target with cuda.toolkit = "wheels"', proc.stderr)

        proc = self.hidden("--json", "build", "kiln-demo", "--target", "default-wheels-cu130")
        self.assert_ok(proc)
        item = json.loads(proc.stdout)["items"][0]
        wheel = Path(item["wheel"])
        self.assertRegex(wheel.name, r"^kiln_demo-0\.1\.0\+cu130torch2\.11-cp3\d+-cp3\d+-manylinux_2_\d+_x86_64\.whl$")
        with zipfile.ZipFile(wheel) as z:
            prov = json.loads(z.read("kiln_demo-0.1.0+cu130torch2.11.dist-info/kiln.json"))
        cuda = prov["inputs"]["toolchain"]["cuda"]
        self.assertEqual((cuda["toolkit"], cuda["version"], len(cuda["wheels"])), ("wheels", "13.0", 5))
        self.assertIn("release 13.0", prov["tools"]["nvcc"])
        toolkits = glob.glob(str(SHARED_CACHE / "toolkits" / "cuda-13.0-*" / "kiln-toolkit.json"))
        self.assertEqual(len(toolkits), 1, toolkits)

        # kiln validate, still without the system toolkit: cudart from the wheel toolkit in the cache.
        proc = self.hidden("--json", "validate", str(wheel))
        self.assert_ok(proc)
        checks = {c["id"]: c for c in json.loads(proc.stdout)["wheels"][0]["checks"]}
        self.assertEqual(checks["gpu-code"]["verdict"], "pass", checks["gpu-code"])
        self.assertEqual(checks["torch-abi"]["verdict"], "pass", checks["torch-abi"])
        libraries = checks["torch-abi"]["data"]["libraries"]
        cudart = f"/toolkits/{Path(toolkits[0]).parent.name}/lib/libcudart.so.13"
        self.assertTrue(any(p.endswith(cudart) for p in libraries), libraries)

        # Warm: another cache sharing downloads, toolkits (and objects, to skip the compile) downloads
        # nothing and lays out nothing.
        first = self.cache
        self.cache = self.fresh_cache("warm")
        (self.cache / "objects").symlink_to(first / "objects")
        proc = self.hidden("--json", "build", "kiln-demo", "--target", "default-wheels-cu130")
        self.assert_ok(proc)
        warm = json.loads(proc.stdout)
        self.assertEqual(warm["fetches"], 0)
        self.assertNotIn("making the CUDA", proc.stderr)
        self.assertEqual(warm["items"][0]["key"], item["key"])

        # The machine's toolkit of the same release gives the same extension module, byte for byte
        # (nvcc runs through the build root's cuda/ link either way).
        system = subprocess.run([str(CUDA / "bin" / "nvcc"), "--version"], capture_output=True, text=True)
        if system.returncode != 0 or "release 13.0, V13.0.88" not in system.stdout:
            self.skipTest("the system toolkit is not CUDA 13.0.88, the wheels' release")
        self.cache = self.fresh_cache("system")
        proc = self.kiln("--cache", str(self.cache), "--json", "build", "kiln-demo", check=0, timeout=3000)
        other = Path(json.loads(proc.stdout)["items"][0]["wheel"])
        self.assertNotEqual(json.loads(proc.stdout)["items"][0]["key"], item["key"])
        self.assertEqual(so_bytes(other), so_bytes(wheel))

    def test_pure_packages_need_no_cuda_and_no_compiler(self):
        self.cache = self.fresh_cache("pure")
        empty = self.tmp / "empty-bin"  # PATH with no python, g++ or nvcc
        empty.mkdir()
        proc = self.hidden("resolve", "fla-core", "flash-linear-attention", path=str(empty))
        self.assert_ok(proc)
        self.assertIn("fla-core", proc.stdout)
        proc = self.hidden("--json", "build", "fla-core", "flash-linear-attention", path=str(empty))
        self.assert_ok(proc)
        items = json.loads(proc.stdout)["items"]
        self.assertEqual(sorted(Path(i["wheel"]).name.split("-")[0] for i in items), ["fla_core", "flash_linear_attention"])
        self.assertTrue(all(i["wheel"].endswith("-py3-none-any.whl") for i in items))


if __name__ == "__main__":
    unittest.main()
