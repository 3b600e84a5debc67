"""Never double-book a device: a stateful property over the pure core (offline `Scheduler` + cache).

Random sequences of what happens to a cluster, most of it behind the scheduler's back:

- new pending pods (a share of one GPU, GPU memory alone, whole GPUs, a GPU with an RDMA VF)
  scheduled in memory;
- pods created already bound (`spec.nodeName`) with an allocation of their own (all of a
  GPU's resources, or gpu-core alone), colliding or not;
- users editing a bound pod's `device-allocated` annotation: a valid new allocation, garbage,
  or removed;
- pods deleted; GPUs failing and recovering (Device CR health);
- scheduler restarts: a new cache built from the same objects, in a random order.

The model keeps the truth: what each pod really holds — its last valid allocation (a valid edit
moves the claim, a garbled or removed one does not), which is what its containers were given.
After every step:

- no new placement takes a device beyond its capacity, or a VF someone holds, or an unhealthy
  device: an over-commit can only come from a bypass, only on the devices that bypass hit, and
  nothing new lands there;
- a bound pod's devices stay counted while it exists: the cache holds its true allocation, or —
  only after a restart found its annotation unreadable — knows that its devices are unknown.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from apis.crds.device import Device, DeviceInfo, DeviceType
from apis.errors import AnnotationError
from apis.extension import allocation, names
from apis.extension.allocation import DeviceAllocation, VFAllocation
from apis.k8s.core import Node, Pod
from apis.k8s.meta import ObjectMeta
from scheduler.cache import ClusterCache
from scheduler.core import Scheduler
from scheduler.simulation.cluster import GIB
from tests.support.builders import make_node, make_pod

Allocations = Mapping[DeviceType, tuple[DeviceAllocation, ...]]
#: (node, device type, minor)
DeviceKey = tuple[str, DeviceType, int]

GARBAGE = "{garbage"
KINDS = ("share", "memory", "whole", "gpu+rdma")
EDITS = ("valid", "garbled", "removed")


def with_annotation(pod: Pod, value: str | None) -> Pod:
    annotations = dict(pod.annotations)
    if value is None:
        annotations.pop(names.ANNOTATION_DEVICE_ALLOCATED, None)
    else:
        annotations[names.ANNOTATION_DEVICE_ALLOCATED] = value
    meta: ObjectMeta = dataclasses.replace(pod.meta, annotations=annotations)
    return dataclasses.replace(pod, meta=meta)


def shape(allocs: Allocations) -> dict[DeviceType, list[tuple[int, dict[str, int], tuple[str, ...]]]]:
    """An allocation compared by what it takes: minors, amounts and VFs (not IDs)."""
    return {
        t: sorted((a.minor, dict(a.resources), tuple(sorted(v.bus_id for v in a.vfs))) for a in entries)
        for t, entries in allocs.items()
        if entries
    }


class DoubleBooking(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.nodes: dict[str, Node] = {}
        self.devices: dict[str, Device] = {}
        for node, device in (make_node("n0", gpus=2, numa_nodes=1, vfs_per_nic=2), make_node("n1", gpus=1)):
            self.nodes[node.name] = node
            self.devices[node.name] = device
        #: Bound pods as the API server has them, by name.
        self.pods: dict[str, Pod] = {}
        #: What each bound pod really holds: its last valid allocation.
        self.truth: dict[str, Allocations] = {}
        #: Devices a bypass (a pre-bound pod, a valid edit) claimed: only they may be over-committed.
        self.bypassed: set[DeviceKey] = set()
        #: Pods a restart found without a readable annotation: the cache may only know them as unknown.
        self.unknown_since_restart: set[str] = set()
        self.serial = 0
        self.scheduler = Scheduler()
        self._load(list(self.nodes.values()) + list(self.devices.values()))

    # --- the cluster ---------------------------------------------------------------------------------
    @property
    def cache(self) -> ClusterCache:
        return self.scheduler.cache

    def _load(self, objects: Sequence[Node | Device | Pod]) -> None:
        for obj in objects:
            if isinstance(obj, Node):
                self.cache.add_node(obj)
            elif isinstance(obj, Device):
                self.cache.add_device(obj)
            else:
                self.cache.add_pod(obj)

    def _name(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}-{self.serial}"

    def _info(self, key: DeviceKey) -> DeviceInfo:
        node, dtype, minor = key
        return next(d for d in self.devices[node].devices if d.type is dtype and d.minor == minor)

    def _held(self) -> tuple[dict[DeviceKey, dict[str, int]], dict[DeviceKey, set[str]]]:
        """By the truth: amounts used and VFs held per device."""
        used: dict[DeviceKey, dict[str, int]] = {}
        vfs: dict[DeviceKey, set[str]] = {}
        for name, allocs in self.truth.items():
            node = self.pods[name].node_name
            for dtype, entries in allocs.items():
                for a in entries:
                    key = (node, dtype, a.minor)
                    amounts = used.setdefault(key, {})
                    for resource, amount in a.resources.items():
                        amounts[resource] = amounts.get(resource, 0) + amount
                    vfs.setdefault(key, set()).update(v.bus_id for v in a.vfs)
        return used, vfs

    def _claim(self, data: st.DataObject, node: str, types: tuple[DeviceType, ...]) -> Allocations:
        """A random allocation on `node`, as a person would write it: any device, any amount."""
        out: dict[DeviceType, tuple[DeviceAllocation, ...]] = {}
        for dtype in types:
            infos = self.devices[node].of_type(dtype)
            info = data.draw(st.sampled_from(infos))
            if dtype is DeviceType.GPU:
                percent = data.draw(st.sampled_from([10, 30, 50, 70, 100]))
                memory = info.resources[names.GPU_MEMORY] * percent // 100
                amounts = {names.GPU_CORE: percent, names.GPU_MEMORY_RATIO: percent, names.GPU_MEMORY: memory}
                if data.draw(st.booleans()):  # hand-written: gpu-core alone
                    amounts = {names.GPU_CORE: percent}
                out[dtype] = (DeviceAllocation(info.minor, amounts, info.id),)
            else:
                vf = data.draw(st.sampled_from([v for g in info.vf_groups for v in g.vfs]))
                out[dtype] = (
                    DeviceAllocation(info.minor, {names.RDMA: 1}, info.id, (VFAllocation(vf.minor, vf.bus_id),)),
                )
        return out

    # --- what happens ---------------------------------------------------------------------------------
    @rule(kind=st.sampled_from(KINDS), tenths=st.integers(1, 10), count=st.integers(1, 2))
    def schedule_a_new_pod(self, kind: str, tenths: int, count: int) -> None:
        name = self._name(kind.replace("+", "-"))
        if kind == "share":
            pod = make_pod(name, gpu_core=tenths * 10, gpu_ratio=tenths * 10)
        elif kind == "memory":
            pod = make_pod(name, gpu_memory=tenths * 8 * GIB)
        elif kind == "whole":
            pod = make_pod(name, nvidia_gpu=count)
        else:
            pod = make_pod(name, nvidia_gpu=1, rdma=1)
        used, vfs = self._held()
        outcome = self.scheduler.schedule_one(pod)
        if not outcome.scheduled:
            return
        assert outcome.node is not None
        bound = dataclasses.replace(
            with_annotation(pod, outcome.annotations.get(names.ANNOTATION_DEVICE_ALLOCATED)),
            node_name=outcome.node,
            phase="Running",
        )
        got = allocation.from_pod_annotations(bound.annotations)
        for dtype, entries in got.items():
            for a in entries:
                key = (outcome.node, dtype, a.minor)
                info = self._info(key)
                assert info.health, f"{name} got unhealthy {key}"
                before = used.get(key, {})
                over = {r: n for r, n in before.items() if n > info.resources.get(r, 0)}
                assert not over, f"{name} landed on over-committed {key}: {over}"
                for resource, amount in a.resources.items():
                    total = used.get(key, {}).get(resource, 0) + amount
                    assert total <= info.resources.get(resource, 0), f"{name} takes {key} to {resource}={total}"
                for vf in a.vfs:
                    assert vf.bus_id not in vfs.get(key, set()), f"{name} got VF {vf.bus_id} of {key}, held already"
        self.pods[name] = bound
        self.truth[name] = got

    @rule(data=st.data(), node=st.sampled_from(["n0", "n1"]), rdma=st.booleans())
    def create_a_pre_bound_pod(self, data: st.DataObject, node: str, rdma: bool) -> None:
        types = (DeviceType.GPU, DeviceType.RDMA) if rdma else (DeviceType.GPU,)
        claim = self._claim(data, node, types)
        gpu = claim[DeviceType.GPU][0].resources[names.GPU_CORE]
        extra = {names.RDMA: 1} if DeviceType.RDMA in claim else {}
        name = self._name("pre-bound")
        pod = make_pod(
            name,
            node=node,
            annotations={names.ANNOTATION_DEVICE_ALLOCATED: allocation.encode(claim)},
            extra=extra,
            gpu_core=gpu,
            gpu_ratio=gpu,
        )
        self.cache.add_pod(pod)
        self.pods[name] = pod
        self.truth[name] = claim
        self.bypassed |= {(node, t, a.minor) for t, entries in claim.items() for a in entries}

    @precondition(lambda self: self.pods)
    @rule(data=st.data(), edit=st.sampled_from(EDITS))
    def edit_a_bound_pods_annotation(self, data: st.DataObject, edit: str) -> None:
        name = data.draw(st.sampled_from(sorted(self.pods)))
        pod = self.pods[name]
        if edit == "valid":
            types = tuple(self.truth[name]) or (DeviceType.GPU,)
            claim = self._claim(data, pod.node_name, types)
            edited = with_annotation(pod, allocation.encode(claim))
            self.truth[name] = claim
            self.bypassed |= {(pod.node_name, t, a.minor) for t, entries in claim.items() for a in entries}
            self.unknown_since_restart.discard(name)
        else:
            edited = with_annotation(pod, GARBAGE if edit == "garbled" else None)
        self.cache.update_pod(edited)
        self.pods[name] = edited

    @precondition(lambda self: self.pods)
    @rule(data=st.data())
    def delete_a_pod(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.pods)))
        self.cache.remove_pod(self.pods.pop(name))
        self.truth.pop(name, None)
        self.unknown_since_restart.discard(name)

    @rule(node=st.sampled_from(["n0", "n1"]), minor=st.integers(0, 1), healthy=st.booleans())
    def a_gpu_fails_or_recovers(self, node: str, minor: int, healthy: bool) -> None:
        device = self.devices[node]
        infos = tuple(
            dataclasses.replace(d, health=healthy) if d.type is DeviceType.GPU and d.minor == minor else d
            for d in device.devices
        )
        self.devices[node] = dataclasses.replace(device, devices=infos)
        self.cache.update_device(self.devices[node])

    @rule(data=st.data())
    def restart_the_scheduler(self, data: st.DataObject) -> None:
        objects: list[Node | Device | Pod] = [*self.nodes.values(), *self.devices.values(), *self.pods.values()]
        self.scheduler = Scheduler()
        self._load(data.draw(st.permutations(objects)))
        for name, pod in self.pods.items():
            try:
                readable = bool(allocation.from_pod_annotations(pod.annotations))
            except AnnotationError:
                readable = False
            if self.truth.get(name) and not readable:
                self.unknown_since_restart.add(name)

    # --- what must hold ------------------------------------------------------------------------------
    @invariant()
    def a_bound_pods_devices_stay_counted(self) -> None:
        for name, pod in self.pods.items():
            truth = self.truth.get(name)
            if not truth:
                continue
            info = self.cache.node(pod.node_name)
            assert info is not None
            holding = info.devices.holdings.get(pod.uid)
            if name in self.unknown_since_restart:
                assert holding is None and self.cache.devices_unknown(pod.uid), f"{name}: neither counted nor unknown"
            else:
                assert holding is not None, f"{name}: its devices are no longer counted"
                assert shape(holding.allocations) == shape(truth), f"{name}: counted as something else"

    @invariant()
    def only_bypassed_devices_are_over_committed(self) -> None:
        used, _ = self._held()
        for key, amounts in used.items():
            capacity = self._info(key).resources
            if any(amount > capacity.get(resource, 0) for resource, amount in amounts.items()):
                assert key in self.bypassed, f"{key} over-committed without a bypass: {amounts}"


# 100 sequences of 40 steps take about 3 s; they find each of the bugs above (checked by undoing
# each fix in turn), though shrinking such a failure takes minutes.
DoubleBooking.TestCase.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)
test_double_booking = DoubleBooking.TestCase
