"""kiln build --backend setuptools on the kiln-demo fixture: its own setup.py, run by pip in kiln's
pinned environment with no network, turned into a kiln wheel (label, torch pin, tags, provenance,
deterministic zip) that validates, installs with pip, and holds the same extension module, archs
and Python-visible functions as the native backend's wheel."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest
import zipfile
from pathlib import Path

from kilntest import SHARED_CACHE, KilnTestCase

TORCH_ENV = Path(os.environ.get("KILN_TORCH_ENV") or Path.home() / ".cache/kiln/torch-venv")

# Imports an extension module from a directory (after torch) and prints what Python sees of it.
SURFACE = r"""
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
import torch
m = importlib.import_module(sys.argv[2])
print(json.dumps({n: [type(getattr(m, n)).__name__, getattr(getattr(m, n), "__doc__", None)
                      if callable(getattr(m, n)) else repr(getattr(m, n))]
                  for n in dir(m) if n not in ("__file__", "__loader__", "__spec__")}, sort_keys=True))
"""


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def payload(wheel):
    """The wheel's files outside .dist-info."""
    with zipfile.ZipFile(wheel) as z:
        return sorted(n for n in z.namelist() if ".dist-info/" not in n)


class BuildSetuptoolsTest(KilnTestCase):
    def build(self, cache, *args, project=None):
        proc = self.kiln("--cache", str(cache), "build", "kiln-demo", "--json", *args,
                         check=0, cwd=project, timeout=3000)
        return json.loads(proc.stdout)

    def test_setuptools_wheel_matches_the_native_one(self):
        cache = self.fresh_cache("c1")
        st = self.build(cache, "--backend", "setuptools")
        item = st["items"][0]
        wheel = Path(item["wheel"])
        self.assertEqual(item["backend"], "setuptools")
        self.assertFalse(item["cache_hit"])
        self.assertRegex(wheel.name, r"^kiln_demo-0\.1\.0\+cu130torch2\.11-cp3\d+-cp3\d+-manylinux_2_\d+_x86_64\.whl$")
        # One pip process; the compiles ninja ran are in its log, with their seconds.
        self.assertEqual(st["compile_jobs"], 1)
        steps = [j["job"] for j in st["jobs"] if j["job"].startswith("ninja ")]
        self.assertEqual(len(steps), 2, st["jobs"])
        self.assertTrue(all(j["cpu_seconds"] > 0 for j in st["jobs"] if j["job"].startswith("pip wheel")))

        # The package's own build did it, for exactly the target's archs, with no network.
        log = (cache / "logs" / item["key"] / "setuptools.log").read_text()
        gencodes = set(re.findall(r"-gencode=arch=compute_\d+a?,code=\w+", log))
        self.assertEqual(gencodes, {"-gencode=arch=compute_90,code=sm_90"})
        self.assertIn("kiln_demo_cuda", log)

        # The backend is part of the key: the native build of the same package is another entry.
        native = self.build(cache)
        nitem = native["items"][0]
        self.assertEqual(nitem["backend"], "native")
        self.assertNotEqual(nitem["key"], item["key"])
        nwheel = Path(nitem["wheel"])
        self.assertEqual(nwheel.name, wheel.name)
        again = self.build(cache, "--backend", "setuptools")
        self.assertEqual((again["compile_jobs"], again["cache_hits"]), (0, 1))
        self.assertEqual(again["items"][0]["wheel"], item["wheel"])
        # The --backend override is an experiment: the index serves the manifest's own (native) build
        # of that file name, even though the override was committed first and hit last.
        listed = {e["key"]: e for e in json.loads(self.kiln("--cache", str(cache), "--json", "cache", "ls",
                                                            check=0).stdout)}
        self.assertEqual((listed[nitem["key"]]["served"], listed[item["key"]]["served"]), (True, False))
        self.assertEqual(listed[item["key"]]["backend"], "setuptools")
        site = self.tmp / "site"
        self.kiln("--cache", str(cache), "index", "export", str(site), check=0)
        self.assertEqual(sha256(site / "default" / "simple" / "kiln-demo" / nwheel.name), nitem["sha256"])

        # kiln's conventions.
        info = "kiln_demo-0.1.0+cu130torch2.11.dist-info"
        with zipfile.ZipFile(wheel) as z:
            names = z.namelist()
            self.assertEqual(names[-1], f"{info}/RECORD")
            self.assertIn(f"{info}/licenses/LICENSE", names)
            metadata = z.read(f"{info}/METADATA").decode()
            self.assertIn("Requires-Dist: torch==2.11.*", metadata)
            self.assertIn("Version: 0.1.0+cu130torch2.11", metadata)
            provenance = json.loads(z.read(f"{info}/kiln.json"))
            self.assertEqual(provenance["backend"], "setuptools")
            self.assertEqual(provenance["build_key"], item["key"])
            self.assertEqual(provenance["archs"], "sm_90")
            self.assertTrue(provenance["setuptools"]["built_wheel"].startswith("kiln_demo-0.1.0-"))
            self.assertIn("build_env", provenance["inputs"])
            self.assertTrue(all(i.date_time == (1980, 1, 1, 0, 0, 0) for i in z.infolist()))
        # The same files as the native wheel: the package and the one extension module.
        self.assertEqual(payload(wheel), payload(nwheel))
        self.assertTrue(any(re.fullmatch(r"kiln_demo_cuda\.cpython-3\d+-x86_64-linux-gnu\.so", n) for n in payload(wheel)))

        # Both validate, with the same archs.
        archs = []
        for w in (wheel, nwheel):
            report = json.loads(self.kiln("--json", "validate", str(w), check=0).stdout)
            self.assertTrue(report["ok"])
            archs.append(report["wheels"][0]["archs"])
        self.assertEqual(archs[0], archs[1])
        self.assertEqual(archs[0]["sass"], ["sm_90"])
        self.assertEqual(self.cuobjdump(wheel, self.tmp / "us"), self.cuobjdump(nwheel, self.tmp / "un"))

        # Peer tools accept it and pip installs it.
        subprocess.run([self.tool("twine"), "check", "--strict", str(wheel)], check=True, capture_output=True)
        target = self.tmp / "installed"
        subprocess.run([self.tool("python"), "-m", "pip", "install", "--no-deps", "--no-index", "--target",
                        str(target), str(wheel)], check=True, capture_output=True)
        self.assertTrue((target / "kiln_demo" / "__init__.py").is_file())

        # The same Python-visible module: PyInit_ symbol, functions, their signatures, attributes.
        sos = [self.extract_so(w, self.tmp / d) for w, d in ((wheel, "ms"), (nwheel, "mn"))]
        for so in sos:
            syms = subprocess.run(["readelf", "--dyn-syms", "-W", str(so)], capture_output=True, text=True,
                                  check=True).stdout
            self.assertRegex(syms, r"GLOBAL\s+DEFAULT\s+\d+\s+PyInit_kiln_demo_cuda\b")
        surfaces = [self.surface(so) for so in sos]
        self.assertEqual(surfaces[0], surfaces[1])
        self.assertIn("scale_add", surfaces[0])
        self.assertIn("TORCH_VERSION", surfaces[0])

    def test_reproducible_across_checkouts_caches_and_environments(self):
        first = self.build(self.fresh_cache("r1"), "--backend", "setuptools")["items"][0]
        other = self.copy_project("elsewhere")
        # The second cache makes its build environment anew, in an envs/ that links out of /tmp:
        # kiln's private /tmp binds the real one's entries back, so staging the environment under
        # the cache's tmp/ and renaming it into envs/ would cross a mount.
        cache = self.fresh_cache("r2")
        envs = Path(tempfile.mkdtemp(prefix="kiln-test-envs-", dir=SHARED_CACHE.parent))
        self.addCleanup(shutil.rmtree, envs, ignore_errors=True)
        (cache / "envs").unlink()
        (cache / "envs").symlink_to(envs)
        second = self.build(cache, "--backend", "setuptools", project=other)["items"][0]
        self.assertEqual(second["key"], first["key"])
        self.assertEqual(sha256(second["wheel"]), sha256(first["wheel"]))
        made = [p.name for p in envs.iterdir()]
        self.assertEqual(len([n for n in made if n.startswith("setuptools-") and not n.endswith(".lock")]), 1, made)
        self.assertFalse([n for n in made if ".tmp-" in n], made)  # no staging left behind

    def test_upstream_nvcc_threads_and_lineinfo_stay_reproducible(self):
        """Upstream setup.py files pass nvcc --threads N (fast-hadamard-transform: --threads 4 and
        -lineinfo): the wheel is still the same bytes on every build of its key."""
        self.edit("kernels/kiln-demo/setup.py", '"nvcc": ["-O3"]',
                  '"nvcc": ["-O3", "--threads", "4", "-lineinfo"]')
        args = ("--backend", "setuptools", "--archs", "8.0;9.0")
        builds = [self.build(self.fresh_cache(f"t{i}"), *args)["items"][0] for i in range(2)]
        self.assertEqual(builds[0]["key"], builds[1]["key"])
        self.assertEqual(sha256(builds[0]["wheel"]), sha256(builds[1]["wheel"]))

    def test_bad_backend_choices(self):
        # TORCH_CUDA_ARCH_LIST cannot ask for PTX alone: refused before anything is built.
        proc = self.kiln("build", "kiln-demo", "--backend", "setuptools", "--archs", "compute_90", check=2)
        self.assertIn("cannot build PTX alone (compute_90)", proc.stderr)
        self.assertFalse((self.cache / "wheels").exists() and any((self.cache / "wheels").iterdir()))
        proc = self.kiln("build", "flash-linear-attention", "--backend", "native", check=2)
        self.assertIn("--backend native: flash-linear-attention 0.6.0 declares no [[build.extension]]", proc.stderr)
        proc = self.kiln("build", "kiln-demo", "--backend", "cmake", check=2)
        self.assertIn("--backend", proc.stderr)

    # --- helpers ---------------------------------------------------------------------------
    def extract_so(self, wheel, dest):
        with zipfile.ZipFile(wheel) as z:
            so = next(n for n in z.namelist() if n.endswith(".so"))
            z.extract(so, dest)
        return Path(dest) / so

    def surface(self, so):
        python = TORCH_ENV / "bin" / "python"
        if not python.exists():
            self.skipTest(f"no torch environment at {TORCH_ENV} (scripts/test makes it)")
        out = subprocess.run([str(python), "-c", SURFACE, str(so.parent), so.name.split(".")[0]],
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout.strip().splitlines()[-1])

    def cuobjdump(self, wheel, dest):
        return self.sass_and_ptx(self.extract_so(wheel, dest))


if __name__ == "__main__":
    unittest.main()
