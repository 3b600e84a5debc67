"""Start as many processes of one component as a test asks for, and kill them all when it is done.

The controller's and the descheduler's suites start replicas from a fixture
(`start_controller("--leader-elect", ...)`): each in its own directory under a temporary one, with
the suite's arguments, started and ready; killed (SIGKILL: nothing a test left behind may linger
into the next) when the fixture ends, their logs printed first when `show_logs_env` is set.

    @pytest.fixture
    def start_descheduler(apiserver):
        with starter.processes(lambda d, args: DeschedulerProcess(apiserver.kubeconfig, directory=d, args=args),
                               prefix="tessera-descheduler-", show_logs_env="TESSERA_SHOW_DESCHEDULER_LOGS") as start:
            yield start
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from cli.launchers.base import KubeComponentProcess

__all__ = ["processes"]

P = TypeVar("P", bound=KubeComponentProcess)


@contextlib.contextmanager
def processes(
    new: Callable[[Path, Sequence[str]], P],
    *,
    prefix: str,
    show_logs_env: str,
    log_lines: int = 300,
    timeout: float = 60.0,
) -> Iterator[Callable[..., P]]:
    """`start(*args)`: `new(directory, args)` in a fresh directory, started (ready within
    `timeout`). On exit every process started is killed, and with `$show_logs_env` set the last
    `log_lines` of each log are printed."""
    started: list[P] = []
    with tempfile.TemporaryDirectory(prefix=prefix) as directory:

        def start(*args: str) -> P:
            process = new(Path(directory) / uuid.uuid4().hex[:6], args)
            started.append(process)
            return process.start(timeout=timeout)

        try:
            yield start
        finally:
            for process in started:
                process.kill()
            if os.environ.get(show_logs_env):
                for process in started:
                    print(process.log_tail(log_lines))
