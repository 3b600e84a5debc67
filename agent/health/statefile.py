"""The node's own record of the GPU faults that wait for a reset: one small JSON file.

A restarted agent must not forget that a GPU fell off the bus (agent/health/memory.py says why
the node keeps this file and also reads the Device CR). The file lives in the agent's state
directory (`--state-dir`, /var/lib/tessera/agent by default; a hostPath in a DaemonSet):

    {"version": 1,
     "faults": {"GPU-5d3c…": {"reason": "Xid79", "message": "XID 79: …", "since": "2024-05-01T10:00:00Z"}}}

keyed by GPU UUID, so a GPU swapped into the same slot never inherits its predecessor's fault.
`save` is atomic — a temporary file in the same directory, fsync, rename over the old one, fsync
of the directory — so a crash or a power cut leaves the old file or the new one, never half of
one. `load` raises `StateFileError` for a file that is not what `save` writes; the caller logs it
and falls back to the Device CR.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from agent.health.tracker import ResetFault
from apis.errors import TesseraError
from kube.lifecycle import write_durably

__all__ = ["FILE_NAME", "VERSION", "StateFile", "StateFileError"]

FILE_NAME: Final = "gpu-faults.json"
VERSION: Final = 1
_FIELDS: Final = ("reason", "message", "since")


class StateFileError(TesseraError):
    """The state file exists but cannot be read or is not what `StateFile.save` writes."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"agent state file {path}: {reason}")
        self.path = path
        self.reason = reason


class StateFile:
    """The faults file in one state directory. Not thread-safe: one writer (FaultMemory) at a time."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / FILE_NAME

    def load(self) -> dict[str, ResetFault] | None:
        """The faults as last saved; None when there is no file (a new node, a fresh filesystem).
        Raises StateFileError when the file cannot be read or does not parse."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as e:
            raise StateFileError(self.path, f"cannot read: {e}") from e
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise StateFileError(self.path, f"not JSON: {e}") from e
        if not isinstance(doc, dict) or doc.get("version") != VERSION:
            version = doc.get("version") if isinstance(doc, dict) else None
            raise StateFileError(self.path, f"expected an object with version {VERSION}, got version {version!r}")
        faults = doc.get("faults")
        if not isinstance(faults, dict):
            raise StateFileError(self.path, f"faults must be an object keyed by GPU UUID, got {faults!r}")
        return {str(uuid): _fault(self.path, str(uuid), entry) for uuid, entry in faults.items()}

    def save(self, faults: Mapping[str, ResetFault]) -> None:
        """Replace the file with `faults`, atomically and durably. Raises OSError (full disk,
        read-only directory); the old file is then left as it was."""
        doc = {
            "version": VERSION,
            "faults": {
                uuid: {"reason": f.reason, "message": f.message, "since": f.since} for uuid, f in sorted(faults.items())
            },
        }
        write_durably(self.path, json.dumps(doc, indent=1) + "\n")

    def discard(self) -> None:
        """Remove the file (a stale one, after `save` failed), so that the next start falls back to
        the Device CR instead of trusting it. Raises OSError when that fails too."""
        self.path.unlink(missing_ok=True)


def _fault(path: Path, uuid: str, entry: object) -> ResetFault:
    if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in _FIELDS):
        raise StateFileError(path, f"fault of {uuid}: expected strings {', '.join(_FIELDS)}, got {entry!r}")
    if not entry["reason"]:
        raise StateFileError(path, f"fault of {uuid}: reason must not be empty")
    return ResetFault(reason=entry["reason"], message=entry["message"], since=entry["since"])
