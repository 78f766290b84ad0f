"""check: local validation, one CheckFailure per bad field, unknowns skipped, numbers normalised.

The remote part is switched off by the lack of an API key (it then warns and skips), so no HTTP happens here;
the remote checks themselves are covered against the emulator in tests/resources.
"""

from __future__ import annotations

import re

import pytest
from pulumi.output import Unknown

from pulumi_together_rl import config
from pulumi_together_rl.resources import process
from pulumi_together_rl.resources.model_resource import _ModelResourceProvider
from pulumi_together_rl.resources.training_session import _TrainingSessionProvider

MODEL = "Qwen/Qwen3.5-4B"


@pytest.fixture(autouse=True)
def no_api(monkeypatch):
    monkeypatch.delenv("TOGETHER_API_KEY", raising=False)
    config.reset()
    process.clear_caches()


def failures(result):
    return {f.property: f.reason for f in result.failures}


def test_every_bad_model_resource_field_gets_its_own_failure():
    result = _ModelResourceProvider().check(
        {},
        {
            "base_model": MODEL,
            "base_weights_ref": "s3://bucket/weights",
            "compute_config": {"gpu_type": "A100", "num_generator_replicas": -1},
            "lora_enabled": "yes",
            "optimizer_config": {"adam": {}, "muon": {}},
            "inactive_timeout": 60,
            "create_timeout": 0,
            "delete_timeout": -5,
            "force_stop": 1,
            "colour": "blue",
        },
    )
    assert set(failures(result)) == {
        "base_weights_ref",
        "compute_config.gpu_type",
        "compute_config.num_generator_replicas",
        "lora_enabled",
        "optimizer_config",
        "inactive_timeout",
        "create_timeout",
        "delete_timeout",
        "force_stop",
        "colour",
    }


def test_failure_reasons_say_what_to_do():
    reasons = failures(_ModelResourceProvider().check({}, {"base_model": MODEL, "inactive_timeout": 100000}))
    assert reasons["inactive_timeout"] == (
        "inactive_timeout: input should be less than or equal to 86400 (got 100000). "
        "Use a whole number of seconds from 300 to 86400 (the API default is 3600)"
    )
    reasons = failures(_ModelResourceProvider().check({}, {}))
    assert reasons["base_model"].startswith("base_model is required. Set base_model to a model listed by")


def test_every_bad_session_field_gets_its_own_failure():
    result = _TrainingSessionProvider().check(
        {},
        {
            "model_resources_id": "mr-1",
            "lora_config": {"rank": 65, "alpha": 0, "dropout": 1.0, "seed": 1.5, "train_unembed": "no"},
            "display_name": "x" * 129,
            "metadata": {"wandb": {"url": "http://wandb.ai/run", "project": 7, "colour": "x"}},
            "load_optimizer": "true",
        },
    )
    assert set(failures(result)) == {
        "lora_config.rank",
        "lora_config.alpha",
        "lora_config.dropout",
        "lora_config.seed",
        "lora_config.train_unembed",
        "display_name",
        "metadata.wandb.url",
        "metadata.wandb.project",
        "metadata.wandb.colour",
        "load_optimizer",
    }
    assert "https" in failures(result)["metadata.wandb.url"]


def test_missing_required_session_input_fails():
    assert set(failures(_TrainingSessionProvider().check({}, {"display_name": "s"}))) == {
        "model_resources_id"
    }


def test_unknown_values_at_preview_are_skipped_and_kept():
    unknown_id, unknown_rank = Unknown(), Unknown()
    news = {
        "__provider": "blob",
        "model_resources_id": unknown_id,
        "lora_config": {"rank": unknown_rank, "alpha": 16.0},
        "display_name": "s",
    }

    result = _TrainingSessionProvider().check({}, news)

    assert result.failures == []
    assert result.inputs["model_resources_id"] is unknown_id
    assert result.inputs["lora_config"] == {"rank": unknown_rank, "alpha": 16}
    assert "__provider" not in result.inputs


def test_unknown_required_model_resource_input_is_not_missing():
    result = _ModelResourceProvider().check({}, {"base_model": Unknown(), "compute_config": Unknown()})
    assert result.failures == []


def test_floats_from_the_wire_come_back_as_ints():
    result = _ModelResourceProvider().check(
        {},
        {"base_model": MODEL, "compute_config": {"num_generator_replicas": 2.0}, "inactive_timeout": 600.0},
    )
    assert result.failures == []
    assert result.inputs["compute_config"] == {"num_generator_replicas": 2}
    assert type(result.inputs["compute_config"]["num_generator_replicas"]) is int
    assert type(result.inputs["inactive_timeout"]) is int
    session = _TrainingSessionProvider().check(
        {}, {"model_resources_id": "mr", "lora_config": {"rank": 32.0}}
    )
    assert type(session.inputs["lora_config"]["rank"]) is int


def test_check_output_round_trips():
    news = {
        "base_model": MODEL,
        "base_weights_ref": "together://ml_abc",
        "optimizer_config": {"muon": {"scaling_strategy": "MUON_SCALING_STRATEGY_ORIGINAL"}},
        "create_timeout": 60.0,
        "adopt_id": "mr-1",
    }
    once = _ModelResourceProvider().check({}, news)
    twice = _ModelResourceProvider().check({}, once.inputs)
    assert once.failures == [] and once.inputs == twice.inputs
    assert once.inputs["optimizer_config"] == {"muon": {"scaling_strategy": "MUON_SCALING_STRATEGY_ORIGINAL"}}


def test_without_a_key_the_remote_check_is_skipped_with_a_warning(capsys):
    result = _ModelResourceProvider().check({}, {"base_model": "Acme/NotAModel"})
    assert result.failures == []
    err = capsys.readouterr().err
    assert "warning" in err and "no Together API key" in err


def test_adam_takes_no_settings():
    reasons = failures(
        _ModelResourceProvider().check({}, {"base_model": MODEL, "optimizer_config": {"adam": {"lr": 0.1}}})
    )
    assert set(reasons) == {"optimizer_config.adam.lr"}
    assert "use {}" in reasons["optimizer_config.adam.lr"]
    ok = _ModelResourceProvider().check({}, {"base_model": MODEL, "optimizer_config": {"adam": {}}})
    assert ok.failures == [] and ok.inputs["optimizer_config"] == {"adam": {}}


def test_the_legacy_muon_scaling_strategy_spelling_is_rejected():
    news = {
        "base_model": MODEL,
        "optimizer_config": {"muon": {"scaling_strategy": "MUON_SCALING_STRATEGY_MATCH_ADAMW"}},
    }
    reasons = failures(_ModelResourceProvider().check({}, news))
    assert set(reasons) == {"optimizer_config.muon.scaling_strategy"}
    assert "MUON_SCALING_STRATEGY_MATCH_ADAM," in reasons["optimizer_config.muon.scaling_strategy"]
    for strategy in ("MATCH_ADAM", "ORIGINAL", "UNSPECIFIED"):
        news["optimizer_config"]["muon"]["scaling_strategy"] = f"MUON_SCALING_STRATEGY_{strategy}"
        assert _ModelResourceProvider().check({}, news).failures == []


@pytest.mark.parametrize("seed", [2**53 + 2, -(2**53) - 2, 1e17])
def test_a_lora_seed_beyond_what_a_double_holds_is_rejected(seed):
    news = {"model_resources_id": "mr-1", "lora_config": {"seed": seed}}
    reasons = failures(_TrainingSessionProvider().check({}, news))
    assert set(reasons) == {"lora_config.seed"}
    assert "doubles" in reasons["lora_config.seed"]


@pytest.mark.parametrize("seed", [0, 2**53, -(2**53), 12345.0])
def test_a_lora_seed_within_what_a_double_holds_is_accepted(seed):
    result = _TrainingSessionProvider().check(
        {}, {"model_resources_id": "mr-1", "lora_config": {"seed": seed}}
    )
    assert result.failures == []


def test_reasons_never_name_internal_classes():
    session = _TrainingSessionProvider().check(
        {},
        {"model_resources_id": "mr-1", "lora_config": "rank 8", "metadata": {"wandb": ["x"]}},
    )
    resource = _ModelResourceProvider().check(
        {},
        {"base_model": MODEL, "compute_config": 3, "optimizer_config": {"muon": "fast", "adam": 1}},
    )
    reasons = failures(session) | failures(resource)
    assert set(reasons) == {
        "lora_config",
        "metadata.wandb",
        "compute_config",
        "optimizer_config.muon",
        "optimizer_config.adam",
    }
    for reason in reasons.values():
        assert not re.search(r"\b_[A-Z]\w*", reason) and "instance of" not in reason, reason
    assert "an object with keys rank, alpha, dropout, seed, train_unembed" in reasons["lora_config"]
    assert "an object with keys entity, project" in reasons["metadata.wandb"]
    assert "an empty object {}" in reasons["optimizer_config.adam"]


def test_an_unknown_gpu_type_is_rejected_locally():
    news = {"base_model": MODEL, "compute_config": {"gpu_type": "A100"}}
    reasons = failures(_ModelResourceProvider().check({}, news))
    assert set(reasons) == {"compute_config.gpu_type"}
    assert "B200-SXM" in reasons["compute_config.gpu_type"]


def test_a_rejected_string_is_never_echoed_only_its_shape():
    from pulumi_together_rl.resources.inputs import shown

    secret = "tk-live-0123456789abcdef0123456789abcdef"
    assert secret not in shown(secret) and shown(secret) == f"a string of {len(secret)} characters"
    assert shown(48) == "48" and shown(True) == "True" and shown(None) == "None"
    assert shown({"a": secret}) == "an object with 1 key" and shown([secret, 2]) == "a list of 2 items"
