"""A clock tests step by hand, so queues and deferrals are tested without sleeping."""

import pytest

from tests.support.clocks import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
