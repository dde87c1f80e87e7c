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
