"""Elastic quota, pure: the quota tree, which quota a pod uses, the tree's rules and Koordinator's
runtime algorithm (min guaranteed, idle capacity shared by weight up to max).

No I/O and nothing of the scheduler's cache or framework: the ElasticQuota plugin, what-if and
(later) the webhook and controller all build on these functions. See docs/scheduling.md.
"""

from scheduler.quota.charge import quota_request
from scheduler.quota.manager import QUOTA_MANAGER, Admission, QuotaManager
from scheduler.quota.rules import validate_tree, validate_update
from scheduler.quota.runtime import Claim, partition
from scheduler.quota.tree import (
    DEFAULT_QUOTA_NAME,
    ROOT_QUOTA_NAME,
    SYSTEM_QUOTA_NAME,
    QuotaSpec,
    QuotaTree,
    resolve_quota,
)

__all__ = [
    "DEFAULT_QUOTA_NAME",
    "QUOTA_MANAGER",
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
