"""The scheduling core: the offline scheduler and what it is built from.

- `scheduler`: `Scheduler`, one pod through the whole cycle, bound in memory (what-if, simulate,
  bench);
- `frameworks`: one Framework per profile (`build_frameworks`), for it and the live service;
- `profiles`: the config switches of the command line (`with_scoring`, `with_fgd`, ...).

Below the entry points and the live service, above the plugins: the service imports it, never
the other way round.
"""

from scheduler.core.frameworks import build_frameworks
from scheduler.core.profiles import (
    FGD,
    SCORING_CHOICES,
    with_fgd,
    with_percentage_of_nodes_to_score,
    with_scoring,
    with_scoring_choice,
)
from scheduler.core.scheduler import Outcome, Scheduler

__all__ = [
    "FGD",
    "SCORING_CHOICES",
    "Outcome",
    "Scheduler",
    "build_frameworks",
    "with_fgd",
    "with_percentage_of_nodes_to_score",
    "with_scoring",
    "with_scoring_choice",
]
