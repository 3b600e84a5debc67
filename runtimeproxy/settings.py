"""The runtime proxy's settings, from `tessera runtime-proxy` flags or a test."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from apis.errors import ConfigError
from kube import unixsocket
from runtimeproxy.hookconfig import DEFAULT_DIR

__all__ = ["DEFAULT_LISTEN", "DEFAULT_RUNTIME_ENDPOINT", "ProxySettings"]

DEFAULT_LISTEN: Final = Path("/var/run/tessera/runtimeproxy.sock")
DEFAULT_RUNTIME_ENDPOINT: Final = "unix:///run/containerd/containerd.sock"
#: CDI's default spec directories, lowest priority first.
DEFAULT_CDI_SPEC_DIRS: Final = (Path("/etc/cdi"), Path("/var/run/cdi"))


@dataclass(frozen=True, slots=True)
class ProxySettings:
    #: Where kubelet connects (`--container-runtime-endpoint=unix://<listen>`).
    listen: Path = DEFAULT_LISTEN
    #: The real runtime's CRI endpoint.
    runtime_endpoint: str = DEFAULT_RUNTIME_ENDPOINT
    #: The runtime's ImageService endpoint; empty means the runtime endpoint.
    image_endpoint: str = ""
    #: Koordinator-style hook server registrations (`*.json`).
    hook_config_dir: Path = DEFAULT_DIR
    #: Deadline of one hook call; a hook server slower than this counts as failed.
    hook_timeout_s: float = 2.0
    #: Deadline of a runtime lookup that recovers a sandbox or container the proxy does not know.
    lookup_timeout_s: float = 2.0
    #: How often at most the hook config directory is checked for changes.
    config_rescan_s: float = 1.0
    #: Threads serving CRI calls; a long-lived stream (GetContainerEvents) holds one.
    max_workers: int = 64
    #: Permission bits of the listening socket (kubelet runs as root).
    socket_mode: int = 0o660
    #: Apply containers' CDI devices for a runtime that ignores CRI's `CDI_devices` (containerd
    #: before 1.7.2), from these spec directories (runtimeproxy/cdi.py).
    apply_cdi: bool = False
    cdi_spec_dirs: tuple[Path, ...] = DEFAULT_CDI_SPEC_DIRS

    def validate(self) -> None:
        """Raise ConfigError listing every problem at once."""
        problems = []
        for name in ("runtime_endpoint", "image_endpoint"):
            value = getattr(self, name)
            if name == "image_endpoint" and not value:
                continue
            try:
                if unixsocket.path_of(value) == self.listen:
                    problems.append(f"{name} {value!r} is the proxy's own listen socket")
            except ConfigError as e:
                problems.append(f"{name}: {e}")
        if not self.listen.is_absolute():
            problems.append(f"listen {self.listen}: expected an absolute path")
        for name in ("hook_timeout_s", "lookup_timeout_s"):
            if getattr(self, name) <= 0:
                problems.append(f"{name} must be > 0, got {getattr(self, name)}")
        if self.config_rescan_s < 0:
            problems.append(f"config_rescan_s must be >= 0, got {self.config_rescan_s}")
        if self.max_workers < 2:
            problems.append(f"max_workers must be >= 2, got {self.max_workers}")
        if problems:
            raise ConfigError("runtime proxy settings: " + "; ".join(problems))
