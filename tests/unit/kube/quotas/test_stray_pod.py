"""Issue 31's bug: one pod outside every quota asking `koordinator.sh/gpu: "100"` (one whole GPU,
in percent — the pod of Koordinator's fine-grained device manual) set every quota's runtime to 0,
so reclaim evicted every team's pods. The demo's tree: gpu-teams (6 GPUs) over team-a and team-b."""

from __future__ import annotations

import pytest

from apis.extension import names
from kube.quotas import QuotaManager
from tests.support.builders import make_pod, quota_cr

_GPUS = 16


def demo_tree() -> QuotaManager:
    m = QuotaManager()
    m.set_cluster_total({names.GPU_CORE: _GPUS * 100, names.GPU_MEMORY_RATIO: _GPUS * 100})
    parent = {names.LABEL_QUOTA_IS_PARENT: "true"}
    child = {names.LABEL_QUOTA_PARENT: "gpu-teams"}
    m.set_quotas(
        [
            quota_cr("gpu-teams", labels=parent, min={names.GPU_CORE: 600}, max={names.GPU_CORE: 600}),
            quota_cr("team-a", namespace="team-a", labels=child, min={names.GPU_CORE: 300}, max={names.GPU_CORE: 600}),
            quota_cr("team-b", namespace="team-b", labels=child, min={names.GPU_CORE: 300}, max={names.GPU_CORE: 600}),
        ]
    )
    for i in range(5):
        m.update_pod(make_pod(f"b-train-{i}", namespace="team-b", node="n1", extra={names.NVIDIA_GPU: 1}))
    return m


@pytest.mark.parametrize(
    "asks",
    [
        {names.KOORD_GPU: 100},
        {names.DEPRECATED_KOORD_GPU: 100},
        {names.NVIDIA_GPU: 1},
        {names.GPU_CORE: 100, names.GPU_MEMORY_RATIO: 100},
    ],
    ids=["koordinator.sh/gpu", "kubernetes.io/gpu", "nvidia.com/gpu", "gpu-core+ratio"],
)
def test_a_one_gpu_pod_outside_every_quota_leaves_the_teams_runtimes(asks: dict[str, int]) -> None:
    m = demo_tree()
    before = {q: m.runtime(q) for q in ("gpu-teams", "team-a", "team-b")}
    assert before["team-b"] == {names.GPU_CORE: 500}
    m.update_pod(make_pod("stray", namespace="default", node="n2", extra=asks))
    after = {q: m.runtime(q) for q in ("gpu-teams", "team-a", "team-b")}
    assert after == before
    # The root's total falls by exactly the one GPU the pod holds, never more.
    assert m.runtime("koordinator-root-quota")[names.GPU_CORE] == (_GPUS - 1) * 100
