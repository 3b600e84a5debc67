"""`KubeComponentProcess`: what every launcher of an API-server client has in common.

The scheduler, controller, descheduler, kube-controller-manager, dashboard and agent are each a
`tessera <command>` that reads a kubeconfig, serves HTTP on a loopback port it picks itself
(writing the bound `HOST:PORT` to an address file, so no port is guessed) and reports ready on an
HTTP path. Only the subcommand, the names of its two address flags, its files' names and its
own flags differ, so the command line, the start and the context manager are built here once and a
launcher keeps only what is its own (its flags, its HTTP helpers).

The command line is always, in this order:

    <command> --kubeconfig K <address flag> 127.0.0.1:0 <address-file flag> F --v=N <flags> <args>

`args`, the caller's, come last: argparse keeps the last value of a flag given twice, so they may
override anything before them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Final, Self

from kube import clientconfig
from kube.process import ServingProcess
from kube.restconfig import Credentials

__all__ = ["LISTEN_FLAGS", "SHORT_LEASE", "KubeComponentProcess", "KubeconfigCredentials", "leader_election_flags"]

#: `--listen` and `--listen-address-file`: the address flags of the controller, the descheduler,
#: the kube-controller-manager and the dashboard.
LISTEN_FLAGS: Final = ("--listen", "--listen-address-file")

#: Lease timings for tests, (duration, renew deadline, retry period) in seconds: a crashed
#: leader is replaced within seconds, and renewals still have slack on a loaded machine.
SHORT_LEASE: Final = (4.0, 3.0, 0.5)


def leader_election_flags(
    lease: tuple[float, float, float] = SHORT_LEASE, *, name: str = "", namespace: str = "", identity: str = ""
) -> list[str]:
    """`--leader-elect` with `lease`'s timings (`kube.leaderelectionflags`, every component's), and
    the Lease's name, namespace and this replica's identity where given (else the defaults)."""
    duration, renew, retry = lease
    flags = [
        "--leader-elect",
        f"--leader-elect-lease-duration={duration}",
        f"--leader-elect-renew-deadline={renew}",
        f"--leader-elect-retry-period={retry}",
    ]
    for flag, value in (("resource-name", name), ("resource-namespace", namespace), ("identity", identity)):
        if value:
            flags.append(f"--leader-elect-{flag}={value}")
    return flags


class KubeconfigCredentials:
    """The credentials of a kubeconfig's current context, read when first needed (the file may be
    written after the launcher is made). Raises ConfigError when it cannot be read then."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._credentials: Credentials | None = None
        self._read = False

    def authorization(self) -> str | None:
        if not self._read:
            self._credentials = clientconfig.from_kubeconfig([self.path]).credentials
            self._read = True
        return self._credentials.authorization() if self._credentials is not None else None


class KubeComponentProcess(ServingProcess):
    """One `tessera <command>` talking to the API server of `kubeconfig`, serving HTTP on a free
    loopback port. Not thread-safe: drive it from one thread."""

    def __init__(
        self,
        name: str,
        kubeconfig: Path,
        *,
        command: str,
        directory: Path,
        log_name: str,
        address_name: str = "address",
        address_flags: tuple[str, str] = LISTEN_FLAGS,
        ready_path: str = "/readyz",
        flags: Sequence[str] = (),
        args: Sequence[str] = (),
        verbosity: int = 2,
        env: Mapping[str, str] | None = None,
        caller: Path | None = None,
    ) -> None:
        """Its log is `directory/log_name`, its address file `directory/address_name` (the
        directory is made at the start if missing). `flags` are the launcher's own
        (`--grpc-address ...`), `args` the caller's; `env` is added to this process's environment
        for the child. `caller`: the kubeconfig whose credentials `request` sends to the
        component's HTTP endpoints (default `kubeconfig`, the component's own: in tests, the
        admin's; `tessera up` gives the user's)."""
        super().__init__(name, directory / log_name, address_file=directory / address_name, ready_path=ready_path)
        self.kubeconfig = kubeconfig
        self.credentials = KubeconfigCredentials(caller or kubeconfig)
        self.directory = directory
        self.args = tuple(args)
        self.verbosity = verbosity
        address_flag, address_file_flag = address_flags
        self.command_line: tuple[str, ...] = (
            command,
            "--kubeconfig",
            str(kubeconfig),
            address_flag,
            "127.0.0.1:0",
            address_file_flag,
            str(self.address_file),
            f"--v={verbosity}",
            *flags,
            *self.args,
        )
        self._env = env

    def start(self, timeout: float = 60.0) -> Self:
        """Start it and wait until it is ready. Raises ConfigError, with the end of its log, when
        it exits first or is not ready within `timeout`."""
        self._spawn_serving(self.command_line, env=self._env)
        self._wait_ready(self.pending, timeout)
        return self

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
