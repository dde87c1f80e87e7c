"""Strings of 60 KB wherever kiln once matched text with std::regex, which recursed once per
character and overflowed the stack (SIGSEGV, exit 139): a package spec and a target name on the
command line, a manifest's name, dependencies, requires-python and packages, a target's torch
version, and a foreign wheel's Requires-Dist in `kiln validate`. Each now ends with kiln's own
error (exit 2, located in the file for manifests and targets) or a failing check (exit 1)."""

import base64
import hashlib
import unittest
import zipfile

from kilntest import KilnTestCase

LONG = 60_000

MANIFEST = """[package]
name = "long"
version = "1.0"
summary = "A package with long strings"
license = "MIT"
requires-python = ">=3.9"
extra-dependencies = ["einops"]

[source]
pypi = "long"
sha256 = "{sha}"

[build]
backend = "pure"
packages = ["long"]
""".replace("{sha}", "a" * 64)


class LongStringsTest(KilnTestCase):
    def assert_kiln_error(self, proc, message, code=2):
        """kiln's own error: the exit code (never a signal), `kiln: error:` and the message."""
        self.assertEqual(proc.returncode, code,
                         f"exit {proc.returncode} (negative: killed by a signal)\n{proc.stderr[-2000:]}")
        self.assertRegex(proc.stderr, r"(?m)^kiln: error: ")
        self.assertRegex(proc.stderr[:4000], message)

    def test_long_package_spec_on_the_command_line(self):
        proc = self.kiln("resolve", "a" * LONG)
        self.assert_kiln_error(proc, r"kiln: error: bad package spec 'a{60}\.\.\.': the name is longer than 200 bytes")
        proc = self.kiln("resolve", "kiln-demo==0." + "1" * LONG)
        self.assert_kiln_error(proc, r"bad package spec 'kiln-demo==0\.1+\.\.\.': the version is longer than 128 bytes")

    def test_long_target_name_on_the_command_line(self):
        proc = self.kiln("resolve", "--target", "t" * LONG, "kiln-demo")
        self.assert_kiln_error(proc, r"kiln: error: bad target name 't{60}\.\.\.': longer than 128 bytes")

    def test_long_manifest_fields_get_located_errors(self):
        cases = {
            "name": ('name = "long"', 'name = "' + "a" * LONG + '"', r"2:8: 'package\.name' is longer than 200 bytes"),
            "extra-dependencies": ('["einops"]', '["einops", "torch>=' + "2." * (LONG // 2) + '0"]',
                                   r"7:33: an entry of 'package\.extra-dependencies' is longer than 4096 bytes"),
            "requires-python": ('">=3.9"', '">=3.' + "9" * LONG + '"',
                                r"6:19: 'package\.requires-python' is longer than 4096 bytes"),
            "packages": ('["long"]', '["' + "l" * LONG + '"]',
                         r"15:13: an entry of 'build\.packages' is longer than 200 bytes"),
        }
        manifest = self.project / "manifests" / "long" / "1.0.toml"
        manifest.parent.mkdir()
        manifest.write_text(MANIFEST)
        self.kiln("resolve", "long", check=0)
        for field, (old, new, message) in cases.items():
            with self.subTest(field):
                manifest.write_text(MANIFEST.replace(old, new, 1))
                proc = self.kiln("resolve", "long")
                self.assert_kiln_error(proc, r"kiln: error: manifests/long/1\.0\.toml:" + message)

    def test_long_torch_version_in_a_target_gets_a_located_error(self):
        targets = self.project / "manifests" / "targets"
        text = (targets / "default.toml").read_text()
        self.assertEqual(text.count('version = "2.11.0"'), 1)
        line = text[:text.index('version = "2.11.0"')].count("\n") + 1
        (targets / "long.toml").write_text(text.replace('version = "2.11.0"', 'version = "2.11.' + "1" * LONG + '"'))
        proc = self.kiln("resolve", "--target", "long", "kiln-demo")
        self.assert_kiln_error(proc, rf"kiln: error: manifests/targets/long\.toml:{line}:11: "
                                     r"'torch\.version' is longer than 128 bytes")

    def test_validate_a_foreign_wheel_with_a_long_requires_dist(self):
        requirement = "einops" + ">=0.6," * (LONG // 6) + ">=0.6"
        files = {
            "long_pkg/__init__.py": b"x = 1\n",
            "long_pkg-1.0.dist-info/METADATA": ("Metadata-Version: 2.1\nName: long-pkg\nVersion: 1.0\n"
                                                f"Requires-Python: >=3.9\nRequires-Dist: {requirement}\n").encode(),
            "long_pkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                            b"Tag: py3-none-any\n",
        }
        record = ""
        for name, data in files.items():
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record += f"{name},sha256={digest},{len(data)}\n"
        files["long_pkg-1.0.dist-info/RECORD"] = (record + "long_pkg-1.0.dist-info/RECORD,,\n").encode()
        wheel = self.tmp / "long_pkg-1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
            for name, data in files.items():
                z.writestr(name, data)
        proc = self.kiln("validate", str(wheel))
        self.assert_kiln_error(proc, r"kiln: error: 1 of 1 wheel\(s\) failed validation", code=1)
        self.assertRegex(proc.stdout, r"(?m)^  fail  metadata +METADATA Requires-Dist 'einops>=0\.6,>=0\.6,.*\.\.\.' "
                                      r"is longer than 4096 bytes$")
        self.assertRegex(proc.stdout, r"(?m)^  pass  archive ")  # the wheel itself is sound


if __name__ == "__main__":
    unittest.main()
