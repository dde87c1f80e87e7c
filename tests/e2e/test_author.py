"""What a manifest author meets (issue 35): a missing source is a located error before anything
compiles, a failed build names a log that exists and says how to keep its tree, --json says what
failed, a symbol above the glibc floor is named with its file, patches are found wherever the
manifests are, and the CLI takes its defaults from KILN_* variables and the user's configuration."""

import json
import re
import shutil
import subprocess
import unittest
from pathlib import Path

from kilntest import KilnTestCase, SourceTestCase

DEMO = Path("manifests") / "kiln-demo" / "0.1.0.toml"


class ManifestAuthorTest(KilnTestCase):
    def setUp(self):
        super().setUp()
        self.cache = self.fresh_cache("cache")  # the shared downloads, toolkits and sysroots

    def build_demo(self, *args, code=1):
        proc = self.kiln("--json", "build", "kiln-demo", *args, check=code, timeout=1800)
        return proc, json.loads(proc.stdout)

    def test_a_source_the_tree_lacks_is_a_located_error_before_compiling(self):
        self.edit(DEMO, '"csrc/kiln_demo_kernel.cu"]', '"csrc/kiln_demo_kernel.cu", "csrc/gone.cpp"]')
        proc, out = self.build_demo(code=2)  # the manifest is wrong: bad input
        line = next(n for n, l in enumerate((self.project / DEMO).read_text().splitlines(), 1)
                    if "csrc/gone.cpp" in l)
        self.assertRegex(proc.stderr, rf"kiln: error: manifests/kiln-demo/0\.1\.0\.toml:{line}:\d+: "
                                      r"'csrc/gone\.cpp' \(build\.extension\.sources\) is not a file "
                                      r"of the patched source tree")
        self.assertIn("kiln prepare kiln-demo==0.1.0 -o DIR", proc.stderr)
        self.assertFalse(out["ok"])
        self.assertEqual(out["compile_jobs"], 0)
        self.assertEqual((out["error"]["package"], out["error"]["target"]), ("kiln-demo", "default"))
        self.assertEqual(out["error"]["exit_code"], 2)

    def test_a_failed_compile_names_its_log_in_the_cache(self):
        self.edit(Path("kernels") / "kiln-demo" / "csrc" / "kiln_demo.cpp", "#include",
                  "#error kiln-e2e-broken\n#include")
        proc, out = self.build_demo()
        message = out["error"]["message"]
        log = re.search(r"log: (\S+)", message)
        self.assertIsNotNone(log, message)
        log = Path(log.group(1))
        self.assertTrue(str(log).startswith(str(self.cache / "logs" / out["error"]["key"])), log)
        self.assertIn("kiln-e2e-broken", log.read_text())  # the path can be opened after kiln exits
        self.assertIn("--keep-build-root keeps it", out["error"]["detail"])
        self.assertIn(str(log), proc.stderr)
        self.assertNotIn("/tmp/kiln-build", message)

    def test_a_symbol_above_the_floor_is_named_with_its_file_and_std_log2_builds(self):
        # stat() compiled on this glibc (2.36) references stat@GLIBC_2.33: above the 2_28 floor.
        path = self.project / "kernels" / "kiln-demo" / "csrc" / "kiln_demo.cpp"
        original = path.read_text()
        path.write_text(original + "\n#include <sys/stat.h>\nextern \"C\" int kiln_probe("
                        "const char* p) { struct stat s; return stat(p, &s); }\n")
        proc, out = self.build_demo()
        self.assertRegex(out["error"]["message"],
                         r"need manylinux_2_34_x86_64 \(GLIBC_2\.3\d\), newer than the target's floor "
                         r"manylinux_2_28_x86_64 .*stat@GLIBC_2\.33 \(in kiln_demo_cuda\.cpython-3\d+-"
                         r"x86_64-linux-gnu\.so\)")
        self.assertIn('[target] manylinux = "2_34"', out["error"]["detail"])
        self.assertIn("--keep-build-root", out["error"]["detail"])
        # fast-hadamard-transform's host code calls std::log2 (log2@GLIBC_2.29, manylinux_2_31):
        # below a 2.29 floor kiln binds it to GLIBC_2.2.5, so the wheel is manylinux_2_28 (the
        # CUDA unit's objects come from the failed build's: only kiln_demo.cpp compiles again).
        path.write_text("#include <cmath>\n" + original + "\nextern \"C\" double "
                        "kiln_probe(double x) { return std::log2(x) + std::exp(x); }\n")
        out = self.build_demo(code=0)[1]
        wheel = Path(out["items"][0]["wheel"])
        self.assertRegex(wheel.name, r"manylinux_2_28_x86_64\.whl$")
        self.assertGreater(out["objects_reused"], 0)
        report = json.loads(self.kiln("--json", "validate", str(wheel), check=0).stdout)
        checks = {c["id"]: c for c in report["wheels"][0]["checks"]}
        self.assertEqual(checks["tags"]["verdict"], "pass", checks["tags"])


class IterationTest(KilnTestCase):
    PATCH = """--- a/csrc/kiln_demo.cpp
+++ b/csrc/kiln_demo.cpp
@@ -13,3 +13,3 @@
 #ifndef KILN_DEMO_VERSION
-#define KILN_DEMO_VERSION "0.1.0"
+#define KILN_DEMO_VERSION "{version}"
 #endif
"""

    def patch(self, version):
        d = self.project / "patches" / "kiln-demo" / "0.1.0"
        d.mkdir(parents=True, exist_ok=True)
        (d / "0001-version.patch").write_text(self.PATCH.format(version=version))

    def build(self, cache):
        proc = self.kiln("--cache", str(cache), "--json", "build", "kiln-demo", check=0,
                         timeout=1800)
        return json.loads(proc.stdout)

    def test_editing_one_patch_recompiles_only_what_it_changes(self):
        """The build root's path does not depend on the patch series: after an edit only the units
        whose inputs changed compile (and the link), and the wheel is a cold build's bytes."""
        self.edit(DEMO, "[build]", '[patches]\nseries = ["0001-version.patch"]\n\n[build]')
        self.patch("0.1.0-one")
        cache = self.fresh_cache("c1")
        first = self.build(cache)
        self.patch("0.1.0-two")
        second = self.build(cache)
        self.assertNotEqual(second["items"][0]["key"], first["items"][0]["key"])
        ran = [j["job"] for j in second["jobs"]]
        self.assertTrue(ran, second)
        self.assertLess(len(ran), len(first["jobs"]), (ran, [j["job"] for j in first["jobs"]]))
        for job in ran:
            self.assertTrue("kiln_demo.cpp" in job or job.startswith("link"), (job, ran))
        self.assertGreater(second["objects_reused"], 0)
        cold = self.build(self.fresh_cache("c2"))
        self.assertEqual(cold["items"][0]["key"], second["items"][0]["key"])
        self.assertEqual(cold["items"][0]["sha256"], second["items"][0]["sha256"])


class PatchesRootTest(KilnTestCase):
    def test_manifests_copied_elsewhere_still_find_kilns_patches(self):
        elsewhere = self.tmp / "mine" / "manifests"
        shutil.copytree(self.project / "manifests", elsewhere)
        shutil.copytree(self.project / "kernels", elsewhere.parent / "kernels")  # kiln-demo's tree
        proc = self.kiln("--manifests", str(elsewhere), "resolve", "causal-conv1d", check=0,
                         cwd=self.tmp)
        self.assertNotIn("warning", proc.stderr)
        # A patches root of one's own: --patches, or KILN_PATCHES (the same bytes: the same key).
        mine = self.tmp / "my-patches"
        shutil.copytree(self.project / "patches", mine)
        keys = [self.key(self.kiln("--json", "--manifests", str(elsewhere), *flag, "resolve",
                                   "causal-conv1d", check=0, cwd=self.tmp, env=env))
                for flag, env in (([], None), (["--patches", str(mine)], None),
                                  ([], {"KILN_PATCHES": str(mine)}))]
        self.assertEqual(len(set(keys)), 1, keys)
        first = sorted((mine / "causal-conv1d").rglob("*.patch"))[0]
        first.unlink()  # read from there: its absence is the error
        for flag, env in ((["--patches", str(mine)], None), ([], {"KILN_PATCHES": str(mine)})):
            proc = self.kiln("--manifests", str(elsewhere), *flag, "resolve", "causal-conv1d",
                             check=2, cwd=self.tmp, env=env)
            self.assertIn(first.name, proc.stderr)

    def key(self, proc):
        return json.loads(proc.stdout)["items"][0]["key"]


class DefaultsTest(KilnTestCase):
    """flag > KILN_* > the user's configuration > kiln's default."""

    def resolve_targets(self, *args, env=None):
        # fla-core is pure: resolving it probes no toolchain.
        proc = self.kiln("--json", "resolve", "fla-core", *args, check=0, env=env)
        return [i["target"] for i in json.loads(proc.stdout)["items"]]

    def test_target_precedence_and_located_config_errors(self):
        config = self.tmp / "config.toml"
        env = {"KILN_CONFIG": str(config)}
        config.write_text('target = ["torch2.12", "torch2.13"]\njobs = 3\n')
        self.assertEqual(self.resolve_targets(env=env), ["torch2.12", "torch2.13"])
        config.write_text('target = "torch2.12"\n')
        self.assertEqual(self.resolve_targets(env=env), ["torch2.12"])
        self.assertEqual(self.resolve_targets(env={**env, "KILN_TARGET": "torch2.13,default"}),
                         ["torch2.13", "default"])
        self.assertEqual(self.resolve_targets("--target", "default",
                                              env={**env, "KILN_TARGET": "torch2.13"}), ["default"])
        config.write_text('jobs = "eight"\n')
        proc = self.kiln("resolve", "fla-core", check=2, env=env)
        self.assertRegex(proc.stderr, rf"kiln: error: {re.escape(str(config))}:1:\d+: ")
        config.write_text('cache = "~/c"\nunknown = 1\n')
        proc = self.kiln("resolve", "fla-core", check=2, env=env)
        self.assertIn("unknown", proc.stderr)
        proc = self.kiln("resolve", "fla-core", check=2, env={"KILN_JOBS": "many"})
        self.assertIn("$KILN_JOBS: 'many' is not a number of jobs", proc.stderr)

    def test_cache_from_the_configuration_and_outside_a_checkout(self):
        config = self.tmp / "config.toml"
        config.write_text('cache = "from-config"\n')
        env = {"KILN_CONFIG": str(config), "KILN_CACHE": ""}
        # `cache ls` on a cache not made yet lists nothing and names where it looked.
        proc = self.kiln("--json", "cache", "ls", check=0, env=env)
        self.assertIn(str(self.tmp / "from-config"), proc.stderr)  # relative to the file
        proc = self.kiln("--json", "--cache", str(self.tmp / "flag"), "cache", "ls", check=0, env=env)
        self.assertIn(str(self.tmp / "flag"), proc.stderr)
        # A copy of the binary outside the checkout uses ~/.cache/kiln/cache (under $XDG_CACHE_HOME).
        exe = self.tmp / "bin" / "kiln"
        exe.parent.mkdir()
        shutil.copy2(self.kiln_binary(), exe)
        out = subprocess.run([str(exe), "cache", "ls"], capture_output=True, text=True, cwd=self.tmp,
                             env={"PATH": "/usr/bin:/bin", "HOME": str(self.tmp / "home"),
                                  "XDG_CACHE_HOME": str(self.tmp / "xdg"), "KILN_CONFIG": "/dev/null"})
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn(str(self.tmp / "xdg" / "kiln" / "cache"), out.stderr)

    def kiln_binary(self):
        from kilntest import KILN
        return KILN

    def test_quiet_version_help_and_completion(self):
        cache = self.fresh_cache("c")
        loud = self.kiln("--cache", str(cache), "cache", "gc", check=0)
        quiet = self.kiln("--cache", str(cache), "-q", "cache", "gc", check=0)
        self.assertIn("kiln: removed 0 items", loud.stderr)
        self.assertEqual(quiet.stderr, "")
        self.assertEqual(self.kiln("-V", check=0).stdout, self.kiln("--version", check=0).stdout)
        self.assertEqual(self.kiln("help", "build", check=0).stdout,
                         self.kiln("build", "--help", check=0).stdout)
        self.assertEqual(self.kiln("help", "cache", "gc", check=0).stdout,
                         self.kiln("cache", "gc", "--help", check=0).stdout)
        self.assertIn("did you mean 'build'", self.kiln("help", "biuld", check=2).stderr)
        script = self.kiln("completion", "bash", check=0).stdout
        for words, want in ((["kiln", "bu"], "build"), (["kiln", "build", "--ta"], "--target"),
                            (["kiln", "cache", ""], "gc"), (["kiln", "cache", "gc", "--max-"], "--max-age")):
            probe = (f"{script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)}); "
                     f"COMP_CWORD={len(words) - 1}; _kiln_complete; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
            got = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True)
            self.assertIn(want, got.stdout.split(), (words, got.stdout, got.stderr))
        fish = self.kiln("completion", "fish", check=0).stdout
        self.assertIn("complete -c kiln -f -n '__fish_use_subcommand' -a build", fish)
        self.assertIn("-l max-age", fish)
        zsh = self.kiln("completion", "zsh", check=0).stdout
        self.assertIn("bashcompinit", zsh)
        self.kiln("completion", "tcsh", check=2)


class InstallTest(unittest.TestCase):
    def test_the_quick_start_installs_no_test_services(self):
        """scripts/run installs what kiln needs to build; the services only the tests use come with
        scripts/test (install-deps --test)."""
        root = Path(__file__).resolve().parents[2]
        lists = {flag: subprocess.run([str(root / "scripts" / "install-deps"), *flag, "--list"],
                                      capture_output=True, text=True, check=True).stdout.split()
                 for flag in ((), ("--test",))}
        services = {"redis-server", "nginx", "slurmctld", "slurmd", "munge"}
        self.assertFalse(services & set(lists[()]), lists[()])
        self.assertLessEqual(services, set(lists[("--test",)]))
        self.assertLessEqual(set(lists[()]), set(lists[("--test",)]))
        self.assertIn('scripts/install-deps"\n', (root / "scripts" / "run").read_text())
        self.assertIn("scripts/install-deps\" --test", (root / "scripts" / "test").read_text())


class PrepareTest(SourceTestCase):
    def test_prepare_says_what_a_build_would_refuse(self):
        self.local_archive("demo-1.0.0.tar.gz", self.sdist([self.member("demo-1.0.0/other/x.py")]))
        proc = self.kiln("prepare", "demo", "-o", str(self.tmp / "tree"), check=0)
        self.assertRegex(proc.stderr, r"warning: manifests/demo/1\.0\.0\.toml:\d+:\d+: 'demo' "
                                      r"\(build\.packages\) is not a package directory")
        proc = self.kiln("build", "demo", check=2)
        self.assertRegex(proc.stderr, r"error: manifests/demo/1\.0\.0\.toml:\d+:\d+: 'demo' "
                                      r"\(build\.packages\)")


if __name__ == "__main__":
    unittest.main()
