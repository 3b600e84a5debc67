"""`tessera gpu clear|fault`: ask a node's agent, as you, to clear a GPU fault or (simulated GPUs
only) to inject one.

    tessera gpu clear --node sim-1 --minor 3            POST /health/clear?minor=3
    tessera gpu fault --node sim-1 --minor 3 --xid 79   POST /debug/simulate/xid?minor=3&xid=79
    tessera gpu fault --node sim-1 --minor 3 --lost     POST /debug/simulate/gpu-lost?minor=3
    tessera gpu fault --node sim-1 --minor 3 --reset    POST /debug/simulate/gpu-reset?minor=3

The agent authenticates and authorizes each request through the API server (kube/delegation.py),
so the request carries the credentials of your kubeconfig (`--kubeconfig`, `--context`, else
$KUBECONFIG or ~/.kube/config, as kubectl): whoever may `post` on `/health/clear`
(`nonResourceURLs`) may clear, and nobody else — a cluster-admin may, an anonymous caller may
not. The agent is found at `--agent URL`; else in `tessera up`'s state (`--data-dir`, default
./tessera-data: `agent/NODE`'s URL); else at `https://` the Node's InternalIP on `--agent-port`
(9316, as deploy/agent.yaml serves it, with a self-signed certificate: the token travels
encrypted; `--agent-ca FILE` also verifies the agent's certificate, as a cluster-issued one can
be). Prints the agent's JSON answer; exit code 1 when it refuses (its message on stderr), 2 when
the agent cannot be found or asked.
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Final

from apis.errors import ConfigError
from cli.localcluster import state
from kube import errors
from kube.client import Client, ClientSettings
from kube.resources import NODES

__all__ = ["add_arguments", "run"]

#: Where deploy/agent.yaml serves the agent's HTTP endpoints on each node.
AGENT_PORT: Final = 9316
_TIMEOUT_S: Final = 30.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    clear = sub.add_parser(
        "clear", help="clear a GPU's fault (the operator's override: the GPU was reset, a false alarm)"
    )
    fault = sub.add_parser("fault", help="make a simulated GPU fail (agents with simulated devices only)")
    for each in (clear, fault):
        ClientSettings.add_arguments(each)
        each.add_argument("--node", required=True, help="the node whose agent to ask")
        each.add_argument("--minor", type=int, required=True, metavar="N", help="the GPU's minor number")
        each.add_argument("--agent", metavar="URL", help="the agent's HTTP address (default: found, see below)")
        each.add_argument(
            "--data-dir",
            type=Path,
            default=Path("tessera-data"),
            metavar="DIR",
            help="tessera up's data directory, where its agents' addresses are (default ./tessera-data)",
        )
        each.add_argument(
            "--agent-port", type=int, default=AGENT_PORT, help=f"the agents' port on their nodes (default {AGENT_PORT})"
        )
        each.add_argument(
            "--agent-ca", type=Path, metavar="FILE", help="verify an HTTPS agent's certificate with this CA"
        )
    kind = fault.add_mutually_exclusive_group(required=True)
    kind.add_argument("--xid", type=int, metavar="XID", help="an XID event (79: fallen off the bus, until a reset)")
    kind.add_argument("--lost", action="store_true", help="the GPU stops answering")
    kind.add_argument("--reset", action="store_true", help="the GPU is reset")


def _path(args: argparse.Namespace) -> str:
    params: dict[str, int] = {"minor": args.minor}
    if args.action == "clear":
        return f"/health/clear?{urllib.parse.urlencode(params)}"
    if args.xid is not None:
        params["xid"] = args.xid
        route = "xid"
    else:
        route = "gpu-lost" if args.lost else "gpu-reset"
    return f"/debug/simulate/{route}?{urllib.parse.urlencode(params)}"


def _agent_url(args: argparse.Namespace, client: Client) -> str:
    """Where the node's agent serves: given, in tessera up's state, or the Node's InternalIP."""
    if args.agent:
        return str(args.agent).rstrip("/")
    up = state.read(args.data_dir)
    found = up.components.get(f"agent/{args.node}") if up is not None else None
    if found is not None and found.url:
        return found.url
    try:
        node = client.resource(NODES).get(args.node)
    except errors.NotFound:
        raise ConfigError(f"no node {args.node!r} in the cluster") from None
    addresses = (node.get("status") or {}).get("addresses") or []
    ip = next((a.get("address") for a in addresses if a.get("type") == "InternalIP"), None)
    if not ip:
        raise ConfigError(f"node {args.node} has no InternalIP: give its agent's address with --agent")
    host = f"[{ip}]" if ":" in ip else ip
    return f"https://{host}:{args.agent_port}"


def _tls(args: argparse.Namespace) -> ssl.SSLContext:
    """Verify with `--agent-ca`; else encrypt without verifying (a self-signed certificate)."""
    if args.agent_ca is not None:
        try:
            return ssl.create_default_context(cafile=str(args.agent_ca))
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"--agent-ca {args.agent_ca}: {e}") from None
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def run(args: argparse.Namespace) -> int:
    try:
        with Client.from_settings(ClientSettings.from_args(args, user_agent="tessera-gpu")) as client:
            url = _agent_url(args, client) + _path(args)
            authorization = client.config.credentials.authorization() if client.config.credentials else None
    except errors.APIError as e:
        raise ConfigError(f"asking the API server: {e}") from None
    request = urllib.request.Request(url, data=b"", method="POST")
    if authorization:
        request.add_header("Authorization", authorization)
    try:
        context = _tls(args) if url.startswith("https://") else None
        with urllib.request.urlopen(request, timeout=_TIMEOUT_S, context=context) as response:
            body = response.read().decode()
    except urllib.error.HTTPError as e:
        print(
            f"tessera gpu {args.action}: the agent of {args.node} answered {e.code}: {_message(e.read())}",
            file=sys.stderr,
        )
        return 1
    except OSError as e:
        raise ConfigError(f"the agent of {args.node} at {url.split('/', 3)[2]} does not answer: {e}") from None
    print(body.strip())
    return 0


def _message(body: bytes) -> str:
    """The refusal's message: kube's Status `message`, the agent's `{"error": ...}`, or the text."""
    text = body.decode(errors="replace").strip()
    try:
        doc = json.loads(text)
    except ValueError:
        return text
    if isinstance(doc, dict):
        return str(doc.get("message") or doc.get("error") or text)
    return text
