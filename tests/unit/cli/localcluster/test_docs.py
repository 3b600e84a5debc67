"""docs/user/up.md stays true to `tessera up`: every flag it lists is one the command takes, and
every flag the command takes is listed."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from cli import up as cli_up

DOC = Path(__file__).resolve().parents[4] / "docs" / "user" / "up.md"


def test_the_flag_table_is_the_commands_flags() -> None:
    parser = argparse.ArgumentParser()
    cli_up.add_arguments(parser)
    taken = {option for action in parser._actions for option in action.option_strings} - {"-h", "--help"}
    table = DOC.read_text().split("## Flags", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`(--[a-z-]+)", table)) - {"--v", "--logging-format"}  # every command has these
    assert listed == taken
