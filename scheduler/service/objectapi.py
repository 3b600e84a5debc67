"""The binder's writes of objects other than the pod being bound (PreBind's `ObjectWrite`s).

One seam (`ObjectAPI`) between the binder and the API server, as `PodAPI` is for the pod: the
binder says *what* to write (a merge patch of an object, or of its subresource), `KubeObjectAPI`
sends it. A plugin that writes another object at PreBind (a ResourceClaim's status) names the
resource and the patch; nothing here knows any plugin's objects.
"""

from __future__ import annotations

import contextlib
from typing import Protocol

from kube import Client, errors
from scheduler.framework.writes import ObjectWrite

__all__ = ["KubeObjectAPI", "ObjectAPI"]


class ObjectAPI(Protocol):
    def write(self, write: ObjectWrite) -> None:
        """Make the write (a merge patch, a creation or a deletion: `ObjectWrite.verb`). Raises
        kube.APIError."""


class KubeObjectAPI:
    """`ObjectAPI` over `kube`."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def write(self, write: ObjectWrite) -> None:
        api = self._client.resource(write.resource)
        if write.verb == "create":
            api.create(dict(write.patch), namespace=write.namespace)
        elif write.verb == "delete":
            with contextlib.suppress(errors.NotFound):  # gone already: what the delete was for
                api.delete(write.name, namespace=write.namespace)
        else:
            api.patch(write.name, dict(write.patch), namespace=write.namespace, subresource=write.subresource)
