"""Writing kubeconfig files: how the embedded API server tells clients where it is.

`tessera apiserver --kubeconfig-out` and the test helper write one; `kubectl --kubeconfig` and
`kube.Client.from_kubeconfig` read it. Written atomically with mode 0600, since it may hold the
bearer token.
"""

from __future__ import annotations

import base64
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

__all__ = ["kubeconfig", "write_kubeconfig"]


def kubeconfig(
    server: str,
    *,
    token: str | None = None,
    ca_pem: bytes | None = None,
    name: str = "tessera",
    namespace: str = "default",
) -> dict[str, Any]:
    user: dict[str, Any] = {"token": token} if token else {}
    cluster: dict[str, Any] = {"server": server}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(
    path: Path, server: str, *, token: str | None = None, ca_pem: bytes | None = None, name: str = "tessera"
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(kubeconfig(server, token=token, ca_pem=ca_pem, name=name), f, sort_keys=False)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
