"""Wheels that install wherever their torch does, with upstream's own metadata: every wheel kiln
builds passes `packaging`'s strict metadata validation; the requirements, extras and classifiers are
the sdist's (flash-linear-attention keeps its nine extras); uv resolves `flash-linear-attention[cuda]`
through `kiln serve` to the same set as from PyPI alone; compiled wheels are tagged with their torch's
manylinux_2_28 floor, which auditwheel and `pip download --platform manylinux_2_28_x86_64` agree
with; and `kiln validate` fails a wheel whose symbols need a newer glibc than its tag promises.

The wheels come from the persistent cache (KILN_CACHE), as in test_validate: causal-conv1d is built
there once per machine."""

import json
import os
import re
import subprocess
import tarfile
import unittest
import urllib.request
import zipfile
from pathlib import Path

from kilntest import KilnTestCase, SHARED_CACHE, TOOLS
from test_validate import rewrite

PYTHON = TOOLS / "bin" / "python"
# Newer than every release these resolutions touch, fixed so that the sets do not move.
EXCLUDE_NEWER = "2026-11-15T00:00:00Z"
STRICT = """
import sys, zipfile
from packaging.metadata import Metadata
with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    Metadata.from_email(z.read(name), validate=True)
"""


def metadata_of(wheel):
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return z.read(name).decode()


def headers(text, field):
    return [line.split(": ", 1)[1] for line in text.split("\n\n", 1)[0].splitlines()
            if line.startswith(field + ": ")]


def sdist_pkg_info(file):
    found = list(SHARED_CACHE.glob(f"downloads/*/*/{file}"))
    with tarfile.open(found[0]) as t:
        member = next(m for m in t.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO"))
        return t.extractfile(member).read().decode()


def pypi_reachable():
    try:
        urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=10).close()
        return True
    except OSError:
        return False


class WheelMetadataTest(KilnTestCase):
    def build(self, *packages):
        proc = self.kiln("--cache", str(SHARED_CACHE), "--json", "build", *packages, check=0, timeout=3000)
        return {i["package"]: Path(i["wheel"]) for i in json.loads(proc.stdout)["items"]}

    def validate(self, *wheels):
        proc = self.kiln("--cache", str(SHARED_CACHE), "validate", "--json", *map(str, wheels), timeout=1800)
        self.assertIn(proc.returncode, (0, 1), proc.stderr)
        doc = json.loads(proc.stdout)
        return proc.returncode, {Path(w["wheel"]).name: {c["id"]: c for c in w["checks"]} for w in doc["wheels"]}

    def all_wheels(self):
        return self.build("fla-core", "flash-linear-attention", "kiln-demo", "causal-conv1d")

    # --- metadata ----------------------------------------------------------------------------

    def test_every_wheel_passes_packagings_strict_validation_and_keeps_upstreams_metadata(self):
        wheels = self.all_wheels()
        for package, wheel in wheels.items():
            with self.subTest(package):
                proc = subprocess.run([PYTHON, "-c", STRICT, wheel], capture_output=True, text=True)
                self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
                text = metadata_of(wheel)
                self.assertTrue(text.startswith("Metadata-Version: 2.4\n"), text[:200])
                self.assertEqual(headers(text, "License"), [])
                self.assertEqual(len(headers(text, "License-Expression")), 1)
        rc, reports = self.validate(*wheels.values())
        self.assertEqual(rc, 0, json.dumps(reports, indent=1)[:4000])
        for package in ("fla-core", "flash-linear-attention", "causal-conv1d"):
            self.assertEqual(reports[wheels[package].name]["metadata"]["data"]["upstream"], "same as the sdist's")
        self.assertRegex(reports[wheels["kiln-demo"].name]["metadata"]["data"]["upstream"], r"^not compared: ")

        # flash-linear-attention: the sdist's nine extras and every requirement, as written.
        fla = metadata_of(wheels["flash-linear-attention"])
        up = sdist_pkg_info("flash_linear_attention-0.6.0.tar.gz")
        self.assertEqual(sorted(headers(fla, "Requires-Dist")), sorted(headers(up, "Requires-Dist")))
        self.assertEqual(headers(fla, "Provides-Extra"), headers(up, "Provides-Extra"))
        self.assertEqual(len(headers(fla, "Provides-Extra")), 9)
        self.assertIn('fla-core[cuda]==0.6.0; extra == "cuda"', headers(fla, "Requires-Dist"))
        # fla-core: the sdist's, and the one requirement its manifest adds on purpose.
        core = metadata_of(wheels["fla-core"])
        up = sdist_pkg_info("fla_core-0.6.0.tar.gz")
        self.assertEqual(sorted(headers(core, "Requires-Dist")), sorted(headers(up, "Requires-Dist") + ["packaging"]))
        # causal-conv1d: the sdist's, torch pinned to the build's minor; License classifiers give
        # way to License-Expression, the others stay.
        cc = metadata_of(wheels["causal-conv1d"])
        up = sdist_pkg_info("causal_conv1d-1.7.0.tar.gz")
        self.assertEqual(headers(cc, "Requires-Dist"), ["torch==2.11.*", "packaging", "ninja"])
        self.assertEqual(headers(cc, "Classifier"),
                         [c for c in headers(up, "Classifier") if not c.startswith("License ::")])
        self.assertEqual(headers(cc, "License-Expression"), ["BSD-3-Clause"])

    def test_validate_reports_requirements_that_are_not_the_sdists(self):
        wheel = self.build("flash-linear-attention")["flash-linear-attention"]

        def drop_extra(entries):
            out = []
            for name, data in entries:
                if name.endswith("/METADATA"):
                    data = data.replace(b'Requires-Dist: pytest-xdist; extra == "test"\n', b"")
                    data = data.replace(b"Requires-Dist: transformers", b"Requires-Dist: banana\nRequires-Dist: transformers")
                out.append((name, data))
            return out
        bad = rewrite(wheel, self.tmp / "bad" / wheel.name, drop_extra, fix_record=True)
        rc, reports = self.validate(bad)
        self.assertEqual(rc, 1)
        message = reports[bad.name]["metadata"]["message"]
        self.assertIn("Requires-Dist 'pytest-xdist; extra == \"test\"' of the sdist is missing (and 1 more)", message)
        proc = self.kiln("--cache", str(SHARED_CACHE), "validate", str(bad))
        self.assertIn("Requires-Dist 'banana' is not the sdist's", proc.stdout)

    def test_served_metadata_is_the_wheels_and_uv_resolves_the_same_set_as_pypi(self):
        wheels = self.build("fla-core", "flash-linear-attention")
        base, _, _ = self.start_serve(SHARED_CACHE)
        # PEP 658: the metadata kiln serves is the wheel's METADATA.
        page = json.loads(urllib.request.urlopen(urllib.request.Request(
            base + "default/simple/flash-linear-attention/",
            headers={"Accept": "application/vnd.pypi.simple.v1+json"})).read())
        url = next(f["url"] for f in page["files"] if f["filename"] == wheels["flash-linear-attention"].name)
        served = urllib.request.urlopen(urllib.request.urljoin(base + "default/simple/flash-linear-attention/",
                                                               url) + ".metadata").read().decode()
        self.assertEqual(served, metadata_of(wheels["flash-linear-attention"]))
        if not pypi_reachable():
            self.skipTest("PyPI is not reachable")
        # kiln's wheels were committed now, after EXCLUDE_NEWER: their own packages are exempt (and
        # pinned, so that PyPI alone gives the same release).
        (self.tmp / "req.in").write_text("flash-linear-attention[cuda]==0.6.0\n")

        def compile(*index_args):
            proc = subprocess.run(
                [TOOLS / "bin" / "uv", "pip", "compile", "--quiet", "--no-header", "--no-annotate",
                 "--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_28",
                 "--exclude-newer", EXCLUDE_NEWER, "--exclude-newer-package", "flash-linear-attention=2100-01-01T00:00:00Z",
                 "--exclude-newer-package", "fla-core=2100-01-01T00:00:00Z", *index_args, self.tmp / "req.in"],
                capture_output=True, text=True, timeout=600,
                env={**os.environ, "UV_CACHE_DIR": str(self.tmp / "uv-cache")})
            self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
            self.assertNotIn("does not have an extra", proc.stderr)
            return sorted(line for line in proc.stdout.splitlines() if line and not line.startswith("#"))
        pypi = compile()
        kiln = compile("--index", base + "default/simple/", "--index-strategy", "first-index")
        self.assertEqual(kiln, pypi)
        self.assertTrue(any(line.startswith("triton==") for line in kiln), kiln)
        self.assertTrue(any(line.startswith("torch==") for line in kiln), kiln)

    # --- manylinux floor ---------------------------------------------------------------------

    def test_compiled_wheels_are_tagged_with_their_torchs_floor(self):
        wheels = self.build("kiln-demo", "causal-conv1d")
        base, _, _ = self.start_serve(SHARED_CACHE)
        for package, wheel in wheels.items():
            with self.subTest(package):
                self.assertTrue(wheel.name.endswith("-manylinux_2_28_x86_64.whl"), wheel.name)
                with zipfile.ZipFile(wheel) as z:
                    prov = json.loads(z.read(next(n for n in z.namelist() if n.endswith("kiln.json"))))
                self.assertEqual(prov["platform"]["tag"], "manylinux_2_28_x86_64")
                self.assertNotIn("GLIBC_2.32", prov["platform"]["highest"])
                # auditwheel: the symbols constrain the tag to a level at or below the floor (its
                # first line says linux_x86_64: torch's libraries are outside the wheel).
                proc = subprocess.run([TOOLS / "bin" / "auditwheel", "show", wheel],
                                      capture_output=True, text=True, cwd=self.tmp)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                text = " ".join(proc.stdout.split())
                m = re.search(r'This constrains the platform tag to "manylinux_2_(\d+)_x86_64"', text)
                self.assertIsNotNone(m, proc.stdout)
                self.assertLessEqual(int(m.group(1)), 28, proc.stdout)
                self.assertNotIn("GLIBC_2.32", text)
        # pip, asked for a manylinux_2_28 system, finds both in the index.
        proc = subprocess.run(
            [PYTHON, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--platform",
             "manylinux_2_28_x86_64", "--python-version", "3.11", "--index-url", base + "default/simple/",
             "-d", self.tmp / "dl", "kiln-demo", "causal-conv1d"],
            capture_output=True, text=True, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stdout[-2000:] + proc.stderr[-2000:])
        self.assertEqual(sorted(p.name for p in (self.tmp / "dl").iterdir()), sorted(w.name for w in wheels.values()))

    def test_symbols_above_the_tag_fail_validation(self):
        """A module that references __libc_single_threaded@GLIBC_2.32 in a manylinux_2_28 wheel."""
        wheel = self.build("kiln-demo")["kiln-demo"]
        src = self.tmp / "st.c"
        src.write_text("extern char __libc_single_threaded;\nint single(void) { return __libc_single_threaded; }\n")
        so = self.tmp / "st.so"
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", so, src], check=True)
        extra = so.read_bytes()
        bad = rewrite(wheel, self.tmp / "bad" / wheel.name,
                      lambda entries: entries + [("kiln_demo/st.so", extra)], fix_record=True)
        rc, reports = self.validate(bad)
        self.assertEqual(rc, 1)
        tags = reports[bad.name]["tags"]
        self.assertEqual(tags["verdict"], "fail")
        self.assertIn("manylinux_2_28_x86_64 promises glibc 2.28 but the ELF files need GLIBC_2.32", tags["message"])


if __name__ == "__main__":
    unittest.main()
