"""The soak's flags (bad ones end in one line and exit code 2) and the killer's bookkeeping."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any, cast

import pytest

from cli.bench.soak.chaos import KINDS, Kill, Killer, kind_of, runtime_proxy_note
from cli.bench.soak.settings import SoakSettings, duration
from cli.localcluster import components
from cli.localcluster.components import Component
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
        (["--node-monitor-grace", "4s"], "--node-monitor-grace (4 s) must be more than two Lease renewals"),
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
    settings = SoakSettings(pending_bound_s=45, gang_waiting_s=20, check_interval_s=3, eviction_toleration_s=6)
    bounds = settings.bounds()
    assert (bounds.pending_s, bounds.gang_waiting_s, bounds.gang_slack_s) == (45, 20, 45)
    assert bounds.eviction_s == 6
    assert settings.settle_s >= bounds.pending_s + bounds.gang_waiting_s + bounds.gang_slack_s


def test_the_node_lifecycle_settings_reach_the_components() -> None:
    settings = SoakSettings(node_monitor_grace_s=8, node_lease_interval_s=2, eviction_toleration_s=8)
    assert settings.kube_controller_manager_args() == (
        "--node-monitor-grace-period",
        "8",
        "--node-monitor-period",
        "1",
    )
    assert settings.agent_args() == ("--node-lease-interval", "2")
    assert settings.node_delete_after_s > 8 + 8  # after the evictions


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
        components.descheduler(tmp_path, kubeconfig, scheduler=scheduler),
        components.simulated_agent(tmp_path, kubeconfig, node="sim-0", profile="a100-8x"),
    ]
    # The runtime proxy is a kind too, killed where a cluster runs one; `tessera up` here does not.
    assert sorted(str(kind_of(c.name)) for c in built) == sorted(set(KINDS) - {"runtime-proxy"})
    assert kind_of("kube-controller-manager") != kind_of("controller")
    assert kind_of("runtimeproxy") is None
    assert "not killed: this cluster runs none" in runtime_proxy_note(built)


def test_the_killer_picks_among_the_kinds_the_cluster_runs_the_runtime_proxy_too() -> None:
    child = subprocess.Popen(["sleep", "60"])
    try:
        proxy = Component("runtime-proxy", "runtime proxy", cast(Any, _Running(child.pid)))
        killer = Killer(lambda: [proxy], interval_s=1, seed=1)
        kill = killer.kill_one()  # the only kind present, every time
        assert kill is not None and kill.component == "runtime-proxy"
        assert child.wait(timeout=5) == -signal.SIGKILL
        assert "among the components killed" in runtime_proxy_note([proxy])
    finally:
        child.kill()
        child.wait()


class _Running:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.running = True
