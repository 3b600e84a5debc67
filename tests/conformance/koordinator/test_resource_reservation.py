"""Koordinator's user manual "Resource Reservation" (docs/user-manuals/resource-reservation.md of
koordinator-sh/website), its examples applied with the real kubectl to the suite's `tessera up`.

The manifests are the manual's, written out here, verbatim but for these substitutions: node
names (`node-1` is the second simulated node, `sim-2`) and the examples' namespace — each example
runs in its own, so `namespace: default` in a Reservation's template and in an owner `object`
becomes that namespace (an owner is matched by namespace too). Reservations are cluster-scoped:
each test deletes the ones it made.

Where the manual is wrong as written, the test says so and checks what Koordinator's source does
(apis/scheduling/v1alpha1/reservation_types.go, pkg/scheduler/plugins/reservation/), which is what
Tessera does:

- Quick Start, step 5, shows `reservation-demo` still `Available` (Ready True, reason Available)
  once `pod-demo-0` allocated from it. The Reservation is allocateOnce (the default), and
  Koordinator's controller (`syncStatus`) marks an allocateOnce Reservation with an owner
  `Succeeded` (Ready False, reason Succeeded): the manual's output predates that.
- Advanced Configurations sets `expires: "YYYY-MM-DDTHH:MM:SSZ"`, a placeholder: the CRD types
  `expires` as a date-time, so the API server refuses the object as written. It also sets both
  `ttl` and `expires`, which the manual's own field description calls mutually exclusive;
  Koordinator's controller expires the Reservation at whichever comes first.
- The multi-owner example's step 6 prints a `spec` that is `reservation-demo`'s (owner
  `pod-demo-0`, 500m CPU and 800Mi), not `reservation-demo-big`'s; its comment calls the owner
  object `default/pod-demo-0` where the manifest says `pod-demo-1`. Its `status` is right.
- The PreAllocation examples set no `allocatePolicy`; Koordinator's scheduler pre-allocates only
  for a `Restricted` Reservation (else "node(s) reservation pre allocation is unsupported with
  current attributes"), and Cluster mode only when its `preAllocationConfig.enableClusterMode`
  is set (off by default). Tessera does as the manual says: any policy, Cluster mode always on.
- The multiple-pods example: Koordinator's scheduler stops taking pods as soon as the node has
  room, one pod on this cluster's roomy nodes; the manual (and Tessera) takes both, which make
  up the Reservation. The manual assumes both pods run on one node (a Reservation is placed over
  the pods of its own node): here they are given `nodeName`, as its `node-1`.
"""

from __future__ import annotations

import datetime
import json
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conformance.koordinator.koord import Koord
from tests.support.waiting import wait_for

#: The manual's `node-1`, as the suite's cluster names its second node.
NODE_1 = "sim-2"

#: The manual's stress container (the Reservations' templates and pod-demo-0 share it).
STRESS = """\
- args:
    - '-c'
    - '1'
  command:
    - stress
  image: polinux/stress
  imagePullPolicy: Always
  name: stress
  resources:
"""


def stress(resources: str, indent: int = 8) -> str:
    """The stress container with `resources` (the lines under `resources:`, unindented), as a
    list item `indent` spaces in."""
    body = STRESS + textwrap.indent(textwrap.dedent(resources).strip("\n"), "    ")
    return "\n" + textwrap.indent(body, " " * indent)


def reservation(name: str, container: str, rest: str, *, spec: str = "", template: str = "") -> str:
    """A Reservation as the manual's examples write one: `spec` before the template (e.g.
    `allocateOnce`), `template` lines after its containers, `rest` (owners, ttl, ...) after it."""
    return f"""
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata:
  name: {name}
spec:{spec}
  template:
    metadata:
      namespace: {{ns}}
    spec:
      containers:{container}{template}
      schedulerName: koord-scheduler
{rest}"""


RESERVATION_DEMO = reservation(
    "reservation-demo",
    stress("requests:\n  cpu: 500m\n  memory: 800Mi"),
    """  owners:
    - object:
        name: pod-demo-0
        namespace: {ns}
  ttl: 1h
""",
)

POD_DEMO_0 = (
    """
apiVersion: v1
kind: Pod
metadata:
  name: pod-demo-0
spec:
  containers:"""
    + stress(
        """
        limits:
          cpu: '1'
          memory: 1Gi
        requests:
          cpu: 200m
          memory: 400Mi
        """,
        indent=4,
    )
    + """
  restartPolicy: Always
  schedulerName: koord-scheduler
"""
)

RESERVATION_ADVANCED = RESERVATION_DEMO.replace(
    "  ttl: 1h\n",
    """    - labelSelector:
        matchLabels:
          app: app-demo
  ttl: 1h
  expires: "{expires}"
""",
)

RESERVATION_DEMO_BIG = reservation(
    "reservation-demo-big",
    stress("requests:\n  cpu: 6\n  memory: 20Gi"),
    """  owners:
    - object:
        name: pod-demo-1
        namespace: {ns}
    - labelSelector:
        matchLabels:
          app: app-demo
  ttl: 1h
""",
    spec="\n  allocateOnce: false",
    template="\n      nodeName: {node}",
)

APP_DEMO = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-demo
spec:
  replicas: 2
  selector:
    matchLabels:
      app: app-demo
  template:
    metadata:
      name: stress
      labels:
        app: app-demo
    spec:
      schedulerName: koord-scheduler
      containers:
      - name: stress
        image: polinux/stress
        args:
          - '-c'
          - '1'
        command:
          - stress
        resources:
          requests:
            cpu: 2
            memory: 10Gi
          limits:
            cpu: 4
            memory: 20Gi
"""


def placeholder(cpu: str, memory: str) -> str:
    """The PreAllocation examples' container."""
    return f"""
        - name: placeholder
          resources:
            requests:
              cpu: {cpu}
              memory: {memory}"""


def owned_by(app: str, ttl: str) -> str:
    return f"""  owners:
    - labelSelector:
        matchLabels:
          app: {app}
  ttl: {ttl}
"""


RESERVATION_PREALLOC = reservation(
    "reservation-prealloc", placeholder("500m", "800Mi"), owned_by("my-app", "2h"), spec="\n  preAllocation: true"
)
RESERVATION_CLUSTER_MODE = reservation(
    "reservation-cluster-mode",
    placeholder("2", "4Gi"),
    owned_by("critical-app", "4h"),
    spec="\n  preAllocation: true\n  preAllocationPolicy:\n    mode: Cluster",
)
RESERVATION_MULTI_PODS = reservation(
    "reservation-multi-pods",
    placeholder("2", "4Gi"),
    owned_by("high-priority-app", "4h"),
    spec="\n  preAllocation: true\n  preAllocationPolicy:\n    mode: Cluster\n    enableMultiple: true",
)

#: Not in the manual: the running pod matching `reservation-prealloc`'s owners that it speaks of
#: (pod-demo-0 of the Quick Start, labelled as an owner).
MY_APP = POD_DEMO_0.replace("name: pod-demo-0", "name: my-app-0\n  labels:\n    app: my-app")


def batch_job(name: str, priority: str, cpu: str, memory: str, node: str = "") -> str:
    """A pre-allocatable pod of the Cluster mode examples (on `node`, when given)."""
    pinned = f"\n  nodeName: {node}" if node else ""
    return f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels:
    pod.koordinator.sh/is-pre-allocatable: "true"
  annotations:
    pod.koordinator.sh/pre-allocatable-priority: "{priority}"
spec:{pinned}
  containers:
    - name: batch-job
      image: busybox
      resources:
        requests:
          cpu: {cpu}
          memory: {memory}
"""


BATCH_JOB_1 = batch_job("batch-job-1", "100", "2", "4Gi")
BATCH_JOBS_1_AND_2 = (
    "# Pod 1 - 1 CPU, 2Gi memory\n"
    + batch_job("batch-job-1", "100", "1", "2Gi", NODE_1)
    + "---\n# Pod 2 - 1 CPU, 2Gi memory\n"
    + batch_job("batch-job-2", "90", "1", "2Gi", NODE_1)
)

ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"


@pytest.fixture
def reservations(koord: Koord) -> Iterator[list[str]]:
    """Names of the cluster-scoped Reservations a test makes: deleted when it ends."""
    made: list[str] = []
    yield made
    for name in made:
        koord.up.kubectl("delete", "reservation", name, "--ignore-not-found", "--wait=false")


def phase(obj: dict[str, Any]) -> str:
    return str(obj.get("status", {}).get("phase", ""))


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c.get("reason", "")) for c in obj.get("status", {}).get("conditions", [])}


def wait_phase(koord: Koord, name: str, want: str) -> dict[str, Any]:
    return dict(koord.wait("reservation", name, lambda r: r if phase(r) == want else None, what=f"{name} {want}"))


def bound(koord: Koord, name: str, namespace: str) -> dict[str, Any]:
    return dict(
        koord.wait("pod", name, lambda p: p if p["spec"].get("nodeName") else None, namespace=namespace, what=name)
    )


def node_dump(koord: Koord, node: str) -> dict[str, Any]:
    """What the scheduler counts on `node` (its diagnostics endpoint, Koordinator's `/apis/v1/nodes`)."""
    return dict(koord.debug(f"/apis/v1/nodes/{node}"))


# --- Quick Start ------------------------------------------------------------------------------------


def test_quick_start_reserves_for_pod_demo_0_which_then_allocates_from_it(
    koord: Koord, reservations: list[str]
) -> None:
    ns = koord.namespace("rsv-quick")
    # 1. The manual creates it with `kubectl create -f reservation-demo.yaml`.
    reservations.append("reservation-demo")
    created = koord.up.kubectl("create", "-f", "-", stdin=RESERVATION_DEMO.format(ns=ns))
    assert created.strip() == "reservation.scheduling.koordinator.sh/reservation-demo created"
    # 2. Available, on a node, with the TTL it was given.
    placed = wait_phase(koord, "reservation-demo", "Available")
    node = placed["status"]["nodeName"]
    wide = koord.up.kubectl("get", "reservation", "reservation-demo", "-o", "wide").splitlines()
    assert wide[0].split() == ["NAME", "PHASE", "AGE", "NODE", "TTL", "EXPIRES"]
    columns = wide[1].split()
    assert (columns[0], columns[1], columns[3], columns[4]) == ("reservation-demo", "Available", node, "1h")
    # 3, 4. pod-demo-0 is scheduled at the same node as the Reservation.
    assert koord.up.kubectl("create", "-n", ns, "-f", "-", stdin=POD_DEMO_0).strip() == "pod/pod-demo-0 created"
    pod = bound(koord, "pod-demo-0", ns)
    assert pod["spec"]["nodeName"] == node
    uid = placed["metadata"]["uid"]
    assert pod["metadata"]["annotations"][ALLOCATED] == f'{{"name":"reservation-demo","uid":"{uid}"}}'
    # 5. It reserved 500m and 800Mi, and pod-demo-0 allocated 200m and 400Mi of it. The manual
    #    shows it still Available: allocateOnce (the default) makes it Succeeded in Koordinator's
    #    controller (see the module docstring).
    done = wait_phase(koord, "reservation-demo", "Succeeded")
    status = done["status"]
    assert status["allocatable"] == {"cpu": "500m", "memory": "800Mi"}
    assert status["allocated"] == {"cpu": "200m", "memory": "400Mi"}
    assert status["currentOwners"] == [{"name": "pod-demo-0", "namespace": ns, "uid": pod["metadata"]["uid"]}]
    assert status["nodeName"] == node
    assert conditions(done) == {"Scheduled": ("True", "Scheduled"), "Ready": ("False", "Succeeded")}
    # 6. Deleting the Reservation leaves the pod where it runs.
    deleted = koord.up.kubectl("delete", "reservation", "reservation-demo")
    assert deleted.strip() == 'reservation.scheduling.koordinator.sh "reservation-demo" deleted'
    assert koord.get("pod", "pod-demo-0", namespace=ns)["spec"]["nodeName"] == node


# --- Advanced Configurations ------------------------------------------------------------------------


def test_advanced_configuration_takes_owners_by_object_or_label(koord: Koord, reservations: list[str]) -> None:
    ns = koord.namespace("rsv-advanced")
    reservations.append("reservation-demo")
    # As written, `expires` is a placeholder: the API server refuses it (a date-time is expected).
    refused = koord.try_apply(RESERVATION_ADVANCED.format(ns=ns, expires="YYYY-MM-DDTHH:MM:SSZ"))
    assert "expires" in refused and "date-time" in refused, refused
    # With a real time (a day ahead: the 1h ttl comes first, as Koordinator checks both).
    tomorrow = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)
    koord.apply(RESERVATION_ADVANCED.format(ns=ns, expires=tomorrow.strftime("%Y-%m-%dT%H:%M:%SZ")))
    placed = wait_phase(koord, "reservation-demo", "Available")
    assert placed["spec"]["ttl"] == "1h" and placed["spec"]["allocateOnce"] is True  # the CRD's defaults
    # An owner by label (the second owner spec) allocates it; allocateOnce: done with it.
    labelled = POD_DEMO_0.replace("name: pod-demo-0", "name: app-demo-0\n  labels:\n    app: app-demo")
    koord.apply(labelled, namespace=ns)
    assert bound(koord, "app-demo-0", ns)["spec"]["nodeName"] == placed["status"]["nodeName"]
    done = wait_phase(koord, "reservation-demo", "Succeeded")
    assert [o["name"] for o in done["status"]["currentOwners"]] == ["app-demo-0"]


# --- Reserve on Specified Node, with Multiple Owners --------------------------------------------------


def test_reservation_demo_big_is_shared_by_the_replicas_of_app_demo(koord: Koord, reservations: list[str]) -> None:
    ns = koord.namespace("rsv-big")
    # 1. The nodes' allocatable, as the manual lists it.
    listed = koord.up.kubectl(
        "get",
        "node",
        "-o",
        "custom-columns=NAME:.metadata.name,CPU:.status.allocatable.cpu,MEMORY:.status.allocatable.memory",
    ).splitlines()
    assert listed[0].split() == ["NAME", "CPU", "MEMORY"] and NODE_1 in {line.split()[0] for line in listed[1:]}
    # 2, 3. reservation-demo-big is placed on the node its template names.
    reservations.append("reservation-demo-big")
    koord.up.kubectl("create", "-f", "-", stdin=RESERVATION_DEMO_BIG.format(ns=ns, node=NODE_1))
    placed = wait_phase(koord, "reservation-demo-big", "Available")
    assert placed["status"]["nodeName"] == NODE_1
    wide = koord.up.kubectl("get", "reservation", "reservation-demo-big", "-o", "wide").splitlines()[1].split()
    assert (wide[1], wide[3], wide[4]) == ("Available", NODE_1, "1h")
    # 4, 5. Both replicas of app-demo are scheduled at the same node, each onto the Reservation.
    created = koord.up.kubectl("create", "-n", ns, "-f", "-", stdin=APP_DEMO)
    assert created.strip() == "deployment.apps/app-demo created"

    def two_bound() -> list[dict[str, Any]] | None:
        listing = json.loads(koord.up.kubectl("get", "pod", "-l", "app=app-demo", "-n", ns, "-o", "json"))
        pods = [p for p in listing["items"] if p["spec"].get("nodeName")]
        return pods if len(pods) == 2 else None

    pods = wait_for(two_bound, timeout_s=90, what="app-demo's 2 replicas bound")
    uid = placed["metadata"]["uid"]
    for pod in pods:
        assert pod["spec"]["nodeName"] == NODE_1
        assert pod["metadata"]["annotations"][ALLOCATED] == f'{{"name":"reservation-demo-big","uid":"{uid}"}}'
    # 6. Still Available (allocateOnce: false), both replicas its owners, 4 CPUs and 20Gi of its
    #    6 and 20Gi allocated to them.
    shared = dict(
        koord.wait(
            "reservation",
            "reservation-demo-big",
            lambda r: r if len(r["status"].get("currentOwners", [])) == 2 else None,
            what="two owners",
        )
    )
    status = shared["status"]
    assert status["phase"] == "Available"
    assert conditions(shared) == {"Scheduled": ("True", "Scheduled"), "Ready": ("True", "Available")}
    assert status["allocatable"] == {"cpu": "6", "memory": "20Gi"}
    assert status["allocated"] == {"cpu": "4", "memory": "20Gi"}
    by_uid = sorted((p["metadata"]["uid"], p["metadata"]["name"]) for p in pods)
    assert status["currentOwners"] == [{"name": name, "namespace": ns, "uid": uid} for uid, name in by_uid]
    # "The allocation for reserved resources does not increase the requested of node resources":
    # the scheduler counts the owners and what the Reservation has left (2 CPUs), not 6 + 4.
    dump = node_dump(koord, NODE_1)
    [held] = [r for r in dump["reservations"] if r["reservation"] == "reservation-demo-big"]
    assert held["requests"] == {"cpu": "2"}
    counted = {p["pod"]: p["requests"] for p in dump["pods"]}
    assert all(counted[f"{ns}/{p['metadata']['name']}"] == {"cpu": "2", "memory": "10Gi"} for p in pods)
    assert counted[f"{ns}/reservation-demo-big"] == {"cpu": "2"}  # the reserve pod: what it has left


# --- PreAllocation ----------------------------------------------------------------------------------


def test_preallocation_default_mode_binds_to_a_running_owner(koord: Koord, reservations: list[str]) -> None:
    ns = koord.namespace("rsv-prealloc")
    koord.apply(MY_APP, namespace=ns)
    running = bound(koord, "my-app-0", ns)
    reservations.append("reservation-prealloc")
    koord.apply(RESERVATION_PREALLOC.format(ns=ns))
    placed = dict(
        koord.wait("reservation", "reservation-prealloc", lambda r: r if r["status"].get("nodeName") else None)
    )
    # The manual: the scheduler finds a running pod matching the owners and binds the Reservation to it.
    assert placed["status"]["nodeName"] == running["spec"]["nodeName"]
    assert '"name":"reservation-prealloc"' in koord.get("pod", "my-app-0", namespace=ns)["metadata"].get(
        "annotations", {}
    ).get(ALLOCATED, "")


def test_preallocation_cluster_mode_binds_to_the_pre_allocatable_pod(koord: Koord, reservations: list[str]) -> None:
    ns = koord.namespace("rsv-cluster")
    koord.apply(BATCH_JOB_1, namespace=ns)
    bound(koord, "batch-job-1", ns)
    reservations.append("reservation-cluster-mode")
    koord.apply(RESERVATION_CLUSTER_MODE.format(ns=ns))
    koord.wait("reservation", "reservation-cluster-mode", lambda r: r if r["status"].get("nodeName") else None)
    annotations = koord.get("pod", "batch-job-1", namespace=ns)["metadata"].get("annotations", {})
    assert '"name":"reservation-cluster-mode"' in annotations.get(ALLOCATED, "")


def test_preallocation_with_multiple_pods_binds_to_both(koord: Koord, reservations: list[str]) -> None:
    ns = koord.namespace("rsv-multi")
    koord.apply(BATCH_JOBS_1_AND_2, namespace=ns)
    bound(koord, "batch-job-1", ns)
    bound(koord, "batch-job-2", ns)
    reservations.append("reservation-multi-pods")
    koord.apply(RESERVATION_MULTI_PODS.format(ns=ns))
    koord.wait("reservation", "reservation-multi-pods", lambda r: r if r["status"].get("nodeName") else None)
    for name in ("batch-job-1", "batch-job-2"):
        annotations = koord.get("pod", name, namespace=ns)["metadata"].get("annotations", {})
        assert '"name":"reservation-multi-pods"' in annotations.get(ALLOCATED, "")
