"""Every kind Tessera reads or writes, in one catalogue: group, version, resource, kind, scope and
whether it serves a status subresource.

Each is declared once: the built-in kinds in `kube.resources` (`PODS`, `DEPLOYMENTS`, ...) and,
for Dynamic Resource Allocation's (which the scheduler's pure core reads), in `apis.dra`,
Tessera's CRDs in `apis.extension.names` (`DEVICES`, ...: the protocol names them, and `apis`
imports nothing of ours), Dynamic Resource Allocation's kinds in `apis.dra` (the scheduler's core
allocates from them and may not import `kube`). This module lists them all and answers lookups, and tests hold the
rest of the repository to it: the CRDs of `deploy/crds/` (and so the Helm chart's, a link to
them) and `deploy/crds-optional/`, the kinds the embedded API server serves, and every RBAC rule
of `deploy/`, the chart and `tessera up`'s own roles. Typed access to the CRDs' objects is
`kube.crds`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from apis import dra
from apis.extension import names
from apis.extension.names import GroupVersionResource
from kube import resources

__all__ = ["ALL", "BUILTINS", "CUSTOM", "OPTIONAL", "for_kind", "for_resource"]

#: The built-in kinds Tessera uses.
BUILTINS: Final[tuple[GroupVersionResource, ...]] = (
    resources.NAMESPACES,
    resources.NODES,
    resources.PODS,
    resources.EVENTS,
    resources.CONFIG_MAPS,
    resources.SECRETS,
    resources.SERVICES,
    resources.ENDPOINTS,
    resources.SERVICE_ACCOUNTS,
    resources.LEASES,
    resources.POD_DISRUPTION_BUDGETS,
    resources.CUSTOM_RESOURCE_DEFINITIONS,
    resources.VALIDATING_WEBHOOK_CONFIGURATIONS,
    resources.TOKEN_REVIEWS,
    resources.SUBJECT_ACCESS_REVIEWS,
    resources.ROLES,
    resources.ROLE_BINDINGS,
    resources.CLUSTER_ROLES,
    resources.CLUSTER_ROLE_BINDINGS,
    resources.DEPLOYMENTS,
    resources.REPLICA_SETS,
    resources.STATEFUL_SETS,
    resources.DAEMON_SETS,
    resources.JOBS,
    resources.CRON_JOBS,
    dra.DEVICE_CLASSES,
    dra.RESOURCE_CLAIMS,
    dra.RESOURCE_CLAIM_TEMPLATES,
    dra.RESOURCE_SLICES,
)
#: Tessera's CRDs (deploy/crds/), Koordinator's kinds.
CUSTOM: Final[tuple[GroupVersionResource, ...]] = (
    names.DEVICES,
    names.ELASTIC_QUOTAS,
    names.POD_GROUPS,
    names.RESERVATIONS,
    names.POD_MIGRATION_JOBS,
    names.NODE_SLOS,
)
#: Other projects' CRDs Tessera reads (deploy/crds-optional/): a cluster may have them from those
#: projects; `tessera up` installs them.
OPTIONAL: Final[tuple[GroupVersionResource, ...]] = (names.UPSTREAM_POD_GROUPS,)
ALL: Final = BUILTINS + CUSTOM + OPTIONAL

_BY_KIND: Final[Mapping[tuple[str, str], GroupVersionResource]] = MappingProxyType(
    {(r.api_version, r.kind): r for r in ALL}
)
_BY_RESOURCE: Final[Mapping[tuple[str, str], GroupVersionResource]] = MappingProxyType(
    {(r.group, r.plural): r for r in ALL}
)


def for_kind(api_version: str, kind: str) -> GroupVersionResource | None:
    """The resource of objects of `apiVersion` and `kind` (`v1`, `ServiceAccount`); None when
    Tessera uses no such kind."""
    return _BY_KIND.get((api_version, kind))


def for_resource(group: str, plural: str) -> GroupVersionResource | None:
    """The resource `plural` of API group `group` ("" for the core group) as RBAC rules name it;
    None when Tessera uses no such resource."""
    return _BY_RESOURCE.get((group, plural))
