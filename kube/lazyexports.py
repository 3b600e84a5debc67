"""Package names loaded on first use (PEP 562), for packages whose full import is heavy.

`import kube` must not pay for the `kubernetes` library (`tessera --help` imports it for
logging), nor `import agent` for gRPC and NVML, nor `agent.qos` for pyroute2. Each keeps its
names in a table and sets `__getattr__ = lazy_exports(__name__, TABLE)`; type checkers see the
names through an `if TYPE_CHECKING:` import beside the table.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` that imports `exports[name]` (a module path) on
    first use and keeps the value in the package, so the next lookup does not come here."""
    namespace = sys.modules[package].__dict__

    def load(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = namespace[name] = getattr(importlib.import_module(module), name)
        return value

    return load
