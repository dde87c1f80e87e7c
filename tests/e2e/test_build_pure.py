"""Pure-Python wheels (fla-core, flash-linear-attention): reproducible in any directory."""

import hashlib
import json
import unittest
import zipfile
from pathlib import Path

from kilntest import KilnTestCase


class BuildPureTest(KilnTestCase):
    def build(self, cache, project):
        out = self.kiln("--cache", str(cache), "--json", "build", "fla-core", "flash-linear-attention",
                        check=0, cwd=project).stdout
        return {i["package"]: Path(i["wheel"]) for i in json.loads(out)["items"]}

    def test_reproducible_and_complete(self):
        a = self.build(self.fresh_cache("a"), self.project)
        b = self.build(self.fresh_cache("b"), self.copy_project("other"))
        for name in a:
            self.assertEqual(hashlib.sha256(a[name].read_bytes()).hexdigest(),
                             hashlib.sha256(b[name].read_bytes()).hexdigest(), name)
        with zipfile.ZipFile(a["fla-core"]) as z:
            names = z.namelist()
            self.assertIn("fla/ops/gated_delta_rule/__init__.py", names)
            self.assertIn("fla/__init__.py", names)
            self.assertFalse(any("__pycache__" in n or n.endswith(".pyc") for n in names))
            md = z.read("fla_core-0.6.0.dist-info/METADATA").decode()
            self.assertIn("Requires-Dist: einops", md)
            self.assertIn('Provides-Extra: cuda', md)
            self.assertIn("Root-Is-Purelib: true", z.read("fla_core-0.6.0.dist-info/WHEEL").decode())
        with zipfile.ZipFile(a["flash-linear-attention"]) as z:
            names = z.namelist()
            self.assertIn("fla/layers/__init__.py", names)
            self.assertNotIn("fla/__init__.py", names)  # fla-core owns the namespace's __init__


if __name__ == "__main__":
    unittest.main()
