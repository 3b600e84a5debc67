"""Which QoS config is in force: the NodeSLO object, else the file, else Koordinator's defaults."""

import pytest

from agent.qos.config import CPUSuppressConfig, QoSConfig
from agent.qos.sources import ABSENT, InForce, Loaded, Source, choose

OBJECT = QoSConfig(cpu_suppress=CPUSuppressConfig(enable=True, threshold_percent=40))
FILE = QoSConfig(cpu_suppress=CPUSuppressConfig(enable=True, threshold_percent=70))
MALFORMED = Loaded(present=True)
#: What was in force before the change being decided.
BEFORE = InForce(QoSConfig(cpu_suppress=CPUSuppressConfig(threshold_percent=55)), Source.FILE)


@pytest.mark.parametrize(
    ("nodeslo", "file", "in_force", "expected"),
    [
        (Loaded(True, OBJECT), Loaded(True, FILE), BEFORE, InForce(OBJECT, Source.NODESLO)),
        (Loaded(True, OBJECT), ABSENT, None, InForce(OBJECT, Source.NODESLO)),
        (Loaded(True, OBJECT), MALFORMED, None, InForce(OBJECT, Source.NODESLO)),
        (MALFORMED, Loaded(True, FILE), BEFORE, BEFORE),
        (MALFORMED, Loaded(True, FILE), None, None),
        (ABSENT, Loaded(True, FILE), InForce(OBJECT, Source.NODESLO), InForce(FILE, Source.FILE)),
        (ABSENT, MALFORMED, InForce(OBJECT, Source.NODESLO), InForce(OBJECT, Source.NODESLO)),
        (ABSENT, MALFORMED, None, None),
        (ABSENT, ABSENT, InForce(OBJECT, Source.NODESLO), InForce(QoSConfig(), Source.DEFAULTS)),
        (ABSENT, ABSENT, None, InForce(QoSConfig(), Source.DEFAULTS)),
    ],
    ids=[
        "object-beats-file",
        "object-without-file",
        "object-beats-bad-file",
        "bad-object-keeps-what-is-in-force-even-with-a-good-file",
        "bad-object-first-qos-waits",
        "object-deleted-falls-back-to-file",
        "object-deleted-bad-file-keeps-last-good",
        "bad-file-first-qos-waits",
        "object-deleted-no-file-defaults",
        "nothing-defaults",
    ],
)
def test_precedence(nodeslo: Loaded, file: Loaded, in_force: InForce | None, expected: InForce | None) -> None:
    assert choose(nodeslo=nodeslo, file=file, in_force=in_force) == expected


def test_malformed_is_present_without_a_config() -> None:
    assert MALFORMED.malformed and not ABSENT.malformed and not Loaded(True, FILE).malformed
