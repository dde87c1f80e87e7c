"""Hostile inputs that once got through (issue 16), each against the real binary: links in local
sources, line breaks in names, gc and foreign build roots, endless downloads, large package
files, leftover build roots, damaged archives, hashes of local files, huge lines, empty --archs,
one broken manifest among good ones. Every one must fail cleanly (a located reason, the right
exit code) and write nothing outside the work tree."""

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import unittest
import zipfile
import zlib
from pathlib import Path

from kilntest import KILN, SourceTestCase, sha256


def record_line(name, data):
    digest = __import__("base64").urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    quoted = f'"{name}"' if any(c in name for c in ',"\r\n') else name
    return f"{quoted},sha256={digest},{len(data)}\n"


def wheel_bytes(files):
    """A wheel of demo 1.0.0 holding `files` (name -> bytes), with a RECORD that lists each file
    exactly (names quoted as Python's csv module quotes them)."""
    info = "demo-1.0.0.dist-info"
    files = dict(files)
    files[f"{info}/METADATA"] = b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0.0\n"
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = "".join(record_line(n, d) for n, d in files.items()) + f"{info}/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr(f"{info}/RECORD", record)
    return buf.getvalue()



def wheel_differences(a, b):
    """The members of two wheels whose bytes (or presence) differ, by name."""
    with zipfile.ZipFile(a) as za, zipfile.ZipFile(b) as zb:
        ma = {i.filename: za.read(i) for i in za.infolist()}
        mb = {i.filename: zb.read(i) for i in zb.infolist()}
    return sorted(n for n in ma.keys() | mb.keys() if ma.get(n) != mb.get(n))

class HardeningTest(SourceTestCase):
    def source_root(self, package="demo", cache=None):
        """The build root kiln uses for `package` in `cache` (named after the package alone, so
        that an edited patch reuses unchanged objects): <cache>/build/<name>, which compilers see
        as /tmp/kiln-build/<name>."""
        key = {"build-root": package}
        digest = hashlib.sha256(json.dumps(key, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode())
        return Path(cache or self.cache) / "build" / digest.hexdigest()[:20]

    # -- 1. local directory sources whose links leave them -------------------------------------
    def test_local_source_links_outside_are_refused_and_internal_ones_kept(self):
        # A link whose target's path, taken relative to the source, lands in an existing directory
        # beside the build root's base: kiln once created a link there.
        landing = Path(tempfile.mkdtemp(prefix="kiln-landing-", dir="/tmp"))
        self.addCleanup(shutil.rmtree, landing, ignore_errors=True)
        src = self.tmp / "a" / "b" / "c"  # /tmp/kiln-e2e-*/a/b/c: as deep as a build root's tree
        (src / "demo").mkdir(parents=True)
        (src / "demo" / "__init__.py").write_text("VALUE = 1\n")
        (src / "docs").mkdir()
        (src / "docs" / "README.md").write_text("read me\n")
        os.symlink("docs/README.md", src / "README")  # inside: kept as a link
        os.symlink(landing / "planted", src / "innocent")
        self.demo_manifest(f'path = "{src}"')
        before = self.snapshot()
        proc = self.kiln("build", "demo")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertRegex(proc.stderr, r"kiln: error: local source .*: 'innocent' is a symlink to '.*planted', "
                                      r"which resolves outside the source directory")
        self.assertEqual(list(landing.iterdir()), [])
        self.assertEqual(self.snapshot(), before)
        self.assertFalse(self.source_root().exists())
        # Without the outside link the same tree builds, its internal link copied as a link.
        os.remove(src / "innocent")
        out = self.tmp / "prepared"
        self.kiln("prepare", "demo", "-o", str(out), check=0)
        self.assertTrue((out / "README").is_symlink())
        self.assertEqual(os.readlink(out / "README"), "docs/README.md")
        self.assertEqual((out / "README").read_text(), "read me\n")
        self.kiln("build", "demo", check=0)

    # -- 2. line breaks in names ------------------------------------------------------------
    def test_line_breaks_in_member_names_are_refused(self):
        for name in ("demo-1.0.0/demo/x\r/evil.py", "demo-1.0.0/demo/x\u2028y.py", "demo-1.0.0/demo/x\x0b.py"):
            with self.subTest(name=repr(name)):
                self.local_archive("demo-1.0.0.tar.gz", self.sdist([self.member("demo-1.0.0/demo/__init__.py"),
                                                                     self.member(name, b"x = 1\n")]))
                proc = self.kiln("build", "demo")
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn("has a control character", proc.stderr)
                self.assertFalse(any((self.cache / "wheels").glob("*/*.whl")))

    def test_validate_reads_record_as_pip_does(self):
        # A member whose name holds a line break, listed in RECORD exactly (quoted): pip splits
        # that row at the break and would remove a path the wheel never installed.
        path = self.tmp / "demo-1.0.0-py3-none-any.whl"
        path.write_bytes(wheel_bytes({"demo/__init__.py": b"", "demo/x\r/tmp/victim": b"x"}))
        proc = self.kiln("validate", str(path))
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn("control character", proc.stdout + proc.stderr)
        # A RECORD row that pip reads across a form feed (its fields run on): the path pip sees
        # is not in the wheel.
        files = {"demo/__init__.py": b"", "demo/a.py": b"y"}
        data = wheel_bytes(files)
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            record = z.read("demo-1.0.0.dist-info/RECORD").decode()
        record = record.replace("demo/a.py,", '"demo/a.py\x0c../../victim",', 1)
        buf = io.BytesIO()
        with zipfile.ZipFile(io.BytesIO(data)) as z, zipfile.ZipFile(buf, "w") as out:
            for item in z.infolist():
                out.writestr(item, record if item.filename.endswith("RECORD") else z.read(item))
        path.write_bytes(buf.getvalue())
        proc = self.kiln("validate", str(path))
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn("RECORD lists demo/a.py../../victim, which is not in the wheel", proc.stdout + proc.stderr)

    def test_validate_json_stays_json_with_a_name_that_is_not_utf8(self):
        # RECORD names a path whose bytes are not UTF-8: the report quotes it, and --json must
        # still print a JSON document (the bytes replaced), not die mid-way.
        data = wheel_bytes({"demo/__init__.py": b"", "demo/a.py": b"y"})
        buf = io.BytesIO()
        with zipfile.ZipFile(io.BytesIO(data)) as z, zipfile.ZipFile(buf, "w") as out:
            for item in z.infolist():
                body = z.read(item)
                if item.filename.endswith("RECORD"):
                    body = body.replace(b"demo/a.py,", b"demo/a\xff.py,", 1)
                out.writestr(item, body)
        path = self.tmp / "demo-1.0.0-py3-none-any.whl"
        path.write_bytes(buf.getvalue())
        proc = self.kiln("--json", "validate", str(path))
        self.assertEqual(proc.returncode, 1, proc.stderr)
        doc = json.loads(proc.stdout)
        archive = next(c for c in doc["wheels"][0]["checks"] if c["id"] == "archive")
        self.assertIn("fail: RECORD lists demo/a\ufffd.py, which is not in the wheel (installers would remove "
                      "that path on uninstall)", archive["details"])

    def test_validate_lib_dir_takes_one_directory(self):
        # --lib-dir DIR is one directory per flag: the wheels after it stay wheels.
        wheels = []
        for name in ("demo-1.0.0-py3-none-any.whl", "other/demo-1.0.0-py3-none-any.whl"):
            path = self.tmp / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(wheel_bytes({"demo/__init__.py": b""}))
            wheels.append(str(path))
        proc = self.kiln("--json", "validate", "--lib-dir", str(self.tmp), "--lib-dir", str(self.tmp), *wheels)
        # Their METADATA has no Requires-Python: kiln's rule, a warning on wheels kiln did not build.
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual([w["wheel"] for w in json.loads(proc.stdout)["wheels"]], wheels)

    def test_validate_refuses_a_wrong_typed_provenance_by_name(self):
        # kiln.json whose fields have other types than kiln writes: a failed check naming the
        # field, not a crash in the JSON library.
        info = "demo-1.0.0.dist-info"
        for provenance, field in (({"inputs": {"toolchain": {"python": "3.11"}}}, "inputs.toolchain.python"),
                                  ({"inputs": {"target": {"cuda": "13.0"}}}, "inputs.target.cuda"),
                                  ({"tools": {"torch": "2.11"}}, "tools.torch")):
            with self.subTest(field=field):
                path = self.tmp / "demo-1.0.0-py3-none-any.whl"
                path.write_bytes(wheel_bytes({"demo/__init__.py": b"",
                                              f"{info}/kiln.json": json.dumps(provenance).encode()}))
                proc = self.kiln("validate", str(path))
                self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
                self.assertIn(f"fail: kiln.json: {field} is a string, not an object", proc.stdout)
                self.assertNotIn("type_error", proc.stdout + proc.stderr)

    # -- 3. gc and build roots -------------------------------------------------------------------
    def test_gc_removes_only_its_own_build_roots(self):
        self.local_archive("demo-1.0.0.tar.gz", self.good_sdist())
        other = self.tmp / "other-cache"
        # A build killed while unpacking leaves its root; it belongs to the cache that made it.
        killed = self.kiln("--cache", str(other), "build", "demo", env={"KILN_FAULT": "unpack:1"})
        self.assertEqual(killed.returncode, -9, killed.stderr)
        root = self.source_root(cache=other)
        self.assertTrue(root.is_dir(), f"no build root in {other}")
        self.kiln("cache", "gc", check=0)  # another cache: not its root
        self.assertTrue(root.exists(), "gc of one cache removed another cache's build root")
        self.kiln("--cache", str(other), "cache", "gc", check=0)
        self.assertFalse(root.exists())

    def test_a_planted_tmp_kiln_build_is_never_used(self):
        # /tmp/kiln-build planted as a link to someone's directory: kiln neither builds there nor
        # lets gc follow it (it never looks at the real /tmp/kiln-build at all).
        self.local_archive("demo-1.0.0.tar.gz", self.good_sdist())
        out = self.in_private_tmp(f"""
mkdir -p /tmp/victim/projA /tmp/victim/.ssh
touch /tmp/victim/projA/work /tmp/victim/.ssh/id
ln -s /tmp/victim /tmp/kiln-build
cd {self.project}
KILN_FAULT=unpack:1 {KILN} --cache {self.cache} build demo >/dev/null 2>&1 || true
{KILN} --cache {self.cache} cache gc >/dev/null 2>&1
{KILN} --cache {self.cache} build demo >/dev/null
echo listing:
ls -A /tmp/victim
""")
        self.assertEqual(sorted(out.stdout.split("listing:")[-1].split()), [".ssh", "projA"])
        self.assertEqual(sorted(p.name for p in (self.cache / "wheels").glob("*/*.whl")), ["demo-1.0.0-py3-none-any.whl"])

    def test_a_build_at_the_caches_own_path_says_its_wheel_embeds_it(self):
        # /tmp with more entries than kiln binds back into its namespace: kiln builds at the cache's
        # own path, and the build's caveats (--json) and a warning say that the wheel embeds it.
        self.local_archive("demo-1.0.0.tar.gz", self.good_sdist())
        proc = self.in_private_tmp(f"""
mkdir /tmp/crowd && cd /tmp/crowd && seq 20001 | xargs touch && mv /tmp/crowd/* /tmp/
cd {self.project}
{KILN} --cache {self.cache} --json build demo
""")
        item = json.loads(proc.stdout)["items"][0]
        build = (self.cache / "build").resolve()
        self.assertEqual(len(item["caveats"]), 1, item)
        self.assertRegex(item["caveats"][0], rf"^built at {re.escape(str(build))}, not at /tmp/kiln-build \(/tmp "
                                             r"holds 2\d{4} entries, more than the 20000 kiln binds back\): the "
                                             r"wheel embeds that path$")
        self.assertIn("kiln: warning: demo-1.0.0-py3-none-any.whl may differ from the same build elsewhere: "
                      f"built at {build}", proc.stderr)
        # The entry keeps them: a hit on that wheel lists the same.
        hit = json.loads(self.kiln("--json", "build", "demo", check=0).stdout)["items"][0]
        self.assertTrue(hit["cache_hit"])
        self.assertEqual(hit["caveats"], item["caveats"])
        # Where kiln has its namespace, a build has no caveat.
        shutil.rmtree(self.cache / "wheels")
        item = json.loads(self.kiln("--json", "build", "demo", check=0).stdout)["items"][0]
        self.assertFalse(item["cache_hit"])
        self.assertEqual(item["caveats"], [])

    def test_a_cuda_build_outside_a_pid_namespace_says_so(self):
        # Unsandboxed (the sandbox gives every compile a PID namespace of its own), where `unshare
        # --pid` is refused, kiln-demo still builds, and says its objects may differ.
        refusing = self.tmp / "bin"
        refusing.mkdir()
        (refusing / "unshare").write_text("#!/bin/sh\nexit 1\n")
        (refusing / "unshare").chmod(0o755)
        proc = self.kiln("--cache", str(self.fresh_cache("pid")), "--json", "build", "kiln-demo", "--sandbox",
                         "off", check=0, timeout=3000, env={"PATH": f"{refusing}:{os.environ['PATH']}"})
        caveat = ("nvcc ran outside a PID namespace (unshare --pid is not permitted here): objects whose code "
                  "has anonymous namespaces differ between builds")
        self.assertEqual(json.loads(proc.stdout)["items"][0]["caveats"],
                         ["not sandboxed: KILN_SANDBOX=off", caveat])
        self.assertIn(f"kiln: warning: {caveat}\n", proc.stderr)
        self.assertRegex(proc.stderr, r"kiln: warning: kiln_demo-\S+\.whl may differ from the same build "
                                      r"elsewhere: not sandboxed: KILN_SANDBOX=off; nvcc ran outside a PID namespace")

    def test_an_unprivileged_user_builds_the_same_bytes(self):
        # kiln-demo built by root, then by nobody (in a user namespace of kiln's own): the same
        # wheel, bit for bit. nobody reaches the shared torch downloads and sysroot through bind
        # mounts (the home they live in is private).
        if subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "unshare", "--user",
                           "--map-root-user", "--mount", "true"], capture_output=True).returncode != 0:
            self.skipTest("unprivileged user namespaces are not allowed here")
        # One interpreter both can run (root's python3 may live in its private home).
        target = self.project / "manifests" / "targets" / "system-python.toml"
        target.write_text((self.project / "manifests" / "targets" / "default.toml").read_text()
                          .replace('interpreter = "python3"', 'interpreter = "/usr/bin/python3"'))
        root_cache = self.fresh_cache("root-cache")
        root_build = self.kiln("--cache", str(root_cache), "--json", "build", "kiln-demo", "--target",
                               "system-python", check=0, timeout=3000)
        mine = json.loads(root_build.stdout)["items"][0]
        theirs = self.tmp / "nobody"
        (theirs / "cache").mkdir(parents=True)
        shutil.copytree(self.project, theirs / "project", symlinks=True)
        binds = ""
        for part in ("downloads", "sysroots", "toolkits"):
            (theirs / "cache" / part).mkdir()
            binds += f"mount --bind {(root_cache / part).resolve()} {theirs / 'cache' / part}\n"
        subprocess.run(["chown", "-R", "65534:65534", str(theirs)], check=True)
        os.chmod(self.tmp, 0o755)
        nobody_build = self.in_private_tmp(f"""{binds}
cd {theirs / 'project'}
setpriv --reuid=65534 --regid=65534 --clear-groups env HOME={theirs} {KILN} --cache {theirs / 'cache'} --json build kiln-demo --target system-python --offline
""")
        item = json.loads(nobody_build.stdout)["items"][0]
        self.assertFalse(item["cache_hit"])
        self.assertEqual(mine["caveats"], [], root_build.stderr)  # at /tmp/kiln-build, nvcc in a PID namespace
        self.assertEqual(item["caveats"], [], nobody_build.stderr)
        self.assertEqual(item["sha256"], mine["sha256"],
                         f"members that differ: {wheel_differences(mine['wheel'], item['wheel'])}\n"
                         f"root's build:\n{root_build.stderr}\nnobody's build:\n{nobody_build.stderr}")
        self.assertEqual(Path(item["wheel"]).name, Path(mine["wheel"]).name)

    # -- 6. downloads ---------------------------------------------------------------------------
    def test_endless_download_stops_at_the_limit(self):
        url = self.server()
        self.demo_manifest(f'url = "{url}/endless/demo-1.0.0.tar.gz"\nsha256 = "{"3" * 64}"')
        self.assert_fails_cleanly("fetch", "demo", code=1,
                                  message=r"kiln: error: cannot download demo-1\.0\.0\.tar\.gz from .*: "
                                          r"it is larger than the download limit of 1048576 bytes",
                                  env={"KILN_MAX_DOWNLOAD": "1M"})
        self.assertEqual(list(self.cache.rglob("*.part")), [])
        # A size in the manifest bounds it the same way, with its own words.
        self.demo_manifest(f'url = "{url}/endless/demo-1.0.0.tar.gz"\nsha256 = "{"3" * 64}"\nsize = 4096')
        self.assert_fails_cleanly("fetch", "demo", code=1, message=r"larger than its stated size of 4096 bytes")

    # -- 7. large package files -------------------------------------------------------------------
    def peak_rss_mib(self, member_mib):
        data = io.BytesIO()
        with tarfile.open(fileobj=data, mode="w:gz", compresslevel=1) as t:
            for name, payload in (("demo-1.0.0/demo/__init__.py", b"VALUE = 1\n"),):
                info = tarfile.TarInfo(name)
                info.size = len(payload)
                t.addfile(info, io.BytesIO(payload))
            info = tarfile.TarInfo("demo-1.0.0/demo/big.bin")
            info.size = member_mib << 20
            t.addfile(info, io.BytesIO(bytes(info.size)))
        self.local_archive("demo-1.0.0.tar.gz", data.getvalue())
        shutil.rmtree(self.cache, ignore_errors=True)
        script = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
                  "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
                  "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
        env = dict(os.environ, KILN_CACHE=str(self.cache))
        # ASan's quarantine would keep freed blocks resident; a release build has none.
        env["ASAN_OPTIONS"] = "quarantine_size_mb=1:" + env.get("ASAN_OPTIONS", "")
        out = subprocess.run([sys.executable, "-c", script, KILN, "build", "demo"], cwd=self.project, env=env,
                             capture_output=True, text=True, timeout=1200)
        self.assertEqual(out.returncode, 0, out.stderr)
        return int(out.stdout) / 1024

    def test_pure_backend_streams_package_files(self):
        small, large = self.peak_rss_mib(64), self.peak_rss_mib(512)
        print(f"\nkiln build peak RSS: {small:.0f} MiB with a 64 MiB member, {large:.0f} MiB with 512 MiB",
              file=sys.stderr)
        self.assertLess(large - small, 64)

    # -- 8. build roots of failed builds ------------------------------------------------------------
    def test_failed_builds_leave_no_build_root(self):
        cases = {
            "unpack": self.sdist([self.member("demo-1.0.0/demo/__init__.py"), self.member("demo-1.0.0/../evil")]),
            "missing package": self.sdist([self.member("demo-1.0.0/other/__init__.py")]),
        }
        for what, data in cases.items():
            with self.subTest(what=what):
                self.local_archive("demo-1.0.0.tar.gz", data)
                root = self.source_root()
                proc = self.kiln("build", "demo")
                self.assertNotEqual(proc.returncode, 0, proc.stderr)
                self.assertFalse(root.exists(), f"{what}: {root} left behind")
        # A patch that does not apply.
        self.local_archive("demo-1.0.0.tar.gz", self.good_sdist())
        pdir = self.project / "patches" / "demo" / "1.0.0"
        pdir.mkdir(parents=True)
        (pdir / "0001.patch").write_text("--- a/demo/__init__.py\n+++ b/demo/__init__.py\n@@ -1 +1 @@\n-NOPE\n+X\n")
        text = (self.project / "manifests" / "demo" / "1.0.0.toml").read_text()
        (self.project / "manifests" / "demo" / "1.0.0.toml").write_text(
            text.replace("[build]", '[patches]\nseries = ["0001.patch"]\n\n[build]'))
        root = self.source_root()
        proc = self.kiln("build", "demo")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertFalse(root.exists())
        # Kept when asked.
        proc = self.kiln("build", "demo", "--keep-build-root")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn(f"kept the build root {root}", proc.stderr)
        self.assertTrue(root.exists())
        self.kiln("cache", "gc", check=0)
        self.assertFalse(root.exists())

    # -- 9. smaller ones ---------------------------------------------------------------------------
    def test_damaged_archives_are_refused(self):
        files = [("demo-1.0.0/demo/__init__.py", b"VALUE = 1\n" * 200)]
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w") as t:
            for name, data in files:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
        tar = raw.getvalue()
        good_gz = gzip.compress(tar)
        bad_crc = good_gz[:-8] + struct.pack("<I", zlib.crc32(tar) ^ 1) + good_gz[-4:]
        zbuf = io.BytesIO()
        with zipfile.ZipFile(zbuf, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("demo-1.0.0/demo/__init__.py", b"VALUE = 1\n" * 200)
        good_zip = zbuf.getvalue()
        crc = struct.pack("<I", zlib.crc32(b"VALUE = 1\n" * 200))
        zip_bad_crc = good_zip.replace(crc, struct.pack("<I", zlib.crc32(b"VALUE = 1\n" * 200) ^ 16))
        # The central directory names the member differently from its local header (same length).
        renamed = good_zip.replace(b"demo/__init__.py", b"demo/__evil__.py", 1)
        # Two central directory entries for one local member: overlapping entries.
        overlap = io.BytesIO()
        with zipfile.ZipFile(overlap, "w", zipfile.ZIP_STORED) as z:
            z.writestr("demo-1.0.0/demo/__init__.py", b"VALUE = 1\n")
            z.writestr("demo-1.0.0/demo/__init__.pz", b"VALUE = 2\n")
        data = bytearray(overlap.getvalue())
        cd = data.rfind(b"PK\x01\x02")  # the second central entry: point it at the first member
        data[cd + 42:cd + 46] = struct.pack("<I", 0)
        cases = [("gzip trailer CRC", "demo-1.0.0.tar.gz", bad_crc, r"corrupt gzip data"),
                 ("zip member CRC", "demo-1.0.0.zip", zip_bad_crc, r"CRC"),
                 ("zip names disagree", "demo-1.0.0.zip", renamed, r"local header"),
                 ("zip entries overlap", "demo-1.0.0.zip", bytes(data), r"overlap|local header|unaccounted")]
        for n, (what, name, archive, message) in enumerate(cases):
            with self.subTest(what=what):
                self.local_archive(name, archive)
                out = self.tmp / f"out-{n}"
                self.assert_fails_cleanly("prepare", "demo", "-o", str(out), code=2,
                                          message=rf"kiln: error: .*({message})")
                self.assertFalse(out.exists())

    def test_a_local_file_hash_is_never_shown(self):
        secret = self.tmp / "secret.txt"
        secret.write_text("hunter2\n")
        self.demo_manifest(f'url = "file://{secret}"\nsha256 = "{"4" * 64}"')
        proc = self.kiln("fetch", "demo")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("sha256 mismatch", proc.stderr)
        self.assertNotIn(sha256(secret.read_bytes()), proc.stderr + proc.stdout)

    def test_an_error_on_a_huge_line_is_cut_to_a_sane_width(self):
        d = self.project / "manifests" / "demo"
        d.mkdir(parents=True)
        (d / "1.0.0.toml").write_text("[package]\nname = \"demo\"\nversion = \"1.0.0\"\nsummary = \"" +
                                      "x" * (10 << 20) + "\" bogus\n")
        proc = self.kiln("resolve", "demo")
        self.assertEqual(proc.returncode, 2, proc.stderr[:500])
        self.assertIn("manifests/demo/1.0.0.toml:4:", proc.stderr)
        self.assertLess(len(proc.stderr), 4096)

    def test_an_empty_archs_option_is_an_error(self):
        for args in (["resolve", "kiln-demo"], ["build", "no-such-package"]):
            with self.subTest(args=args):
                proc = self.kiln(*args, "--archs", "")
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn("kiln: error: --archs: an empty arch list", proc.stderr)

    def test_a_broken_manifest_fails_only_what_needs_it(self):
        d = self.project / "manifests" / "broken"
        d.mkdir(parents=True)
        (d / "1.0.0.toml").write_text('[package]\nname = "broken"\nversion = 1\n')
        proc = self.kiln("--json", "resolve", "kiln-demo")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("warning: ignored a broken manifest: manifests/broken/1.0.0.toml:3:", proc.stderr)
        self.assertEqual(json.loads(proc.stdout)["items"][0]["package"], "kiln-demo")
        proc = self.kiln("resolve", "broken")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertRegex(proc.stderr, r"^kiln: error: manifests/broken/1\.0\.0\.toml:3:\d+: ")
        self.assertNotIn("warning", proc.stderr)  # the error says it once
        self.assertEqual(self.kiln("resolve").returncode, 2)  # every package: it is one of them


if __name__ == "__main__":
    unittest.main()
