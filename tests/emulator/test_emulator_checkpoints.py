"""Training bookkeeping in the emulator: a RUNNING session advanced by N steps (control API) reports its step and
policy state, the checkpoints it saves are embedded in it and answer ``GET /v1/rl/checkpoints[/{id}]`` (newest
first, filters, cursor), every body valid for the official SDK's models; the client reads them all."""

from __future__ import annotations

from typing import Any

import pytest
from emulator_helpers import SESSIONS, SMALL_MODEL
from test_conformance_sdk import _validate
from together.types.post_training import Session
from together.types.post_training.checkpoint import Checkpoint
from together.types.post_training.checkpoints_list_response import CheckpointsListResponse

from pulumi_together_rl.client import TogetherRL
from pulumi_together_rl.client.models import CheckpointType
from pulumi_together_rl.emulator.control import EmulatorControlError

CHECKPOINTS = "/v1/rl/checkpoints"


def _running(api: Any, rank: int = 8) -> dict[str, Any]:
    resource = api.ready_resource()
    session = api.session(resource["id"], lora_config={"rank": rank})
    got = api.get_session(session["id"])
    assert got["status"] == "TRAINING_SESSION_STATUS_RUNNING", got
    return got


def test_advance_moves_the_step_and_policy_state_and_checkpoints_are_embedded(api, emulator):
    session = _running(api)
    emulator.control.advance_session(session["id"], 40)
    first = emulator.control.save_checkpoint(session["id"], "training")
    emulator.control.advance_session(session["id"], 60)
    served = emulator.control.save_checkpoint(session["id"], "inference")
    early = emulator.control.save_checkpoint(session["id"], "training", step=20)

    got = api.get_session(session["id"])
    _validate(Session, got)
    assert got["step"] == "100" and got["policy_state"]["trainer_step"] == "100"
    assert [(c["id"], c["step"]) for c in got["training_checkpoints"]] == [
        (first["id"], "40"),
        (early["id"], "20"),
    ]
    assert [(c["id"], c["step"]) for c in got["inference_checkpoints"]] == [(served["id"], "100")]
    assert first["type"] == "CHECKPOINT_TYPE_TRAINING" and first["lora_rank"] == 8
    assert first["base_model"] == SMALL_MODEL and first["session_id"] == session["id"]


def test_the_checkpoint_endpoints_answer_as_documented_and_as_the_sdk_reads_them(api, emulator):
    one, other = _running(api, rank=8), _running(api, rank=16)
    made = []
    for session, kind in ((one, "training"), (other, "training"), (one, "inference"), (one, "training")):
        emulator.control.advance_session(session["id"], 10)
        made.append(emulator.control.save_checkpoint(session["id"], kind))

    listed = api.ok("GET", CHECKPOINTS)
    _validate(CheckpointsListResponse, listed)
    assert [c["id"] for c in listed["data"]] == [c["id"] for c in reversed(made)]  # newest first
    mine = api.ok("GET", CHECKPOINTS, params={"session_id": one["id"], "type": "CHECKPOINT_TYPE_TRAINING"})
    assert [c["id"] for c in mine["data"]] == [made[3]["id"], made[0]["id"]]
    page = api.ok("GET", CHECKPOINTS, params={"limit": 2})
    assert page["meta"]["has_more"] is True and len(page["data"]) == 2
    rest = api.ok("GET", CHECKPOINTS, params={"limit": 2, "after": page["meta"]["next_cursor"]})
    assert [c["id"] for c in page["data"] + rest["data"]] == [c["id"] for c in reversed(made)]
    one_ckpt = api.ok("GET", f"{CHECKPOINTS}/{made[0]['id']}")
    _validate(Checkpoint, one_ckpt)
    assert one_ckpt == made[0]
    api.error("GET", f"{CHECKPOINTS}/ckpt-nope", 404)
    api.error("GET", CHECKPOINTS, 400, params={"type": "CHECKPOINT_TYPE_NOPE"})

    with TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url) as client:
        every = list(client.iter_checkpoints(page_size=1))
        assert [c.id for c in every] == [c["id"] for c in reversed(made)]
        trained = list(client.iter_checkpoints(base_model=SMALL_MODEL, type=CheckpointType.TRAINING))
        assert len(trained) == 3 and all(c.type is CheckpointType.TRAINING for c in trained)
        got = client.get_checkpoint(made[2]["id"])
        assert (got.type, got.step, got.session_id, got.lora_rank) == (
            CheckpointType.INFERENCE,
            20,
            one["id"],
            8,
        )
        session = client.get_training_session(one["id"])
        assert session.step == 30 and [c.step for c in session.training_checkpoints] == [10, 30]


def test_only_a_running_session_trains_or_saves(api, emulator):
    session = _running(api)
    api.ok("POST", f"{SESSIONS}/{session['id']}/stop")
    with pytest.raises(EmulatorControlError) as refused:
        emulator.control.advance_session(session["id"], 1)
    assert refused.value.status == 409
    with pytest.raises(EmulatorControlError):
        emulator.control.save_checkpoint(session["id"], "training")
    with pytest.raises(EmulatorControlError) as bad:
        emulator.control.save_checkpoint(_running(api)["id"], "weights")
    assert bad.value.status == 400
