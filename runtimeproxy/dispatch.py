"""Calling every hook server registered for a hook point, and applying failure policies.

Servers are called one after another in registration order; each sees the request as the
answers before it changed it, and the answers are merged (later ones win, see `merge`). A server
that fails under `Ignore` is skipped with a warning. Under `Fail`, a failing *pre* hook raises
HookRejected, which fails the CRI call; a failing *post* hook only logs, because the runtime has
already acted and failing the call would make kubelet retry something that happened.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from apis.errors import TesseraError
from proto.runtime.v1alpha1 import api_pb2 as hook
from runtimeproxy import merge
from runtimeproxy.hookclient import HookCallError, HookClient
from runtimeproxy.hookconfig import FailurePolicy, HookConfigDir, HookType

__all__ = ["Dispatcher", "HookRejected"]

log = logging.getLogger(__name__)

RequestT = TypeVar("RequestT", hook.PodSandboxHookRequest, hook.ContainerResourceHookRequest)
ResponseT = TypeVar("ResponseT", hook.PodSandboxHookResponse, hook.ContainerResourceHookResponse)


class HookRejected(TesseraError):
    """A hook server under the Fail policy failed a pre hook; the CRI call must fail."""

    def __init__(self, cause: HookCallError, *, pod: str) -> None:
        super().__init__(f"pod {pod}: {cause} (failure-policy Fail)")
        self.cause = cause
        self.pod = pod


class Dispatcher:
    """Runs hook points against the servers in a HookConfigDir. Thread-safe."""

    def __init__(self, configs: HookConfigDir, client: HookClient) -> None:
        self._configs = configs
        self._client = client

    def wants(self, hook_type: HookType) -> bool:
        """Whether any server is registered for `hook_type` (so building a request is worth it)."""
        return bool(self._configs.servers(hook_type))

    def pod_sandbox(
        self, hook_type: HookType, request: hook.PodSandboxHookRequest, *, pod: str
    ) -> hook.PodSandboxHookResponse:
        """The merged answer of every server for a sandbox hook. Raises HookRejected (see module)."""
        return self._run(
            hook_type,
            request,
            hook.PodSandboxHookResponse,
            merge.merge_sandbox_response,
            merge.sandbox_request_with,
            pod=pod,
        )

    def container(
        self, hook_type: HookType, request: hook.ContainerResourceHookRequest, *, pod: str
    ) -> hook.ContainerResourceHookResponse:
        """The merged answer of every server for a container hook. Raises HookRejected (see module)."""
        return self._run(
            hook_type,
            request,
            hook.ContainerResourceHookResponse,
            merge.merge_container_response,
            merge.container_request_with,
            pod=pod,
        )

    def _run(
        self,
        hook_type: HookType,
        request: RequestT,
        response_type: type[ResponseT],
        fold: Callable[[ResponseT, ResponseT], None],
        advance: Callable[[RequestT, ResponseT], RequestT],
        *,
        pod: str,
    ) -> ResponseT:
        merged = response_type()
        current = request
        for server in self._configs.servers(hook_type):
            try:
                answer = self._client.call(server.endpoint, hook_type, current, response_type)
            except HookCallError as e:
                if server.failure_policy is FailurePolicy.FAIL and not hook_type.is_post:
                    log.warning("Runtime hook failed; failing the CRI call", extra=_fields(e, pod, server.source))
                    raise HookRejected(e, pod=pod) from e
                log.warning("Runtime hook failed; going on without it", extra=_fields(e, pod, server.source))
                continue
            fold(merged, answer)
            current = advance(request, merged)
        return merged


def _fields(error: HookCallError, pod: str, source: str) -> dict[str, str]:
    return {
        "hook": error.hook.value,
        "endpoint": error.endpoint,
        "pod": pod,
        "config": source,
        "code": error.code.name,
        "err": error.details,
    }
