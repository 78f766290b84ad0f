from __future__ import annotations

import pytest

from pulumi_together_rl.client import api


@pytest.fixture(autouse=True)
def _fresh_claims():
    """Claimed ids are process-wide by design; scripted tests reuse ids like "mr_1", so start each test clean."""
    api._CLAIMS.clear()
    yield
    api._CLAIMS.clear()
