"""Admission within every ancestor's max: a parent's subtree never uses more than its max, for
pods alone and for gangs whose members sit in different children."""

from __future__ import annotations

from apis.extension import names
from kube.quotas import QuotaManager
from tests.support.builders import make_pod, quota_cr

GPU = names.GPU_CORE
PARENT = {names.LABEL_QUOTA_IS_PARENT: "true"}
CHILD = {names.LABEL_QUOTA_PARENT: "org"}


def tree() -> QuotaManager:
    m = QuotaManager()
    m.set_cluster_total({GPU: 1600, "cpu": 100_000})
    m.set_quotas(
        [
            quota_cr("org", labels=PARENT, min={GPU: 400, "cpu": "20"}, max={GPU: 400, "cpu": "20"}),
            # team-a limits only cpu: its pods' GPUs are not its business, but they are org's.
            quota_cr("team-a", namespace="team-a", labels=CHILD, min={"cpu": "10"}, max={"cpu": "20"}),
            quota_cr("team-b", namespace="team-b", labels=CHILD, min={GPU: 200}, max={GPU: 400}),
        ]
    )
    return m


def test_a_pod_must_fit_its_ancestors_max_with_everything_below_them() -> None:
    m = tree()
    m.update_pod(make_pod("b1", namespace="team-b", node="n1", gpu_core=200))
    m.update_pod(make_pod("a1", namespace="team-a", node="n1", gpu_core=100))
    assert m.subtree_used("org") == {GPU: 300}
    fits = make_pod("a2", namespace="team-a", gpu_core=100)
    assert m.admit(fits).admitted  # 300 + 100 <= org's max 400
    m.update_pod(make_pod("a2", namespace="team-a", node="n1", gpu_core=100))
    verdict = m.admit(make_pod("a3", namespace="team-a", gpu_core=100))
    assert not verdict.admitted and verdict.exceeded == (GPU,)
    assert verdict.message == (
        "Insufficient quotas, quotaNameTopo: [org team-a], max: {koordinator.sh/gpu-core: 400}, used: "
        "{koordinator.sh/gpu-core: 400}, pod's request: {koordinator.sh/gpu-core: 100}, exceedDimensions: "
        "[koordinator.sh/gpu-core]: quota org limits its whole subtree"
    )
    # A resource org does not limit is not checked there.
    assert m.admit(make_pod("a4", namespace="team-a", cpu=1000)).admitted


def test_a_pod_asked_again_after_reserve_is_not_counted_twice_at_its_ancestors() -> None:
    m = tree()
    pod = make_pod("b1", namespace="team-b", gpu_core=400)
    m.update_pod(pod)
    assert m.admit(pod).admitted
    m.reserve(pod)
    assert m.admit(pod).admitted  # its own 400 is in org's used already


def test_a_gang_across_children_is_checked_together_at_the_parent() -> None:
    m = tree()
    gang = {names.ANNOTATION_GANG_NAME: "train", names.ANNOTATION_GANG_MIN_AVAILABLE: "2"}
    gang_b = {**gang, names.ANNOTATION_GANG_GROUPS: '["team-a/train","team-b/train"]'}
    gang_a = dict(gang_b)
    a = make_pod("w-a", namespace="team-a", annotations=gang_a, gpu_core=300)
    b = make_pod("w-b", namespace="team-b", annotations=gang_b, gpu_core=200)
    m.update_pod(a)
    m.update_pod(b)
    verdict = m.admit(b)  # alone each fits org (300, 200); together 500 > 400
    assert not verdict.admitted
    assert verdict.message.startswith("Insufficient quotas, quotaNameTopo: [org team-b]")
    assert "gang's request: {koordinator.sh/gpu-core: 500}" in verdict.message
    assert verdict.message.endswith("gang: team-a/train, team-b/train (2 pods not yet placed)")
