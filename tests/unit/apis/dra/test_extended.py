"""apis.dra.extended: which class serves an extended resource, where DRA serves it, and the claim's
requests and mappings as kube-scheduler derives them."""

from __future__ import annotations

from apis.crds.device import DeviceType
from apis.dra.claim import DeviceClass
from apis.dra.extended import ClassIndex, claim_for, claim_name, find_claim, requests_and_mappings, served_by_dra
from apis.dra.names import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from apis.k8s.core import Container, Pod
from apis.k8s.meta import ObjectMeta

GPU = "nvidia.com/gpu"


def _class(name: str, extended: str = "", created: str = "2026-01-01T00:00:00Z") -> DeviceClass:
    spec = {"extendedResourceName": extended} if extended else {}
    return DeviceClass.from_dict({"metadata": {"name": name, "creationTimestamp": created}, "spec": spec})


def _pod(*containers: Container, inits: tuple[Container, ...] = ()) -> Pod:
    meta = ObjectMeta(name="p", namespace="ns", uid="uid-p")
    return Pod(meta=meta, containers=containers, init_containers=inits)


def test_the_later_class_serves_a_name_two_give_then_the_first_by_name_and_the_implicit_name() -> None:
    index = ClassIndex(
        [
            _class("old", GPU, "2026-01-01T00:00:00Z"),
            _class("new", GPU, "2026-02-01T00:00:00Z"),
            _class("b", "example.com/fpga"),
            _class("a", "example.com/fpga"),
        ]
    )
    served = index.class_for(GPU)
    assert served is not None and served.name == "new"
    fpga = index.class_for("example.com/fpga")
    assert fpga is not None and fpga.name == "a"
    implicit = index.class_for("deviceclass.resource.kubernetes.io/old")
    assert implicit is not None and implicit.name == "old"
    assert index.class_for("example.com/nic") is None
    assert index.mapped({GPU: 2, "cpu": 1000, "example.com/nic": 1, "example.com/fpga": 0}) == {GPU: "new"}


def test_dra_serves_a_name_only_where_neither_allocatable_nor_the_device_cr_has_it() -> None:
    assert served_by_dra(GPU, allocatable={}, koordinator_types=())
    assert not served_by_dra(GPU, allocatable={GPU: 8}, koordinator_types=())
    assert not served_by_dra(GPU, allocatable={}, koordinator_types=(DeviceType.GPU,))
    assert served_by_dra(GPU, allocatable={}, koordinator_types=(DeviceType.RDMA,))
    assert served_by_dra("example.com/fpga", allocatable={}, koordinator_types=(DeviceType.GPU,))
    assert not served_by_dra("example.com/fpga", allocatable={"example.com/fpga": 1}, koordinator_types=())


def test_one_request_per_container_and_init_containers_reuse_the_later_ones() -> None:
    pod = _pod(
        Container("a", requests={GPU: 2, "cpu": 100}),
        Container("b", requests={GPU: 1}),
        inits=(
            Container("init-small", requests={GPU: 1}),  # covered by a's request
            Container("init-big", requests={GPU: 5}),  # one more than the later ones: its own request
            Container("sidecar", requests={GPU: 1}, restart_policy="Always"),
        ),
    )
    requests, mappings = requests_and_mappings(pod, {GPU: "gpu"})
    counts = {r["name"]: r["exactly"]["count"] for r in requests}
    # Containers: init-small 0, init-big 1, sidecar 2, a 3, b 4; the GPU is request 1 of a's
    # sorted names (cpu, nvidia.com/gpu), 0 of the others'.
    assert counts == {
        "container-1-request-0": 1,
        "container-2-request-0": 1,
        "container-3-request-1": 2,
        "container-4-request-0": 1,
    }
    by_container: dict[str, list[str]] = {}
    for m in mappings:
        assert m.resource_name == GPU
        by_container.setdefault(m.container_name, []).append(m.request_name)
    assert by_container["a"] == ["container-3-request-1"]
    assert by_container["sidecar"] == ["container-2-request-0"]
    # init-small reuses the sidecar's request (the first long-lived one after it).
    assert by_container["init-small"] == ["container-2-request-0"]
    # init-big uses every later request (1 + 2 + 1 = 4) and asks for the one more it needs.
    assert by_container["init-big"] == [
        "container-2-request-0",
        "container-3-request-1",
        "container-4-request-0",
        "container-1-request-0",
    ]


def test_the_claim_is_named_for_the_pod_owned_by_it_and_annotated() -> None:
    pod = _pod(Container("a", requests={GPU: 1}))
    requests, _ = requests_and_mappings(pod, {GPU: "gpu"})
    claim = claim_for(pod, requests)
    assert claim.meta.name == claim_name(pod) and claim.meta.name.startswith("p-extended-resources-")
    assert len(claim.meta.name) == len("p-extended-resources-") + 5
    assert claim.meta.annotations == {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"}
    (owner,) = claim.meta.owner_references
    assert (owner.kind, owner.name, owner.uid, owner.controller) == ("Pod", "p", "uid-p", True)
    assert find_claim(pod, [claim]) is claim
    other = Pod(meta=ObjectMeta(name="p", namespace="ns", uid="uid-other"))
    assert find_claim(other, [claim]) is None
    assert claim_name(other) != claim.meta.name
