"""Real containerd + runc, real hook servers, the real proxy: fixtures for the proxy's integration tests
(the hook servers and the rig are in rig.py).

One private containerd serves the whole session (`ctrd`, in tests/conftest.py); each test gets
a `rig` with its own hook config directory and sockets, starts the hook servers and the proxy it
needs, and talks to the proxy with a CRI client that plays kubelet. At teardown every pod the test made is removed
and every server stopped, whether the test passed or not.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.runtimeproxy.rig import Rig
from tests.support import containerd, sockets


@pytest.fixture
def rig(ctrd: containerd.Containerd) -> Iterator[Rig]:
    with sockets.temporary("tessera-rig-") as workdir:
        instance = Rig(ctrd, workdir)
        try:
            yield instance
        finally:
            instance.close()
