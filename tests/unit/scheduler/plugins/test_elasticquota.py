"""ElasticQuota through the offline Scheduler: borrowing, refusal with the quota's numbers,
Unreserve, and no effect at all without quotas."""

from __future__ import annotations

from apis.extension import names
from scheduler.core import Scheduler, with_elastic_quota
from scheduler.framework.config import SchedulerConfig
from scheduler.framework.interfaces import ExtensionPoint
from scheduler.framework.status import Code
from tests.support.builders import make_node, make_pod, quota_cr
from tests.support.scheduling import make_scheduler

GPU = {names.NVIDIA_GPU: 1}


def quota_scheduler() -> Scheduler:
    scheduler = make_scheduler(make_node("n1"), config=with_elastic_quota(SchedulerConfig()))
    scheduler.quotas.set_quotas(
        [
            quota_cr("team-a", namespace="team-a", min={names.GPU_CORE: 400}, max={names.GPU_CORE: 800}),
            quota_cr("team-b", namespace="team-b", min={names.GPU_CORE: 400}, max={names.GPU_CORE: 800}),
        ]
    )
    return scheduler


def test_plugin_is_opt_in() -> None:
    framework = make_scheduler(make_node("n1")).frameworks["tessera-scheduler"]
    assert "ElasticQuota" not in framework.plugin_names(ExtensionPoint.PRE_FILTER)
    enabled = make_scheduler(config=with_elastic_quota(SchedulerConfig())).frameworks["tessera-scheduler"]
    assert enabled.plugin_names(ExtensionPoint.RESERVE) == [
        "Reservation",
        "DeviceShare",
        "DynamicResources",
        "Coscheduling",
        "ElasticQuota",
    ]


def test_borrow_idle_then_refuse_once_the_lender_asks() -> None:
    scheduler = quota_scheduler()
    for i in range(6):  # team-b idle: team-a borrows beyond its min of 4 GPUs
        assert scheduler.schedule_one(make_pod(f"a{i}", namespace="team-a", extra=GPU)).scheduled
    assert scheduler.quotas.used("team-a")[names.GPU_CORE] == 600
    # team-b's pending demand takes its min back in the runtime: team-a may not grow further.
    for i in range(2):
        scheduler.quotas.update_pod(make_pod(f"b{i}", namespace="team-b", extra={names.NVIDIA_GPU: 2}))
    refused = scheduler.schedule_one(make_pod("a6", namespace="team-a", extra=GPU))
    assert refused.status.code is Code.UNSCHEDULABLE
    assert refused.status.message == (
        "0/1 nodes are available: Insufficient quotas, quotaName: team-a, runtime: {koordinator.sh/gpu-core: 400}, "
        "used: {koordinator.sh/gpu-core: 600}, pod's request: {koordinator.sh/gpu-core: 100}, "
        "exceedDimensions: [koordinator.sh/gpu-core], max: {koordinator.sh/gpu-core: 800}."
    )
    assert scheduler.schedule_one(make_pod("b0", namespace="team-b", extra={names.NVIDIA_GPU: 2})).scheduled


def test_unreserve_gives_the_quota_back_when_a_later_plugin_fails() -> None:
    scheduler = quota_scheduler()
    # Within the quota (team-b is idle), but no node has the CPU: Reserve never happens or is undone.
    pod = make_pod("a", namespace="team-a", extra={names.NVIDIA_GPU: 8}, cpu=999_000_000)
    assert not scheduler.schedule_one(pod).scheduled  # NodeResourcesFit refuses the CPU
    assert scheduler.quotas.used("team-a") == {}


def test_no_quota_no_change() -> None:
    plain = make_scheduler(make_node("n1"))
    with_quota = make_scheduler(make_node("n1"), config=with_elastic_quota(SchedulerConfig()))
    for i in range(10):
        pod = make_pod(f"p{i}", extra=GPU, cpu=1000)
        assert plain.schedule_one(pod).node == with_quota.schedule_one(pod).node


def test_a_gang_over_its_quota_is_refused_before_any_member_holds_a_node() -> None:
    scheduler = quota_scheduler()  # team-a: at most 800 gpu-core (the node's 8 GPUs)
    gang = {names.ANNOTATION_GANG_NAME: "train", names.ANNOTATION_GANG_MIN_AVAILABLE: "3"}
    members = [make_pod(f"w{i}", namespace="team-a", annotations=gang, extra={names.NVIDIA_GPU: 3}) for i in range(3)]
    for pod in members:
        scheduler.observe_pod(pod)
        scheduler.quotas.update_pod(pod)
    first = scheduler.schedule_one(members[0])
    assert not first.scheduled and first.node is None
    assert "gang's request: {koordinator.sh/gpu-core: 900}" in first.status.message
    assert "gang: team-a/train (3 pods not yet placed)" in first.status.message
    assert scheduler.quotas.used("team-a") == {}
