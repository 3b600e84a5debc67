"""FaultMemory: reset-waiting GPU faults across agent restarts — the state file, the Device CR,
both, neither; resets and an operator's clear end them; a GPU with another UUID is never affected.

Each "agent" here is a fresh tracker and FaultMemory over the same state directory, as a
restarted process would build them; the Device CR is what `build_device` wrote before.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import pytest

from agent.devices.cr import build_device
from agent.discovery.model import GPU, Inventory
from agent.discovery.simulated import load_profile
from agent.health.clock import ManualClock
from agent.health.memory import EVENT_CLEARED, EVENT_RESTORED, FaultMemory
from agent.health.statefile import StateFile
from agent.health.tracker import REASON_CLEARED, Health, HealthTracker
from apis.crds.device import Device

NODE = "sim-memory"
XID79 = "XID 79: GPU has fallen off the bus; waiting for a GPU reset"


class Events:
    """NodeEvents that keeps (type, reason, message)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def warning(self, reason: str, message: str) -> None:
        self.seen.append(("Warning", reason, message))

    def normal(self, reason: str, message: str) -> None:
        self.seen.append(("Normal", reason, message))


@dataclasses.dataclass
class Agent:
    """One agent process's worth of health: what a start builds."""

    tracker: HealthTracker
    memory: FaultMemory
    events: Events
    clock: ManualClock

    def health(self, gpu: GPU) -> Health:
        return self.tracker.health(gpu.uuid)

    def cr(self, inventory: Inventory) -> Device:
        """The Device CR this agent would report now."""
        return build_device(inventory, self.tracker.snapshot(), node_name=NODE)


@pytest.fixture
def inventory() -> Inventory:
    return load_profile("t4-2x").inventory(NODE)


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


def boot(state_dir: Path, gpus: tuple[GPU, ...], clock: ManualClock | None = None) -> Agent:
    """Start an agent's FaultMemory as app.py does (the reporter's `adopt` is the test's to call)."""
    clock = clock or ManualClock()
    tracker = HealthTracker(clock, quiet_period_s=300)
    events = Events()
    memory = FaultMemory(tracker, gpus, StateFile(state_dir), events=events, node_name=NODE)
    memory.start()
    return Agent(tracker, memory, events, clock)


def fall_off_the_bus(agent: Agent, gpu: GPU) -> Health:
    agent.tracker.fault(gpu.uuid, reason="Xid79", message=XID79, needs_reset=True)
    return agent.health(gpu)


def file_faults(state_dir: Path) -> dict[str, dict[str, str]]:
    faults: dict[str, dict[str, str]] = json.loads((state_dir / "gpu-faults.json").read_text())["faults"]
    return faults


def test_neither_record_every_gpu_starts_healthy(state_dir: Path, inventory: Inventory) -> None:
    agent = boot(state_dir, inventory.gpus)
    agent.memory.adopt(None)  # no Device CR yet: a new node
    assert agent.tracker.snapshot() == {} and agent.events.seen == []


def test_from_the_state_file_the_fault_and_its_time_come_back(state_dir: Path, inventory: Inventory) -> None:
    gpu = inventory.gpus[1]
    before = fall_off_the_bus(boot(state_dir, inventory.gpus), gpu)
    assert list(file_faults(state_dir)) == [gpu.uuid]  # on disk at once, before any report

    later = ManualClock()
    later.advance(7200)
    agent = boot(state_dir, inventory.gpus, later)  # kill -9, restart: a fresh process
    assert agent.health(gpu) == before  # same reason, message and lastTransitionTime: no CR write
    ((kind, reason, message),) = agent.events.seen
    assert (kind, reason) == ("Warning", EVENT_RESTORED)
    assert f"GPU 1 ({gpu.uuid}) is still unhealthy" in message and "from the state file" in message
    assert "POST /health/clear?minor=1" in message
    agent.memory.adopt(agent.cr(inventory))  # the reporter's first read changes nothing
    assert agent.health(gpu) == before and len(agent.events.seen) == 1


def test_from_the_device_cr_when_the_node_lost_its_file(state_dir: Path, inventory: Inventory) -> None:
    gpu = inventory.gpus[0]
    first = boot(state_dir, inventory.gpus)
    before = fall_off_the_bus(first, gpu)
    cr = first.cr(inventory)
    (state_dir / "gpu-faults.json").unlink()  # a new pod of the DaemonSet on a fresh filesystem

    agent = boot(state_dir, inventory.gpus)
    assert agent.health(gpu).healthy  # not known before the Device CR is read ...
    agent.memory.adopt(cr)  # ... which the reporter does before it writes anything
    assert agent.health(gpu) == before
    assert "from the Device CR" in agent.events.seen[0][2]
    assert list(file_faults(state_dir)) == [gpu.uuid]  # and the node has its file again


def test_with_both_the_state_file_is_the_truth_absences_included(state_dir: Path, inventory: Inventory) -> None:
    zero, one = inventory.gpus
    first = boot(state_dir, inventory.gpus)
    fall_off_the_bus(first, zero)
    fall_off_the_bus(first, one)
    cr = first.cr(inventory)  # reported: both unhealthy
    first.memory.clear(one)  # on disk; the agent dies before the CR says so

    agent = boot(state_dir, inventory.gpus)
    agent.memory.adopt(cr)
    assert (agent.health(zero).healthy, agent.health(one).healthy) == (False, True)


def test_a_reset_ends_the_fault_for_later_starts_too(state_dir: Path, inventory: Inventory) -> None:
    gpu = inventory.gpus[0]
    fall_off_the_bus(boot(state_dir, inventory.gpus), gpu)
    agent = boot(state_dir, inventory.gpus)
    agent.tracker.reset_seen(gpu.uuid)  # NVML lost the GPU and it answers again
    assert file_faults(state_dir) == {}
    assert not agent.health(gpu).healthy  # the quiet period still runs in this process ...
    assert boot(state_dir, inventory.gpus).tracker.snapshot() == {}  # ... but a restart has nothing to restore


def test_a_gpu_with_another_uuid_does_not_inherit_the_fault(state_dir: Path, inventory: Inventory) -> None:
    old = inventory.gpus[1]
    first = boot(state_dir, inventory.gpus)
    fall_off_the_bus(first, old)
    cr = first.cr(inventory)
    replaced = (inventory.gpus[0], dataclasses.replace(old, uuid="GPU-new-card-in-slot-1"))

    agent = boot(state_dir, replaced)
    agent.memory.adopt(cr)
    assert all(agent.health(g).healthy for g in replaced) and agent.events.seen == []
    assert file_faults(state_dir) == {}  # the old card's fault is forgotten

    (state_dir / "gpu-faults.json").unlink()
    from_cr = boot(state_dir, replaced)
    from_cr.memory.adopt(cr)
    assert from_cr.tracker.snapshot() == {}


def test_a_corrupted_state_file_falls_back_to_the_device_cr(
    state_dir: Path, inventory: Inventory, caplog: pytest.LogCaptureFixture
) -> None:
    gpu = inventory.gpus[1]
    first = boot(state_dir, inventory.gpus)
    before = fall_off_the_bus(first, gpu)
    (state_dir / "gpu-faults.json").write_text('{"version": 1, "faults": {"GPU-')  # torn by a bad disk

    with caplog.at_level(logging.WARNING, logger="agent.health.memory"):
        agent = boot(state_dir, inventory.gpus)
    (record,) = [r for r in caplog.records if r.message.startswith("Agent state file is unreadable")]
    assert "not JSON" in record.__dict__["error"]
    agent.memory.adopt(first.cr(inventory))
    assert agent.health(gpu) == before
    assert list(file_faults(state_dir)) == [gpu.uuid]  # rewritten whole


def test_an_operator_clear_is_persisted_and_announced(state_dir: Path, inventory: Inventory) -> None:
    gpu = inventory.gpus[0]
    fall_off_the_bus(boot(state_dir, inventory.gpus), gpu)
    agent = boot(state_dir, inventory.gpus)

    done = agent.memory.clear(gpu)
    assert (done.cleared, done.before.reason, done.after.healthy, done.after.reason) == (
        True,
        "Xid79",
        True,
        REASON_CLEARED,
    )
    assert agent.events.seen[-1] == (
        "Normal",
        EVENT_CLEARED,
        f"GPU 0 ({gpu.uuid}): Xid79 cleared by an operator; it is offered again",
    )
    assert file_faults(state_dir) == {}
    assert not agent.memory.clear(gpu).cleared and len(agent.events.seen) == 2  # idempotent, no new Event


def test_the_clear_event_names_who_cleared(state_dir: Path, inventory: Inventory) -> None:
    gpu = inventory.gpus[0]
    fall_off_the_bus(boot(state_dir, inventory.gpus), gpu)
    agent = boot(state_dir, inventory.gpus)
    agent.memory.clear(gpu, by="alice")
    assert agent.events.seen[-1][2] == f"GPU 0 ({gpu.uuid}): Xid79 cleared by an operator (alice); it is offered again"


def test_a_clear_before_the_cr_is_read_is_not_undone_by_it(state_dir: Path, inventory: Inventory) -> None:
    zero, one = inventory.gpus
    first = boot(state_dir, inventory.gpus)
    fall_off_the_bus(first, zero)
    fall_off_the_bus(first, one)
    cr = first.cr(inventory)
    (state_dir / "gpu-faults.json").unlink()

    agent = boot(state_dir, inventory.gpus)
    agent.memory.clear(one)  # while the API server is still down
    agent.memory.adopt(cr)
    assert (agent.health(zero).healthy, agent.health(one).healthy) == (False, True)


def test_an_unusable_state_directory_is_reported_and_the_agent_runs_on(
    tmp_path: Path, inventory: Inventory, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    with caplog.at_level(logging.ERROR, logger="agent.health.memory"):
        agent = boot(blocked / "state", inventory.gpus)
        agent.memory.adopt(None)
        fall_off_the_bus(agent, inventory.gpus[0])
    messages = [r.message for r in caplog.records]
    assert "Agent state directory is not usable; GPU faults survive a restart only through the Device CR" in messages
    assert "Cannot write the agent state file; a restart will restore GPU faults from the Device CR" in messages
    assert not agent.health(inventory.gpus[0]).healthy  # health itself works as ever
