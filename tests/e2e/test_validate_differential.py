"""kiln's metadata verdicts against the `packaging` library's (the oracle, pinned in
tests/tools-requirements.txt): real METADATA files from PyPI (tests/differential/corpus.txt,
fetched once into ~/.cache/kiln/differential) and thousands of mutations of them and of their
versions, specifiers, markers, requirements and wheel file names (a fixed seed), generated wheel
file names (their fields too, as validate and as the index read them), batches of generated
versions sorted and METADATA versions against file names' (one version spelled two ways, or two), judged by kiln's batch driver (tests/differential/driver.cpp) in one process and
by packaging; zero disagreements."""

import collections
import json
import os
import subprocess
import sys
import time
import unittest
from pathlib import Path

from kilntest import KILN

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "differential"))

import corpus  # noqa: E402
import generate  # noqa: E402

TOOLS = Path(os.environ.get("KILN_TOOLS", Path.home() / ".cache/kiln/tools"))


def driver():
    if os.environ.get("KILN_DIFFERENTIAL"):
        return Path(os.environ["KILN_DIFFERENTIAL"])
    for d in [Path(KILN).resolve().parent, *Path(KILN).resolve().parents]:
        if (d / "tests" / "kiln_differential").exists():
            return d / "tests" / "kiln_differential"
    raise unittest.SkipTest("no kiln_differential next to kiln")


def judge(command, items):
    text = "".join(json.dumps({"kind": k, "input": i}) + "\n" for k, i in items)
    out = subprocess.run(command, input=text, capture_output=True, text=True, check=True,
                         errors="surrogateescape").stdout
    return [json.loads(line) for line in out.splitlines()]


def breaks_index_rules(f):
    """The index's rules on top of packaging's (index::index_wheel_name): at most 255 bytes, the
    name starting with an ASCII letter or digit, nothing but ASCII letters, digits and ._+!- ."""
    stem = f[:-4] if f.endswith(".whl") else f
    ok = lambda c: c.isascii() and (c.isalnum() or c in "._+!-")
    return len(f.encode("utf-8", "surrogateescape")) > 255 or (
        stem != "" and not (all(ok(c) for c in stem) and stem[0].isascii() and stem[0].isalnum()))


def disagreement(kind, item, ours, theirs):
    """Why kiln's answer differs from packaging's on one input, or None."""
    if kind == "index_wheel_filename" and breaks_index_rules(item):
        return "the index served a name its rules refuse" if ours.get("ok") else None
    if ours.get("ok") != theirs.get("ok"):
        return "verdict"
    for field in ("fields", "order"):
        if ours.get(field) != theirs.get(field):
            return field
    return None


def has_control(s):
    return any((ord(c) < 32 and c != "\t") or 0x7f <= ord(c) < 0xa0 for c in s)


class DifferentialTest(unittest.TestCase):
    def test_kiln_agrees_with_packaging(self):
        python = TOOLS / "bin" / "python"
        if not python.exists():
            self.skipTest(f"no tools venv at {TOOLS}")
        start = time.monotonic()
        try:
            docs = corpus.fetch()
        except OSError as e:
            self.skipTest(f"corpus not fetched: {e}")
        items = generate.generate(docs)
        # kiln refuses control characters in a requirement line (besides the tab) where packaging
        # would take some (in a URL, a quoted string): a kiln rule, left out of the comparison.
        items = [(k, i) for k, i in items if not (k == "requirement" and has_control(i))]
        # A blank specifier set is packaging's empty set; kiln refuses it (a field must say
        # something).
        items = [(k, i) for k, i in items if not (k == "specifier" and not i.strip())]
        ours = judge([str(driver())], items)
        theirs = judge([str(python), str(ROOT / "tests/differential/oracle.py")], items)
        self.assertEqual(len(ours), len(items))
        self.assertEqual(len(theirs), len(items))
        kinds = collections.Counter(k for k, _ in items)
        versions = collections.Counter(d.split("\n", 1)[0].strip() for d in docs.values())
        print(f"\ncorpus: {len(docs)} METADATA files {dict(versions)}; inputs: {len(items)} "
              f"{dict(kinds)}; {time.monotonic() - start:.1f} s", file=sys.stderr)
        differ = [(k, i, o, t, why) for (k, i), o, t in zip(items, ours, theirs)
                  if (why := disagreement(k, i, o, t))]
        for k, i, o, t, why in differ[:40]:
            print(f"DISAGREE ({why}) {k}: {i[:200]!r} kiln={str(o)[:300]} packaging={str(t)[:300]}",
                  file=sys.stderr)
        sorts = [(o, t) for (k, _), o, t in zip(items, ours, theirs) if k == "sort"]
        sorted_versions = sum(len(o["order"]) for o, _ in sorts if "order" in o)
        names = sum(1 for k, _ in items if k == "wheel_filename")
        print(f"orderings: {len(sorts)} sorts of {sorted_versions} versions in all; wheel file names: "
              f"{names}, each read as validate and as the index reads it", file=sys.stderr)
        self.assertTrue(sorts and all(o.get("ok") and t.get("ok") for o, t in sorts),
                        "every sort batch must hold versions only")
        self.assertGreaterEqual(sorted_versions, 10000)
        pairs = [t.get("ok") for (k, _), t in zip(items, theirs) if k == "same_version"]
        print(f"METADATA version against the file name's: {len(pairs)} pairs, {sum(pairs)} the same "
              f"version for packaging", file=sys.stderr)
        self.assertGreaterEqual(len(pairs), 1000)
        self.assertTrue(0.3 * len(pairs) < sum(pairs) < 0.9 * len(pairs), "both verdicts, often")
        values = [t.get("fields") for (k, _), t in zip(items, theirs)
                  if k == "marker_eval" and t.get("ok")]
        print(f"markers evaluated in a target's environment: {len(values)}, {sum(values)} true",
              file=sys.stderr)
        self.assertGreaterEqual(len(values), 1000)
        self.assertTrue(0.1 * len(values) < sum(values) < 0.9 * len(values), "both values, often")
        by_kind = collections.Counter(k for k, *_ in differ)
        self.assertEqual(len(differ), 0, f"{len(differ)} disagreements: {dict(by_kind)}")


if __name__ == "__main__":
    unittest.main()
