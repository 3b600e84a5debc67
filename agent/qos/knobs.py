"""The cgroup settings QoS writes ("knobs"), each with its v1 and v2 files and codecs.

A knob has one logical value type for both cgroup versions — CPU weight in shares units, CPU
limit as `CPUMax(quota, period)`, memory in bytes with `UNLIMITED` — and knows which files hold
it and how to encode/decode them per version. `agent.qos.cgroups.Cgroup.read/write` use these
tables, so callers never see a file name or a version difference. Pure; no I/O.

| knob           | v1 file (controller)                           | v2 file        |
| -------------- | ---------------------------------------------- | -------------- |
| CPU_SHARES     | cpu.shares (cpu)                               | cpu.weight     |
| CPU_MAX        | cpu.cfs_period_us + cpu.cfs_quota_us (cpu)     | cpu.max        |
| CPU_IDLE       | cpu.idle (cpu)                                 | cpu.idle       |
| CPUSET_CPUS    | cpuset.cpus (cpuset)                           | cpuset.cpus    |
| MEMORY_MAX     | memory.limit_in_bytes (memory)                 | memory.max     |
| MEMORY_MIN/LOW/HIGH | memory.min/.low/.high (memory; Anolis kernels only) | memory.min/.low/.high |
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

from agent.qos import convert

__all__ = [
    "CPUSET_CPUS",
    "CPU_IDLE",
    "CPU_MAX",
    "CPU_SHARES",
    "MEMORY_HIGH",
    "MEMORY_LOW",
    "MEMORY_MAX",
    "MEMORY_MIN",
    "CPUMax",
    "CgroupVersion",
    "Knob",
    "KnobFiles",
    "format_cpuset",
    "parse_cpuset",
]

T = TypeVar("T")

#: v1 reports "no memory limit" as PAGE_COUNTER_MAX × page size (9223372036854771712 on x86-64).
_V1_UNLIMITED_FLOOR: Final = 1 << 62
_CPUSET = re.compile(r"^\s*$|^\d+(-\d+)?(,\d+(-\d+)?)*$")


class CgroupVersion(enum.Enum):
    V1 = "v1"
    V2 = "v2"


@dataclass(frozen=True, slots=True)
class CPUMax:
    """A CFS bandwidth limit: `quota` µs of CPU per `period` µs; quota UNLIMITED means none."""

    quota: int
    period: int = convert.CFS_PERIOD_US

    @property
    def unlimited(self) -> bool:
        return self.quota < 0

    def milli(self) -> int:
        """The CPU this limit allows, in milli-cores (UNLIMITED when unlimited)."""
        return convert.quota_to_milli(self.quota, self.period)

    def exceeds(self, other: CPUMax) -> bool:
        """True when this limit allows more CPU than `other` (exact, cross-multiplied)."""
        if other.unlimited:
            return False
        if self.unlimited:
            return True
        return self.quota * other.period > other.quota * self.period

    def scaled_to(self, other: CPUMax) -> CPUMax:
        """`other`'s rate expressed in this limit's period (used to cap a child at its parent)."""
        if other.unlimited:
            return CPUMax(convert.UNLIMITED, self.period)
        return CPUMax(other.quota * self.period // other.period, self.period)


@dataclass(frozen=True, slots=True)
class KnobFiles:
    """The part of a knob that does not depend on its value type: its name and files per version."""

    name: str
    files: Mapping[CgroupVersion, tuple[tuple[str, str], ...]]

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Knob(KnobFiles, Generic[T]):
    """One logical setting: per version the files (controller, file name) and the codecs.

    `encode` turns a value into the text of each file (in write order); `decode` reads them
    back. Two values are equal for a cgroup when `decode(encode(v))` matches what is read, so
    lossy mappings (shares → weight) and kernel normalisation (`-1` → 9223372036854771712)
    never cause a needless write. `check` returns why a value is out of range, or None.
    """

    encode: Mapping[CgroupVersion, Callable[[T], tuple[str, ...]]]
    decode: Mapping[CgroupVersion, Callable[[tuple[str, ...]], T]]
    check: Callable[[T], str | None]
    #: memory knobs: the kernel rounds bytes down to whole pages, so values are written that way
    #: (called with the value and the page size).
    align: Callable[[T, int], T] | None = None


# --- codecs ----------------------------------------------------------------------------------------


def _one_int(texts: tuple[str, ...]) -> int:
    return int(texts[0].strip())


def _memory_decode(texts: tuple[str, ...]) -> int:
    text = texts[0].strip()
    if text == "max":
        return convert.UNLIMITED
    value = int(text)
    return convert.UNLIMITED if value < 0 or value >= _V1_UNLIMITED_FLOOR else value


def _memory_encode_v1(value: int) -> tuple[str, ...]:
    return ("-1" if value < 0 else str(value),)


def _memory_encode_v2(value: int) -> tuple[str, ...]:
    return ("max" if value < 0 else str(value),)


def _memory_check(value: int) -> str | None:
    return None if value >= 0 or value == convert.UNLIMITED else "must be >= 0 bytes or UNLIMITED (-1)"


def _protection_check(value: int) -> str | None:
    return None if value >= 0 else "must be >= 0 bytes"


def _shares_check(value: int) -> str | None:
    if convert.MIN_SHARES <= value <= convert.MAX_SHARES:
        return None
    return f"must be in {convert.MIN_SHARES}..{convert.MAX_SHARES}"


def _cpu_max_check(value: CPUMax) -> str | None:
    if not convert.MIN_QUOTA_PERIOD_US <= value.period <= convert.MAX_QUOTA_PERIOD_US:
        return f"period must be in {convert.MIN_QUOTA_PERIOD_US}..{convert.MAX_QUOTA_PERIOD_US} us"
    if value.quota != convert.UNLIMITED and value.quota < convert.MIN_QUOTA_PERIOD_US:
        return f"quota must be UNLIMITED (-1) or >= {convert.MIN_QUOTA_PERIOD_US} us"
    return None


def _cpu_max_decode_v1(texts: tuple[str, ...]) -> CPUMax:
    period, quota = int(texts[0].strip()), int(texts[1].strip())
    return CPUMax(convert.UNLIMITED if quota < 0 else quota, period)


def _cpu_max_encode_v1(value: CPUMax) -> tuple[str, ...]:
    return (str(value.period), str(convert.UNLIMITED if value.unlimited else value.quota))


def _cpu_max_decode_v2(texts: tuple[str, ...]) -> CPUMax:
    quota, _, period = texts[0].strip().partition(" ")
    return CPUMax(convert.UNLIMITED if quota == "max" else int(quota), int(period or convert.CFS_PERIOD_US))


def _cpu_max_encode_v2(value: CPUMax) -> tuple[str, ...]:
    return (f"{'max' if value.unlimited else value.quota} {value.period}",)


def parse_cpuset(text: str) -> frozenset[int]:
    """`0-3,8` → {0, 1, 2, 3, 8}. Raises ValueError on anything else."""
    text = text.strip()
    if not _CPUSET.match(text):
        raise ValueError(f"not a cpu list: {text!r}")
    cpus: set[int] = set()
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        first, last = int(lo), int(hi or lo)
        if last < first:
            raise ValueError(f"descending range {part!r}")
        cpus.update(range(first, last + 1))
    return frozenset(cpus)


def format_cpuset(cpus: frozenset[int]) -> str:
    """The kernel's canonical form: sorted, consecutive CPUs as ranges (`0-3,8`)."""
    out: list[str] = []
    ordered = sorted(cpus)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def _cpuset_check(value: str) -> str | None:
    try:
        parse_cpuset(value)
    except ValueError as e:
        return str(e)
    return None


def _cpuset_decode(texts: tuple[str, ...]) -> str:
    return format_cpuset(parse_cpuset(texts[0]))


def _bool_decode(texts: tuple[str, ...]) -> bool:
    return _one_int(texts) != 0


def _bool_encode(value: bool) -> tuple[str, ...]:
    return ("1" if value else "0",)


def _no_check(value: object) -> str | None:
    return None


def _same_both(
    v1: tuple[tuple[str, str], ...], v2: tuple[tuple[str, str], ...]
) -> dict[CgroupVersion, tuple[tuple[str, str], ...]]:
    return {CgroupVersion.V1: v1, CgroupVersion.V2: v2}


def _protection(name: str) -> Knob[int]:
    """memory.min / memory.low / memory.high: same file name in v1 (Anolis) and v2."""
    unlimited_ok = name == "memory.high"
    return Knob(
        name=name,
        files=_same_both((("memory", name),), (("", name),)),
        encode={CgroupVersion.V1: _memory_encode_v2, CgroupVersion.V2: _memory_encode_v2},
        decode={CgroupVersion.V1: _memory_decode, CgroupVersion.V2: _memory_decode},
        check=_memory_check if unlimited_ok else _protection_check,
        align=convert.page_floor,
    )


CPU_SHARES: Final[Knob[int]] = Knob(
    name="cpu.shares",
    files=_same_both((("cpu", "cpu.shares"),), (("", "cpu.weight"),)),
    encode={
        CgroupVersion.V1: lambda v: (str(v),),
        CgroupVersion.V2: lambda v: (str(convert.shares_to_weight(v)),),
    },
    decode={
        CgroupVersion.V1: _one_int,
        CgroupVersion.V2: lambda t: convert.weight_to_shares(_one_int(t)),
    },
    check=_shares_check,
)

CPU_MAX: Final[Knob[CPUMax]] = Knob(
    name="cpu.max",
    files=_same_both((("cpu", "cpu.cfs_period_us"), ("cpu", "cpu.cfs_quota_us")), (("", "cpu.max"),)),
    encode={CgroupVersion.V1: _cpu_max_encode_v1, CgroupVersion.V2: _cpu_max_encode_v2},
    decode={CgroupVersion.V1: _cpu_max_decode_v1, CgroupVersion.V2: _cpu_max_decode_v2},
    check=_cpu_max_check,
)

CPU_IDLE: Final[Knob[bool]] = Knob(
    name="cpu.idle",
    files=_same_both((("cpu", "cpu.idle"),), (("", "cpu.idle"),)),
    encode={CgroupVersion.V1: _bool_encode, CgroupVersion.V2: _bool_encode},
    decode={CgroupVersion.V1: _bool_decode, CgroupVersion.V2: _bool_decode},
    check=_no_check,
)

CPUSET_CPUS: Final[Knob[str]] = Knob(
    name="cpuset.cpus",
    files=_same_both((("cpuset", "cpuset.cpus"),), (("", "cpuset.cpus"),)),
    encode={CgroupVersion.V1: lambda v: (v,), CgroupVersion.V2: lambda v: (v,)},
    decode={CgroupVersion.V1: _cpuset_decode, CgroupVersion.V2: _cpuset_decode},
    check=_cpuset_check,
)

MEMORY_MAX: Final[Knob[int]] = Knob(
    name="memory.max",
    files=_same_both((("memory", "memory.limit_in_bytes"),), (("", "memory.max"),)),
    encode={CgroupVersion.V1: _memory_encode_v1, CgroupVersion.V2: _memory_encode_v2},
    decode={CgroupVersion.V1: _memory_decode, CgroupVersion.V2: _memory_decode},
    check=_memory_check,
    align=convert.page_floor,
)

MEMORY_MIN: Final[Knob[int]] = _protection("memory.min")
MEMORY_LOW: Final[Knob[int]] = _protection("memory.low")
MEMORY_HIGH: Final[Knob[int]] = _protection("memory.high")
