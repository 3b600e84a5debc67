"""ElasticQuota objects for tests, as a user writes them (GPUs in whole `nvidia.com/gpu`)."""

from __future__ import annotations

from typing import Any

from apis.extension import names

__all__ = ["elastic_quota"]


def elastic_quota(
    name: str,
    *,
    namespace: str = "default",
    parent: str = "",
    is_parent: bool = False,
    min_gpu: str = "0",
    max_gpu: str = "8",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    labels = {names.LABEL_QUOTA_IS_PARENT: str(is_parent).lower()}
    if parent:
        labels[names.LABEL_QUOTA_PARENT] = parent
    return {
        "apiVersion": names.ELASTIC_QUOTAS.api_version,
        "kind": names.ELASTIC_QUOTAS.kind,
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations or {}},
        "spec": {"min": {"nvidia.com/gpu": min_gpu}, "max": {"nvidia.com/gpu": max_gpu}},
    }
