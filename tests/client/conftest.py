from __future__ import annotations

import pytest

from pulumi_together_rl.client import reconcile


@pytest.fixture(autouse=True)
def _fresh_claims():
    """Claimed ids are process-wide by design; scripted tests reuse ids like "mr_1", so start each test clean."""
    reconcile._CLAIMS.clear()
    yield
    reconcile._CLAIMS.clear()
