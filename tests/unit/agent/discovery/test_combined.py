"""Joining sources, and keeping devices that a pass did not find."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from agent.discovery.combined import Discovery
from agent.discovery.model import Inventory
from agent.discovery.simulated import load_profile
from apis.errors import DiscoveryError

FULL = load_profile("a100-8x").inventory("n")


class ScriptedSource:
    """A source replaying inventories (or raising) pass by pass."""

    name = "scripted"

    def __init__(self, *results: Inventory | DiscoveryError) -> None:
        self._results = list(results)
        self.closed = False

    def discover(self) -> Inventory:
        result = self._results.pop(0)
        if isinstance(result, DiscoveryError):
            raise result
        return result

    def close(self) -> None:
        self.closed = True


def test_sources_are_merged_in_minor_order() -> None:
    gpus = Inventory(gpus=FULL.gpus[4:] + FULL.gpus[:4], gpu_driver_version="535", simulated=True)
    nics = Inventory(rdma=FULL.rdma[::-1])
    inventory = Discovery([ScriptedSource(gpus), ScriptedSource(nics)]).run()
    assert inventory == dataclasses.replace(FULL, gpu_driver_version="535")


def test_a_failing_source_keeps_its_devices_from_earlier_passes(caplog: pytest.LogCaptureFixture) -> None:
    discovery = Discovery([ScriptedSource(FULL, DiscoveryError("NVML hiccup"))])
    first = discovery.run()
    assert discovery.run() == first
    assert "Discovery source failed; keeping its last devices" in caplog.text


def test_a_device_no_longer_found_is_still_reported(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agent.discovery.combined")
    without_gpu_3 = dataclasses.replace(FULL, gpus=FULL.gpus[:3] + FULL.gpus[4:])
    discovery = Discovery([ScriptedSource(FULL, without_gpu_3, without_gpu_3, FULL)])
    discovery.run()
    assert discovery.run().gpus == discovery.run().gpus == discovery.run().gpus == FULL.gpus
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("Device")] == [
        "Device no longer discovered; still reported",  # once, not on every pass
        "Device discovered again",
    ]


def test_a_missing_device_whose_minor_is_taken_is_forgotten() -> None:
    replacement = dataclasses.replace(FULL.gpus[3], uuid="GPU-new")
    swapped = dataclasses.replace(FULL, gpus=(*FULL.gpus[:3], replacement, *FULL.gpus[4:]))
    discovery = Discovery([ScriptedSource(FULL, swapped)])
    discovery.run()
    assert discovery.run().gpus == swapped.gpus


def test_close_closes_every_source() -> None:
    sources = [ScriptedSource(), ScriptedSource()]
    Discovery(sources).close()
    assert all(s.closed for s in sources)
