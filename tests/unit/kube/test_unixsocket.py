from pathlib import Path

import pytest

from apis.errors import ConfigError
from kube import unixsocket


@pytest.mark.parametrize(
    "endpoint", ["/run/x.sock", "unix:///run/x.sock", "unix:/run/x.sock", " /run/x.sock "], ids=str
)
def test_endpoint_forms(endpoint: str) -> None:
    assert unixsocket.path_of(endpoint) == Path("/run/x.sock")
    assert unixsocket.target(endpoint) == "unix:///run/x.sock"


@pytest.mark.parametrize("endpoint", ["run/x.sock", "tcp://127.0.0.1:1", "", "unix://relative"], ids=repr)
def test_other_endpoints_are_rejected(endpoint: str) -> None:
    with pytest.raises(ConfigError, match="expected an absolute unix socket path"):
        unixsocket.path_of(endpoint)


def test_claim_creates_the_directory_and_release_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b.sock"
    unixsocket.claim(path)
    assert path.parent.is_dir()
    unixsocket.release(path)
