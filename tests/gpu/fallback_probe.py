"""What the model scripts (qwen35_layer.py, mamba2_layer.py) share: making kernel packages
unimportable before transformers is imported, so that it takes its torch fallback on purpose, and
collecting the warnings transformers logs."""

import importlib.abc
import logging
import sys


class _Hide(importlib.abc.MetaPathFinder):
    def __init__(self, packages):
        self.packages = tuple(packages)

    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in self.packages:
            raise ModuleNotFoundError(f"No module named '{name}' (hidden for the fallback run)", name=name)
        return None


def hide_packages(packages):
    """Every later import of these top-level packages (and their modules) fails."""
    if any(m.split(".")[0] in packages for m in sys.modules):
        raise RuntimeError("hide_packages() must run before the kernel packages are imported")
    sys.meta_path.insert(0, _Hide(packages))


class WarningCapture(logging.Handler):
    """The messages of WARNING and above, in order."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())
