"""kiln build on the kiln-demo fixture: a real CUDA extension built against the pinned torch,
reproducible bit for bit, cached, and accepted by the packaging tools."""

import hashlib
import json
import re
import subprocess
import unittest
import zipfile
from pathlib import Path

from kilntest import KilnTestCase


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class BuildFixtureTest(KilnTestCase):
    def build(self, cache, *args, project=None):
        proc = self.kiln("--cache", str(cache), "build", "kiln-demo", "--json", *args,
                         check=0, cwd=project, timeout=3000)
        return json.loads(proc.stdout)

    def test_build_is_reproducible_cached_and_well_formed(self):
        first = self.build(self.fresh_cache("c1"))
        item = first["items"][0]
        wheel = Path(item["wheel"])
        self.assertRegex(wheel.name, r"^kiln_demo-0\.1\.0\+cu130torch2\.11-cp3\d+-cp3\d+-manylinux_2_\d+_x86_64\.whl$")
        self.assertFalse(item["cache_hit"])
        self.assertGreaterEqual(first["compile_jobs"], 3)  # two TUs and the link

        # The same inputs from another checkout path into another cache: the same bytes.
        other = self.copy_project("elsewhere")
        second = self.build(self.fresh_cache("c2"), project=other)
        self.assertEqual(second["items"][0]["key"], item["key"])
        self.assertEqual(sha256(second["items"][0]["wheel"]), sha256(wheel))

        # A cache hit does no fetch and no compile.
        again = self.build(self.tmp / "c1")
        self.assertEqual((again["fetches"], again["compile_jobs"], again["cache_hits"]), (0, 0, 1))
        self.assertEqual(again["items"][0]["wheel"], item["wheel"])

        with zipfile.ZipFile(wheel) as z:
            names = z.namelist()
            info = "kiln_demo-0.1.0+cu130torch2.11.dist-info"
            self.assertIn("kiln_demo/__init__.py", names)
            self.assertTrue(any(re.fullmatch(r"kiln_demo_cuda\.cpython-3\d+-x86_64-linux-gnu\.so", n) for n in names))
            self.assertEqual(names[-1], f"{info}/RECORD")
            metadata = z.read(f"{info}/METADATA").decode()
            self.assertIn("Requires-Dist: torch==2.11.*", metadata)
            self.assertIn("Version: 0.1.0+cu130torch2.11", metadata)
            provenance = json.loads(z.read(f"{info}/kiln.json"))
            self.assertEqual(provenance["build_key"], item["key"])
            self.assertEqual(provenance["archs"], "sm_90")
            self.assertIn(f"{info}/licenses/LICENSE", names)

        # Peer tools accept it.
        subprocess.run([self.tool("twine"), "check", "--strict", str(wheel)], check=True, capture_output=True)
        subprocess.run([self.tool("check-wheel-contents"), "--ignore", "W002,W009", str(wheel)], check=True, capture_output=True)
        unpack = self.tmp / "unpacked"
        subprocess.run([self.tool("wheel"), "unpack", "-d", str(unpack), str(wheel)], check=True, capture_output=True)
        subprocess.run([self.tool("python"), "-c",
                        "import sys; from installer.sources import WheelFile\n"
                        "with WheelFile.open(sys.argv[1]) as w: w.validate_record()", str(wheel)],
                       check=True, capture_output=True)

        # The device code is exactly sm_90 SASS.
        elf, ptx = self.cuobjdump(wheel, unpack)
        self.assertEqual(elf, ["sm_90"])
        self.assertEqual(ptx, [])

    def test_explicit_archs_give_exactly_that_device_code(self):
        result = self.build(self.fresh_cache("c3"), "--archs", "9.0;12.0+PTX")
        item = result["items"][0]
        self.assertEqual(item["target"], "default-sm90-sm120-ptx120")
        elf, ptx = self.cuobjdump(Path(item["wheel"]), self.tmp / "u3")
        self.assertEqual(elf, ["sm_120", "sm_90"])
        self.assertEqual(ptx, ["sm_120"])

    def cuobjdump(self, wheel, dest):
        with zipfile.ZipFile(wheel) as z:
            so = next(n for n in z.namelist() if n.endswith(".so"))
            z.extract(so, dest)
        tool = self.tool("python")
        # PyPI's nvidia-cuda-cuobjdump puts the binary inside the package.
        found = subprocess.run([tool, "-c", "import nvidia, pathlib; "
                                "print(next(pathlib.Path(p) for p in nvidia.__path__ "
                                "for p in pathlib.Path(p).rglob('cuobjdump') if p.is_file()))"],
                               capture_output=True, text=True)
        if found.returncode != 0:
            self.skipTest("cuobjdump not found in the tools environment")
        cuobjdump = found.stdout.strip()
        out = subprocess.run([cuobjdump, "--list-elf", "--list-ptx", str(Path(dest) / so)],
                             capture_output=True, text=True, check=True).stdout
        elf = sorted(set(re.findall(r"ELF file\s+\d+:.*\.(sm_\d+a?)\.cubin", out)))
        ptx = sorted(set(re.findall(r"PTX file\s+\d+:.*\.(sm_\d+a?)\.ptx", out)))
        return elf, ptx


if __name__ == "__main__":
    unittest.main()
