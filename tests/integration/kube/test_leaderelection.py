"""Two candidates on one Lease: one leader at a time, handover within the lease duration."""

import threading
import time
from collections.abc import Callable

import pytest

from apis.errors import ConfigError
from cli.launchers.apiserver import EmbeddedAPIServer
from kube.leaderelection import LeaderElectionSettings, LeaderElector
from kube.resources import LEASES
from tests.integration.conftest import unique
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

LEASE_DURATION = 2.0


def settings(lease: str, identity: str, *, release: bool = True) -> LeaderElectionSettings:
    return LeaderElectionSettings(
        lease_name=lease,
        namespace="default",
        identity=identity,
        lease_duration=LEASE_DURATION,
        renew_deadline=1.5,
        retry_period=0.2,
        release_on_stop=release,
    )


def one_leader_at_a_time(electors: list[LeaderElector], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert sum(e.is_leader for e in electors) <= 1
        time.sleep(0.01)


@pytest.mark.parametrize("release", [True, False], ids=["clean-stop", "crash"])
def test_one_leader_and_handover(apiserver: EmbeddedAPIServer, release: bool) -> None:
    lease = unique("lease")
    transitions: list[str] = []
    lock = threading.Lock()

    def note(what: str) -> Callable[[], None]:
        def callback() -> None:
            with lock:
                transitions.append(what)

        return callback

    clients = [apiserver.client(), apiserver.client()]
    electors = [
        LeaderElector(
            c,
            settings(lease, f"candidate-{i}", release=release),
            on_started_leading=note(f"start-{i}"),
            on_stopped_leading=note(f"stop-{i}"),
        )
        for i, c in enumerate(clients)
    ]
    try:
        for elector in electors:
            elector.start()
        wait_for(lambda: any(e.is_leader for e in electors), what="a leader")
        one_leader_at_a_time(electors, 1.0)
        leader = next(e for e in electors if e.is_leader)
        follower = next(e for e in electors if e is not leader)
        assert follower.leader == leader.settings.identity
        leader.stop()
        assert not leader.is_leader
        stopped = time.monotonic()
        wait_for(lambda: follower.is_leader, timeout_s=LEASE_DURATION + 3, what="the follower to lead")
        took = time.monotonic() - stopped
        assert took <= LEASE_DURATION + 1.5, "a crashed leader's lease is taken over once it expires"
        if release:
            assert took < LEASE_DURATION / 2, "a released lease is taken over at once"
        one_leader_at_a_time(electors, 0.5)
        lease_obj = clients[0].resource(LEASES).get(lease, namespace="default")
        assert lease_obj["spec"]["holderIdentity"] == follower.settings.identity
        assert lease_obj["spec"]["leaseTransitions"] >= 1
    finally:
        for elector in electors:
            elector.stop()
        for c in clients:
            c.close()
    first = transitions[0]
    assert first.startswith("start-") and transitions[1] == first.replace("start", "stop")


def test_settings_are_validated() -> None:
    with pytest.raises(ConfigError):
        LeaderElectionSettings("l", lease_duration=5, renew_deadline=6, retry_period=1).validate()
