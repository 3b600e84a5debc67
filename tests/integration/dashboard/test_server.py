"""`tessera dashboard` as a process against the embedded API server over real HTTP: the state it
serves, the patches it streams (server-sent events) when a Device, a pod or a PodMigrationJob
changes, Reservations (one that does not parse among them) and PodMigrationJobs, its probes, and
a bad kubeconfig ending it with one line."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apis import dra
from apis.dra import gpus
from apis.extension import names
from apis.extension.names import GroupVersionResource
from cli.launchers.apiserver import EmbeddedAPIServer
from cli.launchers.dashboard import DashboardProcess
from cli.launchers.scheduler import pod_manifest
from kube import crds
from kube.client import Client
from kube.resources import PODS
from tests.support.browser import BrowserUnavailable, Chromium, chromium_binary
from tests.support.cluster import unique
from tests.support.gpuobjects import make_device, make_pod, migration_manifest, reservation_manifest
from tests.support.sse import EventStream
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def event_stream(dashboard: DashboardProcess) -> EventStream:
    stream = EventStream(dashboard.url, "/api/events")
    assert stream.content_type == "text/event-stream"
    return stream


@pytest.fixture
def dashboard(apiserver: EmbeddedAPIServer, tmp_path: Path) -> Iterator[DashboardProcess]:
    with DashboardProcess(apiserver.kubeconfig, directory=tmp_path / "dashboard") as process:
        yield process


def node_row(doc: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((n for n in doc["nodes"] if n["name"] == name), None)


def gpu_shares(dashboard: DashboardProcess, node: str) -> list[Any] | None:
    """What the served state shows held on each GPU of `node` (None: the node is not there yet)."""
    status, body = dashboard.request("GET", "/api/state")
    assert status == 200
    row = node_row(json.loads(body), node)
    return row and [g["shares"] for group in row["groups"] for g in group["gpus"]]


def test_the_state_shows_devices_and_the_pods_on_them(
    dashboard: DashboardProcess, client: Client, namespace: str
) -> None:
    node = unique("gpu")
    crds.devices(client).create(make_device(node, gpus=2))
    allocated = make_pod("x", node=node, gpus={1: 50}).annotations
    client.resource(PODS).create(
        pod_manifest("infer", {names.GPU_CORE: 50}, namespace=namespace, annotations=allocated, node_name=node)
    )

    found = wait_for(lambda: (s := gpu_shares(dashboard, node)) and s[1] and s, what="the pod on GPU 1")
    assert found == [[], [{"pod": f"{namespace}/infer", "core": 50, "ratio": 50, "memory": 40 << 30, "vfs": 0}]]
    assert dashboard.request("GET", "/readyz") == (200, b"ok")


def test_a_failing_gpu_is_streamed_as_a_patch_of_its_node_only(dashboard: DashboardProcess, client: Client) -> None:
    node, other = unique("gpu"), unique("gpu")
    devices = crds.devices(client)
    devices.create(make_device(node, gpus=2))
    devices.create(make_device(other, gpus=2))
    events = event_stream(dashboard)
    try:
        wait_for(lambda: any(node_row(d, other) for _, d in events.events), what="both nodes in the stream")
        assert events.events[0][0] == "state"
        seen = len(events.events)
        current = devices.get(node)
        devices.update(dataclasses.replace(make_device(node, gpus=2, unhealthy={1: "Xid79"}), meta=current.meta))

        def red() -> dict[str, Any] | None:
            for name, doc in events.events[seen:]:
                row = node_row(doc, node)
                if name == "patch" and row and not row["groups"][0]["gpus"][1]["healthy"]:
                    return doc
            return None

        patch = wait_for(red, what="a patch with GPU 1 unhealthy")
        assert [n["name"] for n in patch["nodes"]] == [node]
        assert patch["nodes"][0]["groups"][0]["gpus"][1]["problem"] == "Xid79"
    finally:
        events.close()


def test_a_kubeconfig_that_cannot_be_used_ends_it_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cli", "dashboard", f"--kubeconfig={tmp_path / 'missing'}", "--scheduler=none"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("tessera dashboard: ") and "Traceback" not in result.stderr


def create_with_status(client: Client, gvr: GroupVersionResource, manifest: dict[str, Any]) -> None:
    """Create the object, then write its status through the status subresource (as the
    scheduler and the descheduler do: a create does not keep `status`)."""
    api = client.resource(gvr)
    status = manifest.pop("status", None)
    for key in ("uid", "creationTimestamp"):
        manifest["metadata"].pop(key, None)
    api.create(manifest)
    if status:
        api.patch(manifest["metadata"]["name"], {"status": status}, subresource="status")


def test_reservations_and_migrations_are_shown_and_streamed(dashboard: DashboardProcess, client: Client) -> None:
    node, held, job, broken = unique("gpu"), unique("rsv"), unique("pmj"), unique("bad")
    crds.devices(client).create(make_device(node, gpus=2))
    create_with_status(client, names.RESERVATIONS, reservation_manifest(held, node=node, gpus={1: 100}))
    create_with_status(client, names.RESERVATIONS, reservation_manifest(broken, ttl="forever"))
    create_with_status(client, names.POD_MIGRATION_JOBS, migration_manifest(job, reservation=held, phase="Pending"))
    events = event_stream(dashboard)
    try:

        def state() -> dict[str, Any]:
            status, body = dashboard.request("GET", "/api/state")
            assert status == 200
            doc: dict[str, Any] = json.loads(body)
            return doc

        def shown() -> dict[str, Any] | None:
            doc = state()
            names_shown = {r["name"] for r in doc["summary"]["reservations"]} | {
                m["name"] for m in doc["summary"]["migrations"]
            }
            return doc if {held, broken, job} <= names_shown and node_row(doc, node) else None

        doc = wait_for(shown, what="the Reservations, the invalid one and the PodMigrationJob")
        rows = {r["name"]: r for r in doc["summary"]["reservations"]}
        assert (rows[held]["phase"], rows[held]["node"], rows[held]["devices"]) == ("Available", node, "GPU 1 100%")
        assert rows[broken]["phase"] == "Invalid" and "spec.ttl" in rows[broken]["reason"]
        gpus = node_row(doc, node)["groups"][0]["gpus"]  # type: ignore[index]  # found above
        assert gpus[0]["reserved"] == [] and [r["reservation"] for r in gpus[1]["reserved"]] == [held]
        (migration,) = [m for m in doc["summary"]["migrations"] if m["name"] == job]
        assert (migration["phase"], migration["reservation"], migration["to"]) == ("Pending", held, node)

        client.resource(names.POD_MIGRATION_JOBS).patch(
            job, {"status": {"phase": "Running", "reason": "Evicting", "message": "evicting"}}, subresource="status"
        )

        def running() -> dict[str, Any] | None:
            for name, data in events.events:
                for m in data["summary"].get("migrations", ()):  # a patch carries what changed
                    if name == "patch" and m["name"] == job and m["phase"] == "Running":
                        return dict(m)
            return None

        streamed = wait_for(running, what="a patch with the PodMigrationJob running")
        assert (streamed["reason"], streamed["message"]) == ("Evicting", "evicting")
    finally:
        events.close()


def test_claims_are_drawn_on_the_gpus_their_allocation_names(
    dashboard: DashboardProcess, client: Client, namespace: str
) -> None:
    """A ResourceClaim allocated a quarter of GPU 0 (status written as the scheduler writes it)
    holds it on the map, naming the claim and the pod it is reserved for — in the served state
    and, when Chromium is here, on the page itself."""
    node = unique("dra")
    device = make_device(node, gpus=2)
    crds.devices(client).create(device)
    client.resource(dra.RESOURCE_SLICES).create(gpus.gpu_slice(device).to_dict())
    claims = client.resource(dra.RESOURCE_CLAIMS)
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}
    claims.create({"metadata": {"name": "quarter"}, "spec": {"devices": {"requests": [request]}}}, namespace=namespace)
    quarter = {"cores": "25", "memory": str(20 << 30)}  # of 80 GiB
    result = {"request": "gpu", "driver": gpus.DRIVER, "pool": node, "device": "gpu-0", "shareID": "s-1"}
    status = {
        "allocation": {"devices": {"results": [{**result, "consumedCapacity": quarter}]}},
        "reservedFor": [{"resource": "pods", "name": "trainer", "uid": "uid-trainer"}],
    }
    claims.patch("quarter", {"status": status}, namespace=namespace, subresource="status")

    found = wait_for(lambda: (s := gpu_shares(dashboard, node)) and s[0] and s, what="the claim's share on GPU 0")
    held = {"pod": f"{namespace}/trainer", "claim": f"{namespace}/quarter", "core": 25, "ratio": 25, "vfs": 0}
    assert found == [[{**held, "memory": 20 << 30}], []]
    if chromium_binary() is None:
        return
    try:
        with Chromium.launch() as browser:
            page = browser.page()
            page.navigate(dashboard.url + "/")
            cell = f"document.querySelector('.gpu .fill.claim[data-claim=\"{namespace}/quarter\"]')"
            title = page.wait_for(f"{cell}?.closest('.gpu').title", timeout=30)
    except BrowserUnavailable as e:
        pytest.skip(str(e))
    assert f"trainer ({namespace}) via claim quarter: gpu-core 25%" in title
