"""Each CRD in deploy/crds/ loads, and sample objects (and what apis/ writes) satisfy its schema."""

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import given

from agent.qos import config as qos_config
from apis.crds.device import Device
from apis.crds.elasticquota import ElasticQuota
from apis.crds.podgroup import PodGroup
from apis.crds.podmigrationjob import PodMigrationJob
from apis.crds.reservation import Reservation
from apis.extension import names
from tests.unit.apis.strategies import devices

CRD_DIR = Path(__file__).resolve().parents[2] / "deploy" / "crds"
#: A NodeSLO as Koordinator's slo-controller renders it: every NodeSLOSpec field, defaulted.
NODESLO = yaml.safe_load(
    (Path(__file__).parent / "agent" / "fixtures" / "nodeslo-koordinator-defaults.yaml").read_text()
)


def load_crd(gvr: names.GroupVersionResource) -> dict[str, Any]:
    doc = yaml.safe_load((CRD_DIR / f"{gvr.group}_{gvr.plural}.yaml").read_text())
    assert doc["kind"] == "CustomResourceDefinition"
    assert doc["metadata"]["name"] == f"{gvr.plural}.{gvr.group}"
    assert doc["spec"]["group"] == gvr.group and doc["spec"]["names"]["kind"] == gvr.kind
    assert doc["spec"]["scope"] == ("Namespaced" if gvr.namespaced else "Cluster")
    return doc


def schema_of(gvr: names.GroupVersionResource) -> dict[str, Any]:
    version = next(v for v in load_crd(gvr)["spec"]["versions"] if v["name"] == gvr.version)
    assert version["served"] and version["storage"]
    return version["schema"]["openAPIV3Schema"]


DEVICE = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
    "kind": "Device",
    "metadata": {"name": "node-1"},
    "spec": {
        "devices": [
            {
                "type": "gpu",
                "id": "GPU-1",
                "minor": 0,
                "health": True,
                "resources": {names.GPU_CORE: "100", names.GPU_MEMORY: "80Gi", names.GPU_MEMORY_RATIO: 100},
                "topology": {"socketID": 0, "nodeID": 0, "pcieID": "pci0000:1d", "busID": "0000:1f:00.0"},
                "conditions": [
                    {
                        "type": "Healthy",
                        "status": "True",
                        "reason": "Healthy",
                        "message": "",
                        "lastTransitionTime": "2024-01-01T00:00:00Z",
                    }
                ],
            },
            {
                "type": "rdma",
                "id": "0000:20:00.0",
                "minor": 0,
                "health": False,
                "vfGroups": [{"labels": {"type": "general"}, "vfs": [{"minor": 0, "busID": "0000:20:00.2"}]}],
            },
        ]
    },
}
QUOTA = {
    "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
    "kind": "ElasticQuota",
    "metadata": {"name": "q", "namespace": "ml"},
    "spec": {"min": {"cpu": "4", "nvidia.com/gpu": 2}, "max": {"cpu": "8", "memory": "64Gi"}},
    "status": {"used": {"cpu": "1500m"}},
}
PODGROUP = {
    "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
    "kind": "PodGroup",
    "metadata": {"name": "pg", "namespace": "ml"},
    "spec": {"minMember": 4, "scheduleTimeoutSeconds": 600, "minResources": {"cpu": "4"}},
    "status": {"phase": "Scheduling", "scheduled": 2},
}
RESERVATION = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
    "kind": "Reservation",
    "metadata": {"name": "for-infer", "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {
        "template": {
            "metadata": {"namespace": "ml"},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {names.GPU_SHARED: "1", names.GPU_CORE: "50"}}}]
            },
        },
        "owners": [{"controller": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "infer-5d8", "uid": "u"}}],
        "ttl": "1h",
        "allocateOnce": True,
    },
    "status": {"phase": "Available", "nodeName": "node-1", "allocatable": {names.GPU_CORE: "50"}},
}
MIGRATION = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
    "kind": "PodMigrationJob",
    "metadata": {"name": "move-infer-0"},
    "spec": {"podRef": {"namespace": "ml", "name": "infer-0"}, "mode": "ReservationFirst", "ttl": "5m0s"},
    "status": {"phase": "Running", "status": "ReservationCreated"},
}


@pytest.mark.parametrize(
    ("gvr", "sample", "parse"),
    [
        (names.DEVICES, DEVICE, Device.from_dict),
        (names.ELASTIC_QUOTAS, QUOTA, ElasticQuota.from_dict),
        (names.POD_GROUPS, PODGROUP, PodGroup.from_dict),
        (names.RESERVATIONS, RESERVATION, Reservation.from_dict),
        (names.POD_MIGRATION_JOBS, MIGRATION, PodMigrationJob.from_dict),
    ],
    ids=["device", "elasticquota", "podgroup", "reservation", "podmigrationjob"],
)
def test_samples_and_serialized_objects_validate(
    gvr: names.GroupVersionResource, sample: dict[str, Any], parse: Any
) -> None:
    schema = schema_of(gvr)
    jsonschema.validate(sample, schema)
    jsonschema.validate(parse(sample).to_dict(), schema)


def with_value(sample: dict[str, Any], path: tuple[Any, ...], value: object) -> dict[str, Any]:
    """A copy of `sample` with the field at `path` set to `value`."""
    doc = copy.deepcopy(sample)
    target: Any = doc
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return doc


@pytest.mark.parametrize(
    ("gvr", "sample", "path", "bad"),
    [
        (names.NODE_SLOS, NODESLO, ("spec", "resourceUsedThresholdWithBE", "cpuSuppressThresholdPercent"), 150),
        (names.NODE_SLOS, NODESLO, ("spec", "resourceUsedThresholdWithBE", "enable"), "yes"),
        (names.NODE_SLOS, NODESLO, ("spec", "resourceQOSStrategy", "beClass", "cpuQOS", "schedIdle"), "1"),
        (names.NODE_SLOS, NODESLO, ("spec", "resourceQOSStrategy", "systemClass", "memoryQOS", "wmarkMinAdj"), 51),
        (names.NODE_SLOS, NODESLO, ("spec", "resourceQOSStrategy", "lsClass", "networkQOS", "egressLimit"), 1.5),
        (names.NODE_SLOS, NODESLO, ("spec", "systemStrategy", "totalNetworkBandwidth"), "fast"),
        (names.DEVICES, DEVICE, ("spec", "devices", 0, "resources", names.GPU_CORE), "lots"),
        (names.DEVICES, DEVICE, ("spec", "devices", 0, "health"), "yes"),
        (names.ELASTIC_QUOTAS, QUOTA, ("spec", "max", "cpu"), "8 cores"),
        (names.RESERVATIONS, RESERVATION, ("spec", "owners"), []),
        (names.RESERVATIONS, RESERVATION, ("spec", "owners", 0), {}),
        (names.RESERVATIONS, RESERVATION, ("spec", "allocatePolicy"), "Loose"),
        (names.RESERVATIONS, RESERVATION, ("spec", "allocateOnce"), "yes"),
        (names.POD_MIGRATION_JOBS, MIGRATION, ("spec", "podRef"), "infer-0"),
    ],
)
def test_schema_rejects_bad_objects(
    gvr: names.GroupVersionResource, sample: dict[str, Any], path: tuple[Any, ...], bad: object
) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(with_value(sample, path, bad), schema_of(gvr))


@pytest.mark.parametrize(
    ("gvr", "sample", "path", "value"),
    [
        (names.DEVICES, DEVICE, ("spec", "devices", 0, "type"), "npu"),
        (names.DEVICES, DEVICE, ("spec", "devices", 0, "minor"), -1),
        (names.POD_GROUPS, PODGROUP, ("spec", "minMember"), 0),
        (names.POD_GROUPS, PODGROUP, ("spec", "scheduleTimeoutSeconds"), -5),
        (names.POD_GROUPS, PODGROUP, ("status", "phase"), "Done"),
        (names.POD_MIGRATION_JOBS, MIGRATION, ("spec", "mode"), "Teleport"),
    ],
    ids=["device-type", "device-minor", "min-member", "schedule-timeout", "pod-group-phase", "migration-mode"],
)
def test_schema_accepts_what_koordinators_accepts(
    gvr: names.GroupVersionResource, sample: dict[str, Any], path: tuple[Any, ...], value: object
) -> None:
    """Values Tessera's components do not use are theirs to report, not the API server's to refuse."""
    jsonschema.validate(with_value(sample, path, value), schema_of(gvr))


def test_a_nodeslo_from_koordinator_validates_and_the_agent_reads_it() -> None:
    schema = schema_of(names.NODE_SLOS)
    jsonschema.validate(NODESLO, schema)
    assert qos_config.parse(NODESLO, source="NodeSLO node-1").cpu_suppress.threshold_percent == 65


def test_nodeslo_spec_keeps_unknown_fields_for_the_agent_to_name() -> None:
    # A field of a newer Koordinator, or a typo: the API server keeps it (not pruned), the agent
    # reports it by name instead of running with a protection silently missing.
    spec = schema_of(names.NODE_SLOS)["properties"]["spec"]
    assert spec["x-kubernetes-preserve-unknown-fields"] is True
    classes = spec["properties"]["resourceQOSStrategy"]["properties"]
    assert all(classes[c] == classes["lsrClass"] for c in ("lsClass", "beClass", "systemClass", "cgroupRoot"))


@given(devices())
def test_every_serialized_device_satisfies_the_crd(dev: Device) -> None:
    jsonschema.validate(dev.to_dict(), DEVICE_SCHEMA)


DEVICE_SCHEMA = schema_of(names.DEVICES)
