"""Anyone holding a kiln wheel can check it (issue 53): `kiln rebuild --check WHEEL` rebuilds it from
its kiln.json alone (the manifest, patches, target and shard counts it records) and compares the
bytes. kiln-demo from a tar.gz this test serves, with one patch, is built by root in one cache and
rebuilt by nobody at another path, with a fresh cache and an empty manifests directory: the same
bytes. One byte of its .so changed (RECORD rewritten to match) fails, naming the member and the ELF
section. A wheel built from a local tree with the system CUDA toolkit is refused without --force
--source, and a host whose nvcc gives another version text is refused naming that input."""

import base64
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import unittest
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

from kilntest import KILN, SHARED_CACHE, SOURCE_DIR, SourceTestCase, sha256

DEMO = SOURCE_DIR / "kernels" / "kiln-demo"

README_PATCH = """--- a/README.md
+++ b/README.md
@@ -1,3 +1,3 @@
-# kiln-demo
+# kiln-demo (served as a tarball)
 
 A deliberately tiny PyTorch CUDA extension that kiln uses as its fast,
"""

# nvcc of the same toolkit saying it is another build: its version text with another build number.
STUB_NVCC = """#!/bin/sh
{nvcc} --version | sed 's/compiler\\.[0-9]*_0/compiler.99999999_0/'
"""


def section_offset(so_bytes, name):
    """(file offset, size) of the ELF section `name`, as readelf -S lists it."""
    with tempfile.NamedTemporaryFile(suffix=".so") as f:
        f.write(so_bytes)
        f.flush()
        out = subprocess.run(["readelf", "-S", "-W", f.name], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        fields = line.replace("[ ", "[").split()
        if len(fields) > 5 and fields[1] == name:
            return int(fields[4], 16), int(fields[5], 16)
    raise AssertionError(f"no section {name}:\n{out}")


def record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def rewritten(wheel, out, edit):
    """`wheel` written to `out` with `edit(members)` applied to its {name: bytes} and RECORD
    rewritten to match."""
    with zipfile.ZipFile(wheel) as z:
        infos = z.infolist()
        members = {i.filename: z.read(i) for i in infos}
    before = dict(members)
    edit(members)
    record = next(n for n in members if n.endswith(".dist-info/RECORD"))
    lines = []
    for line in members[record].decode().splitlines():
        path = line.rsplit(",", 2)[0]
        changed = path in members and members[path] != before[path]
        lines.append(f"{path},{record_hash(members[path])},{len(members[path])}" if changed else line)
    members[record] = ("\n".join(lines) + "\n").encode()
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w") as z:
        for info in infos:
            z.writestr(info, members[info.filename])


def change_a_text_byte(members):
    """One byte in the middle of the .so's .text changed; returns the .so's name."""
    so = next(n for n in members if n.endswith(".so"))
    offset, size = section_offset(members[so], ".text")
    data = bytearray(members[so])
    data[offset + size // 2] ^= 0xFF
    members[so] = bytes(data)
    return so


class RebuildTest(SourceTestCase):
    def setUp(self):
        super().setUp()
        # One interpreter root and nobody both run (root's python3 may live in its private home).
        for name in ("default.toml", "default-wheels-cu130.toml"):
            target = self.project / "manifests" / "targets" / name
            target.write_text(target.read_text().replace('interpreter = "python3"',
                                                         'interpreter = "/usr/bin/python3"'))

    def fetchable_demo(self):
        """kiln-demo from a tar.gz this test serves (anyone with the URL fetches it), with one
        patch."""
        members = [self.member(f"kiln-demo-0.1.0/{p.relative_to(DEMO)}", p.read_bytes(), mode=0o644)
                   for p in sorted(DEMO.rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
        data = self.sdist(members)
        (self.served / "kiln-demo-0.1.0.tar.gz").write_bytes(data)
        self.url = self.server()
        self.edit("manifests/kiln-demo/0.1.0.toml", 'path = "../../kernels/kiln-demo"',
                  f'url = "{self.url}/kiln-demo-0.1.0.tar.gz"\nsha256 = "{sha256(data)}"')
        self.edit("manifests/kiln-demo/0.1.0.toml", "[build]\n",
                  '[patches]\nseries = ["0001-readme.patch"]\n\n[build]\n')
        patches = self.project / "patches" / "kiln-demo" / "0.1.0"
        patches.mkdir(parents=True)
        (patches / "0001-readme.patch").write_text(README_PATCH)

    def build(self, cache, target, env=None):
        proc = self.kiln("--cache", str(cache), "--json", "build", "kiln-demo", "--target", target,
                         check=0, env=env, timeout=1800)
        return json.loads(proc.stdout)["items"][0]

    def rebuild(self, wheel, *args, env=None, check=None):
        return self.kiln("--cache", str(self.fresh_cache(f"rebuild-{len(list(self.tmp.glob('rebuild-*')))}")),
                         "--json", "rebuild", "--check", str(wheel), *args, env=env, check=check,
                         timeout=1800)

    def as_nobody(self, wheel):
        """`kiln rebuild --check` of `wheel` by nobody, in an empty directory of its own with a
        fresh cache (which reaches the shared torch sysroot and CUDA toolkit through bind mounts,
        and fetches the source itself). Returns (process, the rebuilt wheel)."""
        theirs = self.tmp / "nobody"
        for part in ("cache/sysroots", "cache/toolkits", "work/manifests", "out"):
            (theirs / part).mkdir(parents=True)
        mine = theirs / wheel.name
        shutil.copyfile(wheel, mine)
        binds = "\n".join(f"mount --bind {(SHARED_CACHE / part).resolve()} {theirs / 'cache' / part}"
                          for part in ("sysroots", "toolkits"))
        subprocess.run(["chown", "-R", "65534:65534", str(theirs)], check=True)
        os.chmod(self.tmp, 0o755)
        proc = self.in_private_tmp(f"""{binds}
cd {theirs / 'work'}
setpriv --reuid=65534 --regid=65534 --clear-groups env HOME={theirs} KILN_CONFIG=/dev/null \
  {KILN} --cache {theirs / 'cache'} --json rebuild --check {mine} --output {theirs / 'out'}
""", check=False)
        rebuilt = list((theirs / "out").glob("*.whl"))
        return proc, rebuilt[0] if rebuilt else None

    def test_anyone_rebuilds_the_same_bytes_and_a_changed_byte_is_named(self):
        if os.geteuid() != 0:
            self.skipTest("rebuilding as another user needs root")
        if subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "unshare", "--user",
                           "--map-root-user", "--mount", "true"], capture_output=True).returncode != 0:
            self.skipTest("unprivileged user namespaces are not allowed here")
        self.fetchable_demo()
        built = self.build(self.fresh_cache("builder"), "default-wheels-cu130")
        wheel = Path(built["wheel"])
        with zipfile.ZipFile(wheel) as z:
            kiln_json = json.loads(z.read(next(n for n in z.namelist() if n.endswith("kiln.json"))))
        self.assertEqual(kiln_json["format"], 2)
        self.assertEqual(kiln_json["rebuild"]["patches"][0]["name"], "0001-readme.patch")
        self.assertEqual(base64.b64decode(kiln_json["rebuild"]["patches"][0]["base64"]).decode(), README_PATCH)

        proc, rebuilt = self.as_nobody(wheel)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        result = json.loads(proc.stdout)
        self.assertTrue(result["same"], proc.stdout + proc.stderr)
        self.assertEqual(result["rebuilt_sha256"], built["sha256"])
        self.assertEqual(rebuilt.read_bytes(), wheel.read_bytes())

        # One byte of the .so changed, RECORD rewritten: the rebuild differs there, and says where.
        tampered = self.tmp / "tampered" / wheel.name
        with zipfile.ZipFile(wheel) as z:
            so = next(n for n in z.namelist() if n.endswith(".so"))
        rewritten(wheel, tampered, change_a_text_byte)
        # From a URL, as an index links it (its #sha256= verified).
        (self.served / "tampered").mkdir()
        shutil.copyfile(tampered, self.served / "tampered" / wheel.name)
        proc = self.rebuild(f"{self.url}/tampered/{wheel.name}#sha256={sha256(tampered.read_bytes())}", check=1)
        self.assertIn("differ", proc.stdout, proc.stderr)
        result = json.loads(proc.stdout)
        self.assertFalse(result["same"])
        self.assertEqual(result["rebuilt_sha256"], built["sha256"])  # the rebuild is the original
        self.assertIn(f"{so}: contents differ in .text", result["differences"], proc.stdout)
        self.assertTrue(any(d.endswith("RECORD: contents differ") for d in result["differences"]), proc.stdout)

        # The original's link on kiln serve's index, with a sha256 that is not its own: refused
        # once downloaded, nothing rebuilt.
        base, _, _ = self.start_serve(self.tmp / "builder")
        page = json.loads(urllib.request.urlopen(urllib.request.Request(
            f"{base}default-wheels-cu130/simple/kiln-demo/",
            headers={"Accept": "application/vnd.pypi.simple.v1+json"})).read())
        link = urllib.parse.urljoin(f"{base}default-wheels-cu130/simple/kiln-demo/", page["files"][0]["url"])
        self.assertEqual(page["files"][0]["hashes"]["sha256"], built["sha256"])
        proc = self.rebuild(f"{link}#sha256={'0' * 64}")
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("sha256", proc.stderr)

        # A wheel whose builder's linker was another: refused once the toolchain is laid out,
        # before anything is compiled.
        def other_linker(members):
            name = next(n for n in members if n.endswith(".dist-info/kiln.json"))
            doc = json.loads(members[name])
            doc["tools"]["ld"] = "GNU ld (GNU Binutils) 2.99"
            members[name] = json.dumps(doc, indent=2, sort_keys=True).encode() + b"\n"
        other = self.tmp / "other-linker" / wheel.name
        rewritten(wheel, other, other_linker)
        proc = self.rebuild(other, check=2)
        self.assertRegex(proc.stderr, r"this host differs from the one that built the wheel: ld --version: "
                                      r"the wheel's 'GNU ld \(GNU Binutils\) 2\.99', here 'GNU ld .*'")

    def test_what_cannot_be_verified_is_refused_naming_it(self):
        cuda = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
        if not (cuda / "bin" / "nvcc").exists():
            self.skipTest("needs a CUDA toolkit at CUDA_HOME or /usr/local/cuda")
        env = {"CUDA_HOME": str(cuda)}
        wheel = Path(self.build(self.fresh_cache("builder"), "default", env=env)["wheel"])

        proc = self.rebuild(wheel, env=env, check=2)
        self.assertIn("kiln-demo 0.1.0 was built from a local tree of its builder's, which only its tree "
                      "sha256 names: rebuild it with --force --source DIR", proc.stderr)

        proc = self.rebuild(wheel, "--source", str(self.project / "kernels" / "kiln-demo"), env=env, check=2)
        self.assertIn("this rebuild cannot verify the wheel: source: a local tree of the builder's", proc.stderr)
        self.assertIn("CUDA toolkit: the builder's own", proc.stderr)
        self.assertIn("(--force rebuilds it anyway)", proc.stderr)
        self.assertNotIn("nvcc_version", proc.stderr)

        # Forced, from the builder's tree, with the same toolkit: the same bytes, the inputs it could
        # not verify said as a warning.
        proc = self.rebuild(wheel, "--force", "--source", str(DEMO), env=env, check=0)
        self.assertTrue(json.loads(proc.stdout)["same"], proc.stdout + proc.stderr)
        self.assertIn("kiln: warning: this rebuild cannot verify the wheel: source: a local tree", proc.stderr)

        # The same toolkit, but an nvcc that says it is another build.
        stub = self.tmp / "stub-cuda"
        (stub / "bin").mkdir(parents=True)
        for entry in cuda.iterdir():
            if entry.name != "bin":
                (stub / entry.name).symlink_to(entry.resolve())
        for entry in (cuda / "bin").iterdir():
            if entry.name != "nvcc":
                (stub / "bin" / entry.name).symlink_to(entry.resolve())
        (stub / "bin" / "nvcc").write_text(STUB_NVCC.format(nvcc=(cuda / "bin" / "nvcc").resolve()))
        (stub / "bin" / "nvcc").chmod(0o755)
        proc = self.rebuild(wheel, "--source", str(self.project / "kernels" / "kiln-demo"),
                            env={"CUDA_HOME": str(stub)}, check=2)
        self.assertRegex(proc.stderr, r"inputs\.toolchain\.cuda\.nvcc_version: the wheel's 'Build cuda_13\.0\.r13\.0/"
                                      r"compiler\.\d+_0', here 'Build cuda_13\.0\.r13\.0/compiler\.99999999_0'")
        # The refused rebuilds built nothing; the forced one kept nothing in its cache's wheels.
        self.assertEqual(list(self.tmp.glob("rebuild-*/wheels/**/*.whl")), [])


if __name__ == "__main__":
    unittest.main()
