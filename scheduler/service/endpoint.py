"""Where the scheduler's gRPC API listens, and how a client finds it without being told.

`tessera scheduler` serves on, and `tessera explain` dials, the same address: the `--grpc-address`
/ `--scheduler` flag, else `$TESSERA_SCHEDULER_ADDRESS`, else a unix socket at a well-known path
for this user (`/run/tessera/scheduler.sock` for root, `$XDG_RUNTIME_DIR/tessera/scheduler.sock`
otherwise, falling back to `/tmp/tessera-<uid>/`). So on one machine (`tessera up`) both sides
agree with no configuration, and in a cluster one environment variable points the CLI at a
port-forwarded TCP address.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from apis.errors import ConfigError

__all__ = ["ADDRESS_ENV", "Endpoint", "default_address"]

#: The environment variable both the scheduler and `tessera explain` read.
ADDRESS_ENV: Final = "TESSERA_SCHEDULER_ADDRESS"
_UNIX: Final = "unix://"


def default_address(environ: dict[str, str] | None = None, *, uid: int | None = None) -> str:
    """`$TESSERA_SCHEDULER_ADDRESS`, else this user's well-known socket path (see the module doc)."""
    env = os.environ if environ is None else environ
    if env.get(ADDRESS_ENV):
        return env[ADDRESS_ENV]
    uid = os.getuid() if uid is None else uid
    if uid == 0:
        return f"{_UNIX}/run/tessera/scheduler.sock"
    runtime_dir = env.get("XDG_RUNTIME_DIR")
    if runtime_dir:
        return f"{_UNIX}{runtime_dir}/tessera/scheduler.sock"
    return f"{_UNIX}/tmp/tessera-{uid}/scheduler.sock"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A parsed address: a unix socket path, or a TCP host and port."""

    socket: Path | None = None
    host: str = ""
    port: int = 0

    @classmethod
    def parse(cls, address: str) -> Endpoint:
        """`unix:///path`, `unix:/path`, `/path`, `HOST:PORT` or `[IPv6]:PORT`.

        Raises ConfigError naming the address and the accepted forms.
        """
        text = address.strip()
        if text.startswith(_UNIX):
            text = text[len(_UNIX) :]
        elif text.startswith("unix:"):
            text = text[len("unix:") :]
        elif not text.startswith("/"):
            host, sep, port = text.rpartition(":")
            if not sep or not port.isdigit() or not host or int(port) > 65535:
                raise ConfigError(
                    f"address {address!r}: expected unix:///path/to.sock, an absolute socket path, or HOST:PORT"
                )
            return cls(host=host.strip("[]"), port=int(port))
        if not text.startswith("/"):
            raise ConfigError(f"address {address!r}: a unix socket path must be absolute")
        return cls(socket=Path(text))

    @property
    def target(self) -> str:
        """The gRPC target for a client: `unix:///path` or `host:port`."""
        if self.socket is not None:
            return f"{_UNIX}{self.socket}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        return self.target
