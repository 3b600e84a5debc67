"""metav1.Duration: Go's duration strings (`600s`, `1h30m`, `1.5m`), as CRD fields and annotations
write them."""

from __future__ import annotations

import re

__all__ = ["format_duration", "parse_duration"]

_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Parse a Go duration into seconds (`0` alone is allowed, as in Go). Raises ValueError."""
    if not text:
        raise ValueError("empty duration")
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if pos != len(text):
        raise ValueError(f"{text!r} is not a duration such as 600s or 1h30m")
    return total


def format_duration(seconds: float) -> str:
    """Seconds as Go prints a duration (`1h30m0s`, `45s`, `0s`), whole seconds."""
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"
