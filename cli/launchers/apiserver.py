"""Run the embedded API server as a separate process, for tests and for `tessera up`.

    with run_apiserver() as server:
        server.install_crds()                  # deploy/crds/ and crds-optional/, one call
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
#: deploy/crds-optional: CRDs of other projects Tessera reads (scheduler-plugins' PodGroup), which
#: a cluster may have from them already; `tessera up` and the tests install them too.
OPTIONAL_CRDS = DEFAULT_CRDS.parent / "crds-optional"
#: Every CRD directory `tessera up` installs.
ALL_CRDS = (DEFAULT_CRDS, OPTIONAL_CRDS)


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
        """Start the process (on the port it had before, or was given, if any) and wait until it
        is ready. Raises ConfigError, naming what it was still waiting for and with the end of
        its log, when it exits first or is not ready within `timeout`."""
        if self.running:
            raise RuntimeError("the API server is already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.port == 0:
            self.kubeconfig.unlink(missing_ok=True)
        self.url = ""  # known again once this process's kubeconfig is read
        self._spawn(["apiserver", "--listen", f"127.0.0.1:{self.port}", *self._args])
        self._wait_ready(self._pending, timeout)

    def _read_kubeconfig(self) -> tuple[str, int]:
        """The server URL the kubeconfig names and its port; sets the token and CA it carries
        too. Raises OSError, yaml.YAMLError, LookupError, TypeError or ValueError for a file that
        is not a kubeconfig of ours."""
        doc = yaml.safe_load(self.kubeconfig.read_text())
        cluster = doc["clusters"][0]["cluster"]
        url = str(cluster["server"])
        port = int(url.rsplit(":", 1)[1])
        self.token = doc["users"][0]["user"].get("token")
        ca = cluster.get("certificate-authority-data")
        self.ca_pem = base64.b64decode(ca) if ca else None
        return url, port

    def _pending(self) -> str | None:
        """What it has yet to do before it is ready, in words; None once it is.

        Its kubeconfig says where it listens and which CA to trust, and is read on every poll:
        with a port of 0 the file is removed before the start, so the first one seen is this
        process's; with a port given (`--port`) an earlier run's file may still be there, naming
        another port or an older CA, until this process replaces it (before it reports ready).
        """
        wanted = f"its kubeconfig {self.kubeconfig} (written once it listens)"
        try:
            url, port = self._read_kubeconfig()
        except FileNotFoundError:
            return wanted
        except (OSError, yaml.YAMLError, LookupError, TypeError, ValueError) as e:
            return f"{wanted}; the file there is not a kubeconfig: {e!r}"
        if self.port not in (0, port):
            return f"{wanted} to name port {self.port}; it names {url}, an earlier server's"
        self.url, self.port = url, port
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=1, context=self.ssl_context()) as response:
                status = int(response.status)
        except urllib.error.HTTPError as e:
            status = e.code
        except (urllib.error.URLError, OSError) as e:
            return f"GET {url}/readyz to answer 200 (no answer: {e})"
        return None if status == 200 else f"GET {url}/readyz to answer 200 (it answered {status})"

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client TLS context trusting the server's CA (None for plain HTTP)."""
        if self.ca_pem is None:
            return None
        return ssl.create_default_context(cadata=self.ca_pem.decode())

    def restart(self, timeout: float = 30.0) -> None:
        self.stop()
        self.start(timeout)

    def client(self, *, user_agent: str = "tessera-test") -> Client:
        """A new client for this server (close it when done)."""
        if not self.url:
            raise RuntimeError("the API server has not been started")
        return Client.from_kubeconfig(self.kubeconfig, user_agent=user_agent)

    def install_crds(self, *directories: Path) -> list[str]:
        """Create or update every CRD under `directories` (default: those `tessera up` installs);
        returns their names."""
        with self.client() as client:
            return [name for directory in directories or ALL_CRDS for name in install_crds(client, directory)]


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
