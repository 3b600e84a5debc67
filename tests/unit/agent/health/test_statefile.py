"""The state file of reset-waiting faults: round trip, atomic replacement, and every way it can be bad."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.health.statefile import FILE_NAME, StateFile, StateFileError
from agent.health.tracker import ResetFault

FAULTS = {
    "GPU-b": ResetFault("Xid79", "XID 79: GPU has fallen off the bus", "2024-05-01T10:00:00Z"),
    "GPU-a": ResetFault("Xid48", "XID 48: Double-bit ECC error", ""),
}


def test_what_is_saved_loads_back(tmp_path: Path) -> None:
    state = StateFile(tmp_path / "state")
    state.save(FAULTS)
    assert state.load() == FAULTS
    assert sorted(p.name for p in state.directory.iterdir()) == [FILE_NAME]  # no temporary file left
    assert list(json.loads(state.path.read_text())["faults"]) == ["GPU-a", "GPU-b"]  # stable, diffable


def test_no_file_is_no_record(tmp_path: Path) -> None:
    assert StateFile(tmp_path / "never-written").load() is None


def test_saving_replaces_the_whole_file(tmp_path: Path) -> None:
    state = StateFile(tmp_path)
    state.save(FAULTS)
    state.save({})
    assert state.load() == {}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"version": 1, "faults": {"GPU-a": {"reason": "Xid79"', "not JSON"),
        ("\x00\x00\x00", "not JSON"),
        ("[]", "expected an object with version 1, got version None"),
        ('{"version": 2, "faults": {}}', "expected an object with version 1, got version 2"),
        ('{"version": 1, "faults": []}', "faults must be an object keyed by GPU UUID"),
        ('{"version": 1, "faults": {"GPU-a": {"reason": 79, "message": "", "since": ""}}}', "fault of GPU-a"),
        ('{"version": 1, "faults": {"GPU-a": {"reason": "", "message": "", "since": ""}}}', "must not be empty"),
    ],
    ids=["truncated", "binary", "not-an-object", "other-version", "faults-a-list", "reason-not-text", "no-reason"],
)
def test_a_corrupted_file_is_a_precise_error(tmp_path: Path, text: str, error: str) -> None:
    state = StateFile(tmp_path)
    state.path.write_text(text)
    with pytest.raises(StateFileError, match=error) as raised:
        state.load()
    assert raised.value.path == state.path
    assert str(state.path) in str(raised.value)


def test_a_save_that_fails_halfway_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    state = StateFile(tmp_path)
    state.save(FAULTS)
    unwritable = ResetFault("Xid79", object(), "")  # type: ignore[arg-type]  # fails inside json.dump, mid-file
    with pytest.raises(TypeError):
        state.save({**FAULTS, "GPU-c": unwritable})
    assert state.load() == FAULTS
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILE_NAME]
    state.discard()
    assert state.load() is None
