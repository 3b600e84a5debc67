"""A real HTTPS admission webhook for tests, whose answers a test scripts.

    with ScriptedWebhook(tmp_path) as hook:         # serves https://127.0.0.1:PORT/validate
        hook.answer = ScriptedWebhook.deny("no thanks", code=403)
        ...                                         # hook.reviews: every AdmissionReview received
        hook.hold()                                 # answers wait until hook.release()

It is `kube.serving.Server` with TLS, certificates from `kube.pki`, exactly as the controller's
webhook serves; `ca_bundle` is what a ValidatingWebhookConfiguration carries (base64 PEM).
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from kube import serving
from kube.pki import CA

__all__ = ["Answer", "ScriptedWebhook"]

#: How long a held answer waits for `release()` at most: a guard for a test that forgets to.
_HOLD_GUARD_S = 120.0

#: (the AdmissionReview received) -> the `response` to send back (uid is filled in).
Answer = Callable[[Mapping[str, Any]], dict[str, Any]]


class ScriptedWebhook:
    def __init__(self, directory: Path, *, dns: tuple[str, ...] = ()) -> None:
        self.ca = CA.create("webhook-test-ca")
        cert, key = self.ca.issue("webhook", server=True, dns=dns, ips=["127.0.0.1"]).write(directory / "webhook")
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(cert, key)
        self.reviews: list[dict[str, Any]] = []
        self.answer: Answer = self.allow()
        self._answering = threading.Event()
        self._answering.set()
        self._server = serving.Server(
            "scripted webhook",
            host="127.0.0.1",
            port=0,
            registry=CollectorRegistry(),
            routes=[serving.Route("POST", "/validate", self._handle)],
            tls=tls,
            max_body=4 << 20,
        )

    def __enter__(self) -> ScriptedWebhook:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self._server.stop()

    def hold(self) -> None:
        """Make every answer wait until `release()`: a webhook slower than anything a test
        waits for, without the test sleeping."""
        self._answering.clear()

    def release(self) -> None:
        """Let held answers go (and answer at once from now on)."""
        self._answering.set()

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/validate"

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca.pem).decode()

    def _handle(self, request: serving.Request) -> serving.Response:
        review = json.loads(request.body)
        self.reviews.append(review)
        self._answering.wait(_HOLD_GUARD_S)
        response = {"uid": review["request"]["uid"], **self.answer(review)}
        doc = {"apiVersion": review["apiVersion"], "kind": "AdmissionReview", "response": response}
        return serving.Response.json(doc)

    @staticmethod
    def allow() -> Answer:
        return lambda review: {"allowed": True}

    @staticmethod
    def deny(message: str, *, code: int = 403, reason: str = "Forbidden") -> Answer:
        return lambda review: {"allowed": False, "status": {"code": code, "reason": reason, "message": message}}
