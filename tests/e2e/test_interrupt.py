"""Ctrl-C during a build stops every child within a second, commits nothing, and the next build
succeeds."""

import json
import os
import signal
import subprocess
import time
import unittest

from kilntest import KilnTestCase, KILN


class InterruptTest(KilnTestCase):
    def test_sigint_stops_children_and_commits_nothing(self):
        # A source change of our own gives this test its own build root, away from other tests.
        marker = f"kiln-interrupt-{os.getpid()}-{time.time_ns()}"
        with open(self.project / "kernels/kiln-demo/csrc/kiln_demo_kernel.cu", "a") as f:
            f.write(f"\n// {marker}\n")
        cache = self.fresh_cache("c")
        env = dict(os.environ, KILN_CACHE=str(cache))
        proc = subprocess.Popen([KILN, "-v", "build", "kiln-demo"], cwd=self.project, env=env,
                                stderr=subprocess.PIPE, text=True)
        started = []
        deadline = time.time() + 600
        for line in proc.stderr:  # wait until the compilers run
            started.append(line)
            if line.startswith("kiln: start g++") or line.startswith("kiln: start nvcc"):
                break
            self.assertLess(time.time(), deadline)
        plan = json.loads(self.kiln("--cache", str(cache), "--json", "resolve", "kiln-demo", check=0).stdout)
        key = plan["items"][0]["key"]
        time.sleep(1)
        # kiln's children lead their own process groups; remember them.
        children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        self.assertTrue(children, "no compiler was running")
        t0 = time.time()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
        elapsed = time.time() - t0
        rest = proc.stderr.read()
        proc.stderr.close()
        self.assertEqual(proc.returncode, 130, "".join(started) + rest)
        self.assertLess(elapsed, 2.0)
        self.assertIn("kiln: error: interrupted", rest)
        # Nothing of those process groups still runs (compilers and their own children); a
        # zombie waiting for init to reap it is dead already.
        def alive(group):
            states = subprocess.run(["ps", "-o", "stat=,pid=,comm=", "-g", group], capture_output=True, text=True).stdout
            return [l for l in states.splitlines() if l.strip() and not l.strip().startswith("Z")]
        survivors = [p for g in children for p in alive(g)]
        self.assertEqual(survivors, [])
        self.assertFalse((cache / "wheels" / key).exists())
        self.assertFalse((cache / "wheels").exists() and any((cache / "wheels").iterdir()))
        # The next build succeeds.
        out = json.loads(self.kiln("--cache", str(cache), "--json", "build", "kiln-demo", check=0, timeout=1800).stdout)
        self.assertFalse(out["items"][0]["cache_hit"])
        self.assertTrue(os.path.exists(out["items"][0]["wheel"]))



if __name__ == "__main__":
    unittest.main()
