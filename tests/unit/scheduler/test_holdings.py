"""Holdings sources: the cache learns what a bound pod holds from records it does not own.

A source that keeps its record in another object (as a ResourceClaim's `status.allocation`
will) is the case the seam exists for: here `ClaimStore`, a source fed by its owner, whose
records change without the pod changing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pytest

from apis.crds.device import DeviceType
from apis.errors import TesseraError
from apis.extension import allocation, names
from apis.k8s.core import Pod
from scheduler.cache import CacheSnapshot, ClusterCache, Held, Holdings, HoldingsSource
from tests.support.builders import bound_pod, gpu_alloc, make_node, make_pod
from tests.support.scheduling import make_cache


class ClaimStore(HoldingsSource):
    """Devices per pod key, kept outside the pod (a claim's status); fed by the test."""

    name = "claims"

    def __init__(self, records: Mapping[str, object] | None = None) -> None:
        self.records: dict[str, object] = dict(records or {})

    def read(self, pod: Pod) -> Held | None:
        record = self.records.get(pod.key)
        if record is None:
            return None
        if not isinstance(record, Held):
            raise TesseraError(f"pod {pod.key}: claims: {record}")
        return record

    def expects(self, pod: Pod, requests: Mapping[str, int]) -> frozenset[DeviceType]:
        return frozenset({DeviceType.GPU}) if pod.labels.get("claims") else frozenset()

    def copy(self) -> ClaimStore:
        return ClaimStore(self.records)


def gpus(cache: ClusterCache, node: str = "n1") -> dict[int, list[str]]:
    return {
        u.minor: [h.pod for h in u.holders] for u in cache.device_usage(node) if u.type is DeviceType.GPU and u.holders
    }


def test_a_second_source_counts_what_its_record_says_and_the_refresh_after_it_changes() -> None:
    store = ClaimStore()
    cache = make_cache(make_node("n1"))
    cache.holdings.add(store)
    pod = bound_on("n1", make_pod("claimer", labels={"claims": "yes"}))
    store.records[pod.key] = Held({DeviceType.GPU: (gpu_alloc(3),)})
    cache.add_pod(pod)
    assert gpus(cache) == {3: ["default/claimer"]}
    # The claim's status is rewritten; the pod itself does not change.
    store.records[pod.key] = Held({DeviceType.GPU: (gpu_alloc(5),)})
    assert gpus(cache) == {3: ["default/claimer"]}
    cache.refresh_holdings(pod.uid)
    assert gpus(cache) == {5: ["default/claimer"]}


def test_records_of_two_sources_add_up() -> None:
    store = ClaimStore()
    cache = make_cache(make_node("n1"))
    cache.holdings.add(store)
    pod = bound_pod("both", "n1", gpu_alloc(0, 50), gpu_core=50, gpu_ratio=50)
    store.records[pod.key] = Held({DeviceType.GPU: (gpu_alloc(1),)})
    cache.add_pod(pod)
    assert gpus(cache) == {0: ["default/both"], 1: ["default/both"]}


def test_an_unreadable_record_keeps_the_last_valid_one_counted_and_says_why() -> None:
    store = ClaimStore()
    cache = make_cache(make_node("n1"))
    cache.holdings.add(store)
    pod = bound_on("n1", make_pod("claimer", labels={"claims": "yes"}))
    store.records[pod.key] = Held({DeviceType.GPU: (gpu_alloc(2),)})
    cache.add_pod(pod)
    store.records[pod.key] = "allocation.devices[0]: no such device"
    cache.refresh_holdings(pod.uid)
    info = cache.pod_info(pod.uid)
    assert info is not None and "claims: allocation.devices[0]: no such device" in info.allocation_error
    assert gpus(cache) == {2: ["default/claimer"]}


def test_a_pod_its_source_expects_a_record_of_holds_unknown_devices_without_one() -> None:
    cache = make_cache(make_node("n1"))
    cache.holdings.add(ClaimStore())
    pod = bound_on("n1", make_pod("claimer", labels={"claims": "yes"}))
    cache.add_pod(pod)
    assert cache.devices_unknown(pod.uid)
    info = cache.pod_info(pod.uid)
    assert info is not None
    assert info.allocation_error == "pod default/claimer: claims: missing on a bound pod that asks for devices"


def test_a_snapshot_reads_with_its_own_copy_of_the_sources() -> None:
    store = ClaimStore()
    cache = make_cache(make_node("n1"))
    cache.holdings.add(store)
    pod = bound_on("n1", make_pod("claimer", labels={"claims": "yes"}))
    store.records[pod.key] = Held({DeviceType.GPU: (gpu_alloc(4),)})
    cache.add_pod(pod)
    copy = CacheSnapshot.of(cache).restore()
    store.records[pod.key] = Held({DeviceType.GPU: (gpu_alloc(6),)})  # the live store moves on
    assert gpus(copy) == {4: ["default/claimer"]}
    copy.refresh_holdings(pod.uid)
    assert gpus(copy) == {4: ["default/claimer"]}


def test_the_sources_say_which_annotations_are_records() -> None:
    holdings = Holdings()
    assert holdings.annotations == {names.ANNOTATION_DEVICE_ALLOCATED}
    holdings.add(ClaimStore())
    holdings.add(ClaimStore())  # every profile's plugin adds its own: once is enough
    assert [s.name for s in holdings.sources] == [names.ANNOTATION_DEVICE_ALLOCATED, "claims"]
    assert holdings.annotations == {names.ANNOTATION_DEVICE_ALLOCATED}  # claims keep theirs elsewhere
    stale = allocation.encode({DeviceType.GPU: (gpu_alloc(7),)})
    pending = make_pod("p", annotations={names.ANNOTATION_DEVICE_ALLOCATED: stale})
    assert holdings.carried(pending) == {names.ANNOTATION_DEVICE_ALLOCATED}
    assert holdings.carried(make_pod("q")) == frozenset()

    class Impostor(HoldingsSource):
        name = "claims"

        def read(self, pod: Pod) -> Held | None:
            return None

    with pytest.raises(ValueError, match="two holdings sources named 'claims'"):
        holdings.add(Impostor())


def bound_on(node: str, pod: Pod) -> Pod:
    return dataclasses.replace(pod, node_name=node, phase="Running")
