"""Elastic quota, pure: the quota tree, which quota a pod uses, the tree's rules and Koordinator's
runtime algorithm (min guaranteed, idle capacity shared by weight up to max).

It lives in apis/ because both the scheduler (the ElasticQuota plugin, what-if) and the controller
(quota status, reclaim, the admission webhook) must compute exactly the same runtime and used: no
I/O, nothing of either component. See docs/scheduling.md.
"""

from apis.quota.charge import quota_request
from apis.quota.manager import Admission, QuotaManager
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
    "Admission",
    "Claim",
    "QuotaManager",
    "QuotaSpec",
    "QuotaTree",
    "partition",
    "quota_request",
    "resolve_quota",
    "validate_tree",
    "validate_update",
]
