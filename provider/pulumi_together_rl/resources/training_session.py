"""TrainingSession: a Together RL training session on a model resource, as a Pulumi dynamic resource.

Lifecycle
    create   ``POST /v1/rl/training-sessions`` (through the client, whose reconciliation guarantees one logical
             create never makes two sessions), then wait until RUNNING with progress on stderr. ERROR fails at
             once with the API's error code and message. Any failure after the POST stops the session (best
             effort, logged) and raises an error naming its id. A 404 just after the POST is read-after-write
             lag (``NOT_FOUND_GRACE``), not a failure.
    read     ``GET``; a 404 or a STOPPED / EXPIRED / ERROR session is reported as gone, so the next
             ``pulumi up`` recreates it (sessions expire with their resource). ``display_name`` and
             ``metadata`` changed outside Pulumi are brought into the state, so the next ``up`` puts them back.
    update   ``PATCH`` with only the changed fields; a ``display_name`` or W&B key the user removed is sent as
             ``""`` (omitting it would keep the old value). Changing only provider options calls nothing.
    delete   stop, then wait until the LoRA slot is free (STOPPED / ERROR / EXPIRED; STOPPING still holds it).
             404 or already stopped = done; a stop refused with 409/400 is judged by the session's state.

Replacement
    ``display_name`` and ``metadata`` change in place; ``model_resources_id``, ``lora_config``,
    ``resume_from_checkpoint_id`` and ``load_optimizer`` force replacement, which is **delete-before-replace**:
    a full-weight resource takes a single session, and a LoRA resource has a small session cap, so the old
    session must release its slot before the new one can start.

Defaults and provider options
    ``display_name`` defaults to the Pulumi resource name (filled in by :class:`TrainingSession` at
    construction, since the provider never learns the name), so sessions are recognisable in Together's
    dashboard; pass ``display_name=""`` for none. ``create_timeout`` (default 1800 s), ``delete_timeout``
    (600 s) and ``adopt_id`` never replace. ``adopt_id`` takes over an existing CREATING/RUNNING session: its
    ``model_resources_id``, declared ``lora_config`` fields and ``resume_from_checkpoint_id`` must match (else a
    clear error names the fields); its ``display_name`` and ``metadata`` are then PATCHed to the declared values,
    and create waits for RUNNING. A failed adopt never stops the session. Remove ``adopt_id`` before a change
    that replaces the session (the replacement would otherwise try to adopt the stopped original).

Keys in the state
    Inputs are echoed under their own names as declared; the API's view of the LoRA adapter goes to
    ``effective_lora_config`` (server defaults such as rank 32 never show up as a diff). ``status`` holds the
    short name (``RUNNING``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict
from urllib.parse import urlsplit

import pulumi
import pulumi.dynamic
from pulumi.dynamic import CheckFailure, CheckResult, CreateResult, DiffResult, ReadResult, UpdateResult
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictStr, field_validator

from .. import config
from ..client import errors
from ..client.models import (
    SESSION_GONE,
    TrainingSessionCreateRequest,
    TrainingSessionStatus,
    TrainingSessionUpdateRequest,
)
from ..client.models import TrainingSession as WireTrainingSession
from ._base import (
    NOT_FOUND_GRACE,
    BaseProvider,
    ProviderError,
    WholeInt,
    abandon,
    api_client,
    canonical,
    changed_keys,
    diff_inputs,
    drop_none,
    explain,
    get_or_none,
    iso,
    log,
    look_after_refused_stop,
    needs_remote_check,
    pick,
    remote_check,
    resource_facts,
    short_id,
    supported_models,
    validate_inputs,
    wait,
)

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


class LoraConfigArgs(TypedDict, total=False):
    """LoRA adapter settings (only on a LoRA model resource). Unset keys take the API defaults."""

    rank: int
    """1-64 (and at most the model's ``max_rank``); API default 32."""
    alpha: int
    """1-128; API default 64."""
    dropout: float
    """0 <= dropout < 1; API default 0."""
    seed: int
    """Adapter initialisation seed, a whole number within ±2**53 (Pulumi carries numbers as doubles)."""
    train_unembed: bool
    """Also train an adapter on the output head; API default true."""


class WandbMetadataArgs(TypedDict, total=False):
    """Weights & Biases bookkeeping (Together never writes to W&B). All optional strings; a key removed later
    is cleared on the session."""

    entity: str
    """The W&B entity (user or team) the run belongs to."""
    project: str
    """The W&B project of the run."""
    group: str
    """The W&B run group."""
    run_id: str
    """The W&B run id."""
    run_name: str
    """The W&B run's display name."""
    url: str
    """HTTPS URL of the run."""


class SessionMetadataArgs(TypedDict, total=False):
    """Metadata of a training session; updates in place."""

    wandb: WandbMetadataArgs
    """Weights & Biases bookkeeping ``{entity, project, group, run_id, run_name, url}``."""


class TrainingSessionArgs:
    """Inputs of a :class:`TrainingSession`. ``display_name`` and ``metadata`` update in place; the rest replace."""

    model_resources_id: pulumi.Input[str]
    """Required. The model resource to run on, usually ``ModelResource(...).id``."""
    lora_config: pulumi.Input[LoraConfigArgs] | None
    """LoRA settings ``{rank, alpha, dropout, seed, train_unembed}``; LoRA resources only. Replaces."""
    resume_from_checkpoint_id: pulumi.Input[str] | None
    """Start from this checkpoint. Replaces."""
    load_optimizer: pulumi.Input[bool] | None
    """With a training checkpoint: restore optimizer state and step (API default true). Replaces."""
    display_name: pulumi.Input[str] | None
    """Name shown in Together's dashboard, at most 128 characters. Defaults to the Pulumi resource name;
    ``""`` for none. Updates in place."""
    metadata: pulumi.Input[SessionMetadataArgs] | None
    """``{"wandb": {entity, project, group, run_id, run_name, url}}``. Updates in place; a removed key is cleared."""
    create_timeout: pulumi.Input[float] | None
    """Provider option: seconds to wait for RUNNING (default 1800). On timeout the session is stopped."""
    delete_timeout: pulumi.Input[float] | None
    """Provider option: seconds to wait for the session to release its slot on delete (default 600)."""
    adopt_id: pulumi.Input[str] | None
    """Provider option: id of an existing CREATING/RUNNING session to take over instead of creating one."""

    def __init__(
        self,
        model_resources_id: pulumi.Input[str],
        lora_config: pulumi.Input[LoraConfigArgs] | None = None,
        resume_from_checkpoint_id: pulumi.Input[str] | None = None,
        load_optimizer: pulumi.Input[bool] | None = None,
        display_name: pulumi.Input[str] | None = None,
        metadata: pulumi.Input[SessionMetadataArgs] | None = None,
        create_timeout: pulumi.Input[float] | None = None,
        delete_timeout: pulumi.Input[float] | None = None,
        adopt_id: pulumi.Input[str] | None = None,
    ) -> None:
        self.model_resources_id = model_resources_id
        self.lora_config = lora_config
        self.resume_from_checkpoint_id = resume_from_checkpoint_id
        self.load_optimizer = load_optimizer
        self.display_name = display_name
        self.metadata = metadata
        self.create_timeout = create_timeout
        self.delete_timeout = delete_timeout
        self.adopt_id = adopt_id


class TrainingSession(pulumi.dynamic.Resource, module="together", name="TrainingSession"):
    """A Together RL training session. Type token ``pulumi-python:dynamic/together:TrainingSession``."""

    model_resources_id: pulumi.Output[str]
    """The model resource the session runs on."""
    lora_config: pulumi.Output[dict[str, Any] | None]
    """The declared LoRA settings (see ``effective_lora_config``)."""
    resume_from_checkpoint_id: pulumi.Output[str | None]
    """The declared checkpoint to resume from."""
    load_optimizer: pulumi.Output[bool | None]
    """The declared ``load_optimizer``."""
    display_name: pulumi.Output[str | None]
    """The display name (the Pulumi resource name unless declared)."""
    metadata: pulumi.Output[dict[str, Any] | None]
    """The declared W&B metadata."""
    create_timeout: pulumi.Output[float | None]
    """Provider option, as declared."""
    delete_timeout: pulumi.Output[float | None]
    """Provider option, as declared."""
    adopt_id: pulumi.Output[str | None]
    """Provider option, as declared."""
    status: pulumi.Output[str]
    """Short status: CREATING, RUNNING (after create), STOPPING, STOPPED, ERROR or EXPIRED."""
    step: pulumi.Output[int]
    """Optimizer-step counter, as of the last create/update/refresh."""
    base_model: pulumi.Output[str]
    """The base model, inherited from the model resource."""
    created_by: pulumi.Output[str]
    """User id of the creator."""
    created_at: pulumi.Output[str]
    """RFC 3339 creation time."""
    updated_at: pulumi.Output[str]
    """RFC 3339 time of the last change, as of the last create/update/refresh."""
    error: pulumi.Output[dict[str, str] | None]
    """``{"code", "message"}`` when the session is in ERROR."""
    policy_state: pulumi.Output[dict[str, Any] | None]
    """``{trainer_step, target_weights_version, applied_weights_version, pending_publish}``."""
    inference_checkpoints: pulumi.Output[list[dict[str, Any]]]
    """Inference checkpoints ``[{id, created_at, step, registration}]``, as of the last read."""
    training_checkpoints: pulumi.Output[list[dict[str, Any]]]
    """Training checkpoints ``[{id, created_at, step, registration}]``, as of the last read."""
    effective_lora_config: pulumi.Output[dict[str, Any] | None]
    """The LoRA settings the API applies, defaults filled in (absent on a full-weight resource)."""

    def __init__(
        self,
        resource_name: str,
        args: TrainingSessionArgs | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        props: dict[str, Any] = {key: getattr(args, key, None) for key in _INPUT_KEYS}
        if args is not None and props["display_name"] is None:
            # The provider never sees the resource name; the API takes at most 128 characters.
            props["display_name"] = resource_name[:_DISPLAY_NAME_MAX]
        props.update(dict.fromkeys(_OUTPUT_KEYS))
        super().__init__(_TrainingSessionProvider(), resource_name, props, opts)

    @staticmethod
    def get(
        resource_name: str, id: pulumi.Input[str], opts: pulumi.ResourceOptions | None = None
    ) -> TrainingSession:
        """Read an existing training session by id (its inputs are taken from the API)."""
        return TrainingSession(
            resource_name, None, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(id=id))
        )


class _TrainingSessionProvider(BaseProvider):
    """The dynamic provider behind :class:`TrainingSession` (stateless; pickled by reference)."""

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        inputs, failures = validate_inputs(_Inputs, news, required=("model_resources_id",), hints=_HINTS)
        if not failures and needs_remote_check(olds, inputs, _REMOTE_CHECK_KEYS):
            failures = _check_against_resource(inputs)
        return CheckResult(inputs, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return diff_inputs(
            olds, news, replace_on_changes=_REPLACE_ON_CHANGES, update_in_place=_UPDATE_IN_PLACE
        )

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = pick(props, _INPUT_KEYS)
        if inputs.get("adopt_id"):
            return _adopt(inputs)
        ident = inputs.get("display_name") or inputs.get("model_resources_id")
        client = api_client("creating", KIND, ident)
        try:
            created = client.create_training_session(_to_request(inputs))
        except Exception as exc:
            raise ProviderError("creating", KIND, ident, *explain(exc, "creating")) from exc
        log(f"{KIND} {created.id}: created ({created.status.short}); waiting for RUNNING")
        try:
            running = _wait_running(client, created.id, inputs)
            # Inside the try: nothing after the POST may leave the object running and unrecorded.
            outputs = _to_outputs(inputs, running)
        except BaseException as exc:
            abandon(
                "creating",
                KIND,
                created.id,
                exc,
                stop=lambda: client.stop_training_session(created.id),
                fetch=lambda: get_or_none(client.get_training_session, created.id),
                gone=lambda ts: ts.status in SESSION_GONE,
                path=_PATH,
                stopped_note="the session is over; its model resource is not affected (it bills until destroyed)",
            )
        return CreateResult(created.id, outputs)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        client = api_client("reading", KIND, id_)
        try:
            live = get_or_none(client.get_training_session, id_)
        except Exception as exc:
            raise ProviderError("reading", KIND, id_, *explain(exc)) from exc
        if live is None or live.status in SESSION_GONE:
            state = "not found" if live is None else live.status.short
            log(
                f"{KIND} {id_} is {state}: dropping it from the state; the next `pulumi up` creates a new one"
            )
            return ReadResult("", {})
        if props.get("model_resources_id") is None:  # `.get()`: nothing declared, describe what exists
            inputs = _inputs_from_api(live)
        else:
            inputs = _with_live_mutables(pick(props, _INPUT_KEYS), live)
        return ReadResult(id_, _to_outputs(inputs, live), inputs=inputs)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        immutable = changed_keys(olds, news, _REPLACE_ON_CHANGES)
        if immutable:
            raise ProviderError(
                "updating", KIND, id_, f"{', '.join(immutable)} cannot change in place", "Replace the session"
            )
        inputs = pick(news, _INPUT_KEYS)
        patch = _patch(olds, news)
        if not patch:  # only provider options changed: no API call
            return UpdateResult({**inputs, **{k: v for k, v in olds.items() if k in _OUTPUT_KEYS}})
        client = api_client("updating", KIND, id_)
        try:
            updated = client.update_training_session(id_, TrainingSessionUpdateRequest.model_validate(patch))
        except Exception as exc:
            raise ProviderError("updating", KIND, id_, *explain(exc)) from exc
        return UpdateResult(_to_outputs(inputs, updated))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        client = api_client("deleting", KIND, id_)
        fetch = lambda: get_or_none(client.get_training_session, id_)  # noqa: E731
        try:
            client.stop_training_session(id_)
        except errors.NotFound:
            log(f"{KIND} {id_}: already gone")
            return
        except (errors.Conflict, errors.BadRequest) as exc:
            # Perhaps it is stopped already: judged by its state, never by the message.
            live = look_after_refused_stop("deleting", KIND, id_, fetch, exc)
            if live is not None and live.status not in SESSION_GONE:
                if live.status != TrainingSessionStatus.STOPPING:
                    raise ProviderError("deleting", KIND, id_, *explain(exc, "deleting")) from exc
                log(f"{KIND} {id_}: the API refused the stop (HTTP {exc.status}): it is STOPPING already")
            else:
                state = "not found" if live is None else live.status.short
                log(
                    f"{KIND} {id_}: the API refused the stop (HTTP {exc.status}) because it is already {state}: done"
                )
                return
        except Exception as exc:
            raise ProviderError("deleting", KIND, id_, *explain(exc, "deleting")) from exc
        try:
            wait(
                fetch,
                done=lambda ts: ts is None or ts.status in SESSION_GONE,
                failed=lambda ts: False,
                describe=_describe(id_),
                timeout=props.get("delete_timeout") or config.TRAINING_SESSION_DELETE_TIMEOUT,
            )
        except Exception as exc:
            cause, _ = explain(exc, "deleting")
            raise ProviderError(
                "deleting",
                KIND,
                id_,
                cause,
                "Its slot is still held: raise delete_timeout and run `pulumi destroy` (or `pulumi up`) again",
            ) from exc


# ---------------------------------------------------------------------------------------------- helpers


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _LoraConfig(_Strict):
    rank: WholeInt | None = Field(None, ge=1, le=64)
    alpha: WholeInt | None = Field(None, ge=1, le=128)
    dropout: StrictFloat | None = Field(None, ge=0, lt=1)
    seed: WholeInt | None = Field(None, ge=-_SEED_LIMIT, le=_SEED_LIMIT)
    train_unembed: StrictBool | None = None


class _Wandb(_Strict):
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


class _Metadata(_Strict):
    wandb: _Wandb | None = None


class _Inputs(_Strict):
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
