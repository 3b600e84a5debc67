"""Field selectors: the fields each type supports, `=`/`==`/`!=`, and 400 for anything else."""

import pytest

from apiserver.catalog import Catalog
from apiserver.errors import StatusError
from apiserver.selectors import ObjectFilter, parse_field_selector, parse_label_selector

CATALOG = Catalog()
PODS = CATALOG.lookup("", "v1", "pods")
EVENTS = CATALOG.lookup("", "v1", "events")
POD = {
    "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web"}},
    "spec": {"nodeName": "n1", "schedulerName": "tessera-scheduler", "hostNetwork": True},
    "status": {"phase": "Running"},
}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("spec.nodeName=n1", True),
        ("spec.nodeName==n1", True),
        ("spec.nodeName!=n1", False),
        ("spec.nodeName=", False),
        ("status.phase!=Succeeded,status.phase!=Failed", True),
        ("metadata.name=p,metadata.namespace=ns", True),
        ("spec.schedulerName=tessera-scheduler", True),
        ("spec.hostNetwork=true", True),
        ("status.nominatedNodeName=", True),
    ],
)
def test_pod_field_selectors(selector: str, matches: bool) -> None:
    assert PODS is not None
    assert ObjectFilter(fields=parse_field_selector(selector, PODS)).matches(POD) is matches


def test_event_fields_include_involved_object_and_source() -> None:
    assert EVENTS is not None
    event = {"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"}, "source": {"component": "s"}}
    flt = ObjectFilter(fields=parse_field_selector("involvedObject.kind=Pod,involvedObject.name=p,source=s", EVENTS))
    assert flt.matches(event)


@pytest.mark.parametrize("selector", ["spec.unknown=x", "no-operator", "spec.nodename=n1"])
def test_unknown_or_malformed_field_selectors_are_400(selector: str) -> None:
    assert PODS is not None
    with pytest.raises(StatusError) as e:
        parse_field_selector(selector, PODS)
    assert e.value.code == 400


def test_label_selectors_and_namespace() -> None:
    assert ObjectFilter("ns", parse_label_selector("app in (web,db),!missing")).matches(POD)
    assert not ObjectFilter("other").matches(POD)
    with pytest.raises(StatusError) as e:
        parse_label_selector("app in (")
    assert e.value.code == 400
