"""diff: real inputs only, no HTTP, replacement as data, provider options in place."""

from __future__ import annotations

import pytest
from pulumi.output import Unknown

from pulumi_together_rl.resources import process
from pulumi_together_rl.resources.model_resource import _ModelResourceProvider
from pulumi_together_rl.resources.training_session import _TrainingSessionProvider

MODEL = "Qwen/Qwen3.5-4B"

RESOURCE_OUTPUTS = {
    "__provider": "old-blob",
    "base_model": MODEL,
    "base_weights_ref": "together://ml_abc",
    "inactive_timeout": 3600.0,  # numbers come back from the state as doubles
    "status": "READY",
    "created_at": "2026-01-01T00:00:00Z",
    "effective_compute_config": {"gpu_type": "B200-SXM", "num_generator_replicas": 1.0},
    "effective_optimizer_config": {"adam": {}},
    "effective_base_weights_ref": "together://ml_abc@rv_1",
    "effective_lora_enabled": True,
}
SESSION_OUTPUTS = {
    "__provider": "old-blob",
    "model_resources_id": "mr-1",
    "lora_config": {"rank": 16.0},
    "display_name": "run",
    "metadata": {"wandb": {"project": "p"}},
    "status": "RUNNING",
    "step": 12.0,
    "effective_lora_config": {"rank": 16.0, "alpha": 64.0, "dropout": 0.0, "train_unembed": True},
}


@pytest.fixture(autouse=True)
def no_http(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("diff must not make API calls")

    monkeypatch.setattr(process, "api_client", refuse)


def resource_diff(**news):
    inputs = {"__provider": "new-blob", "base_model": MODEL, "base_weights_ref": "together://ml_abc"}
    inputs["inactive_timeout"] = 3600
    return _ModelResourceProvider().diff("mr-1", RESOURCE_OUTPUTS, {**inputs, **news})


def session_diff(**news):
    inputs = {"__provider": "new-blob", "model_resources_id": "mr-1", "lora_config": {"rank": 16}}
    inputs.update(display_name="run", metadata={"wandb": {"project": "p"}})
    inputs.update(news)
    return _TrainingSessionProvider().diff(
        "ts-1", SESSION_OUTPUTS, {k: v for k, v in inputs.items() if v is not None}
    )


def test_server_filled_values_and_a_new_provider_blob_do_not_diff():
    result = resource_diff()
    assert result.changes is False and result.replaces == []


def test_every_api_input_of_a_model_resource_replaces_it_delete_first():
    result = resource_diff(base_model="Qwen/Qwen3-0.6B", compute_config={"gpu_type": "B200-SXM"})
    assert result.changes is True
    assert result.replaces == ["base_model", "compute_config"]
    assert result.delete_before_replace is True


def test_provider_options_alone_update_in_place():
    result = resource_diff(create_timeout=60, delete_timeout=30, force_stop=True, adopt_id="mr-1")
    assert result.changes is True and result.replaces == []


def test_an_unknown_value_is_a_change_and_replaces_if_immutable():
    result = resource_diff(base_model=Unknown())
    assert result.changes is True and result.replaces == ["base_model"]
    result = session_diff(display_name=Unknown())
    assert result.changes is True and result.replaces == []
    result = session_diff(lora_config={"rank": Unknown()})
    assert result.replaces == ["lora_config"]


def test_unchanged_session_does_not_diff():
    result = session_diff()
    assert result.changes is False and result.replaces == []


def test_display_name_and_metadata_update_a_session_in_place():
    result = session_diff(display_name="renamed", metadata={"wandb": {"project": "p", "group": "g"}})
    assert result.changes is True and result.replaces == []


def test_removing_metadata_is_a_change_but_an_empty_one_is_not():
    assert session_diff(metadata=None).changes is True
    empty = _TrainingSessionProvider().diff(
        "ts-1",
        {**SESSION_OUTPUTS, "metadata": {}},
        {"model_resources_id": "mr-1", "lora_config": {"rank": 16}, "display_name": "run"},
    )
    assert empty.changes is False


def test_new_lora_rank_or_resource_replaces_the_session_delete_first():
    result = session_diff(lora_config={"rank": 32}, model_resources_id="mr-2")
    assert result.replaces == ["model_resources_id", "lora_config"] and result.delete_before_replace is True


def test_server_default_lora_settings_do_not_diff():
    # effective_lora_config holds alpha/dropout the user never set: only lora_config is compared.
    assert session_diff(lora_config={"rank": 16}).changes is False


def test_switching_the_optimizer_replaces_even_between_empty_configs():
    olds = {**RESOURCE_OUTPUTS, "optimizer_config": {"adam": {}}}
    news = {"base_model": MODEL, "base_weights_ref": "together://ml_abc", "inactive_timeout": 3600}
    result = _ModelResourceProvider().diff("mr-1", olds, {**news, "optimizer_config": {"muon": {}}})
    assert result.replaces == ["optimizer_config"]
    assert (
        _ModelResourceProvider().diff("mr-1", olds, {**news, "optimizer_config": {"adam": {}}}).changes
        is False
    )
