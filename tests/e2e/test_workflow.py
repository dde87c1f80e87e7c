"""The sample GitHub Actions workflow (docs/examples/github-matrix.yml) passes actionlint, with
shellcheck over its scripts; and actionlint is a real check: a broken copy fails it."""

import shutil
import subprocess

from kilntest import SOURCE_DIR, TOOLS, KilnTestCase

EXAMPLES = SOURCE_DIR / "docs" / "examples"


class WorkflowTest(KilnTestCase):
    def actionlint(self, workflow):
        binary = TOOLS / "bin" / "actionlint"
        self.assertTrue(binary.exists(), f"{binary}: scripts/test installs it "
                        "(tests/tools-requirements.txt)")
        self.assertTrue(shutil.which("shellcheck"), "shellcheck: scripts/install-deps installs it")
        return subprocess.run([str(binary), "-config-file", str(EXAMPLES / "actionlint.yaml"),
                               str(workflow)], capture_output=True, text=True, timeout=120)

    def test_sample_workflow_passes_actionlint(self):
        proc = self.actionlint(EXAMPLES / "github-matrix.yml")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)

    def test_actionlint_and_shellcheck_catch_a_broken_copy(self):
        text = (EXAMPLES / "github-matrix.yml").read_text()
        broken = text.replace("needs.plan.outputs.matrix", "needs.plan.outputs.matrx", 1)
        broken = broken.replace('build "$PACKAGE"', "build $PACKAGE", 1)
        self.assertNotEqual(broken, text)
        path = self.tmp / "broken.yml"
        path.write_text(broken)
        proc = self.actionlint(path)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn('property "matrx" is not defined', proc.stdout)
        self.assertIn("SC2086", proc.stdout)
