"""The CLI surface: help, version, usage errors and their exit codes."""

import hashlib
import re
import shutil
import socket
import unittest
from pathlib import Path

from kilntest import KILN, SHARED_CACHE, KilnTestCase, SourceTestCase


class CliTest(KilnTestCase):
    def test_version(self):
        out = self.kiln("--version", check=0).stdout
        self.assertRegex(out, r"^kiln \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}(-dirty)?|unknown), recipe \d+\)")

    def test_help_lists_every_subcommand_and_each_has_help(self):
        out = self.kiln("--help", check=0).stdout
        subcommands = re.findall(r"^  (\w[\w-]*)\s{2,}", out.split("Subcommands:")[1], re.M)
        self.assertIn("resolve", subcommands)
        for sub in subcommands:
            sub_help = self.kiln(sub, "--help", check=0).stdout
            self.assertIn("Usage", sub_help.replace("usage", "Usage"))

    def test_usage_errors_exit_2(self):
        self.kiln(check=2)  # no subcommand
        self.kiln("no-such-command", check=2)
        self.kiln("resolve", "--no-such-option", check=2)
        proc = self.kiln("resolve", "--archs", "sm_9", check=2)
        self.assertIn("kiln: error: --archs: bad architecture 'sm_9'", proc.stderr)

    def assert_usage_error(self, args, message, hint):
        proc = self.kiln(*args, check=2)
        self.assertEqual(proc.stdout, "")
        self.assertEqual(proc.stderr, f"kiln: error: {message}\n{hint}\n", args)

    def test_every_usage_error_is_a_kiln_error_with_the_nearest_name(self):
        cases = [
            (["biuld"], "unknown command 'biuld' (did you mean 'build'?)", "kiln"),
            (["cache", "list"], "unknown command 'cache list' (did you mean 'cache ls'?)", "kiln cache"),
            (["frobnicate"], "unknown command 'frobnicate'", "kiln"),
            (["build", "--taget", "x"], "unknown option '--taget' for 'kiln build' (did you mean '--target'?)",
             "kiln build"),
            (["--cache", "c", "cache", "ls", "--jsn"],
             "unknown option '--jsn' for 'kiln cache ls' (did you mean '--json'?)", "kiln cache ls"),
            (["--versoin"], "unknown option '--versoin' for 'kiln' (did you mean '--version'?)", "kiln"),
            (["--offline", "prepare", "x", "-o", "d"],
             "'--offline' is an option of 'kiln prepare': write it after 'prepare'",
             "kiln prepare"),
            (["build", "--jobs", "-1"], "--jobs: '-1' is not a count of 0 or more (0: one per core)",
             "kiln build"),
            (["build", "-j", "x"], "--jobs: 'x' is not a count of 0 or more (0: one per core)", "kiln build"),
            (["build", "--backend", "foo"], "--backend: foo not in {native,setuptools,pure}", "kiln build"),
            ([], "'kiln' needs a command: " + ", ".join(self.subcommands()), "kiln"),
            (["index"], "'kiln index' needs a command: export", "kiln index"),
        ]
        for args, message, command in cases:
            with self.subTest(args=args):
                self.assert_usage_error(args, message, f"Run '{command} --help' for its usage.")

    def test_read_commands_on_a_missing_cache(self):
        missing = self.tmp / "no-such-cache"
        for args in (["cache", "verify"], ["index", "export", str(self.tmp / "out")]):
            with self.subTest(args=args):
                proc = self.kiln("--cache", str(missing), *args, check=2)
                self.assertEqual(proc.stderr, f"kiln: error: no cache at {missing} (give --cache DIR or set "
                                              "KILN_CACHE; `kiln build` makes one)\n")
        self.assertFalse(missing.exists())
        self.assertFalse((self.tmp / "out").exists())
        # gc has nothing to collect there, and says so by succeeding; ls lists nothing (as serve
        # serves nothing), with the next step (it was a usage error, exit 2, on d7e7835).
        self.kiln("--cache", str(missing), "cache", "gc", check=0)
        proc = self.kiln("--cache", str(missing), "cache", "ls", check=0)
        self.assertEqual(proc.stdout, "")
        self.assertIn(f"no cache at {missing} yet: nothing built there (`kiln build` makes it)", proc.stderr)
        self.assertEqual(self.kiln("--cache", str(missing), "--json", "cache", "ls", check=0).stdout, "[]\n")
        self.assertFalse(missing.exists())

    def subcommands(self):
        out = self.kiln("--help", check=0).stdout
        return re.findall(r"^  (\w[\w-]*)\s{2,}", out.split("Subcommands:")[1], re.M)

    def test_unknown_package_and_target_exit_2(self):
        proc = self.kiln("resolve", "kiln-dmeo", check=2)
        self.assertIn("no manifest for package 'kiln-dmeo'", proc.stderr)
        self.assertIn("did you mean 'kiln-demo'", proc.stderr)
        proc = self.kiln("resolve", "--target", "defualt", check=2)
        self.assertIn("did you mean 'default'", proc.stderr)
        # The next step: the targets there are, and how to write one.
        self.assertRegex(proc.stderr, r"; the targets: default, [a-z0-9.-]+(, [a-z0-9.-]+)*; ")
        self.assertIn("torch2.10-cu128", proc.stderr)
        self.assertIn("`kiln target init --python PYTHON` (or `--torch VERSION`) writes one", proc.stderr)
        proc = self.kiln("resolve", "--archs", "sm_35", check=2)
        self.assertIn("older than any CUDA 12 or 13 toolkit builds (CUDA 12 builds sm_50 and newer, "
                      "CUDA 13 sm_75 and newer)", proc.stderr)

    def test_common_errors_name_the_next_step(self):
        """Issue 51: an --offline build that misses a file says to fetch it first; a busy port
        says --port 0."""
        empty = self.tmp / "empty-cache"
        proc = self.kiln("--cache", str(empty), "build", "fla-core", "--offline")
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("fetch it first where the network is reachable (`kiln fetch` with the same "
                      "packages and --target, into this cache), then build --offline", proc.stderr)
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            proc = self.kiln("--cache", str(empty), "serve", "--host", "127.0.0.1", "--port",
                             str(port), timeout=60)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("give another with --port, or --port 0 for a free one", proc.stderr)

    def test_target_option_takes_one_value_per_use(self):
        out = self.kiln("resolve", "--json", "--target", "default", "kiln-demo", check=0).stdout
        self.assertIn('"package": "kiln-demo"', out)

    def test_global_options_after_the_subcommand(self):
        self.kiln("resolve", "kiln-demo", "--json", check=0)


if __name__ == "__main__":
    unittest.main()


class ResolveAllVersionsTest(KilnTestCase):
    """kiln resolve --all-versions: every manifest version of the packages, for every target."""

    def test_every_version_and_every_target(self):
        import json
        from pathlib import Path
        versions = sorted(p.stem for p in (self.project / "manifests" / "causal-conv1d").glob("*.toml"))
        self.assertGreater(len(versions), 1)
        targets = sorted(p.stem for p in (self.project / "manifests" / "targets").glob("*.toml"))
        # Pure packages probe nothing, so every target resolves on any machine.
        out = json.loads(self.kiln("--json", "resolve", "--all-versions", "fla-core", "flash-linear-attention",
                                   check=0).stdout)
        self.assertEqual(sorted(t["name"] for t in out["targets"]), targets)
        pairs = {(i["package"], i["version"], i["target"]) for i in out["items"]}
        self.assertEqual(len(pairs), 2 * len(targets))
        # Without it, only the newest manifest is selected; with it, every version (one target here).
        newest = json.loads(self.kiln("--json", "resolve", "causal-conv1d", "--target", "default", check=0).stdout)
        self.assertEqual([i["version"] for i in newest["items"]], [versions[-1]])
        every = json.loads(self.kiln("--json", "resolve", "--all-versions", "causal-conv1d", "--target", "default",
                                     check=0).stdout)
        self.assertEqual(sorted(i["version"] for i in every["items"]), versions)
        self.assertEqual(len({i["key"] for i in every["items"]}), len(versions))
        table = self.kiln("resolve", "--all-versions", "causal-conv1d", "--target", "default", check=0).stdout
        for v in versions:
            self.assertIn(f" {v} ", table)
        # An unknown package is still a usage error.
        proc = self.kiln("resolve", "--all-versions", "causal-convld", check=2)
        self.assertIn("kiln: error:", proc.stderr)


class FetchTargetTest(SourceTestCase):
    """kiln fetch --target T PKG: sources and the target's pinned torch wheel, so that a later
    --offline build has everything; progress on stderr, one line per completed file."""

    def test_fetch_target_then_offline_build(self):
        import json
        plan = json.loads(self.kiln("--json", "resolve", "kiln-demo", check=0).stdout)
        tag = plan["targets"][0]["python_tag"]
        target = (self.project / "manifests" / "targets" / "default.toml").read_text()
        m = re.search(r'python = "' + tag + r'"\nfile = "([^"]+)"\nsha256 = "([0-9a-f]{64})"', target)
        self.assertIsNotNone(m, tag)
        torch_file, torch_sha = m.groups()
        shared = SHARED_CACHE / "downloads" / torch_sha[:2] / torch_sha / torch_file
        if not shared.is_file():
            self.skipTest(f"{torch_file} is not in the shared download cache")
        # A local index that has the torch wheel (the shared cache's bytes).
        (self.served / "files").mkdir()
        (self.served / "files" / torch_file).symlink_to(shared)
        (self.served / "simple" / "torch").mkdir(parents=True)
        (self.served / "simple" / "torch" / "index.html").write_text(
            f'<a href="../../files/{torch_file}#sha256={torch_sha}">{torch_file}</a>\n')
        index = self.server() + "/simple/"
        # A cache of its own downloads (empty) that shares the unpacked torch, toolkits and objects.
        self.cache = self.tmp / "cache"
        self.cache.mkdir()
        (self.cache / "downloads").mkdir()
        for part in ("sysroots", "toolkits", "envs"):
            (SHARED_CACHE / part).mkdir(parents=True, exist_ok=True)
            (self.cache / part).symlink_to(SHARED_CACHE / part)
        if (SHARED_CACHE / "objects").is_dir():  # a copy: the compile is mostly hits, and ours alone
            shutil.copytree(SHARED_CACHE / "objects", self.cache / "objects")

        proc = self.kiln("build", "kiln-demo", "--offline", check=1)
        self.assertIn(torch_file, proc.stderr)
        proc = self.kiln("--json", "fetch", "--target", "default", "kiln-demo", "--offline", check=1)
        self.assertIn(torch_file, proc.stderr)

        proc = self.kiln("--json", "fetch", "--target", "default", "kiln-demo", "--index-url", index, check=0)
        out = json.loads(proc.stdout)  # stdout is JSON only: progress went to stderr
        self.assertEqual([(p["target"], p["project"], p["file"], p["downloaded"]) for p in out["pinned"]],
                         [("default", "torch", torch_file, True)])
        self.assertEqual(out["items"][0]["package"], "kiln-demo")
        # stderr is no terminal here: one line when the file is complete, no carriage returns.
        self.assertRegex(proc.stderr, rf"kiln: fetched {re.escape(torch_file)} \d+\.\d [kMG]B in \d+")
        self.assertNotIn("\r", proc.stderr)
        self.assertEqual(hashlib.sha256(Path(out["pinned"][0]["path"]).read_bytes()).hexdigest(), torch_sha)

        again = json.loads(self.kiln("--json", "fetch", "--target", "default", "kiln-demo", "--offline",
                                     check=0).stdout)
        self.assertEqual((again["fetches"], again["pinned"][0]["downloaded"]), (0, False))
        built = json.loads(self.kiln("--json", "build", "kiln-demo", "--offline", check=0, timeout=3000).stdout)
        self.assertEqual((built["fetches"], built["items"][0]["cache_hit"]), (0, False))


class DownloadProgressTest(SourceTestCase):
    """A download's progress: redrawn in place on a terminal, one line per file elsewhere; never on
    stdout."""

    def fetch(self, url, terminal):
        import json
        import os
        import pty
        import subprocess
        data = os.urandom(3 << 20)
        (self.served / "demo-1.0.0.tar.gz").write_bytes(data)
        self.demo_manifest(f'url = "{url}/demo-1.0.0.tar.gz"\nsha256 = "{hashlib.sha256(data).hexdigest()}"')
        env = dict(os.environ, KILN_CACHE=str(self.tmp / f"cache-{terminal}"), TERM="xterm")
        env.pop("KILN_MANIFESTS", None)
        if not terminal:
            proc = self.kiln("--json", "fetch", "demo", check=0, env={"KILN_CACHE": env["KILN_CACHE"]})
            return proc.stdout, proc.stderr
        parent, child = pty.openpty()
        proc = subprocess.Popen([KILN, "--json", "fetch", "demo"], cwd=self.project, env=env,
                                stdout=subprocess.PIPE, stderr=child)
        os.close(child)
        err = b""
        while True:
            try:
                chunk = os.read(parent, 65536)
            except OSError:
                break
            if not chunk:
                break
            err += chunk
        stdout = proc.stdout.read().decode()
        proc.stdout.close()
        self.assertEqual(proc.wait(timeout=60), 0, err)
        os.close(parent)
        json.loads(stdout)  # stdout holds the JSON only
        return stdout, err.decode()

    def test_terminal_and_log(self):
        url = self.server()
        _, err = self.fetch(url, terminal=True)
        self.assertIn("\r\x1b[K", err)  # the line redrawn in place, and cleared at the end
        self.assertRegex(err, r"demo-1\.0\.0\.tar\.gz  [\d.]+ [kM]?B / 3\.1 MB")
        self.assertRegex(err, r"kiln: fetched demo-1\.0\.0\.tar\.gz 3\.1 MB in \d+ s")
        stdout, err = self.fetch(url, terminal=False)
        self.assertNotIn("\r", err)
        self.assertEqual(len(re.findall(r"kiln: fetched demo-1\.0\.0\.tar\.gz 3\.1 MB in \d+ s\n", err)), 1, err)
        self.assertNotIn("fetched", stdout)
