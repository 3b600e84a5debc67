"""Fault injection for simulated GPUs, over the agent's HTTP port: break a GPU of a running agent.

Tests and `tessera up` run agents as separate processes; to see a node react to a failing GPU they
ask the agent itself to fail one. The routes act on the simulated profile's FakeNVML — the same
place real NVML errors enter — so the health monitor, the metrics and the Device CR reporter react
exactly as they would to real hardware. An agent with real devices has no FakeNVML and does not
serve these routes (404): nothing can fake a fault on a real node.

    POST /debug/simulate/xid?minor=3&xid=79     an XID event on GPU 3 (critical XIDs make it unhealthy;
                                                79 and other `reset` XIDs keep it so until a reset)
    POST /debug/simulate/gpu-lost?minor=3       GPU 3 stops answering, as one that fell off the bus
    POST /debug/simulate/gpu-reset?minor=3      GPU 3 is reset, as by `nvidia-smi -r`: a lost GPU answers
                                                again; one that answers is gone for RESET_DOWNTIME_S first

Answers are JSON: 200 `{"minor": 3, "uuid": "GPU-…", "fault": "xid", "xid": 79}`; 400 for a
missing or malformed parameter, 404 for a GPU the profile does not have, 405 for a method other
than POST. The health monitor sees a reset as the GPU lost and then answering again (its
liveness probe runs every `--health-interval`, 1 s by default: shorter than the downtime); the
GPU is healthy again once the quiet period (`--health-quiet-period`) has passed without errors.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from agent.devices.routing import BadRequest, Query, int_param, json_error
from agent.discovery.fake_nvml import FakeGPU, FakeNVML
from kube import serving

__all__ = ["PREFIX", "RESET_DOWNTIME_S", "SimulatedFaults"]

log = logging.getLogger(__name__)

PREFIX: Final = "/debug/simulate/"
#: Seconds a simulated GPU that still answers does not while it is reset: long enough for the
#: health monitor's liveness probe (every second by default) to see it gone, as on real hardware.
RESET_DOWNTIME_S: Final = 3.0


class SimulatedFaults:
    """The fault-injection routes over one FakeNVML; `routes()` for the agent's HTTP server, which
    answers other methods than POST with 405."""

    def __init__(self, fake: FakeNVML, *, node_name: str) -> None:
        self._fake = fake
        self._node_name = node_name

    def routes(self) -> list[serving.Route]:
        return [
            serving.Route("POST", f"{PREFIX}xid", self._endpoint("xid", self._xid)),
            serving.Route("POST", f"{PREFIX}gpu-lost", self._endpoint("gpu-lost", self._lost)),
            serving.Route("POST", f"{PREFIX}gpu-reset", self._endpoint("gpu-reset", self._reset)),
        ]

    # --- the faults --------------------------------------------------------------------------------
    def _xid(self, gpu: FakeGPU, query: Query) -> dict[str, object]:
        xid = int_param(query, "xid")
        self._fake.inject_xid(gpu.uuid, xid)
        return {"xid": xid}

    def _lost(self, gpu: FakeGPU, query: Query) -> dict[str, object]:
        self._fake.vanish(gpu.uuid)
        return {}

    def _reset(self, gpu: FakeGPU, query: Query) -> dict[str, object]:
        self._fake.reset(gpu.uuid, down_s=RESET_DOWNTIME_S)
        return {}

    # --- HTTP --------------------------------------------------------------------------------------
    def _endpoint(self, fault: str, act: Callable[[FakeGPU, Query], dict[str, object]]) -> serving.Handler:
        def handle(request: serving.Request) -> serving.Response:
            try:
                gpu = self._gpu(int_param(request.query, "minor"))
                detail = act(gpu, request.query)
            except BadRequest as e:
                return json_error(e.status, str(e))
            log.warning(
                "Injected a SIMULATED GPU fault",
                extra={"node": self._node_name, "fault": fault, "minor": gpu.minor, "uuid": gpu.uuid, **detail},
            )
            return serving.Response.json({"minor": gpu.minor, "uuid": gpu.uuid, "fault": fault, **detail})

        return handle

    def _gpu(self, minor: int) -> FakeGPU:
        gpu = next((g for g in self._fake.gpus if g.minor == minor), None)
        if gpu is None:
            known = ", ".join(str(g.minor) for g in self._fake.gpus)
            raise BadRequest(404, f"no simulated GPU with minor {minor} (minors: {known})")
        return gpu
