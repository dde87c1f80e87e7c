"""The Mamba-2 hybrids' packages without a GPU: a git source pinned to a host kiln cannot reach,
fetched through a mirror ($KILN_GIT_MIRRORS, or git's url.<base>.insteadOf) and checked by its
commit whatever the mirror serves; mamba-ssm's and fast-hadamard-transform's patches applied to
their pinned sources (from the shared persistent cache)."""

import ast
import json
import os
import subprocess
import unittest
from pathlib import Path

from kilntest import SHARED_CACHE, KilnTestCase, SourceTestCase

UNREACHABLE = "https://git.invalid/org/"
FHT_COMMIT = "1cc807efbd6cc001df359822d60bf6052dd66859"
# fast-hadamard-transform 1.1.0's sdist on PyPI: the commit's tree without csrc/, its setup.py the same.
FHT_SDIST = ("https://files.pythonhosted.org/packages/81/dc/7afa54b951cac690742247d153e2e992e30677b944d7330bb"
             "7280903fb11/fast_hadamard_transform-1.1.0.tar.gz",
             "7c03daf825dc74c7200605a5b758f2d5a3bc47ef3b817bf02e97b24076a83906")


def git(*args, cwd):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@e", GIT_CONFIG_NOSYSTEM="1", HOME=str(cwd))
    return subprocess.run(["git", *args], cwd=cwd, check=True, env=env, capture_output=True,
                          text=True).stdout.strip()


class GitMirrorTest(SourceTestCase):
    def setUp(self):
        super().setUp()
        self.upstream = self.tmp / "upstream"
        (self.upstream / "demo").mkdir(parents=True)
        git("init", "-q", "-b", "main", cwd=self.upstream)
        (self.upstream / "demo" / "__init__.py").write_text("VALUE = 1\n")
        (self.upstream / "setup.py").write_text("print('hi')\n")
        git("add", "-A", cwd=self.upstream)
        git("commit", "-q", "-m", "one", cwd=self.upstream)
        self.commit = git("rev-parse", "HEAD", cwd=self.upstream)
        self.mirrors = self.tmp / "mirrors"
        self.mirrors.mkdir()
        git("clone", "-q", "--bare", str(self.upstream), str(self.mirrors / "demo.git"), cwd=self.tmp)
        self.demo_manifest(f'git = "{UNREACHABLE}demo.git"\ncommit = "{self.commit}"')

    def mirror_env(self, base):
        return {"KILN_GIT_MIRRORS": f"https://example.invalid/=/nowhere/ {UNREACHABLE}={base}"}

    def test_unreachable_host_without_a_mirror_fails_cleanly(self):
        self.assert_fails_cleanly("fetch", "demo", code=1, keep_verified=True, env={"KILN_GIT_MIRRORS": ""},
                                  message=rf"kiln: error: cannot fetch {UNREACHABLE}demo\.git: ")

    def test_the_mirror_serves_the_pinned_commit(self):
        for base in (f"file://{self.mirrors}/", f"{self.mirrors}/"):
            with self.subTest(base=base):
                out = self.tmp / f"out-{len(base)}"
                proc = self.kiln("--cache", str(self.tmp / f"c-{len(base)}"), "prepare", "demo", "-o", str(out),
                                 env=self.mirror_env(base), check=0)
                self.assertIn(f"fetching {UNREACHABLE}demo.git (mirror {base}demo.git)", proc.stderr)
                self.assertEqual((out / "demo" / "__init__.py").read_text(), "VALUE = 1\n")

    def test_a_mirror_without_the_commit_is_refused(self):
        # Another history at the mirror's place: same names, other bytes.
        forged = self.tmp / "forged"
        (forged / "demo").mkdir(parents=True)
        git("init", "-q", "-b", "main", cwd=forged)
        (forged / "demo" / "__init__.py").write_text("VALUE = 666\n")
        git("add", "-A", cwd=forged)
        git("commit", "-q", "-m", "forged", cwd=forged)
        (self.tmp / "evil").mkdir()
        git("clone", "-q", "--bare", str(forged), str(self.tmp / "evil" / "demo.git"), cwd=self.tmp)
        out = self.tmp / "out"
        self.assert_fails_cleanly("prepare", "demo", "-o", str(out), code=1, keep_verified=True,
                                  env=self.mirror_env(f"{self.tmp}/evil/"),
                                  message=rf"kiln: error: commit {self.commit} not found in "
                                          rf"{UNREACHABLE}demo\.git \(mirror {self.tmp}/evil/demo\.git\) "
                                          r"\(it did not send that commit by its id: ")
        self.assertFalse(out.exists())

    def test_git_insteadof_in_the_users_git_config(self):
        home = self.tmp / "home"
        home.mkdir()
        (home / ".gitconfig").write_text(f'[url "{self.mirrors}/"]\n\tinsteadOf = {UNREACHABLE}\n')
        out = self.tmp / "out"
        self.kiln("prepare", "demo", "-o", str(out), env={"HOME": str(home), "KILN_GIT_MIRRORS": "",
                                                          "XDG_CONFIG_HOME": str(home / ".config")}, check=0)
        self.assertEqual((out / "demo" / "__init__.py").read_text(), "VALUE = 1\n")

    def test_a_malformed_mirror_rule_is_bad_input(self):
        self.assert_fails_cleanly("fetch", "demo", code=2, env={"KILN_GIT_MIRRORS": f"{UNREACHABLE}"},
                                  message=rf"kiln: error: \$KILN_GIT_MIRRORS: '{UNREACHABLE}' is not "
                                          r"PREFIX=REPLACEMENT$")


class ResolveEveryTargetTest(KilnTestCase):
    def test_both_packages_resolve_on_every_shipped_target(self):
        torch_bin = Path(os.environ.get("KILN_TORCH_ENV") or Path.home() / ".cache/kiln/torch-venv") / "bin"
        if not (torch_bin / "python3").exists():
            self.skipTest("no torch environment: the gpu-host targets take this machine's torch")
        targets = sorted(p.stem for p in (self.project / "manifests" / "targets").glob("*.toml"))
        flags = [a for t in targets for a in ("--target", t)]
        env = {"PATH": f"{torch_bin}:{os.environ['PATH']}"}
        plan = json.loads(self.kiln("--json", "resolve", "mamba-ssm", "fast-hadamard-transform", *flags, env=env,
                                    check=0).stdout)
        got = {(i["package"], i["version"], i["target"], i["backend"]) for i in plan["items"]}
        want = {(p, v, t, "native") for p, v in (("mamba-ssm", "2.3.2.post1"), ("fast-hadamard-transform", "1.1.0"))
                for t in targets}
        self.assertEqual(got, want)


class PrepareHybridTest(KilnTestCase):
    """The shipped manifests' patches against the real pinned sources."""

    def test_mamba_ssm(self):
        out = self.tmp / "mamba"
        self.kiln("--cache", str(self.fresh_cache("c")), "prepare", "mamba-ssm==2.3.2.post1", "-o", str(out),
                  check=0)
        setup = (out / "setup.py").read_text()
        ast.parse(setup)
        self.assertNotIn('cc_flag.append("-gencode")', setup)
        self.assertIn("bare_metal_version = None", setup)
        self.assertNotIn("urlretrieve(wheel_url", setup)
        # 0004: each backward file instantiates its pair through the shardable macro.
        csrc = out / "csrc" / "selective_scan"
        self.assertTrue((csrc / "selective_scan_bwd_bf16_complex.cu").read_text().endswith(
            "SELECTIVE_SCAN_BWD_INSTANTIATE(at::BFloat16, complex_t)"))
        self.assertIn("#define SELECTIVE_SCAN_BWD_INSTANTIATE(", (csrc / "selective_scan_bwd_kernel.cuh").read_text())

    def assert_fht_setup_patched(self, out):
        setup = (out / "setup.py").read_text()
        ast.parse(setup)
        self.assertNotIn('cc_flag.append("-gencode")', setup)
        self.assertIn("bare_metal_version = None", setup)
        self.assertNotIn("urlretrieve(wheel_url", setup)

    def prepare_fht_sdist(self):
        """fast-hadamard-transform 1.1.0 prepared from its PyPI sdist (its manifest's source made the
        sdist's, less patches 0004 and 0005, whose csrc/ is not there); the directory."""
        manifest = self.project / "manifests" / "fast-hadamard-transform" / "1.1.0.toml"
        text = manifest.read_text()
        git = f'git = "https://github.com/Dao-AILab/fast-hadamard-transform.git"\ncommit = "{FHT_COMMIT}"'
        self.assertIn(git, text)
        device = '  "0004-integer-log2.patch",\n  "0005-shardable-instantiations.patch",\n'
        self.assertIn(device, text)
        manifest.write_text(text.replace(git, f'url = "{FHT_SDIST[0]}"\nsha256 = "{FHT_SDIST[1]}"')
                            .replace(device, ""))
        out = self.tmp / "fht-sdist"
        try:
            self.kiln("--cache", str(self.fresh_cache("sdist")), "prepare", "fast-hadamard-transform==1.1.0",
                      "-o", str(out), check=0)
        finally:
            manifest.write_text(text)
        self.assertFalse((out / "csrc").exists())
        return out

    def test_fast_hadamard_transform_setup_patches_on_the_pypi_sdist(self):
        """Wherever the pinned commit is out of reach, its setup.py is not: the PyPI sdist's is the
        same file (test_fast_hadamard_transform compares them), so patches 0001-0003 are checked on
        every CI machine."""
        self.assert_fht_setup_patched(self.prepare_fht_sdist())

    def test_fast_hadamard_transform(self):
        """Its source is a commit of github.com, which CI cannot reach: from the persistent cache's git
        mirror (filled once through $KILN_GIT_MIRRORS, docs/manifest.md), or a mirror in the environment."""
        out = self.tmp / "fht"
        offline = () if os.environ.get("KILN_GIT_MIRRORS") else ("--offline",)
        proc = self.kiln("--cache", str(SHARED_CACHE), "prepare", *offline, "fast-hadamard-transform==1.1.0",
                         "-o", str(out))
        if proc.returncode != 0 and "is not in the git cache" in proc.stderr:
            self.skipTest(f"commit {FHT_COMMIT} is not in {SHARED_CACHE}/git and $KILN_GIT_MIRRORS is unset")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assert_fht_setup_patched(out)
        self.assertEqual((out / "setup.py").read_text(), (self.prepare_fht_sdist() / "setup.py").read_text())
        host = (out / "csrc" / "fast_hadamard_transform.cpp").read_text()
        self.assertFalse("std::log2(" in host, "the host code still calls std::log2")
        self.assertIn("params.log_N = 0;", host)
        device = (out / "csrc" / "fast_hadamard_transform_cuda.cu").read_text()
        self.assertEqual(device.count("% FAST_HADAMARD_TRANSFORM_SHARDS == FAST_HADAMARD_TRANSFORM_SHARD"), 15)


if __name__ == "__main__":
    unittest.main()
