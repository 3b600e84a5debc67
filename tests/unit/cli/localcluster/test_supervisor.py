"""`Supervised` keeps a process running: restarts after an exit, retries a failed start with
backoff, and never restarts once stopped. The process is a double of the `Process` seam (real
processes are the end-to-end kill tests' job); backoff delays are a millisecond."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from apis.errors import ConfigError
from cli.localcluster.supervisor import EventKind, Stopped, Supervised, SupervisorEvent
from kube.backoff import Backoff
from tests.support.waiting import wait_for

FAST = Backoff(initial=0.001, maximum=0.001, jitter=0.0)


class FakeProcess:
    """Starts at once (or fails the first `failing_starts` times); exits when told to."""

    def __init__(self, *, failing_starts: int = 0) -> None:
        self.log_path = Path("/nonexistent/fake.log")
        self.starts = 0
        self.failing_starts = failing_starts
        self._pid: int | None = None
        self._exited = threading.Event()
        self._code: int | None = None

    @property
    def pid(self) -> int | None:
        return self._pid

    def start(self, timeout: float) -> None:
        self.starts += 1
        if self.failing_starts:
            self.failing_starts -= 1
            raise ConfigError("fake exited with 1:\nno GPU in sight")
        self._code, self._exited = None, threading.Event()
        self._pid = 1000 + self.starts

    def exit(self, code: int) -> None:
        self._code = code
        self._exited.set()

    def wait_exit(self, timeout: float | None) -> int | None:
        self._exited.wait(timeout)
        return self._code

    def signal(self, signum: int) -> None:
        if self._pid is not None:
            self.exit(-signum)

    def stop(self, timeout: float) -> int | None:
        self.signal(15)
        return self._code


class Recorder:
    def __init__(self) -> None:
        self.events: list[SupervisorEvent] = []
        self._lock = threading.Lock()

    def __call__(self, event: SupervisorEvent) -> None:
        with self._lock:
            self.events.append(event)

    def kinds(self) -> list[EventKind]:
        with self._lock:
            return [e.kind for e in self.events]


def supervise(process: FakeProcess, recorder: Recorder) -> Supervised:
    return Supervised("fake", process, on_event=recorder, backoff=FAST)


def test_a_process_that_exits_is_started_again() -> None:
    process, recorder = FakeProcess(), Recorder()
    supervised = supervise(process, recorder)
    supervised.start()
    process.exit(-9)
    wait_for(lambda: len(recorder.events) == 3, what="the restart")
    started, exited, restarted = recorder.events
    assert (started.kind, started.pid, started.restarts) == (EventKind.STARTED, 1001, 0)
    assert (exited.kind, exited.exit_code, exited.delay) == (EventKind.EXITED, -9, 0.001)
    assert (restarted.kind, restarted.pid, restarted.restarts) == (EventKind.STARTED, 1002, 1)
    supervised.stop()


def test_a_failed_restart_is_retried_until_it_starts() -> None:
    process, recorder = FakeProcess(), Recorder()
    supervised = supervise(process, recorder)
    supervised.start()
    process.failing_starts = 2
    process.exit(1)
    wait_for(lambda: recorder.kinds()[-1:] == [EventKind.STARTED] and len(recorder.events) > 1, what="a restart")
    assert recorder.kinds() == [
        EventKind.STARTED,
        EventKind.EXITED,
        EventKind.START_FAILED,
        EventKind.START_FAILED,
        EventKind.STARTED,
    ]
    assert "no GPU in sight" in recorder.events[2].message
    assert supervised.restarts == 3
    supervised.stop()


def test_the_first_start_failing_is_the_callers_to_handle() -> None:
    process, recorder = FakeProcess(failing_starts=1), Recorder()
    with pytest.raises(ConfigError, match="no GPU in sight"):
        supervise(process, recorder).start()
    assert recorder.events == []


def test_nothing_is_restarted_after_stop() -> None:
    process, recorder = FakeProcess(), Recorder()
    supervised = supervise(process, recorder)
    supervised.start()
    assert supervised.stop() == -15
    assert recorder.kinds() == [EventKind.STARTED]
    assert process.starts == 1
    assert supervised.stop() == -15  # idempotent


def test_a_start_after_stop_is_refused() -> None:
    supervised = supervise(FakeProcess(), Recorder())
    supervised.stop()
    with pytest.raises(Stopped):
        supervised.start()


class StuckProcess(FakeProcess):
    """A process even SIGKILL does not end (stuck in the kernel): it exits only when told to."""

    def signal(self, signum: int) -> None:
        pass

    def stop(self, timeout: float) -> int | None:
        return None


def test_stop_gives_up_on_a_process_that_does_not_exit_instead_of_hanging() -> None:
    process = StuckProcess()
    supervised = Supervised("stuck", process, on_event=Recorder(), backoff=FAST, stop_timeout=0.01)
    supervised.start()
    assert supervised.stop() is None  # returned, although the process still "runs"
    process.exit(-9)  # the kernel lets go at last: the watcher ends without restarting it
    wait_for(lambda: process.starts == 1 and not any(t.name == "supervise-stuck" for t in threading.enumerate()))
