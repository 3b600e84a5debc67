import pytest
from hypothesis import given
from hypothesis import strategies as st

from apis.errors import ValidationError
from apis.extension import names
from apis.k8s import quantity, resources


def test_parse_list_uses_base_units() -> None:
    parsed = resources.parse_list({"cpu": "1500m", "memory": "1Gi", names.GPU_CORE: "50", "pods": 110})
    assert parsed == {"cpu": 1500, "memory": 2**30, names.GPU_CORE: 50, "pods": 110}


def test_parse_list_names_the_bad_field() -> None:
    with pytest.raises(ValidationError) as e:
        resources.parse_list({"cpu": "lots"}, field="spec.containers[0].resources.requests", obj="pod default/a")
    assert "spec.containers[0].resources.requests[cpu]" in str(e.value)
    assert "pod default/a" in str(e.value)


def test_format_list_sorted_canonical() -> None:
    out = resources.format_list({names.GPU_MEMORY: 40 * 2**30, "cpu": 2500, names.GPU_CORE: 50})
    assert list(out) == sorted(out)
    assert out == {"cpu": "2500m", names.GPU_CORE: "50", names.GPU_MEMORY: "40Gi"}


def test_arithmetic() -> None:
    a, b = {"cpu": 1000, "memory": 10}, {"cpu": 500, "x": 1}
    assert resources.add(a, b) == {"cpu": 1500, "memory": 10, "x": 1}
    assert resources.sub(a, b) == {"cpu": 500, "memory": 10, "x": -1}
    assert resources.max_of(a, b) == {"cpu": 1000, "memory": 10, "x": 1}
    assert resources.sum_of([a, b, b]) == {"cpu": 2000, "memory": 10, "x": 2}
    assert resources.scale(b, 3) == {"cpu": 1500, "x": 3}
    assert a == {"cpu": 1000, "memory": 10}  # inputs untouched


def test_insufficient_lists_names() -> None:
    assert resources.insufficient({"cpu": 100, "memory": 5}, {"cpu": 100, "memory": 4}) == ["memory"]
    assert resources.insufficient({"cpu": 0, "gpu": 1}, {}) == ["gpu"]
    assert resources.insufficient({}, {}) == []
    assert resources.is_zero({"a": 0}) and not resources.is_zero({"a": 1})


@given(
    name=st.sampled_from(["cpu", "memory", names.GPU_CORE]),
    number=st.integers(min_value=0, max_value=10**18).map(str),
    suffix=st.sampled_from(["", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e3", "u"]),
)
def test_fast_path_agrees_with_the_exact_parser(name: str, number: str, suffix: str) -> None:
    text = number + suffix
    exact = quantity.parse(text)
    assert resources.to_int(name, text) == (exact.milli_value() if name == "cpu" else exact.value())
