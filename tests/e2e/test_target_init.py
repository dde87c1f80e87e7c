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

    def test_resolve_refuses_a_host_compiler_the_toolkit_refuses(self):
        python = Path(os.environ.get("KILN_TORCH_ENV") or Path.home() / ".cache/kiln/torch-venv") / "bin" / "python"
        if not python.exists() or not Path("/usr/local/cuda/include/crt/host_config.h").exists():
            self.skipTest("no torch environment or no system CUDA")
        # A GCC newer than any CUDA 13 takes: it answers kiln's two probes and nothing else.
        gxx = self.tmp / "g++-99"
        gxx.write_text('#!/bin/sh\ncase "$1" in\n  -dumpfullversion) echo 99.1.0 ;;\n'
                       '  --version) echo "g++-99 (GCC) 99.1.0" ;;\n  *) exit 1 ;;\nesac\n')
        gxx.chmod(0o755)
        target = self.tmp / "newgcc.toml"
        target.write_text(f'[target]\narchs = "9.0"\n\n[python]\ninterpreter = "{python}"\n\n'
                          '[torch]\nsource = "environment"\nversion = "2.11.0"\n\n'
                          '[cuda]\ntoolkit = "system"\nversion = "13.0"\n\n'
                          f'[compiler]\ncxx = "{gxx}"\n')
        proc = self.kiln("resolve", "kiln-demo", "--target", str(target), check=2)
        self.assertRegex(proc.stderr, r"kiln: error: target newgcc: host compiler \S+g\+\+-99 99\.1\.0 "
                         r"\(\S+\) is outside the GCC versions CUDA 13\.\d+ supports \(7 to \d+, from "
                         r"/usr/local/cuda\S*/include/crt/host_config\.h\): install a g\+\+ in that range")

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
