"""Reading JSON-valued annotations: one door, so every codec fails the same precise way."""

from __future__ import annotations

import json
from typing import Any

from apis.errors import AnnotationError

#: Kubernetes caps all annotations of an object at 256 KiB together; one value cannot be longer.
MAX_VALUE = 256 * 1024


def load_json(key: str, text: object, obj: str, *, expect: type[dict[str, Any]] | type[list[Any]], shape: str) -> Any:
    """Parse `text` as JSON of the `expect`ed type. Raises AnnotationError (naming `shape`) otherwise."""
    if not isinstance(text, str):
        raise AnnotationError(key, f"expected a string, got {type(text).__name__}", obj=obj)
    if len(text) > MAX_VALUE:
        raise AnnotationError(key, f"longer than {MAX_VALUE} bytes", obj=obj)
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise AnnotationError(key, f"not valid JSON: {e}", obj=obj) from None
    if not isinstance(doc, expect):
        raise AnnotationError(key, f"expected {shape}", obj=obj)
    return doc
