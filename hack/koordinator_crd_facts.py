"""Write the facts of Koordinator's CRD schemas that tests/unit/deploy/test_koordinator_crds.py
holds ours against: every validating and defaulting keyword, by path, and the subresources.

    python hack/koordinator_crd_facts.py KOORDINATOR_CHECKOUT > tests/unit/deploy/fixtures/koordinator-crds.txt

KOORDINATOR_CHECKOUT is a koordinator-sh/koordinator checkout (its config/crd/bases/), or a bare
clone of it (read at HEAD with `git show`). Descriptions are left out: what is kept are facts —
one line per keyword, `<crd> <version> <path> <keyword> <JSON value>`, where a path is
`.spec.devices[].minor` (`[]` an array's items, `{}` a map's values) and `-` the schema's root —
plus a line `<crd> <version> - subresources <JSON>` per version. Run it again when Koordinator's
CRDs change; the header records the commit it read.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

#: Koordinator's CRDs of the groups Tessera serves (deploy/crds/ has a copy of each).
CRDS = (
    "scheduling.koordinator.sh_devices",
    "scheduling.koordinator.sh_podmigrationjobs",
    "scheduling.koordinator.sh_reservations",
    "scheduling.sigs.k8s.io_elasticquotas",
    "scheduling.sigs.k8s.io_podgroups",
    "slo.koordinator.sh_nodeslos",
)
#: Keywords that are not facts about what an object may be.
_SKIPPED = frozenset({"description", "example", "externalDocs", "title"})


def facts(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, str, str]]:
    """(path, keyword, JSON value) for every keyword of `schema` and its sub-schemas."""
    for key, value in sorted(schema.items()):
        if key in _SKIPPED:
            continue
        if key == "properties":
            for name, sub in sorted(value.items()):
                yield from facts(sub, f"{path}.{name}")
        elif key == "items" and isinstance(value, dict):
            yield from facts(value, f"{path}[]")
        elif key == "additionalProperties" and isinstance(value, dict):
            yield from facts(value, path + "{}")
        else:
            yield path or "-", key, json.dumps(value, sort_keys=True, separators=(",", ":"))


def _read(checkout: Path, relative: str) -> tuple[str, str]:
    """The file's text and the commit it was read at ("" for a work tree that is no git repo)."""
    if (checkout / relative).is_file():
        text = (checkout / relative).read_text()
        git = ["git", "-C", str(checkout)]
    else:
        git = ["git", "--git-dir", str(checkout)]
        text = subprocess.run([*git, "show", f"HEAD:{relative}"], capture_output=True, text=True, check=True).stdout
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=False).stdout.strip()
    return text, commit


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    checkout = Path(argv[1])
    lines, commits = [], set()
    for crd in CRDS:
        text, commit = _read(checkout, f"config/crd/bases/{crd}.yaml")
        commits.add(commit)
        doc = yaml.safe_load(text)
        name = doc["metadata"]["name"]
        for version in doc["spec"]["versions"]:
            subresources = json.dumps(version.get("subresources") or {}, sort_keys=True, separators=(",", ":"))
            lines.append(f"{name} {version['name']} - subresources {subresources}")
            for path, key, value in facts(version["schema"]["openAPIV3Schema"]):
                lines.append(f"{name} {version['name']} {path} {key} {value}")
    print("# Facts of Koordinator's CRD schemas (config/crd/bases/), by hack/koordinator_crd_facts.py")
    print(f"# from koordinator-sh/koordinator at {', '.join(sorted(commits))}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
