"""Does what a command printed agree with what its doc shows? Only in what stays the same.

A doc's ```text block after a command shows one run: its ports, timings, counts and which of two
equal nodes got a pod are that run's. What must hold in every run is the rest: the names, the
words, the shape of each line. So each shown line is compared with the printed ones after
`stable()`: runs of blanks are one space (column widths follow the values), every number is `#`
(the plural a number governs is its singular: `1 attempt`, `2 attempts`), and `…` in the doc
stands for anything. The shown lines must all be found, in their order, among the printed ones;
printed lines the doc leaves out are fine. A value printed where the doc shows a number, such
as kubectl's `<none>` for a path that does not resolve, is not.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["missing", "stable"]

ELLIPSIS: Final = "…"
_NUMBER: Final = re.compile(r"\d+(?:\.\d+)*")
#: A number of its own (not the digits ending a generated name, `…-ckpz4 docs-…`) and its noun.
_PLURAL: Final = re.compile(r"(?<!\S)(#\s+[A-Za-z]+?)s\b")


def stable(line: str) -> str:
    """What of a printed line every run prints the same (see the module docstring)."""
    return _PLURAL.sub(r"\1", _NUMBER.sub("#", " ".join(line.split())))


def missing(shown: str, printed: str) -> str | None:
    """The first line the doc shows that the command did not print (in order), or None."""
    lines = [stable(line) for line in printed.splitlines()]
    at = 0
    for line in shown.splitlines():
        wanted = stable(line)
        if wanted in ("", ELLIPSIS):
            continue
        pattern = re.compile(".*".join(re.escape(part) for part in wanted.split(ELLIPSIS)))
        found = next((i for i in range(at, len(lines)) if pattern.fullmatch(lines[i])), None)
        if found is None:
            return line
        at = found + 1
    return None
