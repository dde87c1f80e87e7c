"""kiln doctor on machines without a GPU: no driver, a stub libcuda.so.1 (tests/stub/libcuda_stub.cpp)
with an H200 and an sm_120 GPU, an environment without causal-conv1d, the standalone doctor.py
fetched from `kiln serve`, and a kiln-built wheel installed into a venv."""

import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

from kilntest import KILN, KilnTestCase, SHARED_CACHE, SOURCE_DIR

TORCH_ENV = Path(os.environ.get("KILN_TORCH_ENV") or Path.home() / ".cache/kiln/torch-venv")
TORCH_PYTHON = TORCH_ENV / "bin" / "python"
H200_AND_SM120 = "NVIDIA H200:9.0;NVIDIA RTX PRO 6000 Blackwell Server Edition:12.0"


def stub_libcuda():
    """The stub's path: $KILN_LIBCUDA_STUB (ctest), else beside the kiln binary's build tree."""
    env = os.environ.get("KILN_LIBCUDA_STUB")
    if env:
        return Path(env)
    if KILN:
        found = sorted(Path(KILN).resolve().parents[1].glob("tests/stub/libcuda.so.1"))
        if found:
            return found[0]
    return None


class DoctorTest(KilnTestCase):
    def setUp(self):
        super().setUp()
        self.stub = stub_libcuda()

    def need_stub(self):
        if not self.stub or not self.stub.exists():
            self.skipTest("the stub libcuda.so.1 is not built (tests/CMakeLists.txt builds it)")

    def need_torch(self):
        if not TORCH_PYTHON.exists():
            self.skipTest(f"no torch environment at {TORCH_ENV} (scripts/test creates it)")

    def doctor(self, *args, devices=None, cuda=None, init=None, check=None, env=None):
        """kiln doctor with the stub as the driver (or what --libcuda says); returns the process."""
        full = {"KILN_STUB_CUDA_DEVICES": devices or "", "KILN_STUB_CUDA_VERSION": cuda or "13000"}
        if init is not None:
            full["KILN_STUB_CUDA_INIT"] = str(init)
        if self.stub:
            full["KILN_LIBCUDA"] = str(self.stub)
        full.update(env or {})
        return self.kiln("doctor", *args, env=full, check=check, timeout=900)

    def doctor_json(self, *args, **kw):
        proc = self.doctor("--json", *args, **kw)
        self.assertIn(proc.returncode, (0, 1), proc.stderr)
        return proc.returncode, json.loads(proc.stdout)

    # --- the driver --------------------------------------------------------------------------------

    def test_without_a_driver_it_says_so_and_reports_the_rest(self):
        proc = self.doctor("--python", "python3", "--libcuda", str(self.tmp / "none" / "libcuda.so.1"),
                           check=1)
        out = proc.stdout
        self.assertRegex(out, r"(?m)^python +\S+ 3\.\d+\.\d+ \(cp3\d+t?\), glibc 2\.\d+$")
        self.assertRegex(out, r"(?m)^gpu +none: cannot load .*none/libcuda\.so\.1")
        self.assertRegex(out, r"(?m)^causal-conv1d +not installed$")
        self.assertIn("fast path: missing (", out)
        self.assertIn("no usable NVIDIA driver or GPU: cannot load", out)
        # Both paths are missing: the build and install commands name both paths' packages, once each.
        self.assertRegex(out, r"(?m)^  kiln build --target \S+ causal-conv1d flash-linear-attention mamba-ssm$")
        self.assertEqual(proc.stderr, "")
        _, doc = self.doctor_json("--python", "python3", "--libcuda", str(self.tmp / "none.so"))
        self.assertFalse(doc["driver"]["available"])
        self.assertEqual(doc["gpus"], [])
        self.assertFalse(doc["kiln"]["ok"])
        self.assertFalse(doc["ok"])

    def test_stub_driver_with_an_h200_and_an_sm_120_gpu(self):
        self.need_stub()
        proc = self.doctor("--python", "python3", devices=H200_AND_SM120, cuda="12080", check=1)
        out = proc.stdout
        self.assertRegex(out, r"(?m)^driver +580\.159\.04, CUDA 12\.8 \(.*libcuda\.so")
        self.assertRegex(out, r"(?m)^gpu 0 +NVIDIA H200, sm_90 \(compute capability 9\.0\)$")
        self.assertRegex(out, r"(?m)^gpu 1 +NVIDIA RTX PRO 6000 Blackwell Server Edition, sm_120 "
                              r"\(compute capability 12\.0\)$")
        self.assertIn("--archs '9.0;12.0' --toolkit system", out)
        self.assertNotIn("no usable NVIDIA driver", out)
        _, doc = self.doctor_json("--python", "python3", devices=H200_AND_SM120, cuda="13000")
        self.assertEqual(doc["driver"]["release"], "580.159.04")
        self.assertEqual(doc["driver"]["cuda"], "13.0")
        self.assertEqual([(g["name"], g["cc"], g["sm"]) for g in doc["gpus"]],
                         [("NVIDIA H200", "9.0", "sm_90"),
                          ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0", "sm_120")])
        # Only the H200: the target is for sm_90; a driver without GPUs says why.
        _, doc = self.doctor_json("--python", "python3", devices="NVIDIA H200:9.0")
        self.assertTrue(doc["next"]["target"].endswith("-sm90"), doc["next"])
        self.assertIn("--archs 9.0", doc["next"]["commands"][0])
        _, doc = self.doctor_json("--python", "python3", init=100)
        self.assertEqual(doc["driver"]["error"], "cuInit: no CUDA-capable device is detected (CUresult 100)")

    # --- an environment ----------------------------------------------------------------------------

    def test_an_environment_without_causal_conv1d(self):
        self.need_stub()
        self.need_torch()
        proc = self.doctor("--python", str(TORCH_PYTHON), "--server", "http://builder:8000",
                           devices="NVIDIA H200:9.0", check=1)
        out = proc.stdout
        self.assertRegex(out, r"(?m)^torch +2\.11\.0\+cu130, imports, CUDA 13\.0$")
        # kiln's index alone: kiln sends torch and the rest upstream; pip needs the plain-http host
        # of another machine trusted, uv does not.
        self.assertIn("fast path: missing (causal_conv1d and fla not installed: pip install "
                      "--index-url http://builder:8000/cu130-torch2.11-cp311-sm90/simple/ "
                      "--trusted-host builder:8000 causal-conv1d flash-linear-attention", out)
        # The Mamba-2 hybrids' line, beside it, with its own install line.
        self.assertIn("\nMamba-2 fast path: missing (causal_conv1d and mamba_ssm not installed: pip install "
                      "--index-url http://builder:8000/cu130-torch2.11-cp311-sm90/simple/ "
                      "--trusted-host builder:8000 causal-conv1d mamba-ssm; transformers not installed; "
                      "torch.cuda.is_available() is False)\n", out)
        self.assertRegex(out, r"(?m)^mamba-ssm +not installed$")
        self.assertIn("  kiln target init --name cu130-torch2.11-cp311-sm90 --torch 2.11.0+cu130 "
                      "--index-url https://download.pytorch.org/whl/cu130 --python-tags cp311 "
                      "--archs 9.0 --toolkit system\n", out)
        self.assertIn("  kiln build --target cu130-torch2.11-cp311-sm90 causal-conv1d "
                      "flash-linear-attention mamba-ssm\n", out)
        self.assertIn("  pip install --index-url http://builder:8000/cu130-torch2.11-cp311-sm90/simple/ "
                      "--trusted-host builder:8000 causal-conv1d flash-linear-attention mamba-ssm\n", out)
        self.assertIn("  uv pip install --index-url http://builder:8000/cu130-torch2.11-cp311-sm90/simple/ "
                      "causal-conv1d flash-linear-attention mamba-ssm\n", out)

    def test_standalone_doctor_py_from_kiln_serve_reports_the_same(self):
        self.need_stub()
        url, _, log = self.start_serve(self.fresh_cache("served"))
        hint = f"curl -s {url}doctor.py | python3 -"
        for _ in range(100):  # printed just after the "serving" line start_serve waits for
            if hint in log.read_text():
                break
            time.sleep(0.05)
        self.assertIn(hint, log.read_text())
        with urllib.request.urlopen(url + "doctor.py") as r:
            text = r.read()
            self.assertTrue(r.headers["Content-Type"].startswith("text/x-python"))
        self.assertEqual(text, (SOURCE_DIR / "builder" / "doctor" / "doctor.py").read_bytes())
        python = str(TORCH_PYTHON) if TORCH_PYTHON.exists() else "python3"
        env = dict(os.environ, KILN_LIBCUDA=str(self.stub), KILN_STUB_CUDA_DEVICES=H200_AND_SM120,
                   KILN_STUB_CUDA_VERSION="13000")
        # As `curl -s http://buildhost:8000/doctor.py | python3 - --json`.
        alone = subprocess.run([python, "-", "--json"], input=text, env=env, capture_output=True,
                               timeout=900)
        self.assertEqual(alone.returncode, 1, alone.stderr)
        standalone = json.loads(alone.stdout)
        rc, doc = self.doctor_json("--python", python, devices=H200_AND_SM120)
        self.assertEqual(rc, 1)
        self.assertIn("kiln", doc)
        self.assertEqual(doc["kiln"]["version"], self.kiln("--version").stdout.split()[1])
        del doc["kiln"]  # the one field only kiln adds
        self.assertEqual(doc, standalone)
        self.assertEqual(standalone["doctor_version"], 1)
        # Its human report, alone: the same rows and fast path line, from Python 3.8's stdlib.
        human = subprocess.run([python, "-"], input=text, env=env, capture_output=True, timeout=900)
        self.assertEqual(human.returncode, 1)
        self.assertIn(b"fast path: missing (causal_conv1d and fla not installed", human.stdout)

    def test_a_kiln_wheel_installed_into_a_venv(self):
        self.need_stub()
        self.need_torch()
        build = self.kiln("--cache", str(SHARED_CACHE), "--json", "build", "kiln-demo", check=0,
                          timeout=3000)
        wheel = json.loads(build.stdout)["items"][0]["wheel"]
        venv = self.tmp / "venv"
        subprocess.run([str(TORCH_PYTHON), "-m", "venv", "--without-pip", str(venv)], check=True)
        site = next((venv / "lib").glob("python3*/site-packages"))
        torch_site = next((TORCH_ENV / "lib").glob("python3*/site-packages"))
        (site / "torch-env.pth").write_text(f"{torch_site}\n")  # torch, from the test environment
        subprocess.run([str(TORCH_PYTHON), "-m", "pip", "--python", str(venv / "bin" / "python"),
                        "install", "--no-deps", "--no-index", "--quiet", wheel],
                       check=True, capture_output=True)
        python = str(venv / "bin" / "python")
        rc, doc = self.doctor_json("--python", python, devices=H200_AND_SM120)
        self.assertEqual(rc, 1)
        [demo] = doc["kiln_wheels"]
        self.assertEqual(demo["name"], "kiln-demo")
        self.assertEqual(demo["import"], {"ok": True})
        self.assertTrue(demo["torch_match"])
        self.assertEqual(demo["modules"], ["kiln_demo", "kiln_demo_cuda"])
        [static] = doc["kiln"]["installed"]
        verdicts = {(c["id"], c.get("gpu")): c["verdict"] for c in static["checks"]}
        self.assertEqual(verdicts[("installed", None)], "pass")
        self.assertEqual(verdicts[("torch-abi", None)], "pass", static)
        self.assertEqual(verdicts[("gpu-target", "sm_90")], "pass")
        self.assertEqual(verdicts[("gpu-target", "sm_120")], "fail")  # the default target is sm_90
        out = self.doctor("--python", python, devices=H200_AND_SM120).stdout
        self.assertRegex(out, r"(?m)^kiln wheel +kiln-demo 0\.1\.0\+cu130torch2\.11, imports, "
                              r"built for this torch$")
        self.assertRegex(out, r"(?m)^kiln-demo \(static\) +torch-abi pass, gpu-target sm_90 pass, "
                              r"gpu-target sm_120 fail: .*will not run on sm_120")
        # Another torch than the wheel's: the Python half says so from kiln.json.
        version_py = site / "torch" / "version.py"
        version_py.parent.mkdir()
        (version_py.parent / "__init__.py").write_text("raise ImportError('not this torch')\n")
        version_py.write_text("__version__ = '2.10.0+cu128'\ncuda = '12.8'\n")
        (site / "torch-2.10.0.dist-info").mkdir()
        (site / "torch-2.10.0.dist-info" / "METADATA").write_text("Name: torch\nVersion: 2.10.0\n")
        _, doc = self.doctor_json("--python", python, devices="NVIDIA H200:9.0")
        [demo] = doc["kiln_wheels"]
        self.assertFalse(demo["torch_match"])
        self.assertFalse(demo["import"]["ok"])
        self.assertIn("not this torch", doc["packages"]["torch"]["import"]["error"])


if __name__ == "__main__":
    import unittest
    unittest.main()
