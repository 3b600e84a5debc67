"""Koordinator's debug score table: the top-N nodes of each pod with every plugin's score, in markdown.

Switched on at run time with `PUT /debug/flags/s` (body: N; 0 switches it off) or at start-up
with `--debug-scores N`. Each scheduled pod then logs "Score table" with the table as a field,
and the latest tables are kept for `GET /debug/scores`:

    | # | Pod | Node | Score | DeviceShare | NodeAffinity | NodeResourcesFit | TaintToleration |
    | --- | --- | --- | ---:| ---:| ---:| ---:| ---:|
    | 0 | default/train-0 | gpu-3 | 477 | 100 | 0 | 77 | 300 |

Scores are the normalized ones times the plugin's weight, so a row's columns add up to Score.
"""

from __future__ import annotations

import collections
import threading

from scheduler.framework.runtime import ScoreTable

__all__ = ["DebugFlags", "score_table"]

_KEPT_TABLES = 32


class DebugFlags:
    """Switches changed at run time (over HTTP) and read by the scheduling loop. Thread-safe."""

    def __init__(self, top_n_scores: int = 0) -> None:
        self._lock = threading.Lock()
        self._top_n = top_n_scores
        self._tables: collections.deque[str] = collections.deque(maxlen=_KEPT_TABLES)

    @property
    def top_n_scores(self) -> int:
        return self._top_n

    def set_top_n_scores(self, n: int) -> None:
        if n < 0:
            raise ValueError(f"the number of nodes must be >= 0, got {n}")
        self._top_n = n

    def keep(self, table: str) -> None:
        with self._lock:
            self._tables.append(table)

    def tables(self) -> list[str]:
        """The latest tables, oldest first."""
        with self._lock:
            return list(self._tables)


def score_table(pod: str, table: ScoreTable, top_n: int) -> str:
    """The markdown table of the `top_n` best nodes (highest score first, then by name)."""
    order = sorted(range(len(table.nodes)), key=lambda i: (-_total(table, i), table.nodes[i]))[:top_n]
    columns = sorted(range(len(table.plugins)), key=lambda j: table.plugins[j])
    head = ["#", "Pod", "Node", "Score", *(table.plugins[j] for j in columns)]
    lines = [
        "| " + " | ".join(head) + " |",
        "| --- | --- | --- | ---:|" + "".join(" ---:|" for _ in columns),
    ]
    for rank, i in enumerate(order):
        scores = table.scores[i] if i < len(table.scores) else ()
        cells = [str(rank), pod, table.nodes[i], str(_total(table, i))]
        cells += [str(scores[j]) if j < len(scores) else "0" for j in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _total(table: ScoreTable, i: int) -> int:
    return table.totals[i] if i < len(table.totals) else 0
