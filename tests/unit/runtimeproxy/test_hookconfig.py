"""Hook server registrations: Koordinator's file format, and a directory that changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apis.errors import ConfigError
from runtimeproxy.hookconfig import FailurePolicy, HookConfigDir, HookType, parse
from tests.support.clocks import FakeClock


def config(endpoint: str = "/var/run/tessera/agent.sock", policy: str | None = "Fail", hooks: object = None) -> str:
    doc: dict[str, object] = {"remote-endpoint": endpoint, "runtime-hooks": hooks or ["PreCreateContainer"]}
    if policy is not None:
        doc["failure-policy"] = policy
    return json.dumps(doc)


def test_koordinator_file() -> None:
    text = json.dumps(
        {
            "remote-endpoint": "/var/run/koordlet/koordlet.sock",
            "failure-policy": "Ignore",
            "runtime-hooks": ["PreRunPodSandbox", "PreCreateContainer", "PreStartContainer", "PostStopPodSandbox"],
        }
    )
    parsed = parse(text, source="koordlet.json")
    assert parsed.endpoint == "/var/run/koordlet/koordlet.sock"
    assert parsed.failure_policy is FailurePolicy.IGNORE
    assert parsed.hooks == {
        HookType.PRE_RUN_POD_SANDBOX,
        HookType.PRE_CREATE_CONTAINER,
        HookType.PRE_START_CONTAINER,
        HookType.POST_STOP_POD_SANDBOX,
    }


def test_missing_policy_means_ignore() -> None:
    assert parse(config(policy=None)).failure_policy is FailurePolicy.IGNORE


def test_unknown_hook_names_are_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    parsed = parse(config(hooks=["PreCreateContainer", "PreRemoveRunPodSandbox"]), source="k.json")
    assert parsed.hooks == {HookType.PRE_CREATE_CONTAINER}
    assert any(r.message == "Skipping unknown runtime hooks" for r in caplog.records)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{", "not valid JSON"),
        ("[]", "expected a JSON object"),
        (json.dumps({"runtime-hooks": []}), "remote-endpoint: expected a unix socket path"),
        (config(endpoint="localhost:9000"), "remote-endpoint: endpoint 'localhost:9000'"),
        (config(policy="Retry"), "failure-policy: expected Fail or Ignore, got 'Retry'"),
        (config(hooks="PreCreateContainer"), "runtime-hooks: expected a list of hook names"),
    ],
    ids=["bad-json", "not-object", "no-endpoint", "tcp-endpoint", "bad-policy", "hooks-not-list"],
)
def test_bad_files_name_the_file_and_the_rule(text: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(text, source="/etc/runtime/hookserver.d/agent.json")
    assert str(info.value).startswith("hook config /etc/runtime/hookserver.d/agent.json: ")
    assert reason in str(info.value)


def test_hook_rpc_names() -> None:
    assert HookType.PRE_CREATE_CONTAINER.rpc == "PreCreateContainerHook"
    assert HookType.POST_STOP_POD_SANDBOX.is_post
    assert not HookType.PRE_UPDATE_CONTAINER_RESOURCES.is_post


def test_directory_in_file_name_order_skipping_bad_and_non_json(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "20-b.json").write_text(config(endpoint="/b.sock"))
    (tmp_path / "10-a.json").write_text(config(endpoint="/a.sock", hooks=["PreStartContainer"]))
    (tmp_path / "15-broken.json").write_text("{")
    (tmp_path / "README").write_text(config(endpoint="/ignored.sock"))
    configs = HookConfigDir(tmp_path)
    assert [c.endpoint for c in configs.all()] == ["/a.sock", "/b.sock"]
    assert [c.endpoint for c in configs.servers(HookType.PRE_CREATE_CONTAINER)] == ["/b.sock"]
    assert any(r.message == "Skipping hook config" and "15-broken.json" in r.source for r in caplog.records)


def test_directory_changes_are_seen_after_the_rescan_interval(tmp_path: Path) -> None:
    clock = FakeClock(0.0)
    configs = HookConfigDir(tmp_path, rescan_interval_s=1.0, clock=clock)
    assert configs.all() == ()
    (tmp_path / "agent.json").write_text(config())
    assert configs.all() == ()  # not yet looked again
    clock.now = 1.0
    assert [c.failure_policy for c in configs.all()] == [FailurePolicy.FAIL]
    (tmp_path / "agent.json").write_text(config(policy="Ignore", hooks=["PreCreateContainer", "PreStartContainer"]))
    clock.now = 2.0
    assert [c.failure_policy for c in configs.all()] == [FailurePolicy.IGNORE]
    (tmp_path / "agent.json").unlink()
    clock.now = 3.0
    assert configs.all() == ()


def test_missing_directory_means_no_hook_servers(tmp_path: Path) -> None:
    assert HookConfigDir(tmp_path / "absent").all() == ()
