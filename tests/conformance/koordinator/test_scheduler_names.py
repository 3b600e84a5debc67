"""Every Koordinator manual's example names `schedulerName: koord-scheduler`: `tessera up` serves it."""

from __future__ import annotations

from tests.conformance.koordinator.conftest import KOORD_SCHEDULER, Koord

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
