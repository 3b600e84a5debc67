"""`tessera explain POD [-n NS]`: why a pod is pending, or where it went, asked of the live scheduler.

Talks to the scheduler's gRPC API (`Explain`): `--scheduler ADDRESS`, else
`$TESSERA_SCHEDULER_ADDRESS`, else the well-known unix socket `tessera scheduler` serves on for
this user. Prints, for a person, the same explanation the RPC returns: the pod's state and
queue, the last attempt's message, every plugin's reason on every node now, and what the
nearest nodes lack; `-o json` prints the response itself.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

import grpc
from google.protobuf import json_format

from apis.errors import ConfigError
from cli import schedulerclient
from proto.scheduler.v1 import scheduler_pb2 as pb
from proto.scheduler.v1 import scheduler_pb2_grpc
from scheduler.service import ADDRESS_ENV

#: Nodes listed one by one; beyond this, reasons are only counted.
_MAX_NODES = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pod", metavar="POD", help="the pod's name (or NAMESPACE/NAME)")
    parser.add_argument("-n", "--namespace", default="default", help="the pod's namespace (default: default)")
    schedulerclient.add_arguments(parser)
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    namespace, _, name = args.pod.rpartition("/")
    namespace = namespace or args.namespace
    try:
        endpoint = schedulerclient.address(args)
        channel = schedulerclient.connect(endpoint, args)
    except (ConfigError, OSError) as e:
        print(f"tessera explain: {e}", file=sys.stderr)
        return 1
    with channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)  # type: ignore[no-untyped-call]  # generated, untyped
        try:
            response = stub.Explain(pb.ExplainRequest(namespace=namespace, name=name), timeout=args.timeout)
        except grpc.RpcError as e:
            print(f"tessera explain: the scheduler at {endpoint} did not answer: {e.details()}", file=sys.stderr)
            print(f"  (point at it with --scheduler ADDRESS or ${ADDRESS_ENV})", file=sys.stderr)
            return 1
    if args.output == "json":
        print(json_format.MessageToJson(response, preserving_proto_field_name=True, sort_keys=True))
    else:
        print(render(response))
    return 0 if response.state != "not-found" else 1


def render(r: pb.ExplainResponse) -> str:
    """The explanation for a person."""
    lines = [f"Pod {r.pod}: {_headline(r)}"]
    if r.detail:
        lines.append(f"Note: {r.detail}")
    if r.state == "bound":
        for d in r.devices:
            res = " ".join(f"{k.rsplit('/', 1)[-1]}={v}" for k, v in sorted(d.resources.items()))
            lines.append(f"  {d.type} {d.minor}: {res}")
        return "\n".join(lines)
    if r.state != "pending":
        return "\n".join(lines)
    if r.last_attempt:
        lines.append(f"Last attempt: {r.last_attempt}")
    if r.HasField("rejected") and not r.waiting_for:
        # A PreFilter rejection no cluster event can lift is the pod's own (an invalid request,
        # a malformed hint): the scheduler retries it when the pod changes. (A gang short of
        # members is rejected at PreFilter too, but waits for the events its plugin names.)
        lines.append(f"Fix the pod: {r.rejected.reason} (retried only when the pod changes)")
    elif r.waiting_for:
        lines.append(f"Retried when a cluster change concerns: {', '.join(r.waiting_for)}")
    lines.append(f"Now: {r.message}")
    if r.HasField("rejected"):
        lines.append(f"  {r.rejected.plugin or 'PreFilter'}: {r.rejected.reason} (every node)")
        return "\n".join(lines)
    if r.fits:
        shown = ", ".join(r.fits[:_MAX_NODES]) + (" …" if len(r.fits) > _MAX_NODES else "")
        lines.append(f"  fits on: {shown}")
    if r.nodes:
        counts = Counter((reason.plugin, reason.reason) for node in r.nodes for reason in node.reasons)
        lines.append("Reasons, by plugin:")
        width = max(len(plugin or "?") for plugin, _ in counts)
        for (plugin, reason), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"  {plugin or '?':<{width}}  {n} node{'s' if n != 1 else ''}: {reason}")
        lines.append("Nodes:")
        node_width = max(len(node.node) for node in r.nodes[:_MAX_NODES])
        for node in r.nodes[:_MAX_NODES]:
            text = "; ".join(f"{x.plugin}: {x.reason}" for x in node.reasons)
            lines.append(f"  {node.node:<{node_width}}  {text}")
        if len(r.nodes) > _MAX_NODES:
            lines.append(f"  … and {len(r.nodes) - _MAX_NODES} more nodes")
    if r.nearest:
        lines.append("Nearest nodes, and what they lack:")
        for miss in r.nearest:
            lines.append(f"  {miss.node}: {'; '.join(miss.missing)}")
    return "\n".join(lines)


def _headline(r: pb.ExplainResponse) -> str:
    if r.state == "bound":
        return f"bound to {r.node}"
    if r.state == "pending":
        where = {
            "active": "waiting for its turn",
            "backoff": f"backing off ({r.backoff_seconds:.1f}s to its next attempt)",
            "unschedulable": "unschedulable, waiting for a cluster change",
            "scheduling": "being scheduled",
            "waiting": f"reserved on {r.node}, waiting at Permit",
            "binding": f"being bound to {r.node}",
        }.get(r.queue, r.queue)
        tries = f" after {r.attempts} attempt{'s' if r.attempts != 1 else ''}" if r.attempts else ""
        return f"pending{tries}, {where} (profile {r.profile})"
    return {
        "not-ours": "not scheduled by this scheduler",
        "finished": "finished",
        "invalid": "cannot be read",
        "not-found": "not found",
    }.get(r.state, r.state)
