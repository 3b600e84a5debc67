"""When a simulated pod's containers exit, and what the simulated kubelet reports then."""

from typing import Any

from agent.kubeletsim.completion import DEFAULT_RUN_SECONDS, exit_status, run_seconds, started_at
from apis.k8s.core import Pod

NOW = "2024-01-01T00:01:00Z"


def raw(policy: str, **annotations: str) -> dict[str, Any]:
    running = {"running": {"startedAt": "2024-01-01T00:00:00Z"}}
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "annotations": annotations},
        "spec": {"restartPolicy": policy, "containers": [{"name": "m", "image": "x"}]},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "m", "ready": True, "restartCount": 0, "state": running}],
        },
    }


def test_run_time_defaults_by_restart_policy_and_follows_the_annotation() -> None:
    assert run_seconds(Pod.from_dict(raw("Never"))) == DEFAULT_RUN_SECONDS
    assert run_seconds(Pod.from_dict(raw("Always"))) is None
    assert run_seconds(Pod.from_dict(raw("Always", **{"tessera.dev/simulated-run-seconds": "2.5"}))) == 2.5
    assert run_seconds(Pod.from_dict(raw("Never", **{"tessera.dev/simulated-run-seconds": "never"}))) is None
    assert run_seconds(Pod.from_dict(raw("Never", **{"tessera.dev/simulated-run-seconds": "soon"}))) == 5.0
    assert started_at(raw("Never")) == 1704067200.0


def test_exit_zero_succeeds_a_failure_fails_under_never_and_restarts_under_on_failure() -> None:
    done = exit_status(raw("Never"), Pod.from_dict(raw("Never")), now=NOW)["status"]
    assert done["phase"] == "Succeeded"
    assert done["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    assert {c["type"]: c["status"] for c in done["conditions"]}["Ready"] == "False"
    failing = raw("Never", **{"tessera.dev/simulated-exit-code": "3"})
    failed = exit_status(failing, Pod.from_dict(failing), now=NOW)["status"]
    assert failed["phase"] == "Failed" and failed["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3
    retrying = raw("OnFailure", **{"tessera.dev/simulated-exit-code": "1"})
    restarted = exit_status(retrying, Pod.from_dict(retrying), now=NOW)["status"]
    assert "phase" not in restarted
    container = restarted["containerStatuses"][0]
    assert container["restartCount"] == 1 and container["state"] == {"running": {"startedAt": NOW}}
    assert container["lastState"]["terminated"]["reason"] == "Error"
