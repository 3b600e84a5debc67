"""Safety arbitration: the rules a migration must pass (`rules`), the eviction rate limit
(`tokenbucket`) and the two gates that ask them (`Arbiter.admit`, `Arbiter.may_evict`)."""

from descheduler.arbitration.arbiter import Arbiter
from descheduler.arbitration.rules import RULES, InFlight, Refusal

__all__ = ["RULES", "Arbiter", "InFlight", "Refusal"]
