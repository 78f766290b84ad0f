"""Process-level properties: the pickled provider blob, and thread-safety under the server's worker threads."""

from __future__ import annotations

import base64
from concurrent.futures import ThreadPoolExecutor

import dill
import pytest
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.runtime._serialization import _serialize

from pulumi_together_rl.resources.model_resource import _ModelResourceProvider
from pulumi_together_rl.resources.training_session import _TrainingSessionProvider

from .conftest import configure


@pytest.mark.parametrize("provider_class", [_ModelResourceProvider, _TrainingSessionProvider])
def test_provider_pickles_by_reference_without_the_key(rig, provider_class):
    provider = provider_class()
    configure(provider, {"together:apiKey": rig.emulator.api_key, "together:baseUrl": rig.emulator.base_url})
    news = {"base_model": "Qwen/Qwen3.5-4B"}
    if provider_class is _TrainingSessionProvider:
        news = {"model_resources_id": "mr-unknown", "lora_config": {"rank": 8}}
    provider.check({}, news)  # uses (and so builds) the process's client

    blob, contains_secrets = _serialize(True, serialize_provider, provider)
    raw = base64.b64decode(blob)

    assert rig.emulator.api_key.encode() not in raw and rig.emulator.base_url.encode() not in raw
    assert provider_class.__module__.encode() in raw and provider_class.__name__.encode() in raw
    assert b"_create_code" not in raw and b"TogetherRL" not in raw and len(raw) < 200
    assert contains_secrets is False
    # Deterministic: a fresh, unconfigured instance pickles to the same bytes (no spurious ~__provider diff).
    assert blob == _serialize(True, serialize_provider, provider_class())[0]
    assert type(dill.loads(raw)) is provider_class


def test_parallel_creates_and_deletes_in_worker_threads(rig):
    def lifecycle(n: int) -> tuple[str, str]:
        resource = rig.create_resource()
        session = rig.create_session(resource.id, display_name=f"s{n}")
        rig.sessions.delete(session.id, session.outs)
        rig.resources.delete(resource.id, resource.outs)
        return resource.id, session.id

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lifecycle, range(6)))

    resource_ids = {r for r, _ in results}
    session_ids = {s for _, s in results}
    assert len(resource_ids) == 6 and len(session_ids) == 6
    state = rig.control.state()
    assert {r["id"] for r in state["model_resources"]} == resource_ids  # one allocation per create
    assert all(r["status"].endswith(("STOPPING", "STOPPED")) for r in state["model_resources"])
    assert all(s["status"].endswith("STOPPED") for s in state["training_sessions"])
