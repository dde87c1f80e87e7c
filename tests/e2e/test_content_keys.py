"""Content keys with the real compilers: an object is keyed by the files its job read.

kiln-demo's C++ file includes torch's pybind caster and ATen's Tensor (over a thousand headers);
its CUDA file includes a few light ones, among them ATen/OpMathType.h, which the C++ file never
reads. A torch whose only change is that header (a hard-linked copy of the target's sysroot with
the header rewritten, as a new release would be) recompiles the CUDA units and reuses the C++
object; the original header brings every object back.
"""

import json
import os
import shutil
import subprocess
import unittest

from kilntest import SHARED_CACHE, KilnTestCase

HEADER = "torch/include/ATen/OpMathType.h"


class ContentKeyTest(KilnTestCase):
    def build(self, cache):
        # A wheel is keyed by the torch wheel's sha256, which the rewritten header does not
        # change: each build starts without wheels, so that it compiles (or reuses objects).
        for part in ("wheels", "last"):
            shutil.rmtree(cache / part, ignore_errors=True)
        proc = self.kiln("--json", "-v", "build", "kiln-demo", check=0,
                         env={"KILN_CACHE": str(cache)})
        out = json.loads(proc.stdout)
        ran = {j["job"] for j in out["jobs"]}
        return out, ran, proc.stderr

    def sysroot_copy(self, cache, sha):
        """The cache's sysroots/ as its own folder: the target's torch hard-linked from the
        shared one, so that a header can be replaced without touching it."""
        name = "torch-" + sha[:16]
        (cache / "sysroots").unlink()
        (cache / "sysroots").mkdir()
        subprocess.run(["cp", "-al", str(SHARED_CACHE / "sysroots" / name),
                        str(cache / "sysroots" / name)], check=True)
        return cache / "sysroots" / name

    def replace(self, path, data):
        path.unlink()  # a hard link: the shared sysroot keeps its bytes
        path.write_bytes(data)

    def test_a_changed_header_misses_and_units_that_never_read_it_are_reused(self):
        cache = self.fresh_cache("cache")
        first, ran, _ = self.build(cache)
        self.assertEqual(first["objects_reused"], 0)
        cu = {j for j in ran if "kiln_demo_kernel.cu" in j}
        self.assertTrue(cu, ran)
        self.assertIn("g++ kiln_demo.cpp", ran)

        resolved = json.loads(self.kiln("--json", "resolve", "kiln-demo", check=0,
                                        env={"KILN_CACHE": str(cache)}).stdout)
        sha = resolved["targets"][0]["toolchain"]["torch"]["sha256"]
        sysroot = self.sysroot_copy(cache, sha)
        header = sysroot / HEADER
        original = header.read_bytes()
        self.replace(header, original + b"\n// the next release\n")

        second, ran, stderr = self.build(cache)
        # The CUDA units read the header: compiled again (and said why); the C++ object is the
        # first build's.
        self.assertEqual(ran, cu | {j for j in ran if j.startswith("link ")}, ran)
        self.assertNotIn("g++ kiln_demo.cpp", ran)
        self.assertGreaterEqual(second["objects_reused"], 1)
        self.assertIn("ATen/OpMathType.h changed", stderr)
        self.assertTrue(os.path.exists(second["items"][0]["wheel"]))

        # The first release again: its dependency sets are still recorded; every object comes
        # back and the wheel is the first build's, byte for byte.
        self.replace(header, original)
        third, ran, _ = self.build(cache)
        self.assertEqual({j for j in ran if not j.startswith("link ")}, set(), ran)
        self.assertEqual(third["items"][0]["sha256"], first["items"][0]["sha256"])


if __name__ == "__main__":
    unittest.main()
