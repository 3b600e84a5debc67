"""Strategies that create PodMigrationJobs (the executor runs them under the safety rules)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from descheduler.settings import DeschedulerSettings
from kube.client import Client

if TYPE_CHECKING:
    from descheduler.app import Strategy

__all__ = ["from_settings"]


def from_settings(client: Client, settings: DeschedulerSettings) -> list[Strategy]:
    """The strategies the settings turn on (none yet)."""
    return []
