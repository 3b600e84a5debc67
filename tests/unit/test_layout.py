"""The architecture as tests: dependency direction, public surface, the command line."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = (
    "apis",
    "kube",
    "apiserver",
    "scheduler",
    "controller",
    "descheduler",
    "kubecontrollers",
    "agent",
    "runtimeproxy",
    "dashboard",
    "proto",
    "cli",
)


def imported_by(module: str) -> set[str]:
    code = f"import sys, {module}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return {m.split(".")[0] for m in out.split()}


def test_apis_imports_nothing_of_ours() -> None:
    assert imported_by("apis") & set(OURS) == {"apis"}


def test_the_quota_state_uses_nothing_of_kube() -> None:
    # The scheduler's pure core may import kube.quotas (an import contract allows it nothing else
    # of kube): the state must bring no client, informer or server with it.
    code = "import sys, kube.quotas; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    assert {m for m in out.split() if m.split(".")[0] == "kube"} == {"kube", "kube.lazyexports", "kube.quotas"}
    assert imported_by("kube.quotas") & set(OURS) == {"apis", "kube"}


def test_proto_imports_nothing_of_ours() -> None:
    assert imported_by("proto.runtime.v1alpha1.api_pb2_grpc") & set(OURS) == {"proto"}


def test_nothing_named_testing_ships() -> None:
    """Test harnesses live in tests/ or, when tessera up and benchmarks need them too, in cli/launchers."""
    shipped = [p for package in OURS for p in (ROOT / package).rglob("*.py")]
    assert shipped
    assert [str(p.relative_to(ROOT)) for p in shipped if "testing" in p.with_suffix("").parts] == []


def test_every_package_is_in_the_distribution() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    for package in OURS:
        assert f'"{package}*"' in text, package


def test_import_contracts_hold() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint)], check=False, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("package", ["apis", "dashboard", "descheduler"])
def test_all_is_sorted_and_complete(package: str) -> None:
    mod = importlib.import_module(package)
    assert list(mod.__all__) == sorted(mod.__all__)
    for name in mod.__all__:
        assert hasattr(mod, name), name


def test_help_lists_every_subcommand() -> None:
    from cli.main import COMMANDS

    out = subprocess.run([sys.executable, "-m", "cli", "--help"], cwd=ROOT, capture_output=True, text=True, check=True)
    for name in COMMANDS:
        assert name in out.stdout
    assert set(COMMANDS) >= {
        "apiserver",
        "agent",
        "runtime-proxy",
        "scheduler",
        "controller",
        "up",
        "explain",
        "dashboard",
        "top",
        "what-if",
        "simulate",
        "bench",
    }
