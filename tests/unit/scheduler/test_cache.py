"""ClusterCache and NodeDevices: sums, device holdings, assume/confirm/forget, bad input."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from apis.crds.device import DeviceType
from apis.errors import InvalidRequestError
from apis.extension import names
from apis.extension.devicerequest import pod_device_requests
from apis.k8s.core import Taint
from scheduler.cache import ClusterCache, NodeInfo, PodInfo
from scheduler.simulation.cluster import GIB
from tests.support.builders import GPU_MEMORY, bound_pod, gpu_alloc, make_node, make_pod
from tests.support.scheduling import make_cache


def node_of(cache: ClusterCache, name: str = "n1") -> NodeInfo:
    info = cache.node(name)
    assert info is not None
    return info


def gpu_used(cache: ClusterCache, node: str) -> dict[int, int]:
    """minor -> gpu-core used, for GPUs with any use."""
    return {
        u.minor: u.used.get(names.GPU_CORE, 0) for u in cache.device_usage(node) if u.type is DeviceType.GPU and u.used
    }


def test_bound_pods_are_summed_and_their_devices_held() -> None:
    cache = make_cache(make_node("n1"))
    cache.add_pod(bound_pod("a", "n1", gpu_alloc(0, 50), cpu=2000, memory=GIB))
    cache.add_pod(bound_pod("b", "n1", gpu_alloc(0, 25), gpu_alloc(3, 100), cpu=1000))
    info = cache.node("n1")
    assert info is not None
    assert info.requested[names.CPU] == 3000
    assert info.requested[names.MEMORY] == GIB
    assert gpu_used(cache, "n1") == {0: 75, 3: 100}
    holders = {u.minor: [h.pod for h in u.holders] for u in cache.device_usage("n1") if u.holders}
    assert holders == {0: ["default/a", "default/b"], 3: ["default/b"]}


def test_update_and_remove_restore_the_sums_exactly() -> None:
    cache = make_cache(make_node("n1"))
    pod = bound_pod("a", "n1", gpu_alloc(1, 50), cpu=2000)
    cache.add_pod(pod)
    cache.add_pod(pod)  # the informer delivers the same pod again: counted once
    assert gpu_used(cache, "n1") == {1: 50}
    moved = bound_pod("a", "n1", gpu_alloc(2, 30), cpu=500)
    cache.update_pod(moved)
    assert gpu_used(cache, "n1") == {2: 30}
    assert node_of(cache).requested == {names.CPU: 500}
    cache.remove_pod(moved)
    cache.remove_pod(moved)
    assert gpu_used(cache, "n1") == {}
    assert node_of(cache).requested == {}
    assert node_of(cache).non_zero_requested == [0, 0]


def test_terminal_pods_hold_nothing() -> None:
    cache = make_cache(make_node("n1"))
    pod = bound_pod("a", "n1", gpu_alloc(0), cpu=1000)
    cache.add_pod(pod)
    cache.update_pod(dataclasses.replace(pod, phase="Succeeded"))
    assert gpu_used(cache, "n1") == {}
    assert node_of(cache).requested == {}


def test_malformed_annotation_is_recorded_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    cache = make_cache(make_node("n1"))
    pod = make_pod("broken", node="n1", annotations={names.ANNOTATION_DEVICE_ALLOCATED: "{not json"}, cpu=1000)
    with caplog.at_level(logging.WARNING):
        cache.add_pod(pod)
    info = cache.pod_info(pod.uid)
    assert info is not None and "not valid JSON" in info.allocation_error
    assert cache.pod_info("uid-of-no-pod") is None
    assert node_of(cache).requested[names.CPU] == 1000
    assert gpu_used(cache, "n1") == {}
    assert any(r.getMessage() == "Ignoring malformed device allocation" for r in caplog.records)


def test_device_requests_are_parsed_once_on_first_use() -> None:
    pod = make_pod("p", gpu_core=50, gpu_ratio=50, rdma=1, cpu=1000)
    info = PodInfo.of(pod)
    assert info.device_requests == pod_device_requests(pod)
    assert info.request_error is None
    assert info.device_requests is info.device_requests  # the memo, not a second parse
    assert info == PodInfo.of(pod)  # the memo is no part of the value
    assert PodInfo.of(make_pod("cpu-only", cpu=1000)).device_requests == {}


def test_invalid_device_request_is_recorded_as_the_rules_reject_it() -> None:
    pod = make_pod("bad", gpu_core=150, cpu=1000)
    with pytest.raises(InvalidRequestError) as rejected:
        pod_device_requests(pod)
    info = PodInfo.of(pod)
    assert info.device_requests == {}
    assert info.request_error is not None
    assert str(info.request_error) == str(rejected.value)
    assert info.request_error.resources == rejected.value.resources
    assert info.request_error is info.request_error
    assert info.requests[names.CPU] == 1000  # still counts for CPU and memory


def test_device_update_reapplies_holdings_and_unknown_minors_are_kept() -> None:
    node, device = make_node("n1")
    cache = make_cache((node, device))
    cache.add_pod(bound_pod("a", "n1", gpu_alloc(7)))
    fewer = dataclasses.replace(
        device, devices=tuple(d for d in device.devices if d.minor < 4 or d.type.value != "gpu")
    )
    cache.update_device(fewer)
    assert gpu_used(cache, "n1") == {}  # GPU 7 left the inventory
    cache.update_device(device)
    assert gpu_used(cache, "n1") == {7: 100}  # and its holder is counted again when it comes back


def test_pod_before_node_and_device_is_counted_when_they_arrive() -> None:
    cache = ClusterCache()
    cache.add_pod(bound_pod("a", "n1", gpu_alloc(2, 40)))
    assert cache.node("n1") is None  # no Node object yet: not schedulable
    node, device = make_node("n1")
    cache.add_device(device)
    cache.add_node(node)
    assert gpu_used(cache, "n1") == {2: 40}
    assert [n.name for n in cache.nodes()] == ["n1"]


def test_over_commit_is_kept_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    cache = make_cache(make_node("n1"))
    cache.add_pod(bound_pod("a", "n1", gpu_alloc(0, 80)))
    with caplog.at_level(logging.WARNING):
        cache.add_pod(bound_pod("b", "n1", gpu_alloc(0, 80)))
    assert gpu_used(cache, "n1") == {0: 160}
    usage = next(u for u in cache.device_usage("n1") if u.type is DeviceType.GPU and u.minor == 0)
    assert usage.free[names.GPU_CORE] == 0
    assert any(r.getMessage() == "Device accounting problem" for r in caplog.records)


def test_assume_reserve_confirm_and_forget() -> None:
    cache = make_cache(make_node("n1"))
    pod = PodInfo.of(make_pod("p", gpu_core=50, gpu_ratio=50, cpu=1000))
    cache.assume(pod, "n1")
    with pytest.raises(ValueError, match="already in the scheduler cache"):
        cache.assume(pod, "n1")
    cache.reserve_devices(pod, "n1", {DeviceType.GPU: (gpu_alloc(5, 50),)})
    assert cache.is_assumed(pod.ident)
    assert gpu_used(cache, "n1") == {5: 50}
    cache.forget(pod.ident)
    cache.forget(pod.ident)
    assert gpu_used(cache, "n1") == {}
    assert node_of(cache).requested == {}

    cache.assume(pod, "n1")
    cache.reserve_devices(pod, "n1", {DeviceType.GPU: (gpu_alloc(5, 50),)})
    bound = dataclasses.replace(pod.pod, node_name="n1")
    cache.confirm(bound)
    assert not cache.is_assumed(pod.ident)
    cache.forget(pod.ident)  # a confirmed pod is not forgotten
    assert gpu_used(cache, "n1") == {5: 50}


def test_informer_confirmation_without_annotation_keeps_reserved_devices() -> None:
    cache = make_cache(make_node("n1"))
    pod = PodInfo.of(make_pod("p", gpu_core=50, gpu_ratio=50))
    cache.assume(pod, "n1")
    cache.reserve_devices(pod, "n1", {DeviceType.GPU: (gpu_alloc(3, 50),)})
    cache.add_pod(dataclasses.replace(pod.pod, node_name="n1"))
    assert gpu_used(cache, "n1") == {3: 50}


def test_assumed_pods_expire_after_binding_finished() -> None:
    cache = ClusterCache(assumed_ttl=10)
    cache.add_node(make_node("n1")[0])
    pod = PodInfo.of(make_pod("p", cpu=100))
    cache.assume(pod, "n1")
    assert cache.cleanup_expired(now=1000) == []  # binding not finished: never expires
    cache.finish_binding(pod.ident, now=100)
    assert cache.cleanup_expired(now=105) == []
    assert cache.cleanup_expired(now=110) == [pod.ident]
    assert node_of(cache).pods == {}


def test_generations_and_change_feed() -> None:
    cache = make_cache(make_node("n1"), make_node("n2"))
    cursor, _ = cache.changes_since(0)
    n1 = cache.node("n1")
    assert n1 is not None
    before, before_devices = n1.generation, n1.device_generation
    cache.assume(PodInfo.of(make_pod("p", cpu=100)), "n1")
    assert n1.generation > before and n1.device_generation == before_devices
    cursor, changed = cache.changes_since(cursor)
    assert changed == ("n1",)
    assert cache.changes_since(cursor) == (cursor, ())


def test_cordon_and_taint_counters() -> None:
    tainted = make_node("n2", taints=[Taint("k", "v", names.TAINT_EFFECT_NO_SCHEDULE)])
    cache = make_cache(make_node("n1", unschedulable=True), tainted)
    assert cache.cordoned_nodes == 1
    assert cache.tainted_nodes(names.TAINT_EFFECT_NO_SCHEDULE) == 1
    cache.update_node(dataclasses.replace(tainted[0], taints=()))
    cache.remove_node("n1")
    assert cache.cordoned_nodes == 0
    assert cache.tainted_nodes(names.TAINT_EFFECT_NO_SCHEDULE) == 0


def test_unhealthy_gpus_offer_nothing() -> None:
    cache = make_cache(make_node("n1", unhealthy_gpus=frozenset({1})))
    usage = {u.minor: u for u in cache.device_usage("n1") if u.type is DeviceType.GPU}
    assert not usage[1].healthy and usage[1].total == {}
    assert usage[0].total[names.GPU_MEMORY] == GPU_MEMORY
