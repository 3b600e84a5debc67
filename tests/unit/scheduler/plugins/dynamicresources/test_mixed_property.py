"""Property: pods with claims and Koordinator-protocol pods, scheduled and deleted in any order
through the whole scheduler, never get the same GPU capacity twice — checked against an account
kept here from what each protocol wrote (the pods' device-allocated annotations, the claims'
allocations), independently of the scheduler's ledger."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from fractions import Fraction
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from apis.crds.device import DeviceType
from apis.dra import RESOURCE_CLAIMS
from apis.extension import allocation, names
from apis.k8s.core import Pod
from tests.support.builders import make_node, make_pod

from .dra import GIB, add_claims, claim, claim_pod, scheduler_with, store_of

MEMORY = 16 * GIB

koordinator = st.one_of(
    st.fixed_dictionaries({"kind": st.just("koord-share"), "percent": st.sampled_from([25, 50, 75])}),
    st.fixed_dictionaries({"kind": st.just("koord-whole"), "count": st.integers(1, 2)}),
)
dra = st.one_of(
    st.fixed_dictionaries(
        {"kind": st.just("dra-share"), "cores": st.sampled_from([10, 25, 50]), "memory": st.integers(1, 16)}
    ),
    st.fixed_dictionaries({"kind": st.just("dra-whole"), "count": st.integers(1, 2)}),
)
steps = st.lists(
    st.one_of(koordinator, dra, st.fixed_dictionaries({"kind": st.just("delete"), "which": st.integers(0, 20)})),
    min_size=1,
    max_size=14,
)


def pod_for(spec: dict[str, Any], i: int) -> tuple[Pod, Any]:
    kind = spec["kind"]
    if kind == "koord-share":
        p = spec["percent"]
        return make_pod(f"k{i}", gpu_core=p, gpu_ratio=p), None
    if kind == "koord-whole":
        return make_pod(f"k{i}", nvidia_gpu=spec["count"]), None
    if kind == "dra-share":
        c = claim(f"c{i}", cores=spec["cores"], memory=spec["memory"] * GIB)
    else:
        c = claim(f"c{i}", count=spec["count"])
    return claim_pod(f"d{i}", c.meta.name), c


@settings(max_examples=60, deadline=None)
@given(nodes=st.integers(1, 3), plan=steps)
# Two shares whose bytes fill a GPU exactly are 13 % + 88 % to the cache: the allocator must
# count held shares in the cache's whole percents (found by this test).
@example(
    nodes=1, plan=[{"kind": "dra-share", "cores": 10, "memory": 2}, {"kind": "dra-share", "cores": 10, "memory": 14}]
)
def test_no_gpu_capacity_is_given_twice_between_the_protocols(nodes: int, plan: list[dict[str, Any]]) -> None:
    scheduler = scheduler_with(*(make_node(f"n{k}", gpus=2, gpu_memory=MEMORY) for k in range(nodes)))
    bound: list[tuple[Pod, Any, str]] = []
    for i, spec in enumerate(plan):
        if spec["kind"] == "delete":
            if bound:
                pod, c, _ = bound.pop(spec["which"] % len(bound))
                scheduler.cache.remove_pod(pod)
                if c is not None:  # the controller deletes a pod's generated claim with it
                    scheduler.feeds.deliver(RESOURCE_CLAIMS, c, deleted=True)
            continue
        pod, c = pod_for(spec, i)
        if c is not None:
            add_claims(scheduler, c)
        out = scheduler.schedule_one(pod)
        if out.scheduled and out.node is not None:
            bound.append((_with(pod, out.annotations), c, out.node))
        elif c is not None:
            scheduler.feeds.deliver(RESOURCE_CLAIMS, c, deleted=True)

    # The independent account: what each protocol's records say is given, per node and GPU.
    cores: dict[tuple[str, int], Fraction] = defaultdict(Fraction)
    memory: dict[tuple[str, int], Fraction] = defaultdict(Fraction)
    store = store_of(scheduler)
    for pod, c, node in bound:
        if c is None:
            for gpu in allocation.from_pod_annotations(pod.annotations).get(DeviceType.GPU, ()):
                cores[(node, gpu.minor)] += gpu.resources[names.GPU_CORE]
                memory[(node, gpu.minor)] += gpu.resources.get(
                    names.GPU_MEMORY, MEMORY * gpu.resources[names.GPU_CORE] // 100
                )
            continue
        found = store.claim(c.key)
        assert found is not None and found.allocation is not None, f"{c.key} bound without an allocation"
        for result in found.allocation.results:
            minor = int(result.device.split("-")[1])
            assert result.pool == node, f"{c.key} allocated on {result.pool}, its pod on {node}"
            consumed = result.consumed_capacity
            cores[(node, minor)] += consumed["cores"].amount if "cores" in consumed else 100
            memory[(node, minor)] += consumed["memory"].amount if "memory" in consumed else MEMORY
    for where, amount in cores.items():
        assert amount <= 100, f"GPU {where}: {amount} cores given"
    for where, amount in memory.items():
        assert amount <= MEMORY, f"GPU {where}: {amount} bytes given"
    # The scheduler's own ledger agrees: nothing over-committed.
    for k in range(nodes):
        assert not scheduler.cache.overcommits(f"n{k}")


def _with(pod: Pod, annotations: Any) -> Pod:
    meta = dataclasses.replace(pod.meta, annotations={**pod.meta.annotations, **annotations})
    return dataclasses.replace(pod, meta=meta)
