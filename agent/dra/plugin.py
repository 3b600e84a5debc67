"""The DRA plugin as one part of the agent: the driver and its two servers, started and stopped together.

`start()` restores the checkpoint (into the ledger, before the hook server admits anything) and
serves the plugin socket, and only then the registration socket: kubelet may call the plugin
as soon as it sees the registration. `stop()` goes the other way, so kubelet deregisters the
driver before its socket goes.
"""

from __future__ import annotations

from pathlib import Path

from agent.dra import PLUGIN_SOCKET, registration_socket
from agent.dra.driver import DRADriver
from agent.dra.prepared import CheckpointError
from agent.dra.server import DRAPluginServer, RegistrationServer
from apis.errors import ConfigError

__all__ = ["DRAPlugin"]


class DRAPlugin:
    def __init__(self, driver: DRADriver, *, plugin_dir: Path, registry_dir: Path) -> None:
        self.driver = driver
        self.server = DRAPluginServer(driver, socket_path=plugin_dir / PLUGIN_SOCKET)
        self.registration = RegistrationServer(
            socket_path=registration_socket(registry_dir), endpoint=self.server.socket_path
        )

    def restore(self) -> None:
        """Load the checkpoint (see DRADriver.start). Raises ConfigError when it cannot."""
        try:
            self.driver.start()
        except (CheckpointError, OSError) as e:
            raise ConfigError(f"DRA plugin: {e}") from e

    def start(self) -> None:
        """Serve both sockets. Raises ConfigError when a socket is taken."""
        self.server.start()
        try:
            self.registration.start()
        except BaseException:
            self.server.stop()
            raise

    def stop(self) -> None:
        self.registration.stop()
        self.server.stop()
