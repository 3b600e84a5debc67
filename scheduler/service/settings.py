"""Everything `tessera scheduler` can be told, as frozen dataclasses grouped by topic.

The command line (`cli/scheduler.py`) builds a `SchedulerSettings` and hands it to
`scheduler.service.run`; tests and the end-to-end benchmark build one directly. Defaults follow
kube-scheduler where it has the same knob (backoff 1 s → 10 s, unschedulable pods retried after
5 minutes at the latest, Lease timings) and Koordinator for the diagnostics port (10251).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from apis.errors import ConfigError
from apis.extension import names
from kube import ClientSettings, LeaderElectionSettings
from kube.servingtls import TLSServing
from scheduler.service.endpoint import Endpoint, default_address

__all__ = [
    "BinderSettings",
    "GRPCSettings",
    "HTTPSettings",
    "QueueSettings",
    "SchedulerSettings",
    "TLSSettings",
]


@dataclass(frozen=True, slots=True)
class TLSSettings:
    """Server certificate and key (PEM); with `client_ca`, clients must present a certificate it signed."""

    cert: Path
    key: Path
    client_ca: Path | None = None


@dataclass(frozen=True, slots=True)
class GRPCSettings:
    #: `unix:///path`, `/path` or `HOST:PORT`; "" turns the gRPC API off.
    address: str = field(default_factory=default_address)
    tls: TLSSettings | None = None
    #: Mode of a unix socket (owner and group may call; the API is read-only).
    socket_mode: int = 0o660
    workers: int = 4

    def endpoint(self) -> Endpoint | None:
        return Endpoint.parse(self.address) if self.address else None


@dataclass(frozen=True, slots=True)
class HTTPSettings:
    """Diagnostics, `/metrics`, `/healthz` and `/readyz`. Koordinator serves them on 10251."""

    #: `HOST:PORT` (port 0 picks a free one); "" turns the HTTP server off.
    address: str = "127.0.0.1:10251"
    #: Initial top-N of the score table logged per pod (`PUT /debug/flags/s` changes it at run time).
    debug_top_n_scores: int = 0
    #: Where to write the bound `HOST:PORT` once serving (so nobody guesses a port given as 0).
    address_file: Path | None = None
    #: HTTPS (`--tls-cert-file`, `--tls-self-signed`): callers send bearer tokens.
    tls: TLSServing = field(default_factory=TLSServing)


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """kube-scheduler's defaults: backoff doubles from 1 s to 10 s per failed attempt."""

    initial_backoff: float = 1.0
    max_backoff: float = 10.0
    #: An unschedulable pod is retried after this long even if no cluster event concerned it.
    max_unschedulable: float = 300.0


@dataclass(frozen=True, slots=True)
class BinderSettings:
    #: Bindings in flight at once (each is two API calls: annotate, bind).
    workers: int = 16
    #: A PodScheduled=False event for the same pod and message is repeated at most this often
    #: (the recorder then bumps the Event's count instead of creating another one).
    event_interval: float = 60.0


@dataclass(frozen=True, slots=True)
class SchedulerSettings:
    client: ClientSettings = field(default_factory=ClientSettings)
    #: Scheduler configuration (profiles, plugins, their args), as `docs/scheduling.md`; None: defaults.
    config_file: Path | None = None
    #: None: no leader election (one replica only!).
    leader_election: LeaderElectionSettings | None = None
    grpc: GRPCSettings = field(default_factory=GRPCSettings)
    http: HTTPSettings = field(default_factory=HTTPSettings)
    queue: QueueSettings = field(default_factory=QueueSettings)
    binder: BinderSettings = field(default_factory=BinderSettings)
    #: Seeds score tie-breaking.
    seed: int = 0
    #: Component name in Events and the field manager.
    component: str = names.SCHEDULER_NAME
    #: Seconds to wait for the informers' first lists before giving up at start-up.
    sync_timeout: float = 120.0
    #: A pending pod or Reservation naming a scheduler no profile serves gets a Warning Event
    #: once it has waited this long unplaced (`scheduler.service.unserved`).
    unserved_grace: float = 30.0

    def validate(self) -> None:
        """Raise ConfigError listing every problem at once."""
        problems = []
        try:
            self.grpc.endpoint()
        except ConfigError as e:
            problems.append(f"grpc: {e}")
        if self.http.address:
            host, sep, port = self.http.address.rpartition(":")
            if not sep or not port.isdigit() or not host:
                problems.append(f"http: address {self.http.address!r}: expected HOST:PORT")
        if self.http.debug_top_n_scores < 0:
            problems.append("http: debug_top_n_scores must be >= 0")
        q = self.queue
        if not 0 < q.initial_backoff <= q.max_backoff:
            problems.append(f"queue: need 0 < initial_backoff ({q.initial_backoff}) <= max_backoff ({q.max_backoff})")
        if q.max_unschedulable <= 0:
            problems.append("queue: max_unschedulable must be > 0")
        if self.binder.workers < 1:
            problems.append("binder: workers must be >= 1")
        if self.unserved_grace < 0:
            problems.append("unserved_grace must be >= 0")
        if self.leader_election is not None:
            try:
                self.leader_election.validate()
            except ConfigError as e:
                problems.append(str(e))
        if problems:
            raise ConfigError("invalid scheduler settings: " + "; ".join(problems))
