"""ValidatingWebhookConfigurations in the store: defaulted and validated on write, and every stored
change handed to `Admission`, so the webhooks called are always exactly those stored (also after
a restart: the registry replays stored configurations at load)."""

from __future__ import annotations

from typing import Any

from apiserver.admission import config
from apiserver.admission.dispatcher import Admission
from apiserver.errors import Cause
from apiserver.strategy import Strategy

__all__ = ["WebhookConfigurationStrategy"]


class WebhookConfigurationStrategy(Strategy):
    restore_on_load = True

    def __init__(self, admission: Admission) -> None:
        self._admission = admission

    def prepare_create(self, obj: dict[str, Any]) -> None:
        config.apply_defaults(obj)

    def prepare_update(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        config.apply_defaults(new)

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
        return [*super().validate(obj, old), *config.parse(obj)[1]]

    def on_stored(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is None:
            if old is not None:
                self._admission.remove_configuration(old["metadata"]["name"])
            return
        webhooks, _ = config.parse(new)
        self._admission.set_configuration(new["metadata"]["name"], tuple(webhooks))
