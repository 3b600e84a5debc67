"""Knob codecs (v1 and v2 file formats) and CPU limit arithmetic."""

import pytest

from agent.qos import knobs
from agent.qos.knobs import CgroupVersion, CPUMax

V1, V2 = CgroupVersion.V1, CgroupVersion.V2


@pytest.mark.parametrize(
    ("text", "cpus", "canonical"),
    [("", set(), ""), ("0", {0}, "0"), ("0-3,8", {0, 1, 2, 3, 8}, "0-3,8"), ("3,1,2", {1, 2, 3}, "1-3")],
    ids=["empty", "one", "range-and-single", "unordered"],
)
def test_cpuset_parse_and_format(text: str, cpus: set[int], canonical: str) -> None:
    assert knobs.parse_cpuset(text) == cpus
    assert knobs.format_cpuset(frozenset(cpus)) == canonical


@pytest.mark.parametrize(
    "text", ["a", "1-", "3-1", "1,,2", "-1"], ids=["letter", "open-range", "descending", "double-comma", "negative"]
)
def test_cpuset_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError):
        knobs.parse_cpuset(text)
    assert knobs.CPUSET_CPUS.check(text) is not None


def test_cpu_max_compares_rates_across_periods() -> None:
    half = CPUMax(50_000, 100_000)
    assert CPUMax(30_000, 50_000).exceeds(half)  # 0.6 > 0.5
    assert not CPUMax(25_000, 50_000).exceeds(half)  # equal rate
    assert CPUMax(-1).exceeds(half)
    assert not half.exceeds(CPUMax(-1))
    assert CPUMax(200_000).scaled_to(CPUMax(25_000, 50_000)) == CPUMax(50_000)
    assert CPUMax(200_000).milli() == 2000
    assert CPUMax(-1).unlimited and CPUMax(-1).milli() == -1


def test_cpu_max_codecs() -> None:
    assert knobs.CPU_MAX.encode[V1](CPUMax(50_000)) == ("100000", "50000")
    assert knobs.CPU_MAX.encode[V2](CPUMax(-1)) == ("max 100000",)
    assert knobs.CPU_MAX.decode[V2](("50000 100000\n",)) == CPUMax(50_000)
    assert knobs.CPU_MAX.decode[V1](("100000\n", "-1\n")) == CPUMax(-1)
    assert knobs.CPU_MAX.check(CPUMax(500)) is not None  # below the kernel's 1 ms
    assert knobs.CPU_MAX.check(CPUMax(50_000, 10)) is not None
    assert knobs.CPU_MAX.check(CPUMax(-1)) is None


def test_memory_codecs_normalise_unlimited() -> None:
    assert knobs.MEMORY_MAX.decode[V1](("9223372036854771712\n",)) == -1
    assert knobs.MEMORY_MAX.decode[V2](("max\n",)) == -1
    assert knobs.MEMORY_MAX.encode[V1](-1) == ("-1",)
    assert knobs.MEMORY_MAX.encode[V2](-1) == ("max",)
    assert knobs.MEMORY_MIN.check(-1) is not None  # protection cannot be "unlimited"
    assert knobs.MEMORY_HIGH.check(-1) is None


def test_cpu_shares_v2_goes_through_weight() -> None:
    assert knobs.CPU_SHARES.encode[V2](1024) == ("39",)
    assert knobs.CPU_SHARES.decode[V2](("39",)) == knobs.CPU_SHARES.decode[V2](knobs.CPU_SHARES.encode[V2](1024))
    assert knobs.CPU_SHARES.check(1) is not None
