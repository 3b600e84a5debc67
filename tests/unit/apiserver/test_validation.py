"""Metadata checks every type shares, as kube-apiserver's ObjectMeta validation has them."""

from apiserver.validation import MAX_ANNOTATIONS_BYTES, validate_metadata


def _too_long(annotations: dict[str, str]) -> bool:
    causes = validate_metadata({"name": "x", "annotations": annotations})
    return any(c.field == "metadata.annotations" and "Too long" in c.message for c in causes)


def test_annotation_size_is_counted_in_raw_bytes_as_kube_counts_it() -> None:
    """Keys and values in UTF-8 bytes: quotes and newlines count once (JSON would double them),
    and a multi-byte character counts as its bytes."""
    key = "example.com/a"
    fits = MAX_ANNOTATIONS_BYTES - len(key)
    assert not _too_long({key: '"' * fits}), "256 KiB of quotes is 256 KiB, not 512 KiB of JSON"
    assert not _too_long({key: "\n" * fits})
    assert _too_long({key: '"' * (fits + 1)})
    assert _too_long({key: "é" * (fits // 2 + 1)}), "é is two bytes"
    assert not _too_long({key: "é" * (fits // 2)})
