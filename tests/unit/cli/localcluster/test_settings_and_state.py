"""`tessera up`'s flags, node names and state file."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest
import yaml

from apis.errors import ConfigError
from cli import up as cli_up
from cli.localcluster import components, state
from cli.localcluster.settings import UpSettings, local_node_name, simulated_node_names
from scheduler.framework.config import parse_config


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli_up.add_arguments(parser)
    return parser.parse_args(argv)


def test_flags_become_settings(tmp_path: Path) -> None:
    settings = cli_up.settings_from(
        parse(
            *("--nodes", "3", "--profile", "h100-8x", "--data-dir", str(tmp_path), "--port", "6443", "--demo"),
            *("--no-local-agent", "--start-timeout", "2.5"),
        )
    )
    assert (settings.nodes, settings.profile, settings.data_dir, settings.port, settings.demo) == (
        3,
        "h100-8x",
        tmp_path,
        6443,
        True,
    )
    assert (settings.local_agent, settings.start_timeout) == (False, 2.5)
    defaults = cli_up.settings_from(parse())
    assert (defaults.data_dir, defaults.local_agent, defaults.start_timeout) == (Path("tessera-data"), True, 120.0)


def test_the_scheduler_address_defaults_to_where_tessera_explain_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSERA_SCHEDULER_ADDRESS", "unix:///tmp/elsewhere.sock")
    assert cli_up.settings_from(parse()).scheduler_address == "unix:///tmp/elsewhere.sock"
    assert cli_up.settings_from(parse("--scheduler-address", "127.0.0.1:10260")).scheduler_address == "127.0.0.1:10260"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--nodes", "51"), "--nodes 51: must be between 0 and 50"),
        (("--port", "70000"), "--port 70000: must be between 0 and 65535"),
        (("--nodes", "0", "--no-local-agent"), "no node to run"),
        (("--profile", "tpu-4x"), "--simulate-devices tpu-4x: not a built-in profile"),
        (("--start-timeout", "0"), "--start-timeout 0: must be a number of seconds above 0"),
        (("--start-timeout", "nan"), "--start-timeout nan: must be"),
        (("--start-timeout", "inf"), "--start-timeout inf: must be"),
    ],
    ids=["too-many-nodes", "port", "no-node", "profile", "no-time", "nan", "no-deadline"],
)
def test_bad_flags_say_what_is_wrong(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        cli_up.settings_from(parse(*argv))


def test_every_problem_is_named_at_once(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError) as raised:
        UpSettings(nodes=-1, port=-1, data_dir=tmp_path / "file", start_timeout=-1).validate()
    assert str(raised.value).count("; ") == 3


@pytest.mark.parametrize(
    ("hostname", "node"),
    [("gpu-box", "gpu-box"), ("My_Laptop.local", "my-laptop.local"), ("--", "localhost"), ("a" * 70, "a" * 63)],
    ids=["plain", "upper-and-underscore", "nothing-left", "too-long"],
)
def test_this_machine_gets_a_valid_node_name(hostname: str, node: str) -> None:
    assert local_node_name(hostname) == node


def test_simulated_nodes_keep_their_names_across_runs() -> None:
    assert simulated_node_names(3) == ["sim-1", "sim-2", "sim-3"]
    assert simulated_node_names(0) == []


def test_the_state_file_round_trips(tmp_path: Path) -> None:
    written = state.UpState(
        pid=os.getpid(),
        created=state.process_created(os.getpid()),
        phase="ready",
        data_dir=str(tmp_path),
        kubeconfig=str(tmp_path / "kubeconfig"),
        components={
            "scheduler": state.ComponentState(pid=7, log="s.log", url="http://x", grpc="unix:///s.sock"),
            "agent/sim-1": state.ComponentState(pid=8, node="sim-1", hook_socket="/a.sock", restarts=2),
        },
    )
    state.write(tmp_path, written)
    assert state.read(tmp_path) == written
    raw = json.loads((tmp_path / state.FILE_NAME).read_text())
    assert raw["components"]["agent/sim-1"]["hookSocket"] == "/a.sock"
    assert "grpc" not in raw["components"]["agent/sim-1"]
    assert [p.name for p in tmp_path.iterdir()] == [state.FILE_NAME]  # no temporary file left
    assert "retiring" not in raw


def test_the_nodes_of_a_state_are_those_it_ran_and_those_it_was_about_to_remove(tmp_path: Path) -> None:
    ran = state.UpState(
        pid=1,
        phase="starting",
        data_dir=str(tmp_path),
        kubeconfig="",
        components={"agent/sim-1": state.ComponentState(node="sim-1"), "scheduler": state.ComponentState()},
        retiring=("sim-3",),
    )
    state.write(tmp_path, ran)
    assert state.read(tmp_path) == ran
    assert ran.nodes() == {"sim-1", "sim-3"}


def test_a_damaged_state_file_is_as_good_as_none(tmp_path: Path) -> None:
    (tmp_path / state.FILE_NAME).write_text('{"pid": ')
    assert state.read(tmp_path) is None
    assert state.read(tmp_path / "missing") is None


def test_this_process_is_not_another_running_tessera_up(tmp_path: Path) -> None:
    mine = state.UpState(
        pid=os.getpid(), created=state.process_created(os.getpid()), phase="ready", data_dir="/d", kubeconfig="/k"
    )
    assert state.running_up(mine) is None
    # The same pid with another start time is a later process that got the pid: not tessera up.
    parent = os.getppid()
    assert (
        state.running_up(state.UpState(pid=parent, created=1.0, phase="ready", data_dir="/d", kubeconfig="/k")) is None
    )
    alive = state.UpState(
        pid=parent, created=state.process_created(parent), phase="ready", data_dir="/d", kubeconfig="/k"
    )
    assert state.running_up(alive) == parent


def test_only_processes_started_for_the_data_directory_are_leftovers(tmp_path: Path) -> None:
    components = {"me": state.ComponentState(pid=os.getpid()), "gone": state.ComponentState(pid=None)}
    unrelated = state.UpState(pid=1, phase="ready", data_dir=str(tmp_path), kubeconfig="", components=components)
    assert state.leftovers(unrelated) == []  # this test process has no path in tmp_path on its command line


def test_the_scheduler_config_enables_opt_in_plugins_in_every_profile(tmp_path: Path) -> None:
    component = components.scheduler(tmp_path, tmp_path / "kubeconfig", grpc_address="", plugins=("ElasticQuota",))
    config = parse_config(yaml.safe_load((tmp_path / "scheduler" / "config.yaml").read_text()))
    assert {p.scheduler_name: [r.name for r in p.multi_point.enabled] for p in config.profiles} == {
        "tessera-scheduler": ["ElasticQuota"],
        "koord-scheduler": ["ElasticQuota"],
        "default-scheduler": ["ElasticQuota"],
    }
    assert component.name == "scheduler"
    components.scheduler(tmp_path, tmp_path / "kubeconfig", grpc_address="")
    plain = parse_config(yaml.safe_load((tmp_path / "scheduler" / "config.yaml").read_text()))
    assert [p.multi_point.enabled for p in plain.profiles] == [(), (), ()]
