"""Discovery of the GPU isolation layer installed on the node: HAMi-core, by its library file.

Koordinator's scheduler sends a pod labelled `koordinator.sh/gpu-isolation-provider: HAMi-core`
only to nodes labelled the same, and its manual has operators label those nodes by hand. The
agent instead reports what it finds: a node where HAMi-core's library is a file at the path the
agent is told (`--hami-core-library-directory-path`, the path its GPU hook preloads) is a HAMi-core
node. The Device CR then carries the label, and the controller copies it to the Node.

A simulated node says it in its profile instead (`isolationProvider: HAMi-core`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from agent.discovery.model import Inventory
from apis.extension import names

__all__ = ["HAMiCoreSource"]

log = logging.getLogger(__name__)


class HAMiCoreSource:
    """Reports `HAMi-core` as the node's isolation provider while `library` is a file."""

    name = "hami-core"

    def __init__(self, library: Path) -> None:
        self.library = library

    def discover(self) -> Inventory:
        """Never raises: a library that cannot be looked at (permissions) is logged and not reported."""
        try:
            present = self.library.is_file()
        except OSError as e:
            log.warning("Cannot look for the HAMi-core library", extra={"path": str(self.library), "error": str(e)})
            present = False
        return Inventory(isolation_provider=names.GPU_ISOLATION_PROVIDER_HAMI_CORE if present else "")

    def close(self) -> None:
        return None
