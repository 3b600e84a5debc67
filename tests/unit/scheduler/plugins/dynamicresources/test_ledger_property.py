"""Property: between DRA claims and Koordinator-protocol pods, no device, no capacity, no counter
is ever given twice — checked against an account kept here, independently of `Held`."""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.dra import cel, gpus
from apis.dra.claim import ResourceClaim
from apis.dra.ledger import held_by_claims
from apis.extension import names
from scheduler.plugins.dynamicresources.allocator import Node, allocate
from tests.unit.apis.dra.factories import exactly, make_claim, make_class, make_slice

GIB = 2**30
MEMORY = 16 * GIB
COMPILER = cel.Compiler()
CLASSES = {"gpu": make_class("gpu", f'device.driver == "{gpus.DRIVER}"')}


def node_slice(n_gpus: int) -> Any:
    devices: list[dict[str, Any]] = []
    counters = []
    for m in range(n_gpus):
        counters.append({"name": f"gpu-{m}", "counters": {"memory": {"value": "16Gi"}}})
        devices.append(
            {
                "name": f"gpu-{m}",
                "attributes": {"minor": {"int": m}, "kind": {"string": "shared"}},
                "allowMultipleAllocations": True,
                "capacity": {"cores": {"value": "100"}, "memory": {"value": "16Gi"}},
                "consumesCounters": [{"counterSet": f"gpu-{m}", "counters": {"memory": {"value": "16Gi"}}}],
            }
        )
        for half in range(2):
            devices.append(
                {
                    "name": f"gpu-{m}-half-{half}",
                    "attributes": {"minor": {"int": m}, "kind": {"string": "half"}},
                    "consumesCounters": [{"counterSet": f"gpu-{m}", "counters": {"memory": {"value": "8Gi"}}}],
                }
            )
    return make_slice(devices, driver=gpus.DRIVER, counters=counters)


share = st.fixed_dictionaries(
    {"kind": st.just("shared"), "cores": st.sampled_from([10, 25, 50, 100]), "memory": st.integers(1, 16)}
)
half = st.fixed_dictionaries({"kind": st.just("half"), "count": st.integers(1, 2)})
pods = st.lists(st.lists(st.one_of(share, half), min_size=1, max_size=2), min_size=1, max_size=8)
koordinator = st.dictionaries(
    st.integers(0, 2), st.fixed_dictionaries({"cores": st.sampled_from([0, 25, 50, 100]), "memory": st.integers(0, 16)})
)


def claim_for(spec: dict[str, Any], name: str) -> ResourceClaim:
    selector = f'device.attributes["{gpus.DRIVER}"].kind == "{spec["kind"]}"'
    if spec["kind"] == "shared":
        capacity = {"requests": {"cores": str(spec["cores"]), "memory": f"{spec['memory']}Gi"}}
        return make_claim(exactly("gpu", "gpu", selector, capacity=capacity), name=name)
    return make_claim(exactly("gpu", "gpu", selector, count=spec["count"]), name=name)


@settings(max_examples=60, deadline=None)
@given(n_gpus=st.integers(1, 3), held_by_pods=koordinator, pod_specs=pods)
def test_nothing_is_given_twice(
    n_gpus: int, held_by_pods: dict[int, dict[str, int]], pod_specs: list[list[dict[str, Any]]]
) -> None:
    slices = [node_slice(n_gpus)]
    holdings = {
        m: {names.GPU_CORE: h["cores"], names.GPU_MEMORY: h["memory"] * GIB}
        for m, h in held_by_pods.items()
        if m < n_gpus and (h["cores"] or h["memory"])
    }
    koord = gpus.held_by_koordinator(holdings, slices, node="n1")
    allocated: list[ResourceClaim] = []
    for p, specs in enumerate(pod_specs):
        claims = [claim_for(spec, f"p{p}-c{i}") for i, spec in enumerate(specs)]
        held = koord + held_by_claims(allocated)
        out = allocate(claims, node=Node("n1"), classes=CLASSES, slices=slices, held=held, compiler=COMPILER)
        if out.allocations is None:
            assert out.failure is not None and out.failure.message
            continue
        for claim, allocation in zip(claims, out.allocations, strict=True):
            allocated.append(ResourceClaim(claim.meta, claim.spec, allocation))

    # the independent account
    cores: dict[int, Fraction] = defaultdict(Fraction)
    memory: dict[int, Fraction] = defaultdict(Fraction)
    whole: dict[str, int] = defaultdict(int)
    counter: dict[int, Fraction] = defaultdict(Fraction)
    shared_used: set[int] = set()
    for m, h in holdings.items():
        cores[m] += h[names.GPU_CORE]
        memory[m] += h[names.GPU_MEMORY]
        shared_used.add(m)
    for claim in allocated:
        assert claim.allocation is not None
        for result in claim.allocation.results:
            m = int(result.device.split("-")[1])
            if result.share_id:
                cores[m] += result.consumed_capacity["cores"].amount
                memory[m] += result.consumed_capacity["memory"].amount
                shared_used.add(m)
            else:
                assert m not in holdings, f"{result.device} given while a Koordinator pod shares GPU {m}"
                whole[result.device] += 1
                counter[m] += 8 * GIB
    for m in range(n_gpus):
        assert cores[m] <= 100, f"GPU {m}: {cores[m]} cores given"
        assert memory[m] <= MEMORY, f"GPU {m}: {memory[m]} bytes given"
        assert counter[m] + (MEMORY if m in shared_used else 0) <= MEMORY, f"GPU {m}: partitions beside shares"
    assert all(n == 1 for n in whole.values()), whole
