"""kiln resolve: the plan, stable build keys, and precise errors for bad manifests."""

import json
import re
import subprocess
import unittest

from kilntest import KilnTestCase


class ResolveTest(KilnTestCase):
    def plan(self, *args):
        out = self.kiln("resolve", "--json", *args, check=0).stdout
        return {item["package"]: item for item in json.loads(out)["items"]}

    def packages(self, fixtures):
        """The package directories of the project's manifests/, with or without test fixtures
        (`fixture = true`: kiln-demo)."""
        names = set()
        for d in (self.project / "manifests").iterdir():
            if d.name in ("targets", "tools"):
                continue
            fixture = any(re.search(r"(?m)^fixture = true$", m.read_text()) for m in d.glob("*.toml"))
            if fixtures or not fixture:
                names.add(d.name)
        return names

    def every(self):
        """The plan of every package, the fixtures included (named)."""
        return self.plan(*sorted(self.packages(fixtures=True)))

    def test_default_plan_lists_every_package_with_a_stable_key(self):
        first = self.plan()
        names = self.packages(fixtures=False)
        self.assertIn("kiln-demo", self.packages(fixtures=True) - names)
        self.assertEqual({n.replace("_", "-") for n in first}, names)
        for item in first.values():
            self.assertRegex(item["key"], r"^[0-9a-f]{64}$")
            self.assertEqual(item["target"], "default")
        self.assertEqual(self.plan(), first)
        table = self.kiln("resolve", check=0).stdout
        for item in first.values():
            self.assertIn(item["key"], table)

    def test_semantic_change_changes_only_that_key(self):
        before = self.every()
        self.edit("manifests/kiln-demo/0.1.0.toml", 'nvcc-flags = ["-O3"]', 'nvcc-flags = ["-O2"]')
        after = self.every()
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
        before = self.every()
        self.edit("manifests/targets/default.toml", 'archs = "9.0"', 'archs = "9.0;10.0"')
        after = self.every()
        self.assertNotEqual(after["kiln-demo"]["key"], before["kiln-demo"]["key"])

    def test_setuptools_keys_cover_the_pinned_environment(self):
        self.edit("manifests/kiln-demo/0.1.0.toml", 'backend = "native"', 'backend = "setuptools"')
        before = self.every()
        self.assertEqual(before["kiln-demo"]["backend"], "setuptools")
        self.assertEqual(before["kiln-demo"]["inputs"]["build_env"]["tools"][0]["file"], "pip-25.3-py3-none-any.whl")
        self.assertNotIn("build_env", before["causal-conv1d"]["inputs"])
        self.edit("manifests/tools/setuptools-env.toml", 'file = "ninja-1.13.0-', 'file = "ninja-1.13.0.post1-')
        after = self.every()
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


# What pip picks: packaging's SpecifierSet.filter over the versions of the wheels kiln builds for
# the target (each manifest version with the target's local label), the newest of them.
PIP_PICK = """
import json, sys
from packaging.specifiers import SpecifierSet
from packaging.version import Version
spec, label, versions = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
kept = list(SpecifierSet(spec).filter(f"{v}+{label}" for v in versions))
print(str(max(kept, key=Version)).split("+")[0] if kept else "")
"""


class RequirementTest(KilnTestCase):
    """Package arguments as pip reads them: specifiers with PEP 440 semantics, and a local label
    that must be the target's."""

    LABEL = "cu130torch2.11"  # the default target's: CUDA 13.0, torch 2.11

    def versions(self):
        return sorted(p.stem for p in (self.project / "manifests" / "causal-conv1d").glob("*.toml"))

    def pip_pick(self, spec):
        proc = subprocess.run([self.tool("python"), "-c", PIP_PICK, spec, self.LABEL, json.dumps(self.versions())],
                              capture_output=True, text=True, check=True)
        return proc.stdout.strip()

    def resolved(self, *args):
        out = json.loads(self.kiln("--json", "resolve", *args, check=0).stdout)
        return [(i["package"], i["version"], i["target"]) for i in out["items"]]

    def test_picks_what_pip_picks(self):
        self.assertIn("1.6.1", self.versions())
        self.assertIn("1.7.0", self.versions())
        for spec, expected in [(f"==1.7.0+{self.LABEL}", "1.7.0"), ("==1.7", "1.7.0"), (">=1.6,<1.7", "1.6.1"),
                               ("~=1.6.0", "1.6.1"), ("==1.6.*", "1.6.1"), ("!=1.7.0", "1.6.1"), ("<=1.7", "1.7.0"),
                               ("", "1.7.0")]:
            with self.subTest(spec=spec):
                self.assertEqual(self.pip_pick(spec), expected)
                self.assertEqual(self.resolved(f"causal-conv1d{spec}"), [("causal-conv1d", expected, "default")])

    def test_a_label_that_contradicts_the_target_is_a_usage_error(self):
        proc = self.kiln("resolve", "causal-conv1d==1.7.0+cu128torch2.10", check=2)
        self.assertRegex(proc.stderr, r"^kiln: error: 'causal-conv1d==1\.7\.0\+cu128torch2\.10': ")
        self.assertIn("+cu128torch2.10", proc.stderr)
        self.assertIn(f"target default, +{self.LABEL}", proc.stderr)
        # The same label for the target it names is fine; a pure package's wheel has no label.
        self.assertEqual(self.resolved(f"causal-conv1d==1.7.0+{self.LABEL.upper()}", "--target", "default"),
                         [("causal-conv1d", "1.7.0", "default")])
        proc = self.kiln("resolve", f"fla-core==0.6.0+{self.LABEL}", check=2)
        self.assertIn("fla-core is a pure package", proc.stderr)
        # --all-versions keeps the label and checks it the same way.
        proc = self.kiln("resolve", "--all-versions", "--target", "default",
                         "causal-conv1d==1.7.0+cu128torch2.10", check=2)
        self.assertIn("+cu128torch2.10", proc.stderr)
        self.assertIn(f"target default, +{self.LABEL}", proc.stderr)
        items = json.loads(self.kiln("--json", "resolve", "--all-versions", "--target", "default",
                                     f"causal-conv1d==1.7.0+{self.LABEL}", check=0).stdout)["items"]
        self.assertEqual([(i["package"], i["version"]) for i in items], [("causal-conv1d", "1.7.0")])

    def test_bad_specifiers_are_located_usage_errors(self):
        for spec, why in [("causal-conv1d=>1.6", "expected an operator"),
                          ("causal-conv1d>=1.6,<x", "'<x': 'x' is not a PEP 440 version"),
                          ("causal-conv1d~=1", "~= needs at least two release numbers"),
                          ("causal-conv1d>=1.7+cu130", "a local label (+cu130) goes only with == and !=")]:
            with self.subTest(spec=spec):
                proc = self.kiln("resolve", spec, check=2)
                self.assertTrue(proc.stderr.startswith(f"kiln: error: bad package spec '{spec}': "), proc.stderr)
                self.assertIn(why, proc.stderr)
        proc = self.kiln("resolve", "causal-conv1d>=2", check=2)
        self.assertIn("kiln: error: no manifest for causal-conv1d>=2 (have: 1.6.1, 1.7.0)", proc.stderr)


class DefaultSetTest(KilnTestCase):
    """Test fixtures (kiln-demo) are built when named, never by default; one target or manifest that
    cannot be loaded here never stops the others."""

    def test_no_names_leaves_out_the_fixture(self):
        items = json.loads(self.kiln("--json", "resolve", check=0).stdout)["items"]
        names = {i["package"] for i in items}
        self.assertNotIn("kiln-demo", names)
        self.assertIn("causal-conv1d", names)
        # Named, it resolves (and builds) as before.
        items = json.loads(self.kiln("--json", "resolve", "--target", "default", "kiln-demo", check=0).stdout)["items"]
        self.assertEqual([(i["package"], i["target"]) for i in items], [("kiln-demo", "default")])
        # `kiln build` with no names plans the same packages (--expect-key stops it before building).
        proc = self.kiln("build", "--expect-key", "0" * 64, check=2)
        self.assertIn(f"--expect-key needs a plan of one item; this one has {len(names)} ", proc.stderr)
        # --all-versions without names: every version of every package but the fixture.
        items = json.loads(self.kiln("--json", "resolve", "--all-versions", "--target", "default",
                                     check=0).stdout)["items"]
        self.assertNotIn("kiln-demo", {i["package"] for i in items})

    def test_all_versions_lists_every_buildable_pair_and_warns_about_the_rest(self):
        proc = self.kiln("--json", "resolve", "--all-versions", check=0)
        out = json.loads(proc.stdout)
        resolved = {t["name"] for t in out["targets"]}
        targets = {p.stem for p in (self.project / "manifests" / "targets").glob("*.toml")}
        left_out = {t for t in targets if re.search(rf"(?m)^kiln: warning: left out target {re.escape(t)}: ", proc.stderr)}
        self.assertEqual(resolved | left_out, targets, proc.stderr)
        self.assertFalse(resolved & left_out)
        self.assertIn("default", resolved)
        manifests = {(d.name, m.stem) for d in (self.project / "manifests").iterdir() if d.name not in ("targets", "tools")
                     for m in d.glob("*.toml") if "fixture = true" not in m.read_text()}
        pairs = {(i["package"], i["version"], i["target"]) for i in out["items"]}
        self.assertEqual(pairs, {(p, v, t) for p, v in manifests for t in resolved})
        # gpu-host takes torch from python3's environment: where it has none, it is named and left out.
        has_torch = subprocess.run(["python3", "-c", "import torch"], capture_output=True).returncode == 0
        if not has_torch:
            self.assertIn("gpu-host", left_out)
            self.assertRegex(proc.stderr, r"(?m)^kiln: warning: left out target gpu-host: ")
        # Named with --target, the target is needed: its error stops the command.
        if "gpu-host" in left_out:
            self.kiln("resolve", "--all-versions", "--target", "gpu-host", check=1)

    def test_a_target_file_that_does_not_load_is_left_out_with_a_warning(self):
        (self.project / "manifests" / "targets" / "broken.toml").write_text("[target\n")
        proc = self.kiln("--json", "resolve", "--all-versions", "fla-core", check=0)
        self.assertRegex(proc.stderr, r"(?m)^kiln: warning: left out target broken: .*broken\.toml:1:")
        self.assertNotIn("broken", {t["name"] for t in json.loads(proc.stdout)["targets"]})


if __name__ == "__main__":
    unittest.main()
