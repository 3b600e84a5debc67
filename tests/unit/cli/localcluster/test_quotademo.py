"""The demo's quotas form a valid tree in which team B borrows, and A's arrival takes it back."""

from __future__ import annotations

from apis.crds.elasticquota import ElasticQuota
from apis.extension import names
from apis.quota import QuotaSpec, validate_tree
from cli.localcluster import quotademo
from kube.quotas import QuotaManager
from tests.support.builders import make_pod


def demo_quotas() -> list[ElasticQuota]:
    places = ((quotademo.PARENT, "tessera-demo"), (quotademo.TEAM_A, "team-a"), (quotademo.TEAM_B, "team-b"))
    return [ElasticQuota.from_dict(quotademo._quota(name, namespace)) for name, namespace in places]


def test_the_demo_tree_is_valid() -> None:
    assert validate_tree({q.meta.name: QuotaSpec.of(q) for q in demo_quotas()}) == {}


def test_team_b_borrows_then_falls_back_to_its_min() -> None:
    m = QuotaManager()
    m.set_cluster_total({names.GPU_CORE: 1600})
    m.set_quotas(demo_quotas())
    for i in range(quotademo.BORROWERS):
        m.update_pod(make_pod(f"b{i}", namespace="team-b", node="sim-1", extra={names.NVIDIA_GPU: 1}))
    assert m.runtime("team-b")[names.GPU_CORE] == 500
    for i in range(3):
        m.update_pod(make_pod(f"a{i}", namespace="team-a", extra={names.NVIDIA_GPU: 1}))
    assert (m.runtime("team-a")[names.GPU_CORE], m.runtime("team-b")[names.GPU_CORE]) == (300, 300)
