"""The leader-election flag set: Kubernetes' names and defaults, its duration and boolean syntax,
the identity's precedence, and timings that cannot work refused with every problem named."""

from __future__ import annotations

import argparse
import re

import pytest

from apis.errors import ConfigError
from kube import leaderelectionflags
from kube.leaderelection import LeaderElectionSettings


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    leaderelectionflags.add_arguments(parser, lease_name="my-lease")
    return parser.parse_args(argv)


def test_off_by_default() -> None:
    assert leaderelectionflags.settings_from(parse()) is None
    assert leaderelectionflags.settings_from(parse("--leader-elect=false")) is None


def test_kubernetes_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "pod-7")
    assert leaderelectionflags.settings_from(parse("--leader-elect")) == LeaderElectionSettings(
        lease_name="my-lease",
        namespace="kube-system",
        identity="pod-7",
        lease_duration=15,
        renew_deadline=10,
        retry_period=2,
    )


def test_kube_scheduler_syntax_durations_and_booleans() -> None:
    settings = leaderelectionflags.settings_from(
        parse(
            "--leader-elect=true",
            "--leader-elect-lease-duration=1m",
            "--leader-elect-renew-deadline=30s",
            "--leader-elect-retry-period=500ms",
            "--leader-elect-resource-name=l",
            "--leader-elect-resource-namespace=ns",
            "--leader-elect-identity=me",
        )
    )
    assert settings == LeaderElectionSettings("l", "ns", "me", lease_duration=60, renew_deadline=30, retry_period=0.5)


@pytest.mark.parametrize(("flag", "expected"), [("me", "me"), ("", "pod-7")], ids=["flag", "empty-flag"])
def test_the_identity_flag_wins_over_pod_name(flag: str, expected: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "pod-7")
    settings = leaderelectionflags.settings_from(parse("--leader-elect", f"--leader-elect-identity={flag}"))
    assert settings is not None and settings.identity == expected


def test_without_flag_or_pod_name_the_identity_is_host_random(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_NAME", raising=False)
    first, second = (leaderelectionflags.settings_from(parse("--leader-elect")) for _ in range(2))
    assert first is not None and second is not None and first.identity != second.identity


def test_timings_that_cannot_work_name_every_problem() -> None:
    with pytest.raises(ConfigError) as e:
        leaderelectionflags.settings_from(
            parse("--leader-elect", "--leader-elect-lease-duration=5", "--leader-elect-retry-period=0")
        )
    assert str(e.value) == (
        "leader election kube-system/my-lease: retry_period (0s) must be more than 0; "
        "lease_duration (5s) must be more than renew_deadline (10s)"
    )


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (("--leader-elect-renew-deadline=2",), "renew_deadline (2s) must be more than retry_period (2s)"),
        (("--leader-elect-lease-duration=10s",), "lease_duration (10s) must be more than renew_deadline (10s)"),
        (("--leader-elect-retry-period=-1",), "retry_period (-1s) must be more than 0"),
        (("--leader-elect-resource-name=",), "lease_name is empty"),
        (("--leader-elect-resource-namespace=",), "namespace is empty"),
    ],
    ids=["renew=retry", "lease=renew", "negative", "no-name", "no-namespace"],
)
def test_each_rule_can_refuse(argv: tuple[str, ...], problem: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(problem)):
        leaderelectionflags.settings_from(parse("--leader-elect", *argv))


def test_bad_timings_are_ignored_without_leader_elect() -> None:
    assert leaderelectionflags.settings_from(parse("--leader-elect-lease-duration=1")) is None


@pytest.mark.parametrize(
    "argv", [("--leader-elect-lease-duration=soon",), ("--leader-elect-retry-period=nan",), ("--leader-elect=maybe",)]
)
def test_values_that_do_not_parse_are_usage_errors(argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        parse(*argv)
    assert e.value.code == 2
    assert argv[0].split("=")[0] in capsys.readouterr().err
