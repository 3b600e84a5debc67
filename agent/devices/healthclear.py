"""The operator's override of a GPU fault, over the agent's HTTP port: `POST /health/clear?minor=3`.

A GPU that raised an XID needing a reset stays unhealthy — across agent restarts too
(agent/health/memory.py) — until the agent sees it reset. An operator who knows better (the GPU
was reset while the agent was not watching, the node was rebooted, the XID was a false alarm)
says so here; unlike `/debug/simulate/`, this route is served for real devices too.

    POST /health/clear?minor=3
    200 {"minor": 3, "uuid": "GPU-…", "cleared": true, "healthy": true, "reason": "Cleared", "was": "Xid79"}

`cleared` is false when the GPU was healthy already (nothing changes, no Event). A lasting
problem (`GPULost`: the GPU does not answer NVML) is not cleared: it ends when the GPU answers,
so `healthy` stays false. 400 for a missing or malformed minor, 404 for a minor this node does
not have, 405 for another method. Each clear is logged and recorded as an Event on the Node,
naming who cleared it. Who may is RBAC's to say: the agent's server (`kube.serving`) asks the
API server who the caller is and whether they may `post` on `/health/clear` (a non-resource
URL), as kubelet's authenticated port does; anonymous callers get kube's 403.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from agent.devices.routing import BadRequest, int_param, json_error
from agent.discovery.model import GPU
from agent.health.memory import FaultMemory
from kube import serving

__all__ = ["PATH", "HealthClear"]

PATH: Final = "/health/clear"


class HealthClear:
    """The route over a FaultMemory; `gpus` gives the node's GPUs now (discovery may change them)."""

    def __init__(self, memory: FaultMemory, gpus: Callable[[], Sequence[GPU]]) -> None:
        self._memory = memory
        self._gpus = gpus

    def routes(self) -> list[serving.Route]:
        return [serving.Route("POST", PATH, self._clear)]

    def _clear(self, request: serving.Request) -> serving.Response:
        try:
            gpu = self._gpu(int_param(request.query, "minor"))
        except BadRequest as e:
            return json_error(e.status, str(e))
        done = self._memory.clear(gpu, by=request.caller.name if request.caller is not None else "")
        return serving.Response.json(
            {
                "minor": gpu.minor,
                "uuid": gpu.uuid,
                "cleared": done.cleared,
                "healthy": done.after.healthy,
                "reason": done.after.reason,
                "was": done.before.reason,
            }
        )

    def _gpu(self, minor: int) -> GPU:
        gpus = self._gpus()
        gpu = next((g for g in gpus if g.minor == minor), None)
        if gpu is None:
            known = ", ".join(str(g.minor) for g in gpus) or "none"
            raise BadRequest(404, f"no GPU with minor {minor} on this node (minors: {known})")
        return gpu
