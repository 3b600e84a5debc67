"""The XID table: the protocol's application XIDs are ignored; docs/agent.md shows the same table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.health.xid import XID_TABLE, XidAction, from_reason, reason, rule

DOC = Path(__file__).resolve().parents[4] / "docs" / "agent.md"


def test_application_xids_are_exactly_the_protocols() -> None:
    ignored = {xid for xid, r in XID_TABLE.items() if r.action is XidAction.IGNORE}
    assert ignored == {13, 31, 43, 45, 68, 109}


def test_unlisted_xids_are_critical_and_recover() -> None:
    assert rule(999).action is XidAction.RECOVER


def test_fallen_off_the_bus_and_double_bit_ecc_need_a_reset() -> None:
    assert rule(79).action is rule(48).action is XidAction.RESET


def test_the_documented_table_is_the_code_table() -> None:
    rows = re.findall(r"^\| (\d+) \| (ignore|recover|reset) \| (.+?) \|$", DOC.read_text(), re.MULTILINE)
    documented = {int(xid): (action, description) for xid, action, description in rows}
    assert documented == {xid: (r.action.value, r.description) for xid, r in XID_TABLE.items()}


@pytest.mark.parametrize(
    ("text", "xid"),
    [("Xid79", 79), ("Xid48", 48), ("GPULost", None), ("Xid", None), ("Xid7a", None), ("xid79", None), ("Xid²", None)],
    ids=["79", "48", "not-an-xid", "no-number", "not-a-number", "lower-case", "not-ascii"],
)
def test_a_health_reason_names_its_xid(text: str, xid: int | None) -> None:
    assert from_reason(text) == xid
    if xid is not None:
        assert reason(xid) == text
