"""ClusterCache when a bound pod's devices were not decided by the scheduler, or are lost to an edit:

- a garbled or removed `device-allocated` annotation keeps the pod's last valid allocation counted;
- a pod first seen without a readable allocation (after a restart) holds unknown devices;
- holdings that exceed a device (a pre-bound pod, an edit) make it over-committed, said with
  the holders and the totals.
"""

from __future__ import annotations

import dataclasses

import pytest

from apis.crds.device import DeviceType
from apis.extension import allocation, devicetypes, names
from apis.extension.allocation import DeviceAllocation, VFAllocation
from apis.k8s.core import Pod
from apis.k8s.meta import ObjectMeta
from scheduler.cache import ClusterCache, PodInfo
from tests.support.builders import bound_pod, gpu_alloc, make_node, make_pod
from tests.support.scheduling import make_cache

GARBAGE = "{garbage"


def annotated(pod: Pod, value: str | None) -> Pod:
    """The pod with its device-allocated annotation set to `value` (None: removed), as a user edits it."""
    annotations = dict(pod.annotations)
    if value is None:
        annotations.pop(names.ANNOTATION_DEVICE_ALLOCATED, None)
    else:
        annotations[names.ANNOTATION_DEVICE_ALLOCATED] = value
    meta: ObjectMeta = dataclasses.replace(pod.meta, annotations=annotations)
    return dataclasses.replace(pod, meta=meta)


def holders(cache: ClusterCache, node: str = "n1") -> dict[int, list[str]]:
    """GPU minor -> pods holding it."""
    return {
        u.minor: [h.pod for h in u.holders] for u in cache.device_usage(node) if u.type is DeviceType.GPU and u.holders
    }


def core_used(cache: ClusterCache, node: str = "n1") -> dict[int, int]:
    return {u.minor: u.used.get(names.GPU_CORE, 0) for u in cache.device_usage(node) if u.used}


def info(cache: ClusterCache, pod: Pod) -> PodInfo:
    found = cache.pod_info(pod.uid)
    assert found is not None
    return found


def share(name: str, node: str, *allocs: DeviceAllocation, percent: int = 50) -> Pod:
    return bound_pod(name, node, *allocs, gpu_core=percent, gpu_ratio=percent)


def test_a_garbled_edit_keeps_the_last_valid_allocation_counted() -> None:
    cache = make_cache(make_node("n1"))
    pod = share("frac", "n1", gpu_alloc(0, 50))
    cache.add_pod(pod)
    cache.update_pod(annotated(pod, GARBAGE))
    assert holders(cache) == {0: ["default/frac"]}
    kept = info(cache, pod)
    assert "not valid JSON" in kept.allocation_error
    assert kept.allocations == {DeviceType.GPU: (gpu_alloc(0, 50),)}
    # The informer delivers the garbled version again: still counted, once.
    cache.update_pod(annotated(pod, GARBAGE))
    assert core_used(cache) == {0: 50}
    # A valid edit is the pod's allocation from then on.
    cache.update_pod(annotated(pod, allocation.encode({DeviceType.GPU: (gpu_alloc(2, 50),)})))
    assert holders(cache) == {2: ["default/frac"]}
    assert info(cache, pod).allocation_error == ""


def test_a_removed_annotation_keeps_the_last_valid_allocation_counted() -> None:
    cache = make_cache(make_node("n1"))
    pod = share("frac", "n1", gpu_alloc(1, 50))
    cache.add_pod(pod)
    cache.update_pod(annotated(pod, None))
    assert holders(cache) == {1: ["default/frac"]}
    assert "removed from a bound pod" in info(cache, pod).allocation_error
    cache.remove_pod(pod)
    assert holders(cache) == {}


@pytest.mark.parametrize("dtype", list(DeviceType), ids=lambda t: t.value)
def test_a_bound_pod_without_an_allocation_holds_unknown_devices_of_each_type_it_asks(dtype: DeviceType) -> None:
    # Which type a resource name asks for is the device type table's: never a GPU by default.
    row = devicetypes.spec(dtype)
    asks = {names.GPU_CORE: 50, names.GPU_MEMORY_RATIO: 50} if dtype is DeviceType.GPU else {row.percent_resource: 1}
    cache = make_cache(make_node("n1"))
    cache.add_pod(make_pod("user", node="n1", extra=asks))
    devices = cache.node("n1").devices  # type: ignore[union-attr]  # the node exists
    assert {t: devices.unknown_holders(t) for t in DeviceType if devices.unknown_holders(t)} == {
        dtype: ("default/user",)
    }


def test_a_pod_first_seen_without_a_readable_allocation_holds_unknown_devices() -> None:
    cache = make_cache(make_node("n1"))
    garbled = annotated(make_pod("frac", node="n1", gpu_core=50, gpu_ratio=50), GARBAGE)
    missing = make_pod("rdma-user", node="n1", rdma=1)
    cache.add_pod(garbled)
    cache.add_pod(missing)
    devices = cache.node("n1").devices  # type: ignore[union-attr]  # the node exists
    assert devices.unknown_holders(DeviceType.GPU) == ("default/frac",)
    assert devices.unknown_holders(DeviceType.RDMA) == ("default/rdma-user",)
    assert "missing on a bound pod that asks for devices" in info(cache, missing).allocation_error
    # Fixed: counted as the annotation says, no longer unknown.
    cache.update_pod(annotated(garbled, allocation.encode({DeviceType.GPU: (gpu_alloc(3, 50),)})))
    assert devices.unknown_holders(DeviceType.GPU) == ()
    assert holders(cache) == {3: ["default/frac"]}
    cache.remove_pod(missing)
    assert not devices.has_unknown()


def test_a_garbled_annotation_on_a_pod_without_device_requests_blocks_nothing() -> None:
    cache = make_cache(make_node("n1"))
    cache.add_pod(annotated(make_pod("cpu", node="n1", cpu=1000), GARBAGE))
    devices = cache.node("n1").devices  # type: ignore[union-attr]  # the node exists
    assert not devices.has_unknown()


def test_holdings_beyond_a_device_make_it_over_committed_until_one_goes() -> None:
    cache = make_cache(make_node("n1"))
    half = share("infer-half-a", "n1", gpu_alloc(0, 50))
    whole = share("intruder", "n1", gpu_alloc(0, 100), percent=100)
    cache.add_pod(half)
    cache.add_pod(whole)
    (over,) = cache.overcommits("n1")
    assert (over.type, over.minor, over.pods) == (DeviceType.GPU, 0, ("default/infer-half-a", "default/intruder"))
    assert over.exceeded[names.GPU_CORE] == (150, 100)
    assert over.describe() == (
        "gpu 0 is over-committed: gpu-core 150/100, gpu-memory 120Gi/80Gi, gpu-memory-ratio 150/100; "
        "held by default/infer-half-a, default/intruder"
    )
    assert cache.overcommitted_devices() == {"n1": 1}
    assert [u.overcommitted for u in cache.device_usage("n1") if u.type is DeviceType.GPU][:2] == [True, False]
    cache.remove_pod(whole)
    assert cache.overcommits("n1") == ()
    assert cache.overcommitted_devices() == {}


def test_a_pod_on_a_gpu_that_turned_unhealthy_is_not_over_committed() -> None:
    node, device = make_node("n1", unhealthy_gpus=frozenset({0}))
    cache = make_cache((node, device))
    cache.add_pod(share("a", "n1", gpu_alloc(0, 100), percent=100))
    assert cache.overcommits("n1") == ()


def test_a_vf_held_twice_is_over_committed_and_stays_held_until_both_let_go() -> None:
    cache = make_cache(make_node("n1"))
    vf = VFAllocation(minor=0, bus_id="0000:1f:00.1")
    nic = DeviceAllocation(minor=0, resources={names.RDMA: 1}, vfs=(vf,))
    first = bound_pod("first", "n1", nic, dtype=DeviceType.RDMA, rdma=1)
    second = bound_pod("second", "n1", nic, dtype=DeviceType.RDMA, rdma=1)
    cache.add_pod(first)
    cache.add_pod(second)
    (over,) = cache.overcommits("n1")
    assert (over.type, over.minor, over.shared_vfs) == (DeviceType.RDMA, 0, ("0000:1f:00.1",))
    cache.remove_pod(second)
    state = cache.node("n1").devices.state(DeviceType.RDMA, 0)  # type: ignore[union-attr]  # the node exists
    assert state is not None and state.used_vfs == {"0000:1f:00.1": first.uid}
    assert cache.overcommits("n1") == ()


def test_unreserve_after_the_informer_confirmed_the_pod_keeps_its_devices() -> None:
    cache = make_cache(make_node("n1"))
    pending = make_pod("p", gpu_core=50, gpu_ratio=50)
    pod = PodInfo.of(pending)
    cache.assume(pod, "n1")
    cache.reserve_devices(pod, "n1", {DeviceType.GPU: (gpu_alloc(4, 50),)})
    cache.add_pod(share("p", "n1", gpu_alloc(4, 50)))
    cache.release_devices(pod.ident, "n1")
    cache.forget(pod.ident)
    assert holders(cache) == {4: ["default/p"]}
