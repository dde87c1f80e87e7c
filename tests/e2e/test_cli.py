"""The CLI surface: help, version, usage errors and their exit codes."""

import re
import unittest

from kilntest import KilnTestCase


class CliTest(KilnTestCase):
    def test_version(self):
        out = self.kiln("--version", check=0).stdout
        self.assertRegex(out, r"^kiln \d+\.\d+\.\d+ \(recipe \d+\)")

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

    def test_read_commands_on_a_missing_cache_are_errors(self):
        missing = self.tmp / "no-such-cache"
        for args in (["cache", "ls"], ["cache", "verify"], ["index", "export", str(self.tmp / "out")]):
            with self.subTest(args=args):
                proc = self.kiln("--cache", str(missing), *args, check=2)
                self.assertEqual(proc.stderr, f"kiln: error: no cache at {missing} (give --cache DIR or set "
                                              "KILN_CACHE; `kiln build` makes one)\n")
        self.assertFalse(missing.exists())
        self.assertFalse((self.tmp / "out").exists())
        # gc has nothing to collect there, and says so by succeeding.
        self.kiln("--cache", str(missing), "cache", "gc", check=0)

    def subcommands(self):
        out = self.kiln("--help", check=0).stdout
        return re.findall(r"^  (\w[\w-]*)\s{2,}", out.split("Subcommands:")[1], re.M)

    def test_unknown_package_and_target_exit_2(self):
        proc = self.kiln("resolve", "kiln-dmeo", check=2)
        self.assertIn("no manifest for package 'kiln-dmeo'", proc.stderr)
        self.assertIn("did you mean 'kiln-demo'", proc.stderr)
        proc = self.kiln("resolve", "--target", "defualt", check=2)
        self.assertIn("did you mean 'default'", proc.stderr)

    def test_target_option_takes_one_value_per_use(self):
        out = self.kiln("resolve", "--json", "--target", "default", "kiln-demo", check=0).stdout
        self.assertIn('"package": "kiln-demo"', out)

    def test_global_options_after_the_subcommand(self):
        self.kiln("resolve", "kiln-demo", "--json", check=0)


if __name__ == "__main__":
    unittest.main()
