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
from ..client import errors
from ..client.matching import session_differences
from ..client.models import (
    RESOURCE_GONE,
    SESSION_GONE,
    TrainingSessionCreateRequest,
    TrainingSessionStatus,
    TrainingSessionUpdateRequest,
)
from ..client.models import TrainingSession as WireTrainingSession
from . import _lookups as lookups
from ._base import api_client, needs_remote_check, remote_check
from ._errors import ProviderError, explain
from ._inputs import (
    ID_MAX,
    OWNER_KEY,
    Id,
    Name,
    PathId,
    StrictInputs,
    WholeInt,
    answers_the_input,
    drop_none,
    id_prefix,
    is_unknown,
    iso,
    pick,
    refused_at_check,
    short_id,
    text,
)
from ._lifecycle import NOT_FOUND_GRACE, get_or_none, wait
from ._lookups import supported_models
from ._transactions import Kind, adopted

KIND = "training session"
_PATH = "/v1/rl/training-sessions"
_RESOURCES = "/v1/rl/model-resources"

_REPLACE_ON_CHANGES = ("model_resources_id", "lora_config", "resume_from_checkpoint_id", "load_optimizer")
_UPDATE_IN_PLACE = ("display_name", "metadata", "create_timeout", "delete_timeout", "adopt_id")
# Set by TrainingSession from `model_resource=`: that resource's declared base_model, compute_config and
# lora_enabled, for check to validate against while its id is unknown. Diff never looks at it (a change of the
# resource replaces it, so its id changes).
_SPEC_KEY = "model_resource_spec"
_INPUT_KEYS = (*_REPLACE_ON_CHANGES, *_UPDATE_IN_PLACE, _SPEC_KEY, OWNER_KEY)
_REMOTE_CHECK_KEYS = (*_REPLACE_ON_CHANGES, _SPEC_KEY)  # new, or one of these changed: ask the API again
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
# Pulumi carries any double, inf included, and a timeout reaches a wait: each is finite and bounded.
_TIMEOUT_MAX = 24 * 3600  # 86400 s: a session starts (or stops) in minutes; a day is plenty for either
_DisplayName = text(max_length=_DISPLAY_NAME_MAX)


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


class _Inputs(StrictInputs):
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


_HINTS = {
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


def _check_remote(olds: Mapping[str, Any], inputs: dict[str, Any]) -> list[CheckFailure]:
    """The remote part of check, for a new session or a replacing change: the model resource exists and is
    active (or, created in the same change, its declared inputs), LoRA only on a LoRA resource, rank within the
    model's ``max_rank``, and ``adopt_id`` names an active session on that resource with the same settings."""
    if not needs_remote_check(olds, inputs, _REMOTE_CHECK_KEYS):
        return []
    adopt_id = inputs.get("adopt_id")
    # Warnings name the session; an adopt_id only by its first characters (it is the user's, maybe mistyped).
    ident = inputs.get("display_name") or (id_prefix(adopt_id) if isinstance(adopt_id, str) else "new")
    return remote_check(KIND, ident, lambda client: _ask(client, inputs)) or []


def _ask(client: Any, inputs: Mapping[str, Any]) -> list[CheckFailure]:
    resource_id = inputs.get("model_resources_id")
    if isinstance(resource_id, str) and not is_unknown(resource_id):
        # The id is quoted by its first characters only (id_prefix), the request with a placeholder for it.
        quoted = id_prefix(resource_id)
        try:
            live = lookups.model_resource(client, resource_id)
        except errors.NotFound:
            return [CheckFailure("model_resources_id", f"no model resource {quoted} exists (GET "
                                 f"{_RESOURCES}/<model_resources_id> answered 404). "
                                 f"{_HINTS['model_resources_id']}")]  # fmt: skip
        except errors.ApiError as exc:
            if not answers_the_input(exc):
                raise
            return [refused_at_check("model_resources_id", f"GET {_RESOURCES}/<model_resources_id>", exc,
                                     "Check model_resources_id (the id of an existing model resource), or use "
                                     "model_resource=ModelResource(...) for one of this program")]  # fmt: skip
        if live.status in RESOURCE_GONE:
            return [CheckFailure("model_resources_id", f"model resource {quoted} is {live.status.short}: "
                                 "no session can start on it. Point it at an active resource, or create one "
                                 "with model_resource=ModelResource(...)")]  # fmt: skip
        where = f"model resource {quoted}"
        facts = {"base_model": live.base_model, "lora_enabled": live.lora_enabled,
                 "gpu_type": live.compute_config.gpu_type.value if live.compute_config.gpu_type else None}  # fmt: skip
    else:
        spec = inputs.get(_SPEC_KEY) or {}
        compute = spec.get("compute_config") if isinstance(spec.get("compute_config"), dict) else {}
        where = "the model resource given as model_resource"
        facts = {"base_model": spec.get("base_model"), "lora_enabled": spec.get("lora_enabled", True),
                 "gpu_type": compute.get("gpu_type")}  # fmt: skip
    failures = _check_lora(client, inputs.get("lora_config"), facts, where)
    adopt_id = inputs.get("adopt_id")
    if not failures and isinstance(adopt_id, str):
        failures = _check_adoptable(client, adopt_id, inputs, facts)
    return failures


def _check_lora(client: Any, lora: Any, facts: Mapping[str, Any], where: str) -> list[CheckFailure]:
    """LoRA settings only on a LoRA resource, and a rank within the model's ``max_rank`` on its GPU type."""
    if not isinstance(lora, dict):
        return []
    if facts["lora_enabled"] is False:
        return [CheckFailure("lora_config", f"{where} is full-weight (lora_enabled=false). Remove lora_config, "
                                            "or use a LoRA model resource")]  # fmt: skip
    rank, base_model = lora.get("rank"), facts["base_model"]
    if not isinstance(rank, int) or not isinstance(base_model, str) or is_unknown(base_model):
        return []
    try:
        models = supported_models(client)
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
        return [CheckFailure("lora_config.rank", f"rank {rank} exceeds the max_rank {max_rank} of {base_model} "
                                                 f"on {gpu}. Use a rank of at most {max_rank}")]  # fmt: skip
    return []


def _check_adoptable(
    client: Any, adopt_id: str, inputs: Mapping[str, Any], facts: Mapping[str, Any]
) -> list[CheckFailure]:
    """``adopt_id`` names a CREATING/RUNNING session on the declared resource, created with these settings."""
    # The id is quoted by its first characters only (id_prefix), the request with a placeholder for it.
    quoted = id_prefix(adopt_id)
    try:
        live = lookups.training_session(client, adopt_id)
    except errors.NotFound:
        return [CheckFailure("adopt_id", f"no training session {quoted} exists (GET {_PATH}/<adopt_id> "
                                         "answered 404). Check adopt_id, or remove it to create a new one")]  # fmt: skip
    except errors.ApiError as exc:
        if not answers_the_input(exc):
            raise
        return [refused_at_check("adopt_id", f"GET {_PATH}/<adopt_id>", exc, "Check adopt_id (the id of an "
                                 "existing training session), or remove it to create a new one")]  # fmt: skip
    if live.status not in (TrainingSessionStatus.CREATING, TrainingSessionStatus.RUNNING):
        return [CheckFailure("adopt_id", f"training session {quoted} is {live.status.short}: only a CREATING "
                                         "or RUNNING session can be adopted. Remove adopt_id to create a new one")]  # fmt: skip
    declared = dict(inputs)
    if is_unknown(declared.get("model_resources_id")):  # a resource of this change: compare its model instead
        declared["model_resources_id"] = live.model_resources_id
        if isinstance(facts["base_model"], str) and facts["base_model"] != live.base_model:
            return [CheckFailure("adopt_id", f"training session {quoted} runs on another base model than the "
                                             "model resource given as model_resource. Remove adopt_id, or "
                                             "adopt it onto its own model resource")]  # fmt: skip
    mismatched = [m.split(" (", 1)[0] for m in _mismatches(declared, live)]  # field names only: no values
    if mismatched:
        return [CheckFailure("adopt_id", f"training session {quoted} was created with other settings: "
                                         f"{', '.join(mismatched)} differ. Declare the inputs it was created "
                                         "with, or remove adopt_id to create a new one")]  # fmt: skip
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


def _wait_running(client: Any, first: WireTrainingSession, inputs: Mapping[str, Any]) -> WireTrainingSession:
    """Wait for RUNNING, starting from ``first`` (the create's answer, or the adopted session)."""
    id_ = first.id
    return wait(
        client,
        KIND,
        id_,
        first=first,
        done=lambda ts: ts is not None and ts.status == TrainingSessionStatus.RUNNING,
        failed=lambda ts: (
            ts is None or ts.status in SESSION_GONE or ts.status == TrainingSessionStatus.STOPPING
        ),
        describe=_describe(id_),
        timeout=inputs.get("create_timeout") or config.TRAINING_SESSION_CREATE_TIMEOUT,
        not_found_grace=NOT_FOUND_GRACE,  # a 404 just after the POST can be read-after-write lag
        limit="create_timeout",
    )


def _adopt(inputs: dict[str, Any], lifecycle: Kind) -> CreateResult:
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
            live = client.update_training_session(id_, TrainingSessionUpdateRequest.model_validate(patch))
        running = _wait_running(client, live, inputs)  # not ours to stop on failure: it existed before
    except ProviderError:
        raise
    except Exception as exc:
        raise ProviderError("adopting", KIND, id_, *explain(exc, "adopting")) from exc
    adopted(lifecycle, client, _to_request(inputs), inputs.get(OWNER_KEY), id_)
    return CreateResult(id_, _to_outputs(inputs, running))


def _mismatches(inputs: Mapping[str, Any], ts: WireTrainingSession) -> list[str]:
    """Where ``ts`` differs from the declared inputs (``adopt_id``: only what is declared is held against it;
    the one rule is :func:`~..client.matching.session_differences`)."""
    known = {k: v for k, v in inputs.items() if not is_unknown(v)}
    return [str(d) for d in session_differences(_to_request(known), ts)]
