"""The ledger's state: what the hook server admitted and the informer reported, and what frees it."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping

import pytest

from agent.ledger import Claim, DeviceLedger, claim_key
from apis.crds.device import DeviceType
from apis.extension import allocation, names
from apis.extension.allocation import DeviceAllocation
from apis.k8s.core import Pod
from tests.unit.agent.ledger.claims import GI, claim, make_node, share

NODE = make_node()
HALF = share(0, core=50, memory=40 * GI)
WHOLE = share(0)


def make_pod(
    name: str,
    *gpus: DeviceAllocation,
    phase: str = "Running",
    container_ids: Mapping[str, str] | None = None,
    raw_annotation: str | None = None,
) -> Pod:
    """A pod of namespace `ns` bound to the node, as the informer delivers it (UID `uid-<name>`)."""
    annotations = {}
    if raw_annotation is not None:
        annotations[names.ANNOTATION_DEVICE_ALLOCATED] = raw_annotation
    elif gpus:
        annotations[names.ANNOTATION_DEVICE_ALLOCATED] = allocation.encode({DeviceType.GPU: gpus})
    statuses = [{"name": n, "containerID": cid} for n, cid in (container_ids or {}).items()]
    return Pod.from_dict(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "annotations": annotations},
            "spec": {"nodeName": NODE.node, "containers": [{"name": "main", "image": "i"}]},
            "status": {"phase": phase, "containerStatuses": statuses},
        }
    )


def test_two_creates_racing_for_the_last_share_admit_exactly_one() -> None:
    ledger = DeviceLedger()
    assert ledger.admit(claim("ns/a", HALF), container="main", node=NODE) == ()
    barrier = threading.Barrier(8)
    results: list[bool] = []

    def create(i: int) -> None:
        barrier.wait()
        results.append(not ledger.admit(claim(f"ns/p{i}", HALF), container="main", node=NODE))

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 7 + [True]
    assert len(ledger.held()) == 2


def test_a_refused_pod_holds_nothing() -> None:
    ledger = DeviceLedger()
    ledger.admit(claim("ns/a", HALF), container="main", node=NODE)
    assert ledger.admit(claim("ns/x", WHOLE), container="main", node=NODE) != ()
    assert set(ledger.held()) == {"uid-a"}
    # ...so the pod that was there first is not refused when its container is created again
    assert ledger.admit(claim("ns/a", HALF), container="main", node=NODE) == ()


def test_the_same_pods_second_container_is_admitted() -> None:
    ledger = DeviceLedger()
    assert ledger.admit(claim("ns/a", WHOLE), container="main", node=NODE) == ()
    assert ledger.admit(claim("ns/a", WHOLE), container="sidecar", node=NODE) == ()


def test_a_pod_holds_until_its_last_container_stops() -> None:
    ledger = DeviceLedger()
    ledger.admit(claim("ns/a", WHOLE), container="main", node=NODE)
    ledger.admit(claim("ns/a", WHOLE), container="sidecar", node=NODE)
    ledger.container_stopped("uid-a", "main")
    assert ledger.admit(claim("ns/x", HALF), container="main", node=NODE) != ()
    ledger.container_stopped("uid-a", "sidecar")
    ledger.container_stopped("uid-a", "sidecar")  # idempotent
    assert ledger.admit(claim("ns/x", HALF), container="main", node=NODE) == ()


def test_a_stopped_sandbox_frees_the_pod_even_while_the_api_says_running() -> None:
    ledger = DeviceLedger()
    ledger.pod_changed(make_pod("a", WHOLE))
    ledger.sandbox_stopped("uid-a")
    ledger.pod_updated(make_pod("a", WHOLE), make_pod("a", WHOLE))  # status not caught up yet
    assert ledger.held() == {}
    # ...until one of its containers is admitted again (a new sandbox for the same pod)
    ledger.admit(claim("ns/a", WHOLE), container="main", node=NODE)
    assert set(ledger.held()) == {"uid-a"}


def test_running_pods_from_the_informer_hold_their_devices() -> None:
    ledger = DeviceLedger()
    ledger.pod_changed(make_pod("a", HALF))
    (found,) = ledger.admit(claim("ns/x", WHOLE), container="main", node=NODE)
    assert found.holders == ("ns/a",)


@pytest.mark.parametrize(
    ("phase", "container_ids", "holds"),
    [
        ("Running", None, True),
        ("Pending", {"main": "containerd://abc"}, True),
        ("Pending", None, False),
        ("Succeeded", {"main": "containerd://abc"}, False),
        ("Failed", {"main": "containerd://abc"}, False),
    ],
    ids=["running", "pending-with-a-container", "pending-not-started", "succeeded", "failed"],
)
def test_which_pods_the_informer_makes_holders(
    phase: str, container_ids: Mapping[str, str] | None, holds: bool
) -> None:
    ledger = DeviceLedger()
    ledger.pod_changed(make_pod("a", WHOLE, phase=phase, container_ids=container_ids))
    assert (ledger.held() != {}) is holds


def test_a_pod_that_finished_frees_what_the_hook_admitted() -> None:
    ledger = DeviceLedger()
    ledger.admit(claim("ns/a", WHOLE), container="main", node=NODE)
    ledger.pod_changed(make_pod("a", WHOLE, phase="Pending"))
    assert set(ledger.held()) == {"uid-a"}  # admitted, not yet reported running: still held
    ledger.pod_updated(make_pod("a", WHOLE, phase="Pending"), make_pod("a", WHOLE, phase="Succeeded"))
    assert ledger.held() == {}


def test_deleted_pods_free_their_share() -> None:
    ledger = DeviceLedger()
    ledger.pod_changed(make_pod("a", HALF))
    ledger.admit(claim("ns/a", HALF), container="main", node=NODE)
    ledger.pod_deleted(make_pod("a", HALF))
    assert ledger.held() == {}
    assert ledger.admit(claim("ns/x", WHOLE), container="main", node=NODE) == ()


def test_pods_without_devices_or_with_a_malformed_annotation_are_not_counted() -> None:
    ledger = DeviceLedger()
    ledger.pod_changed(make_pod("plain"))
    ledger.pod_changed(make_pod("bad", raw_annotation="{not json"))
    ledger.pod_changed(make_pod("fpga", raw_annotation=json.dumps({"fpga": [{"minor": 0}]})))
    assert ledger.held() == {}


def test_ready_follows_the_informers_first_list() -> None:
    synced = threading.Event()
    ledger = DeviceLedger(synced=synced.is_set)
    assert not ledger.ready
    synced.set()
    assert ledger.ready


def test_a_prepared_dra_claim_and_koordinator_pods_count_against_each_other() -> None:
    ledger = DeviceLedger()
    dra = Claim(claim_key("c1"), "resourceclaim ns/c1", {DeviceType.GPU: (HALF,)})
    assert ledger.prepare(dra, node=NODE) == ()
    refused = ledger.admit(claim("ns/x", WHOLE), container="main", node=NODE)
    assert refused and "resourceclaim ns/c1" in refused[0].message
    assert ledger.admit(claim("ns/a", HALF), container="main", node=NODE) == ()
    # Prepared again (kubelet retries): admitted without counting itself; a second claim is refused.
    assert ledger.prepare(dra, node=NODE) == ()
    other = Claim(claim_key("c2"), "resourceclaim ns/c2", {DeviceType.GPU: (HALF,)})
    assert ledger.prepare(other, node=NODE) != ()
    ledger.unprepare(claim_key("c1"))
    ledger.unprepare(claim_key("c1"))  # idempotent
    assert set(ledger.held()) == {"uid-a"}
    ledger.restore(other)
    assert set(ledger.held()) == {"uid-a", claim_key("c2")}
