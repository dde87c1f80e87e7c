"""scripts/check-unity: no two files of one target define a name in an anonymous namespace (the
unity build compiles them as one translation unit), on a copy of this checkout's builder/ and
tests/ and on copies given such a pair."""

import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

ROOT = Path(os.environ.get("KILN_SOURCE_DIR", Path(__file__).resolve().parents[2]))


class CheckUnityTest(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="kiln-unity-"))
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        for d in ("builder", "tests"):
            shutil.copytree(ROOT / d, self.tmp / d)

    def check(self):
        return subprocess.run([str(ROOT / "scripts" / "check-unity"), str(self.tmp)],
                              capture_output=True, text=True, timeout=120)

    def add(self, path, text):
        with open(self.tmp / path, "a") as f:
            f.write("\n" + text)

    def test_this_checkout_holds(self):
        r = self.check()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")

    def test_one_helper_name_in_two_files_of_a_stage_is_named(self):
        # Different parameters: the unity build would compile this as a silent overload.
        self.add("builder/core/fs.cpp", "namespace kiln {\nnamespace {\nint helper(int x) { return x; }\n}\n}\n")
        self.add("builder/core/hash.cpp",
                 "namespace kiln {\nnamespace {\nlong helper(long x) { return x; }\n}\n}\n")
        r = self.check()
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, r"builder/core\tkiln::\(anonymous\)::helper: "
                                   r"(builder/core/fs\.cpp builder/core/hash\.cpp|"
                                   r"builder/core/hash\.cpp builder/core/fs\.cpp)")

    def test_types_constants_and_enumerators_are_names_too(self):
        self.add("builder/fetch/url.cpp",
                 "namespace kiln::fetch {\nnamespace {\nstruct Options {};\nconstexpr int kLimit = 1;\n"
                 "enum State { kIdle };\n}\n}\n")
        self.add("builder/fetch/http.cpp",
                 "namespace kiln::fetch {\nnamespace {\nstruct Options {};\nconstexpr int kLimit = 2;\n"
                 "enum Other { kIdle };\n}\n}\n")
        r = self.check()
        self.assertEqual(r.returncode, 1)
        for name in ("Options", "kLimit", "kIdle"):
            self.assertIn(f"kiln::fetch::(anonymous)::{name}:", r.stderr)

    def test_different_targets_or_namespaces_may_share_a_name(self):
        text = "namespace {\nint helper(int x) { return x; }\n}\n"
        self.add("builder/core/fs.cpp", "namespace kiln {\n" + text + "}\n")
        self.add("builder/fetch/downloader.cpp", "namespace kiln {\n" + text + "}\n")  # another stage
        self.add("builder/core/hash.cpp", "namespace kiln::other {\n" + text + "}\n")
        self.add("builder/core/log.cpp", "namespace kiln {\nint helper(int x);\n}\n")  # not anonymous
        r = self.check()
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_the_fuzz_library_is_one_target_of_several_folders(self):
        text = "namespace kiln {\nnamespace {\nint sample() { return 1; }\n}\n}\n"
        self.add("builder/core/fs.cpp", text)
        self.add("builder/archive/deb.cpp", text)  # both compiled into kiln_fuzzlib
        r = self.check()
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, r"kiln_fuzzlib\tkiln::\(anonymous\)::sample: ")
        self.assertNotIn("builder/core\t", r.stderr)

    def test_unit_tests_and_the_fuzz_targets_they_compile_are_one_target(self):
        text = "namespace kiln {\nnamespace {\nint sample() { return 1; }\n}\n}\n"
        self.add("tests/unit/strings_test.cpp", text)
        fuzz = sorted((self.tmp / "tests" / "fuzz").glob("fuzz_*.cpp"))[0]
        self.add(fuzz.relative_to(self.tmp), text)
        r = self.check()
        self.assertEqual(r.returncode, 1)
        self.assertIn("tests/unit\tkiln::(anonymous)::sample:", r.stderr)


if __name__ == "__main__":
    unittest.main()
