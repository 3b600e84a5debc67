"""A pod plus what the scheduler derives from it, computed once per pod object.

Every plugin reads the same few derived facts (the effective request, the devices it asks for,
the devices a bound pod holds, whether it holds them PCIe-exclusively). Deriving them here once
keeps the hot path free of repeated parsing. What a bound pod holds is not the pod's alone to
say: the cache derives it from its holdings sources (`holdings.Holdings.info`, the
`device-allocated` annotation by default), which keep a malformed record on an existing pod from
failing a cycle — the error is recorded on the PodInfo (and logged) and the pod still counts for
CPU and memory. `PodInfo.of` knows the pod alone: a pending pod, which holds nothing yet.

The device requests are parsed on first use, not in `PodInfo.of`: the pod being scheduled needs
them (DeviceShare, GPUFragmentation and the FGD workload all read them in one cycle), the pods
in the cache, built for every informer event, never do, and parsing costs more than the rest of
`PodInfo.of` together.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from apis.crds.device import DeviceType
from apis.errors import InvalidRequestError
from apis.extension import devicerequest
from apis.extension.allocation import DeviceAllocation
from apis.extension.devicerequest import DeviceRequest
from apis.k8s.core import Pod

__all__ = ["PodInfo"]

#: A pod's device requests, and why they could not be parsed (then the requests are empty).
_ParsedDevices = tuple[Mapping[DeviceType, DeviceRequest], InvalidRequestError | None]


@dataclass(frozen=True, slots=True)
class PodInfo:
    """Read-only facts about one pod object; build with `PodInfo.of(pod)`."""

    pod: Pod
    #: The effective request (`Pod.requests()`), in base units.
    requests: Mapping[str, int]
    #: Devices the pod holds, as the cache's holdings sources say (empty when none, when a
    #: record is malformed, and for a PodInfo made by `of`).
    allocations: Mapping[DeviceType, tuple[DeviceAllocation, ...]] = field(default_factory=dict)
    #: Why a record of what the pod holds could not be read; "" when it was fine or absent.
    allocation_error: str = ""
    #: Device types the pod holds PCIe-exclusively (its device-allocate-hint says `PCIeLevel`).
    pcie_exclusive: frozenset[DeviceType] = frozenset()
    #: Memo of `device_requests` and `request_error`, filled on first use (see the module
    #: docstring): derived from `requests`, which never changes, so it is not state.
    _devices: _ParsedDevices | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def of(cls, pod: Pod) -> PodInfo:
        """The pod's own facts: its request, no holdings (a pod being scheduled holds nothing;
        a bound pod's PodInfo comes from the cache, `ClusterCache.pod_info`). Never raises."""
        return cls(pod, pod.requests())

    @property
    def device_requests(self) -> Mapping[DeviceType, DeviceRequest]:
        """The devices the pod asks for, by type (`apis.extension.devicerequest` rules); empty
        when it asks for none or when its request breaks the rules (then see `request_error`).
        Parsed once, on first use; never raises."""
        return self._parsed_devices()[0]

    @property
    def request_error(self) -> InvalidRequestError | None:
        """Why the pod's device request breaks the rules (naming the pod); None when it is valid."""
        return self._parsed_devices()[1]

    def _parsed_devices(self) -> _ParsedDevices:
        parsed = self._devices
        if parsed is None:
            try:
                parsed = (devicerequest.device_requests(self.requests, obj=self.pod.key), None)
            except InvalidRequestError as e:
                parsed = ({}, e)
            object.__setattr__(self, "_devices", parsed)  # a memo on a frozen value: see the field
        return parsed

    @property
    def key(self) -> str:
        """`namespace/name`: how logs, annotations and users name the pod."""
        return self.pod.key

    @property
    def ident(self) -> str:
        """The cache's identity for the pod: its UID, or its key when a snapshot gives no UID."""
        return self.pod.uid or self.pod.key

    @property
    def node_name(self) -> str:
        return self.pod.node_name
