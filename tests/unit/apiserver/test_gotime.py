"""Go's time.Parse of RFC3339 and RFC3339Micro, as kube decodes metav1.Time and MicroTime: what
parses, and Go's words for what does not."""

from __future__ import annotations

import pytest

from apiserver.schema.gotime import LAYOUT, MICRO_LAYOUT, problem


@pytest.mark.parametrize(
    "value",
    [
        "2024-01-02T03:04:05Z",
        "2024-01-02T03:04:05.5Z",
        "2024-01-02T03:04:05,123456789Z",
        "2024-01-02T03:04:05+02:00",
        "2024-01-02T03:04:05-24:00",
        "2024-01-02T3:04:05Z",
        "2024-02-29T00:00:00Z",
    ],
)
def test_rfc3339_takes_any_fraction_and_offset(value: str) -> None:
    assert problem(value) == ""


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ("", 'cannot parse "" as "2006"'),
        ("yesterday", 'cannot parse "yesterday" as "2006"'),
        ("2024-01-02", 'cannot parse "" as "T"'),
        ("2024-01-02 03:04:05Z", 'cannot parse " 03:04:05Z" as "T"'),
        ("2024-1-02T03:04:05Z", 'cannot parse "1-02T03:04:05Z" as "01"'),
        ("2024-01-02T03:04:05", 'cannot parse "" as "Z07:00"'),
        ("2024-01-02T03:04:05+0200", 'cannot parse "+0200" as "Z07:00"'),
    ],
)
def test_a_malformed_time_names_the_element_go_stopped_at(value: str, detail: str) -> None:
    assert problem(value) == f'parsing time "{value}" as "{LAYOUT}": {detail}'


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ("2024-13-01T00:00:00Z", "month out of range"),
        ("2023-02-29T00:00:00Z", "day out of range"),
        ("2024-01-02T24:00:00Z", "hour out of range"),
        ("2024-01-02T03:60:00Z", "minute out of range"),
        ("2024-01-02T03:04:61Z", "second out of range"),
        ("2024-01-02T03:04:05+25:00", "time zone offset hour out of range"),
        ("2024-01-02T03:04:05Zjunk", 'extra text: "junk"'),
    ],
)
def test_go_range_checks(value: str, detail: str) -> None:
    assert problem(value) == f'parsing time "{value}": {detail}'


def test_micro_time_wants_exactly_six_digits_of_fraction() -> None:
    assert problem("2024-01-02T03:04:05.123456Z", micro=True) == ""
    assert problem("2024-01-02T03:04:05.000000+01:00", micro=True) == ""
    head = f'as "{MICRO_LAYOUT}": cannot parse'
    assert problem("2024-01-02T03:04:05Z", micro=True).endswith(f'{head} "Z" as ".000000"')
    assert problem("2024-01-02T03:04:05.123Z", micro=True).endswith(f'{head} ".123Z" as ".000000"')
    assert problem("2024-01-02T03:04:05.1234567Z", micro=True).endswith(f'{head} "7Z" as "Z07:00"')


def test_quotes_are_escaped_as_go_quotes_them() -> None:
    assert problem('"x') == f'parsing time "\\"x" as "{LAYOUT}": cannot parse "\\"x" as "2006"'
