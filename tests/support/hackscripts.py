"""hack/'s scripts, imported from their files for the tests that hold a document to what a script
generates (hack/ is not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["load"]

HACK = Path(__file__).resolve().parents[2] / "hack"


def load(name: str) -> ModuleType:
    """`hack/NAME.py` as a module (once per process)."""
    spec = importlib.util.spec_from_file_location(name, HACK / f"{name}.py")
    assert spec is not None and spec.loader is not None
    if name in sys.modules:
        return sys.modules[name]
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
