"""The private helpers of :mod:`.training_session` (everything but its Args, Resource and Provider).

The keys of its inputs and outputs (``_REPLACE_ON_CHANGES`` drives ``diff``), the validated inputs (pydantic,
built in ``check``) with their hints, the remote part of ``check``, the one ``_to_request`` and one
``_to_outputs``, drift of the in-place inputs and the PATCH body, waiting for RUNNING, and ``adopt_id``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pulumi.dynamic import CheckFailure, CreateResult
from pydantic import Field, StrictBool, StrictFloat, StrictStr, field_validator

from .. import config
from ..client.models import (
    SESSION_GONE,
    TrainingSessionCreateRequest,
    TrainingSessionStatus,
    TrainingSessionUpdateRequest,
)
from ..client.models import TrainingSession as WireTrainingSession
from ._base import api_client, remote_check, resource_facts, supported_models
from ._errors import ProviderError, explain
from ._inputs import StrictInputs, WholeInt, canonical, drop_none, iso, pick, short_id
from ._lifecycle import NOT_FOUND_GRACE, get_or_none, wait

KIND = "training session"
_PATH = "/v1/rl/training-sessions"

_REPLACE_ON_CHANGES = ("model_resources_id", "lora_config", "resume_from_checkpoint_id", "load_optimizer")
_UPDATE_IN_PLACE = ("display_name", "metadata", "create_timeout", "delete_timeout", "adopt_id")
_INPUT_KEYS = _REPLACE_ON_CHANGES + _UPDATE_IN_PLACE
_REMOTE_CHECK_KEYS = ("model_resources_id", "lora_config")  # what _check_against_resource looks at
_OUTPUT_KEYS = (
    "status",
    "step",
    "base_model",
    "created_by",
    "created_at",
    "updated_at",
    "error",
    "policy_state",
    "inference_checkpoints",
    "training_checkpoints",
    "effective_lora_config",
)
_WANDB_KEYS = ("entity", "project", "group", "run_id", "run_name", "url")
_DISPLAY_NAME_MAX = 128
_SEED_LIMIT = 2**53  # Pulumi's wire carries numbers as doubles: beyond this, integers lose precision


class _LoraConfig(StrictInputs):
    rank: WholeInt | None = Field(None, ge=1, le=64)
    alpha: WholeInt | None = Field(None, ge=1, le=128)
    dropout: StrictFloat | None = Field(None, ge=0, lt=1)
    seed: WholeInt | None = Field(None, ge=-_SEED_LIMIT, le=_SEED_LIMIT)
    train_unembed: StrictBool | None = None


class _Wandb(StrictInputs):
    entity: StrictStr | None = None
    project: StrictStr | None = None
    group: StrictStr | None = None
    run_id: StrictStr | None = None
    run_name: StrictStr | None = None
    url: StrictStr | None = None

    @field_validator("url")
    @classmethod
    def _https(cls, value: str | None) -> str | None:
        if value and (urlsplit(value).scheme != "https" or not urlsplit(value).netloc):
            raise ValueError("must be an https:// URL")
        return value


class _Metadata(StrictInputs):
    wandb: _Wandb | None = None


class _Inputs(StrictInputs):
    """Validated inputs of a training session (what ``check`` returns, normalised)."""

    model_resources_id: StrictStr | None = Field(None, min_length=1)
    lora_config: _LoraConfig | None = None
    resume_from_checkpoint_id: StrictStr | None = Field(None, min_length=1)
    load_optimizer: StrictBool | None = None
    display_name: StrictStr | None = Field(None, max_length=_DISPLAY_NAME_MAX)
    metadata: _Metadata | None = None
    create_timeout: StrictFloat | None = Field(None, gt=0)
    delete_timeout: StrictFloat | None = Field(None, gt=0)
    adopt_id: StrictStr | None = Field(None, min_length=1)


_HINTS = {
    "model_resources_id": "Set model_resources_id to a model resource id, e.g. ModelResource(...).id",
    "lora_config": "lora_config takes rank, alpha, dropout, seed and train_unembed",
    "lora_config.rank": "Use a whole number from 1 to 64 (and at most the model's max_rank)",
    "lora_config.alpha": "Use a whole number from 1 to 128",
    "lora_config.dropout": "Use a number from 0 up to (not including) 1",
    "lora_config.seed": "Use a whole number from -2**53 to 2**53: Pulumi carries numbers as doubles, which "
    "cannot hold larger integers exactly",
    "lora_config.train_unembed": "Use true or false",
    "resume_from_checkpoint_id": "Use a checkpoint id, or leave it unset",
    "load_optimizer": "Use true or false",
    "display_name": 'Use a name of at most 128 characters, or "" for none',
    "metadata": "metadata takes a wandb object",
    "metadata.wandb": "wandb takes entity, project, group, run_id, run_name and url (all strings)",
    "metadata.wandb.url": "Use the https:// URL of the W&B run",
    "create_timeout": "Use a number of seconds > 0 (default 1800)",
    "delete_timeout": "Use a number of seconds > 0 (default 600)",
    "adopt_id": "Use the id of an existing training session, or leave adopt_id unset",
}


def _check_against_resource(inputs: dict[str, Any]) -> list[CheckFailure]:
    """The remote part of check: LoRA only on LoRA resources, rank within the model's ``max_rank``."""
    resource_id, lora = inputs.get("model_resources_id"), inputs.get("lora_config")
    if not isinstance(resource_id, str) or not isinstance(lora, dict):
        return []
    ident = inputs.get("display_name") or resource_id

    def ask(client: Any) -> tuple[dict[str, Any], Any]:
        facts = resource_facts(client, resource_id)
        return facts, supported_models(client) if isinstance(lora.get("rank"), int) else None

    answer = remote_check(KIND, ident, ask)
    if answer is None:  # skipped, with a warning: no key, or the API cannot be asked
        return []
    facts, models = answer
    if not facts["lora_enabled"]:
        return [CheckFailure("lora_config", f"model resource {resource_id} is full-weight (lora_enabled=false). "
                                            "Remove lora_config, or use a LoRA model resource")]  # fmt: skip
    model = next((m for m in models.data if m.base_model == facts["base_model"]), None) if models else None
    offer = (
        next((c for c in model.compute_configs if c.gpu_type.value == facts["gpu_type"]), None)
        if model
        else None
    )
    max_rank = (
        offer.trainer_config.lora.max_rank
        if offer and offer.trainer_config and offer.trainer_config.lora
        else None
    )
    if max_rank is not None and lora["rank"] > max_rank:
        return [CheckFailure("lora_config.rank", f"rank {lora['rank']} exceeds the max_rank {max_rank} of "
                                                 f"{facts['base_model']}. Use a rank of at most {max_rank}")]  # fmt: skip
    return []


def _to_request(inputs: Mapping[str, Any]) -> TrainingSessionCreateRequest:
    body = pick(inputs, _REPLACE_ON_CHANGES)
    if inputs.get("display_name"):
        body["display_name"] = inputs["display_name"]
    wandb = {k: v for k, v in ((inputs.get("metadata") or {}).get("wandb") or {}).items() if v}
    if wandb:
        body["metadata"] = {"wandb": wandb}
    return TrainingSessionCreateRequest.model_validate(body)


def _to_outputs(inputs: Mapping[str, Any], ts: WireTrainingSession) -> dict[str, Any]:
    """The state: declared inputs under their own names, then what the API reports."""
    return drop_none(
        {
            **pick(inputs, _INPUT_KEYS),
            "status": ts.status.short,
            "step": ts.step,
            "base_model": ts.base_model,
            "created_by": ts.created_by,
            "created_at": iso(ts.created_at),
            "updated_at": iso(ts.updated_at),
            "error": {"code": ts.error.code, "message": ts.error.message} if ts.error else None,
            "policy_state": ts.policy_state.model_dump(mode="json") if ts.policy_state else None,
            "inference_checkpoints": [c.model_dump(mode="json") for c in ts.inference_checkpoints],
            "training_checkpoints": [c.model_dump(mode="json") for c in ts.training_checkpoints],
            "effective_lora_config": ts.lora_config.to_wire() if ts.lora_config else None,
        }
    )


def _live_wandb(ts: WireTrainingSession) -> dict[str, str]:
    wandb = ts.metadata.wandb.to_wire() if ts.metadata and ts.metadata.wandb else {}
    return {k: v for k, v in wandb.items() if k in _WANDB_KEYS and v}


def _inputs_from_api(ts: WireTrainingSession) -> dict[str, Any]:
    """Inputs that describe an existing session (for ``.get()``, where nothing was declared)."""
    wandb = _live_wandb(ts)
    return drop_none(
        {
            "model_resources_id": ts.model_resources_id,
            "lora_config": ts.lora_config.to_wire() if ts.lora_config else None,
            "resume_from_checkpoint_id": ts.resume_from_checkpoint_id,
            "display_name": ts.display_name,
            "metadata": {"wandb": wandb} if wandb else None,
        }
    )


def _with_live_mutables(inputs: dict[str, Any], ts: WireTrainingSession) -> dict[str, Any]:
    """Declared inputs with ``display_name``/``metadata`` as they are now (drift shows at the next ``up``)."""
    inputs = dict(inputs)
    if (inputs.get("display_name") or "") != (ts.display_name or ""):
        inputs["display_name"] = ts.display_name or ""
    declared = {k: v for k, v in ((inputs.get("metadata") or {}).get("wandb") or {}).items() if v}
    live = _live_wandb(ts)
    if declared != live:
        inputs["metadata"] = {"wandb": live} if live else {}
    return inputs


def _patch(olds: Mapping[str, Any], news: Mapping[str, Any]) -> dict[str, Any]:
    """The PATCH body: only what changed; a removed display name or W&B key is sent as ``""`` to clear it."""
    body: dict[str, Any] = {}
    if (olds.get("display_name") or "") != (news.get("display_name") or ""):
        body["display_name"] = news.get("display_name") or ""
    old_w = (olds.get("metadata") or {}).get("wandb") or {}
    new_w = (news.get("metadata") or {}).get("wandb") or {}
    wandb = {k: new_w.get(k) or "" for k in _WANDB_KEYS if (old_w.get(k) or "") != (new_w.get(k) or "")}
    if wandb:
        body["metadata"] = {"wandb": wandb}
    return body


def _describe(id_: str):
    def describe(ts: WireTrainingSession | None) -> str:
        name = f" ({ts.display_name})" if ts is not None and ts.display_name else ""
        return f"{KIND} {short_id(id_)}{name}: {ts.status.short if ts else 'not found'}"

    return describe


def _wait_running(client: Any, id_: str, inputs: Mapping[str, Any]) -> WireTrainingSession:
    return wait(
        lambda: get_or_none(client.get_training_session, id_),
        done=lambda ts: ts is not None and ts.status == TrainingSessionStatus.RUNNING,
        failed=lambda ts: (
            ts is None or ts.status in SESSION_GONE or ts.status == TrainingSessionStatus.STOPPING
        ),
        describe=_describe(id_),
        timeout=inputs.get("create_timeout") or config.TRAINING_SESSION_CREATE_TIMEOUT,
        not_found_grace=NOT_FOUND_GRACE,  # a 404 just after the POST can be read-after-write lag
    )


def _adopt(inputs: dict[str, Any]) -> CreateResult:
    """Take over an existing active session: verify it, PATCH its name/metadata, wait for RUNNING."""
    id_ = inputs["adopt_id"]
    client = api_client("adopting", KIND, id_)
    try:
        live = get_or_none(client.get_training_session, id_)
        if live is None:
            raise ProviderError(
                "adopting",
                KIND,
                id_,
                "it does not exist",
                f"Check adopt_id (GET {_PATH}), or remove it to create a new one",
            )
        if live.status not in (TrainingSessionStatus.CREATING, TrainingSessionStatus.RUNNING):
            raise ProviderError("adopting", KIND, id_, f"it is {live.status.short}", "Only a CREATING or RUNNING "
                                "session can be adopted: remove adopt_id to create a new one")  # fmt: skip
        mismatched = _mismatches(inputs, live)
        if mismatched:
            raise ProviderError("adopting", KIND, id_, f"its settings differ from the declared inputs: "
                                f"{'; '.join(mismatched)}", "Declare the inputs it was created with, or remove "
                                "adopt_id to create a new one")  # fmt: skip
        patch = _patch(_inputs_from_api(live), inputs)
        if patch:
            client.update_training_session(id_, TrainingSessionUpdateRequest.model_validate(patch))
        running = _wait_running(client, id_, inputs)  # not ours to stop on failure: it existed before
    except ProviderError:
        raise
    except Exception as exc:
        raise ProviderError("adopting", KIND, id_, *explain(exc, "adopting")) from exc
    return CreateResult(id_, _to_outputs(inputs, running))


def _mismatches(inputs: Mapping[str, Any], ts: WireTrainingSession) -> list[str]:
    out = []
    if inputs.get("model_resources_id") != ts.model_resources_id:
        out.append(
            f"model_resources_id (declared {inputs.get('model_resources_id')!r}, actual {ts.model_resources_id!r})"
        )
    effective = ts.lora_config.to_wire() if ts.lora_config else {}
    for key, value in (inputs.get("lora_config") or {}).items():
        if canonical(effective.get(key)) != canonical(value):
            out.append(f"lora_config.{key} (declared {value!r}, actual {effective.get(key)!r})")
    declared_ckpt = inputs.get("resume_from_checkpoint_id")
    if declared_ckpt is not None and declared_ckpt != ts.resume_from_checkpoint_id:
        out.append(
            f"resume_from_checkpoint_id (declared {declared_ckpt!r}, actual {ts.resume_from_checkpoint_id!r})"
        )
    return out
