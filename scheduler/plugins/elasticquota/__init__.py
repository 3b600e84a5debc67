"""ElasticQuota: admit a pod only while its quota's used + request stays within its runtime."""

from scheduler.plugins.elasticquota.plugin import NAME, QUOTA_MANAGER, ElasticQuota, new

__all__ = ["NAME", "QUOTA_MANAGER", "ElasticQuota", "new"]
