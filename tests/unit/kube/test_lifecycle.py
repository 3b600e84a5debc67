"""A component's main thread waits for its stop signal in slices (`kube.lifecycle.wait_until_set`)."""

from __future__ import annotations

import signal
import threading
import time

from kube.lifecycle import wait_until_set


def test_a_signal_another_thread_received_still_wakes_the_waiting_main_thread() -> None:
    # What the kernel may do with SIGTERM in a process with gRPC's threads: hand it to one of
    # them. CPython runs the Python handler only when the main thread executes bytecode again,
    # so `stop.wait()` without a timeout would never return (a single `stop.wait(3)` returns
    # after the full 3 s, and only then runs the handler).
    stop = threading.Event()
    previous = signal.signal(signal.SIGUSR1, lambda _signum, _frame: stop.set())
    try:

        def signal_this_thread() -> None:
            time.sleep(0.1)
            signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)
            time.sleep(5)  # stay alive: the signal is this thread's to take

        threading.Thread(target=signal_this_thread, daemon=True).start()
        started = time.monotonic()
        wait_until_set(stop)
        assert time.monotonic() - started < 2
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_it_returns_at_once_when_the_event_is_already_set() -> None:
    stop = threading.Event()
    stop.set()
    started = time.monotonic()
    wait_until_set(stop)
    assert time.monotonic() - started < 0.1
