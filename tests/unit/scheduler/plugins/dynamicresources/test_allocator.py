"""The structured allocator, one kube feature at a time; each test can fail on its own."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from apis.dra import cel
from apis.dra.allocation import DeviceID
from apis.dra.claim import DeviceClass, ResourceClaim
from apis.dra.ledger import Held, held_by_claims
from apis.dra.slice import ResourceSlice
from scheduler.plugins.dynamicresources.allocator import (
    Candidate,
    FailureKind,
    Node,
    Outcome,
    allocate,
    consumed_capacity,
)
from tests.unit.apis.dra.factories import DRIVER, exactly, gpu, make_claim, make_class, make_slice

GIB = 2**30
NODE = Node("n1", {"zone": "a"})


@pytest.fixture(scope="module")
def compiler() -> cel.Compiler:
    return cel.Compiler()


def run(
    compiler: cel.Compiler,
    claims: list[ResourceClaim],
    slices: list[ResourceSlice],
    *,
    classes: list[DeviceClass] | None = None,
    held: Held | None = None,
    node: Node = NODE,
    **kw: Any,
) -> Outcome:
    by_name = {c.name: c for c in (classes or [make_class("gpu")])}
    return allocate(claims, node=node, classes=by_name, slices=slices, held=held or Held(), compiler=compiler, **kw)


def devices(outcome: Outcome, claim: int = 0) -> list[str]:
    assert outcome.allocations is not None, outcome.failure
    return [r.device for r in outcome.allocations[claim].results]


GPUS = make_slice([gpu(f"gpu-{i}", minor=i, model="A100" if i < 2 else "H100", numa=i // 2) for i in range(4)])


# --- exactly.count, selectors, order ------------------------------------------------------------


def test_exact_count_takes_devices_in_kube_order(compiler: cel.Compiler) -> None:
    out = run(compiler, [make_claim(exactly("gpu", "gpu", count=2))], [GPUS])
    assert devices(out) == ["gpu-0", "gpu-1"]
    result = out.allocations[0].results[0]
    assert (result.request, result.driver, result.pool, result.share_id) == ("gpu", DRIVER, "n1", "")
    assert out.allocations[0].node_selector == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
    }


def test_class_and_request_selectors_both_apply(compiler: cel.Compiler) -> None:
    klass = make_class("gpu", f'device.driver == "{DRIVER}"', f'device.attributes["{DRIVER}"].model == "H100"')
    claim = make_claim(exactly("gpu", "gpu", f'device.attributes["{DRIVER}"].minor == 3'))
    assert devices(run(compiler, [claim], [GPUS], classes=[klass])) == ["gpu-3"]


def test_unfit_names_request_selector_and_counts(compiler: cel.Compiler) -> None:
    klass = make_class("gpu", f'device.attributes["{DRIVER}"].model == "H100"')
    out = run(compiler, [make_claim(exactly("gpu", "gpu", count=3))], [GPUS], classes=[klass])
    assert out.failure is not None and out.failure.kind is FailureKind.UNFIT
    assert out.failure.claim == "default/c" and out.failure.request == "gpu"
    assert (
        "needs 3 device(s) of class gpu; 2 of 4 on node n1 fit (2 not selected by selector #0 of class gpu)"
        in out.failure.message
    )


def test_devices_of_other_nodes_are_not_candidates(compiler: cel.Compiler) -> None:
    other = make_slice([gpu("gpu-9")], node="n2", pool="n2")
    out = run(compiler, [make_claim(exactly("gpu", "gpu", count=5))], [GPUS, other])
    assert out.failure is not None and "4 on node n1" in out.failure.message


def test_network_attached_slice_gives_its_selector(compiler: cel.Compiler) -> None:
    sel = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}
    s = make_slice([gpu("remote-0")], node="", pool="fabric", nodeSelector=sel)
    out = run(compiler, [make_claim()], [s])
    assert devices(out) == ["remote-0"]
    assert out.allocations[0].node_selector == sel
    assert not run(compiler, [make_claim()], [s], node=Node("n1", {"zone": "b"})).ok
    everywhere = make_slice([gpu("any-0")], node="", pool="all", allNodes=True)
    assert run(compiler, [make_claim()], [everywhere]).allocations[0].node_selector is None


def test_per_device_node_selection(compiler: cel.Compiler) -> None:
    s = make_slice(
        [gpu("a", _={"nodeName": "n2"}), gpu("b", _={"nodeName": "n1"})], node="", pool="p", perDeviceNodeSelection=True
    )
    assert devices(run(compiler, [make_claim()], [s])) == ["b"]


# --- held devices: the one ledger ---------------------------------------------------------------


def test_held_devices_are_never_given(compiler: cel.Compiler) -> None:
    held = Held.of([DeviceID(DRIVER, "n1", "gpu-0"), DeviceID(DRIVER, "n1", "gpu-2")])
    assert devices(run(compiler, [make_claim(exactly("gpu", "gpu", count=2))], [GPUS], held=held)) == ["gpu-1", "gpu-3"]
    out = run(compiler, [make_claim(exactly("gpu", "gpu", count=3))], [GPUS], held=held)
    assert out.failure is not None and "2 in use" in out.failure.message


def test_held_by_claims_reads_allocations_but_not_admin_access() -> None:
    status = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "a", "driver": DRIVER, "pool": "n1", "device": "gpu-0"},
                    {"request": "a", "driver": DRIVER, "pool": "n1", "device": "gpu-1", "adminAccess": True},
                    {
                        "request": "a",
                        "driver": DRIVER,
                        "pool": "n1",
                        "device": "gpu-2",
                        "shareID": "s1",
                        "consumedCapacity": {"memory": "1Gi"},
                    },
                ]
            }
        }
    }
    claim = make_claim(status=status)
    held = held_by_claims([claim, make_claim(name="unallocated")])
    assert held.exclusive == {DeviceID(DRIVER, "n1", "gpu-0")}
    assert held.consumed(DeviceID(DRIVER, "n1", "gpu-2"), "memory") == GIB
    assert held_by_claims([claim], besides=["default/c"]) == Held()


def test_pods_claims_do_not_share_a_device(compiler: cel.Compiler) -> None:
    claims = [make_claim(exactly("gpu", "gpu", count=2), name=n) for n in ("a", "b")]
    out = run(compiler, claims, [GPUS])
    assert devices(out, 0) == ["gpu-0", "gpu-1"] and devices(out, 1) == ["gpu-2", "gpu-3"]
    assert not run(compiler, [*claims, make_claim(name="c")], [GPUS]).ok


# --- allocationMode All, firstAvailable --------------------------------------------------------


def test_allocation_mode_all(compiler: cel.Compiler) -> None:
    claim = make_claim(exactly("gpu", "gpu", f'device.attributes["{DRIVER}"].model == "A100"', allocationMode="All"))
    assert devices(run(compiler, [claim], [GPUS])) == ["gpu-0", "gpu-1"]
    held = Held.of([DeviceID(DRIVER, "n1", "gpu-1")])
    assert not run(compiler, [claim], [GPUS], held=held).ok  # all means all: one is in use
    none = make_claim(exactly("gpu", "gpu", 'device.driver == "nope"', allocationMode="All"))
    assert not run(compiler, [none], [GPUS]).ok  # All needs at least one device


def test_allocation_mode_all_refuses_an_incomplete_pool(compiler: cel.Compiler) -> None:
    half = make_slice([gpu("gpu-0")], count=2)
    out = run(compiler, [make_claim(exactly("gpu", "gpu", allocationMode="All"))], [half])
    assert out.failure is not None and "is being updated (incomplete)" in out.failure.message


def test_first_available_takes_the_first_that_fits(compiler: cel.Compiler) -> None:
    request = {
        "name": "gpu",
        "firstAvailable": [
            {
                "name": "h100x4",
                "deviceClassName": "gpu",
                "count": 4,
                "selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].model == "H100"'}}],
            },
            {"name": "any2", "deviceClassName": "gpu", "count": 2},
        ],
    }
    out = run(compiler, [make_claim(request)], [GPUS])
    assert devices(out) == ["gpu-0", "gpu-1"]
    assert {r.request for r in out.allocations[0].results} == {"gpu/any2"}
    bad = dict(request, firstAvailable=[{**request["firstAvailable"][1], "count": 9}])
    failure = run(compiler, [make_claim(bad)], [GPUS]).failure
    assert failure is not None and "any2: needs 9 device(s)" in failure.message


# --- constraints ----------------------------------------------------------------------------------


def test_match_attribute_keeps_devices_together(compiler: cel.Compiler) -> None:
    claim = make_claim(
        exactly("a", "gpu", f'device.attributes["{DRIVER}"].minor != 0'),
        exactly("b", "gpu"),
        constraints=[{"matchAttribute": f"{DRIVER}/numa"}],
    )
    # a takes gpu-1 (numa 0); b must be numa 0 too: gpu-0 (backtracking not needed)
    assert devices(run(compiler, [claim], [GPUS])) == ["gpu-1", "gpu-0"]
    held = Held.of([DeviceID(DRIVER, "n1", "gpu-0")])
    # gpu-1 has no numa-0 partner left: a moves to gpu-2, b takes gpu-3 (backtracking)
    assert devices(run(compiler, [claim], [GPUS], held=held)) == ["gpu-2", "gpu-3"]


def test_match_attribute_failure_names_the_constraint(compiler: cel.Compiler) -> None:
    claim = make_claim(
        exactly("a", "gpu", f'device.attributes["{DRIVER}"].numa == 0'),
        exactly("b", "gpu", f'device.attributes["{DRIVER}"].numa == 1'),
        constraints=[{"requests": ["a", "b"], "matchAttribute": f"{DRIVER}/numa"}],
    )
    out = run(compiler, [claim], [GPUS])
    assert out.failure is not None
    assert "not together under constraint matchAttribute gpu.tessera.io/numa over a, b" in out.failure.message


def test_device_without_the_attribute_does_not_match(compiler: cel.Compiler) -> None:
    s = make_slice([gpu("plain"), gpu("numa", numa=0)])
    claim = make_claim(exactly("a", "gpu", count=1), constraints=[{"matchAttribute": f"{DRIVER}/numa"}])
    assert devices(run(compiler, [claim], [s])) == ["numa"]


def test_distinct_attribute(compiler: cel.Compiler) -> None:
    claim = make_claim(exactly("a", "gpu", count=2), constraints=[{"distinctAttribute": f"{DRIVER}/numa"}])
    assert devices(run(compiler, [claim], [GPUS])) == ["gpu-0", "gpu-2"]


# --- adminAccess ----------------------------------------------------------------------------------


def test_admin_access_may_use_devices_in_use_but_holds_nothing(compiler: cel.Compiler) -> None:
    held = Held.of([DeviceID(DRIVER, "n1", f"gpu-{i}") for i in range(4)])
    claim = make_claim(exactly("mon", "gpu", allocationMode="All", adminAccess=True))
    out = run(compiler, [claim], [GPUS], held=held)
    assert devices(out) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert all(r.admin_access for r in out.allocations[0].results)
    allocated = make_claim(status={"allocation": out.allocations[0].to_dict()})
    assert held_by_claims([allocated]) == Held()


# --- taints ---------------------------------------------------------------------------------------


def test_taints_need_tolerations(compiler: cel.Compiler) -> None:
    s = make_slice(
        [
            gpu("broken", _={"taints": [{"key": "gpu.tessera.io/xid", "value": "79", "effect": "NoSchedule"}]}),
            gpu("flaky", _={"taints": [{"key": "gpu.tessera.io/ecc", "effect": "None"}]}),
        ]
    )
    out = run(compiler, [make_claim(exactly("g", "gpu", count=2))], [s])
    assert out.failure is not None and "1 tainted gpu.tessera.io/xid=79:NoSchedule" in out.failure.message
    tolerant = exactly("g", "gpu", count=2, tolerations=[{"key": "gpu.tessera.io/xid", "operator": "Exists"}])
    out = run(compiler, [make_claim(tolerant)], [s])
    assert devices(out) == ["broken", "flaky"]
    assert out.allocations[0].results[0].tolerations == ({"key": "gpu.tessera.io/xid", "operator": "Exists"},)


# --- consumable capacity --------------------------------------------------------------------------

SHARED = make_slice(
    [
        gpu(
            "gpu-0",
            _={
                "allowMultipleAllocations": True,
                "capacity": {
                    "memory": {
                        "value": "80Gi",
                        "requestPolicy": {"default": "10Gi", "validRange": {"min": "1Gi", "step": "1Gi"}},
                    },
                    "cores": {
                        "value": "100",
                        "requestPolicy": {"default": "10", "validValues": ["10", "25", "50", "100"]},
                    },
                },
            },
        )
    ]
)


def test_shared_device_is_shared_by_capacity(compiler: cel.Compiler) -> None:
    req = exactly("g", "gpu", capacity={"requests": {"memory": "30Gi", "cores": "20"}})
    claims = [make_claim(req, name=n) for n in ("a", "b")]
    out = run(compiler, claims, [SHARED])
    assert devices(out, 0) == devices(out, 1) == ["gpu-0"]
    first = out.allocations[0].results[0]
    assert first.consumed_capacity["memory"].amount == 30 * GIB and first.consumed_capacity["cores"].amount == 25
    assert first.share_id and first.share_id != out.allocations[1].results[0].share_id
    third = make_claim(req, name="c")
    out3 = run(compiler, [*claims, third], [SHARED])
    assert out3.failure is not None and out3.failure.claim == "default/c"
    assert (
        "0 of 1 on node n1 fit (1 not enough capacity memory), beside the pod's claims default/a, default/b"
        in out3.failure.message
    )


def test_capacity_held_by_others_counts(compiler: cel.Compiler) -> None:
    dev = DeviceID(DRIVER, "n1", "gpu-0")
    held = Held.of(capacity=[(dev, {"memory": Fraction(60 * GIB), "cores": Fraction(50)})])
    req = exactly("g", "gpu", capacity={"requests": {"memory": "20Gi"}})
    assert run(compiler, [make_claim(req)], [SHARED], held=held).ok
    bigger = exactly("g", "gpu", capacity={"requests": {"memory": "21Gi"}})
    assert not run(compiler, [make_claim(bigger)], [SHARED], held=held).ok


def test_device_held_whole_is_not_shared(compiler: cel.Compiler) -> None:
    held = Held.of([DeviceID(DRIVER, "n1", "gpu-0")])
    assert not run(compiler, [make_claim()], [SHARED], held=held).ok


@pytest.mark.parametrize(
    ("requests", "expected"),
    [
        ({}, {"memory": 10 * GIB, "cores": 10}),  # policy defaults
        ({"memory": "500Mi"}, {"memory": GIB, "cores": 10}),  # below min: min
        ({"memory": "1536Mi"}, {"memory": 2 * GIB, "cores": 10}),  # min + n*step, rounded up
        ({"cores": "30"}, {"memory": 10 * GIB, "cores": 50}),  # next valid value
        ({"cores": "101"}, None),  # above every valid value
        ({"gpu-count": "1"}, None),  # a capacity the device lacks
    ],
    ids=["defaults", "range-min", "range-step", "valid-values", "above-valid-values", "unknown-capacity"],
)
def test_request_policy(requests: dict[str, str], expected: dict[str, int] | None) -> None:
    from apis.k8s import quantity

    got = consumed_capacity({k: quantity.parse(v) for k, v in requests.items()}, SHARED.devices[0])
    assert got == (None if expected is None else {k: Fraction(v) for k, v in expected.items()})


def test_unshared_device_consumes_all_its_capacity_but_checks_requests(compiler: cel.Compiler) -> None:
    s = make_slice(
        [
            gpu("small", _={"capacity": {"memory": {"value": "16Gi"}}}),
            gpu("big", _={"capacity": {"memory": {"value": "80Gi"}}}),
        ]
    )
    claim = make_claim(exactly("g", "gpu", capacity={"requests": {"memory": "40Gi"}}))
    out = run(compiler, [claim], [s])
    assert devices(out) == ["big"] and not out.allocations[0].results[0].consumed_capacity


# --- counters (partitionable devices) -------------------------------------------------------------

PARTITIONS = make_slice(
    [
        gpu(
            "whole",
            _={
                "consumesCounters": [
                    {"counterSet": "gpu-0", "counters": {"memory": {"value": "80Gi"}, "slices": {"value": "7"}}}
                ]
            },
        ),
        *[
            gpu(
                f"mig-{i}",
                profile="3g.40gb",
                _={
                    "consumesCounters": [
                        {"counterSet": "gpu-0", "counters": {"memory": {"value": "40Gi"}, "slices": {"value": "3"}}}
                    ]
                },
            )
            for i in range(3)
        ],
    ],
    counters=[{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}, "slices": {"value": "7"}}}],
)


def test_partitions_draw_on_shared_counters(compiler: cel.Compiler) -> None:
    mig = exactly("g", "gpu", f'device.attributes["{DRIVER}"].?profile.orValue("") == "3g.40gb"', count=2)
    assert devices(run(compiler, [make_claim(mig)], [PARTITIONS])) == ["mig-0", "mig-1"]
    three = exactly("g", "gpu", f'device.attributes["{DRIVER}"].?profile.orValue("") == "3g.40gb"', count=3)
    out = run(compiler, [make_claim(three)], [PARTITIONS])
    assert out.failure is not None and "fit one at a time but not 3 together" in out.failure.message
    # the whole GPU and a partition cannot both be had
    both = [
        make_claim(exactly("w", "gpu", 'device.attributes["gpu.tessera.io"].?profile.orValue("") == ""'), name="w"),
        make_claim(mig, name="m"),
    ]
    assert not run(compiler, both, [PARTITIONS]).ok


def test_held_partition_uses_counters(compiler: cel.Compiler) -> None:
    held = Held.of([DeviceID(DRIVER, "n1", "mig-2")])
    whole = make_claim(exactly("w", "gpu", '!has(device.attributes["gpu.tessera.io"].profile)'))
    out = run(compiler, [whole], [PARTITIONS], held=held)
    assert out.failure is not None and "not enough shared counters" in out.failure.message


def test_invalid_pool_is_skipped_and_said(compiler: cel.Compiler) -> None:
    bad = make_slice([gpu("x", _={"consumesCounters": [{"counterSet": "nope", "counters": {"m": {"value": "1"}}}]})])
    out = run(compiler, [make_claim()], [bad])
    assert (
        out.failure is not None
        and "invalid resource pools: gpu.tessera.io/n1: device x: counter set nope not found" in out.failure.message
    )


def test_only_the_newest_generation_counts(compiler: cel.Compiler) -> None:
    old = make_slice([gpu("old")], generation=1, name="s-old")
    new = make_slice([gpu("new")], generation=2, name="s-new")
    assert devices(run(compiler, [make_claim()], [old, new])) == ["new"]


# --- errors of the claim itself ------------------------------------------------------------------


def test_bad_cel_is_the_claims_error(compiler: cel.Compiler) -> None:
    out = run(compiler, [make_claim(exactly("g", "gpu", 'device.attributes["gpu.tessera.io"].minor == '))], [GPUS])
    assert out.failure is not None and out.failure.kind is FailureKind.ERROR
    assert out.failure.message.startswith("claim default/c, request g: selector #0 of the request: compilation failed")
    runtime = run(compiler, [make_claim(exactly("g", "gpu", 'device.attributes["gpu.tessera.io"].nope == 1'))], [GPUS])
    assert runtime.failure is not None and runtime.failure.kind is FailureKind.ERROR
    assert "on device gpu.tessera.io/n1/gpu-0: Key not found in map" in runtime.failure.message


def test_missing_class_is_the_claims_error(compiler: cel.Compiler) -> None:
    out = run(compiler, [make_claim(exactly("g", "fpga"))], [GPUS])
    assert out.failure is not None and out.failure.kind is FailureKind.ERROR
    assert out.failure.message == "claim default/c, request g: device class fpga not found"


def test_search_is_bounded(compiler: cel.Compiler) -> None:
    many = make_slice([gpu(f"g{i}") for i in range(12)])
    claim = make_claim(exactly("a", "gpu", count=6), exactly("b", "gpu", count=7))  # C(12, 6) tries
    out = run(compiler, [claim], [many], max_steps=500)
    assert out.failure is not None and "gave up after trying 500 device combinations" in out.failure.message


# --- results --------------------------------------------------------------------------------------


def test_configuration_from_class_and_claim(compiler: cel.Compiler) -> None:
    klass = make_class("gpu", config=[{"opaque": {"driver": DRIVER, "parameters": {"mode": "exclusive"}}}])
    claim = make_claim(
        exactly("a", "gpu"),
        exactly("b", "gpu"),
        config=[
            {"requests": ["a"], "opaque": {"driver": DRIVER, "parameters": {"mps": True}}},
            {"opaque": {"driver": DRIVER, "parameters": {"all": 1}}},
        ],
    )
    out = run(compiler, [claim], [GPUS], classes=[klass])
    configs = [c.to_dict() for c in out.allocations[0].config]
    assert configs == [
        {"source": "FromClass", "opaque": {"driver": DRIVER, "parameters": {"mode": "exclusive"}}},
        {"source": "FromClaim", "requests": ["a"], "opaque": {"driver": DRIVER, "parameters": {"mps": True}}},
        {"source": "FromClaim", "opaque": {"driver": DRIVER, "parameters": {"all": 1}}},
    ]


def test_deterministic_and_ranked(compiler: cel.Compiler) -> None:
    claims = [make_claim(exactly("g", "gpu", capacity={"requests": {"memory": "1Gi"}}), name=n) for n in ("a", "b")]
    one = run(compiler, claims, [SHARED, GPUS])
    assert one.allocations == run(compiler, claims, [SHARED, GPUS]).allocations

    def prefer_h100(c: Candidate) -> int:
        attr = c.device.attributes.get("model")
        return 0 if attr is not None and attr.value == "H100" else 1

    assert devices(run(compiler, [make_claim()], [GPUS], rank=prefer_h100)) == ["gpu-2"]
