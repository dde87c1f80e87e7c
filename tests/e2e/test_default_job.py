"""The default job end to end: causal-conv1d, fla-core and flash-linear-attention for the default
target, installed with pip into a fresh venv on top of torch 2.11.0 from PyPI, then imported.

causal-conv1d takes minutes to compile on a small machine, so this test builds into the
persistent cache (KILN_CACHE): the first run on a machine compiles it once, later runs hit."""

import json
import os
import re
import subprocess
import unittest
import zipfile
from pathlib import Path

from kilntest import KilnTestCase, SHARED_CACHE

PACKAGES = ["causal-conv1d", "fla-core", "flash-linear-attention"]


def torch_env():
    env = os.environ.get("KILN_TORCH_ENV") or str(Path.home() / ".cache/kiln/torch-venv")
    return Path(env)


class DefaultJobTest(KilnTestCase):
    def test_build_install_import(self):
        proc = self.kiln("--cache", str(SHARED_CACHE), "--json", "build", *PACKAGES, check=0, timeout=3000)
        result = json.loads(proc.stdout)
        wheels = {item["package"]: Path(item["wheel"]) for item in result["items"]}
        self.assertRegex(wheels["causal-conv1d"].name,
                         r"^causal_conv1d-1\.7\.0\+cu130torch2\.11-cp3\d+-cp3\d+-manylinux_2_\d+_x86_64\.whl$")
        self.assertEqual(wheels["fla-core"].name, "fla_core-0.6.0-py3-none-any.whl")
        self.assertEqual(wheels["flash-linear-attention"].name, "flash_linear_attention-0.6.0-py3-none-any.whl")

        # Everything is cached now: no fetch, no compile.
        again = json.loads(self.kiln("--cache", str(SHARED_CACHE), "--json", "build", *PACKAGES, check=0).stdout)
        self.assertEqual((again["fetches"], again["compile_jobs"], again["cache_hits"]), (0, 0, 3))

        with zipfile.ZipFile(wheels["causal-conv1d"]) as z:
            info = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            metadata = z.read(info).decode()
        self.assertIn("Requires-Dist: torch==2.11.*", metadata)

        # A fresh venv on top of torch 2.11.0 from PyPI; our wheels installed with --no-deps.
        base = torch_env()
        if not (base / "bin" / "python").exists():
            self.skipTest(f"no torch environment at {base} (scripts/test creates it)")
        venv = self.tmp / "venv"
        subprocess.run([str(base / "bin" / "python"), "-m", "venv", "--without-pip", str(venv)], check=True)
        site = next((venv / "lib").glob("python3.*")) / "site-packages"
        base_site = next((base / "lib").glob("python3.*")) / "site-packages"
        (site / "kiln_base.pth").write_text(f"{base_site}\n")
        subprocess.run([str(base / "bin" / "python"), "-m", "pip", "--python", str(venv / "bin" / "python"),
                        "install", "-q", "--no-deps", "--no-index", *map(str, wheels.values())],
                       check=True, capture_output=True)
        code = ("import torch, causal_conv1d\n"
                "import causal_conv1d_cuda\n"
                "import fla.ops.gated_delta_rule as g\n"
                "assert callable(g.chunk_gated_delta_rule)\n"
                "assert hasattr(causal_conv1d_cuda, 'causal_conv1d_fwd')\n"
                "print(torch.__version__, causal_conv1d.__file__)\n")
        proc = subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=self.tmp,
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn(str(venv), proc.stdout)  # our wheel, not something else on the path

        # Peer tools accept every wheel.
        for wheel in wheels.values():
            subprocess.run([self.tool("twine"), "check", "--strict", str(wheel)], check=True, capture_output=True)
            subprocess.run([self.tool("python"), "-c",
                            "import sys; from installer.sources import WheelFile\n"
                            "with WheelFile.open(sys.argv[1]) as w: w.validate_record()", str(wheel)],
                           check=True, capture_output=True)
        proc = subprocess.run([self.tool("check-wheel-contents"), "--ignore", "W002,W009", str(wheels["causal-conv1d"])],
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)


if __name__ == "__main__":
    unittest.main()
