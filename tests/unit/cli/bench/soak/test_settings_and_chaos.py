"""The soak's flags (bad ones end in one line and exit code 2) and the killer's bookkeeping."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cli.bench.soak.chaos import KINDS, Kill, Killer, kind_of
from cli.bench.soak.settings import SoakSettings, duration
from cli.localcluster import components
from cli.localcluster.supervisor import EventKind, SupervisorEvent
from cli.main import main


def test_durations_read_go_style_and_plain_seconds() -> None:
    assert duration("90s") == duration("1.5m") == duration("90") == 90.0
    assert duration("1h30m") == 5400.0


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--duration", "soon"], "'soon' is not a duration such as 90s, 10m or 1h30m"),
        (["--nodes", "0"], "--nodes must be between 1 and 50, got 0"),
        (["--kill-interval", "0s"], "--kill-interval must be a positive number of seconds, got 0"),
    ],
)
def test_bad_flags_are_one_line_and_exit_code_2(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "soak", *flags, "-o", "json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"tessera bench: {message}")
    assert captured.err.count("\n") == 1


def test_every_liveness_bound_comes_from_the_settings() -> None:
    settings = SoakSettings(pending_bound_s=45, gang_waiting_s=20, check_interval_s=3)
    bounds = settings.bounds()
    assert (bounds.pending_s, bounds.gang_waiting_s, bounds.gang_slack_s) == (45, 20, 45)
    assert settings.settle_s >= bounds.pending_s + bounds.gang_waiting_s + bounds.gang_slack_s


def _started(name: str, restarts: int) -> SupervisorEvent:
    return SupervisorEvent(EventKind.STARTED, name, pid=1, restarts=restarts)


def test_a_kill_is_survived_when_its_component_starts_again() -> None:
    killer = Killer(list, interval_s=1, seed=1)
    killer.kills.append(Kill("scheduler", 10, at=time.time()))
    killer.on_event(_started("scheduler", restarts=0))  # a first start is no return
    killer.on_event(_started("controller", restarts=3))  # another component
    assert killer.outstanding() == killer.kills
    before = time.time()
    assert killer.calm_since() >= before  # a victim is down: no calm yet
    killer.on_event(_started("scheduler", restarts=1))
    assert killer.outstanding() == []
    assert killer.calm_since() == killer.kills[0].back_at


def test_nothing_to_kill_is_no_kill() -> None:
    assert Killer(list, interval_s=1, seed=1).kill_one() is None


def test_every_component_tessera_up_builds_is_a_kind_the_killer_picks(tmp_path: Path) -> None:
    """A component added to `tessera up` without a kill kind would never be killed by the soak."""
    kubeconfig = tmp_path / "kubeconfig"
    scheduler = components.scheduler(tmp_path, kubeconfig, grpc_address=f"unix://{tmp_path / 's.sock'}")
    built = [
        components.apiserver(tmp_path, port=0),
        components.controller(tmp_path, kubeconfig),
        components.kube_controller_manager(tmp_path, kubeconfig),
        scheduler,
        components.dashboard(tmp_path, kubeconfig, scheduler=scheduler),
        components.simulated_agent(tmp_path, kubeconfig, node="sim-0", profile="a100-8x"),
    ]
    assert sorted(str(kind_of(c.name)) for c in built) == sorted(KINDS)
    assert kind_of("kube-controller-manager") != kind_of("controller")
    assert kind_of("runtimeproxy") is None
