"""The floor of a benchmark: dynamic resources of the same shape as ``ModelResource`` and ``TrainingSession``
(the same inputs and outputs, a session given its resource) whose provider does nothing at all: check echoes,
diff says "no change", create answers at once, read returns what the state holds, delete returns.

What a command costs with these is what the Pulumi CLI, the language host, the program and a dynamic-provider
plugin cost by themselves; ``scripts/bench_overhead.py`` sets ours beside it. Importable by reference, so its
``__provider`` blob is as small as ours.
"""

from __future__ import annotations

import uuid
from typing import Any

import pulumi
import pulumi.dynamic
from pulumi.dynamic import CheckResult, CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult


class NoopProvider(ResourceProvider):
    """Every method answers at once, from what it is given."""

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        return CheckResult(news, [])

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        keys = {k for k in news if k != "__provider"}
        return DiffResult(changes=any(olds.get(k) != news.get(k) for k in keys), replaces=[], stables=[])

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(uuid.uuid4().hex, {**props, "status": "READY"})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_, props, inputs={k: v for k, v in props.items() if k != "status"})

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult({**news, "status": "READY"})

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        pass


class NoopModelResource(pulumi.dynamic.Resource, module="noop", name="ModelResource"):
    status: pulumi.Output[str]

    def __init__(self, name: str, base_model: str, compute_config: dict[str, Any] | None = None) -> None:
        props = {"base_model": base_model, "compute_config": compute_config, "status": None}
        super().__init__(NoopProvider(), name, props)


class NoopTrainingSession(pulumi.dynamic.Resource, module="noop", name="TrainingSession"):
    status: pulumi.Output[str]

    def __init__(self, name: str, model_resource: NoopModelResource, lora_config: dict[str, Any]) -> None:
        props = {
            "model_resources_id": model_resource.id,
            "lora_config": lora_config,
            "display_name": name,
            "status": None,
        }
        super().__init__(NoopProvider(), name, props)
