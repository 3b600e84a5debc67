"""A component's main thread waits for its stop signal in slices (`kube.lifecycle.wait_until_set`)."""

from __future__ import annotations

import signal
import threading

from kube.lifecycle import wait_until_set
from tests.support.waiting import wait_for


class CountedEvent(threading.Event):
    """A threading.Event that notes the timeout of every wait on it."""

    def __init__(self) -> None:
        super().__init__()
        self.timeouts: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.timeouts.append(timeout)
        return super().wait(timeout)


def test_a_signal_another_thread_received_still_wakes_the_waiting_main_thread() -> None:
    # What the kernel may do with SIGTERM in a process with gRPC's threads: hand it to one of
    # them. CPython runs the Python handler only when the main thread executes bytecode again,
    # so `stop.wait()` without a timeout would never return, and a single long wait returns
    # (and runs the handler) only when it ends: the waits are slices of at most a second.
    stop = CountedEvent()
    handled = threading.Event()
    previous = signal.signal(signal.SIGUSR1, lambda _signum, _frame: (handled.set(), stop.set()))
    try:

        def signal_this_thread() -> None:
            wait_for(lambda: stop.timeouts, poll_s=0.005, what="the main thread waiting")
            signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)
            # Stay alive until the handler ran (the signal is this thread's to take); a hang
            # guard sets `stop` itself if it never does, which the asserts below tell apart.
            if not handled.wait(60):
                stop.set()

        threading.Thread(target=signal_this_thread, daemon=True).start()
        wait_until_set(stop)
        assert handled.is_set(), "woken by the guard: the handler never ran in the main thread"
        assert all(t is not None and t <= 1.0 for t in stop.timeouts), stop.timeouts
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_it_returns_at_once_when_the_event_is_already_set() -> None:
    stop = CountedEvent()
    stop.set()
    wait_until_set(stop)
    assert len(stop.timeouts) == 1  # one look, no slice waited out
