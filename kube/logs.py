"""Logging set up once for every Tessera process, in the Kubernetes style.

klog-like verbosity: `V(n)` is the level for `--v=n` detail (V0–1 start-up and config, V2 state
changes, V4 per-node/plugin decisions, V5 traces). Messages stay constant and data goes in
`extra=` fields, rendered as `key="value"` text (klog's structured format) or, with
`--logging-format=json`, one JSON object per line.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Final

__all__ = ["FORMATS", "V", "setup"]

FORMATS: Final = ("text", "json")

_STANDARD_ATTRS = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


def V(n: int) -> int:
    """The logging level for verbosity n (V(0) == INFO; higher n is more detail)."""
    return logging.INFO - n


def _fields(record: logging.LogRecord) -> dict[str, object]:
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD_ATTRS and not k.startswith("_")}


def _severity(levelno: int) -> str:
    if levelno >= logging.ERROR:
        return "E"
    if levelno >= logging.WARNING:
        return "W"
    return "I"


class TextFormatter(logging.Formatter):
    """`I1121 02:54:00.123456 1234 scheduler.py:42] "Bound pod" pod="default/a" node="n1"`."""

    def format(self, record: logging.LogRecord) -> str:
        micros = int(record.created % 1 * 1_000_000)
        ts = time.strftime("%m%d %H:%M:%S", time.localtime(record.created)) + f".{micros:06d}"
        head = f"{_severity(record.levelno)}{ts} {record.process:>7} {record.filename}:{record.lineno}]"
        parts = [head, json.dumps(record.getMessage(), ensure_ascii=False)]
        parts += [f"{k}={_render(v)}" for k, v in _fields(record).items()]
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, object] = {
            "ts": record.created,
            "level": record.levelname.lower() if record.levelno >= logging.INFO else "debug",
            "v": max(0, logging.INFO - record.levelno),
            "caller": f"{record.filename}:{record.lineno}",
            "logger": record.name,
            "msg": record.getMessage(),
        }
        doc.update({k: _jsonable(v) for k, v in _fields(record).items()})
        if record.exc_info:
            doc["err"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


def _render(value: object) -> str:
    if isinstance(value, (int, float, bool)):
        return str(value)
    return json.dumps(str(value), ensure_ascii=False)


def _jsonable(value: object) -> object:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def setup(verbosity: int = 2, fmt: str = "text", stream: object = None) -> None:
    """Configure the root logger once per process. Idempotent: re-running replaces the handler."""
    if fmt not in FORMATS:
        raise ValueError(f"logging format {fmt!r} is not one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler(stream or sys.stderr)  # type: ignore[arg-type]  # any writable stream
    handler.setFormatter(JSONFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(V(max(0, verbosity)))
    # Third-party libraries stay at WARNING unless asked for traces.
    for noisy in ("urllib3", "kubernetes", "aiohttp.access", "asyncio", "grpc", "pyroute2"):
        logging.getLogger(noisy).setLevel(logging.WARNING if verbosity < 6 else logging.DEBUG)
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
