"""Status messages cut to what gRPC's trailers carry, at a character boundary."""

import pytest

from kube import grpcstatus


def test_a_message_that_fits_is_kept_whole() -> None:
    text = "collision: 50% of GPU 3 is held by pod ml/a"
    assert grpcstatus.details(text) == text
    assert grpcstatus.encoded_length(text) == len(text) + 2  # '%' is sent as %25


@pytest.mark.parametrize("char", ["x", "%", "é", "🙂"])
def test_a_long_message_is_cut_within_the_limit_at_a_character(char: str) -> None:
    text = "refused: " + char * 10_000
    cut = grpcstatus.details(text, limit=1000)
    assert grpcstatus.encoded_length(cut) <= 1000
    head, _, tail = cut.rpartition("... (")
    assert text.startswith(head) and grpcstatus.encoded_length(cut) > 980  # as much as fits
    assert tail == f"{len(text.encode()) - len(head.encode())} bytes cut)"
