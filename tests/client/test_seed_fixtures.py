"""The published example payloads (tests/fixtures/, copied from the API reference) parse with our wire models."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from pulumi_together_rl.client.errors import error_from_response
from pulumi_together_rl.client.models import (
    ErrorEnvelope,
    TrainingSession,
    TrainingSessionErrorCode,
    TrainingSessionList,
    TrainingSessionStatus,
    TrainingSessionUpdateRequest,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

#: Which wire model parses each fixture. Every JSON file in tests/fixtures/ must be listed.
MODELS = {
    "seed0_stop_training_session_response.json": TrainingSession,
    "seed1_get_training_session_response.json": TrainingSession,
    "seed2_update_training_session_request.json": TrainingSessionUpdateRequest,
    "seed2_update_training_session_response.json": TrainingSession,
    "seed3_list_training_sessions_response.json": TrainingSessionList,
    "seed4_stop_training_session_response.json": TrainingSession,
    "seed4_error_response.json": ErrorEnvelope,
}


def load(name: str):
    return json.loads((FIXTURES / name).read_text())


def test_every_fixture_has_a_model():
    assert sorted(p.name for p in FIXTURES.glob("*.json")) == sorted(MODELS)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_fixture_parses_and_keeps_every_field(name):
    payload = load(name)
    parsed = MODELS[name].model_validate(payload)
    # Nothing is lost: unknown fields are kept, so every top-level key survives a round trip.
    assert set(parsed.model_dump(exclude_unset=True)) == set(payload)


def test_newest_session_example_turns_int64_strings_into_ints():
    session = TrainingSession.model_validate(load("seed4_stop_training_session_response.json"))
    assert session.status is TrainingSessionStatus.RUNNING
    assert session.step == 100
    assert session.lora_config.seed == 59
    assert (
        session.policy_state.trainer_step,
        session.policy_state.target_weights_version,
        session.policy_state.applied_weights_version,
        session.policy_state.pending_publish,
    ) == (7, 7, 6, True)
    assert session.training_checkpoints[0].step == 42
    assert session.inference_checkpoints[0].step == 42
    assert session.inference_checkpoints[0].registration == {
        "model": {"id": "ml_abc123", "revision_id": "rv_def456"},
        "adapter": {"id": "ml_abc123", "revision_id": "rv_def456"},
    }
    assert session.error.code == TrainingSessionErrorCode.RESOURCE_AT_CAPACITY
    assert session.created_at == datetime(2026, 1, 2, tzinfo=timezone.utc)
    assert session.metadata.wandb.run_name == "exp2-thinking-4k-ctx"
    assert session.base_model == "Qwen/Qwen3.5-4B"


def test_schema_sample_keeps_placeholder_int64_text():
    listing = TrainingSessionList.model_validate(load("seed3_list_training_sessions_response.json"))
    session = listing.data[0]
    assert session.step == 0  # "0"
    assert session.lora_config.seed == "string"  # not numeric: kept as text, not rejected
    assert session.inference_checkpoints[0].step == "string"
    assert listing.meta.next_cursor == "string"
    assert listing.meta.has_more is True


def test_older_examples_without_status_or_base_model_still_parse():
    for name in ("seed0_stop_training_session_response.json", "seed1_get_training_session_response.json"):
        session = TrainingSession.model_validate(load(name))
        assert session.status is TrainingSessionStatus.UNSPECIFIED
        assert session.base_model is None
        assert session.error.code is None
        assert session.error.message.startswith("The session could not start")
        assert session.lora_config.rank == 32
    old = TrainingSession.model_validate(load("seed1_get_training_session_response.json"))
    assert old.inference_checkpoints[0].registration["model_name"].startswith("username/")


def test_update_request_example_round_trips_to_the_same_body():
    payload = load("seed2_update_training_session_request.json")
    assert TrainingSessionUpdateRequest.model_validate(payload).to_wire() == payload


def test_error_example_maps_to_an_api_error():
    payload = load("seed4_error_response.json")
    envelope = ErrorEnvelope.model_validate(payload)
    assert (envelope.error.param, envelope.error.code) == (None, None)
    err = error_from_response(404, payload, method="GET", path="/v1/rl/training-sessions/x")
    assert (err.status, err.message, err.type, err.code, err.param) == (
        404,
        "<string>",
        "<string>",
        None,
        None,
    )
