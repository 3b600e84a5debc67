"""Settings that cannot work are refused before anything starts, every problem at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from apis.errors import ConfigError
from dashboard import DashboardSettings


def test_defaults_are_valid_and_bind_loopback() -> None:
    settings = DashboardSettings()
    settings.validate()
    assert settings.host == "127.0.0.1"


def test_every_problem_is_named() -> None:
    settings = DashboardSettings(
        port=70000,
        poll_interval=0,
        explain_limit=-1,
        scheduler_metrics_url="ftp://x",
        scheduler_address_file=Path("a"),
    )
    with pytest.raises(ConfigError) as caught:
        settings.validate()
    message = str(caught.value)
    for part in ("port 70000", "--poll-interval 0", "--explain-limit -1", "ftp://x", "give one, not both"):
        assert part in message
