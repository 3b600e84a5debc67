"""Discovery and OpenAPI documents: what `kubectl` reads before it sends a request.

`/api`, `/apis`, `/api/v1` and `/apis/G/V` describe the served resources (legacy discovery; a
client asking for aggregated discovery gets plain JSON and falls back, as against an older
server). OpenAPI is served only as far as kubectl needs it to work without `--validate=false`:
`/openapi/v3` lists each group-version, whose document declares a PATCH operation per kind that
accepts the `fieldValidation` parameter, so kubectl (1.24+) leaves validation to the server;
`/openapi/v2` (JSON, or gnostic protobuf for kubectl before 1.27) holds the definitions. Custom
resources' schemas are published in both (`schema/openapi.py`), so `kubectl explain` works for
them; built-in kinds have no schema published (kubectl skips client-side validation for them).

Documents are rebuilt only when the catalog changes (a CRD is created or deleted).
"""

from __future__ import annotations

import hashlib
import json
import platform
from collections.abc import Callable
from typing import Any

from apiserver.catalog import Catalog, ResourceType
from apiserver.schema import gnostic, openapi

__all__ = ["KUBE_VERSION", "Discovery"]

KUBE_VERSION = (1, 31, 0)
_SUBRESOURCE_VERBS = {
    "status": ["get", "patch", "update"],
    "binding": ["create"],
    "eviction": ["create"],
    "log": ["get"],
    "exec": ["create", "get"],
    "attach": ["create", "get"],
    "portforward": ["create", "get"],
    "scale": ["get", "patch", "update"],
}
_SUBRESOURCE_KINDS = {
    "binding": ("", "", "Binding"),
    "eviction": ("policy", "v1", "Eviction"),
    "exec": ("", "", "PodExecOptions"),
    "attach": ("", "", "PodAttachOptions"),
    "portforward": ("", "", "PodPortForwardOptions"),
    "scale": ("autoscaling", "v1", "Scale"),
}


def _json(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _hash(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:16].upper()


class Discovery:
    def __init__(self, catalog: Catalog, server_address: str) -> None:
        self._catalog = catalog
        self._server_address = server_address
        self._cache: dict[str, bytes] = {}
        self._generation = -1

    def _cached(self, key: str, build: Any, encode: Callable[[Any], bytes] = _json) -> bytes:
        if self._generation != self._catalog.generation:
            self._cache.clear()
            self._generation = self._catalog.generation
        body = self._cache.get(key)
        if body is None:
            body = self._cache[key] = encode(build())
        return body

    @staticmethod
    def version() -> bytes:
        major, minor, patch = KUBE_VERSION
        return _json(
            {
                "major": str(major),
                "minor": str(minor),
                "gitVersion": f"v{major}.{minor}.{patch}+tessera",
                "gitCommit": "",
                "gitTreeState": "clean",
                "buildDate": "1970-01-01T00:00:00Z",
                "goVersion": f"python{platform.python_version()}",
                "compiler": platform.python_implementation().lower(),
                "platform": f"{platform.system().lower()}/{platform.machine()}",
            }
        )

    def api_versions(self) -> bytes:
        return self._cached(
            "/api",
            lambda: {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": self._server_address}],
            },
        )

    @staticmethod
    def _group(name: str, versions: tuple[str, ...]) -> dict[str, Any]:
        return {
            "name": name,
            "versions": [{"groupVersion": f"{name}/{v}", "version": v} for v in versions],
            "preferredVersion": {"groupVersion": f"{name}/{versions[0]}", "version": versions[0]},
        }

    def group_list(self) -> bytes:
        return self._cached(
            "/apis",
            lambda: {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [self._group(g.name, g.versions) for g in self._catalog.groups()],
            },
        )

    def group(self, name: str) -> bytes | None:
        info = next((g for g in self._catalog.groups() if g.name == name), None)
        if info is None:
            return None
        return self._cached(
            f"/apis/{name}", lambda: {"kind": "APIGroup", "apiVersion": "v1", **self._group(name, info.versions)}
        )

    def resource_list(self, group: str, version: str) -> bytes | None:
        types = self._catalog.resources(group, version)
        if not types:
            return None
        gv = f"{group}/{version}" if group else version
        return self._cached(
            f"/resources/{gv}",
            lambda: {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": gv,
                "resources": [r for rt in sorted(types, key=lambda t: t.plural) for r in self._resources(rt)],
            },
        )

    @staticmethod
    def _resources(rt: ResourceType) -> list[dict[str, Any]]:
        main: dict[str, Any] = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
            "storageVersionHash": _hash(rt.group, rt.version, rt.kind)[:12],
        }
        if rt.short_names:
            main["shortNames"] = list(rt.short_names)
        if rt.categories:
            main["categories"] = list(rt.categories)
        out = [main]
        for sub in sorted(rt.subresources):
            group, version, kind = _SUBRESOURCE_KINDS.get(sub, ("", "", rt.kind))
            entry: dict[str, Any] = {
                "name": f"{rt.plural}/{sub}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": kind,
                "verbs": _SUBRESOURCE_VERBS.get(sub, ["get"]),
            }
            if group:
                entry.update(group=group, version=version)
            out.append(entry)
        return out

    # --- OpenAPI -----------------------------------------------------------------------------------
    def _group_versions(self) -> list[tuple[str, str]]:
        return sorted({(rt.group, rt.version) for rt in self._catalog.all() if rt.verbs != ("create",)})

    @staticmethod
    def _gv_path(group: str, version: str) -> str:
        return f"apis/{group}/{version}" if group else f"api/{version}"

    def openapi_v3_root(self) -> bytes:
        def build() -> dict[str, Any]:
            paths = {}
            for group, version in self._group_versions():
                path = self._gv_path(group, version)
                kinds = ",".join(sorted(rt.kind for rt in self._catalog.resources(group, version)))
                paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={_hash(path, kinds)}"}
            return {"paths": paths}

        return self._cached("/openapi/v3", build)

    def openapi_v3(self, path: str) -> bytes | None:
        for group, version in self._group_versions():
            if self._gv_path(group, version) == path:
                return self._cached(f"/openapi/v3/{path}", lambda g=group, v=version: self._openapi_doc(g, v))
        return None

    def _openapi_doc(self, group: str, version: str) -> dict[str, Any]:
        """One PATCH operation per kind: what kubectl's field-validation check looks for."""
        major, minor, patch = KUBE_VERSION
        paths: dict[str, Any] = {}
        for rt in self._catalog.resources(group, version):
            if "patch" not in rt.verbs:
                continue
            base = f"/{self._gv_path(group, version)}"
            ns = "/namespaces/{namespace}" if rt.namespaced else ""
            content = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]
            paths[f"{base}{ns}/{rt.plural}/{{name}}"] = {
                "patch": {
                    "operationId": f"patch{rt.kind}",
                    "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": rt.kind},
                    "parameters": [
                        {"name": name, "in": "query", "schema": {"type": "string"}}
                        for name in ("dryRun", "fieldManager", "fieldValidation")
                    ],
                    "requestBody": {"content": {c: {"schema": {"type": "object"}} for c in content}},
                    "responses": {"200": {"description": "OK"}},
                }
            }
        return {
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": f"v{major}.{minor}.{patch}"},
            "paths": paths,
            "components": {"schemas": openapi.v3_schemas(self._catalog.resources(group, version))},
        }

    def openapi_v2(self, protobuf: bool) -> bytes:
        """The v2 document with every custom kind's definition: JSON, or gnostic's protobuf."""
        major, minor, patch = KUBE_VERSION
        if protobuf:
            return self._cached(
                "/openapi/v2.pb",
                lambda: gnostic.encode_document(
                    "Kubernetes", f"v{major}.{minor}.{patch}", openapi.v2_definitions(self._catalog.all())
                ),
                encode=bytes,
            )
        return self._cached(
            "/openapi/v2",
            lambda: {
                "swagger": "2.0",
                "info": {"title": "Kubernetes", "version": f"v{major}.{minor}.{patch}"},
                "paths": {},
                "definitions": openapi.v2_definitions(self._catalog.all()),
            },
        )
