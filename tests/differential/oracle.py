"""packaging's verdicts on the JSON lines {kind, input} on stdin, one {"ok": bool} per line (with
"fields" for a wheel file name and "order" for a sort), in the form tests/differential/driver.cpp
writes kiln's (run with the tools venv's Python)."""

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


def wheel_fields(s):
    name, version, build, tags = parse_wheel_filename(s)
    return {"fields": [name, str(version), [str(build[0]), build[1]] if build else [],
                       sorted(str(t) for t in tags)]}


def same_version(s):
    meta, filename = s.split("\n", 1)
    if Version(meta) != parse_wheel_filename(filename)[1]:
        raise ValueError("not the same version")


# tests/differential/driver.cpp's kTargetEnvironment: what kiln knows of a target's Python.
TARGET_ENVIRONMENT = {
    "os_name": "posix", "sys_platform": "linux", "platform_system": "Linux",
    "platform_machine": "x86_64", "extra": "", "implementation_name": "cpython",
    "platform_python_implementation": "CPython", "python_version": "3.12",
    "python_full_version": "3.12.7", "implementation_version": "3.12.7",
}


def marker_value(s):
    return {"fields": Marker(s).evaluate_prepared(TARGET_ENVIRONMENT)}


def order(s):
    lines = s.split("\n")
    versions = [Version(line) for line in lines]
    return {"order": sorted(range(len(lines)), key=lambda i: versions[i])}


CHECKS = {
    "version": Version,
    "canonical": canonical,
    "specifier": SpecifierSet,
    "marker": Marker,
    "requirement": Requirement,
    "metadata": lambda s: Metadata.from_email(s, validate=True),
    "wheel_filename": wheel_fields,
    "index_wheel_filename": wheel_fields,
    "sort": order,
    "same_version": same_version,
    "marker_eval": marker_value,
}

for line in sys.stdin:
    item = json.loads(line)
    try:
        got = CHECKS[item["kind"]](item["input"])
        out = {"ok": True, **(got if isinstance(got, dict) else {})}
    except Exception as e:  # noqa: BLE001 - any refusal is a "no"
        out = {"ok": False, "why": f"{type(e).__name__}: {e}"[:300]}
    print(json.dumps(out))
