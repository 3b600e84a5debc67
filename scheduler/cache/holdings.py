"""What a bound pod holds, and where the cache learns it: holdings sources.

The scheduler decides which devices a pod gets; once the pod is bound, what it holds is what the
cluster records — so that pods bound before a restart, by another scheduler, or past the
scheduler, hold their devices. A `HoldingsSource` reads one kind of record:

- `DeviceAllocatedAnnotation`: the pod's `scheduling.koordinator.sh/device-allocated`
  annotation (Koordinator's protocol), which DeviceShare writes at PreBind; the default source;
- tomorrow, a ResourceClaim's `status.allocation` (DRA), kept in another object.

`Holdings` is the cache's set of sources. It derives a bound pod's `PodInfo` (the devices it
holds, the types it holds PCIe-exclusively, or why a record cannot be read) from what they say,
says which device types a pod should have a record of (a pod asking for them without one holds
unknown devices), and which pod annotations are records: the binder removes one a pod carries
that its binding did not write (left by an earlier attempt), the reporter one on a pending pod,
so that no annotation ever says a pod holds devices the cache did not give it.

Adding a source (a ResourceClaim's allocation, say):

1. subclass `HoldingsSource`: `name` for messages, `annotations` (the pod annotations that hold
   its record; none for a record kept in another object), `read(pod)` (what the record says, or
   None; raise `AnnotationError`/`TesseraError` naming the record when it is malformed),
   `expects(pod, requests)` (the device types a bound pod must have a record of here), and
   `copy()` when it keeps state of its own (a store of claims; `CacheSnapshot` copies it);
2. give it to the cache: `cache.holdings.add(source)` — from the plugin that owns the protocol,
   in its `new()` (the Handle's cache), before any pod is added;
3. when its record of a pod changes without the pod changing (a claim's status written), call
   `cache.refresh_holdings(ident)`: the cache counts the pod again, as for an edited annotation;
4. the plugin's PreBind writes the record (a `PodWrite`'s annotations, or an `ObjectWrite` with
   its undo: `scheduler.framework.writes`).

Pure: no I/O; a source with state is fed by its owner, under the cache's contract.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Final

from apis.crds.device import DeviceType
from apis.errors import AnnotationError, TesseraError
from apis.extension import allocation, devicetypes, hints, names
from apis.extension.allocation import DeviceAllocation
from apis.k8s.core import Pod
from scheduler.cache.podinfo import PodInfo

__all__ = ["DeviceAllocatedAnnotation", "Held", "Holdings", "HoldingsSource"]

log = logging.getLogger(__name__)

#: Device type -> devices (with the resources of each) a pod holds.
Devices = Mapping[DeviceType, tuple[DeviceAllocation, ...]]
#: What the cache says of a record it no longer reads, or never could.
REMOVED = "removed from a bound pod"
MISSING = "missing on a bound pod that asks for devices"


@dataclass(frozen=True, slots=True)
class Held:
    """What one source's record says a pod holds."""

    devices: Devices = field(default_factory=dict)
    #: Device types the pod holds PCIe-exclusively (no other pod on their PCIe switches).
    pcie_exclusive: frozenset[DeviceType] = frozenset()


class HoldingsSource(abc.ABC):
    """One kind of record of what a bound pod holds. See the module docstring."""

    #: How messages name the record.
    name: ClassVar[str]
    #: The pod annotations that hold the record (the scheduler writes them at PreBind).
    annotations: ClassVar[frozenset[str]] = frozenset()

    @abc.abstractmethod
    def read(self, pod: Pod) -> Held | None:
        """What the pod's record says it holds; None when it has none. Raises TesseraError
        (naming the record and the pod) when the record cannot be read."""

    def expects(self, pod: Pod, requests: Mapping[str, int]) -> frozenset[DeviceType]:
        """Device types a bound pod asks for that this source must have a record of."""
        return frozenset()

    def problem(self, pod: Pod, what: str) -> str:
        """The message for a record that is `what` (`REMOVED`, `MISSING`)."""
        return f"pod {pod.key}: {self.name}: {what}"

    def copy(self) -> HoldingsSource:
        """An independent copy (a source that keeps state of its own copies it)."""
        return self


class DeviceAllocatedAnnotation(HoldingsSource):
    """Koordinator's `device-allocated` annotation, and the `PCIeLevel` exclusive policy of the
    pod's `device-allocate-hint`. A pod asking for a device resource must carry it once bound."""

    name = names.ANNOTATION_DEVICE_ALLOCATED
    annotations = frozenset({names.ANNOTATION_DEVICE_ALLOCATED})

    def read(self, pod: Pod) -> Held | None:
        if names.ANNOTATION_DEVICE_ALLOCATED not in pod.annotations:
            return None
        devices = allocation.from_pod_annotations(pod.annotations, obj=pod.key)
        exclusive: frozenset[DeviceType] = frozenset()
        if devices:
            try:
                pod_hints = hints.hints_from_annotations(pod.annotations, obj=pod.key)
            except AnnotationError as e:
                log.warning("Ignoring malformed device hint", extra={"pod": pod.key, "error": str(e)})
            else:
                exclusive = frozenset(
                    t for t, h in pod_hints.items() if h.exclusive_policy is hints.ExclusivePolicy.PCIE_LEVEL
                )
        return Held(devices, exclusive)

    def expects(self, pod: Pod, requests: Mapping[str, int]) -> frozenset[DeviceType]:
        """Device types a pod asks for, by resource name alone (valid request or not); not those
        the pod's extended-resource claim serves (its `status.extendedResourceClaimStatus`: the
        claim is their record)."""
        by_claim = {m.resource_name for m in pod.extended_resource_requests} if pod.extended_resource_claim else set()
        return frozenset(
            dtype for name, dtype in _TYPE_OF.items() if requests.get(name, 0) > 0 and name not in by_claim
        )

    def problem(self, pod: Pod, what: str) -> str:
        return str(AnnotationError(names.ANNOTATION_DEVICE_ALLOCATED, what, obj=pod.key))


#: Each device resource name (current spelling: pods are parsed) -> the type it asks for.
_TYPE_OF: Final = {name: devicetypes.type_of(name) for name in devicetypes.RESOURCE_NAMES}


class Holdings:
    """The cache's holdings sources (the `device-allocated` annotation unless told otherwise)."""

    __slots__ = ("_annotations", "_sources")

    def __init__(self, sources: Sequence[HoldingsSource] | None = None) -> None:
        self._sources: tuple[HoldingsSource, ...] = ()
        self._annotations: frozenset[str] = frozenset()
        for source in sources if sources is not None else (DeviceAllocatedAnnotation(),):
            self.add(source)

    @property
    def sources(self) -> tuple[HoldingsSource, ...]:
        return self._sources

    @property
    def annotations(self) -> frozenset[str]:
        """Every pod annotation that is a record of what the pod holds."""
        return self._annotations

    def add(self, source: HoldingsSource) -> None:
        """Read `source` too. Idempotent for a source of the same class (every profile's plugin
        adds its own); raises ValueError for another source of the same name."""
        for known in self._sources:
            if type(known) is type(source):
                return
            if known.name == source.name:
                raise ValueError(f"two holdings sources named {source.name!r}")
        self._sources = (*self._sources, source)
        self._annotations = self._annotations | source.annotations

    def copy(self) -> Holdings:
        """Independent of this one (`CacheSnapshot`): each source copied."""
        return Holdings([source.copy() for source in self._sources])

    def info(self, pod: Pod) -> PodInfo:
        """The pod with what its records say it holds. Never raises: a record that cannot be read
        is logged and said in `PodInfo.allocation_error` (then it counts for no devices)."""
        requests = pod.requests()
        sources = self._sources
        if len(sources) == 1:  # the usual case, without merging
            try:
                held = sources[0].read(pod)
            except TesseraError as e:
                return _unreadable(pod, requests, str(e))
            if held is None:
                return PodInfo(pod, requests)
            return PodInfo(pod, requests, held.devices, "", held.pcie_exclusive)
        devices: dict[DeviceType, tuple[DeviceAllocation, ...]] = {}
        exclusive: frozenset[DeviceType] = frozenset()
        errors = []
        for source in sources:
            try:
                found = source.read(pod)
            except TesseraError as e:
                errors.append(str(e))
                continue
            if found is not None:
                for dtype, allocs in found.devices.items():
                    devices[dtype] = devices.get(dtype, ()) + allocs
                exclusive |= found.pcie_exclusive
        if errors:
            return _unreadable(pod, requests, "; ".join(errors))
        return PodInfo(pod, requests, devices, "", exclusive)

    def expected(self, info: PodInfo) -> tuple[frozenset[DeviceType], HoldingsSource | None]:
        """The device types the bound pod should have a record of, and the first source that
        expects one (None when none does)."""
        types: frozenset[DeviceType] = frozenset()
        first = None
        for source in self._sources:
            found = source.expects(info.pod, info.requests)
            if found:
                types |= found
                first = first or source
        return types, first

    def problem(self, info: PodInfo, what: str) -> str:
        """`what` of the record the pod should have (the first expecting source's, else the first's)."""
        source = self.expected(info)[1] or (self._sources[0] if self._sources else None)
        return source.problem(info.pod, what) if source is not None else f"pod {info.key}: {what}"

    def records(self, pod: Pod) -> tuple[str | None, ...]:
        """The pod's record annotations' values (to tell whether an update edited them)."""
        return tuple(pod.annotations.get(key) for key in sorted(self._annotations))

    def carried(self, pod: Pod) -> frozenset[str]:
        """The record annotations the pod carries."""
        return frozenset(key for key in self._annotations if key in pod.annotations)


def _unreadable(pod: Pod, requests: Mapping[str, int], error: str) -> PodInfo:
    log.warning("Ignoring malformed device allocation", extra={"pod": pod.key, "error": error})
    return PodInfo(pod, requests, {}, error)
