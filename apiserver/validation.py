"""Checks on object metadata that every type shares: names, labels, annotations, finalizers.

Each check returns the problems it found as `Cause`s instead of raising, so one 422 response can
list every problem of an object at once, as kube-apiserver does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from apiserver.errors import Cause

__all__ = ["dns_label", "dns_subdomain", "qualified_name", "validate_metadata"]

_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE_RE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
MAX_ANNOTATIONS_BYTES = 256 * 1024


def dns_label(value: str) -> str:
    """ "" when valid, else why not (RFC 1123 label: namespaces, container names)."""
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _LABEL_RE.fullmatch(value):
        return "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'"
    return ""


def dns_subdomain(value: str) -> str:
    """ "" when valid, else why not (RFC 1123 subdomain: most object names)."""
    if len(value) > 253:
        return "must be no more than 253 characters"
    if not _SUBDOMAIN_RE.fullmatch(value):
        return (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return ""


def qualified_name(key: str) -> str:
    """ "" when valid, else why not (an optional DNS subdomain prefix and '/', then a name: label
    and annotation keys, resource names)."""
    prefix, slash, name = key.rpartition("/")
    if "/" in prefix:
        return "a qualified name must have at most one '/'"
    if slash and not prefix:
        return "prefix part must be non-empty"
    if prefix and dns_subdomain(prefix):
        return f"prefix part {dns_subdomain(prefix)}"
    if not name or len(name) > 63 or not _QUALIFIED_NAME_RE.fullmatch(name):
        return "name part must consist of alphanumeric characters, '-', '_' or '.', at most 63 characters"
    return ""


def _annotations_bytes(annotations: Mapping[str, str]) -> int:
    """What kube counts against the 256 KiB limit: each key's and value's bytes (UTF-8), not
    their JSON encoding (where a quote or a newline would count twice)."""
    return sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())


def _string_map(value: object, path: str) -> list[Cause]:
    if value is None:
        return []
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return [Cause(path, "must be a map of strings to strings", "FieldValueTypeInvalid")]
    return []


def validate_metadata(meta: Mapping[str, Any], *, name_rule: str = "subdomain") -> list[Cause]:
    causes: list[Cause] = []
    name = meta.get("name", "")
    check = dns_label if name_rule == "label" else dns_subdomain
    if name and (why := check(name)):
        causes.append(Cause("metadata.name", f"Invalid value: {name!r}: {why}"))
    labels = meta.get("labels")
    causes += _string_map(labels, "metadata.labels")
    if not causes and isinstance(labels, Mapping):
        for key, value in labels.items():
            if why := qualified_name(key):
                causes.append(Cause("metadata.labels", f"Invalid value: {key!r}: {why}"))
            if len(value) > 63 or not _LABEL_VALUE_RE.fullmatch(value):
                causes.append(
                    Cause(
                        f"metadata.labels[{key}]", f"Invalid value: {value!r}: a valid label must be at most 63 chars"
                    )
                )
    annotations = meta.get("annotations")
    ann_causes = _string_map(annotations, "metadata.annotations")
    causes += ann_causes
    if not ann_causes and isinstance(annotations, Mapping):
        for key in annotations:
            if why := qualified_name(key.lower()):
                causes.append(Cause("metadata.annotations", f"Invalid value: {key!r}: {why}"))
        if _annotations_bytes(annotations) > MAX_ANNOTATIONS_BYTES:
            causes.append(
                Cause("metadata.annotations", "Too long: must have at most 262144 bytes", "FieldValueTooLong")
            )
    finalizers = meta.get("finalizers")
    if finalizers is not None and (
        not isinstance(finalizers, list) or not all(isinstance(f, str) and f for f in finalizers)
    ):
        causes.append(Cause("metadata.finalizers", "must be a list of non-empty strings", "FieldValueTypeInvalid"))
    owners = meta.get("ownerReferences")
    if owners is not None and (
        not isinstance(owners, list)
        or not all(
            isinstance(o, Mapping) and all(isinstance(o.get(k), str) for k in ("apiVersion", "kind", "name", "uid"))
            for o in owners
        )
    ):
        causes.append(
            Cause("metadata.ownerReferences", "each must have apiVersion, kind, name and uid", "FieldValueRequired")
        )
    return causes
