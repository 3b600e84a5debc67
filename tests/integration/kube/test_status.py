"""Status goes where the resource keeps it, with and without a status subresource.

Koordinator's CRDs for Device, ElasticQuota and PodGroup have no status subresource, and ours
follow them: a Koordinator component's merge patch of status through the object must stay, and
our writers must not send it to a `/status` that does not exist. A cluster may still carry a CRD
with the subresource (an older Tessera's). One CRD of a test group is switched between the two
shapes while the same writers keep writing.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from apis.extension import names
from kube import crds
from kube.client import Client
from kube.errors import NotFound
from kube.patch import create_or_replace
from kube.resources import CUSTOM_RESOURCE_DEFINITIONS, ResourceAPI
from kube.status import StatusAwareAPI, StatusWriter
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

GVR = names.GroupVersionResource("status.test.tessera.dev", "v1", "gadgets", "Gadget", True)
CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{GVR.plural}.{GVR.group}"},
    "spec": {
        "group": GVR.group,
        "names": {"kind": GVR.kind, "listKind": f"{GVR.kind}List", "plural": GVR.plural, "singular": "gadget"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": GVR.version,
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                            "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
                        },
                    }
                },
            }
        ],
    },
}


def install(client: Client, *, subresource: bool) -> None:
    crd = copy.deepcopy(CRD)
    if subresource:
        crd["spec"]["versions"][0]["subresources"] = {"status": {}}
    create_or_replace(client.resource(CUSTOM_RESOURCE_DEFINITIONS), crd)

    def served() -> bool:
        found = client.request("GET", f"/apis/{GVR.group}/{GVR.version}")
        return (f"{GVR.plural}/status" in {r["name"] for r in found.get("resources") or ()}) is subresource

    wait_for(served, what=f"{GVR.plural} served {'with' if subresource else 'without'} /status")


@pytest.fixture
def gadgets(client: Client, namespace: str) -> Iterator[ResourceAPI]:
    install(client, subresource=False)
    api = client.resource(GVR)
    body = {"apiVersion": GVR.api_version, "kind": GVR.kind, "metadata": {"name": "g"}, "spec": {"size": 1}}
    api.create(body, namespace=namespace)
    yield api
    client.resource(CUSTOM_RESOURCE_DEFINITIONS).delete(CRD["metadata"]["name"])


def phase(api: ResourceAPI, namespace: str) -> object:
    return (api.get("g", namespace=namespace).get("status") or {}).get("phase")


def test_without_the_subresource_a_koordinator_style_status_patch_through_the_object_stays(
    gadgets: ResourceAPI, namespace: str
) -> None:
    gadgets.patch("g", {"status": {"phase": "Running"}}, namespace=namespace)
    assert phase(gadgets, namespace) == "Running"
    with pytest.raises(NotFound):
        gadgets.patch("g", {"status": {"phase": "Lost"}}, namespace=namespace, subresource="status")


def test_writers_follow_the_crd_as_it_gains_and_loses_the_subresource(
    client: Client, gadgets: ResourceAPI, namespace: str
) -> None:
    writer = StatusWriter(gadgets, recheck=0.0)
    aware = StatusAwareAPI(gadgets)
    assert not writer.has_subresource()
    writer.patch("g", {"status": {"phase": "One"}}, namespace=namespace)
    assert phase(gadgets, namespace) == "One"
    # The CRD gains the subresource: a write through the object would now drop status; the
    # writer sees its status missing from the answer, asks again, and writes through /status.
    install(client, subresource=True)
    written = writer.patch("g", {"status": {"phase": "Two"}}, namespace=namespace)
    assert written["status"]["phase"] == "Two" and writer.has_subresource()
    assert phase(gadgets, namespace) == "Two"
    assert aware.patch("g", {"status": {"phase": "Three"}}, namespace=namespace, subresource="status")
    assert phase(gadgets, namespace) == "Three"
    # And loses it again: /status answers 404 for an object that exists; the writers go back.
    install(client, subresource=False)
    writer.patch("g", {"status": {"phase": "Four"}}, namespace=namespace)
    assert phase(gadgets, namespace) == "Four"
    aware.patch("g", {"status": {"phase": "Five"}}, namespace=namespace, subresource="status")
    assert phase(gadgets, namespace) == "Five"
    with pytest.raises(NotFound):
        writer.patch("missing", {"status": {"phase": "Six"}}, namespace=namespace)


def test_the_typed_crds_write_status_where_koordinators_crds_keep_it(client: Client, namespace: str) -> None:
    """PodGroup, as Koordinator ships its CRD (and ours): no subresource, status with the object."""
    groups = crds.pod_groups(client)
    body = {"apiVersion": names.POD_GROUPS.api_version, "kind": "PodGroup", "metadata": {"name": "pg"}}
    client.resource(names.POD_GROUPS).create({**body, "spec": {"minMember": 2}}, namespace=namespace)
    written = groups.patch_status("pg", {"status": {"phase": "Running", "running": 2}}, namespace=namespace)
    assert (written.phase.value, written.running) == ("Running", 2)
    koordinator_style = {"status": {"phase": "Finished", "succeeded": 2}}
    client.resource(names.POD_GROUPS).patch("pg", koordinator_style, namespace=namespace)
    stored = groups.get("pg", namespace=namespace)
    assert (stored.phase.value, stored.succeeded, stored.running) == ("Finished", 2, 2)
