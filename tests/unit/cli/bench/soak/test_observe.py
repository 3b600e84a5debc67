"""The soak's record: what it hands the invariants is consistent with a list taken in between."""

from __future__ import annotations

from cli.bench.soak.invariants.liveness import lost
from cli.bench.soak.observe import Record
from tests.unit.cli.bench.soak.builders import node, pod


def test_a_pod_created_while_the_pods_were_listed_is_not_lost() -> None:
    """Regression (found by a soak): the checker listed the pods, the workload's create was
    acknowledged, then the record was read: the new pod counted as acknowledged but gone."""
    record = Record()
    record.acknowledge("soak/old", "uid-old")
    acknowledged = record.acknowledged_now()
    listed = (pod("old"),)  # the list does not have the pod created next
    record.acknowledge("soak/new", "uid-new")
    assert lost(record.state(0.0, acknowledged, pods=listed)) == []


def test_a_pod_deleted_while_the_pods_were_listed_is_not_lost() -> None:
    record = Record()
    record.acknowledge("soak/a", "uid-a")
    acknowledged = record.acknowledged_now()
    record.deleting("soak/a")  # the list, taken after the delete, no longer has it
    assert lost(record.state(0.0, acknowledged, pods=())) == []


def test_an_unhealthy_gpu_keeps_its_first_sighting_until_seen_healthy() -> None:
    record = Record()
    _, failed = node(unhealthy=[2])
    _, healthy = node()
    record.saw_devices([failed], 10.0)
    record.saw_devices([failed], 20.0)
    assert record.unhealthy_since == {("n1", 2): 10.0}
    record.saw_devices([healthy], 30.0)
    assert record.unhealthy_since == {}
