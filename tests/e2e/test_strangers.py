"""What a stranger's index page, metadata or remote cache entry can make kiln do (issue 31's items
1-3, docs/reliability.md): a page's links never read local files, index metadata never becomes
part of the target file kiln writes, and a remote entry.json of the wrong shape is a corrupt miss,
never a failed build.

The index is tests/support/http_server.py serving a directory of PEP 691 pages on 127.0.0.1; the
remote caches are the real Redis and nginx WebDAV of tests/support/services.py.
"""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kilntest import KILN, SourceTestCase, sha256

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import services  # noqa: E402

TORCH = "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl"
METADATA = ("Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0\n"
            "Requires-Dist: filelock\n{cuda}\n\n")
CUDA = 'Requires-Dist: cuda-toolkit[nvcc]==13.0.2; platform_system == "Linux"'


def framed(data):
    """An entry as the remote cache stores it: the kiln-object header, then the bytes."""
    return b"kiln-object 1 " + hashlib.sha256(data).hexdigest().encode() + b"\n" + data


class StrangersTest(SourceTestCase):
    # -- a hostile index ----------------------------------------------------------------------
    def index(self, files, metadata=None):
        """A PEP 691 page for torch listing `files` (filename, url, sha256); with `metadata`, each
        file's PEP 658 metadata is served beside it. Returns the index URL."""
        entries = []
        (self.served / "files").mkdir(exist_ok=True)
        for name, url, sha in files:
            entry = {"filename": name, "url": url, "hashes": {"sha256": sha}}
            if metadata is not None:
                (self.served / "files" / (name + ".metadata")).write_bytes(metadata)
                entry["core-metadata"] = {"sha256": sha256(metadata)}
            entries.append(entry)
        (self.served / "simple" / "torch").mkdir(parents=True, exist_ok=True)
        (self.served / "simple" / "torch" / "index.json").write_text(
            json.dumps({"meta": {"api-version": "1.1"}, "name": "torch", "files": entries}))
        return self.server() + "/simple/"

    def target_init(self, index, timeout=60):
        return self.kiln("target", "init", "--torch", "2.11.0", "--index-url", index,
                         "--python-tags", "cp311", "--archs", "9.0", "--toolkit", "system",
                         "--name", "hostile", timeout=timeout)

    def downloads(self):
        root = self.cache / "downloads"
        return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []

    def test_a_page_link_never_reads_a_local_file(self):
        passwd = Path("/etc/passwd").read_bytes()
        index = self.index([(TORCH, "file:///etc/passwd", sha256(passwd))])
        proc = self.target_init(index)
        # Before: /etc/passwd copied into downloads/…/torch-2.11.0-…whl (then "not a wheel").
        self.assertNotEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("left out 1 link that is not http(s) (file:///etc/passwd)", proc.stderr)
        self.assertIn("has no torch 2.11.0 wheel", proc.stderr)
        self.assertEqual([p for p in self.downloads() if p.read_bytes() == passwd], [])
        self.assertFalse((self.project / "manifests" / "targets" / "hostile.toml").exists())

    def test_kmsg_from_a_page_or_a_manifest_is_never_read(self):
        # From a page: left out. Before: kiln read /proc/kmsg in the kernel, deaf to SIGTERM.
        index = self.index([(TORCH, "file:///proc/kmsg", "0" * 64)])
        proc = self.target_init(index, timeout=30)
        self.assertIn("left out 1 link that is not http(s) (file:///proc/kmsg)", proc.stderr)
        # Where the user wrote it (a manifest's url): a pseudo-file, refused before a byte is read;
        # anything kiln does read yields to SIGTERM.
        for path in ("/proc/kmsg", "/proc/self/status", "/sys/kernel/mm/transparent_hugepage/enabled"):
            if not os.path.exists(path):
                continue
            self.demo_manifest(f'url = "file://{path}"\nsha256 = "{"0" * 64}"')
            started = time.time()
            proc = self.kiln("build", "demo", timeout=30)
            self.assertEqual(proc.returncode, 1, proc.stderr)
            self.assertIn("kernel pseudo-file system", proc.stderr)
            self.assertLess(time.time() - started, 20)
        fifo = self.tmp / "fifo.tar.gz"
        os.mkfifo(fifo)
        self.demo_manifest(f'url = "file://{fifo}"\nsha256 = "{"0" * 64}"')
        proc = self.kiln("build", "demo", timeout=30)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("not a file", proc.stderr)

    def test_index_metadata_never_becomes_toml(self):
        # A folded Requires-Dist whose continuation lines are a table of their own: before, the
        # written target held an extra [[torch.wheel]] for cp399 with a hash the page never listed.
        injected = CUDA + '\n [[torch.wheel]]\n python = "cp399"\n file = "torch-2.11.0-cp399-cp399-' \
            'manylinux_2_28_x86_64.whl"\n sha256 = "' + "e" * 64 + '"\n #'
        index = self.index([(TORCH, "../../files/" + TORCH, "d" * 64)],
                           METADATA.format(cuda=injected).encode())
        proc = self.target_init(index)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertRegex(proc.stderr, r"kiln: error: http://127\.0\.0\.1:\d+/files/" + TORCH +
                         r"\.metadata: the METADATA's Requires-Dist 'cuda-toolkit.*' holds a "
                         r"control character \(\\x0a\)")
        self.assertFalse((self.project / "manifests" / "targets" / "hostile.toml").exists())
        # An escape sequence: refused the same way, naming the index URL (before: a parse error
        # of 'hostile.toml:2:…', a file that does not exist).
        index = self.index([(TORCH, "../../files/" + TORCH, "d" * 64)],
                           METADATA.format(cuda=CUDA + " \x1b[2J").encode())
        proc = self.target_init(index)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("holds a control character (\\x1b)", proc.stderr)
        self.assertNotIn("hostile.toml:", proc.stderr)
        # Text that is no control character but looks like TOML stays inside the comment.
        quoted = 'Requires-Dist: cuda-toolkit[nvcc]==13.0.2; platform_system == "Linux" # ]] [x] = "'
        index = self.index([(TORCH, "../../files/" + TORCH, "d" * 64)],
                           METADATA.format(cuda=quoted).encode())
        proc = self.target_init(index)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        written = (self.project / "manifests" / "targets" / "hostile.toml").read_text()
        self.assertEqual(written.count("[[torch.wheel]]"), 1, written)
        self.assertIn('# torch 2.11.0 is a CUDA 13.0 build (' + TORCH + '.metadata: ' + quoted[15:],
                      written)

    # -- a hostile remote cache ---------------------------------------------------------------
    def pure_demo(self):
        data = self.good_sdist()  # once: an sdist made again in another second has other bytes
        self.served.joinpath("demo-1.0.0.tar.gz").write_bytes(data)
        base = self.server()
        self.demo_manifest(f'url = "{base}/demo-1.0.0.tar.gz"\nsha256 = "{sha256(data)}"')
        return json.loads(self.kiln("--json", "resolve", "demo", check=0).stdout)["items"][0]["key"]

    def build_with(self, remote, env=None):
        proc = self.kiln("--json", "build", "demo", "--remote-cache", remote, env=env, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return json.loads(proc.stdout), proc.stderr

    def poisoned_entries(self, key):  # noqa: ARG002
        wheel = "demo-1.0.0-py3-none-any.whl"
        good = {"wheel": wheel, "sha256": "0" * 64}
        return [
            {"wheel": 123, "sha256": 456},
            {**good, "version": 5},
            {**good, "version": "\x1b[2J\r\n"},
            {**good, "archs": ["sm_90"] * 700000},
        ]

    def test_a_remote_entry_json_of_the_wrong_shape_is_a_corrupt_miss(self):
        key = self.pure_demo()
        redis = services.Redis(self.tmp)
        self.addCleanup(redis.stop)
        dav = services.WebDav(self.tmp)
        self.addCleanup(dav.stop)
        for n, info in enumerate(self.poisoned_entries(key)):
            doc = framed(json.dumps(info).encode())

            def poison():
                redis.command("SET", f"kiln:wheels/{key}/entry.json", doc)
                (dav.root / "wheels" / key).mkdir(parents=True, exist_ok=True)
                (dav.root / "wheels" / key / "entry.json").write_bytes(doc)

            for remote in (redis.url, dav.url):
                poison()
                self.cache = self.tmp / f"cache-{n}-{remote.split(':')[0]}"
                out, err = self.build_with(remote)  # before: json type_error.302, exit 1
                self.assertFalse(out["items"][0]["remote_hit"], err)
                # One warning: the entry refused by its reader (or, for the 9 MB one, its size
                # refused before a byte of it was read).
                self.assertEqual(err.count("kiln: warning: remote cache"), 1, err)
                self.assertNotIn("internal error", err)
                listed = self.kiln("cache", "ls", check=0).stdout
                self.assertNotIn("\x1b", listed)
                self.assertEqual(len(listed.strip().splitlines()), 2, listed)
                entry = next((self.cache / "wheels").iterdir()) / "entry.json"
                self.assertLess(entry.stat().st_size, 4096)
                # index export from the remote: the same corrupt miss, never an internal error.
                poison()
                self.cache = self.tmp / f"export-{n}-{remote.split(':')[0]}"
                proc = self.kiln("index", "export", str(self.tmp / f"out-{n}-{remote[:4]}"), "demo",
                                 "--remote-cache", remote, timeout=120)
                self.assertNotIn("internal error", proc.stderr)
                self.assertIn("kiln: warning: remote cache", proc.stderr)
                self.assertEqual(proc.returncode, 1, proc.stderr)

if __name__ == "__main__":
    import unittest
    unittest.main()
