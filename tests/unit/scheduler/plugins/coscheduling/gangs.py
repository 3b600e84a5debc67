"""Gang members and a scheduler driven the way what-if drives it, for the Coscheduling tests."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from apis.extension import names
from apis.k8s.core import Pod
from scheduler.core import Outcome, Scheduler
from scheduler.plugins.coscheduling import Coscheduling
from tests.support.builders import make_pod


def member(
    name: str,
    gang: str = "train",
    *,
    min_available: int | str = 4,
    namespace: str = "default",
    gpus: int = 4,
    **annotations: str,
) -> Pod:
    """A gang member asking for `gpus` whole GPUs; extra annotations by short gang key
    (`mode=`, `waiting_time=`, `groups=`, `total_number=`, `match_policy=`)."""
    ann = {names.ANNOTATION_GANG_NAME: gang, names.ANNOTATION_GANG_MIN_AVAILABLE: str(min_available)}
    ann.update({f"{names.GANG_DOMAIN}/{key.replace('_', '-')}": value for key, value in annotations.items()})
    return make_pod(name, namespace=namespace, annotations=ann, koord_gpu=100 * gpus)


def plugin(scheduler: Scheduler) -> Coscheduling:
    found = next(iter(scheduler.frameworks.values())).plugin(Coscheduling.name)
    assert isinstance(found, Coscheduling)
    return found


def schedule_all(scheduler: Scheduler, pods: Iterable[Pod], *, now: float | None = None) -> dict[str, Outcome]:
    """Every pod observed, then scheduled in queue order, waiting pods resolved after each; with
    `now`, what still waits is resolved at that time. The last outcome per pod."""
    pods = list(pods)
    for pod in pods:
        scheduler.observe_pod(pod)
    out: dict[str, Outcome] = {}
    for i in scheduler.queue_order(pods):
        outcome = scheduler.schedule_one(pods[i])
        out[outcome.pod] = outcome
        out.update((o.pod, o) for o in scheduler.resolve_waiting())
    if now is not None:
        out.update((o.pod, o) for o in scheduler.resolve_waiting(now=now))
    return out


def nodes_of(outcomes: Mapping[str, Outcome]) -> dict[str, str | None]:
    return {pod: o.node if o.scheduled else None for pod, o in outcomes.items()}


FOREVER = math.inf
