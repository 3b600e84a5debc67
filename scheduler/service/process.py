"""`tessera scheduler` as a process: configuration, signals, exit codes.

Exit 0 after SIGTERM/SIGINT (scheduling stops, bindings in flight finish, the Lease is
released); exit 1 for a configuration problem at start-up (printed as one line naming every
problem) and immediately — without finishing anything — when leadership is lost, because
another replica may already be scheduling (the supervisor restarts the process, which rebuilds
everything from the API).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from types import FrameType

from apis.errors import ConfigError
from kube import Client
from kube.lifecycle import wait_until_set
from scheduler.framework import SchedulerConfig, load_config
from scheduler.service.service import SchedulerService
from scheduler.service.settings import SchedulerSettings

__all__ = ["EXIT_LOST_LEADERSHIP", "load_scheduler_config", "run"]

log = logging.getLogger(__name__)

EXIT_LOST_LEADERSHIP = 1


def load_scheduler_config(settings: SchedulerSettings) -> SchedulerConfig:
    """The `--config` file, or the defaults. Raises ConfigError naming the file and every problem."""
    if settings.config_file is None:
        return SchedulerConfig()
    try:
        text = settings.config_file.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read the scheduler config: {e}") from e
    try:
        return load_config(text)
    except ConfigError as e:
        raise ConfigError(f"{settings.config_file}: {e}") from e


def run(settings: SchedulerSettings) -> int:
    """Run until SIGTERM/SIGINT. Must be called from the main thread (it installs signal handlers)."""
    wake = threading.Event()
    try:
        config = load_scheduler_config(settings)
        client = Client.from_settings(settings.client)
        service = SchedulerService(settings, client, config=config, on_lost_leadership=_exit_now)
    except ConfigError as e:
        log.error("Invalid configuration", extra={"error": str(e)})
        return 1

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("Shutting down", extra={"signal": signal.Signals(signum).name})
        wake.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            service.start()
        except ConfigError as e:
            log.error("Cannot start", extra={"error": str(e)})
            return 1
        wait_until_set(wake)
        return 0
    finally:
        service.stop()
        client.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _exit_now() -> None:
    """Leadership lost: leave without finishing bindings in flight (see the module docstring)."""
    logging.shutdown()
    sys.stderr.flush()
    os._exit(EXIT_LOST_LEADERSHIP)
