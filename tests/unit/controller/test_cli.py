"""`tessera controller` flags become ControllerSettings; bad values are refused before anything runs."""

import argparse
from pathlib import Path

import pytest

from apis.errors import ConfigError
from cli import controller as cli
from cli.main import main


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser.parse_args(argv)


def test_defaults() -> None:
    settings = cli.settings_from(parse())
    assert settings.client.kubeconfig is None
    assert (settings.manager.serving.host, settings.manager.serving.port) == ("0.0.0.0", 9318)
    assert settings.manager.leader_election is None
    assert settings.node_resources.diff_threshold == 0.1
    assert settings.node_resources.max_delay == 300
    settings.validate()


def test_every_flag_reaches_its_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "tessera-controller-7d9f")
    settings = cli.settings_from(
        parse(
            "--kubeconfig", "/tmp/kc",
            "--listen", "127.0.0.1:0",
            "--listen-address-file", "/run/ctl/address",
            "--resync-period", "60",
            "--leader-elect",
            "--leader-elect-resource-name", "ctl",
            "--leader-elect-resource-namespace", "tessera-system",
            "--leader-elect-lease-duration", "30",
            "--leader-elect-renew-deadline", "20",
            "--leader-elect-retry-period", "5",
            "--node-resources-workers", "8",
            "--resource-diff-threshold", "0.05",
            "--resource-max-delay", "60",
        )
    )  # fmt: skip
    assert settings.client.kubeconfig == Path("/tmp/kc")
    serving = settings.manager.serving
    assert (serving.host, serving.port, settings.manager.resync_period) == ("127.0.0.1", 0, 60)
    assert serving.address_file == Path("/run/ctl/address")
    election = settings.manager.leader_election
    assert election is not None
    assert (election.lease_name, election.namespace, election.identity) == (
        "ctl",
        "tessera-system",
        "tessera-controller-7d9f",
    )
    assert (election.lease_duration, election.renew_deadline, election.retry_period) == (30, 20, 5)
    assert (settings.node_resources.workers, settings.node_resources.diff_threshold) == (8, 0.05)
    assert settings.node_resources.max_delay == 60


def test_ipv6_listen_address() -> None:
    assert cli.settings_from(parse("--listen", "[::1]:9318")).manager.serving.host == "::1"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--listen", "9318"), "HOST:PORT"),
        (("--listen", "0.0.0.0:99999"), "0..65535"),
        (("--resource-diff-threshold", "1.5"), "--resource-diff-threshold"),
        (("--leader-elect", "--leader-elect-renew-deadline", "20"), "renew_deadline"),
        (("--resync-period", "-1"), "--resync-period"),
    ],
    ids=["no-port", "port-range", "threshold", "renew-deadline", "resync"],
)
def test_bad_flags_are_config_errors(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        cli.settings_from(parse(*argv)).validate()


def test_run_reports_a_config_error_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["controller", "--listen", "nowhere"]) == 2  # the entry point says it, for every command
    assert "tessera controller: --listen 'nowhere': expected HOST:PORT" in capsys.readouterr().err
