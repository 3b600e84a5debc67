"""Factories for the API server's in-memory parts (no storage, no HTTP)."""

import pytest

from apiserver.registry import Registry
from tests.unit.apiserver.objects import make_registry


@pytest.fixture
def registry() -> Registry:
    return make_registry()
