"""kubectl for tests: `Kubectl(server, home)` runs the one on PATH (`KUBECTL`, None when there is
none) against an embedded API server; `kubectl_binaries()` lists every kubectl the machine has,
for tests that hold the API server to each client version.

`kubectl` on PATH is whichever is installed (Google Cloud SDK's 1.32 dispatcher, or Debian's
`kubernetes-client` 1.20 that `hack/install-system-deps.sh` installs where none is). More can be
named in `TESSERA_EXTRA_KUBECTLS` (paths separated by `:`), e.g. Debian's unpacked next to 1.32:
`apt-get download kubernetes-client && dpkg -x kubernetes-client_*.deb /tmp/k120` then
`TESSERA_EXTRA_KUBECTLS=/tmp/k120/usr/bin/kubectl`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cli.launchers.apiserver import EmbeddedAPIServer

__all__ = ["KUBECTL", "Kubectl", "KubectlBinary", "kubectl_binaries"]

#: The kubectl on PATH, or None: tests that need it skip with a reason.
KUBECTL = shutil.which("kubectl")


class Kubectl:
    """`kubectl ARGS` with the server's kubeconfig and its own HOME (its cache)."""

    def __init__(self, server: EmbeddedAPIServer, home: Path) -> None:
        self.env = {**os.environ, "KUBECONFIG": str(server.kubeconfig), "HOME": str(home)}

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        result = subprocess.run(
            [str(KUBECTL), "--request-timeout=20s", *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=60,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result.stdout + (result.stderr if not check else "")

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [str(KUBECTL), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env
        )


@dataclass(frozen=True, slots=True)
class KubectlBinary:
    path: str
    minor: int  # 32 for v1.32.x

    @property
    def id(self) -> str:
        return f"kubectl-1.{self.minor}"

    def run(self, kubeconfig: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent)}
        return subprocess.run(
            [self.path, "--request-timeout=20s", *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )


def _minor(path: str) -> int | None:
    try:
        command = [path, "version", "--client", "-o", "json"]
        out = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
        return int(str(json.loads(out.stdout)["clientVersion"]["minor"]).rstrip("+"))
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired):
        return None


def kubectl_binaries() -> list[KubectlBinary]:
    found: dict[int, KubectlBinary] = {}
    candidates = [shutil.which("kubectl") or "", *os.environ.get("TESSERA_EXTRA_KUBECTLS", "").split(":")]
    for path in filter(None, candidates):
        minor = _minor(path)
        if minor is not None:
            found.setdefault(minor, KubectlBinary(path, minor))
    return [found[m] for m in sorted(found)]
