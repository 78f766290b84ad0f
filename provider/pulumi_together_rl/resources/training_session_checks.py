"""What ``check`` judges of a training session: the inputs' shapes and bounds (the validated-inputs model, with
a hint per field), then, for a new session or a replacing change, the model resource exists and is active
(``model_resources_id``), or, given as ``model_resource`` and new in the same change, its declared inputs; LoRA
settings only on a LoRA resource; rank within the model's ``max_rank`` on its GPU type; ``adopt_id`` names a
CREATING/RUNNING session with the declared settings. A 404 is a failure naming the field; no key, or an API that
cannot be asked: warn and skip (:func:`.process.remote_check`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import Field, Strict, StrictBool, StrictFloat, StrictStr, StringConstraints, field_validator

from ..client import errors
from ..client.collections import MODEL_RESOURCES
from ..client.models import RESOURCE_GONE, CheckpointType
from . import checks, deadline, process
from .inputs import (
    ID_MAX,
    NO_CONTROL_CHARACTERS,
    Failure,
    Id,
    Name,
    PathId,
    StrictInputs,
    WholeInt,
    answers_the_input,
    id_prefix,
    is_unknown,
    refused_at_check,
    validate_inputs,
)
from .keys import DISPLAY_NAME_MAX, SPEC_KEY
from .secrecy import hiding_check
from .training_session_schema import REPLACE_ON_CHANGES, TRAINING_SESSION

KIND = "training session"
PATH = "/v1/rl/training-sessions"
_RESOURCES = "/v1/rl/model-resources"
_CHECKPOINTS = "/v1/rl/checkpoints"
REMOTE_CHECK_KEYS = (*REPLACE_ON_CHANGES, SPEC_KEY)
"""A new session, or a change of one of these, asks the API again."""


@hiding_check
def check(olds: Mapping[str, Any], news: Mapping[str, Any]) -> tuple[dict[str, Any], list[Failure]]:
    """(checked inputs, failures): the shapes, then what the API says (see the module docstring)."""
    inputs, failures = validate_inputs(Inputs, news, required=("model_resources_id",), hints=HINTS)
    if not failures:
        failures = _check_remote(olds, inputs)
    if not failures:
        subject = inputs.get("display_name") or inputs.get("model_resources_id")
        failures = checks.deadline(KIND, subject, olds, inputs)
    return inputs, failures


_SEED_LIMIT = 2**53  # Pulumi's wire carries numbers as doubles: beyond this, integers lose precision
# Pulumi carries any double, inf included, and a timeout reaches a wait: each is finite and bounded.
_TIMEOUT_MAX = 24 * 3600  # 86400 s: a session starts (or stops) in minutes; a day is plenty for either
_DisplayName = Annotated[str, Strict(), StringConstraints(max_length=DISPLAY_NAME_MAX), NO_CONTROL_CHARACTERS]


class _LoraConfig(StrictInputs):
    rank: WholeInt | None = Field(None, ge=1, le=64)
    alpha: WholeInt | None = Field(None, ge=1, le=128)
    dropout: StrictFloat | None = Field(None, ge=0, lt=1, allow_inf_nan=False)
    seed: WholeInt | None = Field(None, ge=-_SEED_LIMIT, le=_SEED_LIMIT)
    train_unembed: StrictBool | None = None


class _Wandb(StrictInputs):
    entity: Name | None = None
    project: Name | None = None
    group: Name | None = None
    run_id: Name | None = None
    run_name: Name | None = None
    url: Name | None = None

    @field_validator("url")
    @classmethod
    def _https(cls, value: str | None) -> str | None:
        if value and (urlsplit(value).scheme != "https" or not urlsplit(value).netloc):
            raise ValueError("must be an https:// URL")
        return value


class _Metadata(StrictInputs):
    wandb: _Wandb | None = None


class _ResourceSpec(StrictInputs):
    """The declared inputs of the model resource given as ``model_resource`` (validated by its own check)."""

    base_model: StrictStr | None = None
    compute_config: dict[str, Any] | None = None
    lora_enabled: StrictBool | None = None


class Inputs(StrictInputs):
    """Validated inputs of a training session (what ``check`` returns, normalised)."""

    model_resources_id: PathId | None = None
    lora_config: _LoraConfig | None = None
    resume_from_checkpoint_id: Id | None = None
    load_optimizer: StrictBool | None = None
    display_name: _DisplayName | None = None
    metadata: _Metadata | None = None
    create_timeout: StrictFloat | None = Field(None, gt=0, le=_TIMEOUT_MAX, allow_inf_nan=False)
    delete_timeout: StrictFloat | None = Field(None, gt=0, le=_TIMEOUT_MAX, allow_inf_nan=False)
    adopt_id: PathId | None = None
    model_resource_spec: _ResourceSpec | None = None
    stop_after: deadline.StopAfter | None = None


HINTS = {
    "stop_after": deadline.HINT,
    "model_resources_id": "Set model_resource=ModelResource(...) for a resource of this program, or "
    f"model_resources_id to the id of one made elsewhere (at most {ID_MAX} characters)",
    "lora_config": "lora_config takes rank, alpha, dropout, seed and train_unembed",
    "lora_config.rank": "Use a whole number from 1 to 64 (and at most the model's max_rank)",
    "lora_config.alpha": "Use a whole number from 1 to 128",
    "lora_config.dropout": "Use a number from 0 up to (not including) 1",
    "lora_config.seed": "Use a whole number from -2**53 to 2**53: Pulumi carries numbers as doubles, which "
    "cannot hold larger integers exactly",
    "lora_config.train_unembed": "Use true or false",
    "resume_from_checkpoint_id": f"Use a checkpoint id (at most {ID_MAX} characters), or leave it unset",
    "load_optimizer": "Use true or false",
    "display_name": 'Use a name of at most 128 characters, or "" for none',
    "metadata": "metadata takes a wandb object",
    "metadata.wandb": "wandb takes entity, project, group, run_id, run_name and url (all strings)",
    **{
        f"metadata.wandb.{key}": f"Use the W&B {key.replace('_', ' ')} as plain text, or leave it unset"
        for key in ("entity", "project", "group", "run_id", "run_name")
    },
    "metadata.wandb.url": "Use the https:// URL of the W&B run",
    "create_timeout": f"Use a number of seconds greater than 0 and at most {_TIMEOUT_MAX} (1 day); the default "
    "is 1800",
    "delete_timeout": f"Use a number of seconds greater than 0 and at most {_TIMEOUT_MAX} (1 day); the default "
    "is 600",
    "adopt_id": f"Use the id of an existing training session (at most {ID_MAX} characters), or leave adopt_id "
    "unset",
}


def _check_remote(olds: Mapping[str, Any], inputs: dict[str, Any]) -> list[Failure]:
    """The remote part of check, for a new session or a replacing change: the model resource exists and is
    active (or, created in the same change, its declared inputs), LoRA only on a LoRA resource, rank within the
    model's ``max_rank``, and ``adopt_id`` names an active session on that resource with the same settings."""
    if not process.needs_remote_check(olds, inputs, REMOTE_CHECK_KEYS):
        return []
    adopt_id = inputs.get("adopt_id")
    # Warnings name the session; an adopt_id only by its first characters (it is the user's, maybe mistyped).
    ident = inputs.get("display_name") or (id_prefix(adopt_id) if isinstance(adopt_id, str) else "new")
    return process.remote_check(KIND, ident, lambda client: _ask(client, inputs)) or []


def _ask(client: Any, inputs: Mapping[str, Any]) -> list[Failure]:
    resource_id = inputs.get("model_resources_id")
    if isinstance(resource_id, str) and not is_unknown(resource_id):
        # The id is quoted by its first characters only (id_prefix), the request with a placeholder for it.
        quoted = id_prefix(resource_id)
        try:
            live = process.lookup(client, MODEL_RESOURCES, resource_id)
        except errors.NotFound:
            return [Failure("model_resources_id", f"no model resource {quoted} exists (GET "
                                 f"{_RESOURCES}/<model_resources_id> answered 404). "
                                 f"{HINTS['model_resources_id']}")]  # fmt: skip
        except errors.ApiError as exc:
            if not answers_the_input(exc):
                raise
            return [refused_at_check("model_resources_id", f"GET {_RESOURCES}/<model_resources_id>", exc,
                                     "Check model_resources_id (the id of an existing model resource), or use "
                                     "model_resource=ModelResource(...) for one of this program")]  # fmt: skip
        if live.status in RESOURCE_GONE:
            return [Failure("model_resources_id", f"model resource {quoted} is {live.status.short}: "
                                 "no session can start on it. Point it at an active resource, or create one "
                                 "with model_resource=ModelResource(...)")]  # fmt: skip
        where = f"model resource {quoted}"
        facts = {"base_model": live.base_model, "lora_enabled": live.lora_enabled,
                 "gpu_type": live.compute_config.gpu_type.value if live.compute_config.gpu_type else None}  # fmt: skip
    else:
        spec = inputs.get(SPEC_KEY) or {}
        declared = spec.get("compute_config")
        compute = declared if isinstance(declared, dict) else {}
        where = "the model resource given as model_resource"
        facts = {"base_model": spec.get("base_model"), "lora_enabled": spec.get("lora_enabled", True),
                 "gpu_type": compute.get("gpu_type")}  # fmt: skip
    failures = _check_lora(client, inputs.get("lora_config"), facts, where)
    if not failures:
        failures = _check_resume(client, inputs, facts, where)
    adopt_id = inputs.get("adopt_id")
    if not failures and isinstance(adopt_id, str):
        failures = _check_adoptable(client, adopt_id, inputs, facts)
    return failures


def _check_lora(client: Any, lora: Any, facts: Mapping[str, Any], where: str) -> list[Failure]:
    """LoRA settings only on a LoRA resource, and a rank within the model's ``max_rank`` on its GPU type."""
    if not isinstance(lora, dict):
        return []
    if facts["lora_enabled"] is False:
        return [Failure("lora_config", f"{where} is full-weight (lora_enabled=false). Remove lora_config, "
                                            "or use a LoRA model resource")]  # fmt: skip
    rank, base_model = lora.get("rank"), facts["base_model"]
    if not isinstance(rank, int) or not isinstance(base_model, str) or is_unknown(base_model):
        return []
    try:
        models = process.supported_models(client)
    except errors.ApiError as exc:
        if not answers_the_input(exc):
            raise
        return [refused_at_check("lora_config.rank", "GET /v1/rl/supported-models", exc, "Check "
                                 "together:baseUrl / TOGETHER_BASE_URL: it must be the Together API (the "
                                 "default, https://api.together.ai), then run the command again")]  # fmt: skip
    model = next((m for m in models.data if m.base_model == base_model), None)
    if model is None:  # the model resource's own check says so
        return []
    gpu = facts["gpu_type"] if isinstance(facts["gpu_type"], str) else None
    gpu = gpu or (model.default_gpu_type.value if model.default_gpu_type else None)
    offer = next((c for c in model.compute_configs if c.gpu_type.value == gpu), None)
    lora_offer = offer.trainer_config.lora if offer and offer.trainer_config else None
    max_rank = lora_offer.max_rank if lora_offer else None
    if max_rank is not None and rank > max_rank:
        return [Failure("lora_config.rank", f"rank {rank} exceeds the max_rank {max_rank} of {base_model} "
                                                 f"on {gpu}. Use a rank of at most {max_rank}")]  # fmt: skip
    return []


def _check_resume(
    client: Any, inputs: Mapping[str, Any], facts: Mapping[str, Any], where: str
) -> list[Failure]:
    """``resume_from_checkpoint_id`` against the checkpoint itself (``GET /v1/rl/checkpoints/{id}``): it exists,
    ``load_optimizer`` suits its type, it was trained from the resource's base model, its LoRA rank fits."""
    ident = inputs.get("resume_from_checkpoint_id")
    if not isinstance(ident, str) or is_unknown(ident):
        return []
    quoted = id_prefix(ident)
    try:
        ckpt = client.get_checkpoint(ident)
    except errors.NotFound:
        return [Failure("resume_from_checkpoint_id", f"no checkpoint {quoted} exists (GET {_CHECKPOINTS}/<id> "
                        f"answered 404). Use the id of one of your account's checkpoints (GET {_CHECKPOINTS} "
                        "lists them), or leave it unset")]  # fmt: skip
    except errors.ApiError as exc:
        if not answers_the_input(exc):
            raise
        return [refused_at_check("resume_from_checkpoint_id", f"GET {_CHECKPOINTS}/<id>", exc,
                                 "Check resume_from_checkpoint_id, or leave it unset")]  # fmt: skip
    if ckpt.type == CheckpointType.INFERENCE and inputs.get("load_optimizer") is True:
        return [Failure("load_optimizer", f"checkpoint {quoted} is an inference checkpoint, which holds no "
                        "optimizer state. Set load_optimizer to false (or leave it unset), or resume from a "
                        "training checkpoint")]  # fmt: skip
    base_model = facts["base_model"]
    if (
        isinstance(base_model, str)
        and not is_unknown(base_model)
        and ckpt.base_model not in (None, base_model)
    ):
        return [Failure("resume_from_checkpoint_id", f"checkpoint {quoted} was trained from {ckpt.base_model}, "
                        f"but {where} runs {base_model}. Resume from a checkpoint of {base_model}, or run the "
                        f"session on a model resource of {ckpt.base_model}")]  # fmt: skip
    if ckpt.lora_rank is not None and facts["lora_enabled"] is False:
        return [Failure("resume_from_checkpoint_id", f"checkpoint {quoted} is a LoRA checkpoint (rank "
                        f"{ckpt.lora_rank}), but {where} is full-weight. Resume it on a LoRA model resource")]  # fmt: skip
    lora = inputs.get("lora_config")
    rank = lora.get("rank") if isinstance(lora, dict) else None
    if ckpt.lora_rank is not None and isinstance(rank, int) and rank != ckpt.lora_rank:
        return [Failure("lora_config.rank", f"rank {rank} does not fit checkpoint {quoted}, a LoRA adapter of "
                        f"rank {ckpt.lora_rank}. Set lora_config.rank to {ckpt.lora_rank}, or resume from "
                        "another checkpoint")]  # fmt: skip
    return []


def _check_adoptable(
    client: Any, adopt_id: str, inputs: Mapping[str, Any], facts: Mapping[str, Any]
) -> list[Failure]:
    """``adopt_id`` names a CREATING/RUNNING session on the declared resource, created with these settings."""

    def declared(live: Any) -> tuple[Mapping[str, Any], list[Failure]]:
        compared = dict(inputs)
        if is_unknown(compared.get("model_resources_id")):  # a resource of this change: compare its model
            compared["model_resources_id"] = live.model_resources_id
            if isinstance(facts["base_model"], str) and facts["base_model"] != live.base_model:
                return compared, [Failure("adopt_id", f"training session {id_prefix(adopt_id)} runs on another "
                                          "base model than the model resource given as model_resource. Remove "
                                          "adopt_id, or adopt it onto its own model resource")]  # fmt: skip
        return compared, []

    return checks.adoptable(TRAINING_SESSION, client, adopt_id, inputs, declared=declared)
