"""What an NVIDIA XID error means for a GPU's health: the XID -> action table.

XIDs are the driver's error reports (https://docs.nvidia.com/deploy/xid-errors/). Application
errors (13, 31, 43, 45, 68, 109 — a kernel's own fault) leave the GPU healthy, as in Koordinator
and the NVIDIA device plugin. Other critical XIDs make it unhealthy. Unlike those two, Tessera lets
a GPU recover: after `RECOVER` XIDs once no error has been seen for the quiet period, after
`RESET` XIDs (hardware state that only a GPU reset clears: ECC, NVLink, fallen off the bus) once a
reset has been seen and the quiet period has passed since. Unlisted critical XIDs count as
`RECOVER`. docs/agent.md shows the same table; a test keeps the two in step.

A device's health reason names the XID (`Xid79`): `reason` writes it and `from_reason` reads it
back (from a Device CR written before an agent restart).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = ["XID_TABLE", "XidAction", "XidRule", "from_reason", "reason", "rule"]

_REASON_PREFIX: Final = "Xid"


class XidAction(enum.Enum):
    IGNORE = "ignore"  # application error: the GPU stays healthy
    RECOVER = "recover"  # unhealthy; healthy again after the quiet period without errors
    RESET = "reset"  # unhealthy until a GPU reset is seen, then the quiet period


@dataclass(frozen=True, slots=True)
class XidRule:
    action: XidAction
    description: str


_I, _R, _X = XidAction.IGNORE, XidAction.RECOVER, XidAction.RESET

XID_TABLE: Final[Mapping[int, XidRule]] = {
    13: XidRule(_I, "Graphics engine exception (application error)"),
    31: XidRule(_I, "GPU memory page fault (application error)"),
    32: XidRule(_R, "Invalid or corrupted push buffer stream"),
    38: XidRule(_X, "Driver firmware error"),
    43: XidRule(_I, "GPU stopped processing (application error)"),
    45: XidRule(_I, "Preemptive cleanup after an earlier error (application error)"),
    48: XidRule(_X, "Double-bit ECC error"),
    61: XidRule(_X, "Internal micro-controller breakpoint"),
    62: XidRule(_X, "Internal micro-controller halt"),
    63: XidRule(_X, "ECC page retirement or row remapping recorded"),
    64: XidRule(_X, "ECC page retirement or row remapping failed"),
    68: XidRule(_I, "Video decoder exception (application error)"),
    69: XidRule(_R, "Graphics engine class error"),
    74: XidRule(_X, "NVLink error"),
    79: XidRule(_X, "GPU has fallen off the bus"),
    92: XidRule(_R, "High single-bit ECC error rate"),
    94: XidRule(_R, "Contained ECC error"),
    95: XidRule(_X, "Uncontained ECC error"),
    109: XidRule(_I, "Context switch timeout (application error)"),
    119: XidRule(_X, "GSP RPC timeout"),
    120: XidRule(_X, "GSP error"),
    140: XidRule(_X, "Unrecovered ECC error"),
}

_DEFAULT: Final = XidRule(_R, "Critical XID error")


def rule(xid: int) -> XidRule:
    """The table's rule for `xid`; unlisted XIDs are critical and recover after the quiet period."""
    return XID_TABLE.get(xid, _DEFAULT)


def reason(xid: int) -> str:
    """The health reason for `xid`: `Xid79`."""
    return f"{_REASON_PREFIX}{xid}"


def from_reason(text: str) -> int | None:
    """The XID a health reason names (`Xid79` -> 79); None for any other reason (`GPULost`)."""
    digits = text.removeprefix(_REASON_PREFIX)
    if digits == text or not (digits.isascii() and digits.isdigit()):
        return None
    return int(digits)
