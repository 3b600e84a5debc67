"""Flow control: levels by identity, seats, per-flow queues, fair dispatch and kube's 429."""

import asyncio
from typing import Any

import pytest

from apiserver.authz.identity import AUTHENTICATED, User, service_account_user
from apiserver.errors import StatusError
from apiserver.flowcontrol import FlowControl, FlowSettings, classify, estimated_nodes


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
        for _ in range(100):  # turns of the loop, not time: m0 leaves and its seat goes to m1
            if order[-1] == "m1":
                break
            await asyncio.sleep(0)
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


def test_bodies_are_charged_to_a_per_user_budget_of_nodes() -> None:
    """A user posting megabytes of small values is overdrawn, and its next body waits until the
    budget is refilled; other users have their own."""
    flow = FlowControl(FlowSettings(body_nodes_per_second=1000, body_nodes_burst=2000))
    flow.charge("mallory", 1500, now=0.0)
    assert flow.overdrawn("mallory", now=0.0) == 0.0, "within the burst"
    flow.charge("mallory", 1500, now=0.0)
    assert flow.overdrawn("mallory", now=0.0) == 1.0, "1,000 nodes over at 1,000 a second"
    assert flow.overdrawn("mallory", now=0.5) == 0.5
    assert flow.overdrawn("alice", now=0.5) == 0.0
    assert flow.overdrawn("mallory", now=60.0) == 0.0
    flow.charge("mallory", 4500, now=60.0)
    assert flow.overdrawn("mallory", now=60.0) == 2.5, "at most the burst is saved"


def test_only_users_and_other_service_accounts_wait_for_a_budget() -> None:
    async def scenario() -> int:
        flow = FlowControl(FlowSettings(body_nodes_per_second=1, body_nodes_burst=1, queue_timeout=1))
        big = b"[" + b"0," * 999 + b"0]"
        for who in (service_account_user("tessera-system", "tessera-scheduler"), user("root", "system:masters")):
            flow.after_body(who, big)
            await flow.before_body(who)
        flow.after_body(user("mallory"), big)
        try:
            await flow.before_body(user("mallory"))  # 999 s overdrawn: past the queue timeout
        except StatusError as e:
            return e.code
        return 200

    assert run(scenario()) == 429


@pytest.mark.parametrize(
    ("body", "nodes"),
    [
        (b'{"a":1}', 2),
        (b'{"a":[1,2,3],"b":{"c":"d"}}', 7),
        (b"a: 1\nb:\n- x\n- y\n", 7),
        (b'{"a":"' + b"x" * 3200 + b'"}', 100),  # a long string is charged by its bytes
    ],
    ids=["json-small", "json-nested", "yaml", "long-string"],
)
def test_nodes_are_estimated_without_decoding(body: bytes, nodes: int) -> None:
    assert estimated_nodes(body) == nodes
