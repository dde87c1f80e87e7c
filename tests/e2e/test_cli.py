"""The CLI surface: help, version, usage errors and their exit codes."""

import hashlib
import os
import re
import shlex
import shutil
import socket
import subprocess
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
            # A flag takes no value: the word after it is the command.
            (["--json", "biuld"], "unknown command 'biuld' (did you mean 'build'?)", "kiln"),
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


class HelpTest(KilnTestCase):
    def commands(self, *path):
        """Every command path under `path`, from the help's Subcommands section."""
        out = self.kiln(*path, "--help", check=0).stdout
        if "Subcommands:" not in out:
            return [list(path)]
        found = [list(path)] if path else []
        for sub in re.findall(r"^  (\w[\w-]*)\s{2,}", out.split("Subcommands:")[1], re.M):
            found += self.commands(*path, sub)
        return found

    def test_every_help_shows_the_global_options_and_no_cli11_badges(self):
        top = self.kiln("--help", check=0).stdout
        self.assertNotIn("__complete", top)  # hidden
        paths = self.commands()
        self.assertIn(["cache", "gc"], paths)
        for path in [[]] + paths:
            with self.subTest(path=path):
                out = self.kiln(*path, "--help", check=0).stdout
                for badge in ("Excludes", "Needs:", "TEXT:{", "INT:INT"):
                    self.assertNotIn(badge, out)
                for option in ("--cache", "--manifests", "--patches", "--json", "-v,--verbose", "-q,--quiet"):
                    self.assertIn(option, out)
                if path:
                    self.assertIn("Global options (before or after the command):", out)
        build = self.kiln("build", "--help", check=0).stdout
        self.assertRegex(build, r"-t,--target TARGET \.\.\.")
        self.assertRegex(build, r"--archs ARCHS\s")
        self.assertRegex(build, r"--sandbox \{auto,required,off\}")
        self.assertRegex(build, r"-j,--jobs INT>=0\s")
        self.assertRegex(build, r"packages PACKAGE \.\.\.")
        # What CLI11 printed as "Excludes: --quiet", in kiln's words.
        self.assertIn("More output (repeat for more) (not with --quiet)", build)
        self.assertIn("(with --torch)", self.kiln("target", "init", "--help", check=0).stdout)


class CompletionTest(KilnTestCase):
    """The completion scripts as the shells run them: `kiln` on PATH, the scripts asking
    `kiln __complete` for the manifests directory's targets and packages at TAB time."""

    def setUp(self):
        super().setUp()
        self.bin = self.tmp / "bin"
        self.bin.mkdir()
        (self.bin / "kiln").symlink_to(Path(KILN).resolve())

    def env(self, extra=None):
        env = dict(os.environ)
        for name in ("KILN_MANIFESTS", "KILN_PATCHES", "KILN_TARGET", "KILN_JOBS", "KILN_OFFLINE",
                     "KILN_INDEX_URL"):
            env.pop(name, None)
        env.update({"KILN_CONFIG": "/dev/null", "KILN_CACHE": str(self.cache),
                    "PATH": f"{self.bin}:{env.get('PATH', '/usr/bin:/bin')}"})
        env.update(extra or {})
        return env

    def complete(self, *words, env=None, shell="bash"):
        """COMPREPLY for the command line `words` (the last the word being completed)."""
        script = self.kiln("completion", shell, check=0).stdout
        probe = (f"{script}\nCOMP_WORDS=({' '.join(shlex.quote(w) for w in words)}); "
                 f"COMP_CWORD={len(words) - 1}; _kiln_complete; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
        got = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, cwd=self.project,
                             env=self.env(env), timeout=60)
        self.assertEqual(got.returncode, 0, got.stderr)
        self.assertEqual(got.stderr, "", words)
        return [line for line in got.stdout.splitlines() if line]

    def targets(self):
        return sorted({p.stem for p in (self.project / "manifests" / "targets").glob("*.toml")} | {"default"})

    def one_target_manifests(self):
        """A manifests directory with one target, `mine`, and one package, `solo`."""
        manifests = self.tmp / "other" / "manifests"
        (manifests / "targets").mkdir(parents=True)
        shutil.copy(self.project / "manifests" / "targets" / "default.toml",
                    manifests / "targets" / "mine.toml")
        (manifests / "solo").mkdir()
        demo = next((self.project / "manifests" / "kiln-demo").glob("*.toml"))
        text = demo.read_text().replace('name = "kiln-demo"', 'name = "solo"')
        (manifests / "solo" / demo.name).write_text(text)
        return manifests

    def test_target_values(self):
        want = self.targets()
        self.assertIn("torch2.10-cu128", want)
        for words in (["kiln", "build", "--target", ""], ["kiln", "build", "-t", ""],
                      ["kiln", "build", "kiln-demo", "--target", ""],
                      ["kiln", "build", "--target", "=", ""],  # "--target=" where '=' breaks words
                      ["kiln", "resolve", "--target", ""], ["kiln", "fetch", "-t", ""],
                      ["kiln", "validate", "--target", ""], ["kiln", "index", "export", "d", "--target", ""]):
            with self.subTest(words=words):
                self.assertEqual(sorted(self.complete(*words)), want)
        self.assertEqual(self.complete("kiln", "build", "--target", "torch2.1"),
                         [t for t in want if t.startswith("torch2.1")])
        # A target file: a path completes as one.
        self.assertEqual(self.complete("kiln", "build", "--target", "manifests/targets/default."),
                         ["manifests/targets/default.toml"])

    def test_package_values(self):
        packages = self.complete("kiln", "build", "")
        self.assertIn("kiln-demo", packages)
        self.assertIn("causal-conv1d", packages)
        self.assertFalse([p for p in packages if p.startswith("-")], packages)
        self.assertEqual(self.complete("kiln", "build", "--target", "default", "kiln-d"), ["kiln-demo"])
        for command in (["resolve"], ["fetch"], ["prepare"], ["build", "--archs", "9.0", "--offline"]):
            with self.subTest(command=command):
                self.assertEqual(self.complete("kiln", *command, "kiln-d"), ["kiln-demo"])
        # index export: a directory first, then packages.
        self.assertEqual(self.complete("kiln", "index", "export", "mani"), ["manifests"])
        self.assertEqual(self.complete("kiln", "index", "export", "out", "kiln-d"), ["kiln-demo"])
        # Options where one is asked for, and theirs only; kiln's own too.
        options = self.complete("kiln", "build", "-")
        self.assertIn("--target", options)
        self.assertIn("--manifests", options)
        self.assertNotIn("kiln-demo", options)

    def test_arch_values(self):
        archs = self.complete("kiln", "build", "--archs", "")
        for arch in ("9.0", "9.0a", "10.0f", "12.0", "12.0a"):
            self.assertIn(arch, archs)
        self.assertFalse([a for a in archs if not re.fullmatch(r"\d+\.\d[af]?", a)], archs)
        self.assertEqual(self.complete("kiln", "resolve", "--archs", "12.0"), ["12.0", "12.0a", "12.0f"])
        self.assertIn("9.0;12.0a", self.complete("kiln", "build", "--archs", "9.0;12"))
        self.assertIn("9.0,10.0", self.complete("kiln", "validate", "--archs", "9.0,1"))
        self.assertIn("9.0", self.complete("kiln", "target", "init", "--archs", "9"))

    def test_other_values(self):
        self.assertEqual(self.complete("kiln", "build", "--sandbox", ""), ["auto", "required", "off"])
        self.assertEqual(sorted(self.complete("kiln", "completion", "")), ["bash", "fish", "zsh"])
        helped = self.complete("kiln", "help", "")
        self.assertIn("build", helped)
        self.assertNotIn("__complete", helped)
        self.assertNotIn("__complete", self.complete("kiln", ""))
        self.assertNotIn("__complete", self.complete("kiln", "__"))
        # A path: files, never option names.
        self.assertEqual(self.complete("kiln", "build", "--index-url", "mani"), ["manifests"])
        self.assertEqual(self.complete("kiln", "--manifests", "mani"), ["manifests"])
        self.assertEqual(self.complete("kiln", "validate", "--junit", "mani"), ["manifests"])

    def test_the_manifests_directory_in_effect(self):
        manifests = self.one_target_manifests()
        for words in (["kiln", "--manifests", str(manifests), "build", "--target", ""],
                      ["kiln", "build", "--manifests", str(manifests), "--target", ""],
                      ["kiln", "build", "--manifests", "=", str(manifests), "--target", ""]):
            with self.subTest(words=words):
                # default is built in, so every manifests directory has it.
                self.assertEqual(self.complete(*words), ["default", "mine"])
        self.assertEqual(self.complete("kiln", "--manifests", str(manifests), "build", ""), ["solo"])
        self.assertEqual(self.complete("kiln", "build", "--target", "", env={"KILN_MANIFESTS": str(manifests)}),
                         ["default", "mine"])

    def test_a_broken_manifests_directory_completes_nothing(self):
        not_a_dir = self.tmp / "file"
        not_a_dir.write_text("x")
        for what in ("targets", "packages"):
            with self.subTest(what=what):
                proc = self.kiln("--manifests", str(not_a_dir), "__complete", what, check=0)
                self.assertEqual((proc.stdout, proc.stderr), ("", ""))
        self.assertEqual(self.complete("kiln", "--manifests", str(not_a_dir), "build", ""), [])
        # A manifest that does not load: its package is still a name to complete, without a word
        # about it at TAB time.
        broken = self.project / "manifests" / "kiln-demo" / "9.9.9.toml"
        broken.write_text("this is not toml [")
        proc = self.kiln("__complete", "packages", check=0)
        self.assertIn("kiln-demo\n", proc.stdout)
        self.assertEqual(proc.stderr, "")
        self.assertIn("9.0a\n", self.kiln("__complete", "archs", check=0).stdout)
        self.assertEqual(self.kiln("__complete", "nonsense", check=0).stdout, "")

    def test_zsh_and_fish_load_their_scripts(self):
        for shell, run in (("zsh", ["zsh", "-f", "-c"]), ("fish", ["fish", "--no-config", "-c"])):
            with self.subTest(shell=shell):
                if not shutil.which(shell):
                    self.skipTest(f"{shell} is not installed")
                script = self.kiln("completion", shell, check=0).stdout
                load = ('autoload -U compinit && compinit -u && eval "$(kiln completion zsh)"' if shell == "zsh"
                        else "kiln completion fish | source")
                got = subprocess.run([*run, load], capture_output=True, text=True, cwd=self.project,
                                     env=self.env(), timeout=60)
                self.assertEqual((got.returncode, got.stderr), (0, ""), script[:200])
        if shutil.which("zsh"):  # values as bashcompinit calls the function (arrays from 0)
            probe = ('autoload -U compinit && compinit -u && eval "$(kiln completion zsh)"; setopt ksharrays; '
                     'COMP_WORDS=(kiln build --target torch2.1); COMP_CWORD=3; _kiln_complete; '
                     'print -l -- "${COMPREPLY[@]}"')
            got = subprocess.run(["zsh", "-f", "-c", probe], capture_output=True, text=True, cwd=self.project,
                                 env=self.env(), timeout=60)
            self.assertEqual(got.stdout.split(), [t for t in self.targets() if t.startswith("torch2.1")],
                             got.stderr)

    def test_fish_completes_values(self):
        if not shutil.which("fish"):
            self.skipTest("fish is not installed")
        manifests = self.one_target_manifests()

        def complete(line):
            got = subprocess.run(["fish", "--no-config", "-c",
                                  f"kiln completion fish | source; complete -C {shlex.quote(line)}"],
                                 capture_output=True, text=True, cwd=self.project, env=self.env(), timeout=60)
            self.assertEqual((got.returncode, got.stderr), (0, ""), line)
            return sorted(line.split("\t")[0] for line in got.stdout.splitlines())

        self.assertEqual(complete("kiln build --target torch2.1"),
                         [t for t in self.targets() if t.startswith("torch2.1")])
        self.assertEqual(complete(f"kiln --manifests {manifests} build --target mi"), ["mine"])  # names, and files (none here)
        self.assertEqual(complete("kiln build kiln-d"), ["kiln-demo"])
        self.assertEqual(complete("kiln resolve --archs 12.0"), ["12.0", "12.0a", "12.0f"])
        self.assertEqual(complete("kiln build --sandbox "), ["auto", "off", "required"])

    def test_fish_script_completes_values(self):
        fish = self.kiln("completion", "fish", check=0).stdout
        self.assertIn("complete -c kiln -n '__fish_seen_subcommand_from build' -l target -s t -r "
                      "-a '(__kiln_complete targets)'", fish)
        self.assertIn("-l archs -x -a '(__kiln_complete archs)'", fish)
        self.assertIn("complete -c kiln -n '__fish_seen_subcommand_from build' -f "
                      "-a '(__kiln_complete packages)'", fish)
        self.assertIn("-l sandbox -x -a 'auto required off'", fish)
        self.assertIn("complete -c kiln -l manifests -r", fish)  # kiln's own options everywhere
        self.assertNotIn("__complete -d", fish)


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
