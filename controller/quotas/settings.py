"""`QuotaSettings`: how the quota controller reclaims (`tessera controller --quota-*` flags)."""

from __future__ import annotations

from dataclasses import dataclass

from apis.errors import ConfigError

__all__ = ["QuotaSettings"]


@dataclass(frozen=True, slots=True)
class QuotaSettings:
    #: How long a quota may use more than its runtime before its pods are evicted (seconds):
    #: long enough for a borrower to finish short work, short enough for a lender to get its
    #: guarantee back without a human.
    reclaim_grace: float = 120.0
    #: Evictions per second over all quotas after a burst (a token bucket), so that a large
    #: change of runtimes never evicts a whole cluster's pods at once.
    eviction_qps: float = 1.0
    eviction_burst: int = 5
    #: False: keep status and annotations, never evict.
    reclaim: bool = True

    def validate(self) -> None:
        if self.reclaim_grace < 0:
            raise ConfigError(f"--quota-reclaim-grace {self.reclaim_grace}: must be >= 0 seconds")
        if self.eviction_qps <= 0:
            raise ConfigError(f"--quota-eviction-qps {self.eviction_qps}: must be > 0")
        if self.eviction_burst < 1:
            raise ConfigError(f"--quota-eviction-burst {self.eviction_burst}: must be at least 1")
