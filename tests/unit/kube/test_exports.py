"""kube's public surface: a sorted, complete __all__, loaded lazily so `import kube` stays cheap."""

import subprocess
import sys

import kube


def test_all_is_sorted_and_complete() -> None:
    assert list(kube.__all__) == sorted(kube.__all__)
    for name in kube.__all__:
        assert getattr(kube, name) is not None, name


def test_importing_kube_logs_does_not_import_the_kubernetes_library() -> None:
    code = "import sys, kube.logs; print('kubernetes' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "False"


def test_a_lazy_name_is_imported_once_and_an_unknown_one_is_an_attribute_error() -> None:
    code = (
        "import sys, agent.qos\n"
        "before = 'agent.qos.netqos' in sys.modules\n"
        "first = agent.qos.NetworkQoS\n"
        "print(before, 'NetworkQoS' in vars(agent.qos), first is agent.qos.NetworkQoS)\n"
        "try:\n    agent.qos.Nope\nexcept AttributeError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.splitlines() == ["False True True", "module 'agent.qos' has no attribute 'Nope'"]
