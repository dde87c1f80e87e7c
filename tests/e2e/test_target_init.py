"""kiln target init: a target for a live Python environment with torch."""

import json
import os
import unittest
from pathlib import Path

from kilntest import KilnTestCase


class TargetInitTest(KilnTestCase):
    def test_init_writes_a_target_that_resolves(self):
        python = Path(os.environ.get("KILN_TORCH_ENV") or Path.home() / ".cache/kiln/torch-venv") / "bin" / "python"
        if not python.exists():
            self.skipTest("no torch environment (scripts/test creates it)")
        out = self.tmp / "envt.toml"
        self.kiln("target", "init", "--python", str(python), "--archs", "9.0;12.0+PTX", "-o", str(out), check=0)
        text = out.read_text()
        self.assertIn('source = "environment"', text)
        self.assertIn('version = "2.11.0"', text)
        self.assertIn('archs = "9.0;12.0+PTX"', text)
        plan = json.loads(self.kiln("--json", "resolve", "kiln-demo", "--target", str(out), check=0).stdout)
        self.assertEqual(plan["targets"][0]["name"], "envt")
        self.assertEqual(plan["targets"][0]["archs"], "sm_90;sm_120+ptx")
        self.assertIn("identity", plan["targets"][0]["toolchain"]["torch"])
        # Never overwrites.
        self.kiln("target", "init", "--python", str(python), "-o", str(out), check=2)

    def test_init_refuses_an_environment_without_torch(self):
        proc = self.kiln("target", "init", "--python", "python3", "-o", str(self.tmp / "x.toml"))
        if proc.returncode == 0:
            self.skipTest("this python3 has torch")
        self.assertEqual(proc.returncode, 1)
        self.assertIn("torch is not installed", proc.stderr)


class ExplainTest(KilnTestCase):
    def test_explain_names_the_changed_input(self):
        cache = self.fresh_cache("c")
        self.kiln("--cache", str(cache), "build", "fla-core", check=0)
        self.edit("manifests/fla-core/0.6.0.toml", 'summary = "Core operations for flash-linear-attention"',
                  'summary = "Core operations, edited"')
        out = json.loads(self.kiln("--cache", str(cache), "--json", "build", "fla-core", "--explain", check=0).stdout)
        why = out["items"][0]["why"]
        self.assertIn("package.summary: \"Core operations for flash-linear-attention\" -> \"Core operations, edited\"", why)
        again = json.loads(self.kiln("--cache", str(cache), "--json", "build", "fla-core", "--explain", check=0).stdout)
        self.assertEqual(again["items"][0]["why"], ["cache hit: nothing changed"])


if __name__ == "__main__":
    unittest.main()
