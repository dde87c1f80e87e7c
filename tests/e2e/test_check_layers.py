"""scripts/check-layers: builder/'s includes and CMake links against ARCHITECTURE.md's table, on a
copy of this checkout's own files, and on copies broken in each way it must catch."""

import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

ROOT = Path(os.environ.get("KILN_SOURCE_DIR", Path(__file__).resolve().parents[2]))


class CheckLayersTest(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="kiln-layers-"))
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        shutil.copytree(ROOT / "builder", self.tmp / "builder")
        shutil.copy(ROOT / "ARCHITECTURE.md", self.tmp / "ARCHITECTURE.md")

    def check(self):
        return subprocess.run([str(ROOT / "scripts" / "check-layers"), str(self.tmp)],
                              capture_output=True, text=True, timeout=60)

    def edit(self, rel, old, new):
        path = self.tmp / rel
        text = path.read_text()
        self.assertIn(old, text)
        path.write_text(text.replace(old, new, 1))

    def test_this_checkout_holds(self):
        r = self.check()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")

    def test_a_forbidden_include_is_named_with_its_line(self):
        # core/ may depend on nothing: an include of pipeline/ from core/fs.cpp must fail.
        self.edit("builder/core/fs.cpp", '#include "core/fs.h"\n',
                  '#include "core/fs.h"\n#include "pipeline/pipeline.h"\n')
        r = self.check()
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, r"builder/core/fs\.cpp:\d+: includes pipeline/, which core may not depend on")

    def test_an_include_the_table_does_not_list_fails(self):
        # compile/ reads wheels through wheel/, never archive/ directly.
        self.edit("builder/compile/setuptools.cpp", '#include "core/fs.h"\n',
                  '#include "archive/zip_reader.h"\n#include "core/fs.h"\n')
        r = self.check()
        self.assertEqual(r.returncode, 1)
        self.assertIn("includes archive/, which compile may not depend on", r.stderr)

    def test_cmake_links_must_match_the_table(self):
        self.edit("builder/CMakeLists.txt", "kiln_stage(patch STAGES core", "kiln_stage(patch STAGES fetch core")
        r = self.check()
        self.assertEqual(r.returncode, 1)
        self.assertIn("kiln_patch links fetch beyond its row", r.stderr)

    def test_a_folder_without_a_row_fails(self):
        (self.tmp / "builder" / "extra").mkdir()
        r = self.check()
        self.assertEqual(r.returncode, 1)
        self.assertIn("builder/extra/ has no row", r.stderr)


if __name__ == "__main__":
    unittest.main()
