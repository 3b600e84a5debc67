"""The launchers' command lines, read by the real `tessera` parser: each one names the kubeconfig,
a free loopback port, the address file the launcher polls and the verbosity, and the caller's
arguments come last so they win (no process is started here; the integration tests do that)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from cli.launchers.agent import AgentProcess
from cli.launchers.base import KubeComponentProcess, leader_election_flags
from cli.launchers.controller import ControllerProcess
from cli.launchers.dashboard import DashboardProcess
from cli.launchers.descheduler import DeschedulerProcess
from cli.launchers.kubecontrollers import KubeControllersProcess
from cli.launchers.scheduler import SchedulerProcess
from cli.main import build_parser
from kube import leaderelectionflags
from kube.leaderelection import LeaderElectionSettings

KUBECONFIG = Path("/k/kubeconfig")


def parsed(process: KubeComponentProcess) -> argparse.Namespace:
    command = process.command_line[0]
    return build_parser(command).parse_args(list(process.command_line))


@pytest.mark.parametrize(
    ("process", "log_name"),
    [
        (ControllerProcess(KUBECONFIG, directory=Path("/w"), verbosity=4), "controller.log"),
        (DeschedulerProcess(KUBECONFIG, directory=Path("/w"), verbosity=4), "descheduler.log"),
        (KubeControllersProcess(KUBECONFIG, directory=Path("/w"), verbosity=4), "kube-controller-manager.log"),
        (DashboardProcess(KUBECONFIG, directory=Path("/w"), verbosity=4), "dashboard.log"),
    ],
)
def test_listen_launchers(process: KubeComponentProcess, log_name: str) -> None:
    args = parsed(process)
    assert (args.kubeconfig, args.listen, args.listen_address_file, args.v) == (
        KUBECONFIG,
        "127.0.0.1:0",
        Path("/w/address"),
        4,
    )
    assert process.address_file == Path("/w/address")
    assert process.log_path == Path("/w") / log_name


def test_callers_args_come_last_and_win() -> None:
    process = DeschedulerProcess(KUBECONFIG, directory=Path("/w"), args=("--listen", "127.0.0.1:7", "--dry-run"))
    args = parsed(process)
    assert (args.listen, args.dry_run) == ("127.0.0.1:7", True)
    assert process.args == ("--listen", "127.0.0.1:7", "--dry-run")


def test_dashboard_flags() -> None:
    process = DashboardProcess(
        KUBECONFIG,
        directory=Path("/w"),
        scheduler="unix:///s.sock",
        scheduler_address_file=Path("/s/address"),
        args=("--scheduler", "none"),
    )
    args = parsed(process)
    assert (args.scheduler, args.scheduler_address_file, args.scheduler_metrics) == ("none", Path("/s/address"), "")


def test_scheduler() -> None:
    process = SchedulerProcess(
        KUBECONFIG,
        Path("/w"),
        name="s1",
        leader_elect=True,
        lease=(3.0, 2.0, 0.5),
        extra_args=("--leader-elect-lease-duration", "9", "--seed", "7"),
    )
    args = parsed(process)
    assert (args.http_address, args.http_address_file, args.grpc_address) == (
        "127.0.0.1:0",
        Path("/w/s1.address"),
        "unix:///w/s1.sock",
    )
    assert process.log_path == Path("/w/s1.log")
    # The lease flags follow `extra_args`, so the lease asked for wins.
    assert (args.leader_elect, args.leader_elect_lease_duration, args.seed) == (True, 3.0, 7)


def test_agent(tmp_path: Path) -> None:
    process = AgentProcess(KUBECONFIG, node_name="n1", directory=tmp_path, args=("--state-dir", "/elsewhere"))
    args = parsed(process)
    assert (args.node_name, args.metrics_address, args.metrics_address_file, args.hook_socket) == (
        "n1",
        "127.0.0.1:0",
        tmp_path / "address",
        tmp_path / "agent.sock",
    )
    assert (args.state_dir, process.state_dir) == (Path("/elsewhere"), tmp_path / "state")
    assert process.args == ("--state-dir", "/elsewhere")


def test_leader_election_flags_name_the_lease_and_the_replica() -> None:
    flags = leader_election_flags((6.0, 4.0, 1.0), name="l1", namespace="ns", identity="replica-0")
    process = ControllerProcess(KUBECONFIG, directory=Path("/w"), args=flags)
    election = leaderelectionflags.settings_from(parsed(process))
    assert election == LeaderElectionSettings(
        lease_name="l1", namespace="ns", identity="replica-0", lease_duration=6, renew_deadline=4, retry_period=1
    )
