"""A package's code cannot betray the build host (issue 48): hostile fixture packages made here,
never shipped. A native source that `.incbin`s or `#include`s a root-only file outside its tree; a
setup.py that reads that file, ~/.ssh, /etc/shadow and the caller's secrets, talks to an
ssh-agent-like socket under /tmp and a Redis-like server on 127.0.0.1, and writes to /root, /etc,
$HOME, the cache and the real /tmp. Where namespaces are denied (a seccomp filter, as Docker's),
the build says it was not sandboxed, a sandboxed build does not take its wheel, and the required
mode refuses."""

import json
import os
import secrets
import socket
import subprocess
import threading
import unittest
import zipfile
from pathlib import Path

from kilntest import KILN, SourceTestCase

DENY = os.environ.get("KILN_DENY_NAMESPACES") or str(
    Path(KILN or "").resolve().parents[1] / "tests" / "stub" / "deny_namespaces")

NATIVE = """[package]
name = "{name}"
version = "1.0.0"
summary = "a hostile fixture"
license = "MIT"
requires-python = ">=3.9"

[source]
path = "{src}"

[build]
backend = "native"
packages = ["{module}"]

[[build.extension]]
name = "{module}_ext"
sources = ["ext.cpp", "kernel.cu"]
"""

MODULE = """#include <Python.h>
{payload}
static PyModuleDef def = {{PyModuleDef_HEAD_INIT, "{module}_ext", nullptr, -1, nullptr}};
PyMODINIT_FUNC PyInit_{module}_ext(void) {{ return PyModule_Create(&def); }}
"""

HOSTILE_SETUP = r'''
import json, os, socket, sys
found = {}
for path in %(reads)r:
    try:
        found[path] = open(path).read()
    except Exception as e:
        found[path] = "refused: " + type(e).__name__
found["env"] = dict(os.environ)
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect(%(agent)r)
    s.sendall(b"hello")
    found["agent"] = s.recv(100).decode()
except Exception as e:
    found["agent"] = "refused: " + type(e).__name__
try:
    s = socket.create_connection(("127.0.0.1", %(port)d), timeout=3)
    s.sendall(b"PING\r\n")
    found["redis"] = s.recv(100).decode()
except Exception as e:
    found["redis"] = "refused: " + type(e).__name__
for path in %(writes)r:
    try:
        with open(path, "w") as f:
            f.write("pwned")
        found["wrote " + path] = "yes"
    except Exception as e:
        found["wrote " + path] = "refused: " + type(e).__name__
print("KILN-HOSTILE " + json.dumps(found), flush=True)
sys.exit(1)
'''


# setup.py replaces the log kiln writes its output to with a link to the host's secret, then fails.
LINK_THE_LOG = r'''
import os, sys
log = os.path.join(os.path.dirname(os.getcwd()), "logs", "setuptools.log")
try:
    os.remove(log)
    os.symlink(%(secret)r, log)
    print("KILN-LINKS linked the log", flush=True)
except OSError as e:
    print("KILN-LINKS " + str(e), flush=True)
sys.exit(1)
'''

# setup.py leaves a ninja log that is a link to the host's secret, then builds as it would.
LINK_A_NINJA_LOG = r'''
import os
os.makedirs("build/temp.kiln-links", exist_ok=True)
if not os.path.lexists("build/temp.kiln-links/.ninja_log"):  # pip runs setup.py more than once
    os.symlink(%(secret)r, "build/temp.kiln-links/.ninja_log")
'''


def write_native(project, tmp, name, payload):
    """A native package `name` (its sources under `tmp`, its manifest in `project`) whose one C++
    file holds `payload`; written again over an earlier one. Returns its source directory."""
    module = name.replace("-", "_")
    src = tmp / f"src-{name}"
    (src / module).mkdir(parents=True, exist_ok=True)
    (src / module / "__init__.py").write_text("")
    (src / "ext.cpp").write_text(MODULE.format(payload=payload, module=module))
    (src / "kernel.cu").write_text("__global__ void kiln_fixture_kernel(int* x) { *x = 1; }\n")
    d = project / "manifests" / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "1.0.0.toml").write_text(NATIVE.format(name=name, src=src, module=module))
    return src


def serve_socket(sock, answer):
    """Answers `answer` to every connection on `sock` (an ssh agent, a Redis), in a thread."""
    def loop():
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            try:
                conn.recv(100)
                conn.sendall(answer)
            finally:
                conn.close()
    threading.Thread(target=loop, daemon=True).start()


class SandboxTest(SourceTestCase):
    def setUp(self):
        super().setUp()
        if os.geteuid() != 0:
            self.skipTest("these attacks are what a build run as root could do")
        # The host's secret: a root-only file outside every tree kiln builds.
        self.secret = "kiln-secret-" + secrets.token_hex(16)
        self.secret_file = self.tmp / "host-secret.key"
        self.secret_file.write_text(self.secret + "\n")
        self.secret_file.chmod(0o600)

    def native(self, name, payload):
        return write_native(self.project, self.tmp, name, payload)

    def leaked(self, *roots, texts=(), sources=()):
        """Files under `roots` holding the secret (or one of `texts`), besides the `sources` of
        the secrets themselves."""
        wanted = [self.secret.encode(), *(t.encode() for t in texts)]
        out = []
        for root in roots:
            for p in Path(root).rglob("*"):
                if p.is_file() and not p.is_symlink() and p not in sources:
                    data = p.read_bytes()
                    out += [str(p) for w in wanted if w in data]
        return out

    def test_a_native_source_cannot_embed_a_file_outside_its_tree(self):
        cache = self.fresh_cache("c")
        for name, payload, why in (
                ("incbin", f'__asm__(".section .rodata\\n.incbin \\"{self.secret_file}\\"\\n.previous");',
                 "file not found"),
                ("include", f'#include "{self.secret_file}"', "No such file or directory")):
            with self.subTest(name):
                self.native(name, payload)
                proc = self.kiln("--cache", str(cache), "build", name, timeout=1200)
                self.assertEqual(proc.returncode, 1, proc.stderr)
                self.assertIn(why, proc.stderr)
                self.assertNotIn(self.secret, proc.stdout + proc.stderr)
                self.assertEqual(list((cache / "wheels").glob(f"*/{name}-*.whl")), [])
        self.assertEqual(self.leaked(cache), [])
        # .incbin of a file of the package's own tree still works: the sandbox holds the tree.
        src = self.native("ownfile", '__asm__(".section .rodata\\n.incbin \\"data.bin\\"\\n.previous");')
        (src / "data.bin").write_bytes(b"own-bytes-0123456789")
        item = json.loads(self.kiln("--cache", str(cache), "--json", "build", "ownfile", check=0,
                                    timeout=1200).stdout)["items"][0]
        self.assertEqual(item["caveats"], [])
        with zipfile.ZipFile(item["wheel"]) as z:
            so = next(n for n in z.namelist() if n.endswith(".so"))
            self.assertIn(b"own-bytes-0123456789", z.read(so))

    def test_setup_py_reads_and_writes_nothing_of_the_host(self):
        home = self.tmp / "home"
        (home / ".ssh").mkdir(parents=True)
        ssh_key = "ssh-key-" + secrets.token_hex(16)
        (home / ".ssh" / "id_rsa").write_text(ssh_key)
        (home / ".ssh" / "id_rsa").chmod(0o600)
        aws = "aws-" + secrets.token_hex(16)
        agent_path = self.tmp / "ssh-agent.sock"
        agent = socket.socket(socket.AF_UNIX)
        agent.bind(str(agent_path))
        agent.listen(4)
        self.addCleanup(agent.close)
        serve_socket(agent, b"agent-answer-" + ssh_key.encode())
        redis = socket.socket()
        redis.bind(("127.0.0.1", 0))
        redis.listen(4)
        self.addCleanup(redis.close)
        serve_socket(redis, b"+PONG-" + aws.encode() + b"\r\n")
        cache = self.fresh_cache("c")
        tmp_target = self.tmp / "pwned-in-real-tmp"
        writes = ["/root/kiln-pwned-" + self.secret[-8:], "/etc/kiln-pwned-" + self.secret[-8:],
                  str(home / "kiln-pwned"), str(cache / "wheels" / "kiln-pwned"), str(tmp_target)]
        setup = HOSTILE_SETUP % {"reads": [str(self.secret_file), str(home / ".ssh" / "id_rsa"),
                                           os.path.expanduser("~/.ssh/id_rsa"), "/etc/shadow"],
                                 "agent": str(agent_path), "port": redis.getsockname()[1],
                                 "writes": writes}
        (self.project / "kernels" / "kiln-demo" / "setup.py").write_text(setup)
        proc = self.kiln("--cache", str(cache), "build", "kiln-demo", "--backend", "setuptools", timeout=3000,
                         env={"HOME": str(home), "AWS_SECRET_ACCESS_KEY": aws, "HF_TOKEN": aws,
                              "SSH_AUTH_SOCK": str(agent_path)})
        self.assertEqual(proc.returncode, 1, proc.stderr)
        line = next((l for l in proc.stderr.splitlines() if "KILN-HOSTILE " in l), None)
        self.assertIsNotNone(line, proc.stderr)
        found = json.loads(line.split("KILN-HOSTILE ", 1)[1])
        for path in (str(self.secret_file), str(home / ".ssh" / "id_rsa"), "/etc/shadow"):
            self.assertTrue(found[path].startswith("refused: "), (path, found[path]))
        self.assertTrue(found["agent"].startswith("refused: "), found["agent"])
        self.assertTrue(found["redis"].startswith("refused: "), found["redis"])
        for name in ("AWS_SECRET_ACCESS_KEY", "HF_TOKEN", "SSH_AUTH_SOCK", "KILN_CACHE"):
            self.assertNotIn(name, found["env"])
        for path in writes:
            self.assertTrue(found["wrote " + path].startswith("refused: ") or not Path(path).exists(), path)
            self.assertFalse(Path(path).exists(), path)
        self.assertEqual(self.leaked(cache, home, texts=(ssh_key, aws),
                                     sources=(home / ".ssh" / "id_rsa",)), [])
        self.assertNotIn(self.secret, proc.stderr)

    def test_links_setup_py_leaves_in_its_build_root_lead_kiln_nowhere(self):
        """kiln reads and writes the build root after the package's code ran there: a link it left
        (a log kiln shows, a ninja log kiln keeps) must not take kiln to a file of the host."""
        setup_py = self.project / "kernels" / "kiln-demo" / "setup.py"
        original = setup_py.read_text()
        cache = self.fresh_cache("c")
        # The log kiln shows the tail of when the build fails, made a link to the secret.
        setup_py.write_text(LINK_THE_LOG % {"secret": str(self.secret_file)})
        proc = self.kiln("--cache", str(cache), "build", "kiln-demo", "--backend", "setuptools",
                         timeout=3000)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("KILN-LINKS ", proc.stderr)
        self.assertIn("Read-only file system", proc.stderr)
        self.assertNotIn(self.secret, proc.stdout + proc.stderr)
        # A ninja log that is a link to the secret, in a build that succeeds: kiln keeps ninja's
        # logs with the job logs, and reads them for the build's timings.
        setup_py.write_text(LINK_A_NINJA_LOG % {"secret": str(self.secret_file)} + original)
        proc = self.kiln("--cache", str(cache), "build", "kiln-demo", "--backend", "setuptools",
                         timeout=3000)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertNotIn(self.secret, proc.stdout + proc.stderr)
        self.assertEqual(self.leaked(cache, sources=(self.secret_file,)), [])

    def test_where_namespaces_are_denied_it_says_so_and_a_sandboxed_build_does_not_take_it(self):
        if not Path(DENY).exists():
            self.skipTest(f"{DENY} is not built")
        self.native("plain", "")
        cache = self.fresh_cache("c")
        denied = subprocess.run([DENY, KILN, "--cache", str(cache), "--json", "build", "plain"],
                                cwd=self.project, capture_output=True, text=True, timeout=1200,
                                env={**os.environ, "KILN_CONFIG": "/dev/null"})
        self.assertEqual(denied.returncode, 0, denied.stderr)
        item = json.loads(denied.stdout)["items"][0]
        caveat = next(c for c in item["caveats"] if c.startswith("not sandboxed: "))
        self.assertIn("cannot make the namespaces", caveat)
        self.assertIn("kiln: warning: builds run unsandboxed: not sandboxed: ", denied.stderr)
        entry = json.loads((Path(item["wheel"]).parent / "entry.json").read_text())
        self.assertIn(caveat, entry["caveats"])
        with zipfile.ZipFile(item["wheel"]) as z:
            provenance = json.loads(z.read(next(n for n in z.namelist() if n.endswith(".dist-info/kiln.json"))))
        self.assertIn(caveat, provenance["caveats"])
        # Where the sandbox can be made, that wheel is no hit: built again, sandboxed.
        again = self.kiln("--cache", str(cache), "--json", "build", "plain", check=0, timeout=1200)
        item2 = json.loads(again.stdout)["items"][0]
        self.assertFalse(item2["cache_hit"])
        self.assertEqual(item2["caveats"], [])
        self.assertIn("was built unsandboxed; it is built again in the sandbox", again.stderr)
        with zipfile.ZipFile(item2["wheel"]) as z:
            self.assertNotIn("caveats", json.loads(z.read(next(n for n in z.namelist()
                                                               if n.endswith(".dist-info/kiln.json")))))
        # The required mode refuses, naming what was denied.
        for how in (["--sandbox", "required"], []):
            env = {**os.environ, "KILN_CONFIG": "/dev/null"}
            if not how:
                env["KILN_SANDBOX"] = "required"
            fresh = self.fresh_cache(f"r{len(how)}")
            required = subprocess.run([DENY, KILN, "--cache", str(fresh), "build", "plain", *how], cwd=self.project,
                                      capture_output=True, text=True, timeout=1200, env=env)
            self.assertEqual(required.returncode, 1, required.stderr)
            self.assertIn("kiln: error: the build's sandbox cannot be made here (cannot make the namespaces "
                          "(user, mount, network, IPC, UTS and PID): Operation not permitted), and "
                          "KILN_SANDBOX=required: kiln does not run plain's code without it", required.stderr)
            self.assertEqual(list((fresh / "wheels").glob("*/*.whl")) if (fresh / "wheels").exists() else [], [])
        bad = self.kiln("build", "plain", env={"KILN_SANDBOX": "maybe"})
        self.assertEqual(bad.returncode, 2, bad.stderr)
        self.assertIn("$KILN_SANDBOX: 'maybe' is not a sandbox mode (auto, required or off)", bad.stderr)


if __name__ == "__main__":
    unittest.main()
