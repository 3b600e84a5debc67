"""Every Koordinator manual's example names `schedulerName: koord-scheduler`: `tessera up` serves it."""

from __future__ import annotations

from tests.conformance.koordinator.koord import KOORD_SCHEDULER, Koord

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: plain
spec:
  schedulerName: koord-scheduler
  containers:
  - name: main
    image: busybox
    resources:
      requests:
        cpu: 100m
"""


def test_a_pod_for_koord_scheduler_is_scheduled(koord: Koord) -> None:
    ns = koord.namespace("names")
    koord.apply(POD, namespace=ns)
    node = koord.wait("pod", "plain", lambda pod: pod["spec"].get("nodeName"), namespace=ns, what="plain bound")
    pod = koord.get("pod", "plain", namespace=ns)
    assert pod["spec"]["schedulerName"] == KOORD_SCHEDULER
    assert node.startswith("sim-")


def test_a_pod_naming_a_scheduler_nobody_serves_is_told_so(koord: Koord) -> None:
    ns = koord.namespace("names-typo")
    koord.apply(POD.replace("name: plain", "name: typo").replace(KOORD_SCHEDULER, "koord-schedulr"), namespace=ns)
    message = koord.wait_event("typo", "SchedulerNameNotServed", namespace=ns)
    assert message == (
        "no profile of tessera-scheduler serves schedulerName 'koord-schedulr' "
        "(it serves default-scheduler, koord-scheduler, tessera-scheduler); another scheduler may serve it"
    )
    assert not koord.get("pod", "typo", namespace=ns)["spec"].get("nodeName")


RESERVATION = """
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata: {name: names-typo}
spec:
  allocateOnce: true
  owners: [{labelSelector: {matchLabels: {app: typo}}}]
  template:
    metadata: {namespace: default}
    spec:
      schedulerName: koord-schedulr
      containers:
      - name: main
        image: busybox
        resources: {requests: {cpu: 100m}}
"""


def test_a_reservation_naming_a_scheduler_nobody_serves_is_told_so(koord: Koord) -> None:
    koord.apply(RESERVATION)
    try:
        message = koord.wait_event("names-typo", "SchedulerNameNotServed")
        assert "schedulerName 'koord-schedulr'" in message and "another scheduler may serve it" in message
    finally:
        koord.delete("reservation", "names-typo")
