"""`QuotaSettings`: how the quota controller reclaims (`tessera controller --quota-*` flags)."""

from __future__ import annotations

from dataclasses import dataclass, field

from apis.errors import ConfigError
from controller.quotas.breaker import BreakerSettings

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
    #: When reclaim pauses because the figures jumped (`controller.quotas.breaker`).
    breaker: BreakerSettings = field(default_factory=BreakerSettings)

    def validate(self) -> None:
        if self.reclaim_grace < 0:
            raise ConfigError(f"--quota-reclaim-grace {self.reclaim_grace}: must be >= 0 seconds")
        if self.eviction_qps <= 0:
            raise ConfigError(f"--quota-eviction-qps {self.eviction_qps}: must be > 0")
        if self.eviction_burst < 1:
            raise ConfigError(f"--quota-eviction-burst {self.eviction_burst}: must be at least 1")
        for flag, value in (
            ("--quota-breaker-root-drop", self.breaker.root_drop),
            ("--quota-breaker-excess-rise", self.breaker.excess_rise),
        ):
            if not 0 < value <= 1:
                raise ConfigError(f"{flag} {value:g}: must be a fraction in (0, 1]")
        if self.breaker.stable < 0:
            raise ConfigError(f"--quota-breaker-stable {self.breaker.stable:g}: must be >= 0 seconds")
