"""kiln build on the kiln-demo fixture: a real CUDA extension built against the pinned torch,
reproducible bit for bit, cached, and accepted by the packaging tools."""

import hashlib
import json
import os
import re
import subprocess
import threading
import time
import unittest
import zipfile
from pathlib import Path

from kilntest import KILN, SOURCE_DIR, KilnTestCase


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class BuildFixtureTest(KilnTestCase):
    def build(self, cache, *args, project=None):
        proc = self.kiln("--cache", str(cache), "build", "kiln-demo", "--json", *args,
                         check=0, cwd=project, timeout=3000)
        return json.loads(proc.stdout)

    def build_logged(self, cache):
        """A cold build as CI runs it (stderr a pipe, no terminal): its result and the longest
        time its log was silent, from the start to the end."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("KILN_")}
        env.update(KILN_CONFIG="/dev/null", KILN_CACHE=str(cache))
        start = time.monotonic()
        proc = subprocess.Popen([KILN, "--cache", str(cache), "build", "kiln-demo", "--json"],
                                cwd=self.project, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        times, lines = [start], []

        def read_log():
            for line in proc.stderr:
                times.append(time.monotonic())
                lines.append(line)
        reader = threading.Thread(target=read_log)
        reader.start()
        out = proc.stdout.read()
        proc.wait(timeout=3000)
        reader.join()
        times.append(time.monotonic())
        self.assertEqual(proc.returncode, 0, "".join(lines))
        gaps = [b - a for a, b in zip(times, times[1:])]
        return json.loads(out), max(gaps), "".join(lines)

    def test_build_is_reproducible_cached_sharded_per_arch_and_well_formed(self):
        first, silent, log = self.build_logged(self.fresh_cache("c1"))
        # Issue 51: a CI log is never silent for long (a status line after 20 s without a line).
        self.assertLessEqual(silent, 30, log)
        item = first["items"][0]
        wheel = Path(item["wheel"])
        self.assertRegex(wheel.name, r"^kiln_demo-0\.1\.0\+cu130torch2\.11-cp3\d+-cp3\d+-manylinux_2_\d+_x86_64\.whl$")
        self.assertFalse(item["cache_hit"])
        self.assertGreaterEqual(first["compile_jobs"], 3)  # two TUs and the link

        # The same inputs from another checkout path into another cache: the same bytes.
        other = self.copy_project("elsewhere")
        second = self.build(self.fresh_cache("c2"), project=other)
        self.assertEqual(second["items"][0]["key"], item["key"])
        self.assertEqual(sha256(second["items"][0]["wheel"]), sha256(wheel))

        # A cache hit does no fetch and no compile.
        again = self.build(self.tmp / "c1")
        self.assertEqual((again["fetches"], again["compile_jobs"], again["cache_hits"]), (0, 0, 1))
        self.assertEqual(again["items"][0]["wheel"], item["wheel"])

        with zipfile.ZipFile(wheel) as z:
            names = z.namelist()
            info = "kiln_demo-0.1.0+cu130torch2.11.dist-info"
            self.assertIn("kiln_demo/__init__.py", names)
            self.assertTrue(any(re.fullmatch(r"kiln_demo_cuda\.cpython-3\d+-x86_64-linux-gnu\.so", n) for n in names))
            self.assertEqual(names[-1], f"{info}/RECORD")
            metadata = z.read(f"{info}/METADATA").decode()
            self.assertIn("Requires-Dist: torch==2.11.*", metadata)
            self.assertIn("Version: 0.1.0+cu130torch2.11", metadata)
            provenance = json.loads(z.read(f"{info}/kiln.json"))
            self.assertEqual(provenance["build_key"], item["key"])
            self.assertEqual(provenance["archs"], "sm_90")
            # Format 2: what a rebuild needs beside the key's inputs, and this host's facts.
            self.assertEqual(provenance["format"], 2)
            self.assertEqual(provenance["rebuild"]["patches"], [])
            self.assertEqual(provenance["rebuild"]["source"], {})  # a local tree: nobody fetches it
            self.assertEqual(provenance["rebuild"]["torch_index_url"], "")
            self.assertRegex(provenance["rebuild"]["kiln_commit"], r"^([0-9a-f]{12}(-dirty)?|unknown)$")
            self.assertEqual(provenance["tools"]["glibc"], os.confstr("CS_GNU_LIBC_VERSION").split()[1])
            self.assertTrue(provenance["tools"]["ld"].startswith("GNU ld"), provenance["tools"]["ld"])
            self.assertRegex(provenance["tools"]["cuda_include"], r"^[0-9a-f]{64}$")
            self.assertIn(f"{info}/licenses/LICENSE", names)

        # Peer tools accept it.
        subprocess.run([self.tool("twine"), "check", "--strict", str(wheel)], check=True, capture_output=True)
        subprocess.run([self.tool("check-wheel-contents"), "--ignore", "W002,W009", str(wheel)], check=True, capture_output=True)
        unpack = self.tmp / "unpacked"
        subprocess.run([self.tool("wheel"), "unpack", "-d", str(unpack), str(wheel)], check=True, capture_output=True)
        subprocess.run([self.tool("python"), "-c",
                        "import sys; from installer.sources import WheelFile\n"
                        "with WheelFile.open(sys.argv[1]) as w: w.validate_record()", str(wheel)],
                       check=True, capture_output=True)

        # The device code is exactly sm_90 SASS, from the kernel file's shards (their count is a
        # key input, chosen from the cores) and the host C++ file.
        elf, ptx = self.cuobjdump(wheel, unpack)
        self.assertEqual(elf, ["sm_90"])
        self.assertEqual(ptx, [])
        # The shard count is resolve's (a key input chosen from the cores; resolve::shard_count's
        # own unit tests check the rule): the build used what `kiln resolve` says.
        plan = json.loads(self.kiln("--json", "resolve", "kiln-demo", check=0).stdout)
        self.assertEqual(provenance["inputs"]["shards"], plan["items"][0]["inputs"]["shards"])
        shards = plan["items"][0]["inputs"]["shards"]["kiln_demo_cuda/csrc/kiln_demo_kernel.cu"]
        self.assertTrue(1 <= shards <= min(4, os.cpu_count()), shards)
        labels = sorted(j["job"] for j in first["jobs"])
        units = ["kiln_demo_kernel.cu"] if shards == 1 else [f"kiln_demo_kernel.cu[{k}/{shards}]" for k in range(shards)]
        # Per unit: a device part, a host part and a fat binary (and, when the device parts are
        # fewer than the slots, a front end that gives the host part its stub early).
        self.assertEqual(sorted(l for l in labels if l.endswith(" sm_90") and l.startswith("nvcc ")),
                         sorted(f"nvcc {u} sm_90" for u in units))
        self.assertEqual(sorted(l for l in labels if l.endswith(" host")), sorted(f"nvcc {u} host" for u in units))
        self.assertEqual(sorted(l for l in labels if l.startswith("fatbinary ")), sorted(f"fatbinary {u} sm_90" for u in units))
        fronts = sorted(l for l in labels if l.endswith(" front end"))
        self.assertIn(fronts, ([], sorted(f"nvcc {u} front end" for u in units)))

        # The shards hold the kernels of the whole file, each with the same SASS (scripts/kernels:
        # every kernel's machine code and relocations, from the cubins cuobjdump writes).
        if shards > 1:
            whole = self.build(self.fresh_cache("c4"), "--jobs", "1")
            provenance1 = self.provenance(whole["items"][0]["wheel"])
            self.assertEqual(set(provenance1["inputs"]["shards"].values()), {1})
            self.assertNotEqual(sha256(whole["items"][0]["wheel"]), sha256(wheel))
            self.assertEqual(self.kernels("--same", wheel, whole["items"][0]["wheel"]).returncode, 0)
            found = json.loads(self.kernels(wheel).stdout)
            self.assertEqual([len(k) for m in found.values() for k in m.values()], [4])  # 4 dtypes

        # Adding an arch compiles only that arch's device parts and the fat binaries that hold
        # them (the host parts and the C++ object are reused), and gives the bytes of a cold build
        # for both archs.
        added = self.build(self.tmp / "c1", "--archs", "9.0;12.0+PTX")
        labels = sorted(j["job"] for j in added["jobs"])
        self.assertEqual([l for l in labels if l.startswith("nvcc ")], sorted(f"nvcc {u} sm_120+ptx" for u in units))
        self.assertEqual(len([l for l in labels if l.startswith("fatbinary ")]), len(units))
        self.assertEqual([l for l in labels if l.startswith("g++")], [])
        self.assertEqual(added["objects_reused"], 2 * len(units) + 1)  # sm_90 device parts, host parts, C++ object
        cold = self.build(self.fresh_cache("c3"), "--archs", "9.0;12.0+PTX")
        self.assertEqual(cold["items"][0]["target"], "default-sm90-sm120-ptx120")
        self.assertEqual(sha256(added["items"][0]["wheel"]), sha256(cold["items"][0]["wheel"]))
        elf, ptx = self.cuobjdump(Path(cold["items"][0]["wheel"]), self.tmp / "u3")
        self.assertEqual(elf, ["sm_120", "sm_90"])
        self.assertEqual(ptx, ["sm_120"])
        # What scripts/kernels says when the kernels differ: the sm_120 ones are only in one.
        differ = self.kernels("--same", wheel, cold["items"][0]["wheel"])
        self.assertEqual(differ.returncode, 1)
        self.assertEqual({line.split()[1] for line in differ.stdout.splitlines()}, {"sm_120"})
        self.assertTrue(all(line.endswith(": only in B") for line in differ.stdout.splitlines()))

    def kernels(self, *args):
        env = dict(os.environ, CUOBJDUMP=self.cuobjdump_path())
        return subprocess.run([str(SOURCE_DIR / "scripts" / "kernels"), *map(str, args)], env=env,
                              capture_output=True, text=True, timeout=300)

    def provenance(self, wheel):
        with zipfile.ZipFile(wheel) as z:
            return json.loads(z.read(next(n for n in z.namelist() if n.endswith(".dist-info/kiln.json"))))

    def cuobjdump(self, wheel, dest):
        with zipfile.ZipFile(wheel) as z:
            so = next(n for n in z.namelist() if n.endswith(".so"))
            z.extract(so, dest)
        return self.sass_and_ptx(Path(dest) / so)


if __name__ == "__main__":
    unittest.main()
