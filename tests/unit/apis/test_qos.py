from typing import Any

import pytest

from apis.extension import names
from apis.extension.qos import KubeQoSClass, QoSClass, kube_qos_class, qos_class
from apis.k8s.core import Pod


def pod(resources: list[dict[str, Any]], labels: dict[str, str] | None = None, status_qos: str = "") -> Pod:
    return Pod.from_dict(
        {
            "metadata": {"name": "p", "labels": labels or {}},
            "spec": {"containers": [{"name": f"c{i}", "resources": r} for i, r in enumerate(resources)]},
            "status": {"qosClass": status_qos} if status_qos else {},
        }
    )


GUARANTEED = {"limits": {"cpu": "1", "memory": "1Gi"}}
BURSTABLE = {"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}}


@pytest.mark.parametrize(
    ("resources", "kube", "koord"),
    [
        ([GUARANTEED], KubeQoSClass.GUARANTEED, QoSClass.LSR),
        ([GUARANTEED, {"limits": {"cpu": "1"}}], KubeQoSClass.BURSTABLE, QoSClass.LS),
        ([BURSTABLE], KubeQoSClass.BURSTABLE, QoSClass.LS),
        ([{}], KubeQoSClass.BEST_EFFORT, QoSClass.BE),
        ([{"limits": {"nvidia.com/gpu": "1"}}], KubeQoSClass.BEST_EFFORT, QoSClass.BE),
    ],
)
def test_defaults_follow_kube_qos(resources: list[dict[str, Any]], kube: KubeQoSClass, koord: QoSClass) -> None:
    p = pod(resources)
    assert kube_qos_class(p) is kube
    assert qos_class(p) is koord


def test_label_wins() -> None:
    assert qos_class(pod([GUARANTEED], {names.LABEL_QOS_CLASS: "BE"})) is QoSClass.BE
    assert qos_class(pod([{}], {names.LABEL_QOS_CLASS: "LSE"})) is QoSClass.LSE


def test_unknown_label_falls_back_to_default() -> None:
    assert qos_class(pod([GUARANTEED], {names.LABEL_QOS_CLASS: "Gold"})) is QoSClass.LSR


def test_status_qos_class_is_trusted() -> None:
    assert kube_qos_class(pod([{}], status_qos="Burstable")) is KubeQoSClass.BURSTABLE
