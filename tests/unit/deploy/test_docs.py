"""docs/user/deploy.md stays true to deploy/: the files it names, the commands it gives, and the
kustomize overlays it shows (they render, and the commands they produce parse)."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from runtimeproxy import hookconfig
from tests.support import manifests
from tests.support.manifests import DEPLOY

DOC = manifests.ROOT / "docs" / "user" / "deploy.md"
OVERLAY_MARK = "# my-tessera/kustomization.yaml"


def doc() -> str:
    return DOC.read_text()


def yaml_blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", doc(), flags=re.DOTALL)


def test_every_manifest_is_described() -> None:
    for resource in manifests.kustomization()["resources"]:
        assert f"`{resource}`" in doc(), resource


def test_the_plain_kubectl_command_applies_every_file_in_order() -> None:
    (line,) = [line for line in doc().splitlines() if line.startswith("kubectl apply -f deploy/namespace.yaml")]
    files = re.findall(r"-f deploy/(\S+)", line)
    assert files == manifests.kustomization()["resources"]


def test_node_files_are_installed_where_the_proxy_and_systemd_read_them() -> None:
    text = doc()
    assert f"{hookconfig.DEFAULT_DIR}/tessera-agent.json" in text
    for path in sorted((DEPLOY / "node").rglob("*")):
        if path.is_file():
            assert f"deploy/node/{path.relative_to(DEPLOY / 'node')}" in text, path


def test_the_image_block_is_the_kustomizations_shape() -> None:
    (block,) = [b for b in yaml_blocks() if b.startswith("images:")]
    shown = yaml.safe_load(block)["images"]
    assert [sorted(i) for i in shown] == [sorted(i) for i in manifests.kustomization()["images"]]


OVERLAYS = [b for b in yaml_blocks() if b.startswith(OVERLAY_MARK)]


def test_the_doc_shows_overlays() -> None:
    assert len(OVERLAYS) == 2


@pytest.mark.parametrize("overlay", OVERLAYS, ids=["agent-nodes", "grpc-tls"])
def test_overlays_render_and_their_commands_parse(
    overlay: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: the overlays in docs/user/deploy.md are not rendered")
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    (tmp_path / "my-tessera").mkdir()
    (tmp_path / "my-tessera" / "kustomization.yaml").write_text(overlay)
    result = subprocess.run(
        [kubectl, "kustomize", str(tmp_path / "my-tessera")], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    rendered = [d for d in yaml.safe_load_all(result.stdout) if d is not None]
    workloads = [d for d in rendered if d["kind"] in manifests.WORKLOAD_KINDS]
    assert len(workloads) == 4
    for w in workloads:
        for container in w["spec"]["template"]["spec"]["containers"]:
            assert manifests.settings(container, monkeypatch) is not None
