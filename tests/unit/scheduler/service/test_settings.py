"""Addresses, the default endpoint both sides agree on, settings validation and the command line."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from apis.errors import ConfigError
from cli import scheduler as cli_scheduler
from kube import LeaderElectionSettings
from scheduler.service import (
    ADDRESS_ENV,
    Endpoint,
    GRPCSettings,
    HTTPSettings,
    QueueSettings,
    SchedulerSettings,
    default_address,
)
from scheduler.service.process import load_scheduler_config


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("unix:///run/tessera/scheduler.sock", Endpoint(socket=Path("/run/tessera/scheduler.sock"))),
        ("unix:/tmp/s.sock", Endpoint(socket=Path("/tmp/s.sock"))),
        ("/tmp/s.sock", Endpoint(socket=Path("/tmp/s.sock"))),
        ("127.0.0.1:10260", Endpoint(host="127.0.0.1", port=10260)),
        ("[::1]:10260", Endpoint(host="::1", port=10260)),
        ("scheduler.kube-system:10260", Endpoint(host="scheduler.kube-system", port=10260)),
    ],
    ids=["unix-url", "unix-short", "path", "ipv4", "ipv6", "dns"],
)
def test_endpoints_parse(address: str, expected: Endpoint) -> None:
    assert Endpoint.parse(address) == expected


def test_endpoint_targets() -> None:
    assert Endpoint.parse("/tmp/s.sock").target == "unix:///tmp/s.sock"
    assert Endpoint.parse("[::1]:1").target == "[::1]:1"


@pytest.mark.parametrize("address", ["localhost", "host:port", "unix:relative.sock", ":80", "h:99999"])
def test_bad_endpoints_name_the_address(address: str) -> None:
    with pytest.raises(ConfigError, match="address"):
        Endpoint.parse(address)


def test_default_address_env_then_per_user_socket() -> None:
    assert default_address({ADDRESS_ENV: "10.0.0.1:10260"}, uid=1000) == "10.0.0.1:10260"
    assert default_address({}, uid=0) == "unix:///run/tessera/scheduler.sock"
    assert default_address({"XDG_RUNTIME_DIR": "/run/user/1000"}, uid=1000) == (
        "unix:///run/user/1000/tessera/scheduler.sock"
    )
    assert default_address({}, uid=1000) == "unix:///tmp/tessera-1000/scheduler.sock"


def test_validation_lists_every_problem() -> None:
    settings = SchedulerSettings(
        grpc=GRPCSettings(address="nowhere"),
        http=HTTPSettings(address="no-port", debug_top_n_scores=-1),
        queue=QueueSettings(initial_backoff=5, max_backoff=1),
        leader_election=LeaderElectionSettings("x", lease_duration=1, renew_deadline=2, retry_period=3),
    )
    with pytest.raises(ConfigError) as e:
        settings.validate()
    message = str(e.value)
    for part in ("grpc: address 'nowhere'", "http: address 'no-port'", "debug_top_n_scores", "initial_backoff", "x"):
        assert part in message


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli_scheduler.add_arguments(parser)
    return parser.parse_args(argv)


def test_flags_become_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ADDRESS_ENV, "unix:///tmp/from-env.sock")
    settings = cli_scheduler.settings_from(
        parse(
            "--kubeconfig",
            "/k",
            "--leader-elect",
            "--leader-elect-lease-duration=6",
            "--leader-elect-renew-deadline=4",
            "--leader-elect-retry-period=1",
            "--http-address=0.0.0.0:10251",
            "--debug-scores=5",
            "--pod-max-backoff=20",
            "--bind-workers=3",
        )
    )
    assert settings.client.kubeconfig == Path("/k")
    assert settings.grpc.address == "unix:///tmp/from-env.sock"
    election = settings.leader_election
    assert election is not None and (election.lease_duration, election.renew_deadline, election.retry_period) == (
        6,
        4,
        1,
    )
    assert election.lease_name == "tessera-scheduler" and election.namespace == "kube-system"
    assert settings.http == HTTPSettings("0.0.0.0:10251", 5)
    assert settings.queue.max_backoff == 20 and settings.binder.workers == 3
    settings.validate()


def test_grpc_flag_wins_over_the_environment_and_tls_flags_go_together(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ADDRESS_ENV, "unix:///tmp/from-env.sock")
    assert cli_scheduler.settings_from(parse("--grpc-address", "127.0.0.1:1")).grpc.address == "127.0.0.1:1"
    assert cli_scheduler.settings_from(parse("--grpc-address", "")).grpc.endpoint() is None
    with pytest.raises(ConfigError, match="go together"):
        cli_scheduler.settings_from(parse("--grpc-tls-cert", "/c"))
    tls = cli_scheduler.settings_from(parse("--grpc-tls-cert", "/c", "--grpc-tls-key", "/k")).grpc.tls
    assert tls is not None and tls.client_ca is None


def test_the_config_file_is_read_and_its_problems_named(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(
        "profiles:\n  - schedulerName: gpu-pack\n    pluginConfig:\n      - name: DeviceShare\n"
        "        args: {scoringStrategy: {type: MostAllocated}}\n"
    )
    config = load_scheduler_config(SchedulerSettings(config_file=good))
    assert [p.scheduler_name for p in config.profiles] == ["gpu-pack"]
    assert load_scheduler_config(SchedulerSettings()).profiles[0].scheduler_name == "tessera-scheduler"
    bad = tmp_path / "bad.yaml"
    bad.write_text("profiles: [{schedulerName: x, plugins: {nope: {}}}]\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: .*nope: unknown extension point"):
        load_scheduler_config(SchedulerSettings(config_file=bad))
    with pytest.raises(ConfigError, match="cannot read the scheduler config"):
        load_scheduler_config(SchedulerSettings(config_file=tmp_path / "missing.yaml"))
