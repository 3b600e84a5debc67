"""Koordinator conformance: the examples of Koordinator's user manuals, applied verbatim (apart
from node names) to one `tessera up` with the real kubectl, and checked against what each manual
says happens. One module per manual (`test_<manual>.py`); every example lives in its own
namespace, so the modules share this one cluster.

The examples are written here from the manuals (koordinator-sh/website, docs/user-manuals) as
facts, not copied. Where a manual is wrong as written (kubectl refuses it), the test says so.
What differs from a manual's YAML: node names (this cluster's), and the namespace (`default`
in the manuals; here each example's own, given to kubectl with `-n`, so `metadata.namespace`
and `namespace/name` references name it). Objects without a namespace (Nodes, Devices,
PodMigrationJobs) and ElasticQuotas (whose names are cluster-wide) are deleted by the test that
made them, so the modules do not disturb one another.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.koordinator.koord import Koord
from tests.support import sockets
from tests.support.up import Up


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every conformance test drives `tessera up` as a user: it runs with the end-to-end tests."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="package")
def koord() -> Iterator[Koord]:
    """One `tessera up` (two simulated 8 × A100 nodes with RDMA, no local agent) for the suite."""
    directory = sockets.short_tempdir("tessera-koord-")
    try:
        with Up.started(directory / "data", "--nodes", "2", "--profile", "a100-8x", "--no-local-agent") as up:
            yield Koord(up)
            assert up.forbidden_calls() == [], "a component called what its role in deploy/ lacks"
            assert up.interrupt() == 0, up.output()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
