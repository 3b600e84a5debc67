"""The Reservation a migration creates, and what the defragmentation strategy counts as whole GPUs."""

from __future__ import annotations

from typing import Any

import pytest

from apis.crds.reservation import Reservation
from apis.extension import names
from apis.k8s.core import Pod
from descheduler.migration import reservation
from descheduler.strategies.defrag import whole_gpus

RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-1", "controller": True}


def pod(resources: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u1",
            "labels": {"app": "web"},
            "annotations": {names.ANNOTATION_DEVICE_ALLOCATED: "{}", "keep": "me"},
            "ownerReferences": [RS],
        },
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": resources, "limits": resources}}],
            **spec,
        },
    }


JOB = {"metadata": {"name": "j", "uid": "job-1"}}


def test_the_reservation_stands_for_the_pod_and_belongs_to_its_controller() -> None:
    body = reservation.build(JOB, pod({names.NVIDIA_GPU: "2"}), ttl_seconds=90)
    parsed = Reservation.from_dict({**body, "metadata": {**body["metadata"], "uid": "r1"}})
    assert parsed.name == "pmj-j"
    assert parsed.ttl_seconds == 90
    template = body["spec"]["template"]
    assert "nodeName" not in template["spec"]
    assert template["metadata"]["annotations"] == {"keep": "me"}  # the old placement is not copied
    replacement = Pod.from_dict({"metadata": {"name": "p2", "namespace": "ns", "ownerReferences": [RS]}, "spec": {}})
    stranger = Pod.from_dict({"metadata": {"name": "x", "namespace": "other", "ownerReferences": [RS]}, "spec": {}})
    assert parsed.matches_owner(replacement)
    assert not parsed.matches_owner(stranger)


def test_a_target_node_is_anded_into_the_pods_own_required_terms() -> None:
    own = {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [own]}}}
    body = reservation.build(JOB, pod({}, affinity=affinity), ttl_seconds=60, target_node="n7")
    terms = body["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    [term] = terms["nodeSelectorTerms"]
    assert term["matchExpressions"] == own["matchExpressions"]
    assert term["matchFields"] == [{"key": "metadata.name", "operator": "In", "values": ["n7"]}]
    assert affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [own]


def test_without_a_target_the_pods_own_node_is_excluded_as_koordinator_does() -> None:
    body = reservation.build(JOB, pod({}), ttl_seconds=60)
    required = body["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert required == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}]
    }


def test_a_pod_without_a_controller_gets_no_reservation() -> None:
    bare = pod({})
    bare["metadata"]["ownerReferences"] = []
    with pytest.raises(ValueError, match="no controller"):
        reservation.build(JOB, bare, ttl_seconds=60)


@pytest.mark.parametrize(
    ("resources", "whole"),
    [
        ({names.NVIDIA_GPU: "8"}, 8),
        ({names.GPU_CORE: "400", names.GPU_MEMORY_RATIO: "400"}, 4),
        ({names.GPU_CORE: "50", names.GPU_MEMORY_RATIO: "50"}, 0),
        ({}, 0),
    ],
)
def test_whole_gpus(resources: dict[str, str], whole: int) -> None:
    assert whole_gpus(Pod.from_dict(pod(resources))) == whole
