"""The reservation-affinity annotation: Koordinator's fields, precise errors."""

from __future__ import annotations

import pytest

from apis.errors import AnnotationError
from apis.extension import names
from apis.extension.reservationaffinity import from_pod_annotations
from apis.k8s.core import Taint

KEY = names.ANNOTATION_RESERVATION_AFFINITY


def test_absent_is_none_and_each_field_constrains() -> None:
    assert from_pod_annotations({}) is None
    by_name = from_pod_annotations({KEY: '{"name": "r1"}'})
    assert by_name is not None and by_name.matches("r1", {}) and not by_name.matches("r2", {})
    by_labels = from_pod_annotations({KEY: '{"reservationSelector": {"team": "a"}}'})
    assert by_labels is not None and by_labels.matches("x", {"team": "a"}) and not by_labels.matches("x", {})
    terms = from_pod_annotations(
        {
            KEY: '{"requiredDuringSchedulingIgnoredDuringExecution": {"reservationSelectorTerms": ['
            '{"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]},'
            '{"matchExpressions": [{"key": "spare", "operator": "Exists"}]}]}}'
        }
    )
    assert terms is not None
    assert terms.matches("x", {"tier": "gold"}) and terms.matches("x", {"spare": ""})
    assert not terms.matches("x", {"tier": "silver"})


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("not json", "not valid JSON"),
        ('{"name": 3}', "name must be a string"),
        ('{"reservationSelector": {"a": 1}}', "reservationSelector"),
        (
            '{"requiredDuringSchedulingIgnoredDuringExecution": {"reservationSelectorTerms": '
            '[{"matchExpressions": [{"key": "a", "operator": "Near"}]}]}}',
            "reservationSelectorTerms[0].matchExpressions[0].operator",
        ),
    ],
    ids=["json", "name", "selector", "operator"],
)
def test_malformed_annotations_say_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(AnnotationError, match=".*") as caught:
        from_pod_annotations({KEY: text}, obj="pod default/p")
    assert says in str(caught.value) and KEY in str(caught.value)


def test_name_alone_counts_and_an_empty_value_still_requires_a_reservation() -> None:
    named = from_pod_annotations({KEY: '{"name": "r1", "reservationSelector": {"team": "a"}}'})
    assert named is not None and named.matches("r1", {}) and not named.matches("r2", {"team": "a"})
    empty = from_pod_annotations({KEY: ""})
    assert empty is not None and empty.matches("any", {})  # present: only Reservations, any of them
    no_terms = from_pod_annotations({KEY: '{"requiredDuringSchedulingIgnoredDuringExecution": {}}'})
    assert no_terms is not None and not no_terms.matches("any", {})  # no term matches nothing


def test_match_fields_select_the_reservation_by_name() -> None:
    doc = (
        '{"requiredDuringSchedulingIgnoredDuringExecution": {"reservationSelectorTerms": ['
        '{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["r1"]}]}]}}'
    )
    affinity = from_pod_annotations({KEY: doc})
    assert affinity is not None and affinity.matches("r1", {}) and not affinity.matches("r2", {})


def test_tolerations_tolerate_taints_and_unschedulable() -> None:
    dedicated = Taint("dedicated", "infer", "NoSchedule")
    evicting = Taint("gone", "", "NoExecute")
    preferred = Taint("soft", "", "PreferNoSchedule")
    none = from_pod_annotations({KEY: "{}"})
    assert none is not None and none.untolerated((preferred, dedicated)) == dedicated
    assert not none.tolerates_unschedulable
    doc = (
        '{"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infer", "effect": "NoSchedule"},'
        '{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"},'
        '{"key": "gone", "operator": "Sometimes"}]}'
    )
    tolerant = from_pod_annotations({KEY: doc})
    assert tolerant is not None and tolerant.tolerates_unschedulable
    # An operator Kubernetes does not know tolerates nothing (not an error, as in Koordinator).
    assert tolerant.untolerated((preferred, dedicated, evicting)) == evicting
