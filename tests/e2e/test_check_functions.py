"""scripts/check-functions: no function in builder/ longer than 120 lines, on a copy of this
checkout's builder/ and on copies given a function of 120 and of 121 lines."""

import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

ROOT = Path(os.environ.get("KILN_SOURCE_DIR", Path(__file__).resolve().parents[2]))


def function(name, lines):
    """C++ text of a function `name` spanning exactly `lines` lines."""
    body = [f"  x += {i};" for i in range(lines - 4)]
    return "\n".join([f"int {name}(int x) {{", "  x = 0;", *body, "  return x;", "}", ""])


class CheckFunctionsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="kiln-functions-"))
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        shutil.copytree(ROOT / "builder", self.tmp / "builder")

    def check(self):
        return subprocess.run([str(ROOT / "scripts" / "check-functions"), str(self.tmp)],
                              capture_output=True, text=True, timeout=120)

    def add(self, text):
        with open(self.tmp / "builder" / "core" / "fs.cpp", "a") as f:
            f.write("\nnamespace kiln {\n" + text + "}  // namespace kiln\n")

    def test_this_checkout_holds(self):
        r = self.check()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")

    def test_a_function_of_121_lines_is_named_with_its_length(self):
        self.add(function("long_one", 121))
        r = self.check()
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, r"121 lines: builder/core/fs\.cpp:\d+: long_one")

    def test_a_function_of_120_lines_is_allowed(self):
        self.add(function("just_fits", 120))
        r = self.check()
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
