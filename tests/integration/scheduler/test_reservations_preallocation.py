"""Reservation pre-allocation, live: the embedded API server (RBAC enforced) and a `tessera
scheduler` process over real HTTP.

A Reservation with `spec.preAllocation` is placed over a running owner: it reserves that pod's
very GPUs, the pod says so in its `reservation-allocated` annotation and is in `currentOwners`,
and the node counts those GPUs once — not for the pod and again for the Reservation, also
after a `kill -9` of the scheduler. When the pod goes, its GPUs stay held for the owners (the
Reservation was not consumed by it), and the next owner gets exactly them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apis.crds.reservation import ReservationPhase
from apis.extension import names
from cli.launchers.apiserver import EmbeddedAPIServer
from kube import Client, resources
from tests.integration.scheduler.test_reservations import (  # noqa: F401 (the module's fixtures)
    Env,
    client,
    cluster,
    env,
    gpus_of,
    reservation,
    scheduler,
)
from tests.support.cluster import assert_no_device_shared_beyond_capacity, condition, create_pod

pytestmark = pytest.mark.integration

FOUR = {names.NVIDIA_GPU: "4"}


def rejected(name: str) -> object:
    return lambda ps: any(p.name == name and (condition(p) or ("",))[0] == "False" for p in ps)


def test_a_reservation_placed_over_a_running_pod_counts_its_gpus_once(
    cluster: tuple[EmbeddedAPIServer, Path],  # noqa: F811
    client: Client,  # noqa: F811
    work_dir: Path,
    env: Env,  # noqa: F811
) -> None:
    ns, api, watch, pods = env.ns, env.api, env.watch, env.pods
    create_pod(client, ns, "trainer-0", FOUR, labels={"app": "train"})
    pods.wait_bound(1)
    held_by_pod = gpus_of(pods.pod("trainer-0").annotations)
    pre = reservation("pre", ns, FOUR, owner="train")
    pre["spec"]["preAllocation"] = True
    api.create(pre)
    placed = watch.wait_phase("pre", ReservationPhase.AVAILABLE)
    # One holding: the Reservation's GPUs are the pod's, and the pod says it uses the Reservation.
    assert gpus_of(placed.meta.annotations) == held_by_pod
    assert [r.name for r in placed.pre_allocated] == ["trainer-0"]
    pods.wait_for(
        lambda ps: any('"name":"pre"' in p.annotations.get(names.ANNOTATION_RESERVATION_ALLOCATED, "") for p in ps),
        "trainer-0 annotated",
    )
    status = watch.wait_for("pre", lambda r: bool(r.get("status", {}).get("currentOwners")), "owned")["status"]
    assert status["phase"] == "Available"  # the pod it took over does not consume it
    assert [o["name"] for o in status["currentOwners"]] == ["trainer-0"]

    # A crash: the new scheduler counts the same, from the API alone.
    env.process.kill()
    env.process = scheduler(cluster, work_dir)

    # 8 GPUs: 4 the pod's (the Reservation's), 4 free. Counted twice, no 4 would fit; not at all, 5 would.
    create_pod(client, ns, "five", {names.NVIDIA_GPU: "5"})
    pods.wait_for(rejected("five"), "five rejected")
    create_pod(client, ns, "stranger", FOUR)
    pods.wait_for(lambda ps: any(p.name == "stranger" and p.node_name for p in ps), "stranger bound")
    assert set(gpus_of(pods.pod("stranger").annotations)).isdisjoint(held_by_pod)
    client.resource(resources.PODS).delete("five", namespace=ns)

    # The pod goes: its GPUs stay held for the owners; a non-owner gets none, the next owner all.
    client.resource(resources.PODS).delete("trainer-0", namespace=ns)
    watch.wait_for("pre", lambda r: not r.get("status", {}).get("currentOwners"), "its pod gone")
    create_pod(client, ns, "late", {names.NVIDIA_GPU: "1"})
    pods.wait_for(rejected("late"), "late rejected")
    create_pod(client, ns, "trainer-1", FOUR, labels={"app": "train"})
    pods.wait_for(lambda ps: any(p.name == "trainer-1" and p.node_name for p in ps), "trainer-1 bound")
    assert gpus_of(pods.pod("trainer-1").annotations) == held_by_pod
    done = watch.wait_phase("pre", ReservationPhase.SUCCEEDED)
    assert [o.name for o in done.current_owners] == ["trainer-1"]
    assert pods.pod("late").node_name == ""
    assert_no_device_shared_beyond_capacity(client, [p for p in pods.pods() if p.node_name])
