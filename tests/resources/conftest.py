"""Fixtures for provider tests: the providers configured the way the dynamic-provider server does it.

The server calls ``provider.configure(ConfigureRequest(Config(raw_config, project)))`` once per provider blob,
with the whole stack config; here every test gets fresh providers configured against the per-test emulator,
polling every 20 ms.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

import pytest
from pulumi.dynamic import Config, ConfigureRequest

from pulumi_together_rl import config
from pulumi_together_rl.client import TogetherRL, reconcile
from pulumi_together_rl.resources import process
from pulumi_together_rl.resources.model_resource import _ModelResourceProvider
from pulumi_together_rl.resources.training_session import _TrainingSessionProvider

MODEL = "Qwen/Qwen3.5-4B"
LIST_LAG_HERE = 1.0
"""Seconds the rig's client allows a list to lag a create (the real API's allowance is
:data:`pulumi_together_rl.client.reconcile.LIST_LAG`); a test that makes the emulator's lists lag keeps that lag well
under it, as the real API's stays under 5 s."""
OWNER = "organization/test/dev/"
"""The declaration prefix of the rig's resources (``org/project/stack/``): what the resource classes add."""


def configure(provider: Any, raw_config: dict[str, Any]) -> None:
    """What pulumi.dynamic.__main__.get_provider does after unpickling a provider."""
    provider.configure(ConfigureRequest(config=Config(raw_config=raw_config, project_name="test")))


@dataclasses.dataclass
class Rig:
    emulator: Any
    resources: _ModelResourceProvider
    sessions: _TrainingSessionProvider
    client: TogetherRL

    @property
    def control(self) -> Any:
        return self.emulator.control

    def create_resource(self, **inputs: Any) -> Any:
        """check + create, as the engine does for a new ModelResource (declared as ``owner``, by default the
        stack ``test/dev``'s ``gpu``)."""
        checked = self.resources.check({}, {"base_model": MODEL, "owner": OWNER + "gpu", **inputs})
        assert checked.failures == [], [(f.property, f.reason) for f in checked.failures]
        return self.resources.create(checked.inputs)

    def create_session(self, resource_id: str, **inputs: Any) -> Any:
        checked = self.sessions.check(
            {}, {"model_resources_id": resource_id, "owner": OWNER + "trial", **inputs}
        )
        assert checked.failures == [], [(f.property, f.reason) for f in checked.failures]
        return self.sessions.create(checked.inputs)

    def create_resource_failing(self, **inputs: Any) -> Callable[[float], BaseException]:
        """Start :meth:`create_resource` in a thread, for a test that acts while it waits and expects it to fail;
        call the answer (with a timeout in seconds) to wait for it and get what it raised."""
        raised: list[BaseException] = []

        def create() -> None:
            try:
                self.create_resource(**inputs)
            except BaseException as exc:  # handed to the test's thread
                raised.append(exc)

        creating = threading.Thread(target=create, name="create-resource")
        creating.start()

        def failure(timeout: float) -> BaseException:
            creating.join(timeout)
            assert not creating.is_alive(), f"the create still runs after {timeout} s"
            assert raised, "the create succeeded"
            return raised[0]

        return failure

    def posts(self, path_part: str) -> list[dict[str, Any]]:
        return [r for r in self.control.requests() if r["method"] == "POST" and r["path"].endswith(path_part)]


@pytest.fixture
def fresh_provider_state():
    config.reset()
    process.clear_caches()
    yield
    config.reset()
    process.clear_caches()


@pytest.fixture
def rig(emulator, monkeypatch, fresh_provider_state) -> Rig:
    monkeypatch.setenv("TOGETHER_RL_POLL_INTERVAL", "0.02")
    # The emulator's lists lag by what a test sets (none by default, at most LIST_LAG_HERE / 2): the client waits
    # for that lag on the scale of this emulator, not the real API's 5 s.
    monkeypatch.setattr(reconcile, "LIST_LAG", LIST_LAG_HERE)
    # The stack config is the only source here: the environment must not be what makes the tests pass.
    monkeypatch.delenv("TOGETHER_API_KEY")
    monkeypatch.delenv("TOGETHER_BASE_URL")
    raw = {"together:apiKey": emulator.api_key, "together:baseUrl": emulator.base_url, "test:other": "x"}
    resources, sessions = _ModelResourceProvider(), _TrainingSessionProvider()
    configure(resources, raw)
    configure(sessions, raw)
    client = TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url)
    yield Rig(emulator=emulator, resources=resources, sessions=sessions, client=client)
    client.close()


@pytest.fixture
def journal_in_bucket(bucket, monkeypatch):
    """The create journal in a fresh bucket of the loopback S3 server (``TOGETHER_RL_JOURNAL_URL``), with short
    leases: the URL."""
    url = bucket.store_url("team")
    monkeypatch.setenv("TOGETHER_RL_JOURNAL_URL", url)
    monkeypatch.setenv("TOGETHER_RL_LEASE_SECONDS", "3")
    return url
