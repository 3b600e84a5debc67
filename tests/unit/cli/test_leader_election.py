"""`tessera scheduler`, `tessera controller` and `tessera descheduler` take the same
leader-election flags, with the same meaning, and refuse timings that cannot work in one line
with exit code 2 before anything starts."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from cli import main
from kube.leaderelection import LeaderElectionSettings

FULL_SET = (
    "--leader-elect",
    "--leader-elect-lease-duration=30s",
    "--leader-elect-renew-deadline=20",
    "--leader-elect-retry-period=5s",
    "--leader-elect-resource-name=my-lease",
    "--leader-elect-resource-namespace=tessera-system",
    "--leader-elect-identity=replica-1",
)
COMPONENTS = ["scheduler", "controller", "descheduler"]


def settings(sub: str, *argv: str) -> Any:
    """The component's settings, built as `tessera SUB ARGV...` builds them."""
    args = main.build_parser(sub).parse_args([sub, *argv])
    return importlib.import_module(main.COMMANDS[sub][0]).settings_from(args)


def election(sub: str, built: Any) -> LeaderElectionSettings | None:
    result: LeaderElectionSettings | None = (
        built.manager.leader_election if sub == "controller" else built.leader_election
    )
    return result


@pytest.mark.parametrize("sub", COMPONENTS)
def test_both_accept_the_full_flag_set(sub: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "not-this-one")  # the flag wins
    built = settings(sub, *FULL_SET)
    built.validate()
    assert election(sub, built) == LeaderElectionSettings(
        "my-lease", "tessera-system", "replica-1", lease_duration=30, renew_deadline=20, retry_period=5
    )


@pytest.mark.parametrize(
    ("sub", "lease"),
    [("scheduler", "tessera-scheduler"), ("controller", "tessera-controller"), ("descheduler", "tessera-descheduler")],
)
def test_each_has_its_own_lease_and_the_same_defaults(sub: str, lease: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "pod-0")
    assert election(sub, settings(sub)) is None
    assert election(sub, settings(sub, "--leader-elect")) == LeaderElectionSettings(lease, "kube-system", "pod-0")


@pytest.mark.parametrize("sub", COMPONENTS)
@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (("--leader-elect-lease-duration=10s",), "lease_duration (10s) must be more than renew_deadline (10s)"),
        (("--leader-elect-renew-deadline=1", "--leader-elect-retry-period=1"), "renew_deadline (1s) must be more"),
        (("--leader-elect-retry-period=0",), "retry_period (0s) must be more than 0"),
    ],
    ids=["lease<=renew", "renew<=retry", "retry<=0"],
)
def test_bad_combinations_are_one_line_and_exit_code_2(
    sub: str, argv: tuple[str, ...], problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main.main([sub, "--kubeconfig=/nonexistent", "--leader-elect", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tessera {sub}: ") and problem in err
    assert f"kube-system/tessera-{sub}" in err  # which Lease
    assert "Traceback" not in err and len(err.splitlines()) == 1
