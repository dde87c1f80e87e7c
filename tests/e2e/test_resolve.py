"""kiln resolve: the plan, stable build keys, and precise errors for bad manifests."""

import json
import unittest

from kilntest import KilnTestCase


class ResolveTest(KilnTestCase):
    def plan(self, *args):
        out = self.kiln("resolve", "--json", *args, check=0).stdout
        return {item["package"]: item for item in json.loads(out)["items"]}

    def test_default_plan_lists_every_package_with_a_stable_key(self):
        first = self.plan()
        names = {p.name for p in (self.project / "manifests").iterdir() if p.name not in ("targets", "tools")}
        self.assertEqual({n.replace("_", "-") for n in first}, names)
        for item in first.values():
            self.assertRegex(item["key"], r"^[0-9a-f]{64}$")
            self.assertEqual(item["target"], "default")
        self.assertEqual(self.plan(), first)
        table = self.kiln("resolve", check=0).stdout
        for item in first.values():
            self.assertIn(item["key"], table)

    def test_semantic_change_changes_only_that_key(self):
        before = self.plan()
        self.edit("manifests/kiln-demo/0.1.0.toml", 'nvcc-flags = ["-O3"]', 'nvcc-flags = ["-O2"]')
        after = self.plan()
        self.assertNotEqual(after["kiln-demo"]["key"], before["kiln-demo"]["key"])
        for name in before:
            if name != "kiln-demo":
                self.assertEqual(after[name]["key"], before[name]["key"], name)

    def test_comment_and_whitespace_edits_change_no_key(self):
        before = self.plan()
        for manifest in (self.project / "manifests").rglob("*.toml"):
            text = manifest.read_text()
            manifest.write_text("# edited comment\n\n" + text.replace(" = ", "   =   ") + "\n# trailing\n")
        self.assertEqual(self.plan(), before)

    def test_source_tree_change_changes_the_fixture_key(self):
        before = self.plan("kiln-demo")["kiln-demo"]["key"]
        with open(self.project / "kernels/kiln-demo/csrc/kiln_demo_kernel.cu", "a") as f:
            f.write("\n// a change\n")
        self.assertNotEqual(self.plan("kiln-demo")["kiln-demo"]["key"], before)

    def test_archs_override_derives_a_named_target_and_a_new_key(self):
        base = self.plan("kiln-demo")["kiln-demo"]
        derived = self.plan("kiln-demo", "--archs", "9.0;12.0+PTX")["kiln-demo"]
        self.assertEqual(derived["target"], "default-sm90-sm120-ptx120")
        self.assertNotEqual(derived["key"], base["key"])
        # The same arch set spelled another way is the same target and key.
        same = self.plan("kiln-demo", "--archs", "sm_90 compute_120 sm_120")["kiln-demo"]
        self.assertEqual(same["key"], derived["key"])

    def test_target_change_changes_compiled_keys(self):
        before = self.plan()
        self.edit("manifests/targets/default.toml", 'archs = "9.0"', 'archs = "9.0;10.0"')
        after = self.plan()
        self.assertNotEqual(after["kiln-demo"]["key"], before["kiln-demo"]["key"])

    def test_setuptools_keys_cover_the_pinned_environment(self):
        self.edit("manifests/kiln-demo/0.1.0.toml", 'backend = "native"', 'backend = "setuptools"')
        before = self.plan()
        self.assertEqual(before["kiln-demo"]["backend"], "setuptools")
        self.assertEqual(before["kiln-demo"]["inputs"]["build_env"]["tools"][0]["file"], "pip-25.3-py3-none-any.whl")
        self.assertNotIn("build_env", before["causal-conv1d"]["inputs"])
        self.edit("manifests/tools/setuptools-env.toml", 'file = "ninja-1.13.0-', 'file = "ninja-1.13.0.post1-')
        after = self.plan()
        self.assertNotEqual(after["kiln-demo"]["key"], before["kiln-demo"]["key"])
        for name in before:
            if name != "kiln-demo":
                self.assertEqual(after[name]["key"], before[name]["key"], name)

    def test_bad_manifest_gives_file_line_col_and_caret(self):
        self.edit("manifests/kiln-demo/0.1.0.toml", 'backend = "native"', 'backend = "natve"')
        text = (self.project / "manifests/kiln-demo/0.1.0.toml").read_text().splitlines()
        line = text.index('backend = "natve"') + 1
        proc = self.kiln("resolve", check=2)
        lines = proc.stderr.splitlines()
        self.assertEqual(lines[0], f"kiln: error: manifests/kiln-demo/0.1.0.toml:{line}:11: "
                                   "unknown backend 'natve' (did you mean 'native'?)")
        self.assertEqual(lines[1], '  backend = "natve"')
        self.assertEqual(lines[2], "            ^")

    def test_bad_target_arch_points_at_the_token(self):
        self.edit("manifests/targets/default.toml", 'archs = "9.0"', 'archs = "9.0;sm_999"')
        proc = self.kiln("resolve", check=2)
        self.assertIn("manifests/targets/default.toml:5:14: bad architecture 'sm_999': "
                      "unknown CUDA architecture 999", proc.stderr)

    def test_missing_patch_file(self):
        manifests = sorted((self.project / "manifests").rglob("*.toml"))
        with_patches = [m for m in manifests if "[patches]" in m.read_text()]
        if not with_patches:
            self.skipTest("no manifest with patches")
        patch_dir = self.project / "patches"
        for p in patch_dir.rglob("*.patch"):
            p.unlink()
            break
        proc = self.kiln("resolve", check=2)
        self.assertRegex(proc.stderr, r"kiln: error: manifests/[^:]+\.toml:\d+:\d+: patch file '[^']+' does not exist")

    def test_toml_syntax_error(self):
        self.edit("manifests/kiln-demo/0.1.0.toml", '[build]', '[build')
        proc = self.kiln("resolve", check=2)
        self.assertRegex(proc.stderr, r"^kiln: error: manifests/kiln-demo/0\.1\.0\.toml:\d+:\d+: TOML syntax error: ")


if __name__ == "__main__":
    unittest.main()
