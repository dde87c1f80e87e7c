"""kiln target init --torch: targets written from a package index.

A local PEP 691 index serves PyPI's torch 2.10.0 wheels (a CUDA 12.8 build) under a `+cu128`
layout, as PyTorch's own index names them, with PEP 658 metadata taken from the real wheel; the
shipped targets for torch 2.12-2.15 (written by the same command against PyPI) resolve, and
kiln-demo builds and validates with torch 2.15 and NVIDIA's CUDA 13.2.2 wheels.
"""

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import time
import unittest
import urllib.request
import zipfile
from pathlib import Path

from kilntest import SERVER, SHARED_CACHE, KilnTestCase

PYPI_SIMPLE = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple/").rstrip("/") + "/"


def pypi_torch_files(version):
    """PyPI's Linux x86_64 torch wheels of `version`: name -> sha256."""
    req = urllib.request.Request(PYPI_SIMPLE + "torch/",
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        page = json.load(r)
    return {f["filename"]: f["hashes"]["sha256"] for f in page["files"]
            if f["filename"].startswith(f"torch-{version}-") and f["filename"].endswith("x86_64.whl")
            and len(f["filename"][:-4].split("-")) == 5}  # kiln leaves build-tagged re-uploads out


def serve_directory(test, root, log):
    """Serves `root` over HTTP (tests/support/http_server.py, stopped at cleanup), each request a
    JSON line in `log`; returns its base URL."""
    port_file = test.tmp / f"port-{log.stem}"
    proc = subprocess.Popen([sys.executable, str(SERVER), "--root", str(root),
                             "--port-file", str(port_file), "--log", str(log)])
    test.addCleanup(proc.wait)
    test.addCleanup(proc.terminate)
    for _ in range(100):
        if port_file.exists() and port_file.read_text().strip():
            break
        time.sleep(0.05)
    return f"http://127.0.0.1:{port_file.read_text().strip()}/"


class IndexModeTest(KilnTestCase):
    """torch 2.10.0 as PyPI has it, served as 2.10.0+cu128 with PEP 658 metadata."""

    def setUp(self):
        super().setUp()
        self.cache = SHARED_CACHE  # the torch 2.10 wheel is fetched once, for every test
        files = pypi_torch_files("2.10.0")
        self.assertIn("torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl", files)
        # The real wheel's METADATA (the wheel goes to the shared download cache once).
        got = self.kiln("--json", "fetch", "kiln-demo", "--target", "torch2.10-cu128", check=0)
        wheel = next(Path(f["path"]) for f in json.loads(got.stdout)["pinned"]
                     if f.get("project") == "torch")
        with zipfile.ZipFile(wheel) as z:
            metadata = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA")))
        self.served = self.tmp / "www"
        entries = []
        for name, sha in sorted(files.items()):
            labelled = name.replace("torch-2.10.0-", "torch-2.10.0+cu128-")
            (self.served / "whl" / "files").mkdir(parents=True, exist_ok=True)
            (self.served / "whl" / "files" / (labelled + ".metadata")).write_bytes(metadata)
            entries.append({"filename": labelled, "url": "../../files/" + labelled,
                            "hashes": {"sha256": sha},
                            "core-metadata": {"sha256": hashlib.sha256(metadata).hexdigest()}})
        (self.served / "whl" / "cu128" / "torch").mkdir(parents=True)
        (self.served / "whl" / "cu128" / "torch" / "index.json").write_text(json.dumps(
            {"meta": {"api-version": "1.1"}, "name": "torch", "files": entries}))
        self.files = files
        self.log = self.tmp / "www.log"
        self.index = serve_directory(self, self.served, self.log) + "whl/cu128/"

    def init(self, *args, check=None):
        return self.kiln("target", "init", "--torch", "2.10.0+cu128", "--index-url", self.index,
                         *args, check=check, env={"no_proxy": "127.0.0.1"})

    def test_pins_every_cpython_wheel_and_reads_cuda_from_the_metadata(self):
        out = self.tmp / "cu128.toml"
        self.init("--toolkit", "system", "--archs", "9.0", "-o", str(out), check=0)
        text = out.read_text()
        for name, sha in self.files.items():
            labelled = name.replace("torch-2.10.0-", "torch-2.10.0+cu128-")
            self.assertIn(f'file = "{labelled}"\nsha256 = "{sha}"', text)
        self.assertIn('version = "2.10.0+cu128"', text)
        self.assertIn(f'index-url = "{self.index}"', text)
        self.assertIn('[cuda]\ntoolkit = "system"\nversion = "12.8"', text)
        self.assertIn("nvidia-cuda-runtime-cu12==12.8.90", text)  # where CUDA was read
        self.assertIn('interpreter = "python3"', text)
        # Only the metadata was read: no wheel was requested from the index.
        requests = self.log.read_text()
        self.assertIn(".whl.metadata", requests)
        self.assertNotRegex(requests, r'\.whl"')
        # The file is a target kiln reads.
        plan = self.kiln("--json", "resolve", "fla-core", "--target", str(out), check=0)
        self.assertEqual(json.loads(plan.stdout)["items"][0]["package"], "fla-core")

    def test_one_python_and_refusals(self):
        out = self.tmp / "cp312.toml"
        self.init("--python-tags", "cp312", "--toolkit", "system", "-o", str(out), check=0)
        text = out.read_text()
        self.assertIn('[python]\nversion = "3.12"', text)
        self.assertEqual(text.count("[[torch.wheel]]"), 1)
        # The default toolkit for a CUDA 12 torch: Debian's CUDA 12.4 packages, which cannot
        # build sm_120 (it needs 12.8).
        deb = self.tmp / "deb.toml"
        self.init("--archs", "9.0+PTX", "-o", str(deb), check=0)
        self.assertIn('[cuda]\ntoolkit = "debian"\nversion = "12.8"', deb.read_text())
        self.assertIn("pool/non-free/n/nvidia-cuda-toolkit/", deb.read_text())
        proc = self.init("--archs", "9.0;12.0", "-o", str(self.tmp / "b.toml"), check=2)
        self.assertIn("sm_120 needs CUDA 12.8 or newer (this toolkit is 12.4)", proc.stderr)
        # NVIDIA publishes no CUDA 12 compiler as wheels.
        proc = self.init("--toolkit", "wheels", "-o", str(self.tmp / "w.toml"), check=2)
        self.assertIn("publishes no CUDA 12 compiler as wheels", proc.stderr)
        proc = self.init("--python-tags", "cp399", "-o", str(self.tmp / "n.toml"), check=1)
        self.assertIn("no torch 2.10.0+cu128 wheel for cp399", proc.stderr)
        self.assertFalse((self.tmp / "w.toml").exists())
        self.assertFalse((self.tmp / "b.toml").exists())
        self.assertFalse((self.tmp / "n.toml").exists())
        # Never overwrites.
        self.init("--toolkit", "system", "-o", str(out), check=2)


class TargetIndexUrlTest(KilnTestCase):
    """A target's `[torch] index-url` is where `kiln validate --target` asks for its torch."""

    def test_validate_fetches_the_pinned_torch_from_the_targets_index(self):
        torch_name = "torch-2.10.0+cu128-cp311-cp311-manylinux_2_28_x86_64.whl"
        www = self.tmp / "www"
        (www / "whl" / "files").mkdir(parents=True)
        (www / "whl" / "cu128" / "torch").mkdir(parents=True)
        # Not a torch: what is asked for, and where, is the point; kiln then refuses what came.
        with zipfile.ZipFile(www / "whl" / "files" / torch_name, "w") as z:
            z.writestr("torch/version.py", "__version__ = '2.10.0+cu128'\n")
        sha = hashlib.sha256((www / "whl" / "files" / torch_name).read_bytes()).hexdigest()
        (www / "whl" / "cu128" / "torch" / "index.json").write_text(json.dumps(
            {"meta": {"api-version": "1.1"}, "name": "torch",
             "files": [{"filename": torch_name, "url": "../../files/" + torch_name,
                        "hashes": {"sha256": sha}}]}))
        log = self.tmp / "www.log"
        index = serve_directory(self, www, log) + "whl/cu128/"
        target = self.tmp / "cu128.toml"
        target.write_text(f'[target]\narchs = "9.0"\n\n[python]\ninterpreter = "python3"\n\n'
                          f'[torch]\nversion = "2.10.0+cu128"\nindex-url = "{index}"\n\n'
                          f'[[torch.wheel]]\npython = "cp311"\nfile = "{torch_name}"\nsha256 = "{sha}"\n\n'
                          '[cuda]\ntoolkit = "system"\nversion = "12.8"\n')
        # A compiled wheel for cp311 (its contents do not matter before its torch is known).
        wheel = self.tmp / "demo-1.0-cp311-cp311-manylinux_2_28_x86_64.whl"
        entries = [("demo/__init__.py", b""),
                   ("demo-1.0.dist-info/METADATA", b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"),
                   ("demo-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: false\n"
                                                b"Tag: cp311-cp311-manylinux_2_28_x86_64\n")]
        record = "".join(f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}\n"
                         for n, d in entries) + "demo-1.0.dist-info/RECORD,,\n"
        with zipfile.ZipFile(wheel, "w") as z:
            for n, d in entries + [("demo-1.0.dist-info/RECORD", record.encode())]:
                z.writestr(n, d)
        # An empty cache, and pip's configured index somewhere that answers nothing.
        self.cache = self.tmp / "cache"
        proc = self.kiln("validate", "--target", str(target), str(wheel),
                         env={"no_proxy": "127.0.0.1", "PIP_INDEX_URL": "http://127.0.0.1:9/simple/"})
        requests = [json.loads(line)["path"] for line in log.read_text().splitlines()] if log.exists() else []
        self.assertIn("/whl/cu128/torch/", requests, proc.stderr)
        self.assertTrue(any(r.startswith("/whl/files/torch-2.10.0") for r in requests), requests)
        self.assertNotIn("127.0.0.1:9", proc.stderr)
        self.assertNotEqual(proc.returncode, 0)  # the file served is no torch wheel


class TorchArchsTest(KilnTestCase):
    """--archs torch: the archs of torch's own libtorch_cuda.so, as cuobjdump lists them."""

    def test_archs_torch_equals_cuobjdump(self):
        self.cache = SHARED_CACHE  # torch 2.11's wheel and sysroot are there from other tests
        out = self.tmp / "t211.toml"
        proc = self.kiln("--json", "target", "init", "--torch", "2.11.0", "--archs", "torch",
                         "--toolkit", "system", "--python-tags", "cp311", "-o", str(out), check=0)
        facts = json.loads(proc.stdout)
        sysroot = next(SHARED_CACHE.glob("sysroots/torch-7aa2f9bbc6d4595b/torch/lib"))
        elf, ptx = self.sass_and_ptx(sysroot / "libtorch_cuda.so")
        self.assertTrue(elf)
        tokens = []
        def order(arch):  # kiln's: by number, then variant ("" before "a" and "f")
            return int(re.sub(r"\D", "", arch)), arch[-1] if arch[-1] in "af" else ""
        for arch in sorted(set(elf) | set(ptx), key=order):
            if arch in elf:
                tokens.append(arch + ("+ptx" if arch in ptx else ""))
            else:
                tokens.append(arch.replace("sm_", "compute_"))
        self.assertEqual(facts["archs"], ";".join(tokens))
        self.assertIn("-std=c++17", out.read_text())


class ShippedTargetsTest(KilnTestCase):
    """torch 2.12-2.15 from PyPI, written by `kiln target init --torch`."""

    NAMES = ["torch2.12", "torch2.13", "torch2.14", "torch2.15"]

    def test_all_four_resolve(self):
        args = []
        for name in self.NAMES:
            args += ["--target", name]
        plan = json.loads(self.kiln("--json", "resolve", "kiln-demo", *args, check=0).stdout)
        self.assertEqual(sorted(t["name"] for t in plan["targets"]), self.NAMES)
        for t in plan["targets"]:
            self.assertEqual(t["archs"], "sm_80;sm_90;sm_100;sm_120")
        self.assertEqual(len({i["key"] for i in plan["items"]}), 4)
        for name, release in [("torch2.12", "13.0.2"), ("torch2.15", "13.2.2")]:
            text = (self.project / "manifests" / "targets" / f"{name}.toml").read_text()
            self.assertIn(f"NVIDIA's CUDA {release} wheels", text)

    def test_kiln_demo_builds_with_torch_2_15(self):
        self.cache = SHARED_CACHE  # torch 2.15 (539 MB) and the 13.2.2 toolkit are fetched once
        out = json.loads(self.kiln("--json", "build", "kiln-demo", "--target", "torch2.15",
                                   check=0, timeout=1800).stdout)
        wheel = Path(out["items"][0]["wheel"])
        self.assertRegex(wheel.name, r"\+cu132torch2\.15-cp3\d+-cp3\d+t?-manylinux_2_28_x86_64\.whl$")
        report = json.loads(self.kiln("--json", "validate", str(wheel), "--target", "torch2.15",
                                      check=0).stdout)
        verdicts = {c["id"]: c["verdict"] for c in report["wheels"][0]["checks"]}
        self.assertEqual(verdicts["torch-abi"], "pass")
        self.assertEqual(verdicts["gpu-code"], "pass")
        with zipfile.ZipFile(wheel) as z:
            prov = json.loads(z.read(next(n for n in z.namelist() if n.endswith("kiln.json"))))
        self.assertIn("2.15.0", json.dumps(prov))


if __name__ == "__main__":
    unittest.main()
