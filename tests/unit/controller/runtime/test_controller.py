"""The reconcile boundary: each outcome of a reconcile becomes the right queue operation, metric
and Event — and nothing a reconciler raises escapes it."""

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from controller.runtime import (
    Controller,
    ControllerOptions,
    Metrics,
    PermanentError,
    RateLimiterSettings,
    Result,
    TemporaryError,
    WorkQueue,
)
from controller.runtime.ratelimit import ItemBackoff
from kube.errors import ServerError, TooManyRequests
from kube.events import ObjectReference
from tests.support.clocks import FakeClock

NODE = ObjectReference("Node", "n1", api_version="v1")
DEVICE = ObjectReference("Device", "n1", api_version="scheduling.koordinator.sh/v1alpha1")


@dataclass
class ScriptedReconciler:
    """Does what the test tells it to for each call: return a Result or raise."""

    outcomes: list[Callable[[], Result]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    name: str = "test"

    def reconcile(self, key: str) -> Result:
        self.calls.append(key)
        return self.outcomes.pop(0)()

    def reference(self, key: str) -> ObjectReference | None:
        return ObjectReference("Node", key, api_version="v1")


@dataclass
class Events:
    recorded: list[tuple[str, str, str]] = field(default_factory=list)

    def warning(self, ref: ObjectReference, reason: str, message: str) -> None:
        self.recorded.append((f"{ref.kind}/{ref.name}", reason, message))


def raises(error: Exception) -> Callable[[], Result]:
    def outcome() -> Result:
        raise error

    return outcome


def ok(requeue_after: float | None = None) -> Callable[[], Result]:
    return lambda: Result(requeue_after)


class Harness:
    def __init__(self, clock: FakeClock, *outcomes: Callable[[], Result]) -> None:
        self.clock = clock
        self.reconciler = ScriptedReconciler(list(outcomes))
        self.events = Events()
        self.metrics = Metrics()
        self.controller = Controller(
            self.reconciler,
            options=ControllerOptions(retries=RateLimiterSettings(base_delay=1.0, max_delay=60.0)),
            metrics=self.metrics,
            events=self.events,
            clock=clock,
        )
        self.queue: WorkQueue[str] = WorkQueue(
            rate_limiter=ItemBackoff(1.0, 60.0), clock=clock, observer=self.metrics.controller("test")
        )

    def run(self, key: str = "n1") -> str:
        return self.controller.process(self.queue, key)

    def ready_after(self) -> float | None:
        """Seconds until the key comes back (None: it does not), stepping the fake clock."""
        start = self.clock.now
        for _ in range(10_000):
            key = self.queue.get(timeout=0)
            if key is not None:
                self.queue.done(key)
                return self.clock.now - start
            if not self.queue.delayed:
                return None
            self.clock.advance(0.25)
        raise AssertionError("the key never came back")

    def count(self, result: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "tessera_controller_reconcile_total", {"controller": "test", "result": result}
        )
        assert value is not None
        return value


def test_success_is_counted_and_the_key_is_done(clock: FakeClock) -> None:
    h = Harness(clock, ok())
    assert h.run() == "success"
    assert h.ready_after() is None
    assert h.count("success") == 1
    assert h.events.recorded == []


def test_requeue_after_brings_the_key_back_then(clock: FakeClock) -> None:
    h = Harness(clock, ok(requeue_after=30))
    assert h.run() == "requeue"
    assert h.ready_after() == 30


def test_a_temporary_error_with_a_delay_retries_after_it(clock: FakeClock) -> None:
    h = Harness(clock, raises(TemporaryError("busy", delay=5)))
    assert h.run() == "temporary_error"
    assert h.ready_after() == 5
    assert h.events.recorded == []


def test_temporary_errors_back_off_and_a_success_resets_the_backoff(clock: FakeClock) -> None:
    h = Harness(clock, *[raises(TemporaryError("busy"))] * 3, ok(), raises(TemporaryError("busy")))
    waits = []
    for _ in range(3):
        h.run()
        waits.append(h.ready_after())
    assert waits == [1, 2, 4]
    assert h.run() == "success"
    h.run()
    assert h.ready_after() == 1


def test_api_errors_are_temporary(clock: FakeClock) -> None:
    h = Harness(clock, raises(ServerError("etcd timeout", status=500)))
    assert h.run() == "temporary_error"
    assert h.ready_after() == 1
    assert h.events.recorded == []


def test_too_many_requests_waits_as_long_as_the_server_asks(clock: FakeClock) -> None:
    h = Harness(clock, raises(TooManyRequests("slow down", status=429, details={"retryAfterSeconds": 7})))
    assert h.run() == "temporary_error"
    assert h.ready_after() == 7


def test_a_permanent_error_is_reported_on_its_objects_and_not_retried(clock: FakeClock) -> None:
    h = Harness(clock, raises(PermanentError("bad minor", reason="MalformedDevice", about=(NODE, DEVICE))))
    assert h.run() == "permanent_error"
    assert h.ready_after() is None
    assert h.events.recorded == [
        ("Node/n1", "MalformedDevice", "bad minor"),
        ("Device/n1", "MalformedDevice", "bad minor"),
    ]


def test_a_permanent_error_without_objects_goes_on_the_keys_reference(clock: FakeClock) -> None:
    h = Harness(clock, raises(PermanentError("bad", reason="Bad")))
    h.run("n7")
    assert h.events.recorded == [("Node/n7", "Bad", "bad")]


def test_the_same_failure_is_reported_once_until_it_changes_or_clears(clock: FakeClock) -> None:
    same = raises(PermanentError("bad minor", reason="MalformedDevice"))
    other = raises(PermanentError("bad quantity", reason="MalformedDevice"))
    h = Harness(clock, same, same, other, ok(), same)
    for _ in range(5):
        h.run()
    assert [message for _, _, message in h.events.recorded] == ["bad minor", "bad quantity", "bad minor"]


def test_an_unexpected_exception_is_caught_reported_and_retried(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    h = Harness(clock, raises(KeyError("allocatable")), raises(KeyError("allocatable")))
    assert h.run() == "error"
    assert h.ready_after() == 1
    assert h.run() == "error"
    assert h.ready_after() == 2  # second failure: backed off
    assert h.events.recorded == [("Node/n1", "ReconcileError", "test: KeyError: 'allocatable'")]  # once
    failures = [r for r in caplog.records if r.getMessage() == "Reconcile failed unexpectedly"]
    assert failures and failures[0].exc_info is not None  # with the stack
    assert h.count("error") == 2


def test_durations_are_observed_for_every_outcome(clock: FakeClock) -> None:
    h = Harness(clock, ok(), raises(TemporaryError("x")), raises(ValueError("y")))
    for _ in range(3):
        h.run()
    count = h.metrics.registry.get_sample_value(
        "tessera_controller_reconcile_duration_seconds_count", {"controller": "test"}
    )
    assert count == 3


def test_retries_are_counted(clock: FakeClock) -> None:
    h = Harness(clock, raises(TemporaryError("x")), raises(TemporaryError("x", delay=3)))
    h.run()
    h.run()
    retries = h.metrics.registry.get_sample_value("tessera_controller_workqueue_retries_total", {"controller": "test"})
    assert retries == 2  # a backed-off retry and one with the error's own delay


def test_options_refuse_zero_workers() -> None:
    with pytest.raises(ValueError, match="workers"):
        ControllerOptions(workers=0)
