"""Which QoS config is in force: the node's NodeSLO object, else the file, else Koordinator's defaults.

The agent can learn its NodeSLO from two places — the NodeSLO object named after its node
(agent.qos.nodeslo, how Koordinator clusters configure QoS) and the `--qos-config` file — and
falls back to Koordinator's defaults (everything off) without either. `choose` is the rule, pure
so it can be tested on its own; agent.qos.node keeps each source's latest `Loaded` and asks it
again whenever one changes:

    NodeSLO object exists        its config; a version that does not parse keeps what is in force
    else --qos-config is set     the file's config; a file that does not parse (or cannot be
                                 read) keeps what is in force, and with nothing in force yet,
                                 QoS waits for a good one
    else                         Koordinator's defaults (`QoSConfig()`)

"What is in force" is the last good config of whichever source it came from, so a bad edit never
turns a protection off, and deleting the object falls back to the file at once.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from agent.qos.config import QoSConfig

__all__ = ["ABSENT", "InForce", "Loaded", "Source", "choose"]


class Source(enum.Enum):
    NODESLO = "nodeslo"
    FILE = "file"
    DEFAULTS = "defaults"


@dataclass(frozen=True, slots=True)
class Loaded:
    """What one source holds now: nothing (`present` False), a config, or a version that does
    not parse (`present` with `config` None)."""

    present: bool
    config: QoSConfig | None = None

    @property
    def malformed(self) -> bool:
        return self.present and self.config is None


#: The source has nothing: no NodeSLO object for this node, or no `--qos-config`.
ABSENT: Final = Loaded(present=False)


@dataclass(frozen=True, slots=True)
class InForce:
    """The config the QoS parts run with, and where it came from (logs, the source metric)."""

    config: QoSConfig
    source: Source


def choose(*, nodeslo: Loaded, file: Loaded, in_force: InForce | None) -> InForce | None:
    """The config to run with now; see the module docstring. None: nothing good yet, QoS waits."""
    for source, loaded in ((Source.NODESLO, nodeslo), (Source.FILE, file)):
        if loaded.present:
            return in_force if loaded.config is None else InForce(loaded.config, source)
    return InForce(QoSConfig(), Source.DEFAULTS)
