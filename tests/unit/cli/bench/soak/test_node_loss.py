"""A lost node: its agent's process is frozen (SIGSTOP), its Node deleted in some losses, then it
goes on (SIGCONT) — on a real process, whose state the kernel reports."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from cli.bench.soak.chaos import NodeLoss
from cli.localcluster.components import Component
from tests.support.waiting import wait_for


class _Process:
    """The two things NodeLoss reads of an agent's process, over a real child process."""

    def __init__(self, child: subprocess.Popen[bytes]) -> None:
        self._child = child

    @property
    def pid(self) -> int:
        return self._child.pid

    @property
    def running(self) -> bool:
        return self._child.poll() is None


def _state(pid: int) -> str:
    """The kernel's one-letter state of a process: T when stopped."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.fixture
def agent() -> Iterator[Component]:
    child = subprocess.Popen(["sleep", "60"])
    try:
        yield Component("agent/sim-1", "agent sim-1", cast(Any, _Process(child)), node="sim-1")
    finally:
        child.kill()
        child.wait()


def test_a_lost_node_is_frozen_until_brought_back_and_deleted_when_asked(agent: Component) -> None:
    deleted: list[str] = []
    loss = NodeLoss([agent], deleted.append, interval_s=1, down_s=1, seed=1)
    lost = loss.lose_one()
    assert lost is not None and lost.node == "sim-1"
    assert deleted == [] and not lost.deleted  # the node lifecycle controller judges it first
    wait_for(lambda: _state(lost.pid) == "T", what="the agent stopped")  # the signal takes a moment
    loss.delete(lost)
    assert deleted == ["sim-1"] and lost.deleted
    asked = time.time()
    assert loss.calm_since() >= asked  # a node is down: no calm (calm since now)
    loss.bring_all_back()
    wait_for(lambda: _state(lost.pid) != "T", what="the agent going on")
    assert loss.calm_since() == lost.back_at


def test_no_running_agent_is_no_loss() -> None:
    assert NodeLoss([], lambda _: None, interval_s=1, down_s=1, seed=1).lose_one() is None


def test_run_deletes_the_node_in_some_losses_only_and_always_brings_it_back(agent: Component) -> None:
    deleted: list[str] = []
    loss = NodeLoss([agent], deleted.append, interval_s=0.05, down_s=0.1, seed=3, delete_after_s=0.02)
    thread = threading.Thread(target=loss.run)
    thread.start()
    wait_for(lambda: len([x for x in loss.losses if x.back_at is not None]) >= 8, what="eight losses over")
    loss.stop()
    thread.join()
    loss.bring_all_back()
    assert all(x.back_at is not None for x in loss.losses)
    assert 0 < len(deleted) < len(loss.losses)
    assert deleted == [x.node for x in loss.losses if x.deleted]
