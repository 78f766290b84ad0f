"""TrainingSession: a Together RL training session on a model resource, as a Pulumi dynamic resource.

Lifecycle
    check    at preview, for a new session or a replacing change: the model resource exists and is active
             (``model_resources_id``), or, given as ``model_resource`` and new in the same change, its declared
             inputs; LoRA settings only on a LoRA resource; rank <= the model's ``max_rank`` on its GPU type;
             ``adopt_id`` names a CREATING/RUNNING session with the declared settings. A 404 is a failure
             naming the field; no key, or an API that cannot be asked: warn and skip.
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

from typing import Any, TypedDict

import pulumi
import pulumi.dynamic

from .face import KindProvider, declared_props
from .keys import DISPLAY_NAME_MAX, SPEC_KEY
from .model_resource import ModelResource


class LoraConfigArgs(TypedDict, total=False):
    """LoRA adapter settings (only on a LoRA model resource). Unset keys take the API defaults."""

    rank: pulumi.Input[int]
    """1-64 (and at most the model's ``max_rank``); API default 32."""
    alpha: pulumi.Input[int]
    """1-128; API default 64."""
    dropout: pulumi.Input[float]
    """0 <= dropout < 1; API default 0."""
    seed: pulumi.Input[int]
    """Adapter initialisation seed, a whole number within ±2**53 (Pulumi carries numbers as doubles)."""
    train_unembed: pulumi.Input[bool]
    """Also train an adapter on the output head; API default true."""


class WandbMetadataArgs(TypedDict, total=False):
    """Weights & Biases bookkeeping (Together never writes to W&B). All optional strings without control
    characters (newlines, tabs, escape sequences); a key removed later is cleared on the session."""

    entity: pulumi.Input[str]
    """The W&B entity (user or team) the run belongs to."""
    project: pulumi.Input[str]
    """The W&B project of the run."""
    group: pulumi.Input[str]
    """The W&B run group."""
    run_id: pulumi.Input[str]
    """The W&B run id."""
    run_name: pulumi.Input[str]
    """The W&B run's display name."""
    url: pulumi.Input[str]
    """HTTPS URL of the run."""


class SessionMetadataArgs(TypedDict, total=False):
    """Metadata of a training session; updates in place."""

    wandb: pulumi.Input[WandbMetadataArgs]
    """Weights & Biases bookkeeping ``{entity, project, group, run_id, run_name, url}``."""


class TrainingSessionArgs:
    """Inputs of a :class:`TrainingSession`. ``display_name`` and ``metadata`` update in place; the rest replace.

    Name the model resource with exactly one of ``model_resource`` (a :class:`ModelResource` of this program)
    or ``model_resources_id`` (the id of one made elsewhere).

    ``check`` (at preview) holds every input to the bounds given here: numbers finite and within their range,
    strings free of control characters (newlines, tabs, escape sequences), ids at most 256 characters."""

    model_resource: ModelResource | None
    """The :class:`ModelResource` of this program to run on. Preferred: ``pulumi preview`` then validates the
    session against that resource's declared inputs (LoRA vs full weight, rank <= the model's ``max_rank``)
    even while the resource is new and its id unknown. Replaces (when the resource is replaced)."""
    model_resources_id: pulumi.Input[str] | None
    """The id of an existing model resource made outside this program (at most 256 characters). Preview checks
    it exists and is active. Replaces."""
    lora_config: pulumi.Input[LoraConfigArgs] | None
    """LoRA settings ``{rank, alpha, dropout, seed, train_unembed}``; LoRA resources only. Replaces."""
    resume_from_checkpoint_id: pulumi.Input[str] | None
    """Start from this checkpoint (its id, at most 256 characters). Replaces."""
    load_optimizer: pulumi.Input[bool] | None
    """With a training checkpoint: restore optimizer state and step (API default true). Replaces."""
    display_name: pulumi.Input[str] | None
    """Name shown in Together's dashboard, at most 128 characters, no control characters. Defaults to the
    Pulumi resource name; ``""`` for none. Updates in place."""
    metadata: pulumi.Input[SessionMetadataArgs] | None
    """``{"wandb": {entity, project, group, run_id, run_name, url}}``. Updates in place; a removed key is cleared."""
    create_timeout: pulumi.Input[float] | None
    """Provider option: seconds to wait for RUNNING, more than 0 and at most 86400 (1 day); default 1800. On
    timeout the session is stopped."""
    delete_timeout: pulumi.Input[float] | None
    """Provider option: seconds to wait for the session to release its slot on delete, more than 0 and at most
    86400 (1 day); default 600."""
    adopt_id: pulumi.Input[str] | None
    """Provider option: id of an existing CREATING/RUNNING session to take over instead of creating one (at
    most 256 characters)."""
    stop_after: pulumi.Input[str] | None
    """A deadline: this session must not run past it. A duration from its creation (``"8h"``, ``"90m"``,
    ``"1d12h"``; 1 minute to 30 days) or an RFC 3339 time with its zone (``"2026-12-24T18:00:00Z"``, at most 30
    days ahead). Past it the session is stopped and stays stopped (``stop_reason``): by ``pulumi up``, by a
    create still waiting for RUNNING, or by ``python -m pulumi_together_rl reap --stop`` run on a schedule with
    no other command. Its model resource is not stopped. Moving it updates in place while it is ahead, and
    replaces the session (a new one, with the new deadline) once it has passed."""

    def __init__(
        self,
        model_resources_id: pulumi.Input[str] | None = None,
        lora_config: pulumi.Input[LoraConfigArgs] | None = None,
        resume_from_checkpoint_id: pulumi.Input[str] | None = None,
        load_optimizer: pulumi.Input[bool] | None = None,
        display_name: pulumi.Input[str] | None = None,
        metadata: pulumi.Input[SessionMetadataArgs] | None = None,
        create_timeout: pulumi.Input[float] | None = None,
        delete_timeout: pulumi.Input[float] | None = None,
        adopt_id: pulumi.Input[str] | None = None,
        model_resource: ModelResource | None = None,
        stop_after: pulumi.Input[str] | None = None,
    ) -> None:
        self.model_resource = model_resource
        self.model_resources_id = model_resources_id
        self.lora_config = lora_config
        self.resume_from_checkpoint_id = resume_from_checkpoint_id
        self.load_optimizer = load_optimizer
        self.display_name = display_name
        self.metadata = metadata
        self.create_timeout = create_timeout
        self.delete_timeout = delete_timeout
        self.adopt_id = adopt_id
        self.stop_after = stop_after


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
    stop_after: pulumi.Output[str | None]
    """The declared deadline (see ``stop_at``)."""
    stop_at: pulumi.Output[str | None]
    """The deadline as an RFC 3339 time (a duration counted from ``created_at``); unset without one."""
    stop_reason: pulumi.Output[str | None]
    """``"deadline"`` once the session was stopped at its deadline (it then stays stopped); unset otherwise."""
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
    """Inference checkpoints ``[{id, created_at, step}]``, as of the last read; an entry has ``registration`` too
    where the API gives one (its shape varies with the API's version)."""
    training_checkpoints: pulumi.Output[list[dict[str, Any]]]
    """Training checkpoints ``[{id, created_at, step}]``, as of the last read; an entry has ``registration`` too
    where the API gives one (its shape varies with the API's version)."""
    latest_training_checkpoint_id: pulumi.Output[str | None]
    """The newest training checkpoint's id (what ``resume_from_checkpoint_id`` of another session takes), as of
    the last read; unset until the session saves one. A new checkpoint is never a diff."""
    latest_training_checkpoint_step: pulumi.Output[int | None]
    """The step the newest training checkpoint was saved at, as of the last read."""
    latest_inference_checkpoint_id: pulumi.Output[str | None]
    """The newest inference checkpoint's id (a model to serve), as of the last read."""
    latest_inference_checkpoint_step: pulumi.Output[int | None]
    """The step the newest inference checkpoint was saved at, as of the last read."""
    effective_lora_config: pulumi.Output[dict[str, Any] | None]
    """The LoRA settings the API applies, defaults filled in (absent on a full-weight resource)."""
    model_resource_spec: pulumi.Output[dict[str, Any] | None]
    """With ``model_resource``: that resource's declared ``base_model``, ``compute_config`` and
    ``lora_enabled``, which ``check`` validates the session against at preview."""
    owner: pulumi.Output[str]
    """The declaration that made it: ``org/project/stack/name``, from the program. The create journal records
    it, so that only this declaration takes over what an interrupted create of it made. Never causes a diff."""

    def __init__(
        self,
        resource_name: str,
        args: TrainingSessionArgs | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        props = declared_props(TrainingSession, args, resource_name)
        resource = getattr(args, "model_resource", None)
        if args is not None and (resource is None) == (args.model_resources_id is None):
            # A program error, raised before anything is registered (the provider never sees it).
            raise TypeError(
                f"TrainingSession {resource_name!r}: set exactly one of model_resource (a ModelResource of "
                "this program) or model_resources_id (the id of a model resource made elsewhere)"
            )
        if resource is not None:
            props["model_resources_id"] = resource.id
            props[SPEC_KEY] = getattr(resource, "_declared", None)  # None for ModelResource.get(...)
        if args is not None and props["display_name"] is None:
            # The provider never sees the resource name; the API takes at most 128 characters.
            props["display_name"] = resource_name[:DISPLAY_NAME_MAX]
        super().__init__(_TrainingSessionProvider(), resource_name, props, opts)

    @staticmethod
    def get(
        resource_name: str, id: pulumi.Input[str], opts: pulumi.ResourceOptions | None = None
    ) -> TrainingSession:
        """Read an existing training session by id (its inputs are taken from the API)."""
        return TrainingSession(
            resource_name, None, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(id=id))
        )


class _TrainingSessionProvider(KindProvider):
    """The dynamic provider behind :class:`TrainingSession`: the shared lifecycle over :data:`TRAINING_SESSION`.
    This module and class name are pickled into every stack's state (``__provider``): they must not move."""

    schema_at = "pulumi_together_rl.resources.training_session_schema:TRAINING_SESSION"
    checks_at = "pulumi_together_rl.resources.training_session_checks:check"
