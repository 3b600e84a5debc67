"""The containerd harness leaves nothing behind, even with pods still running when it stops."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.runtimeproxy.rig import ROOT
from tests.support import containerd, processes

pytestmark = [pytest.mark.integration, pytest.mark.root]


@pytest.mark.parametrize("crash", [False, True], ids=["clean-stop", "after-containerd-crashed"])
def test_stop_cleans_up_everything(crash: bool) -> None:
    reason = containerd.unavailable_reason()
    if reason is not None:
        pytest.skip(f"real containerd tests skipped: {reason}")
    shim_dir_existed = Path("/run/containerd/s").exists()
    ctrd = containerd.Containerd.start()
    try:
        with containerd.CRIClient(ctrd.address, cgroup_parent=ctrd.cgroup_parent) as cri:
            config = cri.pod_config("left-running")
            pod = cri.run_pod(config)
            container = cri.run_container(pod, config, "main")
            assert cri.exec_sync(container, ["cat", "/proc/1/cmdline"]).exit_code == 0
        cgroups = list(Path("/sys/fs/cgroup").glob(f"*/{ctrd.cgroup_parent.lstrip('/')}"))
        assert cgroups, "the pod's cgroups should exist while it runs"
        shims = ctrd.shim_pids()
        assert shims, "a running pod has a shim"
        shim_sockets = [Path(a.read_text().removeprefix("unix://")) for a in ctrd.state.rglob("address")]
        assert shim_sockets and all(path.exists() for path in shim_sockets)
        if crash:
            assert ctrd.pid is not None
            os.kill(ctrd.pid, signal.SIGKILL)  # no CRI to remove pods with: runc, shims and mounts remain
    finally:
        ctrd.stop()
    ctrd.stop()  # idempotent
    assert not ctrd.workdir.exists()
    assert not any(path.exists() for path in cgroups)
    mountinfo = Path("/proc/self/mountinfo").read_text()
    assert str(ctrd.workdir) not in mountinfo
    assert not [pid for pid in shims if processes.is_running(pid)]
    assert not [path for path in shim_sockets if path.exists()]
    if not shim_dir_existed:
        assert not Path("/run/containerd/s").exists()


def test_without_root_the_containerd_tests_skip_saying_why() -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the suite as an unprivileged user")
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    suite = str(Path(__file__).parent / "test_injection.py")
    pytest_args = ["-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", suite]
    result = subprocess.run(
        [*nobody, sys.executable, *pytest_args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "passed" not in result.stdout and "failed" not in result.stdout, result.stdout
    assert "real containerd tests skipped: needs root" in result.stdout, result.stdout
