"""The shared conformance cluster as a Koordinator user drives it (`Koord`: kubectl with the
manuals' manifests, and reads), and the busybox pod the manuals' examples share."""

from __future__ import annotations

import json
from typing import Any

from tests.support.cluster import unique
from tests.support.up import Up
from tests.support.waiting import wait_for

__all__ = ["KOORD_SCHEDULER", "Koord", "busybox_pod"]

#: Koordinator's scheduler, as every manual's example names it.
KOORD_SCHEDULER = "koord-scheduler"


def busybox_pod(name: str, *, labels: str = "", annotations: str = "", gpu_requests: str = "") -> str:
    """The pod of the gang, quota and device manuals: busybox sleeping, 40m CPU and 40Mi (requests
    and limits), for koord-scheduler. `labels`, `annotations`: YAML lines (4 spaces in);
    `gpu_requests`: more requests lines (8 spaces in), which the device manual puts in requests only."""
    meta = f"  name: {name}\n"
    if labels:
        meta += f"  labels:\n{labels}"
    if annotations:
        meta += f"  annotations:\n{annotations}"
    return f"""
apiVersion: v1
kind: Pod
metadata:
{meta}spec:
  schedulerName: koord-scheduler
  restartPolicy: Always
  containers:
  - name: curlimage
    image: busybox
    imagePullPolicy: IfNotPresent
    command: [sleep, 365d]
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: File
    resources:
      limits: {{cpu: 40m, memory: 40Mi}}
      requests:
        cpu: 40m
        memory: 40Mi
{gpu_requests}"""


class Koord:
    """The shared cluster as a Koordinator user drives it: kubectl with manifests, and reads."""

    def __init__(self, up: Up) -> None:
        self.up = up

    def namespace(self, prefix: str) -> str:
        """A fresh namespace for one example (deleted with everything in it at the end)."""
        name = unique(prefix)
        self.up.kubectl("create", "namespace", name)
        return name

    def apply(self, manifest: str, *, namespace: str | None = None) -> str:
        """`kubectl apply -f -` of a manifest as the manual writes it; kubectl's output."""
        ns = ["-n", namespace] if namespace else []
        return self.up.kubectl("apply", *ns, "-f", "-", stdin=manifest)

    def try_apply(self, manifest: str, *, namespace: str | None = None) -> str:
        """The same, not failing: stdout and stderr, for refusals the manual describes."""
        ns = ["-n", namespace] if namespace else []
        return self.up.kubectl("apply", *ns, "-f", "-", stdin=manifest, check=False)

    def delete(self, kind: str, *names: str, namespace: str | None = None) -> None:
        """`kubectl delete` that does not mind what is already gone (a test's clean-up)."""
        ns = ["-n", namespace] if namespace else []
        self.up.kubectl("delete", kind, *names, *ns, "--ignore-not-found", "--wait=false")

    def events(self, name: str, *, namespace: str = "default") -> list[tuple[str, str, str]]:
        """(type, reason, message) of the Events about the object `name`, oldest first."""
        found = json.loads(
            self.up.kubectl(
                "get", "events", "-n", namespace, "--field-selector", f"involvedObject.name={name}", "-o", "json"
            )
        )
        items = sorted(found["items"], key=lambda e: (e.get("firstTimestamp") or "", e["metadata"]["name"]))
        return [(e.get("type", ""), e.get("reason", ""), e.get("message", "")) for e in items]

    def wait_event(self, name: str, reason: str, *, namespace: str = "default", containing: str = "") -> str:
        """The message of the first Event `reason` about `name` (with `containing` in it), once
        there is one."""

        def found() -> str | None:
            events = self.events(name, namespace=namespace)
            return next((m for _, r, m in events if r == reason and containing in m), None)

        return str(wait_for(found, timeout_s=90, what=f"a {reason} event about {name} with {containing!r}"))

    def debug(self, path: str) -> Any:
        """The scheduler's debug API at `path` (Koordinator's /apis/v1/...), asked as the user:
        the scheduler authorizes its callers through the API server, as Koordinator's does not."""
        status, body = self.up.ask("scheduler", "GET", path)
        assert status == 200, f"GET {path}: {status} {body[:300]!r}"
        return json.loads(body)

    def get(self, kind: str, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        ns = ["-n", namespace] if namespace else []
        return dict(json.loads(self.up.kubectl("get", kind, name, *ns, "-o", "json")))

    def wait(self, kind: str, name: str, check: Any, *, namespace: str | None = None, what: str = "") -> Any:
        """Wait until `check(object)` is truthy for the object as kubectl gets it (name "": the
        list of them); that value."""

        def probe() -> Any:
            found = self.up.kubectl(
                "get", kind, *([name] if name else []), *(["-n", namespace] if namespace else []), "-o", "json",
                check=False,
            )  # fmt: skip
            try:
                obj = json.loads(found)
            except ValueError:
                return None
            return check(obj)

        return wait_for(probe, timeout_s=90, what=what or f"{kind} {name}")
