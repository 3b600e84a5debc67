"""Extended resources served through DRA (kube's DRAExtendedResource): a plain pod asking for
`nvidia.com/gpu: 1` — or any extended resource a DeviceClass names — gets devices of that class,
through a ResourceClaim the scheduler makes for it.

kube's rules, as kube-scheduler's DynamicResources plugin applies them:

- a DeviceClass serves the extended resource in its `spec.extendedResourceName`, and always
  `deviceclass.resource.kubernetes.io/<class>` (the implicit name). Two classes naming the same
  resource: the one created later wins; created at the same time, the first by name (`index`);
- on a node, a resource a class serves goes through DRA only when the node has none of it
  otherwise: kube asks that the node's allocatable of the name be 0 (no device plugin). Tessera
  adds Koordinator's own way to serve a device resource: a whole-GPU name (`nvidia.com/gpu`,
  ...) is served by DeviceShare from the node's Device CR, so a node whose Device CR has devices
  of the name's type serves it in Koordinator's protocol (`served_by_dra`);
- the claim (`claim_for`): named for the pod, owned by it (`controller: true`), annotated
  `resource.kubernetes.io/extended-resource-claim: "true"`, with one request per container
  asking the resource (`container-<i>-request-<j>`: `i` the container's index among init
  containers then containers, `j` the resource's among the container's sorted request names),
  `exactly` that many devices of the class. A regular init container reuses the requests of
  the containers that run after it, and asks only for what they do not cover; the init
  containers' requests of one resource become the largest of them (they never run together)
  (`requests_and_mappings`). Which request serves which container's resource is recorded in
  the pod's `status.extendedResourceClaimStatus`.

Tessera names the claim `<pod>-extended-resources-<5 characters of the pod's UID's hash>` (kube
gives it a generated name): the writes that make it are values decided at Reserve, and a retry
after a failed binding finds the same name.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, Final

from apis.crds.device import DeviceType
from apis.dra.claim import DeviceClass, ResourceClaim
from apis.dra.names import EXTENDED_RESOURCE_CLAIM_ANNOTATION, IMPLICIT_EXTENDED_RESOURCE_PREFIX
from apis.extension import devicetypes
from apis.k8s.core import Container, ContainerExtendedResourceRequest, Pod

__all__ = [
    "ClassIndex",
    "claim_for",
    "claim_manifest",
    "claim_name",
    "find_claim",
    "requests_and_mappings",
    "served_by_dra",
    "status_patch",
]

#: kube's generated names: a base of at most 58 characters and 5 random ones.
_BASE_MAX: Final = 58
_SUFFIX: Final = 5
_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"  # kube's utilrand alphabet


class ClassIndex:
    """Extended resource name -> the DeviceClass that serves it (kube's DeviceClassResolver)."""

    __slots__ = ("_classes", "_explicit")

    def __init__(self, classes: Iterable[DeviceClass] = ()) -> None:
        self._classes: dict[str, DeviceClass] = {c.name: c for c in classes}
        explicit: dict[str, DeviceClass] = {}
        for klass in self._classes.values():
            name = klass.extended_resource_name
            if not name:
                continue
            other = explicit.get(name)
            if other is None or _wins(klass, other):
                explicit[name] = klass
        self._explicit = explicit

    def __bool__(self) -> bool:
        return bool(self._classes)

    def class_for(self, resource: str) -> DeviceClass | None:
        """The class serving `resource`, or None."""
        found = self._explicit.get(resource)
        if found is None and resource.startswith(IMPLICIT_EXTENDED_RESOURCE_PREFIX):
            found = self._classes.get(resource.removeprefix(IMPLICIT_EXTENDED_RESOURCE_PREFIX))
        return found

    def mapped(self, requests: Mapping[str, int]) -> dict[str, str]:
        """Of a pod's (non-zero) requests, the resources a class serves -> the class's name."""
        out: dict[str, str] = {}
        for resource, amount in requests.items():
            if amount > 0 and "/" in resource:
                klass = self.class_for(resource)
                if klass is not None:
                    out[resource] = klass.name
        return out


def _wins(a: DeviceClass, b: DeviceClass) -> bool:
    """Whether class `a` rather than `b` serves a name both give: the later created; at the same
    time, the first by name."""
    if a.meta.creation_timestamp != b.meta.creation_timestamp:
        return a.meta.creation_timestamp > b.meta.creation_timestamp
    return a.name < b.name


def served_by_dra(resource: str, *, allocatable: Mapping[str, int], koordinator_types: Iterable[DeviceType]) -> bool:
    """Whether a node serves `resource` (which a class serves) through DRA: it has no allocatable
    of it (kube: no device plugin), and — for a device resource of Koordinator's protocol — no
    devices of its type in its Device CR (DeviceShare would serve it)."""
    if allocatable.get(resource, 0) > 0:
        return False
    if resource in devicetypes.RESOURCE_NAMES:
        return devicetypes.type_of(resource) not in set(koordinator_types)
    return True


def claim_name(pod: Pod) -> str:
    """The name of the claim for `pod`'s extended resources (see the module docstring)."""
    base = f"{pod.name}-extended-resources-"[:_BASE_MAX]
    digest = hashlib.sha256((pod.uid or pod.key).encode()).digest()
    return base + "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:_SUFFIX])


def find_claim(pod: Pod, claims: Iterable[ResourceClaim]) -> ResourceClaim | None:
    """The claim made for `pod`'s extended resources: annotated so, controlled by the pod."""
    for claim in claims:
        if claim.meta.namespace != pod.namespace:
            continue
        if claim.meta.annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) != "true":
            continue
        if any(o.controller and o.uid == pod.uid and o.name == pod.name for o in claim.meta.owner_references):
            return claim
    return None


_Request = dict[str, Any]


def _container_request(
    index: int, container: Container, resource: str, klass: str, reusable: Iterable[_Request | None]
) -> tuple[_Request | None, list[ContainerExtendedResourceRequest]]:
    """The request container `index` needs for `resource` beyond the `reusable` ones it may use,
    and the mappings of the container to the requests that serve it."""
    asked = container.requests.get(resource, 0)
    if asked <= 0:
        return None, []
    mappings: list[ContainerExtendedResourceRequest] = []
    covered = 0
    for request in reusable:
        if request is None:
            continue
        covered += request["exactly"]["count"]
        mappings.append(ContainerExtendedResourceRequest(container.name, resource, request["name"]))
        if covered >= asked:
            return None, mappings
    name = f"container-{index}-request-{sorted(container.requests).index(resource)}"
    request = {
        "name": name,
        "exactly": {"deviceClassName": klass, "allocationMode": "ExactCount", "count": asked - covered},
    }
    mappings.append(ContainerExtendedResourceRequest(container.name, resource, name))
    return request, mappings


def requests_and_mappings(
    pod: Pod, served: Mapping[str, str]
) -> tuple[tuple[_Request, ...], tuple[ContainerExtendedResourceRequest, ...]]:
    """The claim's device requests for the resources `served` (resource -> class name) and the
    pod's request mappings (kube's createRequestsAndMappings; see the module docstring)."""
    containers = (*pod.init_containers, *pod.containers)
    inits = len(pod.init_containers)
    short = [i for i, c in enumerate(containers) if i < inits and c.restart_policy != "Always"]
    long = [i for i in range(len(containers)) if i not in short]
    requests: list[_Request] = []
    mappings: list[ContainerExtendedResourceRequest] = []
    for resource in sorted(served):
        klass = served[resource]
        long_requests: list[_Request | None] = [None] * len(containers)
        long_mappings: list[ContainerExtendedResourceRequest] = []
        for i in long:
            request, found = _container_request(i, containers[i], resource, klass, ())
            long_requests[i] = request
            long_mappings += found
        largest: _Request | None = None
        short_names: set[str] = set()
        short_mappings: list[ContainerExtendedResourceRequest] = []
        for i in short:
            request, found = _container_request(i, containers[i], resource, klass, long_requests[i:])
            if request is not None:
                short_names.add(request["name"])
                if largest is None or largest["exactly"]["count"] < request["exactly"]["count"]:
                    largest = request
            short_mappings += found
        if largest is not None:
            requests.append(largest)
            short_mappings = [
                ContainerExtendedResourceRequest(m.container_name, m.resource_name, largest["name"])
                if m.request_name in short_names
                else m
                for m in short_mappings
            ]
        requests += [r for r in long_requests if r is not None]
        mappings += long_mappings + short_mappings
    requests.sort(key=lambda r: str(r["name"]))
    return tuple(requests), tuple(mappings)


def claim_for(pod: Pod, requests: Iterable[_Request]) -> ResourceClaim:
    """The claim for `pod`'s extended resources with these device requests (not yet created)."""
    return ResourceClaim.from_dict(claim_manifest(pod, requests))


def claim_manifest(pod: Pod, requests: Iterable[_Request]) -> dict[str, Any]:
    owner = {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid, "controller": True}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": claim_name(pod),
            "namespace": pod.namespace,
            "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
            "ownerReferences": [owner],
        },
        "spec": {"devices": {"requests": [dict(r) for r in requests]}},
    }


def status_patch(claim: str, mappings: Iterable[ContainerExtendedResourceRequest]) -> dict[str, Any]:
    """The pod status patch that records the claim and its request mappings."""
    return {
        "status": {
            "extendedResourceClaimStatus": {
                "resourceClaimName": claim,
                "requestMappings": [m.to_dict() for m in mappings],
            }
        }
    }
