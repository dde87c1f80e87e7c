"""pytest plugin: run a fixed sample of a large parametrized test file.

Keeps every Nth test (N from KILN_SAMPLE_EVERY, default 4), chosen by a stable hash of the
test's id, so the same cases run on every machine and every run.
"""

import os
import zlib


def pytest_collection_modifyitems(config, items):
    every = int(os.environ.get("KILN_SAMPLE_EVERY", "4"))
    if every <= 1:
        return
    keep, drop = [], []
    for item in items:
        (keep if zlib.crc32(item.nodeid.encode()) % every == 0 else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep
