"""Elastic-quota labels and annotations: which quota a pod uses and how quotas form a tree.

Readers for the pod side (`name`, `preemptible`) and the quota side (`parent`, `is-parent`,
`allow-lent-resource`, `shared-weight`), plus the codec for the ResourceList-valued annotations
the controller writes back (`runtime`, `request`, `guaranteed`, `allocated`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from apis._annotation import load_json
from apis.crds.elasticquota import ElasticQuota
from apis.errors import AnnotationError, ValidationError
from apis.extension import names
from apis.k8s import resources
from apis.k8s.core import Pod

__all__ = [
    "DEFAULT_QUOTA_NAME",
    "ROOT_QUOTA_NAME",
    "QuotaTreeInfo",
    "decode_resource_annotation",
    "encode_resource_annotation",
    "is_preemptible",
    "pod_quota_name",
    "tree_info",
]

ROOT_QUOTA_NAME: Final = "koordinator-root-quota"
DEFAULT_QUOTA_NAME: Final = "koordinator-default-quota"


def pod_quota_name(pod: Pod) -> str | None:
    """The quota named by the pod's label, or None (the caller then applies its default rule)."""
    return pod.labels.get(names.LABEL_QUOTA_NAME) or None


def is_preemptible(pod: Pod) -> bool:
    """Only the label value "false" protects a pod from quota reclaim."""
    return pod.labels.get(names.LABEL_QUOTA_PREEMPTIBLE) != "false"


@dataclass(frozen=True, slots=True)
class QuotaTreeInfo:
    parent: str
    is_parent: bool
    allow_lent_resource: bool
    #: None means "same as max" (the protocol's default).
    shared_weight: resources.ResourceList | None


def tree_info(quota: ElasticQuota) -> QuotaTreeInfo:
    """Tree position and sharing settings of a quota. Raises AnnotationError on a bad weight."""
    lbl = quota.meta.labels
    weight_text = quota.meta.annotations.get(names.ANNOTATION_QUOTA_SHARED_WEIGHT)
    weight = (
        decode_resource_annotation(names.ANNOTATION_QUOTA_SHARED_WEIGHT, weight_text, obj=quota.meta.key)
        if weight_text
        else None
    )
    return QuotaTreeInfo(
        parent=lbl.get(names.LABEL_QUOTA_PARENT) or ROOT_QUOTA_NAME,
        is_parent=lbl.get(names.LABEL_QUOTA_IS_PARENT) == "true",
        allow_lent_resource=lbl.get(names.LABEL_QUOTA_ALLOW_LENT_RESOURCE) != "false",
        shared_weight=weight,
    )


def encode_resource_annotation(res: resources.ResourceList) -> str:
    return json.dumps(resources.format_list(res), separators=(",", ":"))


def decode_resource_annotation(key: str, text: str, *, obj: str = "") -> dict[str, int]:
    doc = load_json(key, text, obj, expect=dict, shape="a JSON object of resource name to quantity")
    try:
        return resources.parse_list(doc, field=key)
    except ValidationError as e:
        raise AnnotationError(key, e.reason, obj=obj) from None
