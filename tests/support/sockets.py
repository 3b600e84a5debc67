"""Short temporary directories for unix sockets, and a free loopback port.

A unix socket path must fit in 108 bytes; pytest's `tmp_path` (`/tmp/pytest-of-root/pytest-N/
test_some_long_name0/...`) often does not, so tests that bind sockets use these instead.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["free_port", "remove_socket", "short_tempdir", "temporary"]


def short_tempdir(prefix: str = "tessera-") -> Path:
    """Create a new directory directly under /tmp; the caller removes it."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


@contextlib.contextmanager
def temporary(prefix: str = "tessera-") -> Iterator[Path]:
    """A short directory removed with everything in it on exit."""
    path = short_tempdir(prefix)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def remove_socket(path: Path) -> None:
    """Delete `path` if it is a unix socket (and leave anything else alone)."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(path.lstat().st_mode):
            path.unlink()


def free_port() -> int:
    """A loopback port nothing listens on now (for `--port`; taken again by chance only rarely)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
