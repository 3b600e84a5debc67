"""Keep one component process running, as kubelet keeps a static pod running.

`tessera up` runs every component as a child process. A child that dies — a crash, an OOM kill,
someone's `kill -9` — is reported and started again after a backoff that doubles with each
quick failure (0.5 s up to 30 s, reset once it has run for a minute), so a component that
cannot start does not spin. Components rebuild their state from the API server, so starting
them again is all recovery takes.

    supervised = Supervised("scheduler", SchedulerProcess(...), on_event=print)
    supervised.start()     # the first start: blocks until ready, raises ConfigError if it cannot
    ...                    # a thread now waits for the process to exit and restarts it
    supervised.stop()      # SIGTERM (SIGKILL after the grace period); no restart after this

`start()` and `stop()` may be called from different threads, in any order (a Ctrl-C during
start-up stops what is starting).
"""

from __future__ import annotations

import enum
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from apis.errors import ConfigError
from kube.backoff import Backoff

__all__ = ["EventKind", "Process", "Stopped", "Supervised", "SupervisorEvent"]

log = logging.getLogger(__name__)

#: kubelet's CrashLoopBackOff, scaled to a machine where restarts are cheap.
DEFAULT_BACKOFF: Final = Backoff(initial=0.5, maximum=30.0, jitter=0.1)
#: A process that ran this long before it exited starts the backoff afresh.
_RESET_AFTER_S: Final = 60.0


class Process(Protocol):
    """What is supervised: a `kube.process.ComponentProcess` with a `start()`."""

    log_path: Path

    @property
    def pid(self) -> int | None: ...

    def start(self, timeout: float) -> object:
        """Start and return once ready; raise ConfigError when it exits first or is not ready."""
        ...

    def wait_exit(self, timeout: float | None) -> int | None: ...

    def signal(self, signum: int) -> None: ...

    def stop(self, timeout: float) -> int | None: ...


class Stopped(Exception):
    """`start()` gave up because `stop()` was called meanwhile."""


class EventKind(enum.Enum):
    STARTED = "started"
    EXITED = "exited"
    START_FAILED = "start-failed"


@dataclass(frozen=True, slots=True)
class SupervisorEvent:
    """Something a person running `tessera up` should hear about."""

    kind: EventKind
    name: str
    pid: int | None = None
    #: How the process ended (EXITED): its exit code, negative for a signal.
    exit_code: int | None = None
    #: Restarts so far (0 on the first start).
    restarts: int = 0
    #: Seconds until the next attempt (EXITED, START_FAILED).
    delay: float = 0.0
    #: Why a start failed (START_FAILED).
    message: str = ""
    #: The process's log, where the details are.
    log: Path | None = None


class Supervised:
    """One supervised process; see the module docstring."""

    def __init__(
        self,
        name: str,
        process: Process,
        *,
        on_event: Callable[[SupervisorEvent], None],
        start_timeout: float = 120.0,
        stop_timeout: float = 30.0,
        backoff: Backoff = DEFAULT_BACKOFF,
    ) -> None:
        self.name = name
        self.process = process
        self._on_event = on_event
        self._start_timeout = start_timeout
        self._stop_timeout = stop_timeout
        self._backoff = backoff
        self._stopping = threading.Event()
        #: Held while the process is being started, so that `stop()` waits for a start to settle.
        self._starting = threading.Lock()
        self._watcher: threading.Thread | None = None
        self.restarts = 0
        self._started_at = 0.0

    def start(self) -> None:
        """Start the process and, once it is ready, watch it. Raises ConfigError (with the end of
        its log) when it does not become ready, Stopped when `stop()` was called meanwhile."""
        self._start_once()
        self._watcher = threading.Thread(target=self._watch, name=f"supervise-{self.name}", daemon=True)
        self._watcher.start()

    def stop(self) -> int | None:
        """Stop it for good: no restart after this. Returns its exit code. Idempotent."""
        self._stopping.set()
        self.process.signal(signal.SIGTERM)  # also ends a start that is waiting for readiness
        with self._starting:  # a start in progress has finished (and stopped what it started)
            pass
        code = self.process.stop(self._stop_timeout)  # the watcher's wait ends with the process
        if self._watcher is not None:
            self._watcher.join(self._stop_timeout)  # a process SIGKILL did not end keeps it: let go
            if self._watcher.is_alive():
                log.error("Gave up waiting for the component to exit", extra={"component": self.name})
        return code

    def _start_once(self) -> None:
        with self._starting:
            if self._stopping.is_set():
                raise Stopped(self.name)
            try:
                self.process.start(self._start_timeout)
            except ConfigError:
                if self._stopping.is_set():
                    raise Stopped(self.name) from None
                raise
            if self._stopping.is_set():  # stop() came while it started: it was not signalled
                self.process.stop(self._stop_timeout)
                raise Stopped(self.name)
            self._started_at = time.monotonic()
        self._on_event(
            SupervisorEvent(
                EventKind.STARTED, self.name, pid=self.process.pid, restarts=self.restarts, log=self.process.log_path
            )
        )

    def _watch(self) -> None:
        """Wait for the process to exit; start it again after a backoff; until `stop()`."""
        delays = self._backoff.delays()
        while True:
            code = self.process.wait_exit(None)
            if self._stopping.is_set():
                return
            if time.monotonic() - self._started_at >= _RESET_AFTER_S:
                delays = self._backoff.delays()
            delay = next(delays)
            log.warning("Component exited; restarting", extra={"component": self.name, "exitCode": code})
            self._on_event(
                SupervisorEvent(
                    EventKind.EXITED,
                    self.name,
                    exit_code=code,
                    restarts=self.restarts,
                    delay=delay,
                    log=self.process.log_path,
                )
            )
            if not self._restart(delay, delays):
                return

    def _restart(self, delay: float, delays: Iterator[float]) -> bool:
        """Start again after `delay`, retrying with the next delays; False once stopping."""
        while not self._stopping.wait(delay):
            self.restarts += 1
            try:
                self._start_once()
            except Stopped:
                return False
            except Exception as e:  # the loop boundary: ConfigError says why; anything else is a bug, logged
                delay = next(delays)
                log.warning(
                    "Component did not start; retrying",
                    extra={"component": self.name},
                    exc_info=not isinstance(e, ConfigError),
                )
                self._on_event(
                    SupervisorEvent(
                        EventKind.START_FAILED,
                        self.name,
                        restarts=self.restarts,
                        delay=delay,
                        message=str(e),
                        log=self.process.log_path,
                    )
                )
                continue
            return True
        return False
