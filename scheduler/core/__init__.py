"""The scheduling core: the one scheduling cycle, and the offline scheduler that runs it.

- `cycle`: `SchedulingCycle` — assume → Reserve → Permit (and waiting there) → bind or undo —
  with how a placement is bound injected (its first step `pre_bind`);
- `scheduler`: `Scheduler`, the cycle bound in memory (what-if, simulate, bench);
- `frameworks`: one Framework per profile (`build_frameworks`), for both;
- `profiles`: the config switches of the command line (`with_scoring`, `with_fgd`, ...).

Below the entry points and the live service, above the plugins: the service imports it, never
the other way round.
"""

from scheduler.core.cycle import Attempt, Bind, Placement, SchedulingCycle, pre_bind
from scheduler.core.frameworks import build_frameworks
from scheduler.core.profiles import (
    BALANCED_FGD,
    FGD,
    FGD_CHOICES,
    SCORING_CHOICES,
    with_elastic_quota,
    with_fgd,
    with_percentage_of_nodes_to_score,
    with_scoring,
    with_scoring_choice,
)
from scheduler.core.scheduler import Outcome, Scheduler

__all__ = [
    "BALANCED_FGD",
    "FGD",
    "FGD_CHOICES",
    "SCORING_CHOICES",
    "Attempt",
    "Bind",
    "Outcome",
    "Placement",
    "Scheduler",
    "SchedulingCycle",
    "build_frameworks",
    "pre_bind",
    "with_elastic_quota",
    "with_fgd",
    "with_percentage_of_nodes_to_score",
    "with_scoring",
    "with_scoring_choice",
]
