"""A restart of the proxy process between RunPodSandbox and CreateContainer still injects correctly.

After the restart the proxy has forgotten the sandbox; it must recover the pod from the runtime.
The Marker hook makes that observable: it adds an annotation at PreRunPodSandbox, which only the
runtime holds afterwards (kubelet's sandbox config in CreateContainer does not carry it), and
copies it into the container's env at PreCreateContainer.
"""

from __future__ import annotations

import pytest

from agent.hooks import GPUEnvPlugin
from tests.integration.runtimeproxy.rig import MARK_ANNOTATION, MARK_ENV, Marker, Recorder, Rig, gpu_annotation

pytestmark = [pytest.mark.integration, pytest.mark.root]


def test_restart_between_run_pod_sandbox_and_create_container(rig: Rig) -> None:
    recorder = Recorder()
    rig.hook_server(GPUEnvPlugin(), Marker(), recorder)
    first = rig.proxy_process()
    kubelet = rig.kubelet()
    pod, config = rig.run_pod(kubelet, "survivor", annotations=gpu_annotation(2, 3))
    before = kubelet.run_container(pod, config, "before")
    assert first.stop() == 0, first.log_tail()

    rig.proxy_process()
    assert MARK_ANNOTATION not in config.annotations  # what kubelet sends does not know the mark
    after = kubelet.run_container(pod, config, "after")
    env = kubelet.env(after)
    assert env["NVIDIA_VISIBLE_DEVICES"] == "2,3"
    assert env[MARK_ENV] == "sandbox-of-survivor"

    # A container created before the restart is found again too (StopContainer's hook sees its pod).
    kubelet.stop_container(before)
    [stop] = [request for name, request in recorder.calls if name == "PostStopContainer"]
    assert (stop.container_meta.id, stop.container_meta.name, stop.pod_meta.name) == (before, "before", "survivor")
    assert stop.pod_annotations[MARK_ANNOTATION] == "sandbox-of-survivor"
