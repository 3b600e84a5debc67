"""Leader election: how long a Lease takes to change hands, after a clean stop and after a crash.

Starts `tessera apiserver` as a process and, in this process, two `kube.LeaderElector`
candidates per round on a Lease of their own, each with its own client (as two replicas have).
Once one leads, it stops: releasing the Lease (`--leader-elect-release-on-stop`, what a component
does on SIGTERM) or not (what a crash leaves behind: the follower waits for the lease to expire
by its own clock). A handover is the time from the leader's `stop()` returning to the follower's
`on_started_leading`. Expected: about one `--retry-period` after a release, and the lease
duration plus up to one retry period after a crash. tests/integration/kube/test_leaderelection.py
checks the behaviour (who holds the Lease, in what order); this measures the time it takes.
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from collections.abc import Callable

from apis.errors import ConfigError
from cli.bench._report import Latencies, Report
from cli.launchers.apiserver import EmbeddedAPIServer, run_apiserver
from kube.leaderelection import LeaderElectionSettings, LeaderElector

#: Seconds a round may wait for a leader or a handover before the run fails.
_ROUND_TIMEOUT_S = 60.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=20, help="handovers of each kind (default 20)")
    parser.add_argument("--lease-duration", type=float, default=2.0, help="seconds (default 2)")
    parser.add_argument("--renew-deadline", type=float, default=1.5, help="seconds (default 1.5)")
    parser.add_argument("--retry-period", type=float, default=0.2, help="seconds (default 0.2)")


def run(args: argparse.Namespace, report: Report) -> int:
    if args.rounds < 1:
        raise ConfigError(f"--rounds {args.rounds}: must be at least 1")
    timings = LeaderElectionSettings(
        "bench",
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
    )
    timings.validate()
    report.setting(
        rounds=args.rounds,
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
    )
    with run_apiserver() as server:
        for release, key, label in (
            (True, "release", "handover after a clean stop (released)"),
            (False, "crash", "handover after a crash (lease expired)"),
        ):
            samples = [_handover(server, timings, release=release) for _ in range(args.rounds)]
            report.latencies(Latencies.of(samples), key, label=label)
    return 0


def _handover(server: EmbeddedAPIServer, timings: LeaderElectionSettings, *, release: bool) -> float:
    """One round on a new Lease: seconds from the leader's stop() to the follower leading."""
    lease = f"bench-{uuid.uuid4().hex[:8]}"
    started = [threading.Event(), threading.Event()]
    anyone = threading.Event()

    def leading(i: int) -> Callable[[], None]:
        def started_leading() -> None:
            started[i].set()
            anyone.set()

        return started_leading

    clients = [server.client(), server.client()]
    electors = [
        LeaderElector(
            client,
            LeaderElectionSettings(
                lease,
                namespace="default",
                identity=f"candidate-{i}",
                lease_duration=timings.lease_duration,
                renew_deadline=timings.renew_deadline,
                retry_period=timings.retry_period,
                release_on_stop=release,
            ),
            on_started_leading=leading(i),
        )
        for i, client in enumerate(clients)
    ]
    try:
        for elector in electors:
            elector.start()
        if not anyone.wait(_ROUND_TIMEOUT_S):
            raise ConfigError(f"no candidate led Lease default/{lease} within {_ROUND_TIMEOUT_S:g} s")
        leader = 0 if started[0].is_set() else 1
        follower = 1 - leader
        electors[leader].stop()
        stopped = time.perf_counter()
        if not started[follower].wait(_ROUND_TIMEOUT_S):
            raise ConfigError(f"the follower did not take Lease default/{lease} over within {_ROUND_TIMEOUT_S:g} s")
        return time.perf_counter() - stopped
    finally:
        for elector in electors:
            elector.stop()
        for client in clients:
            client.close()
