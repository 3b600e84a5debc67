import io
import json
import logging
import re

import pytest

from kube import logs


@pytest.fixture
def stream() -> io.StringIO:
    out = io.StringIO()
    yield out
    logs.setup(2)  # restore the default handler on stderr


def test_text_format_is_klog_like_with_fields(stream: io.StringIO) -> None:
    logs.setup(4, "text", stream)
    logging.getLogger("t").log(logs.V(2), "Bound pod", extra={"pod": "default/a", "node": "n1", "gpus": 2})
    line = stream.getvalue().strip()
    assert re.fullmatch(
        r'I\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ test_logs\.py:\d+\] "Bound pod" pod="default/a" node="n1" gpus=2', line
    ), line


def test_verbosity_filters(stream: io.StringIO) -> None:
    logs.setup(2, "text", stream)
    log = logging.getLogger("t")
    log.log(logs.V(4), "too detailed")
    log.log(logs.V(2), "state change")
    assert "too detailed" not in stream.getvalue()
    assert "state change" in stream.getvalue()


def test_json_format(stream: io.StringIO) -> None:
    logs.setup(2, "json", stream)
    logging.getLogger("t").warning("Bad annotation", extra={"pod": "ns/p"})
    doc = json.loads(stream.getvalue())
    assert (doc["level"], doc["msg"], doc["pod"], doc["logger"]) == ("warning", "Bad annotation", "ns/p", "t")


def test_unknown_format_is_an_error() -> None:
    with pytest.raises(ValueError, match="xml"):
        logs.setup(2, "xml")
