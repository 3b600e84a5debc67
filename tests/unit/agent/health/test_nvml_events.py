"""GPU health from NVML events and liveness, on the fake NVML and — where present — the real one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent.discovery.model import GPU
from agent.discovery.nvml import NVMLSource
from agent.discovery.nvmllib import NVML, HandleCache
from agent.discovery.pci import PCIBus
from agent.health.clock import ManualClock
from agent.health.nvml_events import NVMLWatcher
from agent.health.tracker import REASON_RECOVERED, HealthTracker, ResetFault
from tests.support.nvml import NVMLEnv
from tests.unit.agent.health.recording import QUIET_S, Recorder


@pytest.fixture
def gpus(nvml_env: NVMLEnv, nvml: NVML) -> tuple[GPU, ...]:
    return NVMLSource(nvml, PCIBus(nvml_env.sysfs_root)).discover().gpus


@pytest.fixture
def watcher(nvml: NVML, gpus: tuple[GPU, ...], tracker: HealthTracker) -> Iterator[NVMLWatcher]:
    watcher = NVMLWatcher(nvml, gpus, tracker, HandleCache(nvml))
    watcher.open()
    yield watcher
    watcher.close()


def test_healthy_gpus_raise_no_events_and_stay_healthy(
    watcher: NVMLWatcher, gpus: tuple[GPU, ...], tracker: HealthTracker, recorder: Recorder
) -> None:
    assert watcher.poll(100) is False
    watcher.probe()
    tracker.tick()
    assert recorder.changes == []
    assert all(tracker.health(g.uuid).healthy for g in gpus)


def test_a_critical_xid_makes_its_gpu_unhealthy_with_the_xid_as_reason(
    nvml_env: NVMLEnv, watcher: NVMLWatcher, gpus: tuple[GPU, ...], tracker: HealthTracker
) -> None:
    fake = nvml_env.require_fake()
    fake.inject_xid(gpus[5].uuid, 48)
    assert watcher.poll(1000) is True
    health = tracker.health(gpus[5].uuid)
    assert (health.healthy, health.reason) == (False, "Xid48")
    assert health.message == "XID 48: Double-bit ECC error; waiting for a GPU reset"
    assert [tracker.health(g.uuid).healthy for g in gpus].count(False) == 1


@pytest.mark.parametrize("xid", [13, 31, 43, 45, 68, 109])
def test_application_xids_are_counted_but_leave_the_gpu_healthy(
    nvml_env: NVMLEnv, watcher: NVMLWatcher, gpus: tuple[GPU, ...], tracker: HealthTracker, xid: int
) -> None:
    fake = nvml_env.require_fake()
    seen: list[tuple[str, int]] = []
    watcher.on_xid(lambda gpu, n: seen.append((gpu.uuid, n)))
    fake.inject_xid(gpus[2].uuid, xid)
    assert watcher.poll(1000) is True
    assert seen == [(gpus[2].uuid, xid)]
    assert tracker.health(gpus[2].uuid).healthy and tracker.snapshot() == {}


def test_a_recover_xid_heals_after_the_quiet_period(
    nvml_env: NVMLEnv, watcher: NVMLWatcher, gpus: tuple[GPU, ...], tracker: HealthTracker, clock: ManualClock
) -> None:
    fake = nvml_env.require_fake()
    fake.inject_xid(gpus[0].uuid, 94)
    watcher.poll(1000)
    clock.advance(QUIET_S)
    watcher.probe()
    tracker.tick()
    assert tracker.health(gpus[0].uuid).reason == REASON_RECOVERED


def test_a_vanishing_gpu_is_lost_and_recovers_after_its_reset(
    nvml_env: NVMLEnv, watcher: NVMLWatcher, gpus: tuple[GPU, ...], tracker: HealthTracker, clock: ManualClock
) -> None:
    fake = nvml_env.require_fake()
    lost = gpus[7]
    fake.inject_xid(lost.uuid, 79)  # the driver's report as it falls off the bus
    fake.vanish(lost.uuid)
    watcher.poll(1000)
    watcher.probe()
    assert (tracker.health(lost.uuid).healthy, tracker.health(lost.uuid).reason) == (False, "GPULost")
    clock.advance(10 * QUIET_S)
    watcher.probe()
    tracker.tick()
    assert not tracker.health(lost.uuid).healthy  # still gone
    fake.reset(lost.uuid)
    watcher.probe()  # answers again: reset seen, and the quiet period starts
    assert tracker.health(lost.uuid).reason == "GPULost"
    clock.advance(QUIET_S)
    tracker.tick()
    assert tracker.health(lost.uuid).healthy
    fake.inject_xid(lost.uuid, 48)  # events are registered again after the reset
    assert watcher.poll(1000) and tracker.health(lost.uuid).reason == "Xid48"


def test_an_xid_that_needs_a_reset_does_not_heal_by_waiting(
    nvml_env: NVMLEnv, watcher: NVMLWatcher, gpus: tuple[GPU, ...], tracker: HealthTracker, clock: ManualClock
) -> None:
    fake = nvml_env.require_fake()
    fake.inject_xid(gpus[1].uuid, 74)
    watcher.poll(1000)
    clock.advance(100 * QUIET_S)
    watcher.probe()
    tracker.tick()
    assert tracker.health(gpus[1].uuid).reason == "Xid74"


def test_a_fault_restored_after_a_restart_ends_with_a_reset(
    nvml_env: NVMLEnv, watcher: NVMLWatcher, gpus: tuple[GPU, ...], tracker: HealthTracker, clock: ManualClock
) -> None:
    fake = nvml_env.require_fake()
    gpu = gpus[3]
    tracker.restore(gpu.uuid, ResetFault("Xid79", "XID 79: GPU has fallen off the bus", "2023-12-31T00:00:00Z"))
    watcher.probe()
    clock.advance(10 * QUIET_S)
    tracker.tick()
    assert tracker.health(gpu.uuid).reason == "Xid79"  # this process never saw it lost: it waits
    fake.reset(gpu.uuid, down_s=3.0)  # an operator resets it (`nvidia-smi -r`): gone for a moment ...
    watcher.probe()
    fake.gpu(gpu.uuid).resetting_until = 0.0  # ... and back
    watcher.probe()
    assert tracker.reset_faults() == {}
    clock.advance(QUIET_S)
    tracker.tick()
    assert tracker.health(gpu.uuid).healthy
