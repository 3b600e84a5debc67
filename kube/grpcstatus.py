"""A gRPC status message that always arrives: cut to what a client accepts in its trailers.

gRPC sends an error's message in the `grpc-message` trailer, percent-encoded (every byte outside
printable ASCII, and `%`, takes three). A client refuses trailers over its metadata limit (8 KiB
soft, 16 KiB hard in gRPC's C core; kubelet's Go client has its own) and reports
RESOURCE_EXHAUSTED instead of the error — so a long refusal (a device collision naming many
pods) would reach kubelet as "resource exhausted", its reason lost. `details(text)` keeps the
message whole when it fits in `LIMIT` encoded bytes and otherwise cuts it at a character
boundary, saying how much was cut. The agent's hook server and the runtime proxy both answer
through it.
"""

from __future__ import annotations

from typing import Final

__all__ = ["LIMIT", "details", "encoded_length"]

#: Encoded bytes a status message may take: half the default soft limit, leaving room for the
#: other trailers and headers.
LIMIT: Final = 4096


def _encoded(byte: int) -> int:
    return 1 if 0x20 <= byte <= 0x7E and byte != 0x25 else 3


def encoded_length(text: str) -> int:
    """Bytes `text` takes in the `grpc-message` trailer."""
    return sum(_encoded(b) for b in text.encode())


def details(text: str, limit: int = LIMIT) -> str:
    """`text`, or its start and `... (N bytes cut)` so that it takes at most `limit` encoded bytes."""
    if encoded_length(text) <= limit:
        return text
    raw = text.encode()
    suffix_room = len(f"... ({len(raw)} bytes cut)")
    budget, size, end = limit - suffix_room, 0, 0
    for i, byte in enumerate(raw):
        cost = _encoded(byte)
        if size + cost > budget:
            break
        size += cost
        end = i + 1
    head = raw[:end].decode(errors="ignore")  # drops a character cut in the middle
    return f"{head}... ({len(raw) - len(head.encode())} bytes cut)"
