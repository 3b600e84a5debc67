"""One charge for every spelling: a quota written in any GPU spelling limits pods asking in any
other, and the runtimes stay exact whatever mix of spellings pods use, inside and outside the tree."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apis.crds.device import DeviceType
from apis.extension import allocation, names, quotacount
from apis.k8s.core import Pod
from apis.quota import ROOT_QUOTA_NAME, SYSTEM_QUOTA_NAME, capacity_of
from kube.quotas import QuotaManager
from tests.support.builders import make_pod, quota_cr

GI = 1 << 30
#: One node of 8 GPUs of 80 GiB, as the controller advertises it (and the device plugin's count).
NODE = {
    names.NVIDIA_GPU: 8,
    names.KOORD_GPU: 800,
    names.GPU_CORE: 800,
    names.GPU_MEMORY_RATIO: 800,
    names.GPU_MEMORY: 8 * 80 * GI,
    "cpu": 64_000,
}

#: Two GPUs' worth of quota, in each spelling a user may write it.
QUOTA_SPELLINGS = {
    "nvidia.com/gpu": {names.NVIDIA_GPU: "2"},
    "koordinator.sh/gpu": {names.KOORD_GPU: "200"},
    "gpu-core+ratio": {names.GPU_CORE: "200", names.GPU_MEMORY_RATIO: "200"},
    "kubernetes.io/gpu-core+ratio": {names.DEPRECATED_GPU_CORE: "200", names.DEPRECATED_GPU_MEMORY_RATIO: "200"},
    "gpu-memory-ratio": {names.GPU_MEMORY_RATIO: "200"},
}
#: Each way a pod asks for GPUs, with the percent of one GPU it takes.
POD_SPELLINGS: dict[str, tuple[dict[str, int], int]] = {
    "nvidia.com/gpu": ({names.NVIDIA_GPU: 1}, 100),
    "koordinator.sh/gpu": ({names.KOORD_GPU: 50}, 50),
    "kubernetes.io/gpu": ({names.DEPRECATED_KOORD_GPU: 50}, 50),
    "gpu-core+ratio": ({names.GPU_CORE: 50, names.GPU_MEMORY_RATIO: 50}, 50),
    "gpu-core+memory": ({names.GPU_CORE: 50, names.GPU_MEMORY: 40 * GI}, 50),
    "gpu-memory": ({names.GPU_MEMORY: 40 * GI}, 50),
    "gpu-memory-ratio": ({names.GPU_MEMORY_RATIO: 50}, 50),
    "gpu.shared": ({names.GPU_MEMORY_RATIO: 200, names.GPU_CORE: 200, names.GPU_SHARED: 2}, 200),
    "kubernetes.io/gpu-core+ratio": ({names.DEPRECATED_GPU_CORE: 50, names.DEPRECATED_GPU_MEMORY_RATIO: 50}, 50),
}


def team(limit: dict[str, str]) -> QuotaManager:
    m = QuotaManager()
    m.set_capacity(capacity_of([NODE]))
    m.set_quotas([quota_cr("team", namespace="team", min=limit, max=limit)])
    return m


@pytest.mark.parametrize("quota", sorted(QUOTA_SPELLINGS))
@pytest.mark.parametrize("pod", sorted(POD_SPELLINGS))
def test_a_quota_in_any_spelling_limits_pods_in_any_spelling(quota: str, pod: str) -> None:
    m = team(QUOTA_SPELLINGS[quota])
    asks, percent = POD_SPELLINGS[pod]
    admitted = 0
    for i in range(10):
        candidate = make_pod(f"p{i}", namespace="team", extra=asks)
        verdict = m.admit(candidate)
        if not verdict.admitted:
            assert verdict.exceeded and "Insufficient quotas, quotaName: team" in verdict.message
            break
        m.update_pod(make_pod(f"p{i}", namespace="team", node="n1", extra=asks))
        admitted += 1
    assert admitted == 200 // percent  # two GPUs' worth, whichever way it is written and asked


def test_a_bound_memory_pod_is_charged_the_ratio_it_was_given() -> None:
    m = team(QUOTA_SPELLINGS["nvidia.com/gpu"])
    asks = {names.GPU_MEMORY: 8 * GI}
    m.update_pod(make_pod("p", namespace="team", extra=asks))
    assert m.request("team")[names.GPU_MEMORY_RATIO] == 10  # 8 GiB of the smallest GPU, 80 GiB
    given = allocation.encode(
        {DeviceType.GPU: (allocation.DeviceAllocation(0, {names.GPU_MEMORY: 8 * GI, names.GPU_MEMORY_RATIO: 6}),)}
    )
    bound = make_pod(
        "p", namespace="team", node="n1", extra=asks, annotations={names.ANNOTATION_DEVICE_ALLOCATED: given}
    )
    m.update_pod(bound)
    assert m.used("team") == {names.GPU_MEMORY: 8 * GI, names.GPU_MEMORY_RATIO: 6}
    # A smaller GPU joining the cluster raises the estimate of pending pods only.
    m.update_pod(make_pod("q", namespace="team", extra=asks))
    m.set_capacity(capacity_of([NODE, {**NODE, names.GPU_MEMORY: 8 * 40 * GI}]))
    assert m.request("team")[names.GPU_MEMORY_RATIO] == 6 + 20
    assert m.used("team")[names.GPU_MEMORY_RATIO] == 6


def test_a_whole_gpu_tree_shares_lent_gpus_whole_and_loses_none() -> None:
    # Koordinator's integer-distribution case as a user writes it: quotas in nvidia.com/gpu.
    m = QuotaManager()
    m.set_capacity(capacity_of([{names.NVIDIA_GPU: 81}]))
    gpus = {"donor": 3, **{f"borrower-{i:02d}": m_ for i, m_ in enumerate([8] * 8 + [7] * 2)}}
    weight = {names.ANNOTATION_QUOTA_SHARED_WEIGHT: '{"nvidia.com/gpu": "1"}'}
    m.set_quotas(
        [
            quota_cr(n, namespace=n, min={names.NVIDIA_GPU: str(g)}, max={names.NVIDIA_GPU: "100"}, annotations=weight)
            for n, g in gpus.items()
        ]
    )
    for name in gpus:
        if name != "donor":
            m.update_pod(make_pod(f"{name}-job", namespace=name, extra={names.NVIDIA_GPU: 100}))
    runtimes = {n: m.runtime(n)[names.GPU_CORE] for n in gpus}
    assert sum(runtimes.values()) == 81 * 100
    assert runtimes["donor"] == 0
    assert all(rt % 100 == 0 and rt >= gpus[n] * 100 for n, rt in runtimes.items() if n != "donor")


# --- the property -----------------------------------------------------------------------------------
_TREE = [
    quota_cr(
        "org", labels={names.LABEL_QUOTA_IS_PARENT: "true"}, min={names.NVIDIA_GPU: "6"}, max={names.NVIDIA_GPU: "6"}
    ),
    quota_cr(
        "team-a",
        namespace="team-a",
        labels={names.LABEL_QUOTA_PARENT: "org"},
        min={names.KOORD_GPU: "300"},
        max={names.GPU_CORE: "600", names.GPU_MEMORY_RATIO: "600"},
    ),
    quota_cr(
        "team-b",
        namespace="team-b",
        labels={names.LABEL_QUOTA_PARENT: "org"},
        min={names.NVIDIA_GPU: "3"},
        max={names.NVIDIA_GPU: "6"},
    ),
    quota_cr("solo", namespace="solo", min={names.GPU_CORE: "100"}, max={names.DEPRECATED_GPU_CORE: "400"}),
]
#: Where a pod lands: team quotas, a quota outside any parent, and outside the tree (the default
#: quota by namespace, the system quota by label).
_PLACES = {
    "team-a": ("team-a", {}),
    "team-b": ("team-b", {}),
    "solo": ("solo", {}),
    "default": ("elsewhere", {}),
    "system": ("kube-system", {names.LABEL_QUOTA_NAME: SYSTEM_QUOTA_NAME}),
}
_ASKS = [asks for asks, _ in POD_SPELLINGS.values()] + [{names.KOORD_GPU: 100}, {names.RDMA: 100, "cpu": 1000}]

events = st.lists(
    st.tuples(
        st.sampled_from(["add", "bind", "delete"]),
        st.integers(0, 11),  # which pod
        st.sampled_from(sorted(_PLACES)),
        st.integers(0, len(_ASKS) - 1),
    ),
    max_size=40,
)


def _pod(index: int, place: str, ask: int, *, bound: bool) -> Pod:
    namespace, labels = _PLACES[place]
    return make_pod(f"p{index}", namespace=namespace, labels=labels, node="n1" if bound else "", extra=_ASKS[ask])


def _from_scratch(pods: dict[int, Pod], capacity: Any) -> QuotaManager:
    m = QuotaManager()
    m.set_quotas(_TREE)
    m.set_capacity(capacity)
    for pod in pods.values():
        m.update_pod(pod)
    return m


@settings(max_examples=150, deadline=None)
@given(events, st.integers(1, 3))
def test_runtimes_equal_a_from_scratch_computation_for_any_mix_of_spellings(
    sequence: list[tuple[str, int, str, int]], nodes: int
) -> None:
    capacity = capacity_of([NODE] * nodes)
    m = QuotaManager()
    m.set_quotas(_TREE)
    m.set_capacity(capacity)
    quotas = [q.meta.name for q in _TREE]
    pods: dict[int, Pod] = {}
    m.drain_changes()
    for action, index, place, ask in sequence:
        before = {q: m.runtime(q) for q in [ROOT_QUOTA_NAME, *quotas]}
        if action == "delete":
            gone = pods.pop(index, None)
            if gone is not None:
                m.remove_pod(gone)
        else:
            old = pods.get(index)
            pod = _pod(index, place, ask, bound=action == "bind") if old is None or action == "add" else None
            if pod is None:  # bind the pod as it is
                assert old is not None
                pod = Pod(**{**{f: getattr(old, f) for f in old.__dataclass_fields__}, "node_name": "n1"})
            if old is not None and old.uid != pod.uid:  # another pod under the same index
                m.remove_pod(old)
            pods[index] = pod
            m.update_pod(pod)
        changed = m.drain_changes()
        after = {q: m.runtime(q) for q in before}
        assert {q for q in before if before[q] != after[q]} <= changed  # what the controller redoes
        scratch = _from_scratch(pods, capacity)
        for q in before:
            assert after[q] == scratch.runtime(q), q
            assert m.used(q) == scratch.used(q) and m.request(q) == scratch.request(q)
        # Pods outside the tree lower the root's total by exactly what the bound ones hold.
        held: dict[str, int] = {}
        for pod in pods.values():
            if pod.node_name and _namespace_place(pod) in ("default", "system"):
                for r, v in quotacount.pod_charge(pod.requests(), gpu_memory=capacity.gpu_memory).items():
                    held[r] = held.get(r, 0) + v
        assert after[ROOT_QUOTA_NAME] == {r: max(v - held.get(r, 0), 0) for r, v in capacity.total.items()}


def _namespace_place(pod: Pod) -> str:
    return next(p for p, (ns, labels) in _PLACES.items() if ns == pod.namespace)


def test_the_tree_rules_compare_mins_in_the_names_quotas_count() -> None:
    org = quota_cr("org", labels={names.LABEL_QUOTA_IS_PARENT: "true"}, min={names.NVIDIA_GPU: "4"})
    child = {names.LABEL_QUOTA_PARENT: "org"}

    def problems(*mins: dict[str, str]) -> dict[str, list[str]]:
        m = QuotaManager()
        m.set_quotas([org, *(quota_cr(f"t{i}", labels=child, min=low) for i, low in enumerate(mins))])
        return m.problems()

    # Four GPUs guaranteed below, however they are spelled: the parent's four hold them.
    assert problems({names.GPU_CORE: "200", names.GPU_MEMORY_RATIO: "200"}, {names.KOORD_GPU: "200"}) == {}
    core, ratio = problems({names.NVIDIA_GPU: "3"}, {names.KOORD_GPU: "200"})["org"]
    assert core.startswith("quota org: children's min[koordinator.sh/gpu-core] sum to 500, more than its min")
    assert ratio.startswith("quota org: children's min[koordinator.sh/gpu-memory-ratio] sum to 500")
