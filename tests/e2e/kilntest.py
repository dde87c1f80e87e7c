"""Helpers for end-to-end tests: run the real kiln binary in a temporary copy of the project."""

import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

KILN = os.environ.get("KILN") or shutil.which("kiln")
SOURCE_DIR = Path(os.environ.get("KILN_SOURCE_DIR", Path(__file__).resolve().parents[2]))


class KilnTestCase(unittest.TestCase):
    """Each test gets a scratch directory with a copy of manifests/, patches/ and kernels/."""

    def setUp(self):
        if not KILN:
            self.skipTest("KILN is not set and kiln is not on PATH")
        self.tmp = Path(tempfile.mkdtemp(prefix="kiln-e2e-"))
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.project = self.tmp / "project"
        for part in ("manifests", "patches", "kernels"):
            shutil.copytree(SOURCE_DIR / part, self.project / part,
                            ignore=shutil.ignore_patterns("__pycache__"))
        self.cache = self.tmp / "cache"

    def kiln(self, *args, check=None, env=None, cwd=None, timeout=600):
        """Runs kiln; check=0 (or any int) asserts that exit code."""
        full_env = dict(os.environ)
        full_env.pop("KILN_MANIFESTS", None)
        full_env["KILN_CACHE"] = str(self.cache)
        full_env.update(env or {})
        proc = subprocess.run([KILN, *args], cwd=cwd or self.project, env=full_env,
                              capture_output=True, text=True, timeout=timeout)
        if check is not None:
            self.assertEqual(proc.returncode, check,
                             f"kiln {' '.join(args)}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        return proc

    def edit(self, relpath, old, new):
        path = self.project / relpath
        text = path.read_text()
        self.assertIn(old, text, f"{old!r} not in {relpath}")
        path.write_text(text.replace(old, new, 1))
