"""DefaultPreemption through the offline Scheduler (the default profile, as the live one):
victims of strictly lower priority anywhere, reprieved highest first (PDB-protected ones before
the others), the node with the fewest budget violations and the fewest and lowest victims,
nothing for a pod that never preempts or whose last victims are still going, kube's message
when it fails, and the nominated pod's room kept while its victims leave."""

from __future__ import annotations

import dataclasses

from apis.extension import names
from apis.k8s.core import Pod
from apis.k8s.labels import LabelSelector
from apis.k8s.meta import ObjectMeta
from apis.k8s.policy import PodDisruptionBudget
from scheduler.cache import PodInfo
from scheduler.core import Scheduler, with_elastic_quota
from scheduler.framework.config import SchedulerConfig
from scheduler.framework.victims import budget_violations
from tests.support.builders import make_node, make_pod, make_reservation, quota_cr
from tests.support.scheduling import make_scheduler, mark_terminating


def gpu_pod(name: str, priority: int, *, gpus: int = 1, on: str = "", app: str = "", share: int = 0) -> Pod:
    """A pod of `gpus` whole GPUs (or a `share` percent of one); `on` pins it to a node."""
    selector = {"host": on} if on else None
    labels = {"app": app} if app else None
    amounts = {"gpu_core": share, "gpu_ratio": share} if share else {"nvidia_gpu": gpus}
    pod = make_pod(name, labels=labels, node_selector=selector, **amounts)
    return dataclasses.replace(pod, priority=priority)


def cluster(*nodes: str, gpus: int = 2) -> Scheduler:
    return make_scheduler(*(make_node(n, gpus=gpus, labels={"host": n}) for n in nodes))


def place(scheduler: Scheduler, *pods: Pod) -> None:
    for pod in pods:
        assert scheduler.schedule_one(pod).scheduled, pod.key


def evict(scheduler: Scheduler, victims: tuple[PodInfo, ...]) -> None:
    for victim in victims:
        scheduler.cache.remove_pod(victim.pod)


def budget(name: str, app: str, allowed: int, *, disrupted: frozenset[str] = frozenset()) -> PodDisruptionBudget:
    selector = LabelSelector({"app": app})
    return PodDisruptionBudget(ObjectMeta(name=name, namespace="default"), selector, allowed, disrupted)


def victims_of(scheduler: Scheduler, pod: Pod) -> tuple[str, list[str]]:
    outcome = scheduler.schedule_one(pod)
    assert outcome.preemption is not None, outcome.status.message
    assert outcome.preemption.plugin == "DefaultPreemption"
    return outcome.preemption.node, [v.key for v in outcome.preemption.victims]


def test_a_whole_gpu_pod_evicts_the_fewest_lowest_shares_and_takes_their_room() -> None:
    scheduler = cluster("n1", gpus=2)
    # GPU 0: two halves of priority 1 and 3; GPU 1: two halves of priority 2.
    place(scheduler, gpu_pod("a1", 1, share=50), gpu_pod("a3", 3, share=50))
    place(scheduler, gpu_pod("b2", 2, share=50), gpu_pod("c2", 2, share=50))
    urgent = gpu_pod("urgent", 10)
    outcome = scheduler.schedule_one(urgent)
    assert not outcome.scheduled and outcome.preemption is not None
    victims = [v.key for v in outcome.preemption.victims]
    # One whole GPU must be emptied: {a1, a3} has the highest victim priority 3, {b2, c2} only 2.
    assert (outcome.preemption.node, victims) == ("n1", ["default/b2", "default/c2"])
    assert outcome.preemption.describe() == "2 pods on n1 (priority preemption): default/b2, default/c2"
    # Asked again before they are gone, the pod waits rather than choosing more victims.
    again = scheduler.schedule_one(urgent)
    assert again.preemption is None
    assert "preemption: waiting for 2 preempted pod(s) to go." in again.status.message
    # Nominated as the live loop does: a lower-priority pod may not take the room meanwhile.
    scheduler.cache.nominator.nominate(PodInfo.of(urgent), "n1", outcome.preemption.victims)
    evict(scheduler, outcome.preemption.victims)
    assert scheduler.schedule_one(gpu_pod("sneak", 5, share=50)).node is None
    assert scheduler.schedule_one(urgent).node == "n1"


def test_victims_are_reprieved_highest_priority_first() -> None:
    scheduler = cluster("n1", gpus=4)
    place(scheduler, gpu_pod("p1", 1), gpu_pod("p2", 2), gpu_pod("p3", 3, gpus=2))
    # All three gone, then p3 is kept (2 GPUs still free), then p2 cannot be (1 free): p1 and p2 go.
    assert victims_of(scheduler, gpu_pod("urgent", 10, gpus=2)) == ("n1", ["default/p1", "default/p2"])


def test_pods_a_budget_protects_are_reprieved_first() -> None:
    def victims_with(*budgets: PodDisruptionBudget) -> tuple[str, list[str]]:
        scheduler = cluster("n1", gpus=2)
        place(scheduler, gpu_pod("db", 1, app="db"), gpu_pod("web", 2, app="web"))
        for b in budgets:
            scheduler.cache.budgets.update(b)
        return victims_of(scheduler, gpu_pod("urgent", 10))

    assert victims_with() == ("n1", ["default/db"])
    assert victims_with(budget("db", "db", 0)) == ("n1", ["default/web"])


def test_the_node_with_fewest_budget_violations_wins_over_lower_priorities() -> None:
    def victims_with(*budgets: PodDisruptionBudget) -> tuple[str, list[str]]:
        scheduler = cluster("n1", "n2", gpus=1)
        place(scheduler, gpu_pod("db", 0, app="db", on="n1"), gpu_pod("web", 5, app="web", on="n2"))
        for b in budgets:
            scheduler.cache.budgets.update(b)
        return victims_of(scheduler, gpu_pod("urgent", 10))

    assert victims_with() == ("n1", ["default/db"])
    assert victims_with(budget("db", "db", 0)) == ("n2", ["default/web"])
    # A budget with a disruption left is no violation: the lower priority wins again.
    assert victims_with(budget("db", "db", 1)) == ("n1", ["default/db"])


def test_a_budget_is_broken_when_there_is_no_other_way_as_kube_does() -> None:
    scheduler = cluster("n1", gpus=1)
    place(scheduler, gpu_pod("db", 0, app="db"))
    scheduler.cache.budgets.update(budget("db", "db", 0))
    outcome = scheduler.schedule_one(gpu_pod("urgent", 10))
    assert outcome.preemption is not None and [v.key for v in outcome.preemption.victims] == ["default/db"]


def test_ranking_after_violations_highest_victim_priority_then_sum_then_count() -> None:
    scheduler = cluster("n1", "n2", "n3", gpus=2)
    place(scheduler, gpu_pod("n1-a", 4, on="n1"), gpu_pod("n1-b", 1, on="n1"))  # max 4
    place(scheduler, gpu_pod("n2-a", 3, on="n2"), gpu_pod("n2-b", 3, on="n2"))  # max 3, sum 6
    place(scheduler, gpu_pod("n3-a", 3, gpus=2, on="n3"))  # max 3, sum 3
    assert victims_of(scheduler, gpu_pod("urgent", 10, gpus=2)) == ("n3", ["default/n3-a"])


def test_no_preemption_among_equal_priorities_and_the_message_is_unchanged() -> None:
    scheduler = cluster("n1", gpus=1)
    place(scheduler, gpu_pod("a", 5))
    outcome = scheduler.schedule_one(gpu_pod("same", 5))
    assert outcome.preemption is None
    assert "preemption" not in outcome.status.message


def test_a_pod_that_never_preempts_says_so() -> None:
    scheduler = cluster("n1", gpus=1)
    place(scheduler, gpu_pod("low", 1))
    polite = dataclasses.replace(gpu_pod("polite", 10), preemption_policy="Never")
    outcome = scheduler.schedule_one(polite)
    assert outcome.preemption is None
    assert "preemption: not eligible due to preemptionPolicy=Never." in outcome.status.message


def test_a_nominated_pod_waits_while_lower_priority_pods_terminate_on_its_node() -> None:
    scheduler = cluster("n1", "n2", gpus=1)
    place(scheduler, gpu_pod("low1", 1, on="n1"), gpu_pod("low2", 1, on="n2"))
    mark_terminating(scheduler, "default/low1")
    # After a restart: only the API says the pod was nominated to n1.
    urgent = dataclasses.replace(gpu_pod("urgent", 10), nominated_node_name="n1")
    outcome = scheduler.schedule_one(urgent)
    assert outcome.preemption is None
    assert "waiting for 1 preempted pod(s) to go" in outcome.status.message
    # Not nominated, it preempts elsewhere: the terminating pod is no victim, low2 is.
    assert victims_of(scheduler, gpu_pod("other", 10)) == ("n2", ["default/low2"])


def test_nodes_preemption_cannot_help_are_skipped_and_the_failure_says_why_per_node() -> None:
    scheduler = cluster("n1", "n2", gpus=1)
    place(scheduler, gpu_pod("low", 1, on="n1"), gpu_pod("peer", 10, on="n2"))
    outcome = scheduler.schedule_one(gpu_pod("pinned", 10, on="n2"))
    assert outcome.preemption is None
    assert outcome.status.message.endswith(
        "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling."
    )


def test_no_victims_for_a_pod_that_would_not_fit_anyway() -> None:
    scheduler = cluster("n1", gpus=2)
    place(scheduler, gpu_pod("peer", 10), gpu_pod("low", 1))
    # Even with `low` gone one GPU is free, and the pod needs two: nothing is evicted for nothing.
    outcome = scheduler.schedule_one(gpu_pod("pair", 10, gpus=2))
    assert outcome.preemption is None
    assert outcome.status.message.endswith("preemption: 0/1 nodes are available: 1 Insufficient gpu devices.")
    # More GPUs than the node has: its Filter said UnschedulableAndUnresolvable.
    huge = scheduler.schedule_one(gpu_pod("huge", 10, gpus=3))
    assert huge.status.message.endswith(
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )


def test_budget_violations_spend_each_budget_in_victim_order() -> None:
    pods = [PodInfo.of(dataclasses.replace(gpu_pod(n, 0, app="db"), node_name="n1")) for n in ("a", "b", "c")]
    one_left = budget("db", "db", 1)
    assert budget_violations(pods, [one_left]) == {pods[1].ident, pods[2].ident}
    # A pod the budget already lists as disrupted spends nothing.
    assert budget_violations(pods, [budget("db", "db", 1, disrupted=frozenset({"a"}))]) == {pods[2].ident}
    other_namespace = PodDisruptionBudget(ObjectMeta(name="db", namespace="prod"), LabelSelector({"app": "db"}), 0)
    empty_selector = PodDisruptionBudget(ObjectMeta(name="all", namespace="default"), LabelSelector({}), 0)
    assert budget_violations(pods, [other_namespace, empty_selector]) == set()


def test_a_quotas_own_preemption_comes_first_and_the_two_never_act_for_one_pod() -> None:
    scheduler = make_scheduler(
        make_node("n1", gpus=2, labels={"host": "n1"}), config=with_elastic_quota(SchedulerConfig())
    )
    scheduler.quotas.set_quotas(
        [
            quota_cr("team-a", namespace="team-a", min={names.GPU_CORE: 200}, max={names.GPU_CORE: 200}),
            quota_cr("team-b", namespace="team-b", min={names.GPU_CORE: 200}, max={names.GPU_CORE: 200}),
        ]
    )
    mine = dataclasses.replace(make_pod("mine", namespace="team-a", nvidia_gpu=1), priority=5)
    theirs = dataclasses.replace(make_pod("theirs", namespace="team-b", nvidia_gpu=1), priority=1)
    urgent = dataclasses.replace(make_pod("urgent", namespace="team-a", nvidia_gpu=1), priority=10)
    for pod in (mine, theirs, urgent):
        scheduler.quotas.update_pod(pod)
    place(scheduler, mine, theirs)
    # team-b's pod has the lower priority, but ElasticQuota runs first and evicts inside team-a.
    outcome = scheduler.schedule_one(urgent)
    assert outcome.preemption is not None and outcome.preemption.plugin == "ElasticQuota"
    assert [v.key for v in outcome.preemption.victims] == ["team-a/mine"]
    # While `mine` goes, DefaultPreemption does not choose `theirs` too: both wait.
    again = scheduler.schedule_one(urgent)
    assert again.preemption is None
    assert "waiting for 1 preempted pod(s) of quota team-a to go" in again.status.message
    assert "preemption: waiting for 1 preempted pod(s) to go." in again.status.message


def test_a_reservation_is_never_a_victim_even_with_a_low_priority_template() -> None:
    scheduler = cluster("n1", gpus=1)
    reservation = make_reservation("held", requests={names.NVIDIA_GPU: "1"})
    template = reservation.template
    low = {**template, "spec": {**template["spec"], "priority": 1}}
    placed, _ = scheduler.place_reservation(dataclasses.replace(reservation, template=low), now="2026-01-01T00:00:00Z")
    assert placed.node == "n1"
    outcome = scheduler.schedule_one(gpu_pod("urgent", 10))
    assert outcome.preemption is None and not outcome.scheduled


def test_an_owner_of_a_shared_reservation_is_a_victim_only_for_another_owner() -> None:
    """What an owner of an `allocateOnce: false` Reservation holds goes back to the Reservation
    when it is evicted: evicting it for a pod that is no owner would free nothing for that pod."""
    scheduler = cluster("n1", gpus=1)
    shared = make_reservation(
        "shared", requests={names.GPU_CORE: "100", names.GPU_MEMORY_RATIO: "100"}, allocate_once=False
    )
    scheduler.place_reservation(shared, now="2026-01-01T00:00:00Z")
    place(scheduler, gpu_pod("owner", 1, share=100, app="train"))
    stranger = scheduler.schedule_one(gpu_pod("urgent", 10, share=100))
    assert stranger.preemption is None and not stranger.scheduled
    assert victims_of(scheduler, gpu_pod("urgent-owner", 10, share=100, app="train")) == ("n1", ["default/owner"])
