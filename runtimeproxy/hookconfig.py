"""Hook server registrations: Koordinator-style JSON files in the hook config directory.

Each `*.json` file in the directory (default `/etc/runtime/hookserver.d`) registers one hook
server, in the format Koordinator's runtime proxy reads, so the same files work with both:

    {"remote-endpoint": "/var/run/tessera/agent.sock",
     "failure-policy": "Fail",
     "runtime-hooks": ["PreRunPodSandbox", "PreCreateContainer", "PreStartContainer"]}

`failure-policy` is `Fail` (the CRI call fails when the hook server fails) or `Ignore` (the call
goes on unchanged, with a warning); a missing policy means `Ignore`, as in Koordinator. Servers
are called in file-name order. The directory is re-read when it changes, so an agent that writes
its file after the proxy started is picked up; a file that does not parse is skipped with a
warning naming the file and the problem, so one bad file never disables the others.
"""

from __future__ import annotations

import enum
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from apis.errors import ConfigError
from kube import unixsocket

__all__ = ["FailurePolicy", "HookConfigDir", "HookServerConfig", "HookType", "parse"]

log = logging.getLogger(__name__)

DEFAULT_DIR: Final = Path("/etc/runtime/hookserver.d")


class HookType(enum.Enum):
    """A hook point, named as in Koordinator's config files; `rpc` is its RuntimeHookService method."""

    PRE_RUN_POD_SANDBOX = "PreRunPodSandbox"
    POST_STOP_POD_SANDBOX = "PostStopPodSandbox"
    PRE_CREATE_CONTAINER = "PreCreateContainer"
    PRE_START_CONTAINER = "PreStartContainer"
    POST_START_CONTAINER = "PostStartContainer"
    POST_STOP_CONTAINER = "PostStopContainer"
    PRE_UPDATE_CONTAINER_RESOURCES = "PreUpdateContainerResources"

    @property
    def rpc(self) -> str:
        return f"{self.value}Hook"

    @property
    def is_post(self) -> bool:
        """Post hooks run after the runtime acted; they cannot change or fail the CRI call."""
        return self.value.startswith("Post")


class FailurePolicy(enum.Enum):
    FAIL = "Fail"
    IGNORE = "Ignore"


@dataclass(frozen=True, slots=True)
class HookServerConfig:
    """One registered hook server: where it listens, which hooks it serves, what a failure means."""

    endpoint: str
    hooks: frozenset[HookType]
    failure_policy: FailurePolicy
    #: The file it came from, for logs and errors.
    source: str = ""


def parse(text: str, *, source: str = "") -> HookServerConfig:
    """Parse one config file's content. Raises ConfigError naming the file, the field and the rule.

    Hook names this proxy does not know are skipped with a warning (a newer Koordinator file may
    list more), so they never stop the known hooks from working.
    """
    where = f"hook config {source}" if source else "hook config"
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ConfigError(f"{where}: not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{where}: expected a JSON object")
    endpoint = doc.get("remote-endpoint")
    if not isinstance(endpoint, str) or not endpoint:
        raise ConfigError(f"{where}: remote-endpoint: expected a unix socket path")
    try:
        unixsocket.path_of(endpoint)
    except ConfigError as e:
        raise ConfigError(f"{where}: remote-endpoint: {e}") from None
    policy_text = doc.get("failure-policy") or FailurePolicy.IGNORE.value
    try:
        policy = FailurePolicy(policy_text)
    except ValueError:
        raise ConfigError(f"{where}: failure-policy: expected Fail or Ignore, got {policy_text!r}") from None
    names = doc.get("runtime-hooks") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{where}: runtime-hooks: expected a list of hook names")
    known = {h.value: h for h in HookType}
    unknown = sorted(set(names) - set(known))
    if unknown:
        log.warning("Skipping unknown runtime hooks", extra={"source": source, "hooks": ",".join(unknown)})
    hooks = frozenset(known[n] for n in names if n in known)
    return HookServerConfig(endpoint=endpoint, hooks=hooks, failure_policy=policy, source=source)


class HookConfigDir:
    """The hook servers registered in a directory, re-read when its files change.

    `servers(hook)` is called on every intercepted CRI call; it looks at the directory at most
    once per `rescan_interval_s` and re-parses only when a file was added, removed or changed.
    Thread-safe. A missing directory means no hook servers.
    """

    def __init__(
        self,
        directory: Path,
        *,
        rescan_interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = directory
        self._interval = rescan_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._scanned_at: float | None = None
        self._signature: tuple[tuple[str, int, int, int], ...] = ()
        self._configs: tuple[HookServerConfig, ...] = ()

    def servers(self, hook: HookType) -> tuple[HookServerConfig, ...]:
        """The servers registered for `hook`, in file-name order."""
        return tuple(c for c in self.all() if hook in c.hooks)

    def all(self) -> tuple[HookServerConfig, ...]:
        now = self._clock()
        if self._scanned_at is None or now - self._scanned_at >= self._interval:
            with self._lock:
                if self._scanned_at is None or now - self._scanned_at >= self._interval:
                    self._rescan()
                    self._scanned_at = now
        return self._configs

    def _rescan(self) -> None:
        signature = self._current_signature()
        if signature == self._signature and self._scanned_at is not None:
            return
        configs = []
        for name, *_ in signature:
            path = self.directory / name
            try:
                configs.append(parse(path.read_text(), source=str(path)))
            except (OSError, ConfigError) as e:
                log.warning("Skipping hook config", extra={"source": str(path), "err": str(e)})
        self._signature = signature
        self._configs = tuple(configs)
        log.info(
            "Loaded hook configs",
            extra={
                "dir": str(self.directory),
                "servers": ",".join(f"{c.endpoint}({c.failure_policy.value})" for c in configs),
            },
        )

    def _current_signature(self) -> tuple[tuple[str, int, int, int], ...]:
        entries = []
        try:
            paths = sorted(p for p in self.directory.iterdir() if p.suffix == ".json")
        except OSError:
            return ()
        for path in paths:
            try:
                st = path.stat()
            except OSError:
                continue
            entries.append((path.name, st.st_ino, st.st_mtime_ns, st.st_size))
        return tuple(entries)
