"""What every component process does at its edges: publish its address, stop on a signal.

(The agent and the scheduler still carry their own signal handling: theirs also wake loops.)
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "read_versioned",
    "stop_on_signals",
    "wait_until_set",
    "write_atomically",
    "write_durably",
    "write_versioned",
]

T = TypeVar("T")

#: How often a waiting main thread looks for a signal handler to run (seconds).
_SIGNAL_POLL_S = 0.5

log = logging.getLogger(__name__)


def write_atomically(path: Path, text: str) -> None:
    """Readers (a parent waiting for the address file) see the whole content or no file at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    os.replace(partial, path)


def write_durably(path: Path, text: str) -> None:
    """Replace `path` with `text` atomically and durably, for state that must survive a crash or
    a power cut: a temporary file in the same directory, fsync, rename over the old one, fsync
    of the directory; what is left is the old file or the new one, never half of one. Raises
    OSError (full disk, read-only directory); the old file is then left as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a power cut
    finally:
        os.close(directory)


def write_versioned(path: Path, version: int, body: Mapping[str, Any]) -> None:
    """A state file `{"version": N, ...body}` as JSON, written durably (raises OSError)."""
    write_durably(path, json.dumps({"version": version, **body}, indent=1) + "\n")


def read_versioned(path: Path, version: int, parse: Callable[[Mapping[str, Any]], T]) -> T | None:
    """What `parse` makes of the state file `write_versioned` wrote; None without a file. Raises
    ValueError saying why for a file that cannot be read, is of another version, or that `parse`
    cannot take (its KeyError, TypeError, ValueError or AttributeError)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"cannot read: {e}") from e
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict) or doc.get("version") != version:
            raise ValueError(f"expected an object with version {version}")
        return parse(doc)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"not what was written ({e})") from e


@contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """An event set by SIGTERM or SIGINT while inside (main thread only); the previous handlers come back after."""
    stop = threading.Event()

    def handle(signum: int, _frame: Any) -> None:
        log.info("Signal received; stopping", extra={"signal": signal.Signals(signum).name})
        stop.set()

    previous = {s: signal.signal(s, handle) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def wait_until_set(event: threading.Event) -> None:
    """Block the main thread until `event` is set, in slices. The kernel may hand SIGTERM to any
    thread that does not block it (gRPC's threads do not), and CPython runs the Python handler
    only when the main thread next executes bytecode: an untimed wait would sleep through it
    and the process would be killed after its grace period (seen once in CI: the scheduler)."""
    while not event.wait(_SIGNAL_POLL_S):
        pass
