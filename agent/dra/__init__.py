"""The agent as a Kubernetes DRA driver's node side: kubelet's DRA plugin for `gpu.tessera.dev`.

kubelet calls it to prepare a pod's allocated ResourceClaims before the pod's containers start
and to release them after; the agent checks each claim against the node's one device ledger
(Koordinator pods and claims alike), keeps what it prepared in a checkpoint, and describes the
devices to the container runtime as CDI specs. `driver` is the logic, `prepared` the checkpoint,
`cdi` the specs, `server` the gRPC services (registration and DRAPlugin), `plugin` all of it
started and stopped together. The default paths are kubelet's and CDI's; the names load the gRPC
code only when used (an agent without `--dra-plugin` never loads it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from apis.dra.gpus import DRIVER

__all__ = ["DEFAULT_CDI_DIR", "DEFAULT_PLUGIN_DIR", "DEFAULT_REGISTRY_DIR", "PLUGIN_SOCKET", "registration_socket"]

#: Where kubelet's plugin watcher looks for registration sockets.
DEFAULT_REGISTRY_DIR: Final = Path("/var/lib/kubelet/plugins_registry")
#: Where a DRA driver keeps its own socket, by kubelet's convention.
DEFAULT_PLUGIN_DIR: Final = Path("/var/lib/kubelet/plugins") / DRIVER
#: The transient CDI spec directory runtimes read (besides /etc/cdi).
DEFAULT_CDI_DIR: Final = Path("/var/run/cdi")
#: The plugin socket's name in the plugin directory.
PLUGIN_SOCKET: Final = "dra.sock"


def registration_socket(registry_dir: Path) -> Path:
    """The driver's registration socket in kubelet's plugins_registry directory."""
    return registry_dir / f"{DRIVER}-reg.sock"
