"""Pure conversions between Kubernetes amounts and cgroup values, v1 and v2.

Every number the QoS code writes to a cgroup passes through here, so kubelet's rules (milli-CPU
to shares, limits to CFS quota) and runc's v1→v2 mapping (shares to weight) live in one place and
are unit-tested against the reference values. No I/O.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CFS_PERIOD_US",
    "MAX_QUOTA_PERIOD_US",
    "MAX_SHARES",
    "MAX_WEIGHT",
    "MIN_QUOTA_PERIOD_US",
    "MIN_SHARES",
    "MIN_WEIGHT",
    "UNLIMITED",
    "milli_to_quota",
    "milli_to_shares",
    "page_floor",
    "percent_of",
    "quota_to_milli",
    "shares_to_weight",
    "weight_to_shares",
]

#: cpu.shares bounds (kernel: MIN_SHARES 2, MAX_SHARES 1<<18).
MIN_SHARES: Final = 2
MAX_SHARES: Final = 262144
#: cpu.weight bounds (cgroup v2).
MIN_WEIGHT: Final = 1
MAX_WEIGHT: Final = 10000
#: kubelet's default CFS period and the kernel's accepted range for period and quota (1 ms .. 1 s).
CFS_PERIOD_US: Final = 100_000
MIN_QUOTA_PERIOD_US: Final = 1_000
MAX_QUOTA_PERIOD_US: Final = 1_000_000
#: "No limit" for CFS quota and memory limits, in Tessera's logical values (v1 writes -1, v2 "max").
UNLIMITED: Final = -1


def milli_to_shares(milli: int) -> int:
    """kubelet's MilliCPUToShares: milli × 1024 / 1000, clamped to [2, 262144]; 0 → 2."""
    if milli <= 0:
        return MIN_SHARES
    return max(MIN_SHARES, min(MAX_SHARES, milli * 1024 // 1000))


def shares_to_weight(shares: int) -> int:
    """runc's cgroup v1→v2 mapping: 1 + (shares − 2) × 9999 / 262142, within [1, 10000]."""
    shares = max(MIN_SHARES, min(MAX_SHARES, shares))
    return MIN_WEIGHT + (shares - MIN_SHARES) * (MAX_WEIGHT - MIN_WEIGHT) // (MAX_SHARES - MIN_SHARES)


def weight_to_shares(weight: int) -> int:
    """The smallest shares that `shares_to_weight` maps to `weight`, so weight → shares → weight holds.

    (kubelet's CpuWeightToCpuShares rounds down instead and can land one weight lower.)
    """
    weight = max(MIN_WEIGHT, min(MAX_WEIGHT, weight))
    return MIN_SHARES - (-(weight - MIN_WEIGHT) * (MAX_SHARES - MIN_SHARES) // (MAX_WEIGHT - MIN_WEIGHT))


def milli_to_quota(milli: int, period_us: int = CFS_PERIOD_US) -> int:
    """kubelet's MilliCPUToQuota: CFS quota for a CPU limit; 0 (no limit) → UNLIMITED, floor 1 ms."""
    if milli <= 0:
        return UNLIMITED
    return max(MIN_QUOTA_PERIOD_US, milli * period_us // 1000)


def quota_to_milli(quota_us: int, period_us: int = CFS_PERIOD_US) -> int:
    """CPU in milli-cores that a quota allows per period; UNLIMITED stays UNLIMITED."""
    if quota_us < 0:
        return UNLIMITED
    return quota_us * 1000 // period_us


def page_floor(nbytes: int, page_size: int) -> int:
    """Memory limits as the kernel stores them: rounded down to whole pages (UNLIMITED unchanged)."""
    if nbytes < 0:
        return UNLIMITED
    return nbytes // page_size * page_size


def percent_of(amount: int, percent: int) -> int:
    """amount × percent / 100 in integers (rounded down), as Koordinator computes memory.min/high."""
    return amount * percent // 100
