from pathlib import Path

import pytest

from apis.errors import ConfigError
from runtimeproxy import ProxySettings
from runtimeproxy.passthrough import UNARY_METHODS


def test_defaults_are_valid() -> None:
    ProxySettings().validate()


def test_every_problem_is_reported_at_once() -> None:
    settings = ProxySettings(
        listen=Path("/run/p.sock"),
        runtime_endpoint="unix:///run/p.sock",
        image_endpoint="tcp://x",
        hook_timeout_s=0,
        max_workers=1,
    )
    with pytest.raises(ConfigError) as info:
        settings.validate()
    message = str(info.value)
    for part in (
        "runtime_endpoint 'unix:///run/p.sock' is the proxy's own listen socket",
        "image_endpoint:",
        "hook_timeout_s must be > 0",
        "max_workers must be >= 2",
    ):
        assert part in message


def test_passthrough_knows_which_methods_are_unary() -> None:
    assert "/runtime.v1.RuntimeService/Version" in UNARY_METHODS
    assert "/runtime.v1alpha2.ImageService/PullImage" in UNARY_METHODS
    assert "/runtime.v1.RuntimeService/GetContainerEvents" not in UNARY_METHODS
