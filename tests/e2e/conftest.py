"""End-to-end fixtures: `tessera up` in the background on a short data directory of its own
(tests/support/up.py drives it; tests/e2e/workloads.py has the pods the tests submit)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import sockets
from tests.support.up import Cluster, Up, module_up


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    """A short directory (unix socket paths must stay under 108 bytes) with the data directory."""
    directory = sockets.short_tempdir("tessera-e2e-")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def up(workdir: Path) -> Iterator[Up]:
    """`tessera up` with 3 simulated 8-GPU nodes (and this machine), for the module's tests."""
    with module_up(workdir) as running:
        yield running


@pytest.fixture
def start_up() -> Iterator[Callable[..., Up]]:
    """Start `tessera up`s (`start_up(data_dir, "--demo")`); whatever a test leaves running of
    them is stopped at its end."""
    started: list[Up] = []

    def start(data_dir: Path, *args: str) -> Up:
        up = Up(data_dir, args)
        started.append(up)
        up.start()
        return up

    yield start
    for up in started:
        up.cleanup()


@pytest.fixture(scope="module")
def cluster(up: Up) -> Iterator[Cluster]:
    with up.cluster() as view:
        yield view
