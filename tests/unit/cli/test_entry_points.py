"""Every component's command has the same shape: `add_arguments(parser)`, `settings_from(args)`
giving the component's validated settings, `run(args) -> int` calling the one `run(settings) ->
int` its package exports; and flags that cannot work end the same way for all of them, in one
line `tessera CMD: reason` and exit code 2, before anything starts."""

from __future__ import annotations

import argparse
import importlib
import typing
from types import ModuleType

import pytest

from cli.main import COMMANDS, main

#: command -> (the package whose `run` it calls, the settings class that `run` takes)
COMPONENTS = {
    "apiserver": ("apiserver", "APIServerSettings"),
    "agent": ("agent", "AgentSettings"),
    "runtime-proxy": ("runtimeproxy", "ProxySettings"),
    "scheduler": ("scheduler.service", "SchedulerSettings"),
    "controller": ("controller", "ControllerSettings"),
    "descheduler": ("descheduler", "DeschedulerSettings"),
    "dashboard": ("dashboard", "DashboardSettings"),
}


def command_module(command: str) -> ModuleType:
    return importlib.import_module(COMMANDS[command][0])


@pytest.mark.parametrize("command", COMPONENTS)
def test_the_command_turns_flags_into_the_settings_its_package_run_takes(command: str) -> None:
    package_name, settings_name = COMPONENTS[command]
    package = importlib.import_module(package_name)
    assert {"run", settings_name} <= set(package.__all__)
    settings_class = getattr(package, settings_name)
    cli = command_module(command)
    assert typing.get_type_hints(cli.add_arguments) == {"parser": argparse.ArgumentParser, "return": type(None)}
    assert typing.get_type_hints(cli.settings_from) == {"args": argparse.Namespace, "return": settings_class}
    assert typing.get_type_hints(cli.run) == {"args": argparse.Namespace, "return": int}
    run_hints = typing.get_type_hints(package.run)
    assert run_hints["settings"] is settings_class and run_hints["return"] is int


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["apiserver", "--listen", "0.0.0.0:0", "--in-memory"],
            "tessera apiserver: refusing to listen on 0.0.0.0 without a token",
        ),
        (["agent"], "tessera agent: --node-name is required"),
        (
            ["runtime-proxy", "--listen", "relative.sock"],
            "tessera runtime-proxy: runtime proxy settings: listen relative.sock: expected an absolute path",
        ),
        (
            ["scheduler", "--kubeconfig=/nonexistent", "--http-address", "nowhere", "--bind-workers=0"],
            "tessera scheduler: invalid scheduler settings: http: address 'nowhere': expected HOST:PORT; "
            "binder: workers must be >= 1",
        ),
        (["controller", "--kubeconfig=/nonexistent", "--resync-period=-1"], "tessera controller: --resync-period"),
        (
            ["descheduler", "--kubeconfig=/nonexistent", "--max-per-node=-1", "--eviction-qps=0"],
            "tessera descheduler: eviction qps 0: must be > 0; max per node -1: must be >= 0 (0: no limit)",
        ),
        (
            ["dashboard", "--kubeconfig=/nonexistent", "--scheduler=none", "--poll-interval=0"],
            "tessera dashboard: --poll-interval 0: must be above 0",
        ),
    ],
    ids=list(COMPONENTS),
)
def test_settings_that_cannot_work_are_one_line_and_exit_code_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(message)
    assert "Traceback" not in err and len(err.splitlines()) == 1
