"""`tessera up` itself: bad flags, a start that fails (a deadline running out, a port taken),
`--demo`, Ctrl-C, running twice, resuming on the same data directory, and cleaning up after a
`tessera up` that was itself killed. The other flags are test_up_flags.py's."""

from __future__ import annotations

import re
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cli.localcluster import demo, quotademo
from cli.localcluster import state as up_state
from cli.localcluster.state import UpState
from tests.e2e.checks import allocation_problems
from tests.support.processes import is_running
from tests.support.sockets import free_port
from tests.support.up import Up, tessera_command
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

TIMEOUT_S = 180.0


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--nodes", "-1"], "--nodes -1: must be between 0 and 50"),
        (["--profile", "v100-3x"], "not a built-in profile"),
        (["--nodes", "0", "--no-local-agent"], "no node to run"),
        (["--start-timeout", "0"], "--start-timeout 0: must be a number of seconds above 0"),
    ],
    ids=["negative-nodes", "unknown-profile", "no-node", "no-start-time"],
)
def test_bad_flags_are_refused_before_anything_starts(workdir: Path, flags: list[str], message: str) -> None:
    data_dir = workdir / "never"
    result = subprocess.run(
        [*tessera_command(), "up", "--data-dir", str(data_dir), *flags],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert message in result.stderr
    assert not data_dir.exists()


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port something else listens on."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", free_port()))
        listener.listen()
        yield listener.getsockname()[1]


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (
            ["--start-timeout", "0.01"],  # no API server is ready that fast
            "apiserver did not start: the API server was not ready within 0.01 s: "
            "still waiting for its kubeconfig {data_dir}/kubeconfig (written once it listens)",
        ),
        (
            ["--port", "{port}"],
            "apiserver did not start: the API server exited with 2 before it was ready",
        ),
    ],
    ids=["deadline", "port-taken"],
)
def test_a_start_that_fails_stops_everything_and_says_what_it_waited_for(
    workdir: Path, taken_port: int, flags: list[str], reason: str
) -> None:
    data_dir = workdir / f"failing{flags[0]}"
    result = subprocess.run(
        [*tessera_command(), "up", "--data-dir", str(data_dir), "--nodes", "1"]
        + [flag.format(port=taken_port) for flag in flags],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.startswith(f"tessera up: could not start: {reason.format(data_dir=data_dir)}")
    assert f"The end of its log ({data_dir}/apiserver.log):" in result.stderr
    assert "Stopped." in result.stdout
    after = up_state.read(data_dir)
    assert after is not None
    assert after.phase == "stopped"
    assert list(after.components) == ["apiserver"]  # nothing after it was started, nor waited for
    assert [pid for pid in component_pids(after) if is_running(pid)] == []
    if "--port" in flags:
        assert f"cannot listen on 127.0.0.1:{taken_port}: Address already in use" in result.stderr


def demo_ready(up: Up) -> bool:
    """The demo table and the commands to try are printed."""
    return "Ctrl-C stops everything" in up.output()


def objects(up: Up) -> dict[str, str]:
    """Every object a restart must keep. Of pods, the bare ones: the demo's Deployment and Job
    replace theirs under new names (a pod whose node is retired, or a Job's that finished)."""
    bare = {f"Pod/{demo.NAMESPACE}/{d.name}" for d in demo.DEMO_PODS}
    with up.cluster() as cluster:
        return {k: v for k, v in cluster.uids().items() if not k.startswith("Pod/") or k in bare}


def component_pids(current: UpState) -> list[int]:
    return [c.pid for c in current.components.values() if c.pid is not None]


def test_demo_ctrl_c_and_resuming_on_the_same_data_directory(workdir: Path, start_up: Callable[..., Up]) -> None:
    data_dir = workdir / "resume"
    first = start_up(data_dir, "--demo", "--nodes", "1")
    wait_for(lambda: demo_ready(first), timeout_s=TIMEOUT_S, what="the demo's table")
    # Every demo pod submitted (a create retried after a slow answer finds its pod there: "kept").
    shown = rf"Demo workload in namespace {demo.NAMESPACE} \((\d+) pods submitted(?:; (\d+) kept)?"
    submitted = re.search(shown, first.output())
    assert submitted is not None, first.output()
    assert int(submitted[1]) + int(submitted[2] or 0) == len(demo.DEMO_PODS)
    assert "pending: 0/2 nodes are available: 2 Insufficient gpu devices." in first.output()
    assert "Elastic quota: team-b asks for 5 one-GPU pods" in first.output()
    assert "! Not written" not in first.output()  # the controller wrote every demo quota's figures
    assert "  team-b   team-b        koordinator.sh/gpu-core  300  600" in first.output()
    with first.cluster() as cluster:
        pods = cluster.pods(demo.NAMESPACE)
        bare = {d.name for d in demo.DEMO_PODS}  # the Deployment's and Job's pods come after them, if room is left
        assert sorted(p.name for p in pods if not p.node_name and p.name in bare) == [
            "big-0",
            "big-1",
            "big-2",
            "big-3",
            "too-big",
        ]
        assert allocation_problems(pods, cluster.devices()) == []
    assert first.forbidden_calls() == [], "a component called what its role in deploy/ lacks"
    kept = objects(first)
    state = first.state()
    sockets = [Path(state.components["scheduler"].grpc.removeprefix("unix://"))]
    sockets += [Path(c.hook_socket) for c in state.components.values() if c.hook_socket]
    assert all(s.exists() for s in sockets)

    # A second tessera up on the same directory is refused; the first one is unharmed.
    second = subprocess.run(
        [*tessera_command(), "up", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        env=first.env,
        check=False,
    )
    assert second.returncode == 1
    assert f"tessera up already runs on {data_dir} (pid {first.pid})" in second.stderr
    assert first.state().phase == "ready"

    # Ctrl-C: every component stops, their sockets are gone, nothing is left running.
    assert first.interrupt() == 0
    assert "Stopped." in first.output()
    assert [pid for pid in component_pids(state) if is_running(pid)] == []
    assert [s for s in sockets if s.exists()] == []
    assert first.state().phase == "stopped"

    # Again on the same directory, one node more: the same objects, no second copy of the nodes
    # or the demo.
    again = start_up(data_dir, "--demo", "--nodes", "2")
    wait_for(lambda: demo_ready(again), timeout_s=TIMEOUT_S, what="the demo's table again")
    assert f"(0 pods submitted; {len(demo.DEMO_PODS)} kept from an earlier run)" in again.output()
    resumed = objects(again)
    assert {key: uid for key, uid in kept.items() if resumed.get(key) != uid} == {}
    assert sorted(k for k in resumed.keys() - kept.keys() if k.startswith(("Node/", "Pod/"))) == ["Node//sim-2"]

    # tessera up killed itself: its components are orphans; the next one stops them first.
    orphans = component_pids(again.state())
    again.kill()
    assert all(is_running(pid) for pid in orphans)
    # Back to one simulated node: sim-2 is removed rather than left Ready with nothing running it.
    last = start_up(data_dir, "--nodes", "1")
    assert f"stopped {len(orphans)} processes an earlier tessera up left running" in last.output()
    # With it go the pods bound to it: team B's borrowers that one node had no room for at first,
    # and the pods the demo's Deployment and Job may have had there.
    assert re.search(
        r"removed node sim-2( and the \d+ pods? bound to it)?: an earlier tessera up ran it", last.output()
    )
    assert [pid for pid in orphans if is_running(pid)] == []
    remaining = objects(last)
    assert remaining.keys() >= {k for k in kept if not k.startswith(f"Pod/{quotademo.TEAM_B}/")}
    assert [k for k in remaining if k.endswith("/sim-2")] == []
    assert last.interrupt() == 0
