"""One job pool for the whole plan (issue 55): two fixture packages' compile jobs run interleaved in
one pool (the trace shows jobs of both in flight at once, and its slices are the jobs --json
reports); a package that fails costs only its own wheel (unless --fail-fast); SIGINT mid-plan
leaves only whole entries."""

import json
import os
import re
import shutil
import signal
import subprocess
import time
import unittest

from kilntest import KilnTestCase, KILN

REQUIRED = {"X": ("name", "ph", "ts", "dur", "pid", "tid"), "M": ("name", "ph", "pid", "args")}


class PlanPoolTest(KilnTestCase):
    def setUp(self):
        super().setUp()
        # A second native fixture: kiln-demo's tree under another name, with a source change of
        # its own (its objects and build root are its own).
        twin = self.project / "kernels" / "kiln-twin"
        shutil.copytree(self.project / "kernels" / "kiln-demo", twin)
        with open(twin / "csrc" / "kiln_demo_kernel.cu", "a") as f:
            f.write(f"\n// kiln-twin {os.getpid()} {time.time_ns()}\n")
        # kiln-demo's own, so that no other test's build root or objects are shared.
        with open(self.project / "kernels" / "kiln-demo" / "csrc" / "kiln_demo_kernel.cu", "a") as f:
            f.write(f"\n// kiln-pool {os.getpid()} {time.time_ns()}\n")
        manifest = (self.project / "manifests" / "kiln-demo" / "0.1.0.toml").read_text()
        manifest = manifest.replace('name = "kiln-demo"', 'name = "kiln-twin"')
        manifest = manifest.replace("kernels/kiln-demo", "kernels/kiln-twin")
        (self.project / "manifests" / "kiln-twin").mkdir()
        (self.project / "manifests" / "kiln-twin" / "0.1.0.toml").write_text(manifest)
        self.cache = self.fresh_cache("c")

    def build(self, *args, check=None):
        return self.kiln("--cache", str(self.cache), "--json", "build", "kiln-demo", "kiln-twin",
                         "--archs", "9.0", *args, check=check, timeout=1800)

    def entries(self):
        wheels = self.cache / "wheels"
        return sorted(p.name for p in wheels.iterdir()) if wheels.exists() else []

    def test_jobs_of_both_interleave_and_the_trace_adds_up(self):
        trace_file = self.tmp / "trace.json"
        out = json.loads(self.build("-j", "4", "--trace", str(trace_file), check=0).stdout)
        self.assertTrue(out["ok"])
        self.assertEqual(out["failed"], [])
        self.assertEqual(sorted(i["package"] for i in out["items"]), ["kiln-demo", "kiln-twin"])
        for item in out["items"]:
            self.assertTrue(os.path.isfile(item["wheel"]))
        trace = json.loads(trace_file.read_text())
        events = trace["traceEvents"]
        for e in events:  # the trace-event format's required fields, by phase
            self.assertIn(e.get("ph"), REQUIRED, e)
            for field in REQUIRED[e["ph"]]:
                self.assertIn(field, e, e)
            if e["ph"] == "X":
                self.assertIsInstance(e["ts"], int)
                self.assertIsInstance(e["dur"], int)
                self.assertGreater(e["dur"], 0)
        slices = [e for e in events if e["ph"] == "X"]
        compiled = [e for e in slices if e["args"]["verdict"] == "compiled"]
        restored = [e for e in slices if e["args"]["verdict"] == "restored"]
        # The slices are the jobs --json reports: one per job run, its time within a millisecond.
        self.assertEqual(len(compiled), out["compile_jobs"])
        self.assertEqual(len(restored), out["objects_reused"])
        self.assertEqual(sorted(e["name"] for e in compiled),
                         sorted(j["job"] for j in out["jobs"]))
        self.assertAlmostEqual(sum(e["dur"] for e in compiled) / 1e6,
                               sum(j["seconds"] for j in out["jobs"]), delta=0.001 * len(compiled))
        for e in compiled:
            self.assertIn(e["args"]["package"], ("kiln-demo", "kiln-twin"))
            self.assertGreaterEqual(e["tid"], 1)
            self.assertLessEqual(e["tid"], 4)
            self.assertGreaterEqual(e["args"]["slots"], 1)
        self.assertTrue(any("arch" in e["args"] and "unit" in e["args"] for e in compiled))
        # Jobs of both packages were in flight at once.
        demo = [(e["ts"], e["ts"] + e["dur"]) for e in compiled if e["args"]["package"] == "kiln-demo"]
        twin = [(e["ts"], e["ts"] + e["dur"]) for e in compiled if e["args"]["package"] == "kiln-twin"]
        self.assertTrue(any(a0 < b1 and b0 < a1 for a0, a1 in demo for b0, b1 in twin),
                        f"no overlap: {demo} {twin}")
        # No lane ran two jobs at once.
        for lane in {e["tid"] for e in compiled}:
            spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in compiled if e["tid"] == lane)
            for (s0, e0), (s1, _) in zip(spans, spans[1:]):
                self.assertLessEqual(e0, s1 + 1000, f"lane {lane} overlaps")
        # Each package's wheel step is kiln's lane's, after that package's last job.
        for package in ("kiln-demo", "kiln-twin"):
            step = [e for e in slices if e["name"].startswith(f"wheel {package} ")]
            self.assertEqual(len(step), 1)
            self.assertEqual(step[0]["tid"], 0)
            last = max(e["ts"] + e["dur"] for e in compiled if e["args"]["package"] == package)
            self.assertGreaterEqual(step[0]["ts"] + 1000, last)
        # --json's floor.
        b = out["build"]
        self.assertEqual(b["slots"], 4)
        self.assertAlmostEqual(b["cpu_seconds"], sum(j["cpu_seconds"] for j in out["jobs"]), places=3)
        self.assertAlmostEqual(b["longest_job_seconds"], max(j["seconds"] for j in out["jobs"]), places=3)
        self.assertAlmostEqual(b["floor_seconds"],
                               max(b["longest_job_seconds"], b["cpu_seconds"] / 4), places=3)
        self.assertGreaterEqual(b["wall_seconds"], b["floor_seconds"])

    def break_twin(self):
        kernel = self.project / "kernels" / "kiln-twin" / "csrc" / "kiln_demo_kernel.cu"
        with open(kernel, "a") as f:
            f.write("\nthis is not C++;\n")

    def test_a_failing_package_costs_only_its_own_wheel(self):
        self.break_twin()
        proc = self.build()
        self.assertEqual(proc.returncode, 1, proc.stderr)
        out = json.loads(proc.stdout)
        self.assertFalse(out["ok"])
        self.assertEqual([i["package"] for i in out["items"]], ["kiln-demo"])
        self.assertTrue(os.path.isfile(out["items"][0]["wheel"]))
        self.assertEqual([f["package"] for f in out["failed"]], ["kiln-twin"])
        self.assertIn("kiln_demo_kernel.cu", out["failed"][0]["message"])
        self.assertIn("failed", out["failed"][0]["message"])
        self.assertEqual(out["error"]["package"], "kiln-twin")
        self.assertIn("kiln: error:", proc.stderr)
        self.assertIn("built kiln_demo-0.1.0", proc.stderr)
        self.assertEqual(len(self.entries()), 1)
        # --fail-fast: the twin's failure stops kiln-demo's jobs too (its link waits for a g++
        # job far longer than the twin's failing compile), and nothing is committed.
        shutil.rmtree(self.cache / "wheels")
        proc = self.build("--fail-fast")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        out = json.loads(proc.stdout)
        self.assertEqual(out["items"], [])
        failed = {f["package"]: f["message"] for f in out["failed"]}
        self.assertIn("kiln_demo_kernel.cu", failed["kiln-twin"])
        self.assertIn("--fail-fast", failed["kiln-demo"])
        self.assertEqual(self.entries(), [])

    def test_sigint_mid_plan_leaves_only_whole_entries(self):
        # fla-core (pure) is committed first; SIGINT while the two native packages compile.
        env = dict(os.environ, KILN_CACHE=str(self.cache), KILN_CONFIG="/dev/null")
        proc = subprocess.Popen([KILN, "-v", "build", "fla-core", "kiln-demo", "kiln-twin",
                                 "--archs", "9.0", "-j", "4"], cwd=self.project, env=env,
                                stderr=subprocess.PIPE, text=True)
        seen = []
        deadline = time.time() + 900
        for line in proc.stderr:
            seen.append(line)
            if line.startswith("kiln: start nvcc") and any("built fla_core" in s for s in seen):
                break
            self.assertLess(time.time(), deadline, "".join(seen))
        time.sleep(1)
        children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                  text=True).stdout.split()
        self.assertTrue(children, "no compiler was running")
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
        rest = proc.stderr.read()
        proc.stderr.close()
        self.assertEqual(proc.returncode, 130, "".join(seen) + rest)
        self.assertIn("kiln: error: interrupted", rest)
        # Only fla-core's entry, and it is whole: `kiln cache verify` rehashes it.
        entries = self.entries()
        self.assertEqual(len(entries), 1, entries)
        wheels = [p.name for p in (self.cache / "wheels" / entries[0]).iterdir()]
        self.assertTrue(any(w.startswith("fla_core-") for w in wheels), wheels)
        self.kiln("--cache", str(self.cache), "cache", "verify", check=0)
        # Nothing left of the others: no staging, no build root.
        for leftover in ("tmp", "build"):
            d = self.cache / leftover
            self.assertEqual(list(d.iterdir()) if d.exists() else [], [], leftover)
        ls = json.loads(self.kiln("--cache", str(self.cache), "--json", "cache", "ls", check=0).stdout)
        self.assertEqual([e["package"] for e in ls], ["fla-core"])


if __name__ == "__main__":
    unittest.main()
