"""kiln validate on real wheels: ours pass (causal-conv1d, fla, the kiln-demo fixture), the
torch ABI check on a real mismatch (torch 2.11 wheels against torch 2.10.0's libraries), each kind
of corruption rejected with its own message, the fatbin listing agreeing with cuobjdump, and
`kiln build` refusing to commit a wheel that fails a check.

Compiled wheels come from the persistent cache (KILN_CACHE): causal-conv1d takes ~10 minutes to
build on a small machine, so it is never built here; the test validates the wheel kiln built there
earlier (test_default_job builds it) and skips that part when there is none."""

import base64
import csv
import hashlib
import io
import json
import os
import re
import struct
import subprocess
import sys
import threading
import time
import unittest
import urllib.request
import xml.etree.ElementTree as ET
import zipfile
import zlib
from pathlib import Path

from kilntest import KILN, KilnTestCase, SHARED_CACHE


def record_of(entries):
    """RECORD text for [(name, bytes)], as pip and installer check it."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    record = next(n for n, _ in entries if n.endswith(".dist-info/RECORD"))
    for name, data in entries:
        if name == record:
            continue
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        writer.writerow([name, f"sha256={digest}", len(data)])
    writer.writerow([record, "", ""])
    return record, out.getvalue().encode()


def rewrite(src, dst, change, fix_record=False):
    """Copies a wheel through change([(name, bytes)]) -> [(name, bytes)]."""
    with zipfile.ZipFile(src) as z:
        entries = [(i.filename, z.read(i)) for i in z.infolist()]
    entries = change(entries)
    if fix_record:
        record, text = record_of(entries)
        entries = [(n, text if n == record else d) for n, d in entries]
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries:
            z.writestr(name, data)
    return Path(dst)


class ValidateTest(KilnTestCase):
    # --- helpers -------------------------------------------------------------------------------

    def build(self, *args, cache=None):
        proc = self.kiln("--cache", str(cache or SHARED_CACHE), "--json", "build", *args, check=0, timeout=3000)
        return {i["package"]: Path(i["wheel"]) for i in json.loads(proc.stdout)["items"]}

    def validate(self, *args, check=None):
        """Runs kiln validate --json; returns (exit code, {wheel name: {check id: check}}, raw)."""
        proc = self.kiln("--cache", str(SHARED_CACHE), "validate", "--json", *map(str, args), check=check, timeout=1800)
        self.assertIn(proc.returncode, (0, 1), proc.stderr)
        doc = json.loads(proc.stdout)
        wheels = {Path(w["wheel"]).name: {c["id"]: c for c in w["checks"]} for w in doc["wheels"]}
        return proc.returncode, wheels, doc

    def only(self, wheels):
        self.assertEqual(len(wheels), 1, wheels.keys())
        return next(iter(wheels.values()))

    def demo(self):
        return self.build("kiln-demo")["kiln-demo"]

    def causal_conv1d(self):
        """This checkout's causal-conv1d wheel, built into the persistent cache on a machine's first
        run (minutes; a cache hit after)."""
        proc = self.kiln("--cache", str(SHARED_CACHE), "--json", "build", "causal-conv1d", check=0, timeout=3000)
        return Path(json.loads(proc.stdout)["items"][0]["wheel"])

    def peer_wheel(self, url, sha256):
        """A wheel from PyPI, pinned by sha256, downloaded once into the persistent cache."""
        path = Path.home() / ".cache/kiln/peer-wheels" / sha256 / url.rsplit("/", 1)[1]
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                with urllib.request.urlopen(url, timeout=120) as r:
                    data = r.read()
            except OSError as e:
                self.skipTest(f"cannot download {url}: {e}")
            self.assertEqual(hashlib.sha256(data).hexdigest(), sha256)
            tmp = path.with_suffix(".part")
            tmp.write_bytes(data)
            tmp.rename(path)
        return path

    # --- other people's wheels: the standard, and kiln's rules as warnings ----------------------

    def test_other_peoples_wheels_get_kilns_rules_as_warnings(self):
        # zstandard imports its optional Rust backend without try: (it falls back in a caller);
        # the standards have nothing against that, so kiln's imports rule only warns here.
        wheel = self.peer_wheel(
            "https://files.pythonhosted.org/packages/bb/1f/e9cfd801a3f9190bf3e759c422bbfd2247db9d7f3d54a56ecde70137791a/"
            "zstandard-0.25.0-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
            "9300d02ea7c6506f00e627e287e0492a5eb0371ec1670ae852fefffa6164b072")
        rc, reports, _ = self.validate("--offline", wheel)
        checks = self.only(reports)
        self.assertEqual(rc, 0, {k: (c["verdict"], c["message"]) for k, c in checks.items()})
        self.assertEqual(checks["imports"]["verdict"], "warn")
        self.assertIn("zstandard.backend_rust, which is not in the wheel", checks["imports"]["message"])
        self.assertIn("kiln's rule for its own wheels: a warning for others", checks["imports"]["message"])
        # The same wheel with a kiln.json is kiln's: its rule fails it.
        def add_provenance(entries):
            info = next(n for n, _ in entries if n.endswith(".dist-info/METADATA")).rsplit("/", 1)[0]
            return entries + [(f"{info}/kiln.json", b"{}")]
        ours = rewrite(wheel, self.tmp / "ours" / wheel.name, add_provenance, fix_record=True)
        rc, reports, _ = self.validate("--offline", ours)
        self.assertEqual(rc, 1)
        self.assertEqual(self.only(reports)["imports"]["verdict"], "fail")

    # --- our wheels ----------------------------------------------------------------------------

    def test_our_wheels_pass(self):
        wheels = self.build("fla-core", "flash-linear-attention")
        wheels["kiln-demo"] = self.demo()
        wheels["causal-conv1d"] = self.causal_conv1d()
        rc, reports, doc = self.validate(*wheels.values())
        self.assertEqual(rc, 0, json.dumps(doc, indent=1)[:4000])
        self.assertTrue(doc["ok"])
        for package, wheel in wheels.items():
            checks = reports[wheel.name]
            for cid in ("archive", "metadata", "tags"):
                self.assertEqual(checks[cid]["verdict"], "pass", f"{package} {cid}: {checks[cid]['message']}")
            if package in ("fla-core", "flash-linear-attention"):
                for cid in ("elf", "torch-abi", "gpu-code"):
                    self.assertEqual(checks[cid]["verdict"], "skip", (package, cid))
            else:
                # The default target asks for sm_90 SASS and no PTX; the symbols resolve against the
                # torch 2.11.0 the provenance pins.
                self.assertEqual(checks["gpu-code"]["verdict"], "pass", checks["gpu-code"]["message"])
                self.assertEqual(checks["gpu-code"]["data"]["sass"], ["sm_90"])
                self.assertEqual(checks["gpu-code"]["data"]["ptx"], [])
                self.assertEqual(checks["torch-abi"]["verdict"], "pass", checks["torch-abi"]["message"])
                self.assertTrue(checks["torch-abi"]["data"]["torch"].startswith("2.11.0"))
                self.assertGreater(checks["torch-abi"]["data"]["resolved"], 50)
                # Paths under kiln's fixed build root are the same on every machine: no warning.
                self.assertEqual(checks["elf"]["verdict"], "pass", checks["elf"]["details"])
                self.assertEqual(checks["elf"]["data"]["build_paths"], 0)
        # --json lists the archs found per wheel.
        for w in doc["wheels"]:
            if Path(w["wheel"]).name in (wheels["kiln-demo"].name, wheels.get("causal-conv1d", Path()).name):
                self.assertEqual(w["archs"], {"sass": ["sm_90"], "ptx": []})

        # The text report and JUnit XML say the same.
        junit = self.tmp / "report.xml"
        proc = self.kiln("--cache", str(SHARED_CACHE), "validate", str(wheels["kiln-demo"]), "--junit", str(junit), check=0)
        self.assertRegex(proc.stdout, r"kiln_demo-.*\.whl: ok\n  pass  archive ")
        suites = ET.parse(junit).getroot()
        self.assertEqual(suites.get("failures"), "0")
        names = [t.get("name") for t in suites.iter("testcase")]
        self.assertEqual(names, ["archive", "metadata", "tags", "elf", "torch-abi", "gpu-code", "imports"])
        for package, wheel in wheels.items():
            self.assertEqual(reports[wheel.name]["imports"]["verdict"], "pass",
                             (package, reports[wheel.name]["imports"]["details"][:5]))

    def test_imports_find_a_bare_extension_name(self):
        """torchsort's mistake: the package imports .isotonic_cpu but the extension was declared
        with the bare name, so it sits at the top level. The static "imports" check fails it
        without importing anything; inside the package (a dotted name) it passes; a guarded
        import only warns."""
        demo = self.demo()
        so = next(n for n in zipfile.ZipFile(demo).namelist() if n.endswith(".so"))
        relative = "from .kiln_demo_cuda import scale_add as _scale_add\nimport kiln_demo_cuda as _C"
        guarded = ("try:\n    from .kiln_demo_cuda import scale_add as _scale_add\nexcept ImportError:\n"
                   "    pass\nimport kiln_demo_cuda as _C")

        def change(text, move):
            def edit(entries):
                out = []
                for name, data in entries:
                    if name == "kiln_demo/__init__.py":
                        data = data.replace(b"import kiln_demo_cuda as _C", text.encode())
                    if name == so and move:
                        name = "kiln_demo/" + so
                    out.append((name, data))
                return out
            return edit

        bare = rewrite(demo, self.tmp / "bare" / demo.name, change(relative, False), fix_record=True)
        rc, reports, _ = self.validate(bare)
        self.assertEqual(rc, 1)
        imports = self.only(reports)["imports"]
        self.assertEqual(imports["verdict"], "fail")
        self.assertIn("kiln_demo/__init__.py:12: imports kiln_demo.kiln_demo_cuda, which is not in the wheel",
                      imports["message"])
        self.assertIn(f"the extension {so} is elsewhere", imports["message"])
        self.assertIn('name = "kiln_demo.kiln_demo_cuda"', imports["message"])

        dotted = rewrite(demo, self.tmp / "dotted" / demo.name, change(relative, True), fix_record=True)
        _, reports, _ = self.validate(dotted)
        self.assertEqual(self.only(reports)["imports"]["verdict"], "pass", self.only(reports)["imports"])

        warned = rewrite(demo, self.tmp / "guarded" / demo.name, change(guarded, False), fix_record=True)
        rc, reports, _ = self.validate(warned)
        self.assertEqual(self.only(reports)["imports"]["verdict"], "warn", self.only(reports)["imports"])
        self.assertIn("inside try:", self.only(reports)["imports"]["message"])

    def test_multi_arch_fixture_agrees_with_cuobjdump(self):
        wheel = self.build("kiln-demo", "--archs", "9.0;12.0+PTX")["kiln-demo"]
        rc, reports, _ = self.validate(wheel)
        checks = self.only(reports)
        self.assertEqual(rc, 0, checks["gpu-code"]["message"])
        gpu = checks["gpu-code"]
        self.assertEqual(gpu["data"]["requested"], "sm_90;sm_120+ptx")
        self.assertEqual(gpu["data"]["requested_from"], "provenance")
        self.assertEqual((gpu["data"]["sass"], gpu["data"]["ptx"]), (["sm_90", "sm_120"], ["compute_120"]))

        # cuobjdump on the same .so lists the same code.
        with zipfile.ZipFile(wheel) as z:
            so = next(n for n in z.namelist() if n.endswith(".so"))
            z.extract(so, self.tmp / "u")
        elf, ptx = self.sass_and_ptx(self.tmp / "u" / so)
        ours = gpu["data"]["files"][so]
        self.assertEqual(sorted(ours["sass"]), elf)
        self.assertEqual(sorted(p.replace("compute_", "sm_") for p in ours["ptx"]), ptx)
        # One image per arch and translation unit (kiln-demo's kernel file is compiled in shards).
        entries = [(e["kind"], e["arch"]) for e in ours["entries"]]
        self.assertEqual(sorted(set(entries)), sorted([("elf", a) for a in elf] + [("ptx", a) for a in ptx]))
        self.assertEqual(len(entries) % len(set(entries)), 0, entries)

        # Where it runs: SASS on sm_90 and sm_120, the PTX JIT nowhere else newer within reach.
        rc, reports, _ = self.validate(wheel, "--gpu", "sm_120")
        self.assertEqual(rc, 0)
        self.assertEqual(self.only(reports)["gpu-target"]["message"], "runs on sm_120 (SASS present)")
        rc, reports, _ = self.validate(wheel, "--gpu", "sm_100")
        self.assertEqual(rc, 1)
        self.assertIn("will not run on sm_100", self.only(reports)["gpu-target"]["message"])
        # Asking for other archs than were built is reported both ways.
        rc, reports, _ = self.validate(wheel, "--archs", "9.0;10.0")
        self.assertEqual(rc, 1)
        details = "\n".join(self.only(reports)["gpu-code"]["details"])
        self.assertIn("has no SASS for sm_100 (requested: sm_90;sm_100)", details)
        self.assertIn("has unexpected SASS for sm_120", details)
        self.assertIn("has unexpected PTX compute_120", details)

    # --- torch ABI against another torch -------------------------------------------------------

    def test_against_torch_2_10(self):
        """Wheels built against torch 2.11.0 (CUDA 13.0) checked against torch 2.10.0 (CUDA 12.8).

        kiln-demo calls c10::cuda::CUDAStream::query() and synchronize(): torch 2.11's libc10_cuda
        exports them, torch 2.10's does not (they were inline there), so its import would fail with
        "undefined symbol". causal-conv1d only uses c10/ATen/torch entry points that torch 2.10
        exports under the same mangled names, so no symbol is missing for it: what breaks it on
        torch 2.10 is the CUDA runtime (it needs libcudart.so.13; torch 2.10 runs on CUDA 12.8's
        libcudart.so.12) — and pip would refuse it anyway for its torch==2.11.* pin."""
        demo = self.demo()
        rc, reports, _ = self.validate(demo, "--torch-version", "2.10.0")
        self.assertEqual(rc, 1)
        abi = self.only(reports)["torch-abi"]
        self.assertEqual(abi["verdict"], "fail")
        self.assertTrue(abi["data"]["torch"].startswith("2.10.0"), abi["data"])
        missing = next(iter(abi["data"]["missing"].values()))
        self.assertIn("c10::cuda::CUDAStream::query() const", missing)
        self.assertIn("c10::cuda::CUDAStream::synchronize() const", missing)
        details = "\n".join(abi["details"])
        self.assertIn("needs libcudart.so.13 (CUDA 13) but torch 2.10.0", details)
        self.assertIn("built against torch 2.11.0+cu130; checking against torch 2.10.0", details)
        # Against the torch it was built with, nothing is missing.
        rc, reports, _ = self.validate(demo)
        self.assertEqual(list(self.only(reports)["torch-abi"]["data"]["missing"].values()), [[]])

        cc = self.causal_conv1d()
        rc, reports, _ = self.validate(cc, "--torch-version", "2.10.0")
        abi = self.only(reports)["torch-abi"]
        self.assertEqual(rc, 1)
        self.assertEqual(list(abi["data"]["missing"].values()), [[]], abi["details"])
        self.assertGreater(abi["data"]["resolved"], 50)
        self.assertIn("needs libcudart.so.13 (CUDA 13) but torch 2.10.0", abi["message"])

    # --- corrupted inputs ----------------------------------------------------------------------

    def test_corrupted_inputs_are_rejected_with_specific_messages(self):
        demo = self.demo()
        so_name = next(n for n in zipfile.ZipFile(demo).namelist() if n.endswith(".so"))
        bad = self.tmp / "bad"

        def expect(wheel, check_id, text, *args):
            rc, reports, _ = self.validate(wheel, *args)
            self.assertEqual(rc, 1, f"{wheel.name} passed")
            check = self.only(reports)[check_id]
            self.assertEqual(check["verdict"], "fail", check)
            self.assertIn(text, check["message"] + "\n" + "\n".join(check["details"]))
            return check

        def flip(entries):
            return [(n, (d[:5000] + bytes([d[5000] ^ 1]) + d[5001:]) if n == so_name else d) for n, d in entries]
        expect(rewrite(demo, bad / "flip" / demo.name, flip), "archive", f"sha256 of {so_name} does not match RECORD")

        def unlisted(entries):
            out = []
            for n, d in entries:
                if n.endswith(".dist-info/RECORD"):
                    d = b"".join(l for l in d.splitlines(keepends=True) if not l.startswith(so_name.encode()))
                out.append((n, d))
            return out
        expect(rewrite(demo, bad / "unlisted" / demo.name, unlisted), "archive", f"{so_name} is in the wheel but not in RECORD")

        extra = rewrite(demo, bad / "extra" / demo.name, lambda e: e[:1] + [("kiln_demo/payload.py", b"import os\n")] + e[1:])
        expect(extra, "archive", "kiln_demo/payload.py is in the wheel but not in RECORD")

        gone = rewrite(demo, bad / "gone" / demo.name, lambda e: [(n, d) for n, d in e if n != so_name])
        expect(gone, "archive", f"RECORD lists {so_name}, which is not in the wheel")

        # Tagged for another Python than the one the module was built for.
        other = "cp39" if "-cp39-" not in demo.name else "cp310"
        retagged = rewrite(demo, bad / "tag" / re.sub(r"-cp3\d+-cp3\d+-", f"-{other}-{other}-", demo.name), lambda e: e)
        check = expect(retagged, "tags", "differ from the file name's")
        self.assertIn("but the wheel's ABI tag is", "\n".join(check["details"]))

        def rename(entries):
            return [(n, d.replace(b"Name: kiln-demo", b"Name: kiln-demo-fork") if n.endswith("/METADATA") else d)
                    for n, d in entries]
        renamed = rewrite(demo, bad / "name" / demo.name, rename, fix_record=True)
        self.assertEqual(self.only(self.validate(renamed)[1])["archive"]["verdict"], "pass")
        expect(renamed, "metadata", "METADATA Name 'kiln-demo-fork' does not match the file name's 'kiln_demo'")

        data = demo.read_bytes()
        truncated = bad / "truncated" / demo.name
        truncated.parent.mkdir(parents=True)
        truncated.write_bytes(data[: len(data) // 2])
        check = expect(truncated, "archive", "no end-of-central-directory record (truncated, or not a zip file)")
        self.assertEqual(self.only(self.validate(truncated)[1])["metadata"]["verdict"], "skip")

        # The first local header's CRC (offset 14) no longer equals the central directory's.
        mismatch = bad / "local" / demo.name
        mismatch.parent.mkdir(parents=True)
        mismatch.write_bytes(data[:14] + bytes([data[14] ^ 0xFF]) + data[15:])
        first = zipfile.ZipFile(demo).infolist()[0].filename
        expect(mismatch, "archive", f"entry '{first}': local header CRC")

        # The default target's wheel holds sm_90 SASS only: no kernel image for an sm_120 GPU.
        check = expect(demo, "gpu-target", "will not run on sm_120", "--gpu", "sm_120")
        self.assertIn("no kernel image is available", check["message"])

        # Not a wheel at all: a usage error (exit 2), not a report.
        text = self.tmp / "notes.txt"
        text.write_text("hello\n")
        proc = self.kiln("validate", str(text), check=2)
        self.assertIn("not a wheel file name (it does not end in .whl", proc.stderr)

    def test_control_characters_of_a_foreign_wheel_never_reach_the_terminal(self):
        """A stranger's METADATA quoted in the report: an escape sequence that erases the line, a
        carriage return and a forged verdict after them, a C1 CSI. The text report (stdout) and
        the error (stderr) show them as \\x1b, \\x0d, U+009B, never raw."""
        forged = b"\x1b[2K\r  pass  metadata   all good\xc2\x9b"
        def poison(entries):
            return [(n, d.replace(b"\nVersion:", b"\nRequires-Dist: evil" + forged + b"\nVersion:")
                     if n.endswith("/METADATA") else d) for n, d in entries]
        wheel = rewrite(self.demo(), self.tmp / "poison" / self.demo().name, poison, fix_record=True)
        proc = self.kiln("validate", str(wheel), check=1)
        for stream in (proc.stdout, proc.stderr):
            self.assertFalse(re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", stream), repr(stream))
        self.assertIn("evil\\x1b[2K\\x0d  pass  metadata   all goodU+009B", proc.stdout)
        self.assertIn("FAILED", proc.stdout)
        # Shown, the forged verdict stays inside the line that quotes it.
        self.assertFalse([l for l in proc.stdout.splitlines() if l.startswith("  pass  metadata")])

    # --- importing with a real Python --------------------------------------------------------------

    def test_import_with_a_torch_environment(self):
        env = Path(os.environ.get("KILN_TORCH_ENV") or Path.home() / ".cache/kiln/torch-venv")
        python = env / "bin" / "python"
        if not python.exists():
            self.skipTest(f"no torch environment at {env} (scripts/test creates it)")
        wheels = [self.demo(), self.causal_conv1d()]
        rc, reports, doc = self.validate(*wheels, "--import-with", python)
        self.assertEqual(rc, 0, json.dumps(doc, indent=1)[:3000])
        imported = reports[wheels[0].name]["import"]["data"]["imported"]
        self.assertEqual(imported, ["kiln_demo", "kiln_demo_cuda"])
        self.assertIn("causal_conv1d_cuda", reports[wheels[1].name]["import"]["data"]["imported"])
        # A Python without torch cannot load the extension: torch's libraries are missing.
        bare = subprocess.run(["python3", "-c", "import importlib.util as u; print(u.find_spec('torch') is None)"],
                              capture_output=True, text=True).stdout.strip()
        if bare == "True":
            rc, reports, _ = self.validate(wheels[0], "--import-with", "python3")
            self.assertEqual(rc, 1)
            self.assertIn("import kiln_demo", self.only(reports)["import"]["message"])
            self.assertIn("libc10.so", "\n".join(self.only(reports)["import"]["details"]))

    # --- kiln build runs the checks before committing ------------------------------------------

    def test_build_refuses_a_wheel_that_fails_validation(self):
        # The demo calls a c10 function no torch defines: it links (shared objects may have undefined
        # symbols) but would fail at import with "undefined symbol".
        src = "kernels/kiln-demo/csrc/kiln_demo.cpp"
        self.edit(src, "namespace {\n", "namespace c10 { void kiln_e2e_not_in_torch(); }\n\nnamespace {\n")
        self.edit(src, "std::string version() { return KILN_DEMO_VERSION; }",
                  "std::string version() { c10::kiln_e2e_not_in_torch(); return KILN_DEMO_VERSION; }")
        cache = self.fresh_cache("c")
        proc = self.kiln("--cache", str(cache), "build", "kiln-demo", timeout=3000)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("kiln-demo: the built wheel fails validation: torch-abi:", proc.stderr)
        self.assertIn("c10::kiln_e2e_not_in_torch()", proc.stderr)
        self.assertEqual(list((cache / "wheels").glob("*/*.whl")) if (cache / "wheels").exists() else [], [])


def raw_zip(path, members):
    """Writes a zip byte by byte from [(name bytes, data as stored, method, crc, size)], so that a
    name may hold any bytes and a deflated member's data and stated size may be anything."""
    out, central = b"", b""
    for name, data, method, crc, size in members:
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x0314, 20, 0, method, 0, 33, crc,
                               len(data), size, len(name), 0, 0, 0, 0, 0o100644 << 16, len(out)) + name
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 33, crc, len(data), size,
                           len(name), 0) + name + data
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central), len(out), 0)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(out + central + end)
    return Path(path)


def stored(name, data):
    return (name, data, 0, zlib.crc32(data), len(data))


def zeros_bomb(gib):
    """A raw deflate stream of `gib` GiB of zeros (about 1 KB per MiB) and their CRC-32."""
    mib = b"\0" * (1 << 20)
    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = z.compress(mib) + z.flush(zlib.Z_FULL_FLUSH)  # byte-aligned, no history: repeatable
    crc = 0
    for _ in range(gib << 10):
        crc = zlib.crc32(mib, crc)
    return chunk * (gib << 10) + z.flush(zlib.Z_FINISH), crc


class ForeignWheelTest(KilnTestCase):
    """Hand-made hostile wheels, no build needed: a METADATA that inflates to 2 GiB, member names
    holding bytes of no UTF-8 character."""

    def validate_raw(self, wheel, timeout=120):
        """(exit code, stdout bytes, stderr bytes, seconds, peak RSS in MiB) of `kiln validate`,
        killed after `timeout` seconds (the test then fails)."""
        env = dict(os.environ, KILN_CACHE=str(self.cache))
        out_path, err_path = self.tmp / "validate.out", self.tmp / "validate.err"
        t0 = time.monotonic()
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen([KILN, "validate", str(wheel)], stdout=out, stderr=err, env=env,
                                    cwd=self.project)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - t0
        out, err = out_path.read_bytes(), err_path.read_bytes()
        self.assertLess(seconds, timeout, f"kiln validate {wheel.name} was killed after {timeout} s")
        return proc.returncode, out, err, seconds, usage.ru_maxrss / 1024

    def test_a_metadata_that_inflates_to_2_gib_is_refused_at_its_limit(self):
        """docs/manifest.md, "Limits": a wheel's text files at most 16 MiB. The zip's directory says
        2 GiB (refused before inflating), or lies that it is 16 MiB (refused once inflated past it):
        exit 1 at once, the limit named, memory bounded. Before: 4.2 GB RSS and 35 s."""
        stream, crc = zeros_bomb(2)
        info = b"bomb-1.0.dist-info/"
        small = [stored(b"bomb/__init__.py", b"x = 1\n"),
                 stored(info + b"WHEEL", b"Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n")]
        limit = "inflates past 16 MiB (the limit for a wheel's text files)"
        for stated in (2 << 30, 16 << 20):
            with self.subTest(stated=stated):
                wheel = raw_zip(self.tmp / str(stated) / "bomb-1.0-py3-none-any.whl",
                                small + [(info + b"METADATA", stream, 8, crc, stated),
                                         stored(info + b"RECORD", b"")])
                self.assertLess(wheel.stat().st_size, 4 << 20)
                rc, out, err, seconds, rss = self.validate_raw(wheel)
                text = out.decode()
                print(f"\nkiln validate, METADATA stated {stated} bytes: exit {rc}, {seconds:.1f} s, "
                      f"peak RSS {rss:.0f} MiB", file=sys.stderr)
                self.assertEqual(rc, 1, text + err.decode())
                self.assertIn(f"entry 'bomb-1.0.dist-info/METADATA': {limit}", text)
                self.assertIn("METADATA is unreadable (the archive check says why)", text)
                self.assertLess(seconds, 20)
                self.assertLess(rss, 1024)  # the bomb held whole would be 2 GiB and more

    def test_raw_bytes_of_member_names_never_reach_the_terminal(self):
        """A member name holding the 8-bit CSI (0x9B), bytes 0x80-0xFF of no UTF-8 character and an
        overlong '/': validate's archive message shows each as \\xNN; stdout and stderr are valid
        UTF-8 without a raw C1 byte."""
        name = b"evil/\x9b2J\x9b31mred\xff\xfe\xc0\xaf.py"
        wheel = raw_zip(self.tmp / "evil-1.0-py3-none-any.whl",
                        [stored(name, b"x = 1\n"), stored(b"evil-1.0.dist-info/RECORD", b"")])
        rc, out, err, _, _ = self.validate_raw(wheel)
        self.assertEqual(rc, 1, out + err)
        for stream in (out, err):
            self.assertNotIn(b"\x9b", stream)
            self.assertFalse(re.search(rb"[\x00-\x08\x0b-\x1f\x7f]", stream), stream)
            text = stream.decode("utf-8")  # strict: no byte of no character
            self.assertFalse(re.search("[\x80-\x9f]", text), text)
        self.assertIn(b"entry 'evil/\\x9b2J\\x9b31mred\\xff\\xfe\\xc0\\xaf.py' is not valid UTF-8", out)


if __name__ == "__main__":
    unittest.main()
