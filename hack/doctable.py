"""A table a script generates into a document, between two HTML-comment markers.

    generated = table(...)
    doc = doctable.replace(doc, generated, begin=BEGIN, end=END)

`hack/helm_values_table.py` (docs/user/deploy.md's values table) and `hack/security_rbac_table.py`
(docs/security.md's identities table) both print their table, or with `--write` put it in place;
their tests compare the document with `replace`'s result, so a table cannot drift from its source.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["main", "replace"]


def replace(doc: str, generated: str, *, begin: str, end: str) -> str:
    """The doc with the text between its `begin` and `end` markers replaced."""
    start, stop = doc.index(begin) + len(begin), doc.index(end)
    return doc[:start] + "\n" + generated + doc[stop:]


def main(
    argv: list[str] | None, *, description: str, doc: Path, generate: Callable[[], str], begin: str, end: str
) -> int:
    """Print the table, or with `--write` replace it in `doc`."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help=f"replace the table in {doc.name}")
    args = parser.parse_args(argv)
    generated = generate()
    if args.write:
        doc.write_text(replace(doc.read_text(), generated, begin=begin, end=end))
    else:
        sys.stdout.write(generated)
    return 0
