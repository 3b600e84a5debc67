"""Outcomes of plugins as values: a `Status` is a code, reasons and the plugin that said so.

Codes follow kube-scheduler, and each says what happens next:

    SUCCESS                         go on
    ERROR                           a bug or an internal failure: the pod is retried with backoff
    UNSCHEDULABLE                   does not fit now; preemption might make it fit
    UNSCHEDULABLE_AND_UNRESOLVABLE  does not fit and no preemption can help (wrong node, bad request)
    WAIT                            Permit only: hold the pod until allowed, rejected or timed out
    SKIP                            PreFilter/PreScore: the plugin's Filter/Score has nothing to do
    PENDING                         wait for an external event before retrying

"Does not fit" is a Status, never an exception. `Shortfall`s carry the numbers behind a
rejection ("gpu 3 has 40 gpu-core free, needs 50") so `tessera explain` can show near misses
without parsing messages.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from apis.k8s import resources

__all__ = ["SKIP", "SUCCESS", "Code", "Shortfall", "Status"]


class Code(enum.IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6


@dataclass(frozen=True, slots=True)
class Shortfall:
    """What one resource lacks on one subject (`node`, `gpu 3`, `rdma 1`)."""

    subject: str
    resource: str
    free: int
    needed: int

    def __str__(self) -> str:
        short = self.resource.rsplit("/", 1)[-1]
        free = resources.format_quantity(self.resource, self.free)
        needed = resources.format_quantity(self.resource, self.needed)
        return f"{self.subject} has {free} {short} free, needs {needed}"


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""
    shortfalls: tuple[Shortfall, ...] = ()
    #: Seconds to wait, for a WAIT returned by Permit.
    timeout: float | None = None
    #: The pod itself is wrong (an invalid request, a malformed hint): no cluster change can
    #: help, only a fix of the pod (`invalid_pod`). Other UnschedulableAndUnresolvable
    #: rejections — a gang short of members, say — still wait for the events their plugin names.
    pod_must_change: bool = False

    @property
    def is_success(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def is_rejection(self) -> bool:
        """Unschedulable, with or without hope from preemption."""
        return self.code is Code.UNSCHEDULABLE or self.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    @classmethod
    def unschedulable(cls, *reasons: str, plugin: str = "", shortfalls: tuple[Shortfall, ...] = ()) -> Status:
        return cls(Code.UNSCHEDULABLE, reasons, plugin, shortfalls)

    @classmethod
    def unresolvable(cls, *reasons: str, plugin: str = "", shortfalls: tuple[Shortfall, ...] = ()) -> Status:
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons, plugin, shortfalls)

    @classmethod
    def invalid_pod(cls, *reasons: str, plugin: str = "") -> Status:
        """UnschedulableAndUnresolvable because of the pod itself: retried only when it changes."""
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons, plugin, pod_must_change=True)

    @classmethod
    def error(cls, reason: str, *, plugin: str = "") -> Status:
        return cls(Code.ERROR, (reason,), plugin)

    @classmethod
    def wait(cls, timeout: float, *, plugin: str = "") -> Status:
        return cls(Code.WAIT, (), plugin, timeout=timeout)


SUCCESS = Status()
SKIP = Status(Code.SKIP)
