"""Conformance with the official SDK (`together` 3.1.1), the oracle for wire shapes.

1. The SDK itself, pointed at the emulator through TOGETHER_BASE_URL, runs a full lifecycle.
   How the SDK builds URLs: its default base URL is ``https://api.together.ai`` (no ``/v1``) and every
   post-training path carries ``/v1/`` (``"/v1/rl/model-resources"``), so TOGETHER_BASE_URL is the emulator's
   base URL as is; the request log below proves the paths arrive as ``/v1/rl/...`` (no doubled ``/v1``).
2. Every response body the emulator produces, fetched raw with httpx in every state, validates with the
   SDK's pydantic models through ``model_validate``. The SDK's own response parsing builds models *without*
   validation (``construct``), so the SDK lifecycle alone would not catch a wrong shape: the explicit
   validation here is what does, and ``test_the_sdk_models_really_validate`` proves it can fail. On top of
   pydantic, ``_validate`` rejects fields the SDK does not know (its models allow extras silently).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import together
from emulator_helpers import (
    BIG_MODEL,
    RESOURCES,
    SESSIONS,
    SMALL_MODEL,
    TRAINER_ONLY_MODEL,
    Api,
)
from pydantic import BaseModel, ValidationError
from together.types.post_training import (
    ModelResources,
    ModelResourcesEstimateCostResponse,
    ModelResourcesListResponse,
    RlSupportedModels,
    Session,
    SessionsListResponse,
)

RESOURCE_STATUSES = {
    "MODEL_RESOURCES_STATUS_PENDING",
    "MODEL_RESOURCES_STATUS_CREATING",
    "MODEL_RESOURCES_STATUS_READY",
    "MODEL_RESOURCES_STATUS_STOPPING",
    "MODEL_RESOURCES_STATUS_STOPPED",
    "MODEL_RESOURCES_STATUS_ERROR",
}
SESSION_STATUSES = {
    "TRAINING_SESSION_STATUS_CREATING",
    "TRAINING_SESSION_STATUS_RUNNING",
    "TRAINING_SESSION_STATUS_STOPPING",
    "TRAINING_SESSION_STATUS_STOPPED",
    "TRAINING_SESSION_STATUS_ERROR",
    "TRAINING_SESSION_STATUS_EXPIRED",
}
WANDB = {
    "entity": "org",
    "project": "p",
    "group": "g",
    "run_id": "r1",
    "run_name": "n",
    "url": "https://wandb.ai/x",
}


def _no_extras(value: Any, where: str) -> None:
    if isinstance(value, BaseModel):
        extra = value.model_extra or {}
        assert not extra, f"{where}: fields unknown to the SDK: {sorted(extra)}"
        for name in type(value).model_fields:
            _no_extras(getattr(value, name), f"{where}.{name}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _no_extras(item, f"{where}[{i}]")


def _validate(model: type[BaseModel], payload: Any) -> BaseModel:
    """Validate with the SDK model (pydantic, strict on types and enums) and reject unknown fields."""
    obj = model.model_validate(payload)
    _no_extras(obj, model.__name__)
    return obj


@pytest.fixture
def sdk(emulator):
    # max_retries=0: the SDK retries 409/429 by default, which would only slow the refusals down.
    client = together.Together(max_retries=0)
    assert str(client.base_url).rstrip("/") == emulator.base_url  # from TOGETHER_BASE_URL, no /v1 added
    yield client
    client.close()


# -------------------------------------------------------------------------------------- 1. the SDK lifecycle


def test_sdk_runs_a_full_lifecycle_against_the_emulator(emulator, sdk):
    emulator.control.configure(timings={"resource_pending": 5, "resource_creating": 5})
    mr_api = sdk.post_training.model_resources
    sessions_api = sdk.post_training.sessions

    models = sdk.post_training.supported_models.get()
    assert SMALL_MODEL in [m.base_model for m in models.data]
    price = mr_api.estimate_cost(base_model=SMALL_MODEL)
    assert price.currency == "USD" and price.price_per_hour > 0

    resource = mr_api.create(
        base_model=SMALL_MODEL, compute_config={"num_generator_replicas": 1}, inactive_timeout=900
    )
    assert resource.status == "MODEL_RESOURCES_STATUS_PENDING"
    assert resource.status_details.queue_position == 1
    emulator.control.advance(11)
    resource = mr_api.retrieve(resource.id)
    assert resource.status == "MODEL_RESOURCES_STATUS_READY"
    assert resource.expires_at is not None
    extended = mr_api.extend_expiry(resource.id, seconds=7200)
    assert extended.expires_at > resource.expires_at

    first = sessions_api.create(
        model_resources_id=resource.id,
        display_name="first",
        lora_config={"rank": 16, "seed": 7},
        metadata={"wandb": WANDB},
    )
    second = sessions_api.create(model_resources_id=resource.id, display_name="second")
    assert first.resources_id == resource.id
    assert first.lora_config is not None and first.lora_config.seed == "7"
    listed = sessions_api.list(
        model_resources_id=resource.id,
        status=["TRAINING_SESSION_STATUS_RUNNING", "TRAINING_SESSION_STATUS_CREATING"],
        limit=1,
    )
    assert listed.data is not None and [s.id for s in listed.data] == [second.id]
    assert listed.meta is not None and listed.meta.has_more and listed.meta.next_cursor == second.id
    rest = sessions_api.list(model_resources_id=resource.id, after=listed.meta.next_cursor)
    assert [s.id for s in rest.data or []] == [first.id]

    updated = sessions_api.update(first.id, display_name="", metadata={"wandb": {"group": "g2", "url": ""}})
    assert updated.display_name is None
    assert updated.metadata.wandb is not None
    assert updated.metadata.wandb.group == "g2" and updated.metadata.wandb.url is None
    assert updated.metadata.wandb.project == "p"

    with pytest.raises(together.ConflictError) as refused:
        mr_api.stop(resource.id)
    assert first.id in str(refused.value) and second.id in str(refused.value)
    with pytest.raises(together.ConflictError):
        mr_api.stop(resource.id, force=False)

    stopping = sessions_api.stop(first.id)
    assert stopping.status == "TRAINING_SESSION_STATUS_STOPPING"
    assert sessions_api.retrieve(first.id).status == "TRAINING_SESSION_STATUS_STOPPED"

    stopped = mr_api.stop(resource.id, force=True)
    assert stopped.status == "MODEL_RESOURCES_STATUS_STOPPING"
    assert sessions_api.retrieve(second.id).status == "TRAINING_SESSION_STATUS_STOPPED"
    assert mr_api.retrieve(resource.id).status == "MODEL_RESOURCES_STATUS_STOPPED"
    mine = mr_api.list(created_by="me", status=["MODEL_RESOURCES_STATUS_STOPPED"])
    assert [r.id for r in mine.data] == [resource.id]

    paths = {(e["method"], e["path"]) for e in emulator.control.requests()}
    assert ("POST", "/v1/rl/model-resources") in paths
    assert ("POST", f"/v1/rl/model-resources/{resource.id}/stop") in paths
    assert all(path.startswith("/v1/rl/") for _, path in paths)
    queries = [
        e["query"] for e in emulator.control.requests() if e["path"] == f"{RESOURCES}/{resource.id}/stop"
    ]
    assert "force=true" in queries and "force=false" in queries


def test_sdk_maps_the_emulators_errors_to_its_exceptions(emulator, sdk):
    with pytest.raises(together.NotFoundError):
        sdk.post_training.model_resources.retrieve("nope")
    with pytest.raises(together.BadRequestError) as bad:
        sdk.post_training.model_resources.create(base_model=SMALL_MODEL, inactive_timeout=10)
    assert bad.value.body["error"]["param"] == "inactive_timeout"  # the SDK keeps the whole envelope
    resource = sdk.post_training.model_resources.create(base_model=SMALL_MODEL, lora_enabled=False)
    sdk.post_training.model_resources.retrieve(resource.id)
    sdk.post_training.sessions.create(model_resources_id=resource.id)
    with pytest.raises(together.RateLimitError):
        sdk.post_training.sessions.create(model_resources_id=resource.id)
    emulator.control.configure(api_key="right")
    with (
        pytest.raises(together.AuthenticationError),
        together.Together(api_key="wrong", max_retries=0) as wrong,
    ):
        wrong.post_training.supported_models.get()


# ------------------------------------------------------------------- 2. every body validates with SDK models


def test_every_model_resource_body_validates_in_every_state(emulator, api: Api):
    control = emulator.control
    control.configure(
        timings={
            "resource_pending": 10,
            "resource_creating": 10,
            "resource_stopping": 10,
            "session_creating": 0,
        }
    )
    bodies: list[dict[str, Any]] = []
    plain = api.resource(inactive_timeout=300)
    bodies.append(plain)  # PENDING, queue_position
    bodies.append(api.resource(base_weights_ref="together://ml_Abc123", lora_enabled=False))
    bodies.append(
        api.resource(
            base_model=BIG_MODEL,
            optimizer_config={"muon": {"scaling_strategy": "MUON_SCALING_STRATEGY_ORIGINAL"}},
        )
    )
    bodies.append(api.resource(base_model=TRAINER_ONLY_MODEL, optimizer_config={"muon": {}}))
    failing = api.resource()
    control.fail_next("model_resource", "MODEL_RESOURCES_ERROR_CODE_CAPACITY_WAIT_TIMEOUT", id=failing["id"])
    control.advance(11)
    bodies.append(api.get_resource(plain["id"]))  # CREATING
    bodies.append(api.get_resource(failing["id"]))  # ERROR
    control.advance(10)
    ready = api.get_resource(plain["id"])
    bodies.append(ready)  # READY, expires_at
    bodies.append(api.ok("POST", f"{RESOURCES}/{plain['id']}/extend-expiry", json={"seconds": 600}))
    bodies.append(api.ok("POST", f"{RESOURCES}/{plain['id']}/stop"))  # STOPPING
    control.advance(10)
    bodies.append(api.get_resource(plain["id"]))  # STOPPED
    listed = api.ok("GET", RESOURCES, params={"limit": 3})
    bodies.extend(control.state()["model_resources"])

    seen = {_validate(ModelResources, body).status for body in bodies}  # type: ignore[attr-defined]
    assert seen == RESOURCE_STATUSES
    _validate(ModelResourcesListResponse, listed)
    _validate(
        ModelResourcesListResponse, api.ok("GET", RESOURCES, params={"after": listed["meta"]["next_cursor"]})
    )
    _validate(
        ModelResourcesListResponse,
        api.ok("GET", RESOURCES, params={"status": "MODEL_RESOURCES_STATUS_READY"}),
    )


def test_every_session_body_validates_in_every_state(emulator, api: Api):
    control = emulator.control
    control.configure(timings={"session_creating": 5, "session_stopping": 5, "resource_stopping": 5})
    lora = api.ready_resource(inactive_timeout=300)["id"]
    full = api.ready_resource(lora_enabled=False)["id"]
    bodies: list[dict[str, Any]] = []
    rich = api.session(
        lora,
        display_name="rich",
        lora_config={"rank": 8, "alpha": 16, "dropout": 0.1, "seed": "42", "train_unembed": False},
        metadata={"wandb": WANDB},
        resume_from_checkpoint_id="ckpt-123",
        load_optimizer=True,
    )
    bodies.append(rich)  # CREATING
    bodies.append(api.session(full))  # no lora_config
    failing = api.session(lora)
    control.fail_next("training_session", "TRAINING_SESSION_ERROR_CODE_SESSION_FAILED", id=failing["id"])
    to_stop = api.session(lora)
    control.advance(6)
    bodies.append(api.get_session(rich["id"]))  # RUNNING
    bodies.append(api.get_session(failing["id"]))  # ERROR
    bodies.append(api.ok("POST", f"{SESSIONS}/{to_stop['id']}/stop"))  # STOPPING
    bodies.append(
        api.ok(
            "PATCH", f"{SESSIONS}/{rich['id']}", json={"display_name": "", "metadata": {"wandb": {"url": ""}}}
        )
    )
    control.advance(6)
    bodies.append(api.get_session(to_stop["id"]))  # STOPPED
    control.advance(400)  # the LoRA resource idles past expires_at
    bodies.append(api.get_session(rich["id"]))  # EXPIRED
    listed = api.ok("GET", SESSIONS, params={"limit": 2})
    bodies.extend(control.state()["training_sessions"])

    seen = {_validate(Session, body).status for body in bodies}  # type: ignore[attr-defined]
    assert seen == SESSION_STATUSES
    _validate(SessionsListResponse, listed)
    _validate(SessionsListResponse, api.ok("GET", SESSIONS, params={"model_resources_id": "none"}))


def test_supported_models_and_estimate_cost_validate(emulator, api: Api):
    models = _validate(RlSupportedModels, api.ok("GET", "/v1/rl/supported-models"))
    assert len(models.data) >= 3  # type: ignore[attr-defined]
    for body in (
        {"base_model": SMALL_MODEL},
        {"base_model": BIG_MODEL, "compute_config": {"num_generator_replicas": 4}},
        {"base_model": TRAINER_ONLY_MODEL, "lora_enabled": False},
    ):
        _validate(ModelResourcesEstimateCostResponse, api.ok("POST", f"{RESOURCES}/estimate-cost", json=body))


def test_the_sdk_models_really_validate(api: Api):
    """The oracle must be able to say no: wrong enum, missing required field, wrong type, unknown field."""
    good = api.ready_resource()
    _validate(ModelResources, good)
    with pytest.raises(ValidationError):
        _validate(ModelResources, {**good, "status": "MODEL_RESOURCES_STATUS_BOGUS"})
    with pytest.raises(ValidationError):
        _validate(ModelResources, {k: v for k, v in good.items() if k != "inactive_timeout"})
    with pytest.raises(ValidationError):
        _validate(ModelResources, {**good, "compute_config": {"num_generator_replicas": "many"}})
    with pytest.raises(AssertionError, match="unknown to the SDK"):
        _validate(ModelResources, {**good, "surprise": 1})
    session = api.session(good["id"])
    with pytest.raises(ValidationError):
        _validate(Session, {k: v for k, v in session.items() if k != "policy_state"})
    with pytest.raises(ValidationError):
        _validate(
            Session,
            {
                **session,
                "error": {"code": "NOT_A_CODE", "message": "m", "occurred_at": "2026-01-01T00:00:00Z"},
            },
        )
    with pytest.raises(ValidationError):
        _validate(RlSupportedModels, {"data": [{"base_model": "m", "default_gpu_type": "TPU"}]})
    with pytest.raises(AssertionError):
        _validate(Session, {**session, "lora_config": {**session["lora_config"], "rnak": 3}})


def test_raw_wire_encodes_int64_fields_as_strings(api: Api):
    rid = api.ready_resource()["id"]
    raw = httpx.post(
        f"{api.http.base_url}{SESSIONS}",
        json={"model_resources_id": rid, "lora_config": {"seed": 123}},
        headers=dict(api.http.headers),
    ).json()
    assert raw["step"] == "0"
    assert raw["lora_config"]["seed"] == "123"
    assert all(
        isinstance(raw["policy_state"][k], str)
        for k in ("trainer_step", "target_weights_version", "applied_weights_version")
    )
    assert isinstance(raw["policy_state"]["pending_publish"], bool)


def test_the_emulators_enums_match_the_sdks():
    """fail-next codes and supported-models GPU types are checked against these tuples: keep them the SDK's."""
    from typing import get_args

    from together.types.post_training import ModelResourcesErrorCode, RlSupportedModel, SessionErrorCode
    from together.types.post_training.rl_supported_model import ComputeConfig

    from pulumi_together_rl.emulator.tables import ERROR_CODES, SUPPORTED_MODEL_GPU_TYPES

    assert set(ERROR_CODES["model_resource"]) == set(get_args(ModelResourcesErrorCode))
    assert set(ERROR_CODES["training_session"]) == set(get_args(SessionErrorCode))
    assert set(SUPPORTED_MODEL_GPU_TYPES) == set(
        get_args(RlSupportedModel.model_fields["default_gpu_type"].annotation)
    )
    assert set(SUPPORTED_MODEL_GPU_TYPES) == set(get_args(ComputeConfig.model_fields["gpu_type"].annotation))
