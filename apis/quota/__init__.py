"""Elastic quota, pure: the quota tree, which quota a pod uses, what it is charged, the tree's rules
and Koordinator's runtime algorithm (min guaranteed, idle capacity shared by weight up to max).

It lives in apis/ because both the scheduler (the ElasticQuota plugin, what-if) and the controller
(quota status, reclaim, the admission webhook) must compute exactly the same runtime and used: no
I/O, nothing of either component. The state both keep over these rules — quotas, pods, request,
used, runtime, behind a lock — is `kube.quotas.QuotaManager`. See docs/scheduling.md.
"""

from apis.extension.quotacount import Capacity, capacity_of
from apis.quota.charge import Charge, charge_of
from apis.quota.rules import validate_tree, validate_update
from apis.quota.runtime import Claim, partition
from apis.quota.tree import (
    DEFAULT_QUOTA_NAME,
    ROOT_QUOTA_NAME,
    SYSTEM_QUOTA_NAME,
    QuotaSpec,
    QuotaTree,
    resolve_quota,
)

__all__ = [
    "DEFAULT_QUOTA_NAME",
    "ROOT_QUOTA_NAME",
    "SYSTEM_QUOTA_NAME",
    "Capacity",
    "Charge",
    "Claim",
    "QuotaSpec",
    "QuotaTree",
    "capacity_of",
    "charge_of",
    "partition",
    "resolve_quota",
    "validate_tree",
    "validate_update",
]
