"""Flow control: levels by identity, seats, per-flow queues, fair dispatch and kube's 429."""

import asyncio
from typing import Any

import pytest

from apiserver.authz.identity import AUTHENTICATED, User, service_account_user
from apiserver.errors import StatusError
from apiserver.flowcontrol import FlowControl, FlowSettings, classify


def user(name: str, *groups: str) -> User:
    return User(name, "", (*groups, AUTHENTICATED))


@pytest.mark.parametrize(
    ("who", "level"),
    [
        (user("tessera-admin", "system:masters"), "exempt"),
        (user("system:node:n1", "system:nodes"), "system"),
        (service_account_user("tessera-system", "tessera-scheduler"), "system"),
        (service_account_user("kube-system", "x"), "system"),
        (service_account_user("team", "ci"), "workload-low"),
        (user("alice"), "global-default"),
    ],
    ids=["masters", "node", "component", "kube-system", "other-sa", "user"],
)
def test_levels_by_identity(who: User, level: str) -> None:
    assert classify(who) == level


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_one_flow_holds_at_most_a_quarter_and_others_keep_their_seats() -> None:
    async def scenario() -> list[str]:
        flow = FlowControl(FlowSettings(default_seats=8, queue_length=10))
        release = asyncio.Event()
        order: list[str] = []

        async def request(who: User, tag: str) -> None:
            async with flow.seat(who):
                order.append(tag)
                await release.wait()

        flood = [asyncio.create_task(request(user("mallory"), f"m{i}")) for i in range(6)]
        await asyncio.sleep(0)
        assert order == ["m0", "m1"], "a quarter of 8 seats"
        victim = asyncio.create_task(request(user("alice"), "a"))
        await asyncio.sleep(0)
        assert order[-1] == "a", "alice is not queued behind mallory"
        assert flow.stats()["global-default"] == {"busy": 3, "waiting": 4}
        release.set()
        await asyncio.gather(*flood, victim)
        return order

    assert sorted(run(scenario())) == ["a", "m0", "m1", "m2", "m3", "m4", "m5"]


def test_a_full_queue_is_kubes_429_with_retry_after() -> None:
    async def scenario() -> StatusError:
        flow = FlowControl(FlowSettings(default_seats=4, queue_length=2))
        hold = asyncio.Event()

        async def request() -> None:
            async with flow.seat(user("mallory")):
                await hold.wait()

        tasks = [asyncio.create_task(request()) for _ in range(3)]  # one runs, two wait
        await asyncio.sleep(0)
        with pytest.raises(StatusError) as e:
            async with flow.seat(user("mallory")):
                pass
        hold.set()
        await asyncio.gather(*tasks)
        return e.value

    error = run(scenario())
    assert error.code == 429 and error.reason == "TooManyRequests" and error.retry_after == 1
    assert error.message == "Too many requests, please try again later."


def test_a_wait_longer_than_the_queue_timeout_is_429() -> None:
    async def scenario() -> int:
        flow = FlowControl(FlowSettings(default_seats=4, queue_timeout=0.01))
        hold = asyncio.Event()

        async def holder() -> None:
            async with flow.seat(user("mallory")):
                await hold.wait()

        task = asyncio.create_task(holder())
        await asyncio.sleep(0)
        try:
            async with flow.seat(user("mallory")):
                return 200
        except StatusError as e:
            return e.code
        finally:
            hold.set()
            await task

    assert run(scenario()) == 429


def test_the_freed_seat_goes_to_the_flow_holding_fewest() -> None:
    async def scenario() -> list[str]:
        flow = FlowControl(FlowSettings(default_seats=4))  # one seat per flow at most, four in all
        gates = {name: asyncio.Event() for name in ("m0", "m1", "b0", "c0", "a0")}
        order: list[str] = []

        async def request(who: str, tag: str) -> None:
            async with flow.seat(user(who)):
                order.append(tag)
                await gates[tag].wait()

        tasks = [asyncio.create_task(request("mallory", "m0"))]
        tasks += [asyncio.create_task(request("mallory", "m1"))]
        await asyncio.sleep(0)
        tasks += [asyncio.create_task(request(n, t)) for n, t in (("bob", "b0"), ("carol", "c0"))]
        await asyncio.sleep(0)
        assert order == ["m0", "b0", "c0"], "m1 waits: mallory holds her one seat"
        gates["m0"].set()
        await asyncio.sleep(0.01)
        assert order[-1] == "m1"
        for g in gates.values():
            g.set()
        await asyncio.gather(*tasks)
        return order

    run(scenario())


def test_masters_are_never_limited_and_watches_are_counted_per_user() -> None:
    async def scenario() -> None:
        flow = FlowControl(FlowSettings(default_seats=4, queue_length=0, max_watches_per_user=2))
        admin = user("root", "system:masters")
        async with flow.seat(admin), flow.seat(admin), flow.seat(admin):
            pass
        with flow.watch(user("alice")), flow.watch(user("alice")):
            with pytest.raises(StatusError) as e, flow.watch(user("alice")):
                pass
            assert e.value.code == 429 and "too many watches" in e.value.message
            with flow.watch(user("bob")), flow.watch(admin), flow.watch(admin), flow.watch(admin):
                pass
        with flow.watch(user("alice")):
            pass

    run(scenario())
