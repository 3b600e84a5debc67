"""`DATA_DIR/up.json`: where a running `tessera up` says what it runs, for people, scripts and tests.

    {"pid": 4242, "phase": "ready", "dataDir": "/home/me/tessera/tessera-data",
     "kubeconfig": "/home/me/tessera/tessera-data/kubeconfig",
     "components": {"apiserver": {"pid": 4250, "url": "https://127.0.0.1:38017", "log": "…", "restarts": 0},
                    "scheduler": {"pid": 4263, "url": "http://127.0.0.1:41005", "grpc": "unix:///…", …},
                    "agent/sim-1": {"pid": 4270, "node": "sim-1", "url": "http://127.0.0.1:40111", …}}}

`phase` is `starting`, `ready` (every component ready; the demo, if asked for, comes after) or
`stopping`; a component's `pid` and `url` change when it is restarted. The file is replaced
atomically, so a reader never sees half of it; it stays after a clean stop (phase `stopped`).

The next `tessera up` on the same directory reads it to refuse to run twice, and to stop
processes an earlier `tessera up` left behind when it was killed itself (`leftovers`).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import psutil

__all__ = ["FILE_NAME", "ComponentState", "UpState", "leftovers", "process_created", "read", "running_up", "write"]

FILE_NAME: Final = "up.json"


@dataclass(frozen=True, slots=True)
class ComponentState:
    pid: int | None = None
    log: str = ""
    #: Its HTTP endpoint (`https://…` for the API server).
    url: str = ""
    restarts: int = 0
    #: Agents: the node they run.
    node: str = ""
    #: The scheduler: its gRPC API, where `tessera explain` connects.
    grpc: str = ""
    #: Agents: the hook server's socket, for a runtime proxy's hook config.
    hook_socket: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pid": self.pid, "log": self.log, "url": self.url, "restarts": self.restarts}
        for key, value in (("node", self.node), ("grpc", self.grpc), ("hookSocket", self.hook_socket)):
            if value:
                out[key] = value
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ComponentState:
        return cls(
            pid=raw.get("pid"),
            log=raw.get("log", ""),
            url=raw.get("url", ""),
            restarts=raw.get("restarts", 0),
            node=raw.get("node", ""),
            grpc=raw.get("grpc", ""),
            hook_socket=raw.get("hookSocket", ""),
        )


@dataclass(frozen=True, slots=True)
class UpState:
    pid: int
    phase: str
    data_dir: str
    kubeconfig: str
    components: dict[str, ComponentState] = field(default_factory=dict)
    #: When the `tessera up` process started (psutil's create time): with the pid, it names that
    #: process and no later one that got the same pid.
    created: float = 0.0
    #: Nodes an earlier run had and this one removes once the API server answers: kept here until
    #: they are gone, so a start that fails before then does not forget them.
    retiring: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "created": self.created,
            "phase": self.phase,
            "dataDir": self.data_dir,
            "kubeconfig": self.kubeconfig,
            "components": {name: c.to_dict() for name, c in sorted(self.components.items())},
        } | ({"retiring": list(self.retiring)} if self.retiring else {})

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> UpState:
        return cls(
            pid=int(raw["pid"]),
            phase=str(raw["phase"]),
            data_dir=str(raw["dataDir"]),
            kubeconfig=str(raw["kubeconfig"]),
            components={name: ComponentState.from_dict(c) for name, c in raw.get("components", {}).items()},
            created=float(raw.get("created", 0.0)),
            retiring=tuple(raw.get("retiring", ())),
        )

    def nodes(self) -> set[str]:
        """The nodes it ran or was about to remove."""
        return {c.node for c in self.components.values() if c.node} | set(self.retiring)


def write(data_dir: Path, state: UpState) -> None:
    """Replace the state file atomically (write a temporary file, then rename it)."""
    path = data_dir / FILE_NAME
    temporary = path.with_name(f".{FILE_NAME}.{os.getpid()}")
    temporary.write_text(json.dumps(state.to_dict(), indent=2) + "\n")
    temporary.replace(path)


def read(data_dir: Path) -> UpState | None:
    """The state file's content; None when there is none or it cannot be read (an older format,
    a damaged file: it only matters while its processes run, and they are found by pid)."""
    try:
        return UpState.from_dict(json.loads((data_dir / FILE_NAME).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _command_line(pid: int | None) -> list[str]:
    if pid is None:
        return []
    with contextlib.suppress(psutil.Error):
        process = psutil.Process(pid)
        if process.status() != psutil.STATUS_ZOMBIE:
            return process.cmdline()
    return []


def process_created(pid: int) -> float:
    """The create time of process `pid` (this process: `process_created(os.getpid())`)."""
    return float(psutil.Process(pid).create_time())


def running_up(state: UpState) -> int | None:
    """The pid of the `tessera up` that wrote `state` if it still runs (and is not this process)."""
    if state.pid == os.getpid():
        return None
    with contextlib.suppress(psutil.Error):
        process = psutil.Process(state.pid)
        if process.create_time() == state.created and process.status() != psutil.STATUS_ZOMBIE:
            return state.pid
    return None


def leftovers(state: UpState) -> list[psutil.Process]:
    """Component processes of `state` that still run: each is started with a path inside the data
    directory on its command line, so a recycled pid is never mistaken for one."""
    found = []
    for component in state.components.values():
        command = _command_line(component.pid)
        if component.pid is not None and any(f"{state.data_dir}/" in arg for arg in command):
            with contextlib.suppress(psutil.Error):
                found.append(psutil.Process(component.pid))
    return found
