"""Reservations, live: the embedded API server (RBAC enforced, the scheduler with its own token and
deploy/'s ClusterRole) and a `tessera scheduler` process over real HTTP.

- A Reservation of 4 whole GPUs and one of half a GPU are placed and hold their devices against
  every other pod — also across a `kill -9` of the scheduler — and each owner gets exactly the
  reserved devices; allocateOnce makes them Succeeded, with the owner in `currentOwners`.
- An unused Reservation expires: Failed, Ready False with reason Expired, its GPUs free again.
- One that cannot fit stays Pending, Scheduled False / Unschedulable, saying why; one the
  scheduler cannot read gets a Warning Event and a Scheduled False / Invalid condition, and the
  scheduler goes on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from apis.crds.reservation import Reservation, ReservationPhase
from apis.extension import allocation, names
from apis.k8s.core import Pod
from cli.launchers.apiserver import EmbeddedAPIServer, run_apiserver
from cli.launchers.base import KubeconfigCredentials
from cli.launchers.scheduler import SchedulerProcess
from cli.localcluster import identities
from kube import Client, EventRecorder, Informer, raw, resources
from kube.resources import ResourceAPI
from scheduler.service.reservations.controller import ReservationController
from tests.support.cluster import (
    GPU_HALF,
    PodWatch,
    assert_no_device_shared_beyond_capacity,
    condition,
    create_gpu_nodes,
    create_namespace,
    create_pod,
    wait_for_event,
)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedAPIServer, Path]]:
    """A cluster per test (nodes are cluster-wide), with RBAC: the scheduler's own kubeconfig."""
    directory = tmp_path_factory.mktemp("rsv")
    tokens = identities.ensure_tokens(directory / "tokens.csv", identities.IDENTITIES.values())
    with run_apiserver(
        directory, secure=True, extra_args=["--token-auth-file", str(directory / "tokens.csv")]
    ) as server:
        server.install_crds()
        with server.client() as admin:
            identities.apply_manifests(admin, identities.rbac_manifests())
        kubeconfigs = identities.component_kubeconfigs(directory / "kubeconfigs", server.kubeconfig, tokens)
        yield server, kubeconfigs["tessera-scheduler"]


@pytest.fixture
def client(cluster: tuple[EmbeddedAPIServer, Path]) -> Iterator[Client]:
    with cluster[0].client() as c:
        yield c


class ReservationWatch:
    """Reservations as raw objects (one that does not parse is still seen); `wait_for` wakes on events."""

    def __init__(self, client: Client) -> None:
        self._cond = threading.Condition()
        self.informer: Informer[dict[str, Any]] = Informer(client, names.RESERVATIONS, parse=raw)
        self.informer.add_handlers(self._changed, lambda _o, _n: self._changed(None), self._changed)
        self.informer.start()
        assert self.informer.wait_for_sync(30)

    def _changed(self, _obj: object) -> None:
        with self._cond:
            self._cond.notify_all()

    def get(self, name: str) -> dict[str, Any] | None:
        return self.informer.store.get(name)

    def wait_for(self, name: str, predicate: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        deadline = time.monotonic() + 90
        with self._cond:
            while True:
                found = self.get(name)
                if found is not None and predicate(found):
                    return found
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out waiting for reservation {name} to be {what}; have {found}")
                self._cond.wait(remaining)

    def wait_phase(self, name: str, phase: ReservationPhase) -> Reservation:
        found = self.wait_for(name, lambda r: r.get("status", {}).get("phase") == phase.value, phase.value)
        return Reservation.from_dict(found)

    def stop(self) -> None:
        self.informer.stop()


def reservation(
    name: str,
    namespace: str,
    requests: Mapping[str, str],
    *,
    owner: str,
    ttl: str = "1h",
    template_extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    container = {"name": "main", "image": "x", "resources": {"requests": dict(requests), "limits": dict(requests)}}
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"namespace": namespace},
                "spec": {"schedulerName": names.SCHEDULER_NAME, "containers": [container], **(template_extra or {})},
            },
            "owners": [{"labelSelector": {"matchLabels": {"app": owner}}}],
            "ttl": ttl,
        },
    }


def gpus_of(annotations: Mapping[str, str]) -> list[tuple[int, int]]:
    """(minor, gpu-core percent) of the GPUs a device-allocated annotation names."""
    decoded = allocation.from_pod_annotations(annotations)
    return sorted((a.minor, a.resources[names.GPU_CORE]) for allocs in decoded.values() for a in allocs)


def scheduler(cluster: tuple[EmbeddedAPIServer, Path], work_dir: Path) -> SchedulerProcess:
    process = SchedulerProcess(cluster[1], work_dir)
    # The test reads its /metrics as the admin, as tessera up does: the scheduler's own identity
    # may not (its endpoints authorize callers through the API server).
    process.credentials = KubeconfigCredentials(cluster[0].kubeconfig)
    process.start()
    return process


@dataclass
class Env:
    """One GPU node (`rsv-node`), a namespace, watches on Reservations and its pods, a scheduler."""

    ns: str
    api: ResourceAPI
    watch: ReservationWatch
    pods: PodWatch
    process: SchedulerProcess


@pytest.fixture
def env(cluster: tuple[EmbeddedAPIServer, Path], client: Client, work_dir: Path) -> Iterator[Env]:
    create_gpu_nodes(client, "rsv-node")
    ns = create_namespace(client)
    env = Env(
        ns,
        client.resource(names.RESERVATIONS),
        ReservationWatch(client),
        PodWatch(client, ns),
        scheduler(cluster, work_dir),
    )
    try:
        yield env
    finally:
        env.process.stop()
        env.watch.stop()
        env.pods.stop()


def test_reservations_hold_devices_across_a_kill_and_hand_them_to_their_owners(
    cluster: tuple[EmbeddedAPIServer, Path], client: Client, work_dir: Path, env: Env
) -> None:
    ns, api, watch, pods = env.ns, env.api, env.watch, env.pods
    # An early pod takes GPUs first, so the Reservations get later ones: once it is gone, a
    # fresh allocation would prefer its GPUs, but owners must get the reserved ones.
    create_pod(client, ns, "early", {names.NVIDIA_GPU: "3"})
    pods.wait_bound(1)
    api.create(reservation("four", ns, {names.NVIDIA_GPU: "4"}, owner="train"))
    api.create(reservation("half", ns, GPU_HALF, owner="infer"))
    four = watch.wait_phase("four", ReservationPhase.AVAILABLE)
    half = watch.wait_phase("half", ReservationPhase.AVAILABLE)
    assert four.node_name == half.node_name == "rsv-node"
    reserved_four, reserved_half = gpus_of(four.meta.annotations), gpus_of(half.meta.annotations)
    assert len(reserved_four) == 4 and [p for _, p in reserved_half] == [50]
    early = {m for m, _ in gpus_of(pods.pod("early").annotations)}
    assert early.isdisjoint(m for m, _ in reserved_four + reserved_half)
    assert {c.type: c.status for c in four.conditions} == {"Scheduled": "True", "Ready": "True"}
    assert four.allocatable[names.NVIDIA_GPU] == 4

    # A crash: a new scheduler must hold exactly the same devices, from the API alone.
    env.process.kill()
    env.process = scheduler(cluster, work_dir)

    # Non-owners: with the early pod gone, 3.5 GPUs are free besides the reserved: 5 never fit.
    client.resource(resources.PODS).delete("early", namespace=ns)
    create_pod(client, ns, "five", {names.NVIDIA_GPU: "5"})
    pods.wait_for(
        lambda ps: any(p.name == "five" and (condition(p) or ("",))[0] == "False" for p in ps), "five rejected"
    )

    # Owners get exactly the reserved devices and say which Reservation they used.
    create_pod(client, ns, "trainer", {names.NVIDIA_GPU: "4"}, labels={"app": "train"})
    create_pod(client, ns, "server", GPU_HALF, labels={"app": "infer"})
    pods.wait_for(lambda ps: sum(1 for p in ps if p.name in ("trainer", "server") and p.node_name) == 2, "owners")
    trainer, server = pods.pod("trainer"), pods.pod("server")
    assert gpus_of(trainer.annotations) == reserved_four
    assert gpus_of(server.annotations) == reserved_half
    assert '"name":"four"' in trainer.annotations[names.ANNOTATION_RESERVATION_ALLOCATED]

    # allocateOnce: consumed, Succeeded, the owner recorded; nothing is held twice.
    done = watch.wait_phase("four", ReservationPhase.SUCCEEDED)
    assert [o.name for o in done.current_owners] == ["trainer"]
    assert done.allocated[names.NVIDIA_GPU] == 4
    watch.wait_phase("half", ReservationPhase.SUCCEEDED)
    assert pods.pod("five").node_name == ""
    assert_no_device_shared_beyond_capacity(client, [p for p in pods.pods() if p.node_name])
    assert env.process.metric("tessera_scheduler_reservations", {"phase": "Succeeded"}) == 2


def test_owners_share_a_reservation_across_a_kill_and_leave_it_as_they_go(
    cluster: tuple[EmbeddedAPIServer, Path], client: Client, work_dir: Path, env: Env
) -> None:
    """allocateOnce false: a whole GPU for pods of 50 % each. Two owners share it, non-owners
    never get any of it (also after a `kill -9`), the status lists the owners as they come and go."""
    ns, api, watch, pods = env.ns, env.api, env.watch, env.pods
    shared = reservation("shared", ns, {names.GPU_CORE: "100", names.GPU_MEMORY_RATIO: "100"}, owner="infer")
    shared["spec"]["allocateOnce"] = False
    api.create(shared)
    placed = watch.wait_phase("shared", ReservationPhase.AVAILABLE)
    [(gpu, whole)] = gpus_of(placed.meta.annotations)
    assert whole == 100
    create_pod(client, ns, "infer-0", GPU_HALF, labels={"app": "infer"})
    pods.wait_bound(1)
    env.process.kill()  # what infer-0 left must stay the owners' across a restart
    env.process = scheduler(cluster, work_dir)
    # Non-owners fill every other GPU; a non-owner half then has no room: the reserved GPU's free
    # half is the owners'.
    for i in range(7):
        create_pod(client, ns, f"other-{i}", {names.NVIDIA_GPU: "1"})
    pods.wait_bound(8)
    create_pod(client, ns, "stranger", GPU_HALF)
    pods.wait_for(
        lambda ps: any(p.name == "stranger" and (condition(p) or ("",))[0] == "False" for p in ps), "stranger rejected"
    )
    create_pod(client, ns, "infer-1", GPU_HALF, labels={"app": "infer"})
    pods.wait_bound(9)
    bound = {p.name: p for p in pods.pods() if p.node_name}
    where = {name: gpus_of(p.annotations) for name, p in sorted(bound.items())}  # says all when one fails
    assert "stranger" not in where, where
    for name in ("infer-0", "infer-1"):
        assert gpus_of(bound[name].annotations) == [(gpu, 50)], (gpu, where)
        assert '"name":"shared"' in bound[name].annotations[names.ANNOTATION_RESERVATION_ALLOCATED]
    assert all(gpu not in {m for m, _ in gpus} for n, gpus in where.items() if n.startswith("other")), (gpu, where)
    assert_no_device_shared_beyond_capacity(client, list(bound.values()))

    both = watch.wait_for(
        "shared", lambda r: len(r.get("status", {}).get("currentOwners", [])) == 2, "shared by two owners"
    )
    assert both["status"]["phase"] == "Available"
    assert both["status"]["allocated"] == {names.GPU_CORE: "100", names.GPU_MEMORY_RATIO: "100"}
    assert sorted(o["name"] for o in both["status"]["currentOwners"]) == ["infer-0", "infer-1"]
    assert all(set(o) == {"namespace", "name", "uid"} for o in both["status"]["currentOwners"])
    # An owner gone leaves the list, and its half is the owners' again: the stranger still waits,
    # a new owner gets it.
    client.resource(resources.PODS).delete("infer-0", namespace=ns)
    watch.wait_for("shared", lambda r: len(r.get("status", {}).get("currentOwners", [])) == 1, "one owner left")
    create_pod(client, ns, "infer-2", GPU_HALF, labels={"app": "infer"})
    pods.wait_for(lambda ps: any(p.name == "infer-2" and p.node_name for p in ps), "infer-2 bound")
    where = {p.name: gpus_of(p.annotations) for p in pods.pods() if p.node_name}
    assert where["infer-2"] == [(gpu, 50)] and "stranger" not in where, (gpu, where)
    assert_no_device_shared_beyond_capacity(client, [p for p in pods.pods() if p.node_name])


def test_expiry_unschedulable_and_invalid_reservations(client: Client, env: Env) -> None:
    ns, api, watch, pods = env.ns, env.api, env.watch, env.pods
    # Bad input first: the scheduler must keep running and placing what it can.
    api.create(reservation("broken", ns, {names.CPU: "lots"}, owner="x"))
    api.create(reservation("too-big", ns, {names.NVIDIA_GPU: "9"}, owner="x"))
    api.create(reservation("short", ns, {names.NVIDIA_GPU: "8"}, owner="x", ttl="3s"))
    watch.wait_phase("short", ReservationPhase.AVAILABLE)
    create_pod(client, ns, "waiting", {names.NVIDIA_GPU: "2"})

    broken = watch.wait_for(
        "broken",
        lambda r: any(c.get("reason") == "Invalid" for c in r.get("status", {}).get("conditions", [])),
        "marked Invalid",
    )
    [invalid] = broken["status"]["conditions"]
    assert invalid["type"] == "Scheduled" and invalid["status"] == "False"
    assert "spec.template" in invalid["message"] and "lots" in invalid["message"]
    wait_for_event(client, "default", "broken", "FailedParsing")

    too_big = watch.wait_for(
        "too-big",
        lambda r: any(c.get("reason") == "Unschedulable" for c in r.get("status", {}).get("conditions", [])),
        "Unschedulable",
    )
    assert too_big["status"]["phase"] == "Pending"
    assert "gpu" in too_big["status"]["conditions"][0]["message"].lower()

    # Expiry releases the 8 GPUs: the waiting pod is placed.
    expired = watch.wait_phase("short", ReservationPhase.FAILED)
    assert expired.is_expired
    pods.wait_for(lambda ps: any(p.name == "waiting" and p.node_name for p in ps), "waiting bound")
    assert env.process.metric("tessera_scheduler_reservations", {"phase": "Expired"}) == 1


def test_an_owner_deleted_before_the_status_pass_still_ends_an_allocate_once_reservation(
    client: Client,
) -> None:
    """Found by the soak: a rollout deleted the owner within a second of its bind, the pass never
    saw it, and the Reservation stayed Available — a restarted scheduler would hold again what the
    owner had used and others were given since."""
    ns = create_namespace(client)
    api = client.resource(names.RESERVATIONS)
    created = api.create(reservation("taken", ns, GPU_HALF, owner="web"))
    uid = created["metadata"]["uid"]
    status = {"phase": "Available", "nodeName": "rsv-node"}
    api.patch("taken", {"status": status}, subresource="status")
    used = {names.ANNOTATION_RESERVATION_ALLOCATED: f'{{"name":"taken","uid":"{uid}"}}'}
    create_pod(client, ns, "web-1", GPU_HALF, labels={"app": "web"}, annotations=used, node_name="rsv-node")

    reservations = Informer(client, names.RESERVATIONS, parse=Reservation.from_dict)
    pods = Informer(client, resources.PODS, parse=Pod.from_dict)
    recorder = EventRecorder(client, "test")
    controller = ReservationController(
        client, reservations=reservations, pods=pods, recorder=recorder, is_leader=lambda: True
    )
    reservations.start()
    pods.start()
    try:
        assert reservations.wait_for_sync(30) and pods.wait_for_sync(30)
        client.resource(resources.PODS).delete("web-1", namespace=ns)
        wait_for(lambda: pods.store.get(f"{ns}/web-1") is None, what="the pod informer to see the deletion")

        # The informer's store drops the pod before its handlers run: a pass may come first and
        # see no owner; the next, told of the departure, must end the Reservation.
        def ended() -> Reservation | None:
            controller.run_once()
            after = Reservation.from_dict(api.get("taken"))
            return after if after.phase is ReservationPhase.SUCCEEDED else None

        after = wait_for(ended, poll_s=0.05, what="the Reservation to succeed after its owner left")
        assert [o.name for o in after.current_owners] == ["web-1"]
    finally:
        reservations.stop()
        pods.stop()
        recorder.close()
        api.delete("taken")
