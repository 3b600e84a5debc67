import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apis.errors import ValidationError
from apis.k8s.labels import LabelSelector, Operator, Requirement, parse_selector

LABELS = {"app": "web", "tier": "front", "gpus": "8"}


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app!=web", False),
        ("missing!=x", True),
        ("app in (web, db)", True),
        ("app notin (web)", False),
        ("missing notin (web)", True),
        ("tier", True),
        ("!tier", False),
        ("!missing", True),
        ("app=web,tier=back", False),
        ("app in (web,db),tier", True),
        ("gpus>4", True),
        ("gpus<4", False),
        ("app>4", False),
    ],
)
def test_string_selectors(text: str, matches: bool) -> None:
    assert parse_selector(text).matches(LABELS) is matches


@pytest.mark.parametrize("bad", ["app=", "=web", "app in web", "a=b=c", ",", "app=web,", "app>x", "a b"])
def test_bad_string_selectors(bad: str) -> None:
    # "app=" is valid in Kubernetes (empty value), the rest are not
    if bad == "app=":
        assert parse_selector(bad).requirements == (Requirement("app", Operator.IN, ("",)),)
        return
    with pytest.raises(ValidationError):
        parse_selector(bad)


def test_structured_selector() -> None:
    sel = LabelSelector.from_dict(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "mid"]},
                {"key": "old", "operator": "DoesNotExist"},
            ],
        }
    )
    assert sel.matches(LABELS)
    assert not sel.matches({**LABELS, "old": "yes"})
    assert LabelSelector({}).matches({})


@pytest.mark.parametrize(
    "expr",
    [
        {"key": "a", "operator": "In"},
        {"key": "a", "operator": "Exists", "values": ["x"]},
        {"key": "a", "operator": "Gt", "values": ["1"]},
        {"key": "", "operator": "Exists"},
    ],
)
def test_structured_selector_validation(expr: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        LabelSelector.from_dict({"matchExpressions": [expr]})


@given(st.text(max_size=40))
def test_arbitrary_text_raises_only_validation_error(text: str) -> None:
    with contextlib.suppress(ValidationError):
        parse_selector(text)
