"""The reservation-affinity annotation: Koordinator's fields, precise errors."""

from __future__ import annotations

import pytest

from apis.errors import AnnotationError
from apis.extension import names
from apis.extension.reservationaffinity import from_pod_annotations

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
