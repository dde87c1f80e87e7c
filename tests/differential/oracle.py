"""packaging's verdicts on the JSON lines {kind, input} on stdin, one {"ok": bool} per line, in
the form tests/differential/driver.cpp writes kiln's (run with the tools venv's Python)."""

import json
import sys
import warnings

from packaging.markers import Marker
from packaging.metadata import Metadata
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import parse_wheel_filename
from packaging.version import Version

warnings.simplefilter("ignore")


def canonical(s):
    v = Version(s)
    if str(v) != s or v.local is not None:
        raise ValueError(s)


CHECKS = {
    "version": Version,
    "canonical": canonical,
    "specifier": SpecifierSet,
    "marker": Marker,
    "requirement": Requirement,
    "metadata": lambda s: Metadata.from_email(s, validate=True),
    "wheel_filename": parse_wheel_filename,
}

for line in sys.stdin:
    item = json.loads(line)
    try:
        CHECKS[item["kind"]](item["input"])
        out = {"ok": True}
    except Exception as e:  # noqa: BLE001 - any refusal is a "no"
        out = {"ok": False, "why": f"{type(e).__name__}: {e}"[:300]}
    print(json.dumps(out))
