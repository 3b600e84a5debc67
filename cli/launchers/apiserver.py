"""Run the embedded API server as a separate process, for tests and for `tessera up`.

    with run_apiserver() as server:
        server.install_crds()                  # deploy/crds/, one call
        client = server.client()               # a kube.Client from the server's kubeconfig
        ...
        server.restart()                       # same port, same data: clients keep working
        server.kill()                          # SIGKILL, e.g. to test recovery; start() again

The server listens on a free loopback port with its data in a temporary directory (or the one
given), writes a kubeconfig there and is ready (`/readyz`) when `start()` returns. With
`secure=True` it requires a bearer token over HTTPS, as `tessera up` runs it.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import ssl
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import yaml

from kube.client import Client
from kube.crds import install_crds
from kube.process import ComponentProcess

__all__ = ["EmbeddedAPIServer", "run_apiserver"]

#: deploy/crds of this checkout (the CRDs are not part of the Python package).
DEFAULT_CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"


class EmbeddedAPIServer(ComponentProcess):
    """One `tessera apiserver` process. Not thread-safe: drive it from one thread."""

    def __init__(
        self,
        data_dir: Path,
        *,
        secure: bool = False,
        bookmark_interval: float = 1.0,
        watch_window: int = 10_000,
        verbosity: int = 2,
        extra_args: Sequence[str] = (),
    ) -> None:
        super().__init__("the API server", data_dir / "apiserver.log")
        self.data_dir = data_dir
        self.kubeconfig = data_dir / "kubeconfig"
        self.secure = secure
        self._args = [
            "--data-dir",
            str(data_dir / "db"),
            "--kubeconfig-out",
            str(self.kubeconfig),
            "--bookmark-interval",
            str(bookmark_interval),
            "--watch-window",
            str(watch_window),
            f"--v={verbosity}",
            *(["--token-file", str(data_dir / "token")] if secure else []),
            *extra_args,
        ]
        self.port = 0
        self.url = ""
        self.token: str | None = None
        #: The server's CA certificate (PEM) when it serves HTTPS.
        self.ca_pem: bytes | None = None

    def start(self, timeout: float = 30.0) -> None:
        """Start the process (on the port it had before, if any) and wait until it is ready."""
        if self.running:
            raise RuntimeError("the API server is already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.port == 0:
            self.kubeconfig.unlink(missing_ok=True)
        self._spawn(["apiserver", "--listen", f"127.0.0.1:{self.port}", *self._args])
        self._wait_ready(self._ready, timeout)

    def _read_kubeconfig(self) -> None:
        doc = yaml.safe_load(self.kubeconfig.read_text())
        cluster = doc["clusters"][0]["cluster"]
        self.url = cluster["server"]
        self.port = int(self.url.rsplit(":", 1)[1])
        self.token = doc["users"][0]["user"].get("token")
        ca = cluster.get("certificate-authority-data")
        self.ca_pem = base64.b64decode(ca) if ca else None

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client TLS context trusting the server's CA (None for plain HTTP)."""
        if self.ca_pem is None:
            return None
        return ssl.create_default_context(cadata=self.ca_pem.decode())

    def _ready(self) -> bool:
        if self.port == 0 and self.kubeconfig.exists():
            self._read_kubeconfig()
        if not self.url:
            return False
        try:
            with urllib.request.urlopen(f"{self.url}/readyz", timeout=1, context=self.ssl_context()) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def restart(self, timeout: float = 30.0) -> None:
        self.stop()
        self.start(timeout)

    def client(self, *, user_agent: str = "tessera-test") -> Client:
        """A new client for this server (close it when done)."""
        if not self.url:
            raise RuntimeError("the API server has not been started")
        return Client.from_kubeconfig(self.kubeconfig, user_agent=user_agent)

    def install_crds(self, directory: Path = DEFAULT_CRDS) -> list[str]:
        """Create or update every CRD under `directory`; returns their names."""
        with self.client() as client:
            return install_crds(client, directory)


@contextlib.contextmanager
def run_apiserver(
    data_dir: Path | None = None,
    *,
    secure: bool = False,
    bookmark_interval: float = 1.0,
    watch_window: int = 10_000,
    verbosity: int = 2,
    extra_args: Sequence[str] = (),
) -> Iterator[EmbeddedAPIServer]:
    """A started server; stopped (and its temporary directory removed) on exit."""
    own = data_dir is None
    directory = Path(tempfile.mkdtemp(prefix="tessera-apiserver-")) if own else data_dir
    assert directory is not None
    server = EmbeddedAPIServer(
        directory,
        secure=secure,
        bookmark_interval=bookmark_interval,
        watch_window=watch_window,
        verbosity=verbosity,
        extra_args=extra_args,
    )
    try:
        server.start()
        yield server
    finally:
        server.stop()
        if own and not os.environ.get("TESSERA_KEEP_APISERVER_DIR"):
            shutil.rmtree(directory, ignore_errors=True)
