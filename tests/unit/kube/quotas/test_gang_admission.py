"""The gang-wide quota check: a gang's members not yet placed must fit their quota together."""

from __future__ import annotations

import pytest

from apis.extension import names
from apis.k8s.core import Pod
from kube.quotas import QuotaManager
from tests.support.builders import make_pod, quota_cr

GPU_CORE = names.GPU_CORE


def manager() -> QuotaManager:
    m = QuotaManager()
    m.set_cluster_total({GPU_CORE: 1600})
    m.set_quotas(
        [
            quota_cr("team-a", min={GPU_CORE: 400}, max={GPU_CORE: 400}),
            quota_cr("team-b", min={GPU_CORE: 400}, max={GPU_CORE: 400}),
        ]
    )
    return m


def member(name: str, gang: str = "train", *, namespace: str = "team-a", gpu_core: int = 200, **extra: str) -> Pod:
    annotations = {names.ANNOTATION_GANG_NAME: gang, names.ANNOTATION_GANG_MIN_AVAILABLE: "1", **extra}
    return make_pod(name, namespace=namespace, annotations=annotations, gpu_core=gpu_core)


def test_a_gang_that_does_not_fit_together_is_refused_at_its_first_member() -> None:
    m = manager()
    pods = [member(f"w{i}") for i in range(3)]  # 600 of a quota of 400, though each fits alone
    for pod in pods:
        m.update_pod(pod)
    verdict = m.admit(pods[0])
    assert not verdict.admitted
    assert verdict.message == (
        "Insufficient quotas, quotaName: team-a, runtime: {koordinator.sh/gpu-core: 400}, used: "
        "{koordinator.sh/gpu-core: 0}, gang's request: {koordinator.sh/gpu-core: 600}, exceedDimensions: "
        "[koordinator.sh/gpu-core], max: {koordinator.sh/gpu-core: 400}, gang: team-a/train (3 pods not yet placed)"
    )
    # The same pods on their own would each be admitted: only the gang's total refuses them.
    alone = make_pod("solo", namespace="team-a", gpu_core=200)
    assert m.admit(alone).admitted


def test_members_placed_count_in_used_and_the_rest_is_checked_together() -> None:
    m = manager()
    pods = [member(f"w{i}") for i in range(2)]
    for pod in pods:
        m.update_pod(pod)
    assert m.admit(pods[0]).admitted
    m.reserve(pods[0])
    assert m.admit(pods[1]).admitted  # used 200 + the one left 200 = 400
    m.update_pod(make_pod("other", namespace="team-a", node="n1", gpu_core=100))  # someone took 100
    assert not m.admit(pods[1]).admitted


def test_a_gang_group_is_checked_in_every_quota_its_members_draw_on() -> None:
    m = manager()
    groups = {names.ANNOTATION_GANG_GROUPS: '["team-a/train", "team-b/eval"]'}
    pods = [
        member("w0", **groups),
        member("e0", "eval", namespace="team-b", gpu_core=300, **groups),
        member("e1", "eval", namespace="team-b", gpu_core=300, **groups),
    ]
    for pod in pods:
        m.update_pod(pod)
    verdict = m.admit(pods[0])  # team-a's own share fits; team-b's members together do not
    assert not verdict.admitted and verdict.quota == "team-b"
    assert "gang's request: {koordinator.sh/gpu-core: 600}" in verdict.message
    m.remove_pod(pods[2])
    assert m.admit(pods[0]).admitted


@pytest.mark.parametrize(
    "labels",
    [
        {names.LABEL_LIGHTWEIGHT_GANG_NAME: "train", names.LABEL_LIGHTWEIGHT_GANG_MIN_AVAILABLE: "3"},
        {names.LABEL_UPSTREAM_POD_GROUP: "train"},
        {names.LABEL_POD_GROUP: "train"},
    ],
    ids=["lightweight-label", "scheduler-plugins-pod-group", "koordinator-pod-group"],
)
def test_every_way_of_naming_a_gang_is_checked_as_a_whole(labels: dict[str, str]) -> None:
    """The one gang parser: the lightweight label and scheduler-plugins' PodGroup label make a
    gang for the quota check as Koordinator's annotation does."""
    m = manager()
    pods = [make_pod(f"w{i}", namespace="team-a", labels=labels, gpu_core=200) for i in range(3)]
    for pod in pods:
        m.update_pod(pod)
    verdict = m.admit(pods[0])
    assert not verdict.admitted
    assert verdict.message.endswith("gang: team-a/train (3 pods not yet placed)")


def test_a_pod_naming_two_kinds_of_gang_is_checked_alone() -> None:
    m = manager()
    labels = {names.LABEL_UPSTREAM_POD_GROUP: "train", names.LABEL_POD_GROUP: "other"}
    pods = [make_pod(f"w{i}", namespace="team-a", labels=labels, gpu_core=200) for i in range(3)]
    for pod in pods:
        m.update_pod(pod)
    assert m.admit(pods[0]).admitted  # 200 of 400 alone; Coscheduling refuses it with the reason
