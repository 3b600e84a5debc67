"""Leader election on a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does it.

Candidates race to write their identity into the Lease; the holder renews it every
`retry_period`. Another candidate takes over only when it has seen the Lease unchanged for
`lease_duration` by its own clock (never comparing clocks across machines), and every write is
conditional on the resourceVersion it read, so two candidates can never both win. A leader that
cannot renew for `renew_deadline` steps down by itself, before anyone else may take over; one
that stops cleanly releases the Lease so a successor takes over at once.

Callbacks run on the elector's thread and must return quickly: start or stop work elsewhere.
"""

from __future__ import annotations

import datetime
import logging
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from apis.errors import ConfigError
from kube import errors
from kube.client import Client
from kube.logs import V
from kube.resources import LEASES

__all__ = ["LeaderElectionSettings", "LeaderElector", "default_identity", "identity_from_env"]

log = logging.getLogger(__name__)


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def _micro_time(now: datetime.datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class LeaderElectionSettings:
    lease_name: str
    namespace: str = "kube-system"
    identity: str = field(default_factory=default_identity)
    #: How long others wait, from the last renewal they saw, before taking over.
    lease_duration: float = 15.0
    #: A leader that has not renewed for this long steps down (must be < lease_duration).
    renew_deadline: float = 10.0
    #: How often candidates try to acquire and the leader renews.
    retry_period: float = 2.0
    #: Give the Lease up on stop() so a successor need not wait for it to expire.
    release_on_stop: bool = True

    def validate(self) -> None:
        """Raises ConfigError naming every problem at once. Kubernetes' rules: lease_duration >
        renew_deadline (a leader steps down before others may take over) > retry_period (it gets
        at least one more try to renew) > 0; and a Lease name, namespace and identity."""
        problems = [f"{what} is empty" for what in ("lease_name", "namespace", "identity") if not getattr(self, what)]
        if self.retry_period <= 0:
            problems.append(f"retry_period ({self.retry_period:g}s) must be more than 0")
        if self.renew_deadline <= self.retry_period:
            problems.append(
                f"renew_deadline ({self.renew_deadline:g}s) must be more than retry_period ({self.retry_period:g}s)"
            )
        if self.lease_duration <= self.renew_deadline:
            problems.append(
                f"lease_duration ({self.lease_duration:g}s) must be more than renew_deadline ({self.renew_deadline:g}s)"
            )
        if problems:
            raise ConfigError(f"leader election {self.namespace}/{self.lease_name}: " + "; ".join(problems))


class LeaderElector:
    """Run `start()` in every replica; exactly one at a time has `is_leader` true."""

    def __init__(
        self,
        client: Client,
        settings: LeaderElectionSettings,
        *,
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        settings.validate()
        self.settings = settings
        self._api = client.resource(LEASES)
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._clock = clock
        self._stop = threading.Event()
        self._leading = threading.Event()
        self._thread: threading.Thread | None = None
        # What this candidate last saw of the Lease, and when (by its own clock).
        self._observed: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._last_renew = 0.0
        #: The identity holding the Lease, as last observed ("" when none).
        self.leader = ""

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    def wait_for_leadership(self, timeout: float | None = None) -> bool:
        return self._leading.wait(timeout)

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("leader elector already started")
        self._thread = threading.Thread(
            target=self.run, name=f"leader-election-{self.settings.lease_name}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop campaigning; a leader steps down (and releases the Lease). Idempotent."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def run(self) -> None:
        """Campaign until stop(): acquire, renew while leading, step down on failure."""
        s = self.settings
        log.log(
            V(2), "Campaigning for leadership", extra={"lease": f"{s.namespace}/{s.lease_name}", "identity": s.identity}
        )
        try:
            while not self._stop.is_set():
                if self._try_acquire_or_renew():
                    self._lead()
                else:
                    self._stop.wait(s.retry_period * (1 + 0.2 * random.random()))
        finally:
            if self.is_leader:
                self._step_down()

    def _lead(self) -> None:
        s = self.settings
        self._last_renew = self._clock()
        self._leading.set()
        log.info("Became leader", extra={"lease": f"{s.namespace}/{s.lease_name}", "identity": s.identity})
        self._notify(self._on_started)
        while not self._stop.wait(s.retry_period):
            if self._try_acquire_or_renew():
                self._last_renew = self._clock()
            elif self._clock() - self._last_renew >= s.renew_deadline or self.leader not in ("", s.identity):
                log.warning("Lost leadership", extra={"lease": f"{s.namespace}/{s.lease_name}", "identity": s.identity})
                self._step_down(release=False)
                return
        self._step_down(release=s.release_on_stop)

    def _step_down(self, *, release: bool = False) -> None:
        if not self._leading.is_set():
            return
        if release:
            self._release()
        self._leading.clear()
        log.info("Stopped leading", extra={"lease": f"{self.settings.namespace}/{self.settings.lease_name}"})
        self._notify(self._on_stopped)

    def _notify(self, callback: Callable[[], None] | None) -> None:
        if callback is None:
            return
        try:
            callback()
        except Exception:
            log.exception("Leader election callback failed", extra={"lease": self.settings.lease_name})

    def _record(self, now: datetime.datetime, lease: dict[str, Any] | None) -> dict[str, Any]:
        s = self.settings
        spec = (lease or {}).get("spec") or {}
        mine = spec.get("holderIdentity") == s.identity
        return {
            "holderIdentity": s.identity,
            "leaseDurationSeconds": max(1, round(s.lease_duration)),
            "acquireTime": spec.get("acquireTime") if mine else _micro_time(now),
            "renewTime": _micro_time(now),
            "leaseTransitions": int(spec.get("leaseTransitions") or 0) + (0 if mine else 1),
        }

    def _observe(self, lease: dict[str, Any]) -> None:
        spec = lease.get("spec") or {}
        if self._observed is None or self._observed.get("metadata", {}).get("resourceVersion") != lease["metadata"].get(
            "resourceVersion"
        ):
            self._observed = lease
            self._observed_at = self._clock()
        holder = spec.get("holderIdentity") or ""
        if holder != self.leader:
            self.leader = holder
            if holder:
                log.log(V(2), "New leader observed", extra={"lease": self.settings.lease_name, "leader": holder})
                if self._on_new_leader is not None:
                    try:
                        self._on_new_leader(holder)
                    except Exception:
                        log.exception("Leader election callback failed", extra={"lease": self.settings.lease_name})

    def _try_acquire_or_renew(self) -> bool:
        s = self.settings
        now = datetime.datetime.now(datetime.UTC)
        try:
            try:
                lease = self._api.get(s.lease_name, namespace=s.namespace)
            except errors.NotFound:
                created = self._api.create(
                    {
                        "apiVersion": "coordination.k8s.io/v1",
                        "kind": "Lease",
                        "metadata": {"name": s.lease_name, "namespace": s.namespace},
                        "spec": {**self._record(now, None), "leaseTransitions": 0},
                    }
                )
                self._observe(created)
                return True
            self._observe(lease)
            spec = lease.get("spec") or {}
            holder = spec.get("holderIdentity") or ""
            duration = float(spec.get("leaseDurationSeconds") or s.lease_duration)
            if holder and holder != s.identity and self._clock() - self._observed_at < duration:
                return False  # held by someone else, who renewed within its lease duration
            updated = self._api.update({**lease, "spec": {**spec, **self._record(now, lease)}})
            self._observe(updated)
            return True
        except errors.Conflict:
            return False  # someone else wrote first; look again next round
        except errors.APIError as e:
            log.log(V(2), "Lease update failed", extra={"lease": s.lease_name, "error": str(e)})
            return False

    def _release(self) -> None:
        s = self.settings
        if self._observed is None:
            return
        now = datetime.datetime.now(datetime.UTC)
        spec = {**(self._observed.get("spec") or {})}
        spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=_micro_time(now), acquireTime=_micro_time(now))
        try:
            self._api.update({**self._observed, "spec": spec})
        except errors.APIError as e:
            log.warning("Could not release the lease", extra={"lease": s.lease_name, "error": str(e)})


def identity_from_env(default: str | None = None) -> str:
    """POD_NAME when set (the Downward API), else hostname plus a random suffix."""
    return os.environ.get("POD_NAME") or default or default_identity()
