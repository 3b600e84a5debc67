"""`tessera what-if` with Dynamic Resource Allocation in the snapshot: DeviceClasses, ResourceSlices,
ResourceClaims and ResourceClaimTemplates, through the real command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.dra import gpus
from cli.main import main
from scheduler.simulation.cluster import NodeShape, gpu_node


def _documents() -> list[dict[str, Any]]:
    _, device = gpu_node("gpu-1", NodeShape(gpus=2))
    node = {"kind": "Node", "metadata": {"name": "gpu-1"}, "status": {"allocatable": {"cpu": "64", "memory": "256Gi"}}}
    klass = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{gpus.DRIVER}"'}}]},
    }
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpu-1", "namespace": "ml"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu",
                                "selectors": [
                                    {"cel": {"expression": f'device.attributes["{gpus.DRIVER}"].minor == 1'}}
                                ],
                            },
                        }
                    ]
                }
            }
        },
    }
    slice_doc = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", **gpus.gpu_slice(device).to_dict()}

    def pod(name: str) -> dict[str, Any]:
        return {
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {
                "schedulerName": "tessera-scheduler",
                "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-1"}],
            },
        }

    return [node, device.to_dict(), klass, slice_doc, template, pod("first"), pod("second")]


def test_claims_from_templates_are_made_allocated_and_explained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "dra.yaml"
    path.write_text(yaml.safe_dump_all(_documents()))
    assert main(["what-if", "-f", str(path), "-o", "json"]) == 0
    first, second = json.loads(capsys.readouterr().out)["results"]
    assert first["node"] == "gpu-1"
    assert first["claims"] == {"ml/first-gpu": [f"{gpus.DRIVER}/gpu-1/gpu-1"]}
    # GPU 1, the only one the template selects, is the first pod's: why not, per node, in words.
    assert second["node"] is None
    assert second["reasons"]["gpu-1"] == [
        "claim ml/second-gpu, request gpu: needs 1 device(s) of class gpu; 0 of 2 on node gpu-1 fit "
        "(1 not enough capacity memory, 1 not selected by selector #0 of the request)"
    ]
