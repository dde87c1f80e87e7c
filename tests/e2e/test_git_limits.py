"""Git sources bounded like downloads (issue 47), against hostile mirrors on 127.0.0.1 made here
(`git daemon` serving bare repositories, and a server that accepts and says nothing): only the
pinned commit is fetched, a pack with an object past KILN_MAX_DOWNLOAD stops before anything big
is inflated, a silent server meets the fetch's deadline, a remote superproject's local-path
submodule is refused, and what a failed or killed fetch leaves, gc reclaims."""

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import threading
import time
import unittest

from kilntest import KILN, SourceTestCase

UNREACHABLE = "https://git.invalid/org/"


def git(*args, cwd, stdin=None):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@e", GIT_CONFIG_NOSYSTEM="1", HOME=str(cwd))
    return subprocess.run(["git", *args], cwd=cwd, check=True, env=env, input=stdin,
                          capture_output=True).stdout.decode().strip()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class GitLimitsTest(SourceTestCase):
    def setUp(self):
        super().setUp()
        if not shutil.which("git"):
            self.skipTest("git is not installed")
        self.served = self.tmp / "served"
        self.served.mkdir(exist_ok=True)

    # -- fixtures -------------------------------------------------------------------------------
    def repository(self, name, files):
        """A bare repository `name`.git served by the daemon, of one commit holding `files`
        (path -> bytes, or an int: that many zero bytes, stored without a working file); its id."""
        work = self.tmp / f"work-{name}"
        git("init", "-q", "-b", "main", str(work), cwd=self.tmp)
        for path, data in files.items():
            if isinstance(data, int):
                continue
            (work / path).parent.mkdir(parents=True, exist_ok=True)
            (work / path).write_bytes(data)
        git("add", "-A", cwd=work)
        for path, size in files.items():
            if isinstance(size, int):  # a big blob: hashed from a pipe, never a file on disk
                oid = git("hash-object", "-w", "--stdin", cwd=work, stdin=bytes(size))
                git("update-index", "--add", "--cacheinfo", f"100644,{oid},{path}", cwd=work)
        git("commit", "-q", "-m", name, cwd=work)
        bare = self.served / f"{name}.git"
        git("clone", "-q", "--bare", str(work), str(bare), cwd=self.tmp)
        git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=bare)
        return git("rev-parse", "HEAD", cwd=work)

    def daemon(self):
        """git daemon on 127.0.0.1 serving self.served; its git:// base URL."""
        port = free_port()
        proc = subprocess.Popen(["git", "daemon", "--export-all", "--reuseaddr", f"--base-path={self.served}",
                                 "--listen=127.0.0.1", f"--port={port}", str(self.served)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.terminate)
        for _ in range(200):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return f"git://127.0.0.1:{port}/"
            time.sleep(0.05)
        self.fail("git daemon did not start")

    def silent_server(self):
        """A server that accepts connections and never sends a byte; its base URL."""
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        held = []

        def accept():
            while True:
                try:
                    held.append(listener.accept()[0])
                except OSError:
                    return
        threading.Thread(target=accept, daemon=True).start()
        self.addCleanup(lambda: [c.close() for c in held])
        self.addCleanup(listener.close)
        return f"git://127.0.0.1:{listener.getsockname()[1]}/"

    def via(self, base, **extra):
        return {"KILN_GIT_MIRRORS": f"{UNREACHABLE}={base}", **extra}

    def pin(self, name, commit, submodules=None):
        sub = f"\nsubmodules = {json.dumps(submodules)}" if submodules else ""
        self.demo_manifest(f'git = "{UNREACHABLE}{name}.git"\ncommit = "{commit}"{sub}')

    def prepare_rss(self, env, out):
        """`kiln prepare demo -o OUT` with `env`: (exit code, stderr, peak RSS in KiB)."""
        full = dict(os.environ, KILN_CONFIG="/dev/null", KILN_CACHE=str(self.cache), **env)
        proc = subprocess.Popen([KILN, "prepare", "demo", "-o", str(out)], cwd=self.project, env=full,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        stderr = proc.stderr.read()
        proc.stderr.close()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        return proc.returncode, stderr, usage.ru_maxrss

    def git_dir(self):
        root = self.cache / "git"
        return sorted(p.name for p in root.iterdir()) if root.exists() else []

    # -- the attacks ----------------------------------------------------------------------------
    def test_a_pack_with_a_big_blob_stops_at_the_limit(self):
        """A 2 MB pack of a 300 MB blob once took kiln's memory to the blob's size (and passed)."""
        commit = self.repository("big", {"demo/__init__.py": b"VALUE = 1\n", "demo/blob.bin": 300_000_000})
        small = self.repository("small", {"demo/__init__.py": b"VALUE = 1\n"})
        base = self.daemon()
        # The baseline: kiln's peak for a fetch of a small repository from the same server.
        self.pin("small", small)
        code, stderr, baseline = self.prepare_rss(self.via(base, KILN_MAX_DOWNLOAD="64M"), self.tmp / "small")
        self.assertEqual(code, 0, stderr)
        shutil.rmtree(self.cache / "git")
        self.pin("big", commit)
        out = self.tmp / "out"
        code, stderr, peak = self.prepare_rss(self.via(base, KILN_MAX_DOWNLOAD="64M"), out)
        self.assertEqual(code, 1, stderr)
        self.assertIn(f"kiln: error: cannot fetch {UNREACHABLE}big.git (mirror {base}big.git): object ",
                      stderr)
        self.assertIn("(blob) is 300000000 bytes, over the limit of 67108864 bytes (KILN_MAX_DOWNLOAD "
                      "raises the limit)", stderr)
        self.assertLess(peak - baseline, 200 * 1024, f"peak RSS {peak} KiB, baseline {baseline} KiB")
        self.assertFalse(out.exists())
        self.assertEqual(self.git_dir(), [], "a failed fetch leaves no mirror")

    def test_a_mirror_without_the_commit_is_named_and_nothing_else_fetched(self):
        self.repository("demo", {"demo/__init__.py": b"VALUE = 666\n"})
        base = self.daemon()
        wanted = "4495a92fd32e178e6c28e0426dc2ede3cae246e4"
        self.pin("demo", wanted)
        self.assert_fails_cleanly("prepare", "demo", "-o", str(self.tmp / "out"), code=1, env=self.via(base),
                                  message=rf"kiln: error: commit {wanted} not found in {UNREACHABLE}demo\.git "
                                          rf"\(mirror {base}demo\.git\)")
        self.assertEqual(self.git_dir(), [], "no branch or tag was fetched instead")

    def test_a_silent_server_meets_the_deadline_and_a_signal(self):
        base = self.silent_server()
        self.pin("demo", "4495a92fd32e178e6c28e0426dc2ede3cae246e4")
        started = time.monotonic()
        self.assert_fails_cleanly("prepare", "demo", "-o", str(self.tmp / "out"), code=1,
                                  env=self.via(base, KILN_GIT_DEADLINE="2s"),
                                  message=rf"kiln: error: cannot fetch {UNREACHABLE}demo\.git \(mirror "
                                          rf"{base}demo\.git\): no whole answer within the deadline of 2 s "
                                          r"\(KILN_GIT_DEADLINE\)$")
        self.assertLess(time.monotonic() - started, 15)
        bad = self.kiln("prepare", "demo", "-o", str(self.tmp / "out"), env=self.via(base, KILN_GIT_DEADLINE="1y"))
        self.assertEqual(bad.returncode, 2, bad.stderr)
        self.assertIn("KILN_GIT_DEADLINE=1y: expected a duration of 1s to 1d", bad.stderr)
        # SIGTERM during the fetch (default deadline): exit 130 within a second.
        env = dict(os.environ, KILN_CONFIG="/dev/null", KILN_CACHE=str(self.cache), **self.via(base))
        proc = subprocess.Popen([KILN, "prepare", "demo", "-o", str(self.tmp / "out")], cwd=self.project,
                                env=env, stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        self.assertEqual(proc.wait(timeout=10), 130)
        self.assertLess(time.monotonic() - sent, 1.0)

    def test_a_killed_fetch_leaves_what_gc_reclaims(self):
        base = self.silent_server()
        self.pin("demo", "4495a92fd32e178e6c28e0426dc2ede3cae246e4")
        env = dict(os.environ, KILN_CONFIG="/dev/null", KILN_CACHE=str(self.cache), **self.via(base))
        proc = subprocess.Popen([KILN, "prepare", "demo", "-o", str(self.tmp / "out")], cwd=self.project,
                                env=env, stderr=subprocess.DEVNULL)
        time.sleep(1.5)
        proc.kill()
        proc.wait()
        self.assertEqual(len(self.git_dir()), 1, "the mirror the killed fetch made")
        out = json.loads(self.kiln("--json", "cache", "gc", check=0).stdout)
        self.assertGreaterEqual(out["removed_items"], 1, out)
        self.assertEqual(self.git_dir(), [])

    def test_a_local_submodule_of_a_remote_superproject_is_refused(self):
        secret = self.tmp / "secret-repo"
        git("init", "-q", "-b", "main", str(secret), cwd=self.tmp)
        (secret / "key").write_text("ssh private key\n")
        git("add", "-A", cwd=secret)
        git("commit", "-q", "-m", "secret", cwd=secret)
        sub_commit = git("rev-parse", "HEAD", cwd=secret)
        work = self.tmp / "work-super"
        git("init", "-q", "-b", "main", str(work), cwd=self.tmp)
        (work / "demo").mkdir()
        (work / "demo" / "__init__.py").write_text("VALUE = 1\n")
        (work / ".gitmodules").write_text(f'[submodule "vendor"]\n\tpath = vendor\n\turl = {secret}\n')
        git("add", "-A", cwd=work)
        git("update-index", "--add", "--cacheinfo", f"160000,{sub_commit},vendor", cwd=work)
        git("commit", "-q", "-m", "super", cwd=work)
        commit = git("rev-parse", "HEAD", cwd=work)
        git("clone", "-q", "--bare", str(work), str(self.served / "super.git"), cwd=self.tmp)
        git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=self.served / "super.git")
        base = self.daemon()
        self.pin("super", commit, ["vendor"])
        out = self.tmp / "out"
        proc = self.assert_fails_cleanly(
            "prepare", "demo", "-o", str(out), code=1, env=self.via(base), keep_verified=True,
            message=rf"kiln: error: submodule 'vendor' of {UNREACHABLE}super\.git at commit {commit} names a "
                    rf"local repository \({secret}\): refused for a superproject that is not local$")
        self.assertNotIn("ssh private key", proc.stderr)
        self.assertFalse(out.exists())


if __name__ == "__main__":
    unittest.main()
