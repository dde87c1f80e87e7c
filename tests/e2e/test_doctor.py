"""kiln doctor on machines without a GPU: no driver, a stub libcuda.so.1 (tests/stub/libcuda_stub.cpp)
with an H200 and an sm_120 GPU, an environment without causal-conv1d, the standalone doctor.py
fetched from `kiln serve`, and a kiln-built wheel installed into a venv."""

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
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

    # --- --server: a target the server lists that fits this host ------------------------------

    def fake_host(self, torch="2.11.0+cu130", cuda="13.0", name="host"):
        """A venv of this interpreter (cp311 where the shared cache's wheels are) with a torch that
        only states its version (version.py) and does not import: what doctor.py reads of a
        host's torch without importing it."""
        venv = self.tmp / name
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        site = next((venv / "lib").glob("python3*/site-packages"))
        (site / "torch").mkdir()
        (site / "torch" / "__init__.py").write_text("raise ImportError('a fake host torch')\n")
        (site / "torch" / "version.py").write_text(f"__version__ = '{torch}'\ncuda = '{cuda}'\n")
        public = torch.split("+")[0]
        (site / f"torch-{public}.dist-info").mkdir()
        (site / f"torch-{public}.dist-info" / "METADATA").write_text(f"Name: torch\nVersion: {public}\n")
        return str(venv / "bin" / "python")

    def served_cache(self):
        """A cache holding only the default target's causal-conv1d, fla-core and
        flash-linear-attention: their entries of the shared cache (built there once, hits after),
        copied."""
        build = self.kiln("--cache", str(SHARED_CACHE), "--json", "build", "causal-conv1d", "fla-core",
                          "flash-linear-attention", check=0, timeout=3000)
        cache = self.fresh_cache("served")
        (cache / "wheels").mkdir()
        for item in json.loads(build.stdout)["items"]:
            entry = Path(item["wheel"]).parent
            shutil.copytree(entry, cache / "wheels" / entry.name)
        return cache

    def pip_download(self, argv, dest):
        """Runs the printed `pip install ARGS` as `pip download --no-deps ARGS` (what it would fetch
        from the server, without torch and the rest from upstream) in a clean pip environment."""
        self.assertEqual(argv[:2], ["pip", "install"])
        env = dict(os.environ, PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
        env.pop("PIP_INDEX_URL", None)
        env.pop("PIP_EXTRA_INDEX_URL", None)
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir",
                               "-d", str(dest), *argv[2:]], capture_output=True, text=True, env=env,
                              timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        return sorted(p.name for p in Path(dest).iterdir())

    def test_server_with_a_matching_target_names_its_index(self):
        self.need_stub()
        base, _, _ = self.start_serve(self.served_cache())
        python = self.fake_host()
        rc, doc = self.doctor_json("--python", python, "--server", base, devices="NVIDIA H200:9.0")
        self.assertEqual(rc, 1)
        nxt = doc["next"]
        index = f"{base}default/simple/"
        # The Gated DeltaNet path's packages are all there: only the install commands, from its index.
        self.assertEqual(nxt["target"], "default")
        self.assertEqual(nxt["argv_for"]["fast_path"],
                         [["pip", "install", "--index-url", index, "causal-conv1d", "flash-linear-attention"],
                          ["uv", "pip", "install", "--index-url", index, "causal-conv1d",
                           "flash-linear-attention"]])
        self.assertIn("target default of", nxt["notes_for"]["fast_path"])
        # mamba-ssm is not there, but the declared target fits: build it there, then install.
        both = nxt["argv_for"]["fast_path+mamba2_fast_path"]
        self.assertEqual(both[0], ["kiln", "build", "--target", "default", "causal-conv1d",
                                   "flash-linear-attention", "mamba-ssm"])
        self.assertEqual(both[1][:4], ["pip", "install", "--index-url", index])
        self.assertIn("lacks mamba-ssm", nxt["notes_for"]["fast_path+mamba2_fast_path"])
        # The command works against that server.
        got = self.pip_download(nxt["argv_for"]["fast_path"][0], self.tmp / "dl")
        self.assertEqual(len(got), 2, got)
        self.assertTrue(got[0].startswith("causal_conv1d-1.7.0+cu130torch2.11-cp311-cp311-"), got)
        self.assertTrue(got[1].startswith("flash_linear_attention-"), got)
        # The human report: the note as a comment, the lines kiln quotes, no target init.
        out = self.doctor("--python", python, "--server", base, devices="NVIDIA H200:9.0", check=1).stdout
        self.assertIn(f"fast path: missing (causal_conv1d and fla not installed: pip install --index-url "
                      f"{index} causal-conv1d flash-linear-attention", out)
        self.assertIn(f"next:\n  # target default of {base} fits this host but lacks mamba-ssm", out)
        self.assertIn("\n  kiln build --target default causal-conv1d flash-linear-attention mamba-ssm\n", out)
        self.assertIn(f"\n  pip install --index-url {index} causal-conv1d flash-linear-attention mamba-ssm\n", out)
        self.assertNotIn("kiln target init", out)
        self.assertNotIn("kiln serve", out)
        # KILN_SERVER, for the doctor.py that `curl …/doctor.py | python3 -` runs, is the same.
        alone = subprocess.run([python, str(SOURCE_DIR / "builder" / "doctor" / "doctor.py"), "--json"],
                               env=dict(os.environ, KILN_SERVER=base, KILN_LIBCUDA=str(self.stub),
                                        KILN_STUB_CUDA_DEVICES="NVIDIA H200:9.0"),
                               capture_output=True, text=True, timeout=900)
        self.assertEqual(json.loads(alone.stdout)["next"]["argv_for"], nxt["argv_for"])

    def test_server_without_a_fitting_target_keeps_the_hosts_own_target(self):
        self.need_stub()
        base, _, _ = self.start_serve(self.served_cache())
        # A T4 (sm_75): the default target's wheels hold SASS for sm_90 only.
        python = self.fake_host()
        proc = self.doctor("--python", python, "--server", base, devices="Tesla T4:7.5", check=1)
        out = proc.stdout
        self.assertIn(f"  # no target {base} serves fits this host (torch 2.11.0, CUDA 13.0, cp311, sm_75): "
                      "default: no SASS for sm_75", out)
        self.assertIn("  kiln target init --name cu130-torch2.11-cp311-sm75 --torch 2.11.0+cu130 ", out)
        self.assertIn("  kiln build --target cu130-torch2.11-cp311-sm75 causal-conv1d ", out)
        self.assertIn(f"  pip install --index-url {base}cu130-torch2.11-cp311-sm75/simple/ ", out)
        # Another torch: no target of its version.
        python = self.fake_host(torch="2.9.1+cu126", cuda="12.6", name="older")
        _, doc = self.doctor_json("--python", python, "--server", base, devices="NVIDIA H200:9.0")
        self.assertIn("default: torch 2.11.0, not 2.9.1", doc["next"]["note"])
        self.assertEqual(doc["next"]["target"], "cu126-torch2.9-cp311-sm90")
        self.assertEqual(doc["next"]["argv_for"]["fast_path"][0][:3], ["kiln", "target", "init"])

    def hostile_server(self, answers):
        """A server whose "/" answers each request with the next (content type, body) of `answers`."""
        queue = list(answers)

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                ctype, body = queue.pop(0) if queue else ("text/plain", b"none left")
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        return f"http://127.0.0.1:{server.server_port}/"

    def test_a_hostile_server_answer_is_never_a_command(self):
        self.need_stub()
        python = self.fake_host()
        json_type = "application/vnd.pypi.simple.v1+json"
        fits = {"torch": "2.11.0", "cuda": "13.0", "python": ["cp311"], "archs": ["sm_90"], "declared": True,
                "projects": [{"name": n, "versions": ["1"], "abi": ["none"]}
                             for n in ("causal-conv1d", "flash-linear-attention", "fla-core", "mamba-ssm")]}
        marker = self.tmp / "pwned"
        evil = [dict(fits, name=n) for n in (f"x;touch {marker}", f"$(touch {marker})", "x\ny", "`id`", "-rf")]
        evil.append(dict(fits, name="ok", torch=f"2.11.0$(touch {marker})"))  # a field that is no version
        cases = [
            ("text/html", b"<html>kiln index</html>", "not its targets as"),
            (json_type, b"{not json", "is not JSON"),
            (json_type, b"[" * 100000 + b"]" * 100000, "is not JSON"),
            (json_type, b'{"targets": "no"}', "has no list of targets"),
            (json_type, b" " * (5 << 20), "larger than"),
            (json_type, json.dumps({"targets": evil}).encode(), "no target"),
        ]
        base = self.hostile_server([(c, b) for c, b, _ in cases for _ in range(2)])
        for ctype, body, expected in cases:
            with self.subTest(expected=expected):
                _, doc = self.doctor_json("--python", python, "--server", base, devices="NVIDIA H200:9.0")
                self.assertIn(expected, doc["next"]["note"])
                self.assertEqual(doc["next"]["argv_for"]["fast_path"][0][:3], ["kiln", "target", "init"])
                out = self.doctor("--python", python, "--server", base, devices="NVIDIA H200:9.0",
                                  check=1).stdout
                self.assertIn("  kiln target init --name cu130-torch2.11-cp311-sm90 ", out)
                commands = [l for l in out.split("\nnext:\n")[1].splitlines() if not l.startswith("  # ")]
                self.assertEqual(len(commands), 5, out)
                self.assertFalse(any("touch" in l or "pwned" in l for l in commands), out)
                self.assertNotIn("\x1b", out)
        # No name of those is a target name (nor is "-rf", an option): none is chosen, none runs.
        self.assertFalse(marker.exists())
        # A target name with a '+' fits: percent-encoded in the index URL, quoted in the build line.
        served = {"targets": [dict(fits, name="t+1", projects=fits["projects"][:3])]}
        base = self.hostile_server([(json_type, json.dumps(served).encode())] * 2)
        _, doc = self.doctor_json("--python", python, "--server", base, devices="NVIDIA H200:9.0")
        self.assertEqual(doc["next"]["argv_for"]["fast_path"][0],
                         ["pip", "install", "--index-url", f"{base}t%2B1/simple/", "causal-conv1d",
                          "flash-linear-attention"])
        self.assertEqual(doc["next"]["argv_for"]["fast_path+mamba2_fast_path"][0],
                         ["kiln", "build", "--target", "t+1", "causal-conv1d", "flash-linear-attention",
                          "mamba-ssm"])


if __name__ == "__main__":
    import unittest
    unittest.main()
