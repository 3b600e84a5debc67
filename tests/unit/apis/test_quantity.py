import contextlib
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apis.errors import QuantityError
from apis.k8s import quantity


@pytest.mark.parametrize(
    ("text", "amount", "canonical"),
    [
        ("100m", Fraction(1, 10), "100m"),
        ("16Gi", 16 * 2**30, "16Gi"),
        ("1.5", Fraction(3, 2), "1500m"),
        ("2e3", 2000, "2e3"),
        ("1k", 1000, "1k"),
        ("2000", 2000, "2k"),
        ("1500", 1500, "1500"),
        ("1024Mi", 2**30, "1Gi"),
        ("0.5Gi", 2**29, "512Mi"),
        ("1023", 1023, "1023"),
        ("512Ki", 512 * 1024, "512Ki"),
        ("100Ki", 102400, "100Ki"),
        ("1e-3", Fraction(1, 1000), "1e-3"),
        ("0.0000000001", Fraction(1, 10**9), "1n"),  # below nano rounds up
        ("-1.5Gi", -3 * 2**29, "-1536Mi"),
        (".5", Fraction(1, 2), "500m"),
        ("5.", 5, "5"),
        ("+7", 7, "7"),
        ("1E", 10**18, "1E"),
        ("1Ei", 2**60, "1Ei"),
        ("0", 0, "0"),
        ("0Gi", 0, "0"),
        ("12e20", 12 * 10**20, "1200e18"),
        ("3000E", 3 * 10**21, "3000E"),
    ],
)
def test_parse_and_canonical_form(text: str, amount: Fraction, canonical: str) -> None:
    q = quantity.parse(text)
    assert q.amount == amount
    assert str(q) == canonical


@pytest.mark.parametrize(
    "bad", ["", "abc", "1.2.3", "1Gb", "1 Gi", "--1", "1e", "5Mi3", "1e1000", "٣", "1_000", "x" * 200]
)
def test_rejects_non_quantities(bad: str) -> None:
    with pytest.raises(QuantityError):
        quantity.parse(bad)


@pytest.mark.parametrize("bad", [None, True, [], {}, float("nan"), float("inf")])
def test_rejects_non_strings(bad: object) -> None:
    with pytest.raises(QuantityError):
        quantity.parse(bad)


def test_json_numbers() -> None:
    assert quantity.parse(3).amount == 3
    assert str(quantity.parse(0.25)) == "250m"


def test_value_rounds_up() -> None:
    assert quantity.parse("1500m").value() == 2
    assert quantity.parse("1.0001").milli_value() == 1001
    assert quantity.parse("250m").milli_value() == 250


def test_arithmetic_is_exact() -> None:
    total = quantity.parse("0")
    for _ in range(10):
        total = total + quantity.parse("0.1")
    assert total == quantity.parse("1")
    assert quantity.parse("1Gi") - quantity.parse("512Mi") == quantity.parse("512Mi")
    assert quantity.parse("1k") > quantity.parse("999")
    assert hash(quantity.parse("1k")) == hash(quantity.parse("1000"))


numbers = st.one_of(
    st.integers(min_value=0, max_value=10**15).map(str),
    st.decimals(min_value=0, max_value=10**9, places=4, allow_nan=False).map(str),
)
suffixes = st.sampled_from(
    ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e3", "e-3", "E6", "e0"]
)


@given(sign=st.sampled_from(["", "+", "-"]), number=numbers, suffix=suffixes)
def test_parse_format_parse_is_identity(sign: str, number: str, suffix: str) -> None:
    q = quantity.parse(sign + number + suffix)
    again = quantity.parse(str(q))
    assert again == q
    assert str(again) == str(q)  # canonical form is a fixed point


@given(st.text(max_size=40))
def test_arbitrary_text_raises_only_quantity_error(text: str) -> None:
    with contextlib.suppress(QuantityError):
        quantity.parse(text)
