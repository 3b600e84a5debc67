"""A one-line progress bar on a terminal, and nothing at all elsewhere (logs, pipes, CI), so
that `tessera simulate … -o json > file` stays clean."""

from __future__ import annotations

from typing import TextIO

__all__ = ["ProgressBar"]


class ProgressBar:
    """`update(done, note)` redraws `[#####.....] done/total note` in place; `close()` ends
    the line. Inactive (every call a no-op) unless `stream` is a terminal or `force`."""

    WIDTH = 30

    def __init__(self, total: int, stream: TextIO, *, force: bool = False) -> None:
        self.total = max(total, 1)
        self.stream = stream
        self.active = force or stream.isatty()
        self._drawn = False

    def update(self, done: float, note: str = "") -> None:
        if not self.active:
            return
        filled = min(self.WIDTH, int(self.WIDTH * done / self.total))
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self.stream.write(f"\r[{bar}] {done:.0f}/{self.total} {note}".ljust(79))
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self.active and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
        self._drawn = False
