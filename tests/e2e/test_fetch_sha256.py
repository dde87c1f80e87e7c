"""kiln fetch --print-sha256 SOURCE...: the sha256 of a source nobody has pinned yet, from a local
simple index (pypi:NAME==VERSION), a URL or a file; fetched into the download cache, printed as
sha256sum prints it, with the [source] lines of a manifest on stderr. Hostile index pages are
refused, and nothing is written outside the cache."""

import json
import shutil
import subprocess
import sys
import time

from kilntest import SERVER, SourceTestCase, sha256


class PrintSha256Test(SourceTestCase):
    def setUp(self):
        super().setUp()
        self.log = self.served / "requests.log"  # (the served tree is not "outside the cache")
        port_file = self.tmp / "port"
        proc = subprocess.Popen([sys.executable, str(SERVER), "--root", str(self.served),
                                 "--port-file", str(port_file), "--log", str(self.log)])
        self.addCleanup(proc.wait)
        self.addCleanup(proc.terminate)
        for _ in range(100):
            if port_file.exists() and port_file.read_text().strip():
                break
            time.sleep(0.05)
        else:
            self.fail("test server did not start")
        self.url = f"http://127.0.0.1:{port_file.read_text().strip()}"
        self.index = f"{self.url}/simple/"
        self.sdist_bytes = self.good_sdist()
        (self.served / "files").mkdir()
        (self.served / "files" / "demo-1.0.0.tar.gz").write_bytes(self.sdist_bytes)

    # -- helpers -----------------------------------------------------------------------------
    def page(self, html=None, files=None, project="demo"):
        d = self.served / "simple" / project
        d.mkdir(parents=True, exist_ok=True)
        for name in ("index.html", "index.json"):
            (d / name).unlink(missing_ok=True)
        if html is not None:
            (d / "index.html").write_text(html)
        else:
            (d / "index.json").write_text(json.dumps({"meta": {"api-version": "1.0"}, "name": project,
                                                      "files": files}))

    def requests(self, path):
        if not self.log.exists():
            return 0
        return sum(json.loads(line)["path"] == path for line in self.log.read_text().splitlines())

    def cached(self, digest, name):
        return self.cache / "downloads" / digest[:2] / digest / name

    def source_lines(self, stderr):
        """The [source] table kiln printed on stderr, without its header."""
        keys = ("pypi", "file", "url", "path", "sha256", "size")
        return "\n".join(l for l in stderr.splitlines() if l.split(" = ")[0] in keys)

    # -- pypi:NAME==VERSION -------------------------------------------------------------------
    def test_pypi_release_from_local_index(self):
        digest = sha256(self.sdist_bytes)
        old = self.sdist([self.member("demo-0.9.0/setup.py", b"old\n")])
        (self.served / "files" / "demo-0.9.0.tar.gz").write_bytes(old)
        self.page(html=f'<a href="../../files/demo-0.9.0.tar.gz#sha256={sha256(old)}">demo-0.9.0.tar.gz</a>\n'
                       f'<a href="../../files/demo-1.0.0-py3-none-any.whl">demo-1.0.0-py3-none-any.whl</a>\n'
                       f'<a href="../../files/demo-1.0.0.tar.gz#sha256={digest}">demo-1.0.0.tar.gz</a>\n')
        proc = self.kiln("fetch", "--print-sha256", "pypi:Demo==1.0", "--index-url", self.index, check=0)
        self.assertEqual(proc.stdout, f"{digest}  demo-1.0.0.tar.gz\n")
        self.assertEqual(self.cached(digest, "demo-1.0.0.tar.gz").read_bytes(), self.sdist_bytes)
        self.assertEqual(self.source_lines(proc.stderr),
                         f'pypi = "Demo"\nfile = "demo-1.0.0.tar.gz"\nsha256 = "{digest}"')
        self.assertIn("# pypi:Demo==1.0\n[source]\n", proc.stderr)
        self.assertEqual(self.requests("/files/demo-1.0.0.tar.gz"), 1)

        again = self.kiln("--json", "fetch", "--print-sha256", "pypi:demo==1.0.0", "--index-url", self.index,
                          check=0)
        self.assertEqual(self.requests("/files/demo-1.0.0.tar.gz"), 1, "the second run downloaded it")
        self.assertNotIn("downloading", again.stderr)
        self.assertEqual(json.loads(again.stdout), [{
            "source": "pypi:demo==1.0.0", "file": "demo-1.0.0.tar.gz", "sha256": digest,
            "size": len(self.sdist_bytes), "url": f"{self.url}/files/demo-1.0.0.tar.gz",
            "path": str(self.cached(digest, "demo-1.0.0.tar.gz"))}])
        self.assertEqual(list(self.outside.iterdir()), [])

        # What it printed is a [source] a manifest can use: the build's fetch finds the file cached.
        self.demo_manifest(self.source_lines(proc.stderr))
        got = json.loads(self.kiln("--json", "fetch", "demo", "--offline", check=0).stdout)
        self.assertEqual(got["items"][0]["path"], str(self.cached(digest, "demo-1.0.0.tar.gz")))

    def test_pypi_index_without_hashes(self):
        # A PEP 691 page that states no sha256: kiln hashes what it downloaded (bounded by the size).
        self.page(files=[{"filename": "demo-1.0.0.tar.gz", "url": "../../files/demo-1.0.0.tar.gz",
                          "hashes": {}, "size": len(self.sdist_bytes)}])
        out = json.loads(self.kiln("--json", "fetch", "--print-sha256", "pypi:demo==1.0.0", "--index-url",
                                   self.index, check=0).stdout)
        digest = sha256(self.sdist_bytes)
        self.assertEqual((out[0]["sha256"], out[0]["size"]), (digest, len(self.sdist_bytes)))
        self.assertEqual(self.cached(digest, "demo-1.0.0.tar.gz").read_bytes(), self.sdist_bytes)
        self.assertEqual(list((self.cache / "tmp").glob("*")), [], "staging left behind")

        # A stated size smaller than the file: the download stops there and nothing is kept.
        self.page(files=[{"filename": "demo-1.0.0.tar.gz", "url": "../../files/demo-1.0.0.tar.gz",
                          "hashes": {}, "size": 10}])
        shutil.rmtree(self.cache)
        self.assert_fails_cleanly("fetch", "--print-sha256", "pypi:demo==1.0.0", "--index-url", self.index,
                                  code=1, message=r"kiln: error: cannot download demo-1\.0\.0\.tar\.gz .*larger than its stated size of 10 bytes")

    def test_missing_release(self):
        self.page(html='<a href="../../files/demo-1.0.0.tar.gz">demo-1.0.0.tar.gz</a>\n'
                       '<a href="../../files/demo-2.0.0-py3-none-any.whl">demo-2.0.0-py3-none-any.whl</a>\n')
        self.assert_fails_cleanly("fetch", "--print-sha256", "pypi:demo==3.0", "--index-url", self.index, code=1,
                                  message=r"kiln: error: no sdist of demo==3\.0 on http://127\.0\.0\.1:\d+/simple/; "
                                          r"it has sdists of 1\.0\.0$")
        self.assert_fails_cleanly("fetch", "--print-sha256", "pypi:demo==2.0.0", "--index-url", self.index, code=1,
                                  message=r"kiln: error: no sdist of demo==2\.0\.0 .*that release has only "
                                          r"demo-2\.0\.0-py3-none-any\.whl")
        self.assert_fails_cleanly("fetch", "--print-sha256", "pypi:nothere==1.0", "--index-url", self.index,
                                  code=1, message=r"kiln: error: project 'nothere' is not on the index")

    def test_several_sdists(self):
        (self.served / "files" / "demo-1.0.0.zip").write_bytes(b"PK")
        self.page(html='<a href="../../files/demo-1.0.0.tar.gz">demo-1.0.0.tar.gz</a>\n'
                       '<a href="../../files/demo-1.0.0.zip">demo-1.0.0.zip</a>\n')
        self.assert_fails_cleanly("fetch", "--print-sha256", "pypi:demo==1.0.0", "--index-url", self.index, code=1,
                                  message=r"kiln: error: demo==1\.0\.0 has 2 sdists on .*: demo-1\.0\.0\.tar\.gz, "
                                          r"demo-1\.0\.0\.zip; give the one to pin by its URL")

    def test_hostile_index_links(self):
        (self.tmp / "private").mkdir()
        secret = self.tmp / "private" / "demo-1.0.0.tar.gz"
        secret.write_bytes(self.sdist_bytes)
        # A link to a local file: left out (a page is a stranger's), and said so.
        self.page(html=f'<a href="file://{secret}#sha256={sha256(self.sdist_bytes)}">demo-1.0.0.tar.gz</a>\n')
        proc = self.assert_fails_cleanly("fetch", "--print-sha256", "pypi:demo==1.0.0", "--index-url", self.index,
                                         code=1, message=r"kiln: error: no sdist of demo==1\.0\.0 .*lists no sdist")
        self.assertRegex(proc.stderr, r"left out 1 link that is not http\(s\) \(file://")
        # A file name that is a path: refused by name, never written anywhere.
        for name in ("../demo-1.0.0.tar.gz", "x/../../demo-1.0.0.tar.gz", ".."):
            self.page(files=[{"filename": name, "url": "../../files/demo-1.0.0.tar.gz", "hashes": {}}])
            proc = self.assert_fails_cleanly("fetch", "--print-sha256", "pypi:demo==1.0.0", "--index-url",
                                             self.index, code=1,
                                             message=r"kiln: error: no sdist of demo==1\.0\.0 .*not a plain file name")
            self.assertIn("warning:", proc.stderr)
        self.assertEqual(self.requests("/files/demo-1.0.0.tar.gz"), 0)

    # -- URLs and files ------------------------------------------------------------------------
    def test_url(self):
        digest = sha256(self.sdist_bytes)
        url = f"{self.url}/files/demo-1.0.0.tar.gz"
        proc = self.kiln("fetch", "--print-sha256", url, check=0)
        self.assertEqual(proc.stdout, f"{digest}  demo-1.0.0.tar.gz\n")
        self.assertEqual(self.source_lines(proc.stderr),
                         f'url = "{url}"\nsha256 = "{digest}"\nsize = {len(self.sdist_bytes)}')
        self.assertEqual(self.cached(digest, "demo-1.0.0.tar.gz").read_bytes(), self.sdist_bytes)
        self.demo_manifest(self.source_lines(proc.stderr))
        got = json.loads(self.kiln("--json", "fetch", "demo", "--offline", check=0).stdout)
        self.assertEqual(got["items"][0]["path"], str(self.cached(digest, "demo-1.0.0.tar.gz")))

        # A 404 is an error that names it, and leaves nothing behind.
        shutil.rmtree(self.cache)
        self.assert_fails_cleanly("fetch", "--print-sha256", f"{self.url}/files/nothere.tar.gz", code=1,
                                  message=r"kiln: error: cannot download nothere\.tar\.gz .*HTTP 404")

    def test_local_file_and_file_url(self):
        path = self.tmp / "mine-2.0.tar.gz"
        path.write_bytes(b"local bytes")
        digest = sha256(b"local bytes")
        out = json.loads(self.kiln("--json", "fetch", "--print-sha256", str(path), f"file://{path}",
                                   check=0).stdout)
        self.assertEqual([(o["sha256"], o["file"], o["url"]) for o in out],
                         [(digest, "mine-2.0.tar.gz", None), (digest, "mine-2.0.tar.gz", f"file://{path}")])
        self.assertEqual(self.cached(digest, "mine-2.0.tar.gz").read_bytes(), b"local bytes")
        proc = self.kiln("fetch", "--print-sha256", str(self.tmp), check=1)
        self.assertRegex(proc.stderr, r"kiln: error: cannot read .*: not a file")

    # -- usage ---------------------------------------------------------------------------------
    def test_usage_errors(self):
        either = r"(--print-sha256 excludes {0}|{0} excludes --print-sha256)"
        for args, message in [
            (["--print-sha256", "pypi:demo==1.0.0", "--offline"], either.format("--offline")),
            (["demo", "--print-sha256", "pypi:demo==1.0.0"], either.format("packages")),
            (["--print-sha256", "pypi:demo==1.0.0", "--target", "default"], either.format("--target")),
            (["--print-sha256", "pypi:demo==1.0.0", "demo"], r"SOURCE 'demo' names no file .*package names"),
            (["--print-sha256", "pypi:demo>=1.0"], r"SOURCE 'pypi:demo>=1\.0': expected pypi:NAME==VERSION"),
            (["--print-sha256", "pypi:demo==1.*"], r"SOURCE 'pypi:demo==1\.\*': expected pypi:NAME==VERSION"),
            (["--print-sha256", "ftp://example.com/x.tar.gz"], r"SOURCE 'ftp://example\.com/x\.tar\.gz': expected"),
            (["--print-sha256", "file://host/x.tar.gz"], r"SOURCE 'file://host/x\.tar\.gz': only local file://"),
            (["--print-sha256"], r"--print-sha256"),
            ([], r"fetch needs package names, or --print-sha256"),
        ]:
            with self.subTest(args=args):
                self.assert_fails_cleanly("fetch", *args, code=2, message=rf"kiln: error: {message}")
        self.assertEqual(self.requests("/simple/demo/"), 0)


if __name__ == "__main__":
    import unittest
    unittest.main()
