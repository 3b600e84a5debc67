"""DynamicResources through the whole cycle (the offline Scheduler, as what-if runs it): claims
resolved, allocated by CEL, on one ledger with Koordinator-protocol pods, reserved and written."""

from __future__ import annotations

import dataclasses

from apis.dra import RESOURCE_CLAIMS, gpus
from apis.dra.allocation import ConsumerReference
from apis.dra.names import DELETE_PROTECTION_FINALIZER
from apis.extension import names
from apis.k8s.core import Pod
from scheduler.core import Scheduler
from scheduler.framework.status import Code
from scheduler.plugins.dynamicresources.plugin import NAME, DynamicResources
from tests.support.builders import bound_pod, gpu_alloc, make_node, make_pod

from ..coscheduling.gangs import FOREVER, nodes_of, schedule_all
from .dra import (
    GIB,
    add_claims,
    claim,
    claim_pod,
    gpu_holders,
    owned_by,
    results,
    scheduler_with,
    store_of,
    with_claims,
)

MINOR = f'device.attributes["{gpus.DRIVER}"].minor'


def test_a_claim_selected_by_cel_is_allocated_and_its_status_written_conditionally() -> None:
    scheduler = scheduler_with(make_node("n1", gpus=4), make_node("n2", gpus=4))
    add_claims(scheduler, claim("want-3", f"{MINOR} == 3", f'device.attributes["{gpus.DRIVER}"].numaNode == 1', rv="7"))
    out = scheduler.schedule_one(claim_pod("p", "want-3"))
    assert out.scheduled, out.status.message
    assert results(scheduler, "default/want-3") == ["gpu-3"]
    status, finalizer = out.writes.objects
    assert (status.resource, status.name, status.namespace, status.subresource) == (
        RESOURCE_CLAIMS,
        "want-3",
        "default",
        "status",
    )
    assert status.patch["metadata"] == {"resourceVersion": "7"}
    written = status.patch["status"]
    assert isinstance(written, dict)
    assert written["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-default-p"}]
    allocation = written["allocation"]
    assert isinstance(allocation, dict)
    assert allocation["devices"]["results"][0]["device"] == "gpu-3"
    assert allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [out.node]
    assert status.undo is not None and status.undo.patch == {"status": {"reservedFor": None, "allocation": None}}
    assert finalizer.patch == {"metadata": {"finalizers": [DELETE_PROTECTION_FINALIZER]}}
    # The claim's GPU is held in the cache as a whole GPU, for DeviceShare to see.
    assert gpu_holders(scheduler, out.node or "") == {3: ["default/p"]}


def test_a_template_claim_not_made_yet_makes_the_pod_wait_with_kubes_reason() -> None:
    scheduler = scheduler_with(make_node("n1", gpus=1))
    pod = with_claims(make_pod("p"), templates={"gpu": None})
    out = scheduler.schedule_one(pod)
    assert out.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    waiting = "waiting for the resourceclaim controller to create the ResourceClaim for pod claim gpu"
    assert waiting in out.status.message
    # Made, recorded in the pod's status, owned by the pod: placed.
    made = with_claims(make_pod("p2"), templates={"gpu": "p2-gpu-abcde"})
    add_claims(scheduler, owned_by(claim("p2-gpu-abcde"), made))
    assert scheduler.schedule_one(made).scheduled


def test_a_missing_claim_and_one_made_for_another_pod_are_said() -> None:
    scheduler = scheduler_with(make_node("n1", gpus=1))
    out = scheduler.schedule_one(claim_pod("p", "nope"))
    assert out.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "ResourceClaim default/nope not found" in out.status.message
    stranger = make_pod("stranger")
    add_claims(scheduler, owned_by(claim("q-gpu-x"), stranger))
    out = scheduler.schedule_one(with_claims(make_pod("q"), templates={"gpu": "q-gpu-x"}))
    assert "ResourceClaim default/q-gpu-x was not created for this pod" in out.status.message


def test_a_claims_own_error_is_unresolvable_and_names_request_and_selector() -> None:
    scheduler = scheduler_with(make_node("n1", gpus=1))
    add_claims(
        scheduler,
        claim("typo", "device.atributes.x == 1"),
        claim("syntax", "device.driver =="),
        claim("nocls", klass="tpu"),
    )
    out = scheduler.schedule_one(claim_pod("p", "typo"))
    assert out.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "claim default/typo, request gpu: selector #0 of the request on device gpu.tessera.dev/n1/gpu-0" in (
        out.status.message
    )
    out = scheduler.schedule_one(claim_pod("s", "syntax"))
    assert out.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "claim default/syntax, request gpu: selector #0 of the request: " in out.status.message
    out = scheduler.schedule_one(claim_pod("q", "nocls"))
    assert "claim default/nocls, request gpu: device class tpu not found" in out.status.message


def test_unfit_says_which_claim_request_and_selector_per_node() -> None:
    scheduler = scheduler_with(make_node("n1", gpus=2))
    add_claims(scheduler, claim("big", f"{MINOR} >= 1", count=2))
    out = scheduler.schedule_one(claim_pod("p", "big"))
    assert out.status.code is Code.UNSCHEDULABLE
    assert (
        "claim default/big, request gpu: needs 2 device(s) of class gpu; 1 of 2 on node n1 fit "
        "(1 not selected by selector #0 of the request)"
    ) in out.status.message


def test_gpus_koordinator_pods_hold_are_never_given_to_claims() -> None:
    scheduler = scheduler_with(make_node("n1", gpus=2))
    scheduler.cache.add_pod(bound_pod("koord-0", "n1", gpu_alloc(0, 50), gpu_core=50, gpu_ratio=50))
    add_claims(scheduler, claim("whole", count=1), claim("second", count=1))
    assert scheduler.schedule_one(claim_pod("p", "whole")).scheduled
    assert results(scheduler, "default/whole") == ["gpu-1"]  # GPU 0 is half Koordinator's
    # GPU 0's other half may be shared through its capacity, but not taken whole.
    out = scheduler.schedule_one(claim_pod("q", "second"))
    assert not out.scheduled
    assert "not enough capacity" in out.status.message


def test_gpus_claims_hold_are_never_given_to_koordinator_pods() -> None:
    scheduler = scheduler_with(make_node("n1", gpus=2))
    add_claims(scheduler, claim("half", cores=50, memory=40 * GIB), claim("whole"))
    assert scheduler.schedule_one(claim_pod("p", "half")).scheduled
    assert scheduler.schedule_one(claim_pod("q", "whole")).scheduled
    held = gpu_holders(scheduler, "n1")
    assert sorted(held) == [0, 1]
    # DeviceShare counts both: no whole GPU is left, a half is.
    out = scheduler.schedule_one(make_pod("koord-whole", nvidia_gpu=1))
    assert not out.scheduled and "Insufficient gpu devices" in out.status.message
    out = scheduler.schedule_one(make_pod("koord-half", gpu_core=50, gpu_ratio=50))
    assert out.scheduled
    assert scheduler.cache.device_usage("n1")[0].free[names.GPU_CORE] == 0 or (
        scheduler.cache.device_usage("n1")[1].free[names.GPU_CORE] == 0
    )
    # And a claim sees the Koordinator half: nothing is left for another claim.
    add_claims(scheduler, claim("more", cores=10, memory=GIB))
    assert not scheduler.schedule_one(claim_pod("r", "more")).scheduled


def test_two_claims_share_one_gpus_capacity_and_are_packed_onto_it() -> None:
    scheduler = scheduler_with(make_node("n1", gpus=2))
    add_claims(
        scheduler,
        claim("a", cores=30, memory=20 * GIB),
        claim("b", cores=30, memory=20 * GIB),
        claim("c", cores=50, memory=50 * GIB),
    )
    for name in ("a", "b", "c"):
        assert scheduler.schedule_one(claim_pod(f"p-{name}", name)).scheduled
    # Packing: b goes where a is; c does not fit beside them (memory), so it takes the other GPU.
    assert results(scheduler, "default/a") == results(scheduler, "default/b") != results(scheduler, "default/c")
    allocation = store_of(scheduler).claim("default/a")
    assert allocation is not None and allocation.allocation is not None
    assert allocation.allocation.results[0].share_id


def test_claims_asking_only_for_memory_share_a_gpu_and_take_no_cores() -> None:
    """kube's default for a capacity a request leaves out is all of it; our GPUs publish `cores`
    with a request policy whose default is 0, as a Koordinator pod asking only GPU memory takes
    no gpu-core — so two half-memory claims share one GPU."""
    scheduler = scheduler_with(make_node("n1", gpus=1))
    add_claims(scheduler, claim("a", memory=40 * GIB), claim("b", memory=40 * GIB))
    assert scheduler.schedule_one(claim_pod("p-a", "a")).scheduled
    assert scheduler.schedule_one(claim_pod("p-b", "b")).scheduled
    assert results(scheduler, "default/a") == results(scheduler, "default/b")
    assert scheduler.cache.device_usage("n1")[0].free[names.GPU_CORE] == 100


def test_an_allocated_claim_is_reused_on_its_node_and_only_reserved_for_the_next_pod() -> None:
    scheduler = scheduler_with(make_node("n1", gpus=1), make_node("n2", gpus=1))
    add_claims(scheduler, claim("shared"))
    first = scheduler.schedule_one(claim_pod("p", "shared"))
    second = scheduler.schedule_one(claim_pod("q", "shared"))
    assert first.scheduled and second.scheduled and first.node == second.node
    (write,) = second.writes.objects
    status = write.patch["status"]
    assert isinstance(status, dict) and "allocation" not in status
    assert [r["name"] for r in status["reservedFor"]] == ["p", "q"]
    # Counted once, for the pod it was allocated for.
    assert gpu_holders(scheduler, first.node or "") == {0: ["default/p"]}


def test_a_bound_pods_allocated_claim_holds_its_gpu_after_a_restart() -> None:
    scheduler = scheduler_with(make_node("n1", gpus=1))
    pod = claim_pod("old", "held", node="n1")
    allocated_claim = claim("held")
    store = store_of(scheduler)
    # What a previous scheduler wrote: allocated on n1's only GPU, reserved for the pod.
    from scheduler.plugins.dynamicresources.allocator import Node, allocate

    out = allocate(
        [allocated_claim],
        node=Node("n1"),
        classes=store.classes,
        slices=store.slices_for("n1"),
        held=store.held_on("n1"),
        compiler=scheduler.frameworks[next(iter(scheduler.frameworks))].plugin("DynamicResources").compiler,  # type: ignore[union-attr]
    )
    assert out.allocations is not None
    written = dataclasses.replace(
        allocated_claim,
        allocation=out.allocations[0],
        reserved_for=(ConsumerReference.pod("old", pod.uid),),
    )
    scheduler.cache.add_pod(pod)  # the pod arrives first: its GPUs are unknown until the claim does
    assert scheduler.cache.devices_unknown(pod.uid)
    add_claims(scheduler, written)
    assert not scheduler.cache.devices_unknown(pod.uid)
    assert gpu_holders(scheduler, "n1") == {0: ["default/old"]}
    assert not scheduler.schedule_one(make_pod("koord", nvidia_gpu=1)).scheduled
    add_claims(scheduler, claim("new"))
    assert not scheduler.schedule_one(claim_pod("p", "new")).scheduled


def test_a_pod_asking_in_both_protocols_is_refused() -> None:
    scheduler = scheduler_with(make_node("n1", gpus=1))
    add_claims(scheduler, claim("c"))
    out = scheduler.schedule_one(with_claims(make_pod("both", nvidia_gpu=1), "c"))
    assert out.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "both in Koordinator's resources (nvidia.com/gpu) and through ResourceClaims" in out.status.message


def test_match_attribute_keeps_a_claims_gpus_on_one_pcie_switch() -> None:
    scheduler = scheduler_with(make_node("n1", gpus=8))
    scheduler.cache.add_pod(bound_pod("koord", "n1", gpu_alloc(0), nvidia_gpu=1))
    constraint = [{"matchAttribute": "resource.kubernetes.io/pcieRoot"}]
    add_claims(scheduler, claim("pair", count=2, constraints=constraint))
    assert scheduler.schedule_one(claim_pod("p", "pair")).scheduled
    # GPUs 0,1 share a switch but 0 is taken: the pair is 2,3 (the next switch), not 1 and 2.
    assert results(scheduler, "default/pair") == ["gpu-2", "gpu-3"]


def test_whole_devices_prefer_a_switch_that_holds_them_all() -> None:
    scheduler = scheduler_with(make_node("n1", gpus=8))
    scheduler.cache.add_pod(bound_pod("koord", "n1", gpu_alloc(0), nvidia_gpu=1))
    add_claims(scheduler, claim("pair", count=2))
    assert scheduler.schedule_one(claim_pod("p", "pair")).scheduled
    assert results(scheduler, "default/pair") == ["gpu-2", "gpu-3"]


def test_unreserve_gives_back_the_claims_and_the_gpus() -> None:
    scheduler = scheduler_with(make_node("n1", gpus=1))
    add_claims(scheduler, claim("c"))
    before = gpu_holders(scheduler, "n1")
    framework = scheduler.frameworks[next(iter(scheduler.frameworks))]
    plugin = framework.plugin("DynamicResources")
    from scheduler.cache import PodInfo
    from scheduler.framework.cycle_state import CycleState

    pod = PodInfo.of(claim_pod("p", "c"))
    state = CycleState()
    assert plugin is not None
    _, status = plugin.pre_filter(state, pod)  # type: ignore[attr-defined]
    assert status.is_success
    scheduler.cache.assume(pod, "n1")
    assert plugin.reserve(state, pod, "n1").is_success  # type: ignore[attr-defined]
    assert gpu_holders(scheduler, "n1") == {0: ["default/p"]}
    assert store_of(scheduler).assumed_by("default/c") == pod.ident
    plugin.unreserve(state, pod, "n1")  # type: ignore[attr-defined]
    plugin.unreserve(state, pod, "n1")  # type: ignore[attr-defined]  # idempotent
    scheduler.cache.forget(pod.ident)
    assert gpu_holders(scheduler, "n1") == before
    found = store_of(scheduler).claim("default/c")
    assert found is not None and found.allocation is None and not found.reserved_for


def test_a_newer_claim_from_the_watch_replaces_the_assumption() -> None:
    scheduler = scheduler_with(make_node("n1", gpus=2))
    add_claims(scheduler, claim("c", rv="1"))
    assert scheduler.schedule_one(claim_pod("p", "c")).scheduled
    store = store_of(scheduler)
    assumed = store.claim("default/c")
    assert assumed is not None and assumed.allocation is not None
    # The watch shows our write (resourceVersion 2): that is what counts now.
    written = dataclasses.replace(assumed, meta=dataclasses.replace(assumed.meta, resource_version="2"))
    add_claims(scheduler, written)
    assert store.assumed_by("default/c") is None
    assert results(scheduler, "default/c") == [r.device for r in assumed.allocation.results]


def test_a_gang_with_claims_is_placed_all_or_nothing() -> None:
    def member(name: str, claim_name: str) -> Pod:
        gang = {names.ANNOTATION_GANG_NAME: "train", names.ANNOTATION_GANG_MIN_AVAILABLE: "2"}
        return with_claims(make_pod(name, annotations=gang), claim_name)

    scheduler = scheduler_with(make_node("n1", gpus=1))
    add_claims(scheduler, claim("w0-gpu"), claim("w1-gpu"))
    pods = [member("w0", "w0-gpu"), member("w1", "w1-gpu")]
    out = schedule_all(scheduler, pods, now=FOREVER)
    # One GPU for two members: the first waited at Permit holding it, then gave it back.
    assert nodes_of(out) == {"default/w0": None, "default/w1": None}
    for key in ("default/w0-gpu", "default/w1-gpu"):
        found = store_of(scheduler).claim(key)
        assert found is not None and found.allocation is None
    assert gpu_holders(scheduler, "n1") == {}
    # With a GPU each, the gang is placed whole, each claim on its own GPU.
    scheduler = scheduler_with(make_node("n1", gpus=2))
    add_claims(scheduler, claim("w0-gpu"), claim("w1-gpu"))
    out = schedule_all(scheduler, [member("w0", "w0-gpu"), member("w1", "w1-gpu")])
    assert nodes_of(out) == {"default/w0": "n1", "default/w1": "n1"}
    assert sorted(results(scheduler, "default/w0-gpu") + results(scheduler, "default/w1-gpu")) == ["gpu-0", "gpu-1"]


def _plugin(scheduler: Scheduler) -> DynamicResources:
    plugin = next(iter(scheduler.frameworks.values())).plugin(NAME)
    assert isinstance(plugin, DynamicResources)
    return plugin


def test_nodes_alike_share_one_allocator_run_and_each_reason_names_its_node() -> None:
    scheduler = scheduler_with(*(make_node(f"n{i}", gpus=2) for i in range(1, 4)))
    add_claims(scheduler, claim("big", f"{MINOR} >= 1", count=2))
    out = scheduler.schedule_one(claim_pod("p", "big"))
    assert not out.scheduled
    assert _plugin(scheduler).allocator_runs == 1  # GPU UUIDs differ: identities, left out
    for node in ("n1", "n2", "n3"):
        assert f"1 of 2 on node {node} fit" in out.diagnosis.node_statuses[node].message


def test_a_node_used_otherwise_or_a_selector_reading_identities_is_not_shared() -> None:
    scheduler = scheduler_with(*(make_node(f"n{i}", gpus=2) for i in range(1, 4)))
    scheduler.cache.add_pod(bound_pod("koord-0", "n1", gpu_alloc(0, 100), nvidia_gpu=1))
    add_claims(scheduler, claim("one", count=2))
    out = scheduler.schedule_one(claim_pod("p", "one"))
    assert out.scheduled and out.node != "n1"
    assert "1 of 2 on node n1 fit (1 not enough capacity cores)" in out.diagnosis.node_statuses["n1"].message
    assert _plugin(scheduler).allocator_runs == 2  # n1, then n2 for n2 and n3
    # A selector naming one GPU's UUID selects it on its node only, though n2 and n3 are alike.
    free = "n3" if out.node == "n2" else "n2"
    uuid = f'device.attributes["{gpus.DRIVER}"].uuid == "GPU-{free}-01"'
    add_claims(scheduler, claim("by-uuid", uuid))
    out = scheduler.schedule_one(claim_pod("q", "by-uuid"))
    assert out.node == free and results(scheduler, "default/by-uuid") == ["gpu-1"], out.status.message
