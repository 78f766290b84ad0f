"""Fixtures of the emulator tests."""

from __future__ import annotations

import pytest
from emulator_helpers import Api


@pytest.fixture
def api(emulator):
    """Raw httpx access to the (freshly reset) emulator's public API, with the test key."""
    client = Api(emulator.base_url, emulator.api_key)
    yield client
    client.close()
