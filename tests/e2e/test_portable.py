"""kiln's own wheel (scripts/package, docs/portable.md): a manylinux_2_28 binary that needs nothing
above glibc 2.28, installed the ways users install tools (uv tool install, uvx --from, pipx, pip
in a venv), building kiln-demo to the same bytes as the source build, running the doctor against
the stub driver, and served by `kiln serve` on every target's index."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import unittest
import zipfile
from pathlib import Path

from kilntest import KILN, SOURCE_DIR, TOOLS, KilnTestCase
from test_doctor import stub_libcuda

BUILT = {}


def kiln_wheel():
    """$KILN_WHEEL (scripts/test makes it), else made once here by scripts/package."""
    if "wheel" not in BUILT:
        given = os.environ.get("KILN_WHEEL")
        if given:
            BUILT["wheel"] = Path(given)
        else:
            out = subprocess.run([str(SOURCE_DIR / "scripts/package"), str(SOURCE_DIR / "build/package")],
                                 capture_output=True, text=True, check=True, timeout=5400)
            BUILT["wheel"] = Path(out.stdout.strip().splitlines()[-1])
    return BUILT["wheel"]


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


NAME = r"kiln_wheels-0\.1\.0(\+g[0-9a-f]{12}(\.dirty)?)?-py3-none-manylinux_2_28_x86_64\.whl"


class PortableWheelTest(KilnTestCase):
    def setUp(self):
        super().setUp()
        self.wheel = kiln_wheel()
        self.uv = self.tool("uv")
        # uv and pipx keep everything in the test's directory, with the machine's python3.
        self.env = dict(os.environ, UV_TOOL_DIR=str(self.tmp / "uv-tools"),
                        UV_TOOL_BIN_DIR=str(self.tmp / "uv-bin"), UV_PYTHON_DOWNLOADS="never",
                        UV_PYTHON="python3", PIPX_HOME=str(self.tmp / "pipx"),
                        PIPX_BIN_DIR=str(self.tmp / "pipx-bin"))

    def run_ok(self, *cmd, env=None, cwd=None, timeout=900):
        proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env or self.env,
                              cwd=cwd or self.project, timeout=timeout)
        self.assertEqual(proc.returncode, 0, f"{cmd}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        return proc

    def installed_kiln(self):
        self.run_ok(self.uv, "tool", "install", self.wheel)
        kiln = self.tmp / "uv-bin" / "kiln"
        self.assertTrue(kiln.exists(), list((self.tmp / "uv-bin").iterdir()))
        return kiln

    def test_wheel_needs_glibc_2_28_at_most_and_repacks_to_its_own_bytes(self):
        self.assertRegex(self.wheel.name, NAME)
        unpacked = self.tmp / "unpacked"
        with zipfile.ZipFile(self.wheel) as z:
            names = z.namelist()
            for info in z.infolist():
                z.extract(info, unpacked)
                os.chmod(unpacked / info.filename, (info.external_attr >> 16) & 0o777)
        script = next(n for n in names if n.endswith(".data/scripts/kiln"))
        self.assertEqual(names[-1].rsplit("/", 1)[1], "RECORD")
        self.assertTrue(any("/licenses/openssl/copyright" in n for n in names), names)
        elves = [p for p in unpacked.rglob("*") if p.is_file() and p.read_bytes()[:4] == b"\x7fELF"]
        self.assertEqual([p.relative_to(unpacked).as_posix() for p in elves], [script])
        for elf in elves:
            dyn = subprocess.run(["objdump", "-T", str(elf)], capture_output=True, text=True, check=True).stdout
            versions = {tuple(map(int, v.split("."))) for v in re.findall(r"GLIBC_(\d+\.\d+(?:\.\d+)?)", dyn)}
            self.assertTrue(versions, dyn[:2000])
            self.assertLessEqual(max(versions), (2, 28), sorted(versions)[-5:])
            needed = re.findall(r"NEEDED\s+(\S+)", subprocess.run(["objdump", "-p", str(elf)],
                                                                  capture_output=True, text=True).stdout)
            self.assertTrue(set(needed) <= {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2",
                                            "librt.so.1", "ld-linux-x86-64.so.2"}, needed)
        # auditwheel agrees: the wheel is consistent with its tag.
        shown = self.run_ok(self.tool("auditwheel"), "show", self.wheel).stdout
        self.assertRegex(" ".join(shown.split()), r'is consistent with the following platform tag:\s*"manylinux_2_28_x86_64"')
        # kiln packs the unpacked wheel to the same bytes (RECORD is made afresh).
        out = self.tmp / "repacked"
        out.mkdir()
        repacked = self.kiln("wheel", "pack", str(unpacked), "-o", str(out), check=0).stdout.strip()
        self.assertEqual(Path(repacked).name, self.wheel.name)
        self.assertEqual(sha256(repacked), sha256(self.wheel))
        # Peer tools accept it, and kiln's own validation passes it.
        self.run_ok(self.tool("twine"), "check", "--strict", self.wheel)
        self.kiln("validate", str(self.wheel), check=0)

    def test_uv_tool_install_builds_kiln_demo_to_the_source_builds_bytes(self):
        kiln = self.installed_kiln()
        version = self.run_ok(kiln, "--version").stdout
        self.assertRegex(version, r"^kiln 0\.1\.0 \(commit ([0-9a-f]{12}(-dirty)?|unknown), recipe \d+\)")
        commit = re.search(r"commit (\S+),", version).group(1)
        if commit != "unknown":
            self.assertIn("+g" + commit.replace("-dirty", ".dirty"), self.wheel.name)
        env = dict(self.env, KILN_CONFIG="/dev/null")
        # Outside a checkout it uses its own manifests, patches and kernels (share/kiln in its
        # venv): the keys of the checkout's.
        elsewhere = self.tmp / "elsewhere"
        elsewhere.mkdir()
        packages = ("causal-conv1d", "kiln-demo", "flash-linear-attention")
        theirs = json.loads(self.run_ok(kiln, "--json", "resolve", *packages, env=env, cwd=elsewhere).stdout)
        source = json.loads(self.kiln("--json", "resolve", *packages, check=0).stdout)
        self.assertEqual([(i["package"], i["key"]) for i in theirs["items"]],
                         [(i["package"], i["key"]) for i in source["items"]])
        self.assertTrue((self.tmp / "uv-tools/kiln-wheels/share/kiln/patches").is_dir())
        ours = json.loads(self.run_ok(kiln, "--cache", self.fresh_cache("installed"), "build", "kiln-demo",
                                      "--json", env=env, timeout=3000).stdout)
        source = json.loads(self.kiln("--cache", str(self.fresh_cache("source")), "build", "kiln-demo",
                                      "--json", check=0, timeout=3000).stdout)
        a, b = ours["items"][0], source["items"][0]
        self.assertFalse(a["cache_hit"])
        self.assertEqual(a["key"], b["key"])
        self.assertEqual(sha256(a["wheel"]), sha256(b["wheel"]))
        report = json.loads(self.run_ok(kiln, "--json", "validate", a["wheel"], env=env).stdout)
        self.assertTrue(report["ok"], report)
        self.run_ok(kiln, "cache", "ls", env=dict(env, KILN_CACHE=str(self.tmp / "installed")))

    def test_uvx_pipx_and_pip_run_it_and_the_doctor_reads_the_stub_driver(self):
        stub = stub_libcuda()
        if not stub or not stub.exists():
            self.skipTest("the stub libcuda.so.1 is not built (tests/CMakeLists.txt builds it)")
        env = dict(self.env, KILN_LIBCUDA=str(stub), KILN_STUB_CUDA_DEVICES="NVIDIA H200:9.0",
                   KILN_STUB_CUDA_VERSION="13000", UV_CACHE_DIR=str(self.tmp / "uv-cache"))
        proc = subprocess.run([self.tool("uvx"), "--from", str(self.wheel), "kiln", "doctor",
                               "--json", "--python", "python3"], capture_output=True, text=True, env=env,
                              cwd=self.tmp, timeout=900)
        self.assertIn(proc.returncode, (0, 1), proc.stderr)
        doc = json.loads(proc.stdout)
        self.assertEqual([(g["name"], g["sm"]) for g in doc["gpus"]], [("NVIDIA H200", "sm_90")])
        self.assertEqual(doc["driver"]["cuda"], "13.0")
        # python3 is the user's, not the one of uvx's environment that kiln runs from (its bin is
        # first on PATH there, and it has no torch).
        self.assertNotIn(str(self.tmp / "uv-cache"), doc["python"]["executable"])
        self.assertEqual(Path(doc["python"]["executable"]).resolve(),
                         Path(subprocess.run(["python3", "-c", "import sys; print(sys.executable)"],
                                             capture_output=True, text=True).stdout.strip()).resolve())
        # pipx, and pip into a fresh venv.
        self.run_ok(self.tool("pipx"), "install", self.wheel, cwd=self.tmp)
        self.assertRegex(self.run_ok(self.tmp / "pipx-bin" / "kiln", "--version").stdout, r"^kiln 0\.1\.0 ")
        self.run_ok("python3", "-m", "venv", self.tmp / "venv")
        self.run_ok(self.tmp / "venv/bin/pip", "install", "-q", "--no-index", self.wheel)
        self.assertRegex(self.run_ok(self.tmp / "venv/bin/kiln", "--version").stdout, r"^kiln 0\.1\.0 ")

    def test_serve_offers_it_on_every_targets_index(self):
        cache = self.tmp / "served"
        (cache / "kiln-wheels").mkdir(parents=True)
        shutil.copy(self.wheel, cache / "kiln-wheels" / self.wheel.name)
        (cache / "kiln-wheels" / "stray-1.0-py3-none-any.whl").write_bytes(b"not a kiln wheel")
        url, _, log = self.start_serve(cache)
        env = dict(self.env, UV_CACHE_DIR=str(self.tmp / "uv-cache"))
        # `default` has no wheels of its own here: a target of the manifests directory still has kiln.
        for target in ("default", "gpu-host"):
            proc = self.run_ok(self.tool("uvx"), "--index-url", f"{url}{target}/simple/",
                               "--from", "kiln-wheels", "kiln", "--version", env=env, cwd=self.tmp)
            self.assertRegex(proc.stdout, r"^kiln 0\.1\.0 ")
        page = json.loads(subprocess.run(
            ["curl", "-fsS", "-H", "Accept: application/vnd.pypi.simple.v1+json",
             f"{url}default/simple/kiln-wheels/"], capture_output=True, text=True, check=True).stdout)
        self.assertEqual([f["filename"] for f in page["files"]], [self.wheel.name])
        self.assertEqual(page["files"][0]["hashes"]["sha256"], sha256(self.wheel))
        self.assertIn("stray-1.0-py3-none-any.whl: not a kiln-wheels wheel", log.read_text())


if __name__ == "__main__":
    unittest.main()
