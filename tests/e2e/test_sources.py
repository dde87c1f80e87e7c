"""Sources end to end: kiln fetch / kiln prepare against a local HTTP server, local git repos and
hostile archives. Every failure: non-zero exit, a one-line reason, nothing written outside the
work dir, nothing left in the cache."""

import ast
import io
import json
import os
import shutil
import subprocess
import tarfile
import unittest
import zipfile
from pathlib import Path

from kilntest import KilnTestCase, SourceTestCase, sha256


class SourcesTest(SourceTestCase):
    # -- downloads ---------------------------------------------------------------------------
    def test_hash_mismatch(self):
        url = self.server()
        (self.served / "demo-1.0.0.tar.gz").write_bytes(self.good_sdist())
        self.demo_manifest(f'url = "{url}/demo-1.0.0.tar.gz"\nsha256 = "{"0" * 64}"')
        self.assert_fails_cleanly("fetch", "demo", code=1,
                                  message=r"kiln: error: sha256 mismatch for demo-1\.0\.0\.tar\.gz: expected 0{64}, got [0-9a-f]{64}")

    def test_truncated_download(self):
        url = self.server()
        data = self.good_sdist()
        (self.served / "demo-1.0.0.tar.gz").write_bytes(data)
        self.demo_manifest(f'url = "{url}/always-truncate/40/demo-1.0.0.tar.gz"\nsha256 = "{sha256(data)}"')
        self.assert_fails_cleanly("fetch", "demo", code=1, message=r"kiln: error: .*demo-1\.0\.0\.tar\.gz")

    def test_http_404_and_500(self):
        url = self.server()
        self.demo_manifest(f'url = "{url}/status/404/demo-1.0.0.tar.gz"\nsha256 = "{"1" * 64}"')
        self.assert_fails_cleanly("fetch", "demo", code=1, message=r"kiln: error: .*404")
        self.demo_manifest(f'url = "{url}/status/500/demo-1.0.0.tar.gz"\nsha256 = "{"1" * 64}"')
        self.assert_fails_cleanly("fetch", "demo", code=1, message=r"kiln: error: .*500")

    def test_connection_refused(self):
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        self.demo_manifest(f'url = "http://127.0.0.1:{port}/demo.tar.gz"\nsha256 = "{"1" * 64}"')
        self.assert_fails_cleanly("fetch", "demo", code=1, message=r"kiln: error: .*(refused|connect)")

    def test_second_fetch_does_no_network_io(self):
        url = self.server()
        data = self.good_sdist()
        (self.served / "demo-1.0.0.tar.gz").write_bytes(data)
        self.demo_manifest(f'url = "{url}/demo-1.0.0.tar.gz"\nsha256 = "{sha256(data)}"')
        import json
        first = json.loads(self.kiln("--json", "fetch", "demo", check=0).stdout)
        self.assertEqual(first["fetches"], 1)
        second = json.loads(self.kiln("--json", "fetch", "demo", "--offline", check=0).stdout)
        self.assertEqual(second["fetches"], 0)
        self.assertEqual(second["items"][0]["path"], first["items"][0]["path"])

    def test_offline_says_what_is_missing(self):
        self.demo_manifest(f'url = "http://127.0.0.1:9/demo-1.0.0.tar.gz"\nsha256 = "{"2" * 64}"')
        self.assert_fails_cleanly("fetch", "demo", "--offline", code=1,
                                  message=r"kiln: error: demo-1\.0\.0\.tar\.gz \(sha256 2{64}\) is not in the download cache")

    def test_git_commit_that_does_not_exist(self):
        repo = self.tmp / "repo"
        repo.mkdir()
        env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e", GIT_COMMITTER_NAME="t",
                   GIT_COMMITTER_EMAIL="t@e")
        for cmd in (["git", "init", "-q"], ["git", "commit", "-q", "--allow-empty", "-m", "x"]):
            subprocess.run(cmd, cwd=repo, check=True, env=env)
        missing = "0123456789abcdef0123456789abcdef01234567"
        self.demo_manifest(f'git = "file://{repo}"\ncommit = "{missing}"')
        self.assert_fails_cleanly("fetch", "demo", code=1, message=rf"kiln: error: .*commit {missing} not found",
                                  keep_verified=True)

    # -- hostile archives --------------------------------------------------------------------
    def hostile(self, data, message, name="demo-1.0.0.tar.gz"):
        self.local_archive(name, data)
        self.assert_fails_cleanly("prepare", "demo", "-o", str(self.tmp / "out"), message=message)
        self.assertFalse((self.tmp / "out").exists())

    def test_tar_parent_traversal(self):
        self.hostile(self.sdist([self.member("demo-1.0.0/../../outside/x")]), r"kiln: error: .*'.*\.\./.*outside/x'")

    def test_tar_absolute_path(self):
        self.hostile(self.sdist([self.member(str(self.outside / "x"))]), r"kiln: error: .*absolute")

    def test_tar_symlink_to_root_then_through_it(self):
        link = tarfile.TarInfo("demo-1.0.0/root")
        link.type = tarfile.SYMTYPE
        link.linkname = "/"
        self.hostile(self.sdist([(link, None), self.member(f"demo-1.0.0/root{self.outside}/x")]),
                     r"kiln: error: .*demo-1\.0\.0/root")

    def test_tar_hardlink_out_of_tree(self):
        link = tarfile.TarInfo("demo-1.0.0/h")
        link.type = tarfile.LNKTYPE
        link.linkname = str(self.outside / "victim")
        self.hostile(self.sdist([(link, None)]), r"kiln: error: .*demo-1\.0\.0/h")

    def test_tar_device_node(self):
        dev = tarfile.TarInfo("demo-1.0.0/dev")
        dev.type = tarfile.CHRTYPE
        dev.devmajor, dev.devminor = 1, 3
        self.hostile(self.sdist([(dev, None)]), r"kiln: error: .*demo-1\.0\.0/dev")

    def test_tar_member_declared_over_the_cap(self):
        # A header that declares 9 GiB (over the per-member cap) with no data behind it: the cap
        # is enforced on the declared size, before anything is written.
        info = tarfile.TarInfo("demo-1.0.0/huge")
        info.size = 9 << 30
        header = info.tobuf(format=tarfile.GNU_FORMAT)
        raw = header + b"\0" * 1024
        import gzip
        self.hostile(gzip.compress(raw), r"kiln: error: .*demo-1\.0\.0/huge")

    def test_zip_traversal(self):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("demo-1.0.0/ok.py", "x")
            z.writestr("../outside/evil", "x")
        self.hostile(buf.getvalue(), r"kiln: error: .*\.\./outside/evil", name="demo-1.0.0.zip")

    # -- patches -----------------------------------------------------------------------------
    def patched_demo(self, hunk):
        """The demo sdist as a local source with one patch, 0001-change.patch: `hunk` of
        demo/__init__.py (which holds VALUE = 1)."""
        data = self.good_sdist()
        path = self.tmp / "demo-1.0.0.tar.gz"
        path.write_bytes(data)
        pdir = self.project / "patches" / "demo" / "1.0.0"
        pdir.mkdir(parents=True)
        (pdir / "0001-change.patch").write_text(
            "Change the value.\n\n--- a/demo/__init__.py\n+++ b/demo/__init__.py\n" + hunk)
        self.demo_manifest(f'path = "{path}"\nsha256 = "{sha256(data)}"', '[patches]\nseries = ["0001-change.patch"]\n')

    def test_patch_whose_context_does_not_match(self):
        self.patched_demo("@@ -1 +1 @@\n-VALUE = 2\n+VALUE = 3\n")
        self.assert_fails_cleanly("prepare", "demo", "-o", str(self.tmp / "out"),
                                  message=r"kiln: error: patch 0001-change\.patch: demo/__init__\.py: hunk 1 .* does not apply",
                                  keep_verified=True)
        self.assertFalse((self.tmp / "out").exists())

    def test_prepare_applies_patches(self):
        self.patched_demo("@@ -1 +1 @@\n-VALUE = 1\n+VALUE = 3\n")
        self.kiln("prepare", "demo", "-o", str(self.tmp / "out"), check=0)
        self.assertEqual((self.tmp / "out" / "demo" / "__init__.py").read_text(), "VALUE = 3\n")
        self.assertTrue((self.tmp / "out" / "setup.py").exists())

    def test_prepare_shows_hunks_applied_away_from_their_line(self):
        # A patch made against another release: its hunk says line 3, the text is at line 1. It
        # applies (exact context), and prepare says where, for the patch's author; a build says it
        # with -v only.
        self.patched_demo("@@ -3 +3 @@\n-VALUE = 1\n+VALUE = 3\n")
        note = "0001-change.patch: demo/__init__.py: hunk 1 applied at offset -2 (line 1)"
        proc = self.kiln("prepare", "demo", "-o", str(self.tmp / "out"), check=0)
        self.assertIn(f"kiln: {note}\n", proc.stderr)
        self.assertEqual((self.tmp / "out" / "demo" / "__init__.py").read_text(), "VALUE = 3\n")
        proc = self.kiln("--json", "prepare", "demo", "-o", str(self.tmp / "out2"), check=0)
        self.assertEqual(json.loads(proc.stdout)["offsets"], [note])
        self.assertNotIn(note, self.kiln("build", "demo", check=0).stderr)
        shutil.rmtree(self.cache / "wheels")
        self.assertIn(f"kiln: {note}\n", self.kiln("-v", "build", "demo", check=0).stderr)


class PrepareCausalConv1dTest(KilnTestCase):
    """The real sdist and our patch set (the sdist is 30 KB, fetched once into the shared cache)."""

    def test_prepared_setup_py_is_fixed(self):
        cache = self.fresh_cache("c")
        out = self.tmp / "cc"
        self.kiln("--cache", str(cache), "prepare", "causal-conv1d==1.6.1", "-o", str(out), check=0)
        setup = (out / "setup.py").read_text()
        ast.parse(setup)
        self.assertNotIn('cc_flag.append("-gencode")', setup)
        self.assertNotIn("arch=compute_", setup)
        self.assertIn("bare_metal_version = None", setup)
        # A second prepare fetches nothing.
        import json
        again = json.loads(self.kiln("--cache", str(cache), "--json", "prepare", "causal-conv1d==1.6.1",
                                     "-o", str(self.tmp / "cc2"), check=0).stdout)
        self.assertEqual(again["fetches"], 0)
        self.check_builds_offline_without_cuda(out)

    def check_builds_offline_without_cuda(self, tree):
        """setup.py in a network namespace, without nvcc: no NameError, no download attempt."""
        if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
            self.skipTest("unshare -n is not permitted here")
        torch_python = Path.home() / ".cache/kiln/torch-venv/bin/python"
        if not torch_python.exists():
            self.skipTest("no torch environment (scripts/test creates ~/.cache/kiln/torch-venv)")
        env = {"PATH": f"{torch_python.parent}:/usr/bin:/bin", "HOME": str(self.tmp),
               "CAUSAL_CONV1D_FORCE_BUILD": "", "TORCH_CUDA_ARCH_LIST": "9.0"}
        # 1. No CUDA at all (the toolkit hidden under an empty mount): a clear error, not a NameError.
        cuda = os.path.realpath("/usr/local/cuda")
        hide = ["unshare", "-n", "-m", "sh", "-c", f'mount -t tmpfs tmpfs "{cuda}" && exec "$@"', "sh"]
        proc = subprocess.run([*hide, str(torch_python), "setup.py", "bdist_wheel"], cwd=tree,
                              env=env, capture_output=True, text=True, timeout=600)
        if "mount" in proc.stderr and "permission" in proc.stderr.lower():
            self.skipTest("cannot hide the CUDA toolkit in a mount namespace here")
        self.assertNotEqual(proc.returncode, 0)
        self.assertNotIn("NameError", proc.stderr)
        self.assertIn("no usable nvcc found", proc.stderr + proc.stdout)
        # 2. The wheel path itself, offline (Python part only): no download attempt.
        env["CAUSAL_CONV1D_SKIP_CUDA_BUILD"] = "TRUE"
        proc = subprocess.run(["unshare", "-n", str(torch_python), "-m", "pip", "wheel", "--no-build-isolation",
                               "--no-deps", "--no-index", "-w", str(self.tmp / "dist"), "."], cwd=tree, env=env,
                              capture_output=True, text=True, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertNotIn("Guessing wheel URL", proc.stdout + proc.stderr)
        self.assertEqual(len(list((self.tmp / "dist").glob("causal_conv1d-1.6.1-*.whl"))), 1)


if __name__ == "__main__":
    unittest.main()
