"""Two candidates on one Lease: one leader at a time; a released Lease is handed over through an
empty holder, a crashed leader's only once its lease expired. How long handovers take is
`tessera bench leader-election`'s to measure."""

import datetime
import threading
from collections.abc import Callable
from typing import Any

import pytest

from apis.errors import ConfigError
from cli.launchers.apiserver import EmbeddedAPIServer
from kube.client import Client
from kube.leaderelection import LeaderElectionSettings, LeaderElector
from kube.resources import LEASES, WatchEvent
from tests.support.cluster import unique
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


class LeaseHistory:
    """Every version of one Lease's spec from now on, in the order the API server wrote them."""

    def __init__(self, client: Client, name: str) -> None:
        api = client.resource(LEASES)
        current = api.get(name, namespace="default")
        self.specs: list[dict[str, Any]] = [current["spec"]]
        self._stream = api.watch(
            namespace="default",
            resource_version=current["metadata"]["resourceVersion"],
            field_selector=f"metadata.name={name}",
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        event: WatchEvent
        for event in self._stream:
            if event.type == "MODIFIED":
                self.specs.append(event.object["spec"])

    def holders(self) -> list[str]:
        """The holders in turn (an empty one: released), each once per stretch it held."""
        turns: list[str] = []
        for spec in self.specs:
            holder = spec.get("holderIdentity") or ""
            if not turns or turns[-1] != holder:
                turns.append(holder)
        return turns

    def renewals(self, holder: str) -> int:
        return sum(1 for spec in self.specs if spec.get("holderIdentity") == holder)

    def close(self) -> None:
        self._stream.close()
        self._thread.join(10)


def when(micro_time: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(micro_time)


def one_leader_while(electors: list[LeaderElector], done: Callable[[], bool], what: str) -> None:
    """Check that no two candidates believe they lead, until `done()`."""

    def check() -> bool:
        assert sum(e.is_leader for e in electors) <= 1
        return done()

    wait_for(check, poll_s=0.01, what=what)


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
    history: LeaseHistory | None = None
    try:
        for elector in electors:
            elector.start()
        wait_for(lambda: any(e.is_leader for e in electors), what="a leader")
        leader = next(e for e in electors if e.is_leader)
        follower = next(e for e in electors if e is not leader)
        me, successor = leader.settings.identity, follower.settings.identity
        history = LeaseHistory(clients[0], lease)
        one_leader_while(electors, lambda: history.renewals(me) >= 3, "the leader to renew three times")
        assert follower.leader == me
        leader.stop()
        assert not leader.is_leader
        wait_for(lambda: follower.is_leader, what="the follower to lead")
        one_leader_while(electors, lambda: history.renewals(successor) >= 3, "the new leader to renew three times")
        if release:
            assert history.holders() == [me, "", successor], "released, then taken"
        else:
            assert history.holders() == [me, successor], "taken over from the crashed leader"
            last_renewal = max(when(s["renewTime"]) for s in history.specs if s["holderIdentity"] == me)
            taken = next(when(s["acquireTime"]) for s in history.specs if s["holderIdentity"] == successor)
            # Not before the lease expired by the follower's clock: the duration since it saw the
            # last renewal, less the one GET between its reading the clock and its judging.
            assert (taken - last_renewal).total_seconds() >= LEASE_DURATION / 2
        lease_obj = clients[0].resource(LEASES).get(lease, namespace="default")
        assert lease_obj["spec"]["holderIdentity"] == successor
        assert lease_obj["spec"]["leaseTransitions"] >= 1
    finally:
        if history is not None:
            history.close()
        for elector in electors:
            elector.stop()
        for c in clients:
            c.close()
    first = transitions[0]
    assert first.startswith("start-") and transitions[1] == first.replace("start", "stop")


def test_settings_are_validated() -> None:
    with pytest.raises(ConfigError):
        LeaderElectionSettings("l", lease_duration=5, renew_deadline=6, retry_period=1).validate()
